"""``ToolsPlannerNode``: the planner as one node of your ``StateGraph``.

Inside, the turn is a small graph sharing your checkpointer (nodes ``model``, ``approve`` and
``execute``, routed by what the turn's record says is due), so a resume after an ``interrupt()``
calls no model and runs no completed tool call again (see ``docs/architecture.md``, *One turn*).
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, SystemMessage, convert_to_messages
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Command, Send, interrupt

from llassembly.analysis.policies import PlanPolicy
from llassembly.compat import tagged_model
from llassembly.errors import ExecutionError, UsageError, error_of
from llassembly.integration import turn
from llassembly.integration.approval import read_decision
from llassembly.integration.calls import CallContext, ends_run, without_plan_calls
from llassembly.integration.graph import Granularity, Node, run_plan
from llassembly.integration.messages import Answered, answered, planner_view, split_system
from llassembly.integration.middleware import PLAN_TAG
from llassembly.integration.options import (
    FinalAnswer,
    OnToolError,
    PlannerOptions,
    ToolMiddleware,
    document_options,
)
from llassembly.integration.planner import Lru, Planner
from llassembly.integration.record import KEY, TurnRecord, due
from llassembly.machine.externs import ToolSpec

RAISE_KEY: Final = f"{KEY}_raise"
"""Key of the input a planner node sends itself to raise a failed turn's error (see
:class:`ToolsPlannerNode`)."""
TURN_KEY: Final = "llassembly_turn"


# -- the turn graph -------------------------------------------------------------------------------


@dataclass
class TurnRun:
    """What one turn needs from its caller (live objects, never in graph state).

    Attributes:
        calls: The tools, and the caller's state and runtime for ``ToolRuntime``.
        context: The caller's own system prompt (the planner prompt's ``{context}``, and the
            final answer call's system message).
        error: The live exception of the last failed plan (to raise it as it is).
    """

    calls: CallContext
    context: str = ""
    error: ExecutionError | None = field(default=None, repr=False)


class TurnState(TypedDict, total=False):
    """The turn graph's state (plain data)."""

    record: TurnRecord
    conversation: list[AnyMessage]
    new_messages: Annotated[list[AnyMessage], operator.add]


_Next = Literal["model", "approve", "execute", "__end__"]
_WHERE: dict[str, _Next] = {
    "plan": "model",
    "answer": "model",
    "person": "approve",
    "run": "execute",
    "queries": "execute",
    "results": "execute",
}


def _route(state: TurnState) -> _Next:
    return _WHERE.get(due(state["record"]), "__end__")


def config_for(run: TurnRun, config: RunnableConfig | None) -> RunnableConfig:
    """The config to invoke the turn graph with: the caller's, plus the run and a recursion
    limit from the options (not the caller's): each plan takes a step per draft, two for its
    approval (a refused edit is asked again) and one to run; then the answer."""
    base, opts = config or {}, run.calls.planner.options
    limit = (opts.max_replans + 1) * (opts.max_repairs + 4) + 2
    configurable = {**base.get("configurable", {}), TURN_KEY: run}
    return {**base, "configurable": configurable, "recursion_limit": limit}


# -- the node ------------------------------------------------------------------------------------


@document_options
class ToolsPlannerNode(Runnable[Any, Any]):
    """A LangGraph node that plans once and runs the plan, under ``invoke`` and ``ainvoke``
    alike (sync and async tools both work under ``ainvoke``).

    Args:
        model: The chat model that writes plans.
        tools: The tools plans may call: a list of LangChain tools or typed functions, or a
            mapping of tool name to tool (see :data:`~llassembly.machine.externs.ToolSpec`).
        (every planner option)

    Under ``on_tool_error="raise"`` a failed turn's messages are kept and its error raised by
    the node's next task (see ``docs/durability.md``); called outside a graph it raises at once,
    and an interrupt (which cannot pause there) raises ``UsageError``.

    Example:
        >>> graph = StateGraph(MessagesState)  # doctest: +SKIP
        >>> node = ToolsPlannerNode(model, tools=[get_weather])  # doctest: +SKIP
        >>> graph.add_node("planner", node)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: BaseChatModel,
        tools: ToolSpec,
        *,
        infer_tools_messages: bool = PlannerOptions.infer_tools_messages,
        prompt_path: str | Path | None = PlannerOptions.prompt_path,
        max_instructions_to_exec: int = PlannerOptions.max_instructions_to_exec,
        max_repairs: int = PlannerOptions.max_repairs,
        on_tool_error: OnToolError = PlannerOptions.on_tool_error,
        max_replans: int = PlannerOptions.max_replans,
        max_tool_calls: int = PlannerOptions.max_tool_calls,
        max_stack_depth: int = PlannerOptions.max_stack_depth,
        granularity: Granularity = PlannerOptions.granularity,
        tool_middleware: Sequence[ToolMiddleware] = PlannerOptions.tool_middleware,
        approve_plan: bool | Sequence[str] = PlannerOptions.approve_plan,
        plan_policy: Sequence[PlanPolicy] = PlannerOptions.plan_policy,
        parallel_tools: bool | Sequence[str] = PlannerOptions.parallel_tools,
        final_answer: FinalAnswer = PlannerOptions.final_answer,
        queries: bool = PlannerOptions.queries,
        planner_sees_results: bool = PlannerOptions.planner_sees_results,
        query_model: BaseChatModel | None = PlannerOptions.query_model,
    ) -> None:
        self.options = PlannerOptions.from_arguments({**locals(), "execution": "graph"})
        self.model = model
        self._planning = tagged_model(model, PLAN_TAG, {KEY: "plan"})
        self.planner = Planner(self.options)
        self.externs = self.planner.externs_for(tools)
        # The turn graph (compiled once): each node does what the record says is due.
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(TurnState)
        names = ["model", "approve", "execute"]
        for name in names:
            builder.add_node(name, Node(self._body, self._serve))
            builder.add_conditional_edges(name, _route, [*names, END])
        builder.add_conditional_edges(START, _route, [*names, END])
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = builder.compile()
        # The live errors of failed turns until the node's next task raises them (bounded: a
        # run that stops before that step leaves its entry behind).
        self._live: Lru[str, ExecutionError] = Lru()

    def prompt_for(self, *, system_prompt: str = "") -> str:
        """Exactly the system prompt the planner model receives from this node when the
        conversation's system messages read ``system_prompt`` (as ``llassembly prompt``)."""
        return self.planner.system_prompt(self.externs, system_prompt)

    def _body(self, state: TurnState, config: RunnableConfig) -> Generator[Any, Any, TurnState]:
        """A turn graph node's work, sans-IO: the step due, with a person's decision asked
        here and the model's messages or the plan to run yielded to the driver."""
        run: TurnRun = config["configurable"][TURN_KEY]
        conversation = [*state.get("conversation", []), *state.get("new_messages", [])]
        view = turn.TurnView(self.planner, self.externs, conversation, graph=True)
        due_now = turn.step(state["record"], turn.Proceed(), view)
        action = due_now.action
        got: Any
        if isinstance(action, turn.AskModel):
            prompt = SystemMessage(self.planner.system_prompt(self.externs, run.context))
            seen = planner_view(conversation, results=self.options.planner_sees_results)
            got = answered((yield self._planning, [prompt, *seen, *action.extra])).reply
        elif isinstance(action, turn.AskAnswer):
            system = [SystemMessage(run.context)] if run.context else []
            got = Answered([answered((yield self.model, [*system, *action.messages])).reply])
        elif isinstance(action, turn.AskPerson):  # an edit that fails the checks comes back here
            got = read_decision(interrupt(action.request))
        elif isinstance(action, turn.RunPlan):
            run.calls.prefix = action.prefix
            got = yield action
            run.error = got.error or run.error
        else:  # pragma: no cover - routed by phase
            raise UsageError(f"the turn graph got {type(action).__name__}")
        done = turn.step(due_now.record, turn.Received(got), view)
        return {"record": done.record, "new_messages": [*due_now.messages, *done.messages]}

    def _serve(self, config: RunnableConfig, asynchronous: bool) -> Callable[[Any], Any]:
        def serve(asked: Any) -> Any:
            if isinstance(asked, turn.RunPlan):
                run: TurnRun = config["configurable"][TURN_KEY]
                return run_plan(asked.plan, run.calls, config, asynchronous)
            model, messages = asked  # the planner's model calls are tagged PLAN_TAG
            return (model.ainvoke if asynchronous else model.invoke)(messages)

        return serve

    def _start(self, state: Any, config: RunnableConfig | None) -> tuple[Any, RunnableConfig]:
        """The turn graph's input and config for a new turn about ``state``'s messages; or the
        raising of the error a failed turn handed to this task (see the class docstring)."""
        marker = state.get(RAISE_KEY) if isinstance(state, Mapping) else None
        if isinstance(marker, Mapping):
            if (live := self._live.pop(str(marker.get("id")), None)) is not None:
                raise live[1]
            error = error_of(marker["failure"])  # another process, or a retry: the record is left
            error.messages = list(marker.get("messages", []))  # type: ignore[attr-defined]
            raise error
        found = state.get("messages") if isinstance(state, Mapping) else None
        found = getattr(state, "messages", None) if found is None else found
        if found is None:
            raise UsageError("the planner node needs a `messages` key in the graph state")
        context, conversation = split_system(convert_to_messages(found))  # as add_messages
        try:
            runtime: Any = get_runtime()
        except RuntimeError:  # called outside a graph
            runtime = None
        calls = CallContext(
            self.planner,
            self.externs,
            state=state,
            runtime=runtime,
            query_model=self.options.query_model or self.model,
        )
        view = turn.TurnView(self.planner, self.externs, conversation, graph=True)
        first = turn.step(None, turn.Begin(), view)
        turn_input = {"record": first.record, "conversation": conversation, "new_messages": []}
        return turn_input, config_for(TurnRun(calls, context), ensure_config(config))

    def _update(
        self, final: dict[str, Any], config: RunnableConfig
    ) -> dict[str, Any] | Command[str]:
        """The node's update; a failed turn under ``on_tool_error="raise"`` hands its error to
        the node's next task, so that its messages are kept (see the class docstring)."""
        if final.get("__interrupt__"):  # outside a graph: LangGraph returns it, with no pause
            raise UsageError(
                "the planner node was interrupted (a plan approval or interrupt() in a tool) "
                "outside a graph: add it to a StateGraph compiled with a checkpointer to pause "
                "and resume"
            )
        record = final["record"]
        messages: list[AnyMessage] = list(final.get("new_messages", []))
        if not self.options.infer_tools_messages and not ends_run(messages):
            messages = without_plan_calls(messages, record["prefixes"])
        if not record["raise_failure"] or record["failure"] is None:
            return {"messages": messages}
        run: TurnRun = config["configurable"][TURN_KEY]
        error = run.error or error_of(record["failure"])
        error.messages = messages  # type: ignore[attr-defined]
        node = (config.get("metadata") or {}).get("langgraph_node")
        if not isinstance(node, str):
            raise error  # outside a graph: there is no checkpoint to keep
        key = uuid.uuid4().hex
        self._live.cached(key, error, lambda: error)
        marker = {"id": key, "failure": record["failure"], "messages": messages}  # checkpointed
        return Command(update={"messages": messages}, goto=Send(node, {RAISE_KEY: marker}))

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any] | Command[str]:
        """Plan, run the plan, and return the new messages (a synchronous graph)."""
        turn_input, turn_config = self._start(input, config)
        return self._update(self.graph.invoke(turn_input, turn_config), turn_config)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any] | Command[str]:
        """Plan, run the plan, and return the new messages (an async graph: ``ainvoke``)."""
        turn_input, turn_config = self._start(input, config)
        return self._update(await self.graph.ainvoke(turn_input, turn_config), turn_config)

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any] | Command[str]:
        """:meth:`invoke`, for a node called as a function."""
        return self.invoke(state, config)


class AToolsPlannerNode(ToolsPlannerNode):
    """:class:`ToolsPlannerNode` under its earlier name for async graphs; awaited when called
    as a function (the node itself serves ``invoke`` and ``ainvoke`` alike)."""

    async def __call__(  # type: ignore[override]
        self, state: Any, config: RunnableConfig
    ) -> dict[str, Any] | Command[str]:
        """:meth:`ainvoke`, for a node called as a function."""
        return await self.ainvoke(state, config)
