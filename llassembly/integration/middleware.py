"""``ToolsPlannerMiddleware``: one plan per model call inside ``create_agent``.

Two ways a plan's calls run (``execution=``):

* ``"agent"`` (default): the planner takes the model's place between tool turns. The model is
  called once to write the plan (plus repairs and replans); every later visit of the agent's
  model node is answered by the planner itself with the plan's next tool call, which the
  agent's own tool node runs, through every ``wrap_tool_call`` middleware, approval and limit.
  The machine lives in the agent's private state, so each step is checkpointed. See
  ``llassembly._agent``.
* ``"graph"``: ``after_model`` runs the plan as a nested LangGraph graph that shares the
  agent's checkpointer (``granularity`` applies). About one tool invoke per call, but calls do
  not pass the agent's tool node: only ``tool_middleware=`` wraps them.

Both paths give the same tool calls, the same results to the plan and the same messages.
``after_agent`` re-raises a plan failure under ``on_tool_error="raise"``, once the messages of
the completed calls are saved to the agent state.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import FunctionType
from typing import Annotated, Any, Final, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command

from llassembly.analysis.policies import PlanPolicy
from llassembly.errors import (
    RepairsExhausted,
    UsageError,
)
from llassembly.integration.agent import (
    StepOutcome,
    agent_step,
    conversation,
    counter_updates,
    quick_step,
    removal_messages,
)
from llassembly.integration.approval import (
    NOT_APPROVED,
    ApprovalHook,
    awaiting_approval,
)
from llassembly.integration.calls import (
    arun_plan_call,
    plan_call,
    run_plan_call,
)
from llassembly.integration.final import (
    Answered,
    AnswerRequest,
    answer_request,
    answered,
    awaited_answer,
    final_answer_messages,
    graph_path_ending,
)
from llassembly.integration.graph import Granularity
from llassembly.integration.messages import (
    as_any,
    error_from_record,
    model_reply,
    plan_failure,
    request_context,
)
from llassembly.integration.options import (
    Execution,
    FinalAnswer,
    OnToolError,
    Options,
    PlannerOptions,
    ToolMiddleware,
    document_options,
)
from llassembly.integration.planner import (
    Turn,
    TurnRun,
    final_message,
    short_hash,
    turn_messages,
)
from llassembly.machine.drive import (
    adrive,
    drive,
)
from llassembly.machine.externs import Extern

__all__ = ["PlannerAgentState", "ToolsPlannerMiddleware"]

_STATE_KEY: Final = "llassembly"
_SEEN_KEPT: Final = 256  # tool sets and models the graph path remembers (for after_model)


class PlannerAgentState(AgentState[Any]):
    """Agent state plus the planner's private record (never in the agent's input or output)."""

    llassembly: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


@document_options
class ToolsPlannerMiddleware(AgentMiddleware[PlannerAgentState, Any]):
    """Make a ``create_agent`` agent write one plan and run it, instead of one call per turn.

    Put it first in ``middleware=[...]``: on the agent path every step of a plan is a visit of
    the agent's model node, and ``wrap_model_call`` middleware listed before the planner wraps
    each step (some of them, like ``LLMToolSelectorMiddleware``, call a model of their own).

    Args:
        tools: The tools plans may call. By default, the agent's tools as the model request
            lists them. On the graph path, pass them to resume an interrupted plan in a process
            where the model has not been called yet.
        (every planner option; see llassembly.options)

    Example:
        >>> from langchain.agents import create_agent
        >>> from llassembly import ToolsPlannerMiddleware
        >>> planner = ToolsPlannerMiddleware()
        >>> agent = create_agent(model, tools=[get_weather], middleware=[planner])  # doctest: +SKIP
    """

    state_schema = PlannerAgentState

    def __new__(cls, *args: Any, **kwargs: Any) -> ToolsPlannerMiddleware:
        # The graph path needs an after_model hook the agent path must not have (create_agent
        # adds a node, and so a superstep per step, for every hook a class defines).
        if cls is ToolsPlannerMiddleware:
            graph = kwargs.get("execution", Options.execution.default) == "graph"
            raising = kwargs.get("on_tool_error", Options.on_tool_error.default) == "raise"
            cls = _CLASSES[graph, raising]
            if kwargs.get("approve_plan") and not graph:  # the approval pause is an after_model
                cls = _APPROVING[raising]
        instance: ToolsPlannerMiddleware = super().__new__(cls)
        return instance

    def __init__(
        self,
        infer_tools_messages: bool = Options.infer_tools_messages.default,
        prompt_path: str | Path | None = Options.prompt_path.default,
        max_instructions_to_exec: int = Options.max_instructions_to_exec.default,
        *,
        max_repairs: int = Options.max_repairs.default,
        on_tool_error: OnToolError = Options.on_tool_error.default,
        max_replans: int = Options.max_replans.default,
        max_tool_calls: int = Options.max_tool_calls.default,
        max_stack_depth: int = Options.max_stack_depth.default,
        granularity: Granularity = Options.granularity.default,
        tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
        tool_middleware: Sequence[ToolMiddleware] = Options.tool_middleware.default,
        execution: Execution = Options.execution.default,
        approve_plan: bool | Sequence[str] = Options.approve_plan.default,
        plan_policy: Sequence[PlanPolicy] = Options.plan_policy.default,
        parallel_tools: bool | Sequence[str] = Options.parallel_tools.default,
        final_answer: FinalAnswer = Options.final_answer.default,
    ) -> None:
        super().__init__()
        _bind_sync_hooks(self)
        self.options = PlannerOptions.from_arguments(locals())
        self._turn = Turn(self.options)
        self._given_tools = list(tools) if tools is not None else None
        self._given: dict[str, Extern] | None = (
            self._turn.externs_for(self._given_tools) if self._given_tools is not None else None
        )

    def __getstate__(self) -> dict[str, Any]:
        # The hooks are bound to this instance: a copy binds its own.
        state = dict(self.__dict__)
        for name in _SYNC_HOOKS:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        _bind_sync_hooks(self)

    @property
    def name(self) -> str:
        """``ToolsPlannerMiddleware`` on both paths (node names stay the same)."""
        return "ToolsPlannerMiddleware"

    @property
    def execution(self) -> Execution:
        """``"agent"`` or ``"graph"``."""
        return self.options.execution

    # -- model side -------------------------------------------------------------------------

    def _externs(self, request: ModelRequest[Any]) -> dict[str, Extern]:
        if self._given is not None:
            return self._given
        return self._turn.request_externs(request.tools)

    def _planner_request(
        self, request: ModelRequest[Any], externs: dict[str, Extern]
    ) -> tuple[ModelRequest[Any], str]:
        """The request the planner model gets: our prompt, no tools, calls shown as text."""
        context = request_context(request.system_message, request.messages)
        prompt = self._turn.system_prompt(externs, context)
        planner_request = request.override(
            system_message=SystemMessage(prompt),
            messages=conversation(request.messages),
            tools=[],
            response_format=None,
        )
        return planner_request, context

    def _step(
        self, request: ModelRequest[Any], externs: dict[str, Extern], *, synchronous: bool
    ) -> tuple[Any, Callable[[list[BaseMessage]], ModelRequest[Any]]]:
        state = request.state
        record = state.get(_STATE_KEY) if isinstance(state, dict) else None
        record = record if isinstance(record, dict) else None
        made: list[ModelRequest[Any]] = []

        def asking(messages: list[BaseMessage]) -> ModelRequest[Any]:
            if not made:
                made.append(self._planner_request(request, externs)[0])
            return made[0].override(messages=as_any(messages))

        body = agent_step(
            self._turn,
            state_messages=state.get("messages", []) if isinstance(state, dict) else [],
            model_messages=request.messages,
            record=record,
            externs=externs,
            synchronous=synchronous,
            response_format=request.response_format,
        )
        return body, asking

    def _quick(
        self, request: ModelRequest[Any], externs: dict[str, Extern]
    ) -> ExtendedModelResponse[Any] | None:
        """The answer of a plan's usual step (see :func:`~llassembly._agent.quick_step`)."""
        state = request.state
        record = state.get(_STATE_KEY) if isinstance(state, dict) else None
        if not isinstance(record, dict):
            return None
        outcome = quick_step(self._turn, record, state.get("messages", ()), externs)
        return None if outcome is None else self._answer(request, outcome)

    def _answer(
        self, request: ModelRequest[Any], outcome: StepOutcome
    ) -> ExtendedModelResponse[Any]:
        update: dict[str, Any] = {_STATE_KEY: outcome.record}
        if outcome.removals:
            update["messages"] = removal_messages(outcome.removals)
        state = request.state
        before = state.get(_STATE_KEY) if isinstance(state, dict) else None
        lag = 1 if outcome.record.get("pending") or awaiting_approval(outcome.record) else 0
        outcome.record["counter_lag"] = lag
        old_lag = int(before.get("counter_lag", 0)) if isinstance(before, dict) else 0
        update.update(counter_updates(state, outcome.model_calls, old_lag, lag))
        return ExtendedModelResponse(
            model_response=ModelResponse(
                result=list(outcome.messages), structured_response=outcome.structured
            ),
            command=Command(update=update),
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Any],
    ) -> ExtendedModelResponse[Any]:
        """Answer the model turn: write a plan (calling the model), or take the plan's next step."""
        externs = self._externs(request)
        quick = self._quick(request, externs)
        if quick is not None:
            return quick
        body, asking = self._step(request, externs, synchronous=True)

        def call(msgs: list[BaseMessage]) -> Any:
            if isinstance(msgs, AnswerRequest):
                return answered(handler(answer_request(request, msgs)))
            return model_reply(handler(asking(msgs)))

        outcome = drive(body, call)
        return self._answer(request, outcome)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        externs = self._externs(request)
        quick = self._quick(request, externs)
        if quick is not None:
            return quick
        body, asking = self._step(request, externs, synchronous=False)

        async def call(msgs: list[BaseMessage]) -> Any:
            if isinstance(msgs, AnswerRequest):
                return answered(await handler(answer_request(request, msgs)))
            return model_reply(await handler(asking(msgs)))

        outcome = await adrive(body, call)
        return self._answer(request, outcome)

    # -- tool side --------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run a plan's call through ``tool_middleware``; a tool's exception becomes the call's
        failure (an error ``ToolMessage``) so the plan's ``on_tool_error`` decides what next."""
        pending = plan_call(request)
        if pending is None:
            return handler(request)
        return run_plan_call(request, pending, handler, self.options.tool_middleware)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async :meth:`wrap_tool_call`."""
        pending = plan_call(request)
        if pending is None:
            return await handler(request)
        return await arun_plan_call(request, pending, handler, self.options.tool_middleware)


class _RaisesAfterAgent(ToolsPlannerMiddleware):
    """``on_tool_error="raise"``: the ``after_agent`` hook that raises a plan's failure, and
    the ``before_agent`` hook that keeps a later run from raising it again.

    Only these classes have the hooks (create_agent adds a node, a superstep per run, for each
    hook a class defines; the other policies have nothing to do there).
    """

    def before_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """A new run starts: a failure already raised must not be raised again.

        (A resume after an interrupt continues its run and does not come through here. On
        the agent path, the first step of a run tells a plan left by an earlier run from its
        own, see ``_agent._answer``; the other policies need no node here.)
        """
        record = state.get(_STATE_KEY)
        if not record or not (record.get("pending") or record.get("raise") or record.get("plan")):
            return None
        return {_STATE_KEY: {**record, "pending": None, "plan": None, "raise": False}}

    async def abefore_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`before_agent`."""
        return self.before_agent(state, runtime)

    def after_agent(self, state: PlannerAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Raise the plan's failure now that the messages are saved."""
        record = state.get(_STATE_KEY) or {}
        if not record.get("raise"):
            return None
        raise error_from_record(record.get("failure") or {})

    async def aafter_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_agent`."""
        return self.after_agent(state, runtime)


# Editors and inspect.signature show __init__'s parameters, not __new__'s (*args, **kwargs).
ToolsPlannerMiddleware.__signature__ = inspect.signature(  # type: ignore[attr-defined]
    ToolsPlannerMiddleware.__init__
).replace(
    parameters=list(inspect.signature(ToolsPlannerMiddleware.__init__).parameters.values())[1:]
)


class _GraphPathMiddleware(ToolsPlannerMiddleware):
    """``ToolsPlannerMiddleware(execution="graph")``: plans run as a nested graph."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Tools and model seen in model requests, by identity: one middleware instance may
        # serve several agents at once. Only long-lived objects live here, never a run's data.
        self._seen: dict[str, tuple[dict[str, Extern], Any, Any]] = {}

    def _response(
        self, reply: AIMessage, is_program: bool, calls: int, context: str, token: str
    ) -> ExtendedModelResponse[Any]:
        record = {
            "plan": reply.text if is_program else None,
            "tools": token,
            "context": context,
            "model_calls": calls,
            "repairs": calls - 1,
        }
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[reply]),
            command=Command(update={_STATE_KEY: record}),
        )

    def _prepare_graph(
        self, request: ModelRequest[Any]
    ) -> tuple[ModelRequest[Any], dict[str, Extern], str, str]:
        externs = self._externs(request)
        token = f"{id(externs):x}.{id(request.model):x}"
        self._seen[token] = (externs, request.model, request.response_format)
        if len(self._seen) > _SEEN_KEPT:  # agents built per request: keep the newest only
            self._seen.pop(next(iter(self._seen)))
        planner_request, context = self._planner_request(request, externs)
        return planner_request, externs, context, token

    def _answered(self, request: ModelRequest[Any], result: Answered) -> ExtendedModelResponse[Any]:
        """The final answer call's reply ends the turn (``after_model`` asked for it)."""
        messages, record = final_answer_messages(request.state, _STATE_KEY, result, self.options)
        response = ModelResponse(result=messages, structured_response=result.structured)
        return ExtendedModelResponse(response, Command(update={_STATE_KEY: record}))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Any],
    ) -> ExtendedModelResponse[Any]:
        """Ask for a plan (no tools offered), repairing it until it parses and verifies."""
        asked = awaited_answer(request.state, _STATE_KEY)
        if asked is not None:
            return self._answered(request, answered(handler(answer_request(request, asked))))
        planner_request, externs, context, token = self._prepare_graph(request)
        body = self._turn.draft(list(planner_request.messages), externs)
        try:
            reply, is_program, calls = drive(
                body,
                lambda msgs: model_reply(handler(planner_request.override(messages=as_any(msgs)))),
            )
        except RepairsExhausted as error:
            return self._no_plan(error, context, token)
        return self._response(reply, is_program, calls, context, token)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        asked = awaited_answer(request.state, _STATE_KEY)
        if asked is not None:
            result = answered(await handler(answer_request(request, asked)))
            return self._answered(request, result)
        planner_request, externs, context, token = self._prepare_graph(request)
        body = self._turn.draft(list(planner_request.messages), externs)

        async def call(msgs: list[BaseMessage]) -> AIMessage:
            return model_reply(await handler(planner_request.override(messages=as_any(msgs))))

        try:
            reply, is_program, calls = await adrive(body, call)
        except RepairsExhausted as error:
            return self._no_plan(error, context, token)
        return self._response(reply, is_program, calls, context, token)

    def _no_plan(
        self, error: RepairsExhausted, context: str, token: str
    ) -> ExtendedModelResponse[Any]:
        """No valid plan: raise under ``"raise"``, else end the turn with a message."""
        if self.options.on_tool_error == "raise":
            raise error
        failure = plan_failure(error)
        summary = {"failure": failure, "model_calls": error.attempts, "repairs": error.attempts - 1}
        final = final_message(summary, self.options)
        record = {"plan": None, "tools": token, "context": context}
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[final]),
            command=Command(update={_STATE_KEY: record}),
        )

    def _start(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> tuple[dict[str, Any], TurnRun, dict[str, Any]] | None:
        record = state.get(_STATE_KEY)
        if not record or not record.get("plan"):
            return None
        externs, model, _ = self._seen.get(str(record.get("tools", "")), (self._given, None, None))
        if externs is None:
            raise UsageError(
                "the plan's tools are unknown in this process: pass tools=[...] to "
                "ToolsPlannerMiddleware(execution='graph') to resume a plan before the model "
                "has been called here (the default execution='agent' needs no tools=)"
            )
        messages = conversation(state["messages"])
        plan_message = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        seed = f"{record['plan']}{getattr(plan_message, 'id', '')}"
        run = TurnRun(
            externs=externs,
            system_prompt=self._turn.system_prompt(externs, record.get("context", "")),
            call_model=(lambda msgs: model_reply(model.invoke(msgs)))
            if model is not None
            else None,
            acall_model=(lambda msgs: _ainvoke(model, msgs)) if model is not None else None,
            agent_state=state,
            runtime=runtime,
        )
        turn_input = {
            "conversation": messages,
            "plan": record["plan"],
            "plan_number": 1,
            "call_prefix": f"asm{short_hash(seed)}_1_",
            "new_messages": [],
            "model_calls": record.get("model_calls", 1),
            "repairs": record.get("repairs", 0),
            "replans": 0,
            "executed": 0,
            "tool_calls": 0,
            "approval": self._turn.approval(record["plan"], externs),
        }
        return turn_input, run, record

    def _finish(
        self, final: dict[str, Any], record: dict[str, Any], state: PlannerAgentState
    ) -> dict[str, Any]:
        done = {**record, "plan": None}
        failure = final.get("failure") or {}
        if (
            failure
            and failure.get("type") != NOT_APPROVED
            and self.options.on_tool_error == "raise"
        ):
            done["raise"] = True
            done["failure"] = final["failure"]
        update: dict[str, Any] = {
            "messages": turn_messages(final, self.options),
            _STATE_KEY: done,
            "jump_to": "end",
        }
        response_format = self._seen.get(str(record.get("tools", "")), (None, None, None))[2]
        return graph_path_ending(update, done, final, self.options, response_format, state)

    @hook_config(can_jump_to=["end", "model"])
    def after_model(self, state: PlannerAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Run the plan the model just wrote."""
        started = self._start(state, runtime)
        if started is None:
            return None
        turn_input, run, record = started
        final = self._turn.graph.invoke(turn_input, self._turn.config_for(run, get_config()))
        return self._finish(final, record, state)

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        started = self._start(state, runtime)
        if started is None:
            return None
        turn_input, run, record = started
        final = await self._turn.graph.ainvoke(turn_input, self._turn.config_for(run, get_config()))
        return self._finish(final, record, state)


async def _ainvoke(model: Any, messages: list[BaseMessage]) -> AIMessage:
    return model_reply(await model.ainvoke(messages))


class _AgentPathRaising(_RaisesAfterAgent):
    """``ToolsPlannerMiddleware(on_tool_error="raise")`` on the agent path."""


class _GraphPathRaising(_RaisesAfterAgent, _GraphPathMiddleware):
    """``ToolsPlannerMiddleware(execution="graph", on_tool_error="raise")``."""


class _ApprovingAgentPath(ApprovalHook, ToolsPlannerMiddleware):
    """``ToolsPlannerMiddleware(approve_plan=...)`` on the agent path."""


class _ApprovingAgentPathRaising(ApprovalHook, _AgentPathRaising):
    """``ToolsPlannerMiddleware(approve_plan=..., on_tool_error="raise")``."""


_APPROVING: dict[bool, type[ToolsPlannerMiddleware]] = {
    False: _ApprovingAgentPath,
    True: _ApprovingAgentPathRaising,
}
_CLASSES: dict[tuple[bool, bool], type[ToolsPlannerMiddleware]] = {
    (False, False): ToolsPlannerMiddleware,
    (False, True): _AgentPathRaising,
    (True, False): _GraphPathMiddleware,
    (True, True): _GraphPathRaising,
}

_WRAP_HOOKS: Final = ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call")


def _declare_hook_signatures(*classes: type) -> None:
    """Give each class's own ``wrap_*`` hooks their signature as ``__signature__`` (PEP 362).

    ``create_agent`` runs every ``wrap_model_call``/``wrap_tool_call`` hook through LangSmith's
    ``traceable``, which asks ``inspect.signature`` for the hook's signature on each call. A
    function that declares ``__signature__`` answers at once instead of being inspected again.
    On the agent path a plan's every call passes two such hooks, and the repeated inspection
    cost about as much as the planner's own step (``benchmarks/bench_agent_path.py``).
    """
    for cls in classes:
        for name in _WRAP_HOOKS:
            function = cls.__dict__.get(name)
            if inspect.isfunction(function):
                function.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]


_declare_hook_signatures(ToolsPlannerMiddleware, _GraphPathMiddleware)

_SYNC_HOOKS: Final = ("wrap_model_call", "wrap_tool_call")


def _bind_sync_hooks(instance: ToolsPlannerMiddleware) -> None:
    """Give ``instance`` its sync ``wrap_*`` hooks as plain functions that declare their
    signature, in place of bound methods.

    LangSmith's ``traceable`` (which ``create_agent`` puts around every sync ``wrap_*`` hook)
    asks ``inspect.signature`` for the hook on every call, and for a bound method that builds
    a new ``Signature`` each time, even when its function declares one: about 3 µs, twice per
    plan call on the agent path. A function that declares its own signature answers at once.
    The hook is still the class's, found on the class at each call as a bound method would be
    (``create_agent`` finds hooks by the class; a subclass's override, or a class patched
    later, is what runs); only the signature lookup is cheaper. The function holds the
    instance weakly, so the instance is freed as soon as nothing else holds it.
    """
    cls = type(instance)
    for name in _SYNC_HOOKS:
        method = getattr(cls, name)
        hook = _plain_hook(name, weakref.ref(instance))
        hook.__name__ = getattr(method, "__name__", name)
        hook.__qualname__ = getattr(method, "__qualname__", f"{cls.__qualname__}.{name}")
        hook.__doc__ = getattr(method, "__doc__", None)
        hook.__module__ = getattr(method, "__module__", cls.__module__)
        hook.__signature__ = inspect.signature(getattr(instance, name))  # type: ignore[attr-defined]
        setattr(instance, name, hook)


def _plain_hook(name: str, ref: weakref.ref[ToolsPlannerMiddleware]) -> Callable[..., Any]:
    def hook(request: Any, handler: Any) -> Any:
        instance = ref()
        if instance is None:
            msg = f"the ToolsPlannerMiddleware whose {name} this is no longer exists"
            raise UsageError(msg)
        method = getattr(type(instance), name)
        if type(method) is FunctionType:  # the usual case: a method defined in the class
            return method(instance, request, handler)
        get = getattr(type(method), "__get__", None)
        bound = get(method, instance, type(instance)) if get is not None else method
        return bound(request, handler)

    return hook
