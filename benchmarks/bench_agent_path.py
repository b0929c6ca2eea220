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
core. The two sides run in back-to-back pairs (alternating which goes first); a ratio is the
median of the ratios within pairs, so a slow spell of the machine cannot land on one side of
it only, and a per-call figure is a side's fastest run.

Run: ``python -m benchmarks.bench_agent_path [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from llassembly import ToolsPlannerMiddleware

from .bench_integration import LOOP, inc

SIZES = (25, 200)


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


def _paired(
    first: Callable[[], None], second: Callable[[], None], pairs: int
) -> tuple[float, float, float]:
    """Two runs measured in ``pairs`` back-to-back pairs (CPU seconds).

    Returns each run's least time and the median, over the pairs, of first / second. The two
    runs of a pair meet the same machine conditions, and the pair order alternates so neither
    side always runs first; the median ratio is steady where single timings drift. Garbage
    from earlier runs is collected before each run, so a collection it triggers is not
    charged to whichever run happens to be going.
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
    ratio = statistics.median(a / b for a, b in zip(*times, strict=True))
    return min(times[0]), min(times[1]), ratio


def _repeated(run: Callable[[], None], times: int) -> Callable[[], None]:
    def again() -> None:
        for _ in range(times):
            run()

    return again


def agent_path_run(n: int) -> Callable[[], None]:
    """One turn whose plan makes ``n`` calls on the agent path (checked each time)."""
    plan = AIMessage(LOOP.format(n=n))
    planner = ToolsPlannerMiddleware(max_tool_calls=n + 1, max_instructions_to_exec=6 * n + 10)
    request = {"messages": [HumanMessage("count")]}

    model = _Replies(replies=[plan])
    agent = create_agent(model, tools=[inc], middleware=[planner])

    def run() -> None:
        model.calls = 0
        result = agent.invoke(request, {"recursion_limit": 3 * n + 20})
        meta = result["messages"][-1].response_metadata["llassembly"]
        if meta["tool_calls"] != n or model.calls != 1:
            raise RuntimeError(f"the plan did not run as expected: {meta}")

    return run


def tool_loop_run(n: int) -> Callable[[], None]:
    """A plain ``create_agent`` turn making the same ``n`` calls, one per model turn."""
    replies = [
        AIMessage(
            "",
            tool_calls=[{"name": "inc", "args": {"x": i}, "id": f"call_{i}", "type": "tool_call"}],
        )
        for i in range(n)
    ]
    replies.append(AIMessage("Done."))
    request = {"messages": [HumanMessage("count")]}

    model = _Replies(replies=replies)
    agent = create_agent(model, tools=[inc])

    def run() -> None:
        model.calls = 0
        agent.invoke(request, {"recursion_limit": 3 * n + 20})
        if model.calls != n + 1:
            raise RuntimeError("the tool-calling loop did not make every call")

    return run


def main(quick: bool = False) -> dict[str, float]:
    """Measure and print the figures; return them by name."""
    figures: dict[str, float] = {}
    runs: dict[tuple[str, int], Callable[[], None]] = {}
    for n in SIZES:
        pairs = (2 if quick else 25) if n > 50 else (3 if quick else 101)
        runs["agent", n], runs["loop", n] = agent_path_run(n), tool_loop_run(n)
        agent_s, loop_s, ratio = _paired(runs["agent", n], runs["loop", n], pairs)
        figures[f"agent_path_{n}_us"] = agent_s / n * 1e6
        figures[f"tool_loop_{n}_us"] = loop_s / n * 1e6
        figures[f"agent_vs_loop_{n}"] = ratio
    # Flatness, side by side too: one turn of 200 calls against 8 turns of 25 (200 calls).
    small, large = SIZES
    for side, name in (("agent", "agent_path"), ("loop", "tool_loop")):
        repeat = _repeated(runs[side, small], large // small)
        _, _, growth = _paired(runs[side, large], repeat, 2 if quick else 15)
        figures[f"{name}_flatness"] = growth
    _print(figures)
    return figures


def _print(f: dict[str, float]) -> None:
    print("agent path: per tool call through create_agent, against a plain tool-calling loop")
    for n in SIZES:
        print(
            f"  N={n:<4} agent path {f[f'agent_path_{n}_us']:7.0f} µs/call   "
            f"tool loop {f[f'tool_loop_{n}_us']:7.0f} µs/call   "
            f"ratio {f[f'agent_vs_loop_{n}']:.2f}× (target ≤ 1.00×)"
        )
    print(
        f"  per call at N=200 / at N=25: agent path {f['agent_path_flatness']:.2f}× "
        f"(target ≤ 1.3×), tool loop {f['tool_loop_flatness']:.2f}×"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, one run (CI smoke run)")
    main(quick=parser.parse_args().quick)
