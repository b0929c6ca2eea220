"""Pending results: the plans models write overlap their calls (``parallel_tools``).

Two plans in the shape models write them, each call's result popped right after its call:

* **five**: five independent ``lookup`` calls, ``PUSH``/``CALL``/``POP`` each, then a ``SAY``
  of the five results;
* **loop of ten**: a loop over a table of ten items, one ``lookup`` per item, each result
  stored in memory (``POP [got + ECX*8]``), then a ``SAY`` of the table.

``lookup`` sleeps a simulated API latency (300 ms). Each plan runs through
``create_agent`` + ``ToolsPlannerMiddleware`` with a scripted model (no latency: the figures
are the tools' time), on the agent path and on the graph path (``execution="graph"``), and
through ``ToolsPlannerNode`` in a ``StateGraph``, each sequential and with
``parallel_tools=["lookup"]``, side by side in one run. Every run is checked: the same calls,
the same results and the same answer as the sequential run.

Targets: overlapped, at most 1.4 x one call's latency for the five and 2 x for the ten.

On the agent path the agent's own tool node runs a batch's calls: LangGraph runs them on
``min(32, cores + 4)`` threads unless the run's config says ``max_concurrency`` (6 on a
2-core machine, so ten calls would run in two waves); the overlapped agent-path runs pass
``{"max_concurrency": 16}``, and the table shows the figure without it too. The graph path
sets it for its own tasks.

Run: ``python -m benchmarks.bench_overlap [--quick]`` (quick: 100 ms calls, one run). It prints;
it writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode

FIVE = (
    "```asm\n"
    + "".join(f"PUSH {100 + n}\nCALL lookup\nPOP R{n}\n" for n in range(1, 6))
    + 'SAY "{R1} {R2} {R3} {R4} {R5}"\n```'
)
TEN = (
    "```asm\n    MOV ECX, 0\nnext:\n    PUSH [items + ECX*8]\n    CALL lookup\n"
    '    POP [got + ECX*8]\n    INC ECX\n    CMP ECX, 10\n    JL next\n    SAY "{got}"\n'
    "section .data\nitems dq "
    + ", ".join(str(100 + n) for n in range(1, 11))
    + "\ngot dq 0, 0, 0, 0, 0, 0, 0, 0, 0, 0\n```"
)
PLANS = {"five": (FIVE, 5, 1.4), "ten": (TEN, 10, 2.0)}
"""name: (the model's reply, the calls it makes, the target in one call's latency)"""
SURFACES = ("agent", "graph", "node")
_CONCURRENCY = {"max_concurrency": 16}


class _Scripted(BaseChatModel):
    """Answers every call with the plan (a benchmark double without latency)."""

    reply: str

    @property
    def _llm_type(self) -> str:
        return "scripted-plan"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])


def lookup_tool(latency: float) -> BaseTool:
    """``lookup`` sleeping ``latency`` seconds per call."""

    @tool
    def lookup(item: int) -> str:
        """Look an item up by its number; returns its code."""
        time.sleep(latency)
        return f"SKU-{item}"

    return lookup


def turn(surface: str, plan: str, overlap: bool, latency: float) -> Callable[[dict[str, Any]], Any]:
    """One planner turn on ``surface``; returns what it did (see :func:`outcome`)."""
    marked: Any = ["lookup"] if overlap else False
    tools = [lookup_tool(latency)]
    if surface == "node":
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
        builder.add_node(
            "planner", ToolsPlannerNode(_Scripted(reply=plan), tools, parallel_tools=marked)
        )
        builder.add_edge(START, "planner")
        builder.add_edge("planner", END)
        app: Any = builder.compile()
    else:
        planner = ToolsPlannerMiddleware(execution=surface, parallel_tools=marked)  # type: ignore[arg-type]
        app = create_agent(_Scripted(reply=plan), tools=tools, middleware=[planner])

    def run(config: dict[str, Any]) -> Any:
        return outcome(app.invoke({"messages": [HumanMessage("Look the items up.")]}, config))

    return run


def outcome(out: dict[str, Any]) -> tuple[Any, ...]:
    """The calls (as a multiset), each call's result and the answer of a finished turn."""
    messages = out["messages"]
    final = messages[-1].response_metadata["llassembly"]
    if final["status"] != "finished":
        raise RuntimeError(f"the plan did not finish: {final}")
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = Counter(
        (calls[m.tool_call_id]["name"], str(calls[m.tool_call_id]["args"]), m.text)
        for m in messages
        if isinstance(m, ToolMessage)
    )
    return results, messages[-1].text


def _best(
    run: Callable[[dict[str, Any]], Any], config: dict[str, Any], runs: int
) -> tuple[float, Any]:
    """Least wall time of ``runs`` turns (after one warm-up) and what the turn did."""
    done = run(config)
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        again = run(config)
        best = min(best, time.perf_counter() - start)
        if again != done:
            raise RuntimeError("two runs of one turn did different things")
    return best, done


def main(quick: bool = False) -> dict[str, float]:
    """Measure and print the table; return the figures by name."""
    latency = 0.1 if quick else 0.3
    runs = 1 if quick else 3
    figures: dict[str, float] = {"overlap_tool_latency_s": latency}
    for name, (plan, _calls, _target) in PLANS.items():
        for surface in SURFACES:
            sequential, expected = _best(turn(surface, plan, False, latency), {}, runs)
            overlapped_run = turn(surface, plan, True, latency)
            overlapped, done = _best(overlapped_run, _CONCURRENCY, runs)
            if done != expected:
                raise RuntimeError(f"{name} on {surface}: overlapped, not the same calls")
            key = f"overlap_{name}_{surface}"
            figures[f"{key}_sequential_s"] = sequential
            figures[f"{key}_s"] = overlapped
            if surface == "agent":  # LangGraph's own thread pool for the tool node
                figures[f"{key}_default_pool_s"] = _best(overlapped_run, {}, runs)[0]
    print(table(figures))
    sys.stdout.flush()
    return figures


def table(f: dict[str, float]) -> str:
    """The figures as a Markdown table."""
    latency = f["overlap_tool_latency_s"]
    lines = [
        f"Calls of {latency * 1000:.0f} ms written `PUSH`/`CALL`/`POP` each (five), and a loop "
        "storing each call's result in memory (ten); model without latency. Overlapped = "
        '`parallel_tools=["lookup"]`; same calls, results and answer as sequential.',
        "",
        "| plan | path | sequential s | overlapped s | × one call | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = {
        "agent": "agent path",
        "graph": 'graph path (`execution="graph"`)',
        "node": "`ToolsPlannerNode`",
    }
    for name, (_plan, calls, target) in PLANS.items():
        for surface in SURFACES:
            key = f"overlap_{name}_{surface}"
            ratio = f[f"{key}_s"] / latency
            met = "yes" if ratio <= target else "**no**"
            lines.append(
                f"| {name} ({calls} calls) | {labels[surface]} | {f[f'{key}_sequential_s']:.2f} | "
                f"{f[f'{key}_s']:.2f} | {ratio:.2f} | ≤ {target} | {met} |"
            )
    default = [
        f"{name}: {f[f'overlap_{name}_agent_default_pool_s'] / latency:.2f}×" for name in PLANS
    ]
    lines += [
        "",
        "Agent path with LangGraph's default thread pool (no `max_concurrency` in the run's "
        f"config): {', '.join(default)} one call.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 ms calls, one run")
    main(quick=parser.parse_args().quick)
    sys.exit(0)
