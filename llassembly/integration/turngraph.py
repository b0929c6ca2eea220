"""The turn graph: the turn state machine driven from LangGraph nodes (the planner nodes).

A small graph, invoked inside the caller's node: ``model`` (a model call: a plan, a repair, a
new plan, the final answer), ``approve`` (a person decides on the plan), ``execute`` (the plan
runs as a nested plan graph). Each node does one thing the turn's record says is due
(:class:`~llassembly.integration.turn.Proceed`), hands the result to
:func:`~llassembly.integration.turn.step`, and routes by the record's phase. Every model call
and every completed tool call is checkpointed in the caller's checkpointer, so a resume after
an interrupt repeats neither.

Everything that belongs to one invocation (the model, the tools, the caller's state and
runtime) travels in the config under :data:`TURN_KEY`; the compiled graph is shared.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from llassembly.errors import ExecutionError, UsageError
from llassembly.integration.approval import read_decision
from llassembly.integration.final import Answered
from llassembly.integration.node import Node
from llassembly.integration.planner import Planner
from llassembly.integration.record import TurnRecord
from llassembly.integration.runplan import arun_plan, run_plan
from llassembly.integration.tools import ToolContext
from llassembly.integration.turn import (
    AskAnswer,
    AskModel,
    AskPerson,
    Begin,
    Decided,
    Proceed,
    Replied,
    RunPlan,
    Step,
    TurnView,
    step,
)
from llassembly.integration.views import planner_view
from llassembly.machine.drive import adrive, drive

__all__ = ["TURN_KEY", "TurnGraph", "TurnRun"]

TURN_KEY = "llassembly_turn"

ModelCall: TypeAlias = Callable[[list[BaseMessage]], AIMessage]
AModelCall: TypeAlias = Callable[[list[BaseMessage]], Awaitable[AIMessage]]


@dataclass
class TurnRun:
    """What one turn needs from its caller (live objects, never in graph state).

    Attributes:
        tools: The tools, and the caller's state and runtime for ``ToolRuntime``.
        system_prompt: The planner's system prompt (filled in).
        context: The caller's own system prompt (the final answer call's system message).
        call_model: Sends messages (system message first) to the model.
        acall_model: Async ``call_model``.
        error: The live exception of the last failed plan (to raise it as it is).
    """

    tools: ToolContext
    system_prompt: str
    context: str = ""
    call_model: ModelCall | None = None
    acall_model: AModelCall | None = None
    error: ExecutionError | None = field(default=None, repr=False)


class TurnState(TypedDict, total=False):
    """The turn graph's state (plain data)."""

    record: TurnRecord
    conversation: list[AnyMessage]
    new_messages: Annotated[list[AnyMessage], operator.add]


_Next = Literal["model", "approve", "execute", "__end__"]
_ROUTES: dict[Hashable, str] = {
    "model": "model",
    "approve": "approve",
    "execute": "execute",
    END: END,
}


def _route(state: TurnState) -> _Next:
    phase = state["record"]["phase"]
    if phase in ("planning", "answering"):
        return "model"
    if phase == "approval":
        return "approve"
    if phase == "running":
        return "execute"
    return END  # type: ignore[return-value]


class TurnGraph:
    """The turn graph of one planner (compiled once).

    Args:
        planner: The planner's options and caches.
    """

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(TurnState)
        builder.add_node("model", Node(self._model, self._amodel))
        builder.add_node("approve", Node(self._approve))
        builder.add_node("execute", Node(self._execute, self._aexecute))
        builder.add_conditional_edges(START, _route, _ROUTES)
        for name in ("model", "approve", "execute"):
            builder.add_conditional_edges(name, _route, _ROUTES)
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = builder.compile()

    def start(self, conversation: Sequence[AnyMessage], run: TurnRun) -> TurnState:
        """The graph's input for a new turn about ``conversation``."""
        first = step(None, Begin(), self._view(run, conversation, []))
        return {"record": first.record, "conversation": list(conversation), "new_messages": []}

    def config_for(self, run: TurnRun, config: RunnableConfig | None) -> RunnableConfig:
        """The config to invoke the graph with (the caller's, plus the run)."""
        base: dict[str, Any] = dict(config or {})
        configurable = {**base.get("configurable", {}), TURN_KEY: run}
        return {**base, "configurable": configurable}  # type: ignore[typeddict-item]

    # -- nodes --------------------------------------------------------------------------------

    def _view(
        self, run: TurnRun, conversation: Sequence[AnyMessage], new: Sequence[AnyMessage]
    ) -> TurnView:
        return TurnView(self.planner, run.tools.externs, [*conversation, *new], graph=True)

    def _due(self, state: TurnState, run: TurnRun) -> tuple[Step, TurnView]:
        view = self._view(run, state.get("conversation", []), state.get("new_messages", []))
        return step(state["record"], Proceed(), view), view

    def _model_body(
        self, state: TurnState, run: TurnRun
    ) -> Generator[list[BaseMessage], AIMessage, TurnState]:
        due, view = self._due(state, run)
        action = due.action
        if isinstance(action, AskModel):
            messages = [SystemMessage(run.system_prompt), *planner_view(view.messages)]
            reply = yield [*messages, *action.extra]
            done = step(due.record, Replied(reply), view)
        elif isinstance(action, AskAnswer):
            system = [SystemMessage(run.context)] if run.context else []
            reply = yield [*system, *action.messages]
            done = step(due.record, Answered([reply]), view)
        else:  # pragma: no cover - the router sends only model calls here
            raise UsageError(f"the turn's model node got {type(action).__name__}")
        return {"record": done.record, "new_messages": [*due.messages, *done.messages]}

    def _model(self, state: TurnState, config: RunnableConfig) -> TurnState:
        run: TurnRun = config["configurable"][TURN_KEY]
        if run.call_model is None:
            raise UsageError("this planner has no synchronous model; use the async entry point")
        return drive(self._model_body(state, run), run.call_model)

    async def _amodel(self, state: TurnState, config: RunnableConfig) -> TurnState:
        run: TurnRun = config["configurable"][TURN_KEY]
        if run.acall_model is None:
            raise UsageError("this planner has no async model")
        return await adrive(self._model_body(state, run), run.acall_model)

    def _approve(self, state: TurnState, config: RunnableConfig) -> TurnState:
        """Ask a person about the plan (``interrupt()``); an edit that does not pass the checks
        comes back here to ask again."""
        run: TurnRun = config["configurable"][TURN_KEY]
        due, view = self._due(state, run)
        if not isinstance(due.action, AskPerson):  # pragma: no cover - routed by phase
            raise UsageError(f"the turn's approve node got {type(due.action).__name__}")
        decision = read_decision(interrupt(due.action.request))
        done = step(due.record, Decided(decision), view)
        return {"record": done.record, "new_messages": done.messages}

    def _execute(self, state: TurnState, config: RunnableConfig) -> TurnState:
        run: TurnRun = config["configurable"][TURN_KEY]
        due, view = self._due(state, run)
        if not isinstance(due.action, RunPlan):  # pragma: no cover - routed by phase
            raise UsageError(f"the turn's execute node got {type(due.action).__name__}")
        ran = run_plan(self.planner, due.action, run.tools, config)
        run.error = ran.error or run.error
        done = step(due.record, ran, view)
        return {"record": done.record, "new_messages": done.messages}

    async def _aexecute(self, state: TurnState, config: RunnableConfig) -> TurnState:
        run: TurnRun = config["configurable"][TURN_KEY]
        due, view = self._due(state, run)
        if not isinstance(due.action, RunPlan):  # pragma: no cover - routed by phase
            raise UsageError(f"the turn's execute node got {type(due.action).__name__}")
        ran = await arun_plan(self.planner, due.action, run.tools, config)
        run.error = ran.error or run.error
        done = step(due.record, ran, view)
        return {"record": done.record, "new_messages": done.messages}
