"""Many worker processes, one PostgreSQL database, a queue of threads; workers pause and die.

Each thread is one agent conversation (``create_agent`` + ``ToolsPlannerMiddleware``) whose
checkpoints live in PostgreSQL (``PostgresSaver``). Workers take threads from a queue table
with ``SELECT ... FOR UPDATE SKIP LOCKED`` and keep the row locked while they work on it: if a
worker dies, PostgreSQL ends its session, the lock goes, and the next worker takes the thread
and continues it from its last checkpoint. What to send the agent is read from that checkpoint,
never from the queue: no checkpoint yet means start, a pending interrupt means resume with the
human's answer, pending steps mean continue (``None``), and no pending step means finished.

Run ``python -m examples.workers --dsn postgresql://...`` (or set ``LLASSEMBLY_POSTGRES``): it
starts the workers, enqueues the threads, answers each tool's ``interrupt()`` so that another
worker resumes it, kills one worker with SIGKILL in the middle of a plan and shows another one
finishing it. The model is a stand-in that answers every order with a hand-written plan (it is
not a recording); the tools write their effects to a table keyed by the tool-call id, so a call
that runs again after a crash has no second effect.

The queue (:class:`ThreadQueue`) and :func:`serve` work with any agent (the tests use them
with other agents: ``tests/worker_process.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command, interrupt

from llassembly import ToolsPlannerMiddleware

QUEUE_SCHEMA = """
CREATE TABLE IF NOT EXISTS plan_jobs (
    thread_id  text PRIMARY KEY,
    spec       jsonb NOT NULL,                    -- what the worker needs to build the agent
    status     text NOT NULL DEFAULT 'queued',    -- queued, waiting (for a human), done
    answer     text,                              -- the human's answer to the pending interrupt
    paused_by  integer,                           -- the worker that paused it does not resume it
    question   jsonb,
    result     jsonb
)
"""


@dataclass
class Job:
    """A thread taken from the queue."""

    thread_id: str
    spec: dict[str, Any]
    answer: str | None


class ThreadQueue:
    """Threads waiting for a worker, in a table of the checkpoint database."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn)

    def setup(self) -> None:
        with self.conn.transaction():
            self.conn.execute(QUEUE_SCHEMA)

    def enqueue(self, thread_id: str, spec: dict[str, Any]) -> None:
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO plan_jobs (thread_id, spec) VALUES (%s, %s)",
                (thread_id, json.dumps(spec)),
            )

    @contextmanager
    def take(self, worker: int) -> Iterator[Job | None]:
        """The next queued thread, locked until the block ends (or the worker dies)."""
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT thread_id, spec, answer FROM plan_jobs WHERE status = 'queued' "
                "AND paused_by IS DISTINCT FROM %s ORDER BY thread_id "
                "LIMIT 1 FOR UPDATE SKIP LOCKED",
                (worker,),
            ).fetchone()
            yield Job(row[0], row[1], row[2]) if row else None

    def finish(self, job: Job, worker: int, outcome: tuple[str, Any]) -> None:
        """Record a job's outcome (inside :meth:`take`): paused, or done with its result."""
        status, value = outcome
        if status == "waiting":
            self.conn.execute(
                "UPDATE plan_jobs SET status = 'waiting', paused_by = %s, question = %s, "
                "answer = NULL WHERE thread_id = %s",
                (worker, json.dumps(value), job.thread_id),
            )
        else:
            self.conn.execute(
                "UPDATE plan_jobs SET status = 'done', result = %s WHERE thread_id = %s",
                (json.dumps(value), job.thread_id),
            )

    def answer(self, thread_id: str, answer: str) -> None:
        """A human answers a paused thread: it goes back in the queue, for another worker."""
        with self.conn.transaction():
            self.conn.execute(
                "UPDATE plan_jobs SET status = 'queued', answer = %s "
                "WHERE thread_id = %s AND status = 'waiting'",
                (answer, thread_id),
            )

    def waiting(self) -> list[tuple[str, Any, int]]:
        with self.conn.transaction():
            rows = self.conn.execute(
                "SELECT thread_id, question, paused_by FROM plan_jobs "
                "WHERE status = 'waiting' ORDER BY thread_id"
            ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def open_jobs(self) -> int:
        with self.conn.transaction():
            row = self.conn.execute("SELECT count(*) FROM plan_jobs WHERE status <> 'done'")
            count: int = row.fetchone()[0]  # type: ignore[index]
        return count

    def results(self) -> dict[str, Any]:
        with self.conn.transaction():
            rows = self.conn.execute("SELECT thread_id, result FROM plan_jobs").fetchall()
        return {r[0]: r[1] for r in rows}


# -- one job: what to send the agent is read from the thread's checkpoint ---------------------


def next_input(state: Any, job: Job) -> Any:
    """Start, resume, continue, or ``FINISHED``, from the thread's last checkpoint."""
    if not state.values:
        return {"messages": [HumanMessage(job.spec["order"])]}
    if state.interrupts:
        return Command(resume=job.answer) if job.answer is not None else WAITING
    if state.next:
        return None  # a run stopped in the middle (a worker died): continue it
    return FINISHED


FINISHED, WAITING = object(), object()


def outcome(state: Any) -> tuple[str, Any]:
    """``("waiting", question)`` or ``("done", summary)`` for the queue."""
    if state.interrupts:
        return "waiting", state.interrupts[0].value
    return "done", summary(state.values["messages"])


def summary(messages: list[BaseMessage]) -> dict[str, Any]:
    """What a finished plan did: its calls, their results and the machine's end state."""
    final = messages[-1].response_metadata.get("llassembly", {})
    return {
        "calls": [
            [c["name"], c["args"]]
            for m in messages
            if isinstance(m, AIMessage)
            for c in m.tool_calls
        ],
        "results": [m.text for m in messages if isinstance(m, ToolMessage)],
        "status": final.get("status"),
        "registers": final.get("registers"),
    }


def run_job(agent: Any, job: Job) -> tuple[str, Any]:
    """Take the thread one run further (``durability="sync"``: each step is saved before the
    next one starts, so a crash loses at most the step in flight)."""
    config = {"configurable": {"thread_id": job.thread_id}}
    payload = next_input(agent.get_state(config), job)
    if payload is not FINISHED and payload is not WAITING:
        agent.invoke(payload, config, durability="sync")
    return outcome(agent.get_state(config))


async def arun_job(agent: Any, job: Job) -> tuple[str, Any]:
    """:func:`run_job` with ``ainvoke`` (an agent built on ``AsyncPostgresSaver``)."""
    config = {"configurable": {"thread_id": job.thread_id}}
    payload = next_input(await agent.aget_state(config), job)
    if payload is not FINISHED and payload is not WAITING:
        await agent.ainvoke(payload, config, durability="sync")
    return outcome(await agent.aget_state(config))


def serve(
    dsn: str,
    run: Callable[[Job], tuple[str, Any] | Awaitable[tuple[str, Any]]],
    *,
    idle: float = 0.05,
) -> None:
    """Take jobs and run them until no thread is open (queued, running or waiting)."""
    queue, me = ThreadQueue(dsn), os.getpid()
    while True:
        with queue.take(me) as job:
            if job is not None:
                result = run(job)
                if not isinstance(result, tuple):
                    result = asyncio.run(_awaited(result))
                queue.finish(job, me, result)
                continue
        if queue.open_jobs() == 0:
            return
        time.sleep(idle)


async def _awaited(result: Awaitable[tuple[str, Any]]) -> tuple[str, Any]:
    return await result


# -- the example's agent ----------------------------------------------------------------------

EFFECTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS shipments (
    tool_call_id text PRIMARY KEY,   -- the idempotency key: a call run again changes nothing
    thread_id    text NOT NULL,
    crate        integer NOT NULL,
    worker       integer NOT NULL
);
CREATE TABLE IF NOT EXISTS stalls (thread_id text, crate integer, worker integer)
"""

PLAN = """Ship the crates one by one, ask before the last one.

```asm
    MOV R1, 1
next:
    PUSH R1
    CALL ship_crate
    POP R2
    INC R1
    CMP R1, {crates}
    JL next
    PUSH "Ship the last crate?"
    CALL ask_human
    POP R3
    CMP R3, "yes"
    JNE done
    PUSH R1
    CALL ship_crate
    POP R2
done:
    HLT
```"""


class PlanWriter(BaseChatModel):
    """A stand-in model: answers "Ship N crates" with the hand-written plan above."""

    @property
    def _llm_type(self) -> str:
        return "plan-writer"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        order = next(m.text for m in reversed(messages) if isinstance(m, HumanMessage))
        crates = int(re.search(r"\d+", order).group())  # type: ignore[union-attr]
        reply = AIMessage(PLAN.format(crates=crates))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def build_agent(saver: Any, dsn: str) -> Any:
    effects = psycopg.connect(dsn, autocommit=True)

    @tool
    def ship_crate(crate: int, runtime: ToolRuntime) -> int:
        """Ship one crate; returns its number."""
        thread = runtime.config["configurable"]["thread_id"]
        stall = effects.execute(
            "DELETE FROM stalls WHERE thread_id = %s AND crate = %s RETURNING 1", (thread, crate)
        ).fetchone()
        if stall:  # this crate of this thread is where the example kills its worker
            effects.execute("INSERT INTO stalls VALUES (%s, %s, %s)", (thread, -crate, os.getpid()))
            time.sleep(3600)
        effects.execute(
            "INSERT INTO shipments VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (runtime.tool_call_id, thread, crate, os.getpid()),
        )
        return crate

    @tool
    def ask_human(question: str) -> str:
        """Ask a human; returns the answer."""
        answer: str = interrupt(question)
        return answer

    return create_agent(
        PlanWriter(),
        tools=[ship_crate, ask_human],
        middleware=[ToolsPlannerMiddleware()],
        checkpointer=saver,
    )


def worker(dsn: str) -> None:
    with PostgresSaver.from_conn_string(dsn) as saver:
        agent = build_agent(saver, dsn)
        serve(dsn, lambda job: run_job(agent, job))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("LLASSEMBLY_POSTGRES"))
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("give --dsn postgresql://... or set LLASSEMBLY_POSTGRES")
    if args.worker:
        worker(args.dsn)
        return 0
    with PostgresSaver.from_conn_string(args.dsn) as saver:
        saver.setup()
    queue = ThreadQueue(args.dsn)
    queue.setup()
    with queue.conn.transaction():
        queue.conn.execute(EFFECTS_SCHEMA)
        queue.conn.execute("DELETE FROM plan_jobs; DELETE FROM shipments; DELETE FROM stalls")
        # The second crate of the first thread is where its worker will be killed.
        queue.conn.execute("INSERT INTO stalls VALUES ('shipment-1', 2, NULL)")
    started = time.perf_counter()
    for i in range(1, args.threads + 1):
        queue.enqueue(f"shipment-{i}", {"order": f"Ship {2 + i % 3} crates."})
    command = [sys.executable, "-m", "examples.workers", "--worker", "--dsn", args.dsn]
    workers = {p.pid: p for p in (subprocess.Popen(command) for _ in range(args.workers))}
    print(f"{args.workers} workers {sorted(workers)}, {args.threads} threads queued")
    while queue.open_jobs():
        for thread_id, question, paused_by in queue.waiting():
            print(f"{thread_id}: paused in worker {paused_by} asking {question!r}; answer yes")
            queue.answer(thread_id, "yes")
        with queue.conn.transaction():
            stalled = queue.conn.execute(
                "DELETE FROM stalls WHERE crate < 0 RETURNING thread_id, -crate, worker"
            ).fetchall()
        for thread_id, crate, pid in stalled:
            os.kill(pid, signal.SIGKILL)
            workers.pop(pid).wait()
            fresh = subprocess.Popen(command)
            workers[fresh.pid] = fresh
            print(
                f"{thread_id}: worker {pid} killed while shipping crate {crate}; "
                f"worker {fresh.pid} started"
            )
        time.sleep(0.1)
    for process in workers.values():
        process.wait()
    with queue.conn.transaction():
        shipped = queue.conn.execute(
            "SELECT thread_id, array_agg(crate ORDER BY crate), array_agg(DISTINCT worker) "
            "FROM shipments GROUP BY thread_id ORDER BY thread_id"
        ).fetchall()
    results = queue.results()
    for thread_id, crates, by in shipped:
        print(
            f"{thread_id}: crates {crates} shipped once each by workers {by}; "
            f"plan {results[thread_id]['status']}"
        )
    print(f"all threads done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
