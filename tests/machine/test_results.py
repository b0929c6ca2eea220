"""Tool results reach the plan as the tool returned them, the same on every path.

The documented rules (``docs/language.md``, *Values*): a bool is 1 or 0, a number is itself,
text is the text exactly, anything else is JSON (a pydantic model's ``model_dump(mode="json")``,
an enum by its value, a date in ISO form). On the agent path the plan reads the tool's own
return value, not the text the agent's tool node wrote for the model: nothing is re-parsed or
cut. Every model reply here is written by hand.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
from typing import Any

import pytest
from conftest import asm
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command
from pydantic import BaseModel

from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.nodes import AToolsPlannerNode, ToolsPlannerNode
from llassembly.integration.record import KEY

PATHS = ["agent", "agent-async", "graph", "node", "anode"]


class Transaction(BaseModel):
    id: int
    subject: str
    amount: float


class Colour(enum.Enum):
    RED = "red"


NOTICE = "x Executed instead: y\n\nTool response:\nz"
CASES: dict[str, tuple[Any, Any, Any]] = {
    # name: (annotation, returned value, what the plan holds)
    "pydantic model": (Transaction, Transaction(id=6, subject="Rent", amount=900.5),
                       '{"id":6,"subject":"Rent","amount":900.5}'),
    "list of models": (list[Transaction], [Transaction(id=1, subject="a", amount=2.0)],
                       '[{"id":1,"subject":"a","amount":2.0}]'),
    "empty list": (list[int], [], "[]"),
    "dicts with a type key": (list[dict[str, Any]], [{"type": "text", "text": "hi"}],
                              '[{"type":"text","text":"hi"}]'),
    "enum": (Colour, Colour.RED, "red"),
    "date": (datetime.date, datetime.date(2024, 3, 1), "2024-03-01"),
    "datetime": (datetime.datetime, datetime.datetime(2024, 3, 1, 10, 30),
                 "2024-03-01T10:30:00"),
    "set": (set[int], {3}, "[3]"),
    "bytes": (bytes, b"abc", "abc"),
    "text that reads as a bool": (str, "true", "true"),
    "text that reads as JSON": (str, "[1, 2]", "[1, 2]"),
    "text holding the edit notice": (str, NOTICE, NOTICE),
    "a bool": (bool, True, 1),
    "a float": (float, 2.5, 2.5),
    "a whole float": (float, 3.0, 3.0),
    "none": (None, None, None),
}  # fmt: skip


def _tool(annotation: Any, value: Any) -> BaseTool:
    def fetch() -> Any:
        """Fetch the thing."""
        return value

    fetch.__annotations__ = {"return": annotation}
    return tool(fetch)


def _run(path: str, tools: list[BaseTool], plan: str) -> dict[str, Any]:
    model = ScriptedChatModel(replies=[asm(plan)])
    request = {"messages": [HumanMessage("go")]}
    if path.startswith("agent") or path == "graph":
        execution = "graph" if path == "graph" else "agent"
        app = create_agent(
            model, tools=tools, middleware=[ToolsPlannerMiddleware(execution=execution)]
        )
        out = asyncio.run(app.ainvoke(request)) if path.endswith("async") else app.invoke(request)
        messages = out["messages"]
    elif path == "node":
        messages = ToolsPlannerNode(model, tools)(request, {})["messages"]
    else:
        messages = asyncio.run(AToolsPlannerNode(model, tools)(request, {}))["messages"]
    final: dict[str, Any] = messages[-1].response_metadata[KEY]
    return final


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_result_reaches_the_plan_as_the_tool_returned_it(path: str, case: str) -> None:
    annotation, value, held = CASES[case]
    if annotation is None:
        final = _run(path, [_tool(None, value)], "CALL fetch")
        assert final["status"] == "finished" and final["registers"] == {}
        return
    final = _run(path, [_tool(annotation, value)], "CALL fetch\nPOP R1")
    assert final["status"] == "finished", final.get("error")
    got = final["registers"].get("R1", 0)
    assert got == held and type(got) is type(held)
    if isinstance(held, str) and held[:1] in "[{":
        json.loads(got)  # JSON text the plan can pass on


@pytest.mark.parametrize("path", PATHS)
def test_a_deeply_nested_result_is_a_clear_failure_naming_the_tool_and_line(path: str) -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    final = _run(path, [_tool(list[Any], deep)], "CALL fetch\nPOP R1")
    assert final["status"] == "stopped"
    assert "fetch" in final["error"]["detail"] and final["error"]["line"] == 3


class _Rewrite(AgentMiddleware[Any, Any]):
    """A user's ``wrap_tool_call`` middleware that rewrites a result after the tool: it
    redacts a card number, and corrects a count."""

    @staticmethod
    def _rewritten(out: Any) -> Any:
        if isinstance(out, ToolMessage):
            text = str(out.content).replace("4111-1111-1111-1111", "[REDACTED]")
            out.content = "42" if text == "41" else text
        return out

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._rewritten(handler(request))

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._rewritten(await handler(request))


def _with_middleware(path: str, tools: list[BaseTool], plan: str) -> list[Any]:
    """The turn's messages, with :class:`_Rewrite` where each path applies a user's tool
    middleware to a plan's calls (the agent's own middleware on the agent path,
    ``tool_middleware=`` elsewhere)."""
    model = ScriptedChatModel(replies=[asm(plan)])
    request = {"messages": [HumanMessage("go")]}
    if path.startswith("agent"):
        app = create_agent(model, tools=tools, middleware=[ToolsPlannerMiddleware(), _Rewrite()])
        out = asyncio.run(app.ainvoke(request)) if path.endswith("async") else app.invoke(request)
    elif path == "graph":
        planner = ToolsPlannerMiddleware(execution="graph", tool_middleware=[_Rewrite()])
        out = create_agent(model, tools=tools, middleware=[planner]).invoke(request)
    elif path == "node":
        out = ToolsPlannerNode(model, tools, tool_middleware=[_Rewrite()])(request, {})
    else:
        out = asyncio.run(
            AToolsPlannerNode(model, tools, tool_middleware=[_Rewrite()])(request, {})
        )
    return list(out["messages"])


@pytest.mark.parametrize("path", PATHS)
def test_a_result_a_middleware_rewrote_is_what_the_plan_reads(path: str) -> None:
    """A ``wrap_tool_call`` middleware that redacts a result decides what the plan reads, as
    it decides what the agent sees: the card number never reaches the email, the answer or
    the messages' metadata (and so never the checkpoint)."""
    sent: list[str] = []

    @tool
    def get_card(customer: str) -> str:
        """The customer's card number."""
        return "4111-1111-1111-1111"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    plan = 'PUSH "ann"\nCALL get_card\nPOP R1\nPUSH "x@example.com"\nPUSH R1\n'
    plan += 'CALL send_email\nPOP R0\nSAY "card: {R1}"'
    messages = _with_middleware(path, [get_card, send_email], plan)
    assert sent == ["[REDACTED]"]
    assert messages[-1].text == "card: [REDACTED]"
    assert "4111" not in repr([(m.content, m.response_metadata) for m in messages])


@pytest.mark.parametrize("path", PATHS)
def test_a_typed_result_a_middleware_rewrote_is_read_from_its_text(path: str) -> None:
    """A rewritten result is read as the tool's declared type, from the text the middleware
    wrote: the plan computes with the corrected count."""

    @tool
    def count() -> int:
        """How many there are."""
        return 41

    messages = _with_middleware(path, [count], 'CALL count\nPOP R1\nADD R1, 1\nSAY "{R1}"')
    assert messages[-1].text == "43"


def test_a_tools_command_that_answers_no_call_is_the_calls_failure_in_the_emulator() -> None:
    """As on every planner path (the agent's tool node refuses it): a ``Command`` whose update
    holds no ``ToolMessage`` is no result, not an empty text."""
    from llassembly import AsmRuntimeError, Emulator, parse

    @tool
    def setter(x: int) -> Command:  # type: ignore[type-arg]
        """Set x in the agent's state."""
        return Command(update={"x": x})

    with pytest.raises(
        AsmRuntimeError, match=r"^line 2: tool 'setter': .*no ToolMessage"
    ) as caught:
        Emulator(parse('PUSH 3\nCALL setter\nSAY "done"'), [setter]).run()
    assert caught.value.line == 2
