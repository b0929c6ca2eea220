"""What a plan's call costs on the agent path, next to a plain tool-calling loop.

Measured in one run, side by side, so the ratios hold on any machine:

* **agent path**: ``create_agent`` + ``ToolsPlannerMiddleware()`` (``execution="agent"``)
  running a plan that calls a trivial ``@tool`` N times; every call goes through the agent's
  own tool node, one model-node visit (answered by the planner) and one tool-node visit each;
* **tool-calling loop**: a plain ``create_agent`` whose model (scripted, zero latency) asks for
  the same N calls, one per model turn, then answers.

Each agent is built once (building it is not part of a call). Per call = the whole turn's
CPU time (``time.process_time``, every thread of the process) / N, at N = 25 and N = 200.
Flat means the per-call cost does not grow with the length of the plan: one turn of 200 calls
is timed against eight turns of 25 calls (the same 200 calls), side by side as well.

Both sides are CPU-bound (zero-latency model, trivial tool), so CPU time is their wall time on
an idle machine and stays steady on a busy one, where wall time also counts the waits for a
core. The two sides run in back-to-back pairs (alternating which goes first), in several fresh
processes one after another; a ratio is the median of the ratios within pairs, pooled over the
processes, so neither a slow spell of the machine nor one process's layout of its objects lands
on one side of it only. A per-call figure is a side's fastest run.

Run: ``python -m benchmarks.bench_agent_path [--quick] [--processes N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from llassembly import ToolsPlannerMiddleware

from .bench_integration import LOOP, inc

SIZES = (25, 200)
PROCESSES = 5
# Pairs per process: at 25 calls, at 200 calls, and for flatness.
_PAIRS_SHORT, _PAIRS_LONG, _PAIRS_FLAT = 41, 9, 5


class _Replies(BaseChatModel):
    """Answers call k with reply k (the last one repeats): a zero-latency benchmark double."""

    replies: list[AIMessage]
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "replies"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])


def _pairs(
    first: Callable[[], None], second: Callable[[], None], pairs: int
) -> tuple[list[float], list[float]]:
    """Two runs measured in ``pairs`` back-to-back pairs: each run's CPU seconds, by pair.

    The two runs of a pair meet the same machine conditions, and the pair order alternates so
    neither side always runs first. Garbage from earlier runs is collected before each run, so
    a collection it triggers is not charged to whichever run happens to be going.
    """
    first()
    second()
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(pairs):
        order = ((first, 0), (second, 1)) if i % 2 == 0 else ((second, 1), (first, 0))
        for fn, side in order:
            gc.collect()
            start = time.process_time()
            fn()
            times[side].append(time.process_time() - start)
    return times


def _repeated(run: Callable[[], None], times: int) -> Callable[[], None]:
    def again() -> None:
        for _ in range(times):
            run()

    return again


class Side(NamedTuple):
    """One side of the comparison: the agent, its scripted model (whose count a turn resets)
    and the check of a turn's result."""

    agent: Any
    model: _Replies
    check: Callable[[dict[str, Any]], None]


def agent_path_agent(n: int) -> Side:
    """An agent whose plan makes ``n`` calls on the agent path (one model call, ``n`` tool
    calls, checked)."""
    plan = AIMessage(LOOP.format(n=n))
    planner = ToolsPlannerMiddleware(max_tool_calls=n + 1, max_instructions_to_exec=6 * n + 10)
    model = _Replies(replies=[plan])
    agent = create_agent(model, tools=[inc], middleware=[planner])

    def check(result: dict[str, Any]) -> None:
        meta = result["messages"][-1].response_metadata["llassembly"]
        if meta["tool_calls"] != n or model.calls != 1:
            raise RuntimeError(f"the plan did not run as expected: {meta}")

    return Side(agent, model, check)


def tool_loop_agent(n: int) -> Side:
    """A plain ``create_agent`` making the same ``n`` calls, one per model turn, and its check."""
    replies = [
        AIMessage(
            "",
            tool_calls=[{"name": "inc", "args": {"x": i}, "id": f"call_{i}", "type": "tool_call"}],
        )
        for i in range(n)
    ]
    replies.append(AIMessage("Done."))
    model = _Replies(replies=replies)
    agent = create_agent(model, tools=[inc])

    def check(result: dict[str, Any]) -> None:
        if model.calls != n + 1:
            raise RuntimeError("the tool-calling loop did not make every call")

    return Side(agent, model, check)


REQUEST: dict[str, Any] = {"messages": [HumanMessage("count")]}


def turn_config(n: int) -> dict[str, Any]:
    """The config of one turn of ``n`` calls (room for two supersteps per call)."""
    return {"recursion_limit": 3 * n + 20}


def _sync_turn(side: Side, n: int) -> Callable[[], None]:
    def run() -> None:
        side.model.calls = 0
        side.check(side.agent.invoke(REQUEST, turn_config(n)))

    return run


def agent_path_run(n: int) -> Callable[[], None]:
    """One turn whose plan makes ``n`` calls on the agent path (checked each time)."""
    return _sync_turn(agent_path_agent(n), n)


def tool_loop_run(n: int) -> Callable[[], None]:
    """A plain ``create_agent`` turn making the same ``n`` calls, one per model turn."""
    return _sync_turn(tool_loop_agent(n), n)


def measure(quick: bool = False) -> dict[str, list[list[float]]]:
    """Every timing of one process, by figure: ``[first side's runs, second side's runs]``."""
    timings: dict[str, list[list[float]]] = {}
    runs: dict[tuple[str, int], Callable[[], None]] = {}
    for n in SIZES:
        pairs = (2 if quick else _PAIRS_LONG) if n > 50 else (3 if quick else _PAIRS_SHORT)
        runs["agent", n], runs["loop", n] = agent_path_run(n), tool_loop_run(n)
        timings[f"calls_{n}"] = list(_pairs(runs["agent", n], runs["loop", n], pairs))
    # Flatness, side by side too: one turn of 200 calls against 8 turns of 25 (200 calls).
    small, large = SIZES
    for side, name in (("agent", "agent_path"), ("loop", "tool_loop")):
        repeat = _repeated(runs[side, small], large // small)
        pairs = 2 if quick else _PAIRS_FLAT
        timings[f"{name}_flatness"] = list(_pairs(runs[side, large], repeat, pairs))
    return timings


def _in_fresh_process(quick: bool) -> dict[str, list[list[float]]]:
    """:func:`measure` in a new interpreter (nothing an earlier benchmark left behind)."""
    command = [sys.executable, "-m", "benchmarks.bench_agent_path", "--timings"]
    done = subprocess.run(
        [*command, "--quick"] if quick else command,
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    timings: dict[str, list[list[float]]] = json.loads(done.stdout.splitlines()[-1])
    return timings


def _ratios(timings: list[list[float]]) -> list[float]:
    return [a / b for a, b in zip(*timings, strict=True)]


def main(quick: bool = False, processes: int | None = None) -> dict[str, float]:
    """Measure in ``processes`` fresh processes (one with ``quick``), print the figures and
    return them by name.

    A ratio is the median of the ratios within pairs, pooled over the processes: within one
    process they cluster, but each process lays out its objects anew, and its cluster sits a
    few percent higher or lower than another's (about ±3% on a shared 2-core machine). A
    per-call figure is a side's fastest run.
    """
    count = processes or (1 if quick else PROCESSES)
    samples = [_in_fresh_process(quick) for _ in range(count)]
    figures: dict[str, float] = {}
    for n in SIZES:
        agent = [t for s in samples for t in s[f"calls_{n}"][0]]
        loop = [t for s in samples for t in s[f"calls_{n}"][1]]
        figures[f"agent_path_{n}_us"] = min(agent) / n * 1e6
        figures[f"tool_loop_{n}_us"] = min(loop) / n * 1e6
        figures[f"agent_vs_loop_{n}"] = statistics.median(
            r for s in samples for r in _ratios(s[f"calls_{n}"])
        )
        each = [statistics.median(_ratios(s[f"calls_{n}"])) for s in samples]
        figures[f"agent_vs_loop_{n}_lowest"] = min(each)
        figures[f"agent_vs_loop_{n}_highest"] = max(each)
    for name in ("agent_path", "tool_loop"):
        figures[f"{name}_flatness"] = statistics.median(
            r for s in samples for r in _ratios(s[f"{name}_flatness"])
        )
    figures["agent_path_processes"] = count
    _print(figures)
    return figures


def _print(f: dict[str, float]) -> None:
    processes = int(f["agent_path_processes"])
    print(
        "agent path: per tool call through create_agent, against a plain tool-calling loop "
        f"({processes} process{'es' if processes != 1 else ''})"
    )
    for n in SIZES:
        spread = (
            f" (processes {f[f'agent_vs_loop_{n}_lowest']:.2f}–"
            f"{f[f'agent_vs_loop_{n}_highest']:.2f}×)"
            if processes > 1
            else ""
        )
        print(
            f"  N={n:<4} agent path {f[f'agent_path_{n}_us']:7.0f} µs/call   "
            f"tool loop {f[f'tool_loop_{n}_us']:7.0f} µs/call   "
            f"ratio {f[f'agent_vs_loop_{n}']:.2f}× (target ≤ 1.15×){spread}"
        )
    print(
        f"  per call at N=200 / at N=25: agent path {f['agent_path_flatness']:.2f}× "
        f"(target ≤ 1.3×), tool loop {f['tool_loop_flatness']:.2f}×"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few pairs in one process")
    parser.add_argument(
        "--processes", type=int, default=None, help=f"fresh processes (default {PROCESSES})"
    )
    parser.add_argument(
        "--timings", action="store_true", help="measure here and print the raw timings as JSON"
    )
    args = parser.parse_args()
    if args.timings:
        print(json.dumps(measure(quick=args.quick)))
    else:
        main(quick=args.quick, processes=args.processes)
