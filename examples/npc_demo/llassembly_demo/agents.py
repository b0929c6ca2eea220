"""The same game through ``create_agent``: one agent per unit, their tool calls interleaved.

Each unit gets a ``create_agent`` agent with :class:`~llassembly.ToolsPlannerMiddleware`, so its
plan is written, verified and run by the library's own LangGraph path (at ``"block"`` or
``"instruction"`` granularity). The agents run concurrently; a :class:`TurnGate`, applied to
every tool call of every plan as tool middleware, lets them call tools in the demo's order:
each running unit one call per turn, in unit order. The world they leave is therefore the one
the demo's turn-by-turn loop leaves (``tests/test_demo.py`` checks it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from llassembly import ToolsPlannerMiddleware
from llassembly.integration.graph import Granularity

from .run import MAX_INSTRUCTIONS, MAX_TOOL_CALLS, Order, unit_context
from .tools import UNIT_TOOLS, UnitContext
from .world import World

__all__ = ["TurnGate", "TurnGateMiddleware", "run_with_agents"]


class TurnGate:
    """A token passed round the running units in id order; a tool call needs the token.

    Args:
        unit_ids: The units taking part.
    """

    def __init__(self, unit_ids: Sequence[int]) -> None:
        self._active = sorted(unit_ids)
        self._current: int | None = self._active[0] if self._active else None
        self._condition: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._condition is None:  # created inside the running event loop
            self._condition = asyncio.Condition()
        return self._condition

    def _after(self, unit_id: int) -> int | None:
        later = [u for u in self._active if u > unit_id]
        rest = [u for u in self._active if u != unit_id]
        return later[0] if later else (rest[0] if rest else None)

    async def acquire(self, unit_id: int) -> None:
        """Wait until it is ``unit_id``'s turn."""
        cond = self._cond()
        async with cond:
            await cond.wait_for(lambda: self._current == unit_id)

    async def release(self, unit_id: int) -> None:
        """``unit_id`` made its call: the next running unit's turn."""
        cond = self._cond()
        async with cond:
            self._current = self._after(unit_id)
            if self._current is None and unit_id in self._active:
                self._current = unit_id
            cond.notify_all()

    async def leave(self, unit_id: int) -> None:
        """``unit_id``'s plan has ended: skip it from now on."""
        cond = self._cond()
        async with cond:
            following = self._after(unit_id)
            if unit_id in self._active:
                self._active.remove(unit_id)
            if self._current == unit_id:
                self._current = following
            cond.notify_all()


class TurnGateMiddleware(AgentMiddleware[Any, Any]):
    """Tool middleware: a plan's tool call waits for its unit's turn (async runs only)."""

    def __init__(self, gate: TurnGate) -> None:
        super().__init__()
        self.gate = gate

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Take the turn, make the call, pass the turn on."""
        context = cast(UnitContext, request.runtime.context)
        await self.gate.acquire(context.unit_id)
        try:
            return await handler(request)
        finally:
            await self.gate.release(context.unit_id)


async def run_with_agents(
    model: BaseChatModel,
    world: World,
    orders: Sequence[Order],
    *,
    granularity: Granularity = "block",
) -> list[dict[str, Any]]:
    """Run every order through its own ``create_agent`` agent, tool calls interleaved by turn.

    Returns:
        Each agent's final state (``messages`` ends with the planner's final message, whose
        ``response_metadata["llassembly"]`` holds the model calls and tool calls made).
    """
    gate = TurnGate([o.unit_id for o in orders])
    gate_middleware = TurnGateMiddleware(gate)
    contexts = {o.unit_id: unit_context(world, o.unit_id) for o in orders}

    async def one(order: Order) -> dict[str, Any]:
        planner = ToolsPlannerMiddleware(
            granularity=granularity,
            max_tool_calls=MAX_TOOL_CALLS,
            max_instructions_to_exec=MAX_INSTRUCTIONS,
            tool_middleware=[gate_middleware],
        )
        agent: Any = create_agent(
            model, tools=UNIT_TOOLS, middleware=[planner], context_schema=UnitContext
        )
        messages = [SystemMessage(contexts[order.unit_id]), HumanMessage(order.text)]
        try:
            state: dict[str, Any] = await agent.ainvoke(
                {"messages": messages}, context=UnitContext(world, order.unit_id)
            )
        finally:
            await gate.leave(order.unit_id)
        return state

    return list(await asyncio.gather(*(one(o) for o in orders)))
