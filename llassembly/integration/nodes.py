"""``ToolsPlannerNode`` / ``AToolsPlannerNode``: the planner as one node of your ``StateGraph``.

The node reads ``messages`` from the state (system messages become the planner's context),
asks the model for one plan, runs it, and returns the messages the turn adds. Inside, the turn
is a nested LangGraph graph sharing your checkpointer: on resume after an ``interrupt()`` in a
tool, the model is not called again and completed tool calls do not run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.runtime import get_runtime

from llassembly.analysis.policies import PlanPolicy
from llassembly.errors import UsageError
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
from llassembly.integration.record import error_from_failure
from llassembly.integration.tools import ToolContext
from llassembly.integration.turngraph import TurnGraph, TurnRun
from llassembly.integration.views import model_reply

__all__ = ["AToolsPlannerNode", "ToolsPlannerNode"]


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
        tools: The tools plans may call (LangChain tools or typed functions).
        (every planner option; see llassembly.options)

    Example:
        >>> graph = StateGraph(MessagesState)  # doctest: +SKIP
        >>> node = ToolsPlannerNode(model, tools=[get_weather])  # doctest: +SKIP
        >>> graph.add_node("planner", node)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[BaseTool | Callable[..., Any]],
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
    ) -> None:
        # The nodes always run plans as a graph.
        self.options = PlannerOptions.from_arguments({**locals(), "execution": "graph"})
        self.model = model
        self.planner = Planner(self.options)
        self.externs = self.planner.externs_for(list(tools))
        self.turn = TurnGraph(self.planner)

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
            tools=ToolContext(self.externs, state, runtime),
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

    def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Plan, run the plan, and return the new messages."""
        turn_input, run = self._start(state)
        final = self.turn.graph.invoke(turn_input, self.turn.config_for(run, config))
        return self._finish(final, run)


class AToolsPlannerNode(ToolsPlannerNode):
    """Async :class:`ToolsPlannerNode` (sync and async tools both work)."""

    async def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:  # type: ignore[override]
        """Plan, run the plan, and return the new messages."""
        turn_input, run = self._start(state)
        final = await self.turn.graph.ainvoke(turn_input, self.turn.config_for(run, config))
        return self._finish(final, run)
