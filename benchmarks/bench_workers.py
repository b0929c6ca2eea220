"""Durable plans at scale: plans per second and checkpoint cost per tool call, by saver and
number of worker processes.

Each plan makes ``CALLS`` calls of a trivial tool on the agent path (``create_agent`` +
``ToolsPlannerMiddleware()``, a zero-latency scripted model), saving every step before the
next one starts (``durability="sync"``), so the figures are what durability itself costs.

* **PostgreSQL, 1, 2 and 4 worker processes**: the workers of ``examples/workers.py`` take the
  threads from a queue table in the same database (``FOR UPDATE SKIP LOCKED``) and save into
  ``PostgresSaver``. Timing starts when every worker has started and warmed up, and ends when
  the last one has found the queue empty.
* **SQLite, 1 process**: the same jobs one after the other on ``SqliteSaver`` (a file).

Checkpoint cost per tool call = time spent inside the saver (reads and writes, summed over the
workers) / tool calls. PostgreSQL comes from ``--postgres DSN``, ``LLASSEMBLY_POSTGRES`` or
``LLASSEMBLY_TEST_POSTGRES`` (``.ci/run`` sets that one); a database is created for the run
and dropped after it. Without a server the PostgreSQL rows are skipped and the reason printed.

Run: ``python -m benchmarks.bench_workers [--quick] [--postgres DSN]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage

from llassembly import ToolsPlannerMiddleware

from .bench_agent_path import _Replies
from .bench_integration import LOOP, inc

CALLS = 10
WORKER_COUNTS = (1, 2, 4)
ROOT = Path(__file__).resolve().parent.parent


def postgres_from_env() -> str | None:
    return os.environ.get("LLASSEMBLY_POSTGRES") or os.environ.get("LLASSEMBLY_TEST_POSTGRES")


class SaverClock:
    """Wraps a saver's reads and writes on the instance and sums the seconds spent in them."""

    METHODS = ("get_tuple", "put", "put_writes")

    def __init__(self, saver: Any) -> None:
        self.seconds = 0.0
        for name in self.METHODS:
            setattr(saver, name, self._timed(getattr(saver, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def _agent(saver: Any, calls: int) -> Any:
    plan = AIMessage(LOOP.format(n=calls))
    return create_agent(
        _Replies(replies=[plan]),
        tools=[inc],
        middleware=[ToolsPlannerMiddleware()],
        checkpointer=saver,
    )


def _check(outcome: tuple[str, Any], calls: int) -> None:
    status, result = outcome
    if status != "done" or result["status"] != "finished" or len(result["calls"]) != calls:
        raise RuntimeError(f"a benchmark plan did not finish as expected: {outcome}")


def _order(i: int) -> dict[str, Any]:
    return {"order": f"count to the end, plan {i}"}


# -- a PostgreSQL worker process ---------------------------------------------------------------


def worker(dsn: str, calls: int) -> None:
    """Warm up, say ready, wait for "go" on stdin, serve the queue, print the figures."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver

    from examples.workers import Job, run_job, serve

    _check(run_job(_agent(InMemorySaver(), calls), Job("warm-up", _order(0), None)), calls)
    with PostgresSaver.from_conn_string(dsn) as saver:
        clock = SaverClock(saver)
        agent = _agent(saver, calls)
        plans = 0

        def run(job: Job) -> tuple[str, Any]:
            nonlocal plans
            outcome = run_job(agent, job)
            _check(outcome, calls)
            plans += 1
            return outcome

        print("ready", flush=True)
        sys.stdin.readline()
        serve(dsn, run, idle=0.01)
        print(json.dumps({"plans": plans, "saver_s": clock.seconds}), flush=True)


@contextmanager
def _database(server: str) -> Iterator[str]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"llassembly_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def postgres_run(server: str, workers: int, plans: int, calls: int) -> dict[str, float]:
    """``plans`` plans through ``workers`` worker processes on a new database."""
    from langgraph.checkpoint.postgres import PostgresSaver

    from examples.workers import ThreadQueue

    with _database(server) as dsn:
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        queue = ThreadQueue(dsn)
        queue.setup()
        for i in range(plans):
            queue.enqueue(f"plan-{i:05d}", _order(i))
        command = [sys.executable, "-m", "benchmarks.bench_workers", "--worker", dsn, str(calls)]
        procs = [
            subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            for _ in range(workers)
        ]
        try:
            for p in procs:
                if p.stdout is None or p.stdout.readline().strip() != b"ready":
                    raise RuntimeError("a benchmark worker did not start")
            start = time.perf_counter()
            for p in procs:
                assert p.stdin is not None
                p.stdin.write(b"go\n")
                p.stdin.flush()
            # The clock stops at the last worker's figures, before interpreters shut down.
            reports = [json.loads(p.stdout.readline()) for p in procs if p.stdout]
            wall = time.perf_counter() - start
            for p in procs:
                p.communicate(timeout=60)
        finally:
            for p in procs:
                p.kill()
        queue.conn.close()
    if sum(r["plans"] for r in reports) != plans:
        raise RuntimeError(f"the workers ran {reports}, not {plans} plans")
    return _row("PostgreSQL", workers, plans, calls, wall, sum(r["saver_s"] for r in reports))


def sqlite_run(plans: int, calls: int) -> dict[str, float | str]:
    """The same jobs, one after the other, in this process on a SQLite file."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from examples.workers import Job, run_job

    with tempfile.TemporaryDirectory() as folder:
        conn = sqlite3.connect(Path(folder) / "state.sqlite", check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        agent = _agent(saver, calls)
        _check(run_job(agent, Job("warm-up", _order(0), None)), calls)
        clock = SaverClock(saver)
        start = time.perf_counter()
        for i in range(plans):
            _check(run_job(agent, Job(f"plan-{i:05d}", _order(i), None)), calls)
        wall = time.perf_counter() - start
        conn.close()
    return _row("SQLite", 1, plans, calls, wall, clock.seconds)


def _row(saver: str, workers: int, plans: int, calls: int, wall: float, saver_s: float) -> Any:
    return {
        "saver": saver,
        "workers": workers,
        "plans": plans,
        "calls": calls,
        "wall_s": wall,
        "plans_per_s": plans / wall,
        "checkpoint_ms_per_call": saver_s / (plans * calls) * 1000,
    }


def main(quick: bool = False, postgres: str | None = None) -> list[dict[str, Any]]:
    """Measure and print the rows; return them."""
    plans, calls = (4, 3) if quick else (48, CALLS)
    rows: list[dict[str, Any]] = [sqlite_run(plans, calls)]
    server = postgres or postgres_from_env()
    if server is None:
        print(
            "workers: PostgreSQL rows skipped: no server (give --postgres DSN or set "
            "LLASSEMBLY_POSTGRES)"
        )
    else:
        counts = WORKER_COUNTS[:2] if quick else WORKER_COUNTS
        rows += [postgres_run(server, n, plans, calls) for n in counts]
    print(f"workers: {plans} plans of {calls} tool calls each, agent path, durability='sync'")
    for r in rows:
        print(
            f"  {r['saver']:<10} {r['workers']} process(es)  {r['plans_per_s']:6.1f} plans/s  "
            f"checkpoint {r['checkpoint_ms_per_call']:.2f} ms per tool call"
        )
    sys.stdout.flush()
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few plans (CI smoke run)")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL server's DSN")
    parser.add_argument("--worker", nargs=2, metavar=("DSN", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
    else:
        main(quick=args.quick, postgres=args.postgres)
