"""What a plan's call costs on the agent path with ``ainvoke``, next to a plain async loop.

``bench_agent_path`` measures ``invoke``. With ``ainvoke`` one more cost comes in: LangSmith's
``traceable``, which ``create_agent`` puts around every ``awrap_*`` middleware hook, runs its
bookkeeping for each hook call on a worker thread (``run_in_executor``, before and after the
hook), tracing on or off. A plan's call passes two such hooks. LangSmith lets an application
run that bookkeeping inline instead (``langsmith.set_runtime_overrides``), so both are shown:

* **LangSmith's default**: ``ainvoke`` as it comes;
* **bookkeeping inline**: the same after
  ``langsmith.set_runtime_overrides(aio_to_thread=inline)``, where ``inline`` runs the
  function in the context LangSmith gives it.

Each figure is the median of the ratios of back-to-back pairs (agent path, then the plain
async loop, alternating which goes first), CPU time of the whole process, 25 calls per turn;
each setting runs in a fresh process. Not part of ``python -m benchmarks``: it documents how
``ainvoke`` behaves rather than a target.

Run: ``python -m benchmarks.bench_async [--pairs 41]`` (about 20 seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .bench_agent_path import REQUEST, Side, agent_path_agent, tool_loop_agent, turn_config

CALLS = 25
SETTINGS = ("default", "inline")


async def inline(
    default: Any, ctx: contextvars.Context, func: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> Any:
    """A LangSmith ``aio_to_thread`` override: run ``func`` here, in the context it is given."""
    return ctx.run(func, *args, **kwargs)


def _async_turn(side: Side, n: int) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        side.model.calls = 0
        side.check(await side.agent.ainvoke(REQUEST, turn_config(n)))

    return run


async def _measure(pairs: int) -> list[list[float]]:
    sides = (
        _async_turn(agent_path_agent(CALLS), CALLS),
        _async_turn(tool_loop_agent(CALLS), CALLS),
    )
    for run in sides:
        await run()
    times: list[list[float]] = [[], []]
    for i in range(pairs):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            gc.collect()
            start = time.process_time()
            await sides[side]()
            times[side].append(time.process_time() - start)
    return times


def _in_fresh_process(setting: str, pairs: int) -> list[list[float]]:
    command = [sys.executable, "-m", "benchmarks.bench_async", "--timings", setting]
    done = subprocess.run(
        [*command, "--pairs", str(pairs)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    timings: list[list[float]] = json.loads(done.stdout.splitlines()[-1])
    return timings


def main(pairs: int = 41) -> dict[str, float]:
    """Measure each setting in a fresh process, print the figures and return them."""
    figures: dict[str, float] = {}
    print(f"agent path with ainvoke: per tool call, {CALLS} calls per turn, against a plain loop")
    for setting in SETTINGS:
        agent, loop = _in_fresh_process(setting, pairs)
        ratio = statistics.median(a / b for a, b in zip(agent, loop, strict=True))
        figures[f"{setting}_ratio"] = ratio
        figures[f"{setting}_agent_us"] = min(agent) / CALLS * 1e6
        figures[f"{setting}_loop_us"] = min(loop) / CALLS * 1e6
        label = "LangSmith's default" if setting == "default" else "bookkeeping inline"
        print(
            f"  {label:20} agent path {figures[f'{setting}_agent_us']:6.0f} µs/call   "
            f"loop {figures[f'{setting}_loop_us']:6.0f} µs/call   ratio {ratio:.2f}×"
        )
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=41, help="pairs of runs per setting")
    parser.add_argument("--timings", choices=SETTINGS, help="measure one setting here (child)")
    args = parser.parse_args()
    if args.timings:
        if args.timings == "inline":
            import langsmith

            langsmith.set_runtime_overrides(aio_to_thread=inline)
        print(json.dumps(asyncio.run(_measure(args.pairs))))
    else:
        main(args.pairs)
