"""A worker process of the multi-worker tests (``test_workers.py``).

``python worker_process.py DSN`` takes threads from the queue of ``examples/workers.py`` until
none is open. Each thread's job says how its agent runs: ``mode`` (``"agent"``,
``"graph-block"``, ``"graph-instruction"``) and ``async`` (``PostgresSaver`` + ``invoke`` or
``AsyncPostgresSaver`` + ``ainvoke``). The model and the tools write every start and every
completion to the ``runs`` table (with the tool-call id and this process's id); a row of the
``stalls`` table makes the first call that matches it hang, after writing ``stalled``, so the
test can kill this process right there. The model's plan is written by hand (not a recording).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import interrupt

from examples.workers import Job, arun_job, run_job, serve
from llassembly import ToolsPlannerMiddleware

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id        serial PRIMARY KEY,
    thread_id text NOT NULL,
    what      text NOT NULL,      -- "model", or "tool name(arg)"
    call_id   text,               -- the tool-call id (none for the model)
    phase     text NOT NULL,      -- "start" or "done"
    worker    integer NOT NULL
);
CREATE TABLE IF NOT EXISTS stalls (thread_id text NOT NULL, what text NOT NULL);
CREATE TABLE IF NOT EXISTS stalled (thread_id text NOT NULL, what text NOT NULL, worker integer);
"""

PLAN = """Three steps from {k}, then ask, then a step of the sum.

```asm
    MOV R1, {k}
    MOV R2, 0
again:
    PUSH R1
    CALL step
    POP R3
    ADD R2, R3
    INC R1
    CMP R1, {end}
    JL again
    PUSH "Go on?"
    CALL ask
    POP R4
    CMP R4, "yes"
    JNE done
    PUSH R2
    CALL step
    POP R5
done:
    HLT
```"""


def plan_for(order: str) -> str:
    k = int(re.search(r"\d+", order).group())  # type: ignore[union-attr]
    return PLAN.format(k=k, end=k + 3)


Record = Callable[[str, str, str | None, str], None]  # thread, what, call id, phase
Stall = Callable[[str, str], None]  # thread, what


def _thread(runtime: Any) -> str:
    thread: str = runtime.config["configurable"]["thread_id"]
    return thread


class OrderModel(BaseChatModel):
    """Answers an order with :data:`PLAN` for the number in it; records each call."""

    record: Any
    stall: Any

    @property
    def _llm_type(self) -> str:
        return "order-plans"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        order = next(m.text for m in reversed(messages) if isinstance(m, HumanMessage))
        thread = re.search(r"thread ([\w-]+)", order).group(1)  # type: ignore[union-attr]
        self.record(thread, "model", None, "start")
        self.stall(thread, "model")
        self.record(thread, "model", None, "done")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(plan_for(order)))])


def build(mode: str, saver: Any, record: Record, stall: Stall) -> Any:
    """The agent of a job's ``mode``, with tools that record and may stall."""

    @tool
    def step(n: int, runtime: ToolRuntime) -> int:
        """Take step n; returns 10 * n."""
        thread, what = _thread(runtime), f"step({n})"
        record(thread, what, runtime.tool_call_id, "start")
        stall(thread, what)
        record(thread, what, runtime.tool_call_id, "done")
        return 10 * n

    @tool
    def ask(question: str, runtime: ToolRuntime) -> str:
        """Ask a human; returns the answer."""
        thread = _thread(runtime)
        record(thread, "ask", runtime.tool_call_id, "start")
        answer: str = interrupt(question)
        record(thread, "ask", runtime.tool_call_id, "done")
        return answer

    tools = [step, ask]
    if mode == "agent":
        planner = ToolsPlannerMiddleware()
    else:
        granularity = mode.removeprefix("graph-")
        # A worker that did not write the plan resumes it: the graph path needs the tools.
        planner = ToolsPlannerMiddleware(execution="graph", granularity=granularity, tools=tools)
    model = OrderModel(record=record, stall=stall)
    return create_agent(model, tools=tools, middleware=[planner], checkpointer=saver)


def main(dsn: str) -> None:
    me = os.getpid()
    log = psycopg.connect(dsn, autocommit=True)

    def record(thread: str, what: str, call_id: str | None, phase: str) -> None:
        log.execute(
            "INSERT INTO runs (thread_id, what, call_id, phase, worker) "
            "VALUES (%s, %s, %s, %s, %s)",
            (thread, what, call_id, phase, me),
        )

    def stall(thread: str, what: str) -> None:
        first = log.execute(
            "DELETE FROM stalls WHERE thread_id = %s AND what = %s RETURNING 1", (thread, what)
        ).fetchone()
        if first:
            log.execute("INSERT INTO stalled VALUES (%s, %s, %s)", (thread, what, me))
            time.sleep(600)  # the test kills this process here

    async def arun(job: Job) -> tuple[str, Any]:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            return await arun_job(build(job.spec["mode"], saver, record, stall), job)

    with PostgresSaver.from_conn_string(dsn) as saver:
        agents = {
            mode: build(mode, saver, record, stall)
            for mode in ("agent", "graph-block", "graph-instruction")
        }

        def run(job: Job) -> Any:
            if job.spec["async"]:
                return arun(job)
            return run_job(agents[job.spec["mode"]], job)

        serve(dsn, run)


if __name__ == "__main__":
    main(sys.argv[1])
