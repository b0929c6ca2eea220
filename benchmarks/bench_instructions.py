"""Machine instructions per tool call on the agent path, counted exactly (needs valgrind).

CPU time on a shared machine wanders by a few percent from one process to the next, which is
the size of the differences ``bench_agent_path`` measures. Instructions do not: callgrind
counts the instructions a process executes, the same in every run. Four agents make the same
N calls, through ``create_agent``, one model-node and one tool-node visit per call:

* **agent path**: ``create_agent`` + ``ToolsPlannerMiddleware()``, as in ``bench_agent_path``;
* **no-work planner**: a middleware that calls the model once, then answers each model turn
  with the next call it was scripted to make, keeping a counter in the agent state, with a
  pass-through ``wrap_tool_call`` (the hooks the planner needs, doing nothing): what LangChain
  and LangGraph cost for the planner's structure, the least the agent path can cost;
* **no tool hook**: the same without its ``wrap_tool_call`` (what that hook alone costs: the
  planner needs it, so that a tool's exception becomes the plan's failure);
* **tool loop**: the plain ``create_agent`` tool loop of ``bench_agent_path``.

Each side runs in its own process under callgrind, twice: warm-up turns only, then the same
plus ``--turns`` timed turns; the difference over the timed calls is the figure. Instructions
leave out what the cache does (a miss costs many of them), so they complement the CPU times of
``bench_agent_path`` rather than replace them.

Run: ``python -m benchmarks.bench_instructions [--calls 25] [--turns 10]`` (about 6 minutes on
2 cores; not part of ``python -m benchmarks``, since valgrind is not a Python package).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from .bench_agent_path import _Replies, agent_path_run, tool_loop_run
from .bench_integration import inc

_WARM_UP = 3
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


class _CountState(AgentState[Any]):
    calls_made: NotRequired[int]


class _NoWorkPlanner(AgentMiddleware[_CountState, Any]):
    """Calls the model once, then answers model turns with scripted calls (benchmark double)."""

    state_schema = _CountState

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.replies = [
            AIMessage("", tool_calls=[{"name": "inc", "args": {"x": i}, "id": f"c{i}"}])
            for i in range(calls)
        ] + [AIMessage("Done.")]

    def before_agent(self, state: Any, runtime: Any) -> None:
        """As the planner has (a node per run)."""

    def after_agent(self, state: Any, runtime: Any) -> None:
        """As the planner has (a node per run)."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        made = request.state.get("calls_made", 0)
        if made == 0:
            handler(request)  # the plan's one model call
        reply = self.replies[min(made, len(self.replies) - 1)].model_copy()
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[reply]),
            command=Command(update={"calls_made": made + 1}),
        )

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)


class _NoWorkNoToolHook(_NoWorkPlanner):
    """:class:`_NoWorkPlanner` without the ``wrap_tool_call`` hook (what that hook costs)."""

    wrap_tool_call = AgentMiddleware.wrap_tool_call  # type: ignore[assignment]


def no_work_run(n: int, planner: type[_NoWorkPlanner] = _NoWorkPlanner) -> Callable[[], None]:
    """One turn of ``n`` calls answered by a no-work planner."""
    model = _Replies(replies=[AIMessage("plan")])
    agent = create_agent(model, tools=[inc], middleware=[planner(n)])
    request = {"messages": [HumanMessage("count")]}

    def run() -> None:
        model.calls = 0
        result = agent.invoke(request, {"recursion_limit": 3 * n + 20})
        if result.get("calls_made") != n + 1 or model.calls != 1:
            raise RuntimeError("the no-work planner did not make every call")

    return run


SIDES: dict[str, Callable[[int], Callable[[], None]]] = {
    "agent path": agent_path_run,
    "no-work planner": no_work_run,
    "no tool hook": lambda n: no_work_run(n, _NoWorkNoToolHook),
    "tool loop": tool_loop_run,
}


def _turns(side: str, calls: int, turns: int) -> None:
    """The child's work: warm-up turns, then ``turns`` more."""
    run = SIDES[side](calls)
    for _ in range(_WARM_UP + turns):
        run()


def _counting(side: str, calls: int, turns: int) -> subprocess.Popen[str]:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.bench_instructions",
        "--side",
        side,
        "--calls",
        str(calls),
        "--turns",
        str(turns),
    ]
    return subprocess.Popen(
        command,
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collected(process: subprocess.Popen[str]) -> int:
    _, err = process.communicate()
    found = _COLLECTED.search(err)
    if process.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({process.returncode}):\n{err[-2000:]}")
    return int(found.group(1))


def main(calls: int = 25, turns: int = 10) -> dict[str, float]:
    """Count, print and return the instructions per call of each side."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions needs valgrind (Debian: apt-get install valgrind)")
    figures: dict[str, float] = {}
    for side in SIDES:  # two processes at a time: one per core
        base, timed = _counting(side, calls, 0), _counting(side, calls, turns)
        figures[side] = (_collected(timed) - _collected(base)) / (turns * calls)
    loop = figures["tool loop"]
    print(f"instructions per tool call, {calls} calls per turn, {turns} turns (callgrind)")
    for side, count in figures.items():
        print(f"  {side:16} {count / 1e3:8.1f} k   {count / loop:.3f}× the tool loop")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=25, help="tool calls per turn")
    parser.add_argument("--turns", type=int, default=10, help="turns counted")
    parser.add_argument("--side", choices=sorted(SIDES), help="run one side's turns (child)")
    args = parser.parse_args()
    if args.side:
        _turns(args.side, args.calls, args.turns)
    else:
        main(args.calls, args.turns)
