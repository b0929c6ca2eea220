"""One planner turn as a state machine: the record, an event, and what to do next.

:func:`step` is the one place where a turn decides anything: how a reply becomes a plan (or a
repair request, or the turn's end), what a person's decision means, how results go into the
machine, when a failed plan is planned again, how the turn ends. It does no I/O: it never calls
a model, a tool or a person. It returns the new record, the messages the turn adds now, and an
:data:`Action` for its driver:

* the agent path (``ToolsPlannerMiddleware``, :mod:`llassembly.integration.agent`) drives it
  from the agent's model node: model calls through the agent's model handler, tool calls
  through the agent's own tool node;
* the turn graph (:mod:`llassembly.integration.turngraph`: the planner nodes, and the
  middleware's ``execution="graph"``) drives it from graph nodes, and runs plans as a nested
  :class:`~llassembly.integration.graph.PlanGraph`.

Events: :class:`Begin` (a new turn), :class:`Proceed` (do what the record says is due),
:class:`Replied` (the model wrote a reply), :class:`Decided` (a person answered the plan
approval), :class:`Returned` (the results of the calls the plan waits on), :class:`Queried`
(the query model answered the plan's query), :class:`PlanRan` (a plan graph ran the plan),
:class:`Answered` (the final model call answered).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)

from llassembly.errors import (
    AsmRuntimeError,
    ExecutionError,
    PlanError,
    RepairsExhausted,
    UsageError,
)
from llassembly.integration.approval import decide, edit_note
from llassembly.integration.batches import query_outcomes, take_batch
from llassembly.integration.events import (
    Action,
    Answered,
    AskAnswer,
    AskModel,
    AskPerson,
    AskQuery,
    Begin,
    Decided,
    Event,
    Finish,
    PlanRan,
    Proceed,
    Queried,
    Replied,
    Returned,
    RunCalls,
    RunPlan,
    Step,
    TurnView,
)
from llassembly.integration.final import (
    AnswerRequest,
    answer_messages,
    needs_model,
    structured_from_text,
)
from llassembly.integration.messages import (
    batch_request,
    calls_alongside,
    completed_calls,
    final_message,
    marked,
    plan_call_messages,
    query_model_calls,
)
from llassembly.integration.planner import short_hash
from llassembly.integration.query import query_request, settled_due
from llassembly.integration.record import (
    NOT_APPROVED,
    Failed,
    Failure,
    QueryDue,
    TurnRecord,
    execution_failure,
    new_record,
    pending_call,
    plan_failure,
    queries_due,
    settled,
)
from llassembly.integration.views import (
    native_calls_error,
    repair_request,
    replan_request,
    without_native_calls,
)
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator, ToolCall
from llassembly.machine.externs import check_sync_tools
from llassembly.machine.query import is_query
from llassembly.machine.say import final_answer_of

__all__ = [
    "Action",
    "Answered",
    "AskAnswer",
    "AskModel",
    "AskPerson",
    "AskQuery",
    "Begin",
    "Decided",
    "Event",
    "Failed",
    "Finish",
    "PlanRan",
    "Proceed",
    "Queried",
    "Replied",
    "Returned",
    "RunCalls",
    "RunPlan",
    "Step",
    "TurnView",
    "step",
]


# -- the step --------------------------------------------------------------------------------


def step(record: TurnRecord | None, event: Event, view: TurnView) -> Step:
    """The turn's next state and action after ``event`` (see the module docstring)."""
    if isinstance(event, Begin) or record is None:
        rec = new_record(synchronous=bool(record and record["synchronous"]))
        return _ask_for_plan(rec, view)
    rec = TurnRecord(**record)
    if isinstance(event, Proceed):
        return _proceed(rec, view)
    if isinstance(event, Replied):
        return _replied(rec, event.reply, view)
    if isinstance(event, Decided):
        return _decided(rec, event.decision, view)
    if isinstance(event, Returned):
        return _returned(rec, event, view)
    if isinstance(event, Queried):
        return _queried(rec, event, view)
    if isinstance(event, PlanRan):
        rec["machine"] = dict(event.machine)
        rec["model_calls"] += query_model_calls(event.messages)  # the plan's queries
        return _plan_ended(rec, event.failure, view, list(event.messages))
    return _answered(rec, event, view)


def _proceed(rec: TurnRecord, view: TurnView) -> Step:
    if rec["phase"] == "planning":
        return _ask_for_plan(rec, view)
    if rec["phase"] == "answering":
        return Step(rec, AskAnswer(_answer_request(rec, view)))
    if rec["phase"] == "running" and view.graph:
        return Step(rec, RunPlan(str(rec["plan"]), rec["prefix"]))
    if rec["phase"] == "running" and queries_due(rec):  # asked where the last step stopped
        return _ask_queries(rec, _calls(_machine(rec, view)), rec.get("queries") or [], [])
    approval = rec["approval"]
    if rec["phase"] == "approval" and approval is not None and "request" in approval:
        return Step(rec, AskPerson(approval["request"]))
    raise UsageError(f"nothing is due in a turn at phase {rec['phase']!r}")


def _ask_for_plan(rec: TurnRecord, view: TurnView) -> Step:
    """Ask for a plan: a new one, a repaired one, or one after a failure."""
    rec["phase"] = "planning"
    extra: list[BaseMessage] = []
    if rec["plan_number"] and rec["failure"] is not None:
        extra.append(HumanMessage(replan_request(rec["failure"])))
    for draft in rec["drafts"]:
        extra += [AIMessage(draft["draft"]), HumanMessage(draft["repair"])]
    return Step(rec, AskModel(extra))


def _replied(rec: TurnRecord, reply: AIMessage, view: TurnView) -> Step:
    opts = view.planner.options
    rec["model_calls"] += 1
    if rec["phase"] == "answering":
        raise UsageError("a planning reply came while the turn waits for its final answer")
    cleaned, native = without_native_calls(reply)
    try:
        if native and not cleaned.text.strip():
            raise native_calls_error(native)
        parsed = view.planner.check(cleaned.text, view.externs)
        if native and isinstance(parsed, PlainAnswer):
            raise native_calls_error(native)
    except PlanError as error:
        attempts = len(rec["drafts"]) + 1
        if attempts <= opts.max_repairs:
            rec["drafts"] = [
                *rec["drafts"],
                {"draft": cleaned.text, "repair": repair_request(error)},
            ]
            rec["repairs"] += 1
            return _ask_for_plan(rec, view)
        rec["drafts"] = []
        failure = plan_failure(RepairsExhausted(attempts, error))
        if opts.on_tool_error == "raise":
            raise RepairsExhausted(attempts, error) from error
        rec["plan"] = None
        return _end(rec, failure, view, [])
    rec["drafts"] = []
    if isinstance(parsed, PlainAnswer):
        return _plain_answer(rec, cleaned, view)
    return _new_plan(rec, cleaned, parsed, view)


def _plain_answer(rec: TurnRecord, reply: AIMessage, view: TurnView) -> Step:
    """The model answered in words: that is the turn's end. After a failed plan (asked for a
    new one) the failure stays on record, reported after the answer."""
    rec["plan"] = None
    if not rec["plan_number"]:
        rec["phase"] = "done"
        return Step(rec, Finish(), [marked(reply, "answer", new_id=True)])
    return _end(rec, rec["failure"], view, [marked(reply, "answer", new_id=True)], answer=False)


def _new_plan(rec: TurnRecord, reply: AIMessage, program: Program, view: TurnView) -> Step:
    number = rec["plan_number"] + 1
    prefix = f"asm{short_hash(reply.text + str(reply.id))}_{number}_"
    rec.update(
        {
            "plan": reply.text,
            "plan_number": number,
            "prefix": prefix,
            "prefixes": [*rec["prefixes"], prefix],
            "failure": None,
            "machine": None,
            "pending": [],
        }
    )
    request = view.planner.approval(reply.text, view.externs)
    if request is not None:
        rec["phase"] = "approval"
        rec["approval"] = {"state": "awaiting", "request": request}
        return Step(rec, AskPerson(request), [marked(reply, "plan")])
    return _start(rec, view, [marked(reply, "plan")])


def _decided(rec: TurnRecord, decision: Mapping[str, Any], view: TurnView) -> Step:
    approval = rec["approval"] or {"state": "awaiting"}
    request = approval.get("request") or {}
    kind, result = decide(request, decision, lambda text: view.planner.check(text, view.externs))
    if kind == "again":  # an edit that does not pass the checks: the person is asked again
        rec["approval"] = {"state": "awaiting", "request": result}
        return Step(rec, AskPerson(result))
    if kind == "reject":
        rec["approval"] = None
        rec["raise_failure"] = False
        return _plan_ended(rec, result, view, [])
    messages: list[AnyMessage] = []
    if kind == "edit":
        prefix = f"asm{short_hash(result)}_{rec['plan_number']}_"
        rec.update({"plan": result, "prefix": prefix, "prefixes": [*rec["prefixes"], prefix]})
        messages.append(edit_note(result))
    rec["approval"] = {"state": "approved", "prefix": rec["prefix"]}
    return _start(rec, view, messages)


def _start(rec: TurnRecord, view: TurnView, messages: list[AnyMessage]) -> Step:
    """The accepted plan starts: as a plan graph, or up to its first calls."""
    rec["phase"] = "running"
    if view.graph:
        return Step(rec, RunPlan(str(rec["plan"]), rec["prefix"]), messages)
    emulator = _machine(rec, view)
    if rec["synchronous"]:
        compiled = emulator.compiled
        check_sync_tools((t.name for t in compiled.tools if t), compiled.externs)
    return _advance(rec, emulator, view, messages)


def _machine(rec: TurnRecord, view: TurnView) -> Emulator:
    opts = view.planner.options
    return Emulator(
        view.planner.compiled(str(rec["plan"]), view.externs),
        max_instructions_to_exec=opts.max_instructions_to_exec,
        max_tool_calls=opts.max_tool_calls,
        max_stack_depth=opts.max_stack_depth,
        state=rec["machine"],
        parallel_tools=opts.parallel_tools,
    )


def _advance(
    rec: TurnRecord, emulator: Emulator, view: TurnView, messages: list[AnyMessage]
) -> Step:
    """Run the machine to its next calls (the step asks for them) or to its end."""
    try:
        calls = _calls(emulator)
    except ExecutionError as error:
        rec["machine"] = emulator.snapshot()
        return _plan_ended(rec, execution_failure(error), view, messages)
    rec["machine"] = emulator.snapshot()
    if not calls:
        return _plan_ended(rec, None, view, messages)
    if is_query(view.externs.get(calls[0].tool)):  # a batch of queries only (see ahead.py)
        dues = [QueryDue(call=pending_call(call, rec["prefix"]), refused=[]) for call in calls]
        return _ask_queries(rec, calls, dues, messages)
    pending = [pending_call(call, rec["prefix"]) for call in calls]
    rec["pending"] = pending
    message = batch_request(calls, [p["id"] for p in pending])
    return Step(rec, RunCalls(calls, message), [*messages, message])


def _calls(emulator: Emulator) -> list[ToolCall]:
    """The calls the machine waits on next (the outstanding ones again, after a restore)."""
    if emulator.marked:
        return emulator.advance_batch()
    call = emulator.advance()
    return [] if call is None else [call]


def _returned(rec: TurnRecord, event: Returned, view: TurnView) -> Step:
    """Give the machine each result in program order; the first failure stops the plan,
    keeping the results before it."""
    pending = rec["pending"]
    rec["pending"] = []
    try:
        emulator = _machine(rec, view)
    except PlanError as error:  # the agent offers other tools now (a tool selector before it)
        line, source = (pending[0]["line"], pending[0]["source"]) if pending else (0, "")
        detail = f"the plan no longer fits the tools the agent offers now: {error.summary}"
        changed = execution_failure(AsmRuntimeError(detail, line=line, source=source))
        return _plan_ended(rec, changed, view, [], replan=False)
    for outcome in event.outcomes:
        failure: Failure | None = outcome.failure if isinstance(outcome, Failed) else None
        if failure is None:
            try:
                emulator.complete_batch([outcome])
            except ExecutionError as error:
                failure = execution_failure(error)
        if failure is not None:
            rec["machine"] = emulator.snapshot()
            return _plan_ended(rec, failure, view, [])
    return _advance(rec, emulator, view, [])


# -- queries: the query model reads texts for the plan (agent path) ----------------------------


def _ask_queries(
    rec: TurnRecord,
    calls: list[ToolCall],
    dues: list[QueryDue],
    messages: list[AnyMessage],
) -> Step:
    """Ask the query model, all at once, the batch's queries not settled yet (each after the
    answers refused so far, with why); the replies come back as :class:`Queried`."""
    rec["queries"] = dues
    requests = tuple(
        query_request(call.args, due["refused"], due["call"]["id"], call.line, call.source)
        for call, due in zip(calls, dues, strict=True)
        if not settled(due)
    )
    return Step(rec, AskQuery(requests), messages)


def _queried(rec: TurnRecord, event: Queried, view: TurnView) -> Step:
    """The query model replied: an answer that cannot be used is asked for once more, then
    its query fails like a call; once every query of the batch is settled, the plan runs on."""
    dues = rec.get("queries") or []
    asked = [due for due in dues if not settled(due)]
    if rec["phase"] != "running" or not asked or len(event.replies) != len(asked):
        raise UsageError("query replies came while the turn waits on no such queries")
    rec["model_calls"] += len(event.replies)
    emulator = _machine(rec, view)
    calls = _calls(emulator)
    replies = iter(event.replies)
    now: list[QueryDue] = []
    for call, due in zip(calls, dues, strict=True):
        if not settled(due):
            due = settled_due(call, due, next(replies))
        now.append(due)
    if any(not settled(due) for due in now):
        return _ask_queries(rec, calls, now, [])
    rec["queries"] = []
    return _take_queries(rec, emulator, calls, now, view)


def _take_queries(
    rec: TurnRecord,
    emulator: Emulator,
    calls: list[ToolCall],
    dues: list[QueryDue],
    view: TurnView,
) -> Step:
    """Give the machine the batch's answers in program order, recorded as a plan graph
    records a batch (a failure stops the plan, keeping the answers before it)."""
    messages: list[AnyMessage] = []
    try:
        take_batch(emulator, calls, query_outcomes(dues), {}, (messages, rec["prefix"]))
    except ExecutionError as error:
        rec["machine"] = emulator.snapshot()
        return _plan_ended(rec, execution_failure(error), view, messages)
    return _advance(rec, emulator, view, messages)


# -- the end of a plan, and of the turn -------------------------------------------------------


def _plan_ended(
    rec: TurnRecord,
    failure: Failure | None,
    view: TurnView,
    messages: list[AnyMessage],
    *,
    replan: bool = True,
) -> Step:
    """The plan ended: replan after a failure (when the policy says so), or end the turn."""
    machine = rec["machine"] or {}
    rec["executed"] += int(machine.get("executed", 0))
    before = completed_calls(machine)
    calls = [*view.messages, *messages]
    alongside = calls_alongside(calls, rec["prefix"], before) if failure else 0
    rec["tool_calls"] += before + alongside
    rec["alongside"] = alongside
    rec.update({"plan": None, "pending": [], "failure": failure})
    opts = view.planner.options
    replans_left = rec["replans"] < opts.max_replans
    if failure and replan and opts.on_tool_error == "replan" and replans_left:
        rec["replans"] += 1
        asked = _ask_for_plan(rec, view)
        asked.messages[:0] = messages
        return asked
    return _end(rec, failure, view, messages)


def _end(
    rec: TurnRecord,
    failure: Failure | None,
    view: TurnView,
    messages: list[AnyMessage],
    *,
    answer: bool = True,
) -> Step:
    """End the turn: with the plan's answer or summary, or with one more model call."""
    opts = view.planner.options
    rec["failure"] = failure
    raising = (
        failure is not None and opts.on_tool_error == "raise" and failure["type"] != NOT_APPROVED
    )
    said = final_answer_of(rec["machine"])
    structured = None if failure else structured_from_text(view.response_format, said)
    if answer and needs_model(
        opts.final_answer, failure, raising, view.response_format, structured
    ):
        rec["phase"] = "answering"
        return Step(rec, AskAnswer(_answer_request(rec, view, messages)), messages)
    rec["phase"] = "done"
    rec["raise_failure"] = raising
    final = final_message(rec, _turn_calls(rec, view, messages), opts, externs=view.externs)
    return Step(
        rec,
        Finish(structured, failure if raising else None),
        [*messages, final],
    )


def _answered(rec: TurnRecord, result: Answered, view: TurnView) -> Step:
    """The final model call answered: its reply ends the turn (the plan's summary kept in its
    metadata)."""
    rec["model_calls"] += 1
    rec["phase"] = "done"
    calls = _turn_calls(rec, view, [])
    final = final_message(rec, calls, view.planner.options, result.reply, view.externs)
    messages = [final if m is result.reply else m for m in result.messages]
    return Step(rec, Finish(result.structured), messages)


def _turn_calls(
    rec: TurnRecord, view: TurnView, messages: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The messages recording this turn's plan calls."""
    return plan_call_messages([*view.messages, *messages], rec["prefixes"])


def _answer_request(
    rec: TurnRecord, view: TurnView, messages: Sequence[BaseMessage] = ()
) -> AnswerRequest:
    conversation = [m for m in [*view.messages, *messages] if not isinstance(m, SystemMessage)]
    return answer_messages(
        conversation, _turn_calls(rec, view, messages), rec, view.response_format is not None
    )
