"""Differential fuzz: the same plan and tools on every path give the same calls, arguments,
answer and final state.

The paths: ``create_agent`` + ``ToolsPlannerMiddleware`` on its agent path and on its graph
path, with ``invoke`` and ``ainvoke``, and ``ToolsPlannerNode`` / ``AToolsPlannerNode``. The
tools return every shape a real toolset does (pydantic records and lists of them, empty lists,
dicts with a ``"type"`` key, enums, dates, text that looks like JSON or a boolean, text holding
the human-in-the-loop notice, numbers, tuples); plans pass results on to other calls, so what
a plan got is checked through what it sends on. Fixed seed (derandomized); the plans are
written by the test, not by a model.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
from typing import Any

from conftest import asm
from fakes import ScriptedChatModel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.nodes import AToolsPlannerNode, ToolsPlannerNode
from llassembly.integration.record import KEY

PLANS = 40
"""Random plans tried (each on every path)."""


class Row(BaseModel):
    id: int
    name: str


class Mood(enum.Enum):
    CALM = "calm"


RESULTS: dict[str, tuple[Any, Any]] = {
    "row": (Row, Row(id=1, name="a")),
    "rows": (list[Row], [Row(id=2, name="b"), Row(id=3, name="c")]),
    "none_yet": (list[Row], []),
    "blocks": (list[dict[str, Any]], [{"type": "text", "text": "t"}]),
    "mood": (Mood, Mood.CALM),
    "day": (datetime.date, datetime.date(2024, 2, 29)),
    "yes_text": (str, "true"),
    "json_text": (str, "[1, 2]"),
    "notice_text": (str, "a Executed instead: b\n\nTool response:\nc"),
    "count": (int, 7),
    "ratio": (float, 0.5),
    "flag": (bool, False),
    "pair": (tuple[int, str], (4, "four")),
}
SENT: list[tuple[str, Any]] = []


def _source(name: str, annotation: Any, value: Any) -> BaseTool:
    def fetch() -> Any:
        return value

    fetch.__name__ = name
    fetch.__doc__ = f"Return the {name}."
    fetch.__annotations__ = {"return": annotation}
    return tool(fetch)


@tool
def echo(value: str) -> str:
    """Send a value on (it is recorded as it arrives)."""
    SENT.append(("echo", value))
    return value


@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    SENT.append(("add", (a, b)))
    return a + b


TOOLS = [*(_source(n, a, v) for n, (a, v) in RESULTS.items()), echo, add]


@st.composite
def plans(draw: st.DrawFn) -> str:
    """A plan fetching some results and sending each on: text to ``echo``, whole numbers
    through ``add`` too, and every register in the answer."""
    names = draw(st.lists(st.sampled_from(sorted(RESULTS)), min_size=1, max_size=4))
    lines: list[str] = []
    registers: list[str] = []
    for name in names:
        lines.append(f"CALL {name}")
        count = 2 if name == "pair" else 1
        for _ in range(count):
            register = f"R{len(registers) + 1}"
            registers.append(register)
            lines.append(f"POP {register}")
            if name in ("count", "flag") or (name == "pair" and len(registers) % 2):
                lines += [f"PUSH {register}", "PUSH 1", "CALL add", f"POP {register}"]
            else:
                lines += [f"PUSH {register}", "CALL echo", "POP R0"]
    lines.append('SAY "' + " | ".join(f"{{{r}}}" for r in registers) + '"')
    return asm("\n".join(lines))


def _final(messages: list[Any]) -> tuple[Any, ...]:
    final = messages[-1]
    meta = final.response_metadata[KEY]
    calls = [
        (c["name"], c["args"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    ]
    return final.text, meta["status"], meta["registers"], calls


def _on(path: str, plan: str) -> tuple[Any, ...]:
    SENT.clear()
    model = ScriptedChatModel(replies=[plan])
    request = {"messages": [HumanMessage("go")]}
    if path.startswith("node"):
        node_class = AToolsPlannerNode if path.endswith("async") else ToolsPlannerNode
        node = node_class(model, TOOLS)
        out = asyncio.run(node(request, {})) if path.endswith("async") else node(request, {})
    else:
        planner = ToolsPlannerMiddleware(execution="graph" if "graph" in path else "agent")
        app = create_agent(model, tools=TOOLS, middleware=[planner])
        out = asyncio.run(app.ainvoke(request)) if path.endswith("async") else app.invoke(request)
    return (*_final(out["messages"]), list(SENT))


PATHS = ["agent", "agent-async", "graph", "graph-async", "node", "node-async"]


@settings(
    max_examples=PLANS,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(plans())
def test_every_path_gives_the_same_calls_answer_and_state(plan: str) -> None:
    seen = {path: _on(path, plan) for path in PATHS}
    first = seen["agent"]
    assert first[1] == "finished", first
    for path, outcome in seen.items():
        assert outcome == first, (path, plan)
