"""What provenance costs: the machine and the agent path, without and with data-flow policies.

Run from the repository root::

    python -m benchmarks.bench_dataflow          # full run (about 30 s)
    python -m benchmarks.bench_dataflow --quick  # smoke run (a few seconds)

Three settings of the same plans, side by side in one run:

* ``none``: no data-flow policies. Nothing is wrapped: the compiled steps are the ones a
  machine without the feature runs (checked here: no step is a provenance wrapper, the state
  keeps no shadow). What is left is one ``is None`` test per tool call.
* ``other tool``: a policy about a tool the plan never calls. Every step that writes keeps
  its sources (the shadow), no call is checked.
* ``checked``: a policy on the called tool's argument (allowing its own results): the shadow
  plus the check before each call.

Figures: µs per pure instruction (a loop that reads a result, adds, copies, compares: the
writes provenance follows), µs per emulator iteration with one tool call, and CPU time per call
through ``create_agent`` + ``ToolsPlannerMiddleware`` (the agent path, zero-latency model and
tools), each the median of several rounds (one run of each setting per round), and each
setting's ratio to ``none``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence

from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from llassembly import ToolsPlannerMiddleware, only_from
from llassembly.analysis.policies import DataFlowPolicy
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from
from llassembly.machine.steps import compile_program

__all__ = ["SETTINGS", "main"]


def inc(x: int) -> int:
    """The tool the plans call."""
    return x + 1


def other(x: int) -> int:
    """A tool the plans never call."""
    return x


SETTINGS: dict[str, tuple[DataFlowPolicy, ...]] = {
    "none": (),
    "other tool": (only_from("other", "x"),),
    "checked": (only_from("inc", "x", ["inc"]),),
}
_PURE = "MOV R1, 0\nloop: MOV R2, R1\nADD R2, 3\nINC R1\nCMP R1, {n}\nJL loop"
_CALLS = "MOV R1, 0\nloop: PUSH R1\nCALL inc\nPOP R1\nMOV R2, R1\nADD R2, 3\nCMP R1, {n}\nJL loop"


def _program(source: str) -> Program:
    parsed = parse(source)
    if not isinstance(parsed, Program):
        raise TypeError("benchmark plan did not parse as code")
    return parsed


def _cpu_once(run: Callable[[], object]) -> float:
    """CPU seconds of one run, with the garbage of earlier runs collected before it (and the
    collector off during it, so one setting does not pay for another's garbage)."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        run()
        return time.process_time() - start
    finally:
        gc.enable()


def _interleaved(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median CPU seconds of each run, the runs taken in turn (one of each per round), so a
    slow spell of the shared machine falls on every setting alike. CPU time: other processes
    count less than in wall time."""
    for run in runs.values():
        run()  # warm up: compile, import lazily loaded parts
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(_cpu_once(run))
    return {name: statistics.median(found) for name, found in times.items()}


def _emulator_run(
    source: str, per: int, n: int, policies: Sequence[DataFlowPolicy]
) -> Callable[[], object]:
    """A run of ``source`` (``per`` instructions an iteration, ``n`` iterations)."""
    externs = externs_from([inc, other])
    compiled = compile_program(
        _program(source.format(n=n)), externs, max_stack_depth=256, dataflow=policies
    )
    wrapped = [getattr(s, "__name__", "") == "step_with_sources" for s in compiled.steps]
    if not policies and (any(wrapped) or compiled.dataflow is not None):
        raise RuntimeError("a program compiled without policies has wrapped steps")
    limit = 2 + per * n

    def run() -> object:
        emu = Emulator(compiled, max_instructions_to_exec=limit, max_tool_calls=n + 1)
        result = emu.run()
        if (emu.state.provenance is None) != (not policies):
            raise RuntimeError("the machine kept provenance it should not, or none it should")
        return result

    return run


_AGENT_PLAN = """```asm
    MOV R1, 0
again:
    PUSH R1
    CALL inc_tool
    POP R1
    CMP R1, {n}
    JL again
```"""


@tool
def inc_tool(x: int) -> int:
    """Return x + 1."""
    return x + 1


@tool
def other_tool(x: int) -> int:
    """Return x."""
    return x


_AGENT_SETTINGS: dict[str, tuple[DataFlowPolicy, ...]] = {
    "none": (),
    "other tool": (only_from("other_tool", "x"),),
    "checked": (only_from("inc_tool", "x", ["inc_tool"]),),
}


def _agent_run(n: int, policies: Sequence[DataFlowPolicy]) -> Callable[[], object]:
    """A turn whose plan makes ``n`` calls, through ``create_agent`` + the middleware."""
    plan = AIMessage(_AGENT_PLAN.format(n=n))
    request = {"messages": [HumanMessage("Count.")]}

    def run() -> object:
        model = GenericFakeChatModel(messages=iter([plan]))
        planner = ToolsPlannerMiddleware(plan_policy=list(policies))
        agent = create_agent(model, tools=[inc_tool, other_tool], middleware=[planner])
        out = agent.invoke(request)
        meta = out["messages"][-1].response_metadata["llassembly"]
        if meta["status"] != "finished" or meta["tool_calls"] != n:
            raise RuntimeError(f"the plan did not finish: {meta}")
        return out

    return run


def main(quick: bool = False) -> dict[str, dict[str, float]]:
    """The figures per setting (see the module doc)."""
    n, calls, agent_calls, repeats = (2_000, 500, 10, 3) if quick else (50_000, 10_000, 50, 9)
    pure = _interleaved(
        {name: _emulator_run(_PURE, 5, n, p) for name, p in SETTINGS.items()}, repeats
    )
    with_calls = _interleaved(
        {name: _emulator_run(_CALLS, 7, calls, p) for name, p in SETTINGS.items()}, repeats
    )
    agent = _interleaved(
        {name: _agent_run(agent_calls, p) for name, p in _AGENT_SETTINGS.items()}, repeats
    )
    return {
        name: {
            "us_per_pure_iteration": pure[name] / n * 1e6,
            "us_per_call_iteration": with_calls[name] / calls * 1e6,
            "agent_ms_per_call": agent[name] / agent_calls * 1e3,
        }
        for name in SETTINGS
    }


def report(figures: dict[str, dict[str, float]]) -> str:
    """The figures as a table, with each setting's ratio to ``none``."""
    base = figures["none"]
    rows = [
        "| setting | µs per pure iteration (5 instr.) | µs per iteration with a call | agent "
        "path, CPU ms per call |",
        "|---|---|---|---|",
    ]
    for name, row in figures.items():
        cells = [
            f"{row[key]:.2f} ({row[key] / base[key]:.2f}×)"
            for key in ("us_per_pure_iteration", "us_per_call_iteration", "agent_ms_per_call")
        ]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    print(report(main(quick=parser.parse_args().quick)))
