"""``ToolsPlannerMiddleware``: one plan per model call inside ``create_agent`` (the agent path).

Inside ``create_agent`` the planner takes the model's place between tool turns. Each visit of
the agent's model node is one *step* of the turn (:func:`llassembly.integration.turn.step`),
with at most one real model call (or one per query of a batch of queries):

1. No turn is going on: the model is asked for a plan; a valid one starts, and the machine
   runs its pure instructions up to the first ``CALL``.
2. The plan waits on calls: their results are read from the messages the agent's tool node
   (or an approval or limit middleware) wrote, handed to the machine, and it runs on to the
   next ``CALL``.
3. The plan waits on queries (``CALL query_text``; several at once when they overlap): the
   query model is asked (model calls of their own visit, with no tools), the answers go into
   the machine, and it runs on.

A step answers the model turn with an ``AIMessage`` carrying the plan's next call(s), which the
agent routes to its tool node like any call the model made; there the planner's
``wrap_tool_call`` runs each through the one tool path (:mod:`llassembly.integration.calls`).
A step that needs another model call (a repair, a new plan after a failure, the final answer
call) ends with a message that shows the progress; the agent's loop stops there and the
planner's ``after_agent`` sends it back to its model node, so every model call is a visit of its
own: ``before_model`` middleware such as ``ModelCallLimitMiddleware`` see each one. A person's
decision on a plan is asked in the visit after the one that wrote it (``interrupt()``), once
the plan is saved. The machine lives in the agent's private state as plain data (the
:class:`~llassembly.integration.record.TurnRecord`), so every step is checkpointed and can
continue in any process.

Two ways a plan's calls run (``execution=``): ``"agent"`` (default), each call through the
agent's own tool node, with every ``wrap_tool_call`` middleware, approval and limit; ``"graph"``,
a visit runs the whole plan as a nested plan graph that shares the agent's checkpointer
(``granularity`` applies; about one tool invoke per call, but the calls do not pass the
agent's tool node: only ``tool_middleware=`` wraps them). Both give the same tool calls, the
same results to the plan and the same messages.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypeVar

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from llassembly.analysis.policies import PlanPolicy
from llassembly.compat import MODEL_CALL_COUNTERS, private_state, tagged_model
from llassembly.errors import UsageError, error_of
from llassembly.integration.approval import read_decision
from llassembly.integration.calls import (
    ADDED_BY_CALL,
    ENDS_RUN,
    CallContext,
    arun_call,
    outcome_of,
    plan_call_messages,
    run_call,
)
from llassembly.integration.graph import Granularity, PlanRan, arun_plan, run_plan
from llassembly.integration.messages import (
    Answered,
    AnswerRequest,
    answer_request,
    answered,
    as_any,
    model_reply,
    planner_view,
    query_model_calls,
    split_system,
)
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
from llassembly.integration.record import KEY, PendingCall, TurnRecord, due
from llassembly.integration.turn import (
    AskAnswer,
    AskModel,
    AskQuery,
    Begin,
    Decided,
    Event,
    Finish,
    Proceed,
    Queried,
    Replied,
    Returned,
    RunPlan,
    TurnView,
    step,
)
from llassembly.machine.emulator import adrive, drive
from llassembly.machine.externs import Extern, ToolSpec
from llassembly.machine.state import ToolCall

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
        (every planner option)

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
        planner_sees_results: bool = PlannerOptions.planner_sees_results,
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

    def prompt_for(self, tools: ToolSpec | None = None, *, system_prompt: str = "") -> str:
        """Exactly the system prompt the planner model receives with ``tools`` (default: the
        ``tools=`` given here) in an agent whose own system prompt is ``system_prompt``: how
        to write a plan, a block per tool, the types. ``llassembly prompt`` prints the same.

        Example:
            >>> from langchain_core.tools import tool
            >>> @tool
            ... def get_weather(city: str) -> str:
            ...     \"\"\"Today's weather in a city.\"\"\"
            ...     return "sunny"
            >>> text = ToolsPlannerMiddleware().prompt_for([get_weather])
            >>> "get_weather" in text and text.startswith("# How you act")
            True
        """
        externs = self._given if tools is None else self.planner.externs_for(tools)
        if externs is None:
            raise UsageError("prompt_for needs the tools: give them here or as tools=")
        return self.planner.system_prompt(externs, system_prompt)

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
            queries_one_by_one=isinstance(state, Mapping)
            and any(key in state for key in MODEL_CALL_COUNTERS),
        )

    def _planner_request(
        self,
        request: ModelRequest[Any],
        externs: Mapping[str, Extern],
        messages: list[BaseMessage],
    ) -> ModelRequest[Any]:
        """The request the planner model gets: our prompt (the agent's system prompt as its
        context), no tools, earlier calls shown as text; tagged :data:`PLAN_TAG`."""
        context, _ = split_system(request.messages, request.system_message)
        return request.override(
            model=tagged_model(request.model, PLAN_TAG, {KEY: "plan"}),
            system_message=SystemMessage(self.planner.system_prompt(externs, context)),
            messages=as_any(planner_view(messages, results=self.options.planner_sees_results)),
            tools=[],
            tool_choice=None,
            response_format=None,
        )

    def _query_model(self, request: ModelRequest[Any]) -> Any:
        """The model queries ask: ``query_model``, else the agent's own (with no tools)."""
        return self.options.query_model or request.model

    def _plan_graph_run(
        self, request: ModelRequest[Any], view: TurnView, asked: RunPlan
    ) -> tuple[Any, CallContext]:
        """The plan graph of ``asked`` and what its calls need: the tools, the agent's state
        and runtime, and the query model."""
        ctx = CallContext(
            self.planner, view.externs, asked.prefix, request.state, request.runtime,
            self._query_model(request),
        )  # fmt: skip
        return self.planner.plan_graph(asked.plan, view.externs), ctx

    def _respond(self, request: ModelRequest[Any], done: Visit) -> ExtendedModelResponse[Any]:
        record = done.record
        old_lag = int((record_of(request.state) or {"lag": 0})["lag"])
        record["lag"] = _lag(record)
        update: dict[str, Any] = {KEY: record}
        if done.removals:
            update["messages"] = [RemoveMessage(id=i) for i in done.removals]
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
                graph, ctx = self._plan_graph_run(request, view, asked)
                return run_plan(graph, ctx, get_config(), synchronous=True)
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
                graph, ctx = self._plan_graph_run(request, view, asked)
                return await arun_plan(graph, ctx, get_config())
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
        at_the_model = due(record) not in ("results", "nothing")
        if messages and messages[-1].id == record["anchor"] and at_the_model:
            return {"jump_to": "model"}
        if record["raise_failure"] and record["failure"] is not None:
            raise error_of(record["failure"])
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
        found = self._plan_call(request)
        if found is None:
            return handler(request)
        return run_call(*found, request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async :meth:`wrap_tool_call`."""
        found = self._plan_call(request)
        if found is None:
            return await handler(request)
        return await arun_call(*found, request, handler)

    def _plan_call(self, request: ToolCallRequest) -> tuple[CallContext, ToolCall] | None:
        """The plan call this tool request runs (and what it needs), or ``None`` for any other
        call."""
        record = record_of(request.state)
        if record is None:
            return None
        cid = request.tool_call.get("id")
        pending = next((p for p in record["pending"] if p["id"] == cid), None)
        if pending is None:
            return None
        tool = request.tool
        extern = self.planner.extern_of(tool) if tool is not None else None
        externs = {extern.name: extern} if extern is not None else {}
        ctx = CallContext(self.planner, externs, record["prefix"])
        return ctx, _pending_call(pending, request.tool_call.get("args") or {})


def _pending_call(pending: PendingCall, args: Mapping[str, Any]) -> ToolCall:
    return ToolCall(
        pending["tool"], dict(args), pending["index"], pending["line"], pending["source"],
        pending["number"],
    )  # fmt: skip


def _lag(record: TurnRecord) -> int:
    """1 while the next visit of the model node makes no model call (see
    :func:`counter_updates`): a query due is one."""
    return 1 if due(record) in ("person", "results", "run") else 0


# -- the turn on the agent path: one visit of the model node ------------------------------


def record_of(state: Any) -> TurnRecord | None:
    """The planner's record in the agent state, or ``None``."""
    record = state.get(KEY) if isinstance(state, Mapping) else None
    return record if isinstance(record, dict) and "phase" in record else None  # type: ignore[return-value]


def answer_of_call(messages: Sequence[BaseMessage], call_id: str) -> ToolMessage | None:
    """The ``ToolMessage`` answering ``call_id`` in the current run, or ``None``.

    Searched back to the call's own ``AIMessage``. A tool may add other messages beside its
    result (a ``Command`` update, tagged with :data:`ADDED_BY_CALL` by the planner's
    ``wrap_tool_call``); they do not hide it. Any other ``AIMessage`` after the call means the
    run that made it has ended (a limit answered it and ended the run, and a new run is
    starting), as does a result marked :data:`ENDS_RUN` (a ``return_direct`` tool).
    """
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id != call_id:
                continue
            tag = message.response_metadata.get(KEY)
            return None if isinstance(tag, Mapping) and tag.get(ENDS_RUN) else message
        if isinstance(message, AIMessage):
            if any(c.get("id") == call_id for c in message.tool_calls):
                return None
            if message.response_metadata.get(ADDED_BY_CALL) != call_id:
                return None
    return None


def _asked_args(messages: Sequence[BaseMessage]) -> dict[str, dict[str, Any]]:
    """The arguments of the latest tool calls, by call id, as the tool node got them (after
    any middleware that edited them)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            return {c.get("id") or "": c.get("args") or {} for c in message.tool_calls}
    return {}


def _latest(record: TurnRecord, messages: Sequence[BaseMessage]) -> bool:
    """Whether the last message the turn added is still the latest (the same run goes on)."""
    return bool(messages) and record["anchor"] is not None and messages[-1].id == record["anchor"]


def next_event(
    record: TurnRecord | None, messages: Sequence[BaseMessage], externs: Mapping[str, Extern]
) -> Event:
    """What this visit of the model node answers: the results of the plan's calls, a person's
    decision, a model call the last visit left due, or the start of a new turn."""
    if record is None:
        return Begin()
    now = due(record)
    if now == "results":
        pending = record["pending"]
        answers = [answer_of_call(messages, p["id"]) for p in pending]
        if any(a is None for a in answers):
            return Begin()
        asked = _asked_args(messages)
        return Returned(
            [
                outcome_of(externs.get(p["tool"]), a, _pending_call(p, asked.get(p["id"], {})))
                for a, p in zip(answers, pending, strict=True)
                if a is not None
            ]
        )
    approval = record["approval"]
    if (
        now == "person"
        and approval is not None
        and approval["state"] == "awaiting"
        and _latest(record, messages)
    ):  # the plan and its request are saved: a person decides now (asked again on resume)
        return Decided(read_decision(interrupt(approval.get("request") or {})))
    if now in ("plan", "answer", "run", "queries") and _latest(record, messages):
        return Proceed()
    return Begin()


@dataclass
class Visit:
    """What one visit of the model node answers.

    Attributes:
        messages: The messages it adds (the last is the ``AIMessage`` the agent routes on).
        record: The planner's record after it.
        removals: Ids of messages to take out of the agent state.
        model_calls: Real model calls made in it (0 or 1; one per query of a batch).
        structured: The agent's ``structured_response``, when the turn ends with one.
    """

    messages: list[AnyMessage]
    record: TurnRecord
    removals: list[str] = field(default_factory=list)
    model_calls: int = 0
    structured: Any = None


Asked = list[BaseMessage] | AnswerRequest | AskQuery | RunPlan
"""What a visit asks its driver for: the planner model's answer to these messages (after its
system prompt), the final answer call (an :class:`AnswerRequest`), queries to the query model
(their replies as a :class:`Queried`), or a plan run."""


def visit(
    view: TurnView, record: TurnRecord | None, *, synchronous: bool
) -> Generator[Asked, Any, Visit]:
    """One visit of the model node (sans-IO: yields what it asks for, see :data:`Asked`, and
    takes back the model's ``AIMessage``, an :class:`Answered`, a :class:`Queried` or a
    :class:`PlanRan`)."""
    removals = list(record["transient"]) if record else []
    event = next_event(record, view.messages, view.externs)
    if removals:  # the last visit's progress message is not part of the conversation
        kept = [m for m in view.messages if m.id not in removals]
        view = TurnView(view.planner, view.externs, kept, view.graph, view.response_format)
    shown = view.messages
    lagging = bool(record and record["lag"])
    made = 0
    out: list[AnyMessage] = []
    current = step(record, event, view)
    if isinstance(event, Begin):
        current.record["synchronous"] = synchronous
    while True:
        out += current.messages
        action = current.action
        if isinstance(action, AskModel | AskAnswer | AskQuery) and not made and not lagging:
            made += len(action.requests) if isinstance(action, AskQuery) else 1
            if isinstance(action, AskModel):
                reply = yield [*split_system(shown)[1], *out, *action.extra]
                current = step(current.record, Replied(_with_id(reply)), _seen(view, out))
            elif isinstance(action, AskQuery):
                queried: Queried = yield action
                current = step(current.record, queried, _seen(view, out))
            else:
                answered: Answered = yield action.messages
                current = step(current.record, answered, _seen(view, out))
            continue
        if isinstance(action, RunPlan) and not made:
            ran: PlanRan = yield action
            made += query_model_calls(ran.messages)  # the plan's queries are model calls
            current = step(current.record, ran, _seen(view, out))
            continue
        break
    rec = current.record
    rec["transient"] = []
    structured = action.structured if isinstance(action, Finish) else None
    if not isinstance(action, Finish) and not _shows_progress(out):
        note = _progress_note(rec, action)
        out.append(note)
        rec["transient"] = [str(note.id)]
    if isinstance(action, Finish) and not view.planner.options.infer_tools_messages:
        removals += _call_message_ids(view.messages, rec["prefixes"])
        dropped = {id(m) for m in plan_call_messages(out, rec["prefixes"])}
        out = [m for m in out if id(m) not in dropped]
    out = [_with_id(m) for m in out]
    rec["anchor"] = out[-1].id if out else rec["anchor"]
    return Visit(out, rec, removals, made, structured)


def _seen(view: TurnView, out: Sequence[BaseMessage]) -> TurnView:
    return TurnView(
        view.planner, view.externs, [*view.messages, *out], view.graph, view.response_format
    )


_M = TypeVar("_M", bound=BaseMessage)


def _with_id(message: _M) -> _M:
    """``message`` with an id of its own (the next visit finds the turn's last message by it)."""
    if message.id:
        return message
    return message.model_copy(update={"id": f"llassembly-{uuid.uuid4()}"})


def _shows_progress(out: Sequence[BaseMessage]) -> bool:
    """The visit's messages end with an ``AIMessage`` the agent can route on (one with no
    calls ends the agent's loop, and the planner's ``after_agent`` sends it back; one with
    calls goes to the tools)."""
    return bool(out) and isinstance(out[-1], AIMessage)


def _progress_note(rec: TurnRecord, action: Any) -> AIMessage:
    """The message a visit that ends without one of the turn's own shows: a rejected draft, or
    what the planner does next. The next visit takes it out again."""
    if isinstance(action, AskModel) and rec["drafts"]:
        last = rec["drafts"][-1]
        text, kind = last["draft"], "draft"
    elif isinstance(action, AskQuery):
        lines = ", ".join(f"line {r.line}: {r.source}" for r in action.requests)
        text = f"Asking the query model ({lines})."
        kind = "note"
    elif isinstance(action, AskModel):
        failure = rec["failure"]
        where = f"line {failure['line']} ({failure['source']})" if failure else "a line"
        detail = failure["detail"] if failure else "it failed"
        text = f"The plan stopped at {where}: {detail}. Asking for a new plan."
        kind = "note"
    else:
        text, kind = "The plan has finished; asking for the answer.", "note"
    return AIMessage(
        content=text,
        id=f"llassembly-{uuid.uuid4()}",
        response_metadata={KEY: {"kind": kind}},
    )


def _call_message_ids(messages: Sequence[BaseMessage], prefixes: Sequence[str]) -> list[str]:
    """Ids of the call ``AIMessage``/``ToolMessage`` pairs the turn's plans added."""
    return [m.id for m in plan_call_messages(messages, prefixes) if m.id]


def counter_updates(state: Any, model_calls: int, old_lag: int, lag: int) -> dict[str, int]:
    """Make ``ModelCallLimitMiddleware`` count real model calls, not visits of the model node.

    That middleware adds one per visit in ``after_model`` and, before every visit, stops the
    run once its count reaches the limit. A visit that makes no model call (a plan's step)
    must not count, and must not be refused for the model call that wrote the plan: while the
    next visit makes no model call, the counters are held one below the real number
    (``lag``), and the visit after which a model call is due gives the one back. So every
    model call is checked by that middleware before it is made, and at the end of the turn
    the counters equal the real model calls. (Writing a key no middleware declared is ignored
    by LangGraph, so this does nothing without that middleware.)
    """
    if not isinstance(state, Mapping):
        return {}
    delta = old_lag + model_calls - lag - 1
    if delta == 0:
        return {}
    updates: dict[str, int] = {}
    for key in MODEL_CALL_COUNTERS:
        value = state.get(key, 0)
        if isinstance(value, int):
            updates[key] = value + delta
    return updates
