"""One middleware instance serving two agents with different tools at the same time."""

from __future__ import annotations

import asyncio

from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from llassembly import ToolsPlannerMiddleware

CALLS: list[str] = []


@tool
async def ping(x: int) -> int:
    """Answer x + 1 after a short wait."""
    await asyncio.sleep(0.01)
    CALLS.append(f"ping {x}")
    return x + 1


@tool
async def pong(x: int) -> int:
    """Answer x * 10 after a short wait."""
    await asyncio.sleep(0.01)
    CALLS.append(f"pong {x}")
    return x * 10


async def test_shared_middleware_runs_each_agents_plan_with_that_agents_tools() -> None:
    """Hand-written plans; both agents run concurrently through one middleware instance."""
    CALLS.clear()
    shared = ToolsPlannerMiddleware()
    ping_agent = create_agent(
        ScriptedChatModel(replies=["```asm\nPUSH 1\nCALL ping\nPOP R1\n```"]),
        tools=[ping],
        middleware=[shared],
    )
    pong_agent = create_agent(
        ScriptedChatModel(replies=["```asm\nPUSH 2\nCALL pong\nPOP R1\n```"]),
        tools=[pong],
        middleware=[shared],
    )
    ping_result, pong_result = await asyncio.gather(
        ping_agent.ainvoke({"messages": [HumanMessage("ping")]}),
        pong_agent.ainvoke({"messages": [HumanMessage("pong")]}),
    )
    assert sorted(CALLS) == ["ping 1", "pong 2"]
    ping_meta = ping_result["messages"][-1].response_metadata["llassembly"]
    pong_meta = pong_result["messages"][-1].response_metadata["llassembly"]
    assert (ping_meta["registers"], pong_meta["registers"]) == ({"R1": 2}, {"R1": 20})
