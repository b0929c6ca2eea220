"""Many worker processes on one PostgreSQL database: interrupts, SIGKILL, exactly-once.

Three worker processes (``worker_process.py``) take threads from the queue table of
``examples/workers.py``. Every thread runs one plan: three ``step`` calls, an ``ask`` that calls
``interrupt()``, and a last ``step``. The test acts as the human and as the operator: it
answers each paused thread (the queue gives it to another worker than the one that paused it),
and when a worker hangs inside a call it was told to hang in, the test kills it with SIGKILL
and starts a new worker. Threads cover the agent path and the graph path at every granularity
that checkpoints between calls, each with sync and async savers; one worker dies inside a tool
call, one inside the model call, one after a resume.

From the ``runs`` table the model and tools write to, the test checks: no completed tool call
ran twice, only the calls in flight when a worker died started twice, the model returned once
per thread (it started twice only where its worker died in it), and every plan ended with the
same calls, results and registers as the same plan run without workers or crashes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import psycopg
import pytest
from conftest import ROOT
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command
from worker_process import SCHEMA, build

from examples.workers import ThreadQueue, summary

pytestmark = pytest.mark.slow  # processes and a database: run by .ci/run with -m slow

WORKERS = 3
MODES = ("agent", "graph-block", "graph-instruction")
# Thread -> (spec, where its first worker hangs and is killed). k is the first step's number.
THREADS: dict[str, tuple[dict[str, Any], str | None]] = {}
for i, (mode, is_async) in enumerate((m, a) for m in MODES for a in (False, True)):
    k = 10 * (i + 1)
    THREADS[f"{mode}-{'async' if is_async else 'sync'}"] = (
        {
            "order": f"thread {mode}-{'async' if is_async else 'sync'}: count from {k}",
            "mode": mode,
            "async": is_async,
        },
        f"step({k + 1})",  # the second call of the plan
    )
THREADS["model-crash"] = (
    {"order": "thread model-crash: count from 100", "mode": "agent", "async": False},
    "model",
)
THREADS["after-resume"] = (
    {"order": "thread after-resume: count from 200", "mode": "graph-block", "async": True},
    f"step({10 * (200 + 201 + 202)})",  # the call after the human's answer
)


def uninterrupted(spec: dict[str, Any], thread: str) -> dict[str, Any]:
    """The plan run in this process: no workers, no crash, the same answer."""
    agent = build(spec["mode"], InMemorySaver(), lambda *a: None, lambda *a: None)
    config = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [HumanMessage(spec["order"])]}, config)
    result = agent.invoke(Command(resume="yes"), config)
    return summary(result["messages"])


def spawn(dsn: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    script = ROOT / "tests" / "worker_process.py"
    return subprocess.Popen([sys.executable, str(script), dsn], cwd=ROOT, env=env)


def test_workers_resume_each_others_interrupts_and_finish_plans_of_killed_workers(
    postgres: str,
) -> None:
    with PostgresSaver.from_conn_string(postgres) as saver:
        saver.setup()
    queue = ThreadQueue(postgres)
    queue.setup()
    db = psycopg.connect(postgres, autocommit=True)
    db.execute(SCHEMA)
    for thread, (spec, hang_at) in THREADS.items():
        queue.enqueue(thread, spec)
        db.execute("INSERT INTO stalls VALUES (%s, %s)", (thread, hang_at))

    workers = {p.pid: p for p in (spawn(postgres) for _ in range(WORKERS))}
    killed: dict[str, int] = {}
    paused_by: dict[str, int] = {}
    deadline = time.monotonic() + 240
    try:
        while queue.open_jobs():
            assert time.monotonic() < deadline, "the workers did not finish in time"
            for thread, question, worker in queue.waiting():
                assert question == "Go on?"
                paused_by[thread] = worker
                queue.answer(thread, "yes")
            hung = db.execute("DELETE FROM stalled RETURNING thread_id, worker").fetchall()
            for thread, pid in hung:
                os.kill(pid, signal.SIGKILL)
                assert workers.pop(pid).wait(timeout=30) == -signal.SIGKILL
                killed[thread] = pid
                fresh = spawn(postgres)
                workers[fresh.pid] = fresh
            dead = [p for p in workers.values() if p.poll() not in (None, 0)]
            assert not dead, f"a worker failed: exit {dead[0].returncode}"
            time.sleep(0.05)
        for process in workers.values():
            assert process.wait(timeout=60) == 0
    finally:
        for process in workers.values():
            process.kill()

    assert sorted(killed) == sorted(THREADS)  # every thread lost a worker once
    assert sorted(paused_by) == sorted(THREADS)
    runs = db.execute("SELECT thread_id, what, call_id, phase, worker FROM runs").fetchall()
    results = queue.results()
    for thread, (spec, hang_at) in THREADS.items():
        mine = [r for r in runs if r[0] == thread]
        done = Counter(r[2] for r in mine if r[3] == "done" and r[1] != "model")
        started = Counter((r[1], r[2]) for r in mine if r[3] == "start" and r[1] != "model")
        # No completed tool call ran twice: one completion per call id, one per plan call.
        assert set(done.values()) == {1}, (thread, done)
        assert len(done) == 5
        # Only the call in flight when the worker died started again; "ask" starts twice
        # (LangGraph re-runs the interrupted tool with the answer).
        repeated = sorted(what for (what, _), n in started.items() if n > 1)
        assert repeated == sorted({"ask", hang_at} - {"model"}), (thread, started)
        assert max(started.values()) == 2
        models = Counter(r[3] for r in mine if r[1] == "model")
        assert models == {"start": 2 if hang_at == "model" else 1, "done": 1}, thread
        # The worker that paused the plan did not resume it; another worker than the killed
        # one completed the call it died in.
        asked = [r for r in mine if r[1] == "ask"]
        assert asked[0][4] == paused_by[thread] != asked[-1][4]
        finished_by = [r[4] for r in mine if r[1] == hang_at and r[3] == "done"]
        assert len(finished_by) == 1 and finished_by[0] != killed[thread]
        # The same plan, uninterrupted, ends the same way.
        assert results[thread] == uninterrupted(spec, thread), thread
        assert results[thread]["status"] == "finished"


def test_the_workers_example_ships_every_crate_once_despite_the_killed_worker(
    postgres: str,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "examples.workers", "--dsn", postgres, "--workers", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "shipment-1: worker" in done.stdout
    assert "killed while shipping crate 2" in done.stdout
    with psycopg.connect(postgres) as db:
        shipped = db.execute(
            "SELECT thread_id, array_agg(crate ORDER BY crate) FROM shipments GROUP BY thread_id"
        ).fetchall()
        statuses = db.execute("SELECT DISTINCT result->>'status' FROM plan_jobs").fetchall()
    # Thread i ships 2 + i % 3 crates (the last one after a human said yes), each once.
    assert dict(shipped) == {f"shipment-{i}": list(range(1, 3 + i % 3)) for i in range(1, 7)}
    assert statuses == [("finished",)]
