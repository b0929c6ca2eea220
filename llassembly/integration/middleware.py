"""``ToolsPlannerMiddleware``: one plan per model call inside ``create_agent``.

Every visit of the agent's model node is one step of the planner's turn (the state machine of
:mod:`llassembly.integration.turn`, driven by :mod:`llassembly.integration.agent`). Two ways a
plan's calls run (``execution=``):

* ``"agent"`` (default): each call is answered to the agent as an ``AIMessage`` tool call, and
  the agent's own tool node runs it, through every ``wrap_tool_call`` middleware, approval and
  limit;
* ``"graph"``: a visit runs the whole plan as a nested LangGraph graph that shares the agent's
  checkpointer (``granularity`` applies); about one tool invoke per call, but the calls do not
  pass the agent's tool node (only ``tool_middleware=`` wraps them).

Both give the same tool calls, the same results to the plan and the same messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from llassembly.analysis.policies import PlanPolicy
from llassembly.compat import private_state, tagged_model
from llassembly.integration.agent import (
    Visit,
    counter_updates,
    record_of,
    removal_messages,
    visit,
)
from llassembly.integration.calls import arun_plan_call, plan_call, run_plan_call
from llassembly.integration.final import AnswerRequest, answer_request, answered
from llassembly.integration.graph import Granularity
from llassembly.integration.options import (
    Execution,
    FinalAnswer,
    OnToolError,
    PlannerOptions,
    ToolMiddleware,
    document_options,
)
from llassembly.integration.planner import Planner
from llassembly.integration.query import aask_all, ask_all
from llassembly.integration.record import KEY, TurnRecord, error_from_failure, queries_due
from llassembly.integration.runplan import arun_plan, run_plan
from llassembly.integration.tools import ToolContext
from llassembly.integration.turn import AskQuery, Queried, RunPlan, TurnView
from llassembly.integration.views import as_any, model_reply, planner_view, request_context
from llassembly.machine.drive import adrive, drive
from llassembly.machine.externs import Extern, ToolSpec

__all__ = ["PLAN_TAG", "PlannerAgentState", "ToolsPlannerMiddleware"]

PLAN_TAG = "llassembly:plan"
"""The tag (and ``metadata["llassembly"] == "plan"``) of the planner's own model calls: an app
streaming ``stream_mode="messages"`` filters the plan's text (and rejected drafts) by it."""


class PlannerAgentState(AgentState[Any]):
    """Agent state plus the planner's private record (never in the agent's input or output)."""

    llassembly: NotRequired[Annotated[dict[str, Any] | None, private_state()]]


@document_options
class ToolsPlannerMiddleware(AgentMiddleware[PlannerAgentState, Any]):
    """Make a ``create_agent`` agent write one plan and run it, instead of one call per turn.

    Put it first in ``middleware=[...]``: every step of a plan is a visit of the agent's model
    node, and ``wrap_model_call`` middleware listed before the planner wraps each step (some,
    like ``LLMToolSelectorMiddleware``, call a model of their own).

    Args:
        tools: The tools plans may call: a list of tools, or a mapping of tool name to tool
            (see :data:`~llassembly.machine.externs.ToolSpec`; on the agent path, where the
            agent's tool node runs the calls, by the names the agent knows them by). By
            default, the agent's tools as the model request lists them.
        (every planner option; see llassembly.options)

    Example:
        >>> from langchain.agents import create_agent
        >>> from llassembly import ToolsPlannerMiddleware
        >>> planner = ToolsPlannerMiddleware()
        >>> agent = create_agent(model, tools=[get_weather], middleware=[planner])  # doctest: +SKIP
    """

    state_schema = PlannerAgentState

    def __init__(
        self,
        *,
        tools: ToolSpec | None = None,
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
        execution: Execution = PlannerOptions.execution,
        approve_plan: bool | Sequence[str] = PlannerOptions.approve_plan,
        plan_policy: Sequence[PlanPolicy] = PlannerOptions.plan_policy,
        parallel_tools: bool | Sequence[str] = PlannerOptions.parallel_tools,
        final_answer: FinalAnswer = PlannerOptions.final_answer,
        queries: bool = PlannerOptions.queries,
        query_model: BaseChatModel | None = PlannerOptions.query_model,
    ) -> None:
        super().__init__()
        self.options = PlannerOptions.from_arguments(locals())
        self.planner = Planner(self.options)
        self._given = self.planner.externs_for(tools) if tools is not None else None

    @property
    def name(self) -> str:
        """``ToolsPlannerMiddleware`` (node names stay the same on both paths)."""
        return "ToolsPlannerMiddleware"

    @property
    def execution(self) -> Execution:
        """``"agent"`` or ``"graph"``."""
        return self.options.execution

    # -- the model node -----------------------------------------------------------------------

    def _view(self, request: ModelRequest[Any]) -> TurnView:
        externs = (
            self._given if self._given is not None else self.planner.request_externs(request.tools)
        )
        state = request.state
        messages = state.get("messages", []) if isinstance(state, dict) else request.messages
        return TurnView(
            self.planner,
            externs,
            messages,
            graph=self.options.execution == "graph",
            response_format=request.response_format,
        )

    def _planner_request(
        self,
        request: ModelRequest[Any],
        externs: Mapping[str, Extern],
        messages: list[BaseMessage],
    ) -> ModelRequest[Any]:
        """The request the planner model gets: our prompt (the agent's system prompt as its
        context), no tools, earlier calls shown as text; tagged :data:`PLAN_TAG`."""
        context = request_context(request.system_message, request.messages)
        return request.override(
            model=tagged_model(request.model, PLAN_TAG, {KEY: "plan"}),
            system_message=SystemMessage(self.planner.system_prompt(externs, context)),
            messages=as_any(planner_view(messages)),
            tools=[],
            tool_choice=None,
            response_format=None,
        )

    def _query_model(self, request: ModelRequest[Any]) -> Any:
        """The model queries ask: ``query_model``, else the agent's own (with no tools)."""
        return self.options.query_model or request.model

    def _tools(self, request: ModelRequest[Any], view: TurnView) -> ToolContext:
        """What a plan graph's calls need: the tools, the agent's state and runtime, and the
        query model."""
        return ToolContext(view.externs, request.state, request.runtime, self._query_model(request))

    def _respond(self, request: ModelRequest[Any], done: Visit) -> ExtendedModelResponse[Any]:
        record = done.record
        old_lag = int((record_of(request.state) or {"lag": 0})["lag"])
        record["lag"] = _lag(record)
        update: dict[str, Any] = {KEY: record}
        if done.removals:
            update["messages"] = removal_messages(done.removals)
        update.update(counter_updates(request.state, done.model_calls, old_lag, record["lag"]))
        return ExtendedModelResponse(
            model_response=ModelResponse(
                result=list(done.messages), structured_response=done.structured
            ),
            command=Command(update=update),
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Any],
    ) -> ExtendedModelResponse[Any]:
        """Answer the model turn: the next step of the planner's turn."""
        view = self._view(request)
        body = visit(view, record_of(request.state), synchronous=True)

        def serve(asked: Any) -> Any:
            if isinstance(asked, AnswerRequest):
                return answered(handler(answer_request(request, asked)))
            if isinstance(asked, AskQuery):
                return Queried(ask_all(self._query_model(request), asked.requests))
            if isinstance(asked, RunPlan):
                tools = self._tools(request, view)
                return run_plan(self.planner, asked, tools, get_config(), synchronous=True)
            return model_reply(handler(self._planner_request(request, view.externs, asked)))

        return self._respond(request, drive(body, serve))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        view = self._view(request)
        body = visit(view, record_of(request.state), synchronous=False)

        async def serve(asked: Any) -> Any:
            if isinstance(asked, AnswerRequest):
                return answered(await handler(answer_request(request, asked)))
            if isinstance(asked, AskQuery):
                return Queried(await aask_all(self._query_model(request), asked.requests))
            if isinstance(asked, RunPlan):
                tools = self._tools(request, view)
                return await arun_plan(self.planner, asked, tools, get_config())
            planner_request = self._planner_request(request, view.externs, asked)
            return model_reply(await handler(planner_request))

        return self._respond(request, await adrive(body, serve))

    # -- a run's start and end -----------------------------------------------------------------

    def before_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """A new run starts: a failure an earlier run raised is not raised again."""
        record = record_of(state)
        if record is None or not record["raise_failure"]:
            return None
        return {KEY: {**record, "raise_failure": False}}

    async def abefore_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`before_agent`."""
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: PlannerAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """The agent's loop stopped on a message of the planner's: send it back to the model
        node when the turn's next step is due there (a model call, a person's decision, a plan
        run); under ``on_tool_error="raise"``, raise the plan's failure now that the turn's
        messages are saved.

        (A step that needs another model call ends with a message showing progress and no
        tool calls, which ends the agent's loop; coming back through here, rather than through
        a hook after every model-node visit, keeps a plan's steps as cheap as a model turn,
        and every model call still passes the ``before_model`` middleware, call limits
        included.)
        """
        record = record_of(state)
        if record is None:
            return None
        messages = state.get("messages", [])
        if messages and messages[-1].id == record["anchor"] and _due_at_the_model(record):
            return {"jump_to": "model"}
        if record["raise_failure"] and record["failure"] is not None:
            raise error_from_failure(record["failure"])
        return None

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_agent`."""
        return self.after_agent(state, runtime)

    # -- the tool node --------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run a plan's call through ``tool_middleware``, noting the tool's own return value;
        a tool's exception becomes the call's failure (an error ``ToolMessage``), so the plan's
        ``on_tool_error`` decides what follows."""
        pending = plan_call(request)
        if pending is None:
            return handler(request)
        return run_plan_call(self.planner, request, pending, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async :meth:`wrap_tool_call`."""
        pending = plan_call(request)
        if pending is None:
            return await handler(request)
        return await arun_plan_call(self.planner, request, pending, handler)


def _due_at_the_model(record: TurnRecord) -> bool:
    """The turn's next step happens at the model node (a model call, a person's decision, a
    plan run), not at the tool node."""
    phase = record["phase"]
    return phase in ("planning", "answering", "approval") or (
        phase == "running" and not record["pending"]
    )


def _lag(record: TurnRecord) -> int:
    """1 while the next visit of the model node makes no model call (see
    :func:`~llassembly.integration.agent.counter_updates`): a query due is one."""
    phase = record["phase"]
    waits = phase == "approval" or (phase == "running" and not queries_due(record))
    return 1 if waits else 0
