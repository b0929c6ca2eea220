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

from ._ahead import check_parallel_tools
from ._approval import approval_option
from .errors import UsageError
from .graph import Granularity
from .planner import (
    FinalAnswer,
    OnToolError,
    PlannerOptions,
    ToolMiddleware,
    Turn,
    TurnRun,
    model_reply,
    turn_messages,
)
from .policies import PlanPolicy

__all__ = ["AToolsPlannerNode", "ToolsPlannerNode"]


def _messages_of(state: Any) -> list[AnyMessage]:
    messages = (
        state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    )
    if messages is None:
        raise UsageError("the planner node needs a `messages` key in the graph state")
    return list(messages)


class ToolsPlannerNode:
    """A LangGraph node that plans once and runs the plan (synchronous graphs).

    Args:
        model: The chat model that writes plans.
        tools: The tools plans may call (LangChain tools or typed functions).
        max_instructions_to_exec: Instruction budget of a plan.
        infer_tools_messages: Keep an ``AIMessage``/``ToolMessage`` pair per executed call.
        prompt_path: A template file replacing the built-in prompt.
        max_repairs: Fixes the model may make to a plan that does not parse or verify.
        on_tool_error: ``"stop"``, ``"raise"`` (the error carries ``messages``) or ``"replan"``.
        max_replans: Most new plans per turn under ``"replan"``.
        max_tool_calls: Tool-call budget of a plan.
        max_stack_depth: Stack budget of a plan.
        granularity: ``"block"``, ``"instruction"`` or ``"program"``.
        tool_middleware: ``wrap_tool_call`` middleware to apply to each call of a plan.
        approve_plan: Pause (``interrupt()``) before a plan's first call until a person
            approves, edits or rejects it (a list of tool names: only plans that can call one
            of them); needs a checkpointer. See ``ToolsPlannerMiddleware``.
        plan_policy: Rules ``(summary, program) -> problems`` a plan must pass before it runs
            (see ``llassembly.policies``).
        parallel_tools: Tools whose calls may run together (``True``: all tools); see
            ``ToolsPlannerMiddleware``.
        final_answer: ``"plan"``: the turn ends with the plan's own answer (``SAY``), or a
            summary of its calls; ``"model"``: the model is called once more after the plan,
            with the calls and results as text, and its reply ends the turn.

    Example:
        >>> graph = StateGraph(MessagesState)  # doctest: +SKIP
        >>> node = ToolsPlannerNode(model, tools=[get_weather])  # doctest: +SKIP
        >>> graph.add_node("planner", node)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[BaseTool | Callable[..., Any]],
        max_instructions_to_exec: int = 1000,
        infer_tools_messages: bool = True,
        prompt_path: str | Path | None = None,
        *,
        max_repairs: int = 2,
        on_tool_error: OnToolError = "stop",
        max_replans: int = 1,
        max_tool_calls: int = 100,
        max_stack_depth: int = 256,
        granularity: Granularity = "block",
        tool_middleware: Sequence[ToolMiddleware] = (),
        approve_plan: bool | Sequence[str] = False,
        plan_policy: Sequence[PlanPolicy] = (),
        parallel_tools: bool | Sequence[str] = False,
        final_answer: FinalAnswer = "plan",
    ) -> None:
        self.model = model
        self.options = PlannerOptions(
            infer_tools_messages=infer_tools_messages,
            prompt_path=prompt_path,
            max_instructions_to_exec=max_instructions_to_exec,
            max_repairs=max_repairs,
            on_tool_error=on_tool_error,
            max_replans=max_replans,
            max_tool_calls=max_tool_calls,
            max_stack_depth=max_stack_depth,
            granularity=granularity,
            tool_middleware=tuple(tool_middleware),
            approve_plan=approval_option(approve_plan),
            plan_policy=tuple(plan_policy),
            parallel_tools=check_parallel_tools(parallel_tools),
            final_answer=final_answer,
        )
        self.turn = Turn(self.options)
        self.externs = self.turn.externs_for(list(tools))

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
            externs=self.externs,
            system_prompt=self.turn.system_prompt(self.externs, context),
            call_model=lambda msgs: model_reply(model.invoke(msgs)),
            acall_model=acall,
            agent_state=state,
            runtime=runtime,
            context=context,
        )
        return {"conversation": conversation, "new_messages": [], "answer_in_turn": True}, run

    def _finish(self, final: dict[str, Any], run: TurnRun) -> dict[str, Any]:
        messages = turn_messages(final, self.options)
        if final.get("failure") and self.options.on_tool_error == "raise" and run.error is not None:
            run.error.messages = messages  # type: ignore[attr-defined]
            raise run.error
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
