"""Durable plans on PostgreSQL: a plan pauses in one process and finishes in another.

An agent (``create_agent`` + ``ToolsPlannerMiddleware``) checkpoints into PostgreSQL with
``PostgresSaver``. Its plan ships two crates, then asks a dispatcher (a tool that calls
``interrupt()``), then ships a third. The first process runs until that question and exits;
a second process, with a new connection, a model that has no reply left and only the thread
id, answers it with ``Command(resume="yes")`` and the plan goes on from the saved machine:
no crate ships twice and the model is not called again. The tools key their effects by the
tool-call id (``runtime.tool_call_id``), so even a call that runs again after a crash has no
second effect.

The model is a stand-in answering with a hand-written plan. Run:
``python examples/postgres_durability.py --dsn postgresql://user@host/db`` (or set
``LLASSEMBLY_POSTGRES``; ``LLASSEMBLY_TEST_POSTGRES``, which CI sets, works too).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command, interrupt

from llassembly import ToolsPlannerMiddleware

SCHEMA = """
CREATE TABLE IF NOT EXISTS shipments (
    tool_call_id text PRIMARY KEY,      -- a call that runs again writes nothing new
    thread_id    text NOT NULL,
    crate        integer NOT NULL
)
"""

PLAN = """```asm
        PUSH 1
        CALL ship_crate
        POP R0
        PUSH 2
        CALL ship_crate
        POP R0
        PUSH "Ship crate 3 as well?"
        CALL ask_dispatcher
        POP R1
        CMP R1, "yes"
        JNE done
        PUSH 3
        CALL ship_crate
        POP R0
done:   SAY "Shipping done."
```"""


def dsn_from(argv_dsn: str | None) -> str | None:
    """The connection string: ``--dsn``, else ``LLASSEMBLY_POSTGRES``, else CI's."""
    return (
        argv_dsn
        or os.environ.get("LLASSEMBLY_POSTGRES")
        or os.environ.get("LLASSEMBLY_TEST_POSTGRES")
    )


def build(dsn: str, saver: PostgresSaver, model: GenericFakeChatModel) -> Any:
    """The agent, the same in both processes but for the model."""

    @tool
    def ship_crate(crate: int, runtime: ToolRuntime) -> int:
        """Ship one crate; returns its number."""
        thread_id = runtime.config["configurable"]["thread_id"]
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(
                "INSERT INTO shipments VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (runtime.tool_call_id, thread_id, crate),
            )
        return crate

    @tool
    def ask_dispatcher(question: str) -> str:
        """Ask the dispatcher a yes/no question; returns "yes" or "no"."""
        answer: str = interrupt({"question": question})
        return answer

    return create_agent(
        model,
        tools=[ship_crate, ask_dispatcher],
        middleware=[ToolsPlannerMiddleware()],
        checkpointer=saver,
    )


def shipped(dsn: str, thread_id: str) -> list[int]:
    with psycopg.connect(dsn) as db:
        rows = db.execute(
            "SELECT crate FROM shipments WHERE thread_id = %s ORDER BY crate", (thread_id,)
        ).fetchall()
    return [crate for (crate,) in rows]


def start(dsn: str, thread: RunnableConfig) -> None:
    """First process: the model writes the plan; it runs until the dispatcher is asked."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        model = GenericFakeChatModel(messages=iter([AIMessage(PLAN)]))
        agent = build(dsn, saver, model)
        paused = agent.invoke(
            {"messages": [HumanMessage("Ship the crates; ask before the third.")]},
            thread,
            durability="sync",  # each step saved before the next starts
        )
        print(f"process {os.getpid()}: asked {paused['__interrupt__'][0].value['question']!r}")


def resume(dsn: str, thread: RunnableConfig) -> None:
    """Second process: nothing but the database and the thread id."""
    with PostgresSaver.from_conn_string(dsn) as saver:
        idle = GenericFakeChatModel(messages=iter([]))  # calling it would fail: it is not
        agent = build(dsn, saver, idle)
        done = agent.invoke(Command(resume="yes"), thread, durability="sync")
        record = done["messages"][-1].response_metadata["llassembly"]
        print(
            f"process {os.getpid()}: resumed; {done['messages'][-1].text} "
            f"({record['tool_calls']} tool calls, {record['model_calls']} model call)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", help="PostgreSQL connection string")
    parser.add_argument("--resume", metavar="THREAD_ID", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    dsn = dsn_from(args.dsn)
    if dsn is None:
        print("give --dsn postgresql://... or set LLASSEMBLY_POSTGRES", file=sys.stderr)
        return 2
    if args.resume:
        resume(dsn, {"configurable": {"thread_id": args.resume}})
        return 0

    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(SCHEMA)
    thread_id = f"shipping-{uuid.uuid4().hex[:8]}"
    start(dsn, {"configurable": {"thread_id": thread_id}})
    print(f"shipped before the question: {shipped(dsn, thread_id)}")
    subprocess.run(
        [sys.executable, __file__, "--dsn", dsn, "--resume", thread_id], check=True, timeout=300
    )
    crates = shipped(dsn, thread_id)
    print(f"shipped in all: {crates}")
    if crates != [1, 2, 3]:
        print("a crate shipped twice or not at all", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
