"""``ToolsPlannerNode`` / ``AToolsPlannerNode``: the planner as one node of your ``StateGraph``.

The node reads ``messages`` from the state (system messages become the planner's context),
asks the model for one plan, runs it, and returns the messages the turn adds. Inside, the turn
is a nested LangGraph graph sharing your checkpointer: on resume after an ``interrupt()`` in a
tool, the model is not called again and completed tool calls do not run again.

Under ``on_tool_error="raise"`` a failed turn still returns its messages (so the checkpoint
keeps them) and hands the failure to a task of its own node in the next step, which raises it:
a node that raises loses its whole update in LangGraph.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime
from langgraph.types import Command, Send

from llassembly.analysis.policies import PlanPolicy
from llassembly.errors import ExecutionError, UsageError
from llassembly.integration.graph import Granularity
from llassembly.integration.messages import plan_call_messages
from llassembly.integration.options import (
    FinalAnswer,
    OnToolError,
    PlannerOptions,
    ToolMiddleware,
    document_options,
)
from llassembly.integration.planner import Planner
from llassembly.integration.record import KEY, Failure, error_from_failure
from llassembly.integration.tools import ToolContext
from llassembly.integration.turngraph import TurnGraph, TurnRun
from llassembly.integration.views import model_reply
from llassembly.machine.externs import ToolSpec

__all__ = ["RAISE_KEY", "AToolsPlannerNode", "ToolsPlannerNode"]

RAISE_KEY: Final = f"{KEY}_raise"
"""Key of the input a planner node sends itself to raise a failed turn's error (see
:class:`ToolsPlannerNode`)."""
_LIVE_ERRORS: Final = 64  # most live errors a node keeps for the task that raises them


class _Raise(TypedDict):
    """The failure a planner node hands to its own next task, as plain data (checkpointed)."""

    id: str
    failure: Failure
    messages: list[AnyMessage]


def _messages_of(state: Any) -> list[AnyMessage]:
    messages = (
        state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    )
    if messages is None:
        raise UsageError("the planner node needs a `messages` key in the graph state")
    return list(messages)


@document_options
class ToolsPlannerNode:
    """A LangGraph node that plans once and runs the plan (synchronous graphs).

    Args:
        model: The chat model that writes plans.
        tools: The tools plans may call: a list of LangChain tools or typed functions, or a
            mapping of tool name to tool (see :data:`~llassembly.machine.externs.ToolSpec`).
        (every planner option; see llassembly.options)

    A failed turn under ``on_tool_error="raise"``: LangGraph keeps nothing of a node that
    raises, so the node instead returns the turn's messages (the plan, the completed calls, the
    failure message: the checkpoint keeps them) with a ``Send`` to its own node carrying the
    failure, and that task raises the error in the next step (the live exception, with the
    messages as ``error.messages``; rebuilt from its record in another process). Then:

    * ``invoke``/``ainvoke`` raise the error, as a raising node does;
    * nodes that the planner node's edges lead to are scheduled in that same step, beside the
      raising task, as siblings of any failing node are: they may start (a synchronous one may
      finish) before the error stops the run. Route after the planner with a conditional edge
      on the last message's ``response_metadata["llassembly"]["status"]`` (``"finished"`` or
      not) to keep them out;
    * ``invoke(None, config)`` retries the failed step: it raises the same error again and runs
      no tool and no model; new input starts a new turn;
    * a ``RetryPolicy`` on the node retries only the raising, not the plan.

    Called outside a graph (no ``langgraph_node`` in the config metadata) the node raises at
    once.

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
        max_instructions_to_exec: int = PlannerOptions.max_instructions_to_exec,
        infer_tools_messages: bool = PlannerOptions.infer_tools_messages,
        prompt_path: str | Path | None = PlannerOptions.prompt_path,
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
        query_model: BaseChatModel | None = PlannerOptions.query_model,
    ) -> None:
        # The nodes always run plans as a graph.
        self.options = PlannerOptions.from_arguments({**locals(), "execution": "graph"})
        self.model = model
        self.planner = Planner(self.options)
        self.externs = self.planner.externs_for(tools)
        self.turn = TurnGraph(self.planner)
        # The live errors of failed turns until the node's next task raises them (bounded: a
        # run that stops before that step leaves its entry behind).
        self._live: OrderedDict[str, ExecutionError] = OrderedDict()

    def _start(self, state: Any) -> tuple[dict[str, Any], TurnRun]:
        messages = _messages_of(state)
        context = "\n\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        conversation = [m for m in messages if not isinstance(m, SystemMessage)]
        try:
            runtime: Any = get_runtime()
        except RuntimeError:  # called outside a graph
            runtime = None
        model = self.model

        async def acall(msgs: list[BaseMessage]) -> Any:
            return model_reply(await model.ainvoke(msgs))

        run = TurnRun(
            tools=ToolContext(self.externs, state, runtime, self.options.query_model or model),
            system_prompt=self.planner.system_prompt(self.externs, context),
            context=context,
            call_model=lambda msgs: model_reply(model.invoke(msgs)),
            acall_model=acall,
        )
        return dict(self.turn.start(conversation, run)), run

    def _finish(self, final: dict[str, Any], run: TurnRun) -> dict[str, Any]:
        messages: list[AnyMessage] = list(final.get("new_messages", []))
        record = final["record"]
        if not self.options.infer_tools_messages:
            calls = {id(m) for m in plan_call_messages(messages, record["prefixes"])}
            messages = [m for m in messages if id(m) not in calls]
        if record["raise_failure"] and record["failure"] is not None:
            error = run.error or error_from_failure(record["failure"])
            error.messages = messages  # type: ignore[attr-defined]
            raise error
        return {"messages": messages}

    def _update(
        self, final: dict[str, Any], run: TurnRun, config: RunnableConfig
    ) -> dict[str, Any] | Command[str]:
        """The node's update; a failed turn under ``on_tool_error="raise"`` hands its error to
        the node's next task, so that its messages are kept (see the class docstring)."""
        try:
            return self._finish(final, run)
        except ExecutionError as error:
            node = (config.get("metadata") or {}).get("langgraph_node")
            if not isinstance(node, str):
                raise  # outside a graph: there is no checkpoint to keep
            key = uuid.uuid4().hex
            self._live[key] = error
            while len(self._live) > _LIVE_ERRORS:
                self._live.popitem(last=False)
            messages: list[AnyMessage] = error.messages  # type: ignore[attr-defined]
            marker = _Raise(id=key, failure=final["record"]["failure"], messages=messages)
            return Command(update={"messages": messages}, goto=Send(node, {RAISE_KEY: marker}))

    def _raise_handed(self, state: Any) -> None:
        """Raise the error a failed turn handed to this task (see the class docstring); return
        when ``state`` is not such a hand-over."""
        marker = state.get(RAISE_KEY) if isinstance(state, Mapping) else None
        if not isinstance(marker, Mapping):
            return
        error = self._live.pop(str(marker.get("id")), None)
        if error is None:  # another process, or a retry: the record is what is left
            error = error_from_failure(marker["failure"])
            error.messages = list(marker.get("messages", []))  # type: ignore[attr-defined]
        raise error

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any] | Command[str]:
        """Plan, run the plan, and return the new messages."""
        self._raise_handed(state)
        turn_input, run = self._start(state)
        final = self.turn.graph.invoke(turn_input, self.turn.config_for(run, config))
        return self._update(final, run, config)


class AToolsPlannerNode(ToolsPlannerNode):
    """Async :class:`ToolsPlannerNode` (sync and async tools both work)."""

    async def __call__(  # type: ignore[override]
        self, state: Any, config: RunnableConfig
    ) -> dict[str, Any] | Command[str]:
        """Plan, run the plan, and return the new messages."""
        self._raise_handed(state)
        turn_input, run = self._start(state)
        final = await self.turn.graph.ainvoke(turn_input, self.turn.config_for(run, config))
        return self._update(final, run, config)
