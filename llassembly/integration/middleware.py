"""``ToolsPlannerMiddleware``: one plan per model call inside ``create_agent`` (the agent path).

Each visit of the agent's model node is one step of the turn (:func:`visit`), with at most one
real model call; the plan's calls go out as tool calls the agent's own tool node runs, and the
turn's record lives in the agent's private state. See ``docs/architecture.md``, *One turn*.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NotRequired, cast

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
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from llassembly.analysis.policies import PlanPolicy
from llassembly.compat import MODEL_CALL_COUNTERS, private_state, tagged_model
from llassembly.errors import UsageError, error_of
from llassembly.integration import calls, turn
from llassembly.integration.approval import read_decision
from llassembly.integration.graph import Granularity, run_plan
from llassembly.integration.messages import (
    _M,
    answered,
    marked,
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
from llassembly.integration.query import ask_all
from llassembly.integration.record import KEY, TurnRecord, call_of, due, prefix_of, record_of
from llassembly.machine.emulator import adrive, drive
from llassembly.machine.externs import Extern, ToolSpec

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

    def _visit(
        self, request: ModelRequest[Any], handler: Any, asynchronous: bool
    ) -> tuple[Generator[Asked, Any, ExtendedModelResponse[Any]], Callable[[Asked], Any]]:
        """This visit (see :func:`visit`) and what answers its requests (awaitable when
        ``asynchronous``): the model handler, the query model (``query_model``, else the agent's
        own, with no tools), or a plan graph run (with the agent's state and runtime)."""
        state, externs = request.state, self._given
        if externs is None:  # the agent's LangChain tools (not provider tools given as dicts)
            tools = [t for t in request.tools if isinstance(t, BaseTool)]
            externs = self.planner.externs_for(tools, offered=True)
        view = turn.TurnView(
            self.planner,
            externs,
            state.get("messages", []) if isinstance(state, dict) else request.messages,
            graph=self.options.execution == "graph",
            response_format=request.response_format,
            queries_one_by_one=isinstance(state, Mapping)
            and any(key in state for key in MODEL_CALL_COUNTERS),
            synchronous=not asynchronous,
            sent=request.messages,
        )
        query_model = self.options.query_model or request.model

        def serve(asked: Asked) -> Any:
            if isinstance(asked, turn.AskQuery):
                return ask_all(query_model, asked.requests, asynchronous)
            if isinstance(asked, turn.RunPlan):
                ctx = calls.CallContext(
                    self.planner,
                    externs,
                    asked.prefix,
                    state,
                    request.runtime,
                    query_model,
                    hand_off=True,
                )
                return run_plan(asked.plan, ctx, get_config(), asynchronous)
            return handler(self._model_request(request, view, asked))

        return visit(view, state), serve

    def _model_request(
        self,
        request: ModelRequest[Any],
        view: turn.TurnView,
        asked: list[BaseMessage] | turn.AskAnswer,
    ) -> ModelRequest[Any]:
        """What the model is asked, offered no tools (earlier calls shown as text): the final
        answer call keeps the agent's system prompt (the conversation's system messages joined
        to it) and ``response_format``; a planning request gets our prompt (those as its
        context), tagged :data:`PLAN_TAG`."""
        context, conversation = split_system(request.messages, request.system_message)
        if isinstance(asked, turn.AskAnswer):
            joined = len(conversation) < len(request.messages)
            system = SystemMessage(context) if joined else request.system_message
            messages = cast("list[AnyMessage]", asked.messages)
            return request.override(
                messages=messages, system_message=system, tools=[], tool_choice=None
            )
        shown = planner_view(asked, results=self.options.planner_sees_results)
        return request.override(
            model=tagged_model(request.model, PLAN_TAG, {KEY: "plan"}),
            system_message=SystemMessage(self.planner.system_prompt(view.externs, context)),
            messages=cast("list[AnyMessage]", shown),
            tools=[],
            tool_choice=None,
            response_format=None,
        )

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> ExtendedModelResponse[Any]:
        """Answer the model turn: the next step of the planner's turn."""
        return drive(*self._visit(request, handler, asynchronous=False))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        return await adrive(*self._visit(request, handler, asynchronous=True))

    # -- a run's start and end (sync hooks: create_agent runs them under ainvoke too) -----------

    def before_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """A new run starts: it begins a new turn (see :func:`next_event`), and a failure an
        earlier run raised is not raised again."""
        record = record_of(state)
        if record is None or (record["anchor"] is None and not record["raise_failure"]):
            return None
        return {KEY: {**record, "anchor": None, "raise_failure": False}}

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: PlannerAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """The agent's loop stopped on the planner's message: send it back to the model node when
        the turn's next step is due there (a model call, a person's decision, a plan run); under
        ``on_tool_error="raise"``, raise the plan's failure now that the turn's messages are saved.

        (A step that needs another model call ends with a message showing progress and no
        tool calls, which ends the agent's loop; coming back through here, rather than through
        a hook after every model-node visit, keeps a plan's steps as cheap as a model turn, and
        every model call still passes the ``before_model`` middleware, call limits included.
        It is sent back once for a message: when it stops on it again, the model node did not
        run, so a hook before it ended the run, ``jump_to: "end"``, as it may.)
        """
        record = record_of(state)
        if record is None:
            return None
        anchor = record["anchor"]
        next_due = _latest(record, state.get("messages", [])) and due(record) not in (
            "results",
            "nothing",
        )
        if next_due and record.get("sent_back") != anchor:
            return {"jump_to": "model", KEY: {**record, "sent_back": anchor}}
        if record["raise_failure"] and record["failure"] is not None:
            raise error_of(record["failure"])
        return None

    # -- the tool node --------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run a plan's call through ``tool_middleware``, noting the tool's own return value;
        a tool's exception becomes the call's failure (an error ``ToolMessage``), so the plan's
        ``on_tool_error`` decides what follows. Any other call goes to ``handler`` as it is."""
        return self._tool_call(request, handler, False)  # type: ignore[no-any-return]

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async :meth:`wrap_tool_call`."""
        return await self._tool_call(request, handler, True)  # type: ignore[no-any-return]

    def _tool_call(self, request: ToolCallRequest, handler: Any, asynchronous: bool) -> Any:
        """:meth:`wrap_tool_call` (awaitable when ``asynchronous``)."""
        record = record_of(request.state)
        cid = request.tool_call.get("id")
        pending = next((p for p in record["pending"] if p["id"] == cid), None) if record else None
        if record is None or pending is None:
            return handler(request)
        extern = self.planner.extern_of(request.tool) if request.tool is not None else None
        externs = {extern.name: extern} if extern is not None else {}
        ctx = calls.CallContext(self.planner, externs, prefix_of(record))
        call = call_of(pending, request.tool_call.get("args") or {})
        return calls.run_call(ctx, call, request, handler, asynchronous)


# -- the turn on the agent path: one visit of the model node ------------------------------


def answer_of_call(messages: Sequence[BaseMessage], call_id: str) -> ToolMessage | None:
    """The ``ToolMessage`` answering ``call_id`` (the first, of two a ``Command`` carried, as
    every path reads it), or ``None``: searched back to the call's own ``AIMessage``, past any
    message a tool or a hook added since (a new run begins anew before this is asked: see
    :func:`next_event`)."""
    found = None
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            found = message
        elif isinstance(message, AIMessage) and any(
            c.get("id") == call_id for c in message.tool_calls
        ):
            break
    return found


def _latest(record: TurnRecord, messages: Sequence[BaseMessage]) -> bool:
    """Whether the last message the turn added is still the model node's latest answer: no
    ``AIMessage`` came after it (another middleware's note may have: the same run goes on;
    a limit that ends the run answers in the model's place, with an ``AIMessage``)."""
    anchor = record["anchor"]
    for message in reversed(messages if anchor is not None else ()):
        if message.id == anchor:
            return True
        if isinstance(message, AIMessage):
            return False
    return False


def next_event(
    record: TurnRecord | None,
    messages: Sequence[BaseMessage],
    externs: Mapping[str, Extern],
    structured: bool = False,
) -> turn.Event:
    """What this visit of the model node answers: the results of the plan's calls, a person's
    decision, a model call the last visit left due (the plan and what it asks are saved; a
    hook may have added messages since; with a ``structured`` answer, the one the agent's
    strategy refused and asks for again), or the start of a new turn."""
    if record is None or record["anchor"] is None:  # a new run (before_agent) begins anew
        return turn.Begin()
    now = due(record)
    if now == "results":
        pending = record["pending"]
        answers = [a for p in pending if (a := answer_of_call(messages, p["id"])) is not None]
        if len(answers) < len(pending) or calls.ends_run(answers):  # (that run has ended)
            return turn.Begin()
        # The calls' arguments as the tool node got them (after any middleware that edited them).
        sent = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls][-1:]
        asked = {c.get("id") or "": c.get("args") or {} for m in sent for c in m.tool_calls}
        outcomes = [
            calls.outcome_of(externs.get(p["tool"]), a, call_of(p, asked.get(p["id"], {})))
            for a, p in zip(answers, pending, strict=True)
        ]
        return turn.Received(outcomes)
    if now == "person":  # (asked again on resume)
        approval = record["approval"]
        request = approval.get("request") if approval is not None else None
        return turn.Received(read_decision(interrupt(request or {})))
    if now == "nothing" and not _refused(record, messages, structured):
        return turn.Begin()  # (the run goes on after the turn: another middleware's jump)
    return turn.Proceed()


def _refused(record: TurnRecord, messages: Sequence[BaseMessage], structured: bool) -> bool:
    """Whether the agent's structured-output strategy refused the turn's answer: its model
    call ends on the error message answering the answer's call (the turn's last message,
    still the latest), and the agent comes back to the model node."""
    last = messages[-1] if structured and messages else None
    return isinstance(last, ToolMessage) and last.id == record["anchor"]


Asked = list[BaseMessage] | turn.AskAnswer | turn.AskQuery | turn.RunPlan
"""What a visit asks its driver for: the planner model's answer to these messages (after its
system prompt), the final answer call (its action), queries to the query model
(their replies), or a plan run (a :class:`PlanRan`)."""


def visit(view: turn.TurnView, state: Any) -> Generator[Asked, Any, ExtendedModelResponse[Any]]:
    """One visit of the model node, sans-IO: yields what it asks for and takes back the answer
    (see :data:`Asked`); returns the model turn's answer with the planner's record (and the
    model-call counters, see :func:`counter_updates`) as a state update. The turn reads the
    state's messages (``view.messages``); its models are sent those of the request
    (``view.sent``: what a ``wrap_model_call`` middleware before the planner left of them)."""
    record = record_of(state)
    removals = list(record["transient"]) if record else []
    event = next_event(record, view.messages, view.externs, view.response_format is not None)
    sent = view.messages if view.sent is None else view.sent
    if removals:  # the last visit's progress message is not part of the conversation
        sent = [m for m in sent if m.id not in removals]
        view = replace(view, messages=[m for m in view.messages if m.id not in removals])
    view = replace(view, sent=sent)
    old_lag = record["lag"] if record else 0
    made = 0  # real model calls in this visit (one per query of a batch)
    out: list[AnyMessage] = []
    name = record.get("agent") if record else None  # (the agent's, create_agent(name=...))
    current = turn.step(record, event, view)
    while True:
        out += current.messages
        action = current.action
        if isinstance(action, turn.RunPlan) and not made:
            ran = yield action
            made += query_model_calls(ran.messages)  # the plan's queries are model calls
            event = turn.Received(ran)
        elif isinstance(action, turn.AskModel | turn.AskAnswer | turn.AskQuery) and not (
            made or old_lag
        ):
            made += len(action.requests) if isinstance(action, turn.AskQuery) else 1
            if isinstance(action, turn.AskModel):
                reply = answered((yield [*split_system(sent)[1], *out, *action.extra])).reply
                name = reply.name  # (the agent names its model's messages, or does not)
                event = turn.Received(_with_id(reply))
            elif isinstance(action, turn.AskQuery):
                event = turn.Received(tuple((yield action)))
            else:
                event = turn.Received(answered((yield action)))
        else:
            break
        now = replace(view, messages=[*view.messages, *out], sent=[*sent, *out])
        current = turn.step(current.record, event, now)
    rec = current.record
    rec["transient"] = []
    if not isinstance(action, turn.Finish) and not (out and isinstance(out[-1], AIMessage)):
        # The visit must end on an AIMessage the agent routes on: one showing progress (with
        # no calls it ends the agent's loop, and after_agent sends it back); the next visit
        # takes it out again.
        note = _progress_note(rec, action)
        out.append(note)
        rec["transient"] = [str(note.id)]
    if isinstance(action, turn.Finish) and not view.planner.options.infer_tools_messages:
        removals += [m.id for m in calls.plan_call_messages(view.messages, rec["prefixes"]) if m.id]
        out = calls.without_plan_calls(out, rec["prefixes"])
    out = [_with_id(_named(m, name)) for m in out]
    rec["anchor"], rec["agent"] = (out[-1].id if out else rec["anchor"]), name
    # The next visit makes no model call: held one below (see counter_updates); a query is one.
    rec["lag"] = 1 if due(rec) in ("person", "results", "run") else 0
    update: dict[str, Any] = {KEY: rec, **counter_updates(state, made, old_lag, rec["lag"])}
    if removals:
        update["messages"] = [RemoveMessage(id=i) for i in removals]
    structured = action.structured if isinstance(action, turn.Finish) else None
    return ExtendedModelResponse(
        model_response=ModelResponse(result=list(out), structured_response=structured),
        command=Command(update=update),
    )


def _named(message: _M, name: str | None) -> _M:
    """``message`` (the planner's own ``AIMessage``) named as the agent names its model's."""
    if name is None or message.name or not isinstance(message, AIMessage):
        return message
    return message.model_copy(update={"name": name})


def _with_id(message: _M) -> _M:
    """``message`` with an id of its own (the next visit finds the turn's last message by it)."""
    return (
        message if message.id else message.model_copy(update={"id": f"llassembly-{uuid.uuid4()}"})
    )


def _progress_note(rec: TurnRecord, action: Any) -> AIMessage:
    """The message a visit that ends without one of the turn's own shows: a rejected draft, or
    what the planner does next."""
    if isinstance(action, turn.AskModel) and rec["drafts"]:
        text, kind = rec["drafts"][-1]["draft"], "draft"
    elif isinstance(action, turn.AskQuery):
        lines = ", ".join(f"line {r.line}: {r.source}" for r in action.requests)
        text, kind = f"Asking the query model ({lines}).", "note"
    elif isinstance(action, turn.AskModel):
        failure = rec["failure"]
        where = f"line {failure['line']} ({failure['source']})" if failure else "a line"
        detail = failure["detail"] if failure else "it failed"
        text, kind = f"The plan stopped at {where}: {detail}. Asking for a new plan.", "note"
    else:
        text, kind = "The plan has finished; asking for the answer.", "note"
    return marked(AIMessage(text), kind, new_id=True)


def counter_updates(state: Any, model_calls: int, old_lag: int, lag: int) -> dict[str, int]:
    """Make ``ModelCallLimitMiddleware`` count real model calls, not visits of the model node.

    That middleware adds one per visit in ``after_model`` and, before every visit, stops the run
    once its count reaches the limit. A visit that makes no model call (a plan's step) must not
    count, and must not be refused for the model call that wrote the plan: while the next visit
    makes no model call, the counters are held one below the real number (``lag``), and the visit
    after which a model call is due gives the one back. So that middleware checks every model call
    before it is made, and at the end of the turn the counters equal the real model calls.
    (LangGraph ignores a key no middleware declared, so this does nothing without that middleware.)
    """
    delta = old_lag + model_calls - lag - 1
    if not isinstance(state, Mapping) or delta == 0:
        return {}
    counts = {key: state.get(key, 0) for key in MODEL_CALL_COUNTERS}
    return {key: value + delta for key, value in counts.items() if isinstance(value, int)}
