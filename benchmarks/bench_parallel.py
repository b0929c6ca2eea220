"""Independent calls at once: a fan-out of five slow calls, then a branch on their results.

The task asks for the temperature of five cities (``get_temperature`` sleeps a simulated API
latency, 300 ms) and answers which one is warmest and whether it is hot. Measured through
``create_agent``, wall time of one turn, with a scripted model that sleeps a simulated model
latency (500 ms) per call:

* **planner, agent path** and **planner, graph path**: ``ToolsPlannerMiddleware`` running one
  plan (five ``CALL get_temperature``, then ``MAXSD`` and a ``CMP``/``JL`` branch), with
  ``parallel_tools=["get_temperature"]`` and without;
* **tool-calling loop**: a plain ``create_agent`` whose model asks for the five calls in one
  ``AIMessage`` (parallel tool calls, as capable models do), then answers.

Targets: with ``parallel_tools`` a turn takes at most 1.4 x one call's latency plus the
model's; without, at least 5 x one call's latency. Each figure is the best of a few runs.

Run: ``python -m benchmarks.bench_parallel [--quick]`` (quick: 30 ms calls, 50 ms model).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool

from llassembly import ToolsPlannerMiddleware

CITIES = ("Paris", "Oslo", "Cairo", "Lima", "Perth")
TEMPERATURES = {"Paris": 19.5, "Oslo": 8.0, "Cairo": 31.0, "Lima": 18.0, "Perth": 24.5}
PLAN = (
    "```asm\n"
    + "".join(f'PUSH "{city}"\nCALL get_temperature\n' for city in CITIES)
    + "POP R5\nPOP R4\nPOP R3\nPOP R2\nPOP R1\n"
    + "MOVSD R6, R1\nMAXSD R6, R2\nMAXSD R6, R3\nMAXSD R6, R4\nMAXSD R6, R5\n"
    + 'CMP R6, 30\nJL mild\nMOV R7, "hot"\nJMP done\nmild:\nMOV R7, "mild"\ndone:\n'
    + "```"
)


class _SlowModel(BaseChatModel):
    """Answers call k with reply k after ``latency`` seconds (a benchmark double)."""

    replies: list[AIMessage]
    latency: float = 0.0
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "slow-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        time.sleep(self.latency)
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])


def weather_tool(latency: float) -> BaseTool:
    """``get_temperature`` sleeping ``latency`` seconds per call."""

    @tool
    def get_temperature(city: str) -> float:
        """The temperature in a city, in degrees Celsius."""
        time.sleep(latency)
        return TEMPERATURES[city]

    return get_temperature


def planner_turn(
    execution: str, parallel: bool, model_latency: float, tool_latency: float
) -> Callable[[], int]:
    """One planner turn (checked); returns its model calls."""
    model = _SlowModel(replies=[AIMessage(PLAN)], latency=model_latency)
    marked = ["get_temperature"] if parallel else False
    planner = ToolsPlannerMiddleware(execution=execution, parallel_tools=marked)  # type: ignore[arg-type]
    agent = create_agent(model, tools=[weather_tool(tool_latency)], middleware=[planner])

    def run() -> int:
        model.calls = 0
        out = agent.invoke({"messages": [HumanMessage("Which city is warmest? Is it hot?")]})
        meta = out["messages"][-1].response_metadata["llassembly"]
        if meta["registers"].get("R6") != 31.0 or meta["registers"].get("R7") != "hot":
            raise RuntimeError(f"the plan did not run as expected: {meta}")
        return model.calls

    return run


def tool_loop_turn(model_latency: float, tool_latency: float) -> Callable[[], int]:
    """A plain ``create_agent`` turn: five calls in one AIMessage, then the answer."""
    calls = [
        {"name": "get_temperature", "args": {"city": c}, "id": f"call_{c}", "type": "tool_call"}
        for c in CITIES
    ]
    replies = [AIMessage("", tool_calls=calls), AIMessage("Cairo is warmest, at 31 °C: hot.")]
    model = _SlowModel(replies=replies, latency=model_latency)
    agent = create_agent(model, tools=[weather_tool(tool_latency)])

    def run() -> int:
        model.calls = 0
        agent.invoke({"messages": [HumanMessage("Which city is warmest? Is it hot?")]})
        return model.calls

    return run


def _best(run: Callable[[], int], runs: int) -> tuple[float, int]:
    """Least wall time of ``runs`` turns (after one warm-up) and the turn's model calls."""
    run()
    best, trips = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        trips = run()
        best = min(best, time.perf_counter() - start)
    return best, trips


def main(quick: bool = False) -> dict[str, float]:
    """Measure and print the figures; return them by name."""
    model_latency, tool_latency = (0.05, 0.03) if quick else (0.5, 0.3)
    runs = 1 if quick else 3
    figures: dict[str, float] = {
        "parallel_model_latency_s": model_latency,
        "parallel_tool_latency_s": tool_latency,
    }
    for execution in ("agent", "graph"):
        for parallel in (True, False):
            key = f"parallel_{execution}_{'on' if parallel else 'off'}"
            turn = planner_turn(execution, parallel, model_latency, tool_latency)
            seconds, trips = _best(turn, runs)
            figures[f"{key}_s"], figures[f"{key}_trips"] = seconds, trips
    seconds, trips = _best(tool_loop_turn(model_latency, tool_latency), runs)
    figures["parallel_loop_s"], figures["parallel_loop_trips"] = seconds, trips
    print(table(figures))
    return figures


def table(f: dict[str, float]) -> str:
    """The figures as a Markdown table."""
    tool_s, model_s = f["parallel_tool_latency_s"], f["parallel_model_latency_s"]
    rows = [
        ("planner, agent path, `parallel_tools`", "parallel_agent_on"),
        ("planner, graph path, `parallel_tools`", "parallel_graph_on"),
        ("planner, agent path, sequential", "parallel_agent_off"),
        ("planner, graph path, sequential", "parallel_graph_off"),
        ("tool-calling loop (5 calls in one AIMessage)", "parallel_loop"),
    ]
    lines = [
        f"Fan-out of 5 calls of {tool_s * 1000:.0f} ms, then a branch; "
        f"model {model_s * 1000:.0f} ms per call.",
        "",
        "| run | model round trips | seconds | x one call's latency (beyond the model's) |",
        "|---|---|---|---|",
    ]
    for label, key in rows:
        seconds, trips = f[f"{key}_s"], int(f[f"{key}_trips"])
        beyond = (seconds - trips * model_s) / tool_s
        lines.append(f"| {label} | {trips} | {seconds:.2f} | {beyond:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller latencies, one run")
    main(quick=parser.parse_args().quick)
    sys.exit(0)
