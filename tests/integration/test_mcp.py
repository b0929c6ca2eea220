"""MCP tools, as most LangChain users get tools: a real MCP server (``tests/mcp_shop.py``, the
``mcp`` package's server over stdio, started as a subprocess), its tools loaded with
``langchain-mcp-adapters``, and plans that call them through ``create_agent`` +
``ToolsPlannerMiddleware`` and through ``ToolsPlannerNode``.

The tools declare their arguments in a JSON schema (no Python signature to read) and are
async only; the server declares output schemas for its structured results. The model's plans
are hand-written replies (``ScriptedChatModel``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import TESTS, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools as adapter_tools
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import (
    Emulator,
    ToolExecutionError,
    ToolsPlannerMiddleware,
    ToolsPlannerNode,
    build_system_prompt,
    check,
    externs_from,
    load_mcp_tools,
    parse,
)

SERVER = TESTS / "mcp_shop.py"

# Reads a structured result by path, leaves two optional arguments out, reads a list of
# records, then writes a note: every kind of tool the server has but the raising one.
SHOPPING = """
    PUSH 1
    CALL get_order          ; an Order, with its output schema
    POP R1
    MOV R2, R1.customer.name
    PUSH R2
    PUSH NONE               ; limit: the server's default
    PUSH NONE               ; status: the server's default
    CALL search_orders
    POP R3
    LEN R4, R3.result
    PUSH "{R2} has {R4} orders"
    CALL add_note
    POP R5
    SAY "{R2} ({R1.customer.email}) bought {R1.items[0].qty} x {R1.items[0].sku}; {R5.result}"
"""
SAID = "Ada (ada@example.com) bought 2 x A-1; noted (1 notes)"


@asynccontextmanager
async def shop() -> AsyncIterator[tuple[dict[str, BaseTool], Any]]:
    """A fresh server process and its tools (with their output schemas), and the session."""
    client = MultiServerMCPClient(
        {"shop": {"command": sys.executable, "args": [str(SERVER)], "transport": "stdio"}}
    )
    async with client.session("shop") as session:
        tools = await load_mcp_tools(session)
        yield {t.name: t for t in tools}, session


async def server_calls(tools: dict[str, BaseTool]) -> list[str]:
    """The tool bodies that ran in the server, in order."""
    text = (await tools["server_calls"].ainvoke({})) or ""
    if isinstance(text, list):
        text = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in text)
    return [line for line in str(text).splitlines() if line]


def _calls(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.name or "", m.status) for m in messages if isinstance(m, ToolMessage)]


async def test_mcp_tools_are_described_by_their_declared_schemas() -> None:
    """Arguments, defaults, types and constraints from the input schema; results from the
    output schema; the prompt shows them."""
    async with shop() as (tools, _):
        externs = externs_from(list(tools.values()))
        search = externs["search_orders"]
        assert [(p.name, p.has_default, p.default_text) for p in search.params] == [
            ("customer", False, ""),
            ("limit", True, "5"),
            ("status", True, "None"),
        ]
        prompt = build_system_prompt(externs)
        assert "search_orders(customer: str, limit: int = 5, status: str | None = None)" in prompt
        assert "get_order(order_id: int) -> Order" in prompt
        assert "Order {id: int, customer: Customer, items: list[Item]" in prompt
        assert "Customer {name: str, email: str}" in prompt
        assert 'reason: one of "loyalty", "damaged", "promo"' in prompt or (
            'one of "loyalty", "damaged", "promo"' in prompt
        )
        assert "greet(name: str) -> str" in prompt  # no output schema: its text


async def test_the_adapter_alone_gives_working_tools_whose_results_are_any() -> None:
    """Tools straight from ``langchain-mcp-adapters`` (no output schemas) work too: their
    arguments are read from the schema, their results are "any"."""
    client = MultiServerMCPClient(
        {"shop": {"command": sys.executable, "args": [str(SERVER)], "transport": "stdio"}}
    )
    async with client.session("shop") as session:
        externs = externs_from(await adapter_tools(session))
    assert [p.name for p in externs["apply_discount"].params] == ["order_id", "percent", "reason"]
    assert externs["get_order"].result_types == (str,)  # its content: text


async def test_prefixed_mcp_tools_keep_their_output_schemas() -> None:
    """With ``server_name`` and ``tool_name_prefix=True`` the adapter names the tools
    ``shop_get_order``...: each still gets its server's output schema."""
    client = MultiServerMCPClient(
        {"shop": {"command": sys.executable, "args": [str(SERVER)], "transport": "stdio"}}
    )
    async with client.session("shop") as session:
        tools = await load_mcp_tools(session, server_name="shop", tool_name_prefix=True)
    externs = externs_from(tools)
    order = externs["shop_get_order"]
    assert order.structured and order.result_types[0].__name__ == "Order"
    assert externs["shop_greet"].result_types == (str,) and not externs["shop_greet"].structured


async def test_mcp_tools_loaded_from_a_connection_keep_their_output_schemas() -> None:
    """The adapter's session-less mode (``session=None, connection=...``: each call opens its
    own session) works too: the output schemas are read over a session of the connection."""
    connection = {"command": sys.executable, "args": [str(SERVER)], "transport": "stdio"}
    tools = await load_mcp_tools(None, connection=connection)
    externs = externs_from(tools)
    assert externs["get_order"].structured and externs["get_order"].result_types[0].__name__ == (
        "Order"
    )
    said = await Emulator(parse(SHOPPING), tools).arun()
    assert said.answer == SAID


async def test_a_plan_calls_mcp_tools_through_create_agent() -> None:
    async with shop() as (tools, _):
        model = ScriptedChatModel(replies=[asm(SHOPPING)])
        agent = create_agent(
            model, tools=list(tools.values()), middleware=[ToolsPlannerMiddleware()]
        )
        out = await agent.ainvoke({"messages": [HumanMessage("What did order 1 buy?")]})
        final = out["messages"][-1]
        assert final.text == SAID
        assert meta(final)["status"] == "finished" and meta(final)["model_calls"] == 1
        assert _calls(out["messages"]) == [
            ("get_order", "success"),
            ("search_orders", "success"),
            ("add_note", "success"),
        ]
        assert await server_calls(tools) == [
            "get_order(1)",
            "search_orders('Ada', limit=5, status=None)",
            "add_note('Ada has 2 orders')",
        ]


async def test_a_plan_calls_mcp_tools_through_the_planner_node() -> None:
    async with shop() as (tools, _):
        model = ScriptedChatModel(replies=[asm(SHOPPING)])
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, list(tools.values())))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        out = await graph.compile().ainvoke({"messages": [HumanMessage("What did order 1 buy?")]})
        assert out["messages"][-1].text == SAID
        assert [name for name, _ in _calls(out["messages"])] == [
            "get_order",
            "search_orders",
            "add_note",
        ]


@pytest.mark.parametrize("execution", ["agent", "graph"])
async def test_a_raising_mcp_tool_stops_the_plan_with_its_line(execution: str) -> None:
    plan = "PUSH 99\nCALL cancel_order\nPOP R1\nPUSH 1\nCALL get_order"
    async with shop() as (tools, _):
        agent = create_agent(
            ScriptedChatModel(replies=[asm(plan)]),
            tools=list(tools.values()),
            middleware=[ToolsPlannerMiddleware(execution=execution)],  # type: ignore[arg-type]
        )
        out = await agent.ainvoke({"messages": [HumanMessage("cancel order 99")]})
        final = out["messages"][-1]
        assert meta(final)["status"] == "stopped"
        error = meta(final)["error"]  # the details: for the app (line 4, after 2 of prose)
        assert error["line"] == 4 and "unknown order 99" in error["message"]
        assert await server_calls(tools) == ["cancel_order(99)"]  # get_order never ran


async def test_a_constrained_mcp_argument_is_refused_before_the_run_and_at_call_time() -> None:
    """``percent`` is declared ``0 < percent <= 100``: a literal 150 is refused before the run
    with its line; a computed 150 at call time, before the server sees it."""
    async with shop() as (tools, _):
        literal = parse("PUSH 1\nPUSH 150\nPUSH NONE\nCALL apply_discount")
        [problem] = check(literal, list(tools.values()))  # type: ignore[arg-type]
        assert problem.line == 4 and "less than or equal to 100" in problem.message
        computed = "MOV R1, 100\nADD R1, 50\nPUSH 1\nPUSH R1\nPUSH NONE\nCALL apply_discount"
        agent = create_agent(
            ScriptedChatModel(replies=[asm(computed)]),
            tools=list(tools.values()),
            middleware=[ToolsPlannerMiddleware()],
        )
        out = await agent.ainvoke({"messages": [HumanMessage("discount")]})
        final = out["messages"][-1]
        assert meta(final)["status"] == "stopped" and meta(final)["error"]["line"] == 8
        assert meta(final)["error"]["type"] == "ToolArgumentError"
        assert await server_calls(tools) == []


async def test_the_emulator_reads_mcp_results_and_failures_as_the_agent_does() -> None:
    """``Emulator`` calls a tool as the agent's tool node does: a structured result is read by
    path, and a failure the adapter answers with an error message stops the plan."""
    async with shop() as (tools, _):
        found = await Emulator(parse(SHOPPING), list(tools.values())).arun()  # type: ignore[arg-type]
        assert found.answer == SAID
        failing = parse('PUSH 99\nCALL cancel_order\nPOP R1\nSAY "cancelled: {R1}"')
        with pytest.raises(ToolExecutionError) as raised:
            await Emulator(failing, list(tools.values())).arun()  # type: ignore[arg-type]
        assert raised.value.line == 2 and "unknown order 99" in str(raised.value)


class _Redacting(AgentMiddleware):
    """Blanks out the digits of every tool result: a redaction after the tool."""

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        message = await handler(request)
        return message.model_copy(update={"content": re.sub(r"\d", "#", message.text)})


async def test_a_wrapped_plain_result_a_middleware_altered_is_read_by_its_field() -> None:
    """An MCP server (FastMCP) declares a plain result as ``{"result": ...}`` and sends the bare
    value as the text: a middleware's altered text is that field's value, read by path."""
    async with shop() as (tools, _):
        plan = asm('PUSH "hi"\nCALL add_note\nPOP R1\nSAY "{R1.result}"')
        agent = create_agent(
            ScriptedChatModel(replies=[plan]),
            tools=list(tools.values()),
            middleware=[ToolsPlannerMiddleware(), _Redacting()],
        )
        out = await agent.ainvoke({"messages": [HumanMessage("Note it.")]})
        assert out["messages"][-1].text == "noted (# notes)"
