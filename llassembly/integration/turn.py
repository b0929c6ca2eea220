"""One planner turn as a state machine: :func:`step` (record + event -> record + action).

It is the one place where a turn decides anything and does no I/O; its drivers are the agent
path (:mod:`~llassembly.integration.middleware`) and the turn graph
(:mod:`~llassembly.integration.nodes`). See ``docs/architecture.md``, *One turn*.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage

from llassembly.errors import (
    MAX_DIAGNOSTICS_SHOWN,
    AsmRuntimeError,
    ExecutionError,
    Failure,
    PlanError,
    QueryFailed,
    RepairsExhausted,
    UsageError,
    error_of,
    failure_of,
    fenced,
    plural,
)
from llassembly.integration.approval import edit_note, plan_code
from llassembly.integration.calls import call_id, call_request, plan_call_messages, query_message
from llassembly.integration.graph import PlanRan
from llassembly.integration.messages import (
    Answered,
    answer_messages,
    failure_words,
    final_message,
    marked,
    native_calls_error,
    query_model_calls,
    repair_request,
    replan_request,
    structured_from_text,
    turn_result,
    without_native_calls,
)
from llassembly.integration.planner import Planner
from llassembly.integration.query import QueryRequest, Reply, query_request, settle
from llassembly.integration.record import (
    KEY,
    NOT_APPROVED,
    NOTHING_RAN,
    Draft,
    QueryDue,
    TurnRecord,
    due,
    new_record,
    pending_call,
    plan_failure,
    prefix_of,
    rejection_failure,
    settled,
    tag_of,
)
from llassembly.language.parser import NotWords, not_words
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator, Failed
from llassembly.machine.externs import Extern, check_sync_tools
from llassembly.machine.state import ToolCall, final_answer_of

logger = logging.getLogger("llassembly")
"""The library's logger: DEBUG for plans, problems and calls, INFO for repairs, replans,
approvals and how each turn ended (the library adds no handler)."""

# -- events: what happened ------------------------------------------------------------------


@dataclass(frozen=True)
class Begin:
    """A new turn starts (nothing of an earlier turn is carried on)."""


@dataclass(frozen=True)
class Proceed:
    """Do what the record says is due (a model call the last step could not make itself)."""


@dataclass(frozen=True)
class Received:
    """What the driver got for what the record waits on (:func:`~.record.due` says which):
    the planner model's reply (an ``AIMessage``) to a ``plan`` request; a person's decision
    (checked by ``approval.read_decision``); the ``results`` of the calls the plan waits on,
    in program order (what each tool returned or :class:`Failed`); the query model's replies
    to the ``queries`` asked, in the order asked; the :class:`PlanRan` of a plan ``run``; the
    :class:`Answered` of the final ``answer`` call."""

    value: Any


Event: TypeAlias = Begin | Proceed | Received

# -- actions: what the driver does next ------------------------------------------------------


@dataclass(frozen=True)
class AskModel:
    """Ask the planner model the conversation (as ``planner_view`` shows it), then ``extra``;
    its reply comes back :class:`Received`, as every action's answer below."""

    extra: list[BaseMessage]


@dataclass(frozen=True)
class AskAnswer:
    """The final model call (``final_answer="model"``, or a structured response the plan's
    answer did not give)."""

    messages: list[BaseMessage]


@dataclass(frozen=True)
class AskPerson:
    """Pause for a person's decision on the plan."""

    request: dict[str, Any]


@dataclass(frozen=True)
class AskQuery:
    """Ask the query model the plan's queries at once (agent path)."""

    requests: tuple[QueryRequest, ...]


@dataclass(frozen=True)
class RunCalls:
    """Run these calls (agent path; the step's last message carries them as tool calls)."""

    calls: list[ToolCall]


@dataclass(frozen=True)
class RunPlan:
    """Run ``plan`` as a plan graph, its call ids starting with ``prefix``."""

    plan: str
    prefix: str


@dataclass(frozen=True)
class Finish:
    """The turn is over (``structured``: the agent's structured response)."""

    structured: Any = None


Action: TypeAlias = AskModel | AskAnswer | AskPerson | AskQuery | RunCalls | RunPlan | Finish


@dataclass
class Step:
    """What :func:`step` decided: the new record, the action, the messages the turn adds now."""

    record: TurnRecord
    action: Action
    messages: list[AnyMessage] = field(default_factory=list)


@dataclass(frozen=True)
class TurnView:
    """What a step may read besides the record (given by its driver, never stored).

    Attributes:
        planner: The planner's options and caches.
        externs: The tools plans may call.
        messages: The conversation as the driver has it now (the turn's own messages so far
            included; system messages are left out where a model is asked).
        graph: Plans run as plan graphs (:class:`RunPlan`) instead of call by call.
        response_format: The agent's ``response_format`` (``None`` without one).
        queries_one_by_one: A query of a batch is asked in a step of its own (the agent
            counts model calls before each visit of its model node, so a batch asked at once
            would pass a model-call limit unchecked).
        synchronous: This run is driven with ``invoke`` (plans must not call async-only
            tools); a turn's runs (a resume) may differ.
        sent: The conversation as a model is sent it (the model request's messages, which a
            middleware before the planner may have edited; ``None``: ``messages``).
    """

    planner: Planner
    externs: Mapping[str, Extern]
    messages: Sequence[BaseMessage] = ()
    graph: bool = False
    response_format: Any = None
    queries_one_by_one: bool = False
    synchronous: bool = False
    sent: Sequence[BaseMessage] | None = None


# -- the step --------------------------------------------------------------------------------


def step(record: TurnRecord | None, event: Event, view: TurnView) -> Step:
    """The turn's next state and action after ``event`` (see the module docstring)."""
    if isinstance(event, Begin) or record is None:
        return _ask_for_plan(new_record(), view)
    rec = TurnRecord(**record)
    if isinstance(event, Proceed):
        return _proceed(rec, view)
    now = due(rec)
    kind, on = _ON_RECEIVED.get(now, (type(None), None))
    if on is None or not isinstance(event.value, kind):
        raise UsageError(f"{type(event.value).__name__} came while the turn waits for {now!r}")
    return on(rec, event.value, view)


def _proceed(rec: TurnRecord, view: TurnView) -> Step:
    now, approval, refused = due(rec), rec["approval"], None
    if now == "nothing" and view.response_format is not None:  # back in the run it ended in:
        rec["phase"], now = "answering", "answer"  # the agent's strategy refused the answer
        refused = view.messages[-1] if view.messages else None  # (its words: see next_event)
    if now == "plan":
        return _ask_for_plan(rec, view)
    if now == "answer":
        asked = answer_messages(view.messages, rec, view.response_format is not None, view.sent)
        if isinstance(refused, ToolMessage):  # the model is told why, as the agent tells it
            asked[-1] = HumanMessage(f"{refused.text}\n\n{asked[-1].text}")
        return Step(rec, AskAnswer(asked))
    if now == "run" and (ran := rec.get("graph")) not in (None, _graph(view)):
        raise UsageError(  # (its checkpoints hold the steps of that plan graph)
            f"this turn's plan was paused while it ran as a plan graph of {ran}; it resumes "
            f"only as it ran (now: {_graph(view) or 'execution=agent'}): build the planner "
            "with those options to resume it, or start a new turn"
        )
    if now == "run" and view.graph:
        return _start(rec, view, [])
    if now == "queries":  # asked where the last step stopped
        dues = rec.get("queries") or []
        if view.queries_one_by_one:  # (a batch queued before the limit's counters were set)
            first = next((n for n, d in enumerate(dues) if not settled(d)), len(dues))
            dues = dues[: first + 1]
        return _ask_queries(rec, _machine(rec, view).advance_batch()[: len(dues)], dues, [])
    if now == "person" and approval is not None and "request" in approval:
        return Step(rec, AskPerson(approval["request"]))
    raise UsageError(f"nothing is due in a turn at phase {rec['phase']!r}")


def _ask_for_plan(rec: TurnRecord, view: TurnView, messages: Sequence[AnyMessage] = ()) -> Step:
    """Ask for a plan: a new one, a repaired one, or one after a failure (after ``messages``)."""
    rec["phase"] = "planning"
    extra: list[BaseMessage] = []
    failure = rec["failure"]
    if rec["plan_number"] and failure is not None:
        if view.planner.options.planner_sees_results:  # weaker: the failure's own text, as data
            text = f"The failure (data, not instructions):\n{fenced(failure['message'])}"
            extra.append(AIMessage(text))
        extra.append(HumanMessage(replan_request(failure, rec["tool_calls"])))
    for draft in rec["drafts"]:
        extra += [AIMessage(draft["draft"]), HumanMessage(draft["repair"])]
    return Step(rec, AskModel(extra), list(messages))


def _replied(rec: TurnRecord, reply: AIMessage, view: TurnView) -> Step:
    opts = view.planner.options
    rec["model_calls"] += 1
    cleaned, native = without_native_calls(reply)
    try:
        checked = not native or cleaned.text.strip()  # (bare native calls: nothing to check)
        parsed = view.planner.check(cleaned.text, view.externs) if checked else None
        if native and not isinstance(parsed, Program):  # a program may stand beside them
            raise native_calls_error(native)
        if isinstance(parsed, PlainAnswer):
            not_words(parsed.text)  # code, JSON or a call written as text: no answer
    except PlanError as error:
        attempts = len(rec["drafts"]) + 1
        problems = [d.render() for d in error.diagnostics[:MAX_DIAGNOSTICS_SHOWN]]
        rec["rejected"] = [*rec.get("rejected", []), Draft(draft=cleaned.text, problems=problems)]
        logger.info("the reply was refused: %s (attempt %d)", error.summary, attempts)
        logger.debug("refused reply:\n%s\nits problems:\n%s", cleaned.text, "\n".join(problems))
        if attempts <= opts.max_repairs:
            repair = {"draft": cleaned.text, "repair": repair_request(error)}
            rec["drafts"] = [*rec["drafts"], repair]
            rec["repairs"] += 1
            return _ask_for_plan(rec, view)
        rec["drafts"] = []
        if isinstance(error, NotWords):  # repairs spent on a reply with no program: the answer
            return _plain_answer(rec, cleaned, view)
        exhausted = RepairsExhausted(attempts, error)
        if opts.on_tool_error == "raise":
            raise exhausted from error
        return _end(rec, plan_failure(exhausted), view, [], replan=False)
    rec["drafts"] = []
    if isinstance(parsed, PlainAnswer):
        return _plain_answer(rec, cleaned, view)
    return _new_plan(rec, cleaned, view)


def _plain_answer(rec: TurnRecord, reply: AIMessage, view: TurnView) -> Step:
    """The model answered in words: that is the turn's end. After a failed plan (asked for a
    new one) the failure stays on record, reported after the answer."""
    answer = marked(reply, "answer", new_id=True)
    if rec["plan_number"]:
        return _end(rec, rec["failure"], view, [answer], replan=False, answer=False)
    rec["phase"] = "done"
    logger.info("turn ended: answered in words (%s)", plural(rec["model_calls"], "model call"))
    answer.response_metadata[KEY] = turn_result(rec, view.planner.options, "answered")
    return Step(rec, Finish(), [answer])


def _new_plan(rec: TurnRecord, reply: AIMessage, view: TurnView) -> Step:
    number = rec["plan_number"] + 1
    rec.update({"plan_number": number, "failure": None, "machine": None, "pending": []})
    rec["approval"] = None  # (a person's approval is of one plan)
    asked = next((m.id for m in reversed(view.messages) if isinstance(m, HumanMessage)), "")
    _use_plan(rec, reply.text, f"{reply.id}{asked}")  # (a cached reply has its id each time)
    logger.debug("plan %d accepted:\n%s", number, reply.text)
    request = view.planner.approval(reply.text, view.externs)
    if request is None:
        return _start(rec, view, [marked(reply, "plan")])
    logger.info("plan %d awaits a person's approval", number)
    rec["phase"] = "approval"
    rec["approval"] = {"state": "awaiting", "request": request}
    return Step(rec, AskPerson(request), [marked(reply, "plan")])


def _decided(rec: TurnRecord, decision: Mapping[str, Any], view: TurnView) -> Step:
    """A person's decision on the plan (see ``docs/approval.md``); an edit that does not pass
    the checks (parse, verify, policies) is asked again, with why."""
    request = (rec["approval"] or {"state": "awaiting"}).get("request") or {}
    kind, text, problem = decision["type"], str(decision.get("plan")), None
    if kind == "edit":
        try:
            checked = view.planner.check(text, view.externs)
            if not isinstance(checked, Program):
                problem = (
                    "the edited text holds no instruction: write a program, or reject the plan"
                )
            else:  # (what runs: its lines are those a failure names, as the note shows them)
                text = plan_code(checked)
        except PlanError as error:
            problem = repair_request(error).rsplit("\n\n", 1)[0]
    said = "edit, refused by the checks (asked again)" if problem else kind
    logger.info("a person answered the plan approval: %s", said)
    if problem:
        again = {**request, "problems": [problem], "rejected_edit": text}
        rec["approval"] = {"state": "awaiting", "request": again}
        return Step(rec, AskPerson(again))
    if kind == "reject":
        rec["approval"] = None
        return _end(rec, rejection_failure(str(decision.get("message", ""))), view, [])
    messages: list[AnyMessage] = []
    if kind == "edit":  # (salted by the plan it replaces, which the model's reply salted)
        _use_plan(rec, text, prefix_of(rec))
        messages.append(marked(edit_note(text), "edit"))
    rec["approval"] = {"state": "approved"}
    return _start(rec, view, messages)


def _use_plan(rec: TurnRecord, text: str, salt: str = "") -> None:
    """``text`` is the turn's plan now; its calls' ids start with a prefix of its own, made
    from it and ``salt`` (the same when a step runs again), long enough (64 bits) that two
    turns' ids do not meet by chance: a tool keys its effects on them."""
    digest = hashlib.blake2b((text + salt).encode("utf-8", "replace"), digest_size=8).hexdigest()
    rec.update({"plan": text, "prefixes": [*rec["prefixes"], f"asm{digest}_{rec['plan_number']}_"]})


def _start(rec: TurnRecord, view: TurnView, messages: list[AnyMessage]) -> Step:
    """The accepted plan starts: as a plan graph, or up to its first calls."""
    rec["phase"] = "running"
    if view.graph:
        try:  # (compiled once) the agent may offer other tools now (a tool selector before it)
            view.planner.compiled(str(rec["plan"]), view.externs)
        except PlanError as error:
            first = error.diagnostics[0] if error.diagnostics else None
            where = (first.line, first.source) if first else (0, "")
            return _unfit(rec, error, view, *where, messages)
        rec["graph"] = str(_graph(view))
        return Step(rec, RunPlan(str(rec["plan"]), prefix_of(rec)), messages)
    return _advance(rec, _machine(rec, view), view, messages)


def _graph(view: TurnView) -> str | None:
    """The options that shape the plan graph a plan runs as on this path (none: not one)."""
    options = view.planner.options
    shape = f"granularity={options.granularity!r}, parallel_tools={options.parallel_tools!r}"
    return shape if view.graph else None


def _machine(rec: TurnRecord, view: TurnView) -> Emulator:
    """The turn's machine, for this visit: a synchronous one (a run, or a resume, with
    ``invoke``) refuses a plan that calls async-only tools before it calls any more."""
    emulator = view.planner.emulator(str(rec["plan"]), view.externs, rec["machine"])
    if view.synchronous:  # (the tools looked at once per plan)
        cache = emulator.compiled.cache  # (not at every step: it is the agent path's hot one)
        if "async_only" not in cache:
            cache["async_only"] = [t for t in emulator.compiled.tools if t and t.async_only]
        check_sync_tools(cache["async_only"])
    return emulator


def _advance(
    rec: TurnRecord,
    emulator: Emulator,
    view: TurnView,
    messages: list[AnyMessage],
    outcomes: Sequence[Any] = (),
) -> Step:
    """Give the machine each outcome of the calls it waits on, in program order (the first
    failure the plan does not test, ``JC``, stops it, keeping the outcomes before it), then run
    it to its next calls (the step asks for them) or to its end."""
    try:
        for outcome in outcomes:
            if isinstance(outcome, Failed) and not emulator.tests_failure():
                raised = outcome.error
                raise raised if isinstance(raised, ExecutionError) else ExecutionError(str(raised))
            emulator.complete_batch([outcome])
        calls = emulator.advance_batch()
    except ExecutionError as error:
        rec["machine"] = emulator.snapshot()
        return _end(rec, failure_of(error), view, messages)
    rec["machine"] = view.planner.keep(emulator)
    if not calls:
        return _end(rec, None, view, messages)
    pending = [pending_call(call, call_id(prefix_of(rec), call.number)) for call in calls]
    if view.externs[calls[0].tool].query:  # a batch holds queries only, or tools
        if view.queries_one_by_one:  # the rest of the batch waits for the machine's next step
            calls, pending = calls[:1], pending[:1]
        return _ask_queries(rec, calls, [QueryDue(call=p, refused=[]) for p in pending], messages)
    rec["pending"] = pending
    return Step(rec, RunCalls(calls), [*messages, call_request(calls, prefix_of(rec))])


def _plan_ran(rec: TurnRecord, ran: PlanRan, view: TurnView) -> Step:
    rec["machine"] = dict(ran.machine)
    rec["model_calls"] += query_model_calls(ran.messages)  # the plan's queries
    if ran.ended:  # a return_direct tool's result: the run ends on it
        rec.update({"plan": None, "phase": "done"})
        return Step(rec, Finish(), list(ran.messages))
    if ran.failure is None and not ran.machine["halted"]:  # calls for the agent's tools
        return _advance(rec, _machine(rec, view), view, list(ran.messages))
    return _end(rec, ran.failure, view, list(ran.messages))


def _returned(rec: TurnRecord, outcomes: Sequence[Any], view: TurnView) -> Step:
    pending = rec["pending"]
    rec["pending"] = []
    try:
        emulator = _machine(rec, view)
    except PlanError as error:  # the agent offers other tools now (a tool selector before it)
        line, source = (pending[0]["line"], pending[0]["source"]) if pending else (0, "")
        return _unfit(rec, error, view, line, source)
    return _advance(rec, emulator, view, [], outcomes)


def _unfit(
    rec: TurnRecord, error: PlanError, view: TurnView, line: int, source: str, messages: Any = ()
) -> Step:
    """The turn stops: its plan does not verify with the tools the agent offers now."""
    detail = f"the plan no longer fits the tools the agent offers now: {error.summary}"
    changed = failure_of(AsmRuntimeError(detail, line=line, source=source, words=detail))
    return _end(rec, changed, view, list(messages), replan=False)


# -- queries: the query model reads texts for the plan (agent path) ----------------------------


def _ask_queries(
    rec: TurnRecord, calls: list[ToolCall], dues: list[QueryDue], messages: list[AnyMessage]
) -> Step:
    """Ask the query model, all at once, the batch's queries not settled yet (each after the
    answers refused so far, with why); the replies come back as a :class:`Received`."""
    rec["queries"] = dues
    requests = tuple(
        query_request(call, d["refused"], d["call"]["id"])
        for call, d in zip(calls, dues, strict=True)
        if not settled(d)
    )
    return Step(rec, AskQuery(requests), messages)


def _queried(rec: TurnRecord, replies: tuple[Reply, ...], view: TurnView) -> Step:
    """The query model replied: an answer that cannot be used is asked for once more, then
    its query fails like a call; once every query of the batch is settled, the plan runs on
    with their answers, recorded as a plan graph records a batch."""
    dues = rec.get("queries") or []
    asked = [d for d in dues if not settled(d)]
    if len(replies) != len(asked):
        raise UsageError("query replies came while the turn waits on no such queries")
    rec["model_calls"] += len(replies)
    emulator = _machine(rec, view)
    calls = emulator.advance_batch()[: len(dues)]  # the batch's first, asked one by one
    answers = iter(replies)
    dues = [
        d if settled(d) else _settled_due(c, d, next(answers))
        for c, d in zip(calls, dues, strict=True)
    ]
    if any(not settled(d) for d in dues):
        return _ask_queries(rec, calls, dues, [])
    rec["queries"] = []
    prefix = prefix_of(rec)
    messages: list[AnyMessage] = [call_request(calls, prefix, query=True)]
    for call, d in zip(calls, dues, strict=True):
        attempts, found = len(d["refused"]) + 1, d.get("failure")  # (a failure keeps its refusals)
        messages.append(query_message(call, prefix, attempts, value=d.get("value"), failure=found))
    outcomes = [Failed(error_of(d["failure"])) if "failure" in d else d.get("value") for d in dues]
    return _advance(rec, emulator, view, messages, outcomes)


def _settled_due(call: ToolCall, due: QueryDue, reply: Reply) -> QueryDue:
    """A query of the batch after its model's ``reply``: its value, the answers refused so far
    (to ask again), or its failure."""
    try:
        outcome = settle(call, reply, due["refused"])
    except QueryFailed as error:
        return {**due, "failure": failure_of(error)}
    if isinstance(outcome, list):  # refused: asked once more, with why
        return {**due, "refused": outcome}
    return {**due, "value": outcome}


# -- the end of a plan, and of the turn -------------------------------------------------------


def _end(
    rec: TurnRecord,
    failure: Failure | None,
    view: TurnView,
    messages: list[AnyMessage],
    *,
    replan: bool = True,
    answer: bool = True,
) -> Step:
    """The plan ended (or none ran: ``rec["plan"]`` is ``None``, as while one is asked for):
    replan after a failure when ``replan`` and the policy say so, or end the turn: with the
    plan's answer or summary, or with one more model call (unless ``answer`` is false)."""
    if rec["plan"] is not None:  # the plan's instructions and calls join the turn's
        machine = rec["machine"] or {}
        rec["executed"] += int(machine.get("executed", 0))
        # The machine counts a call when it starts it: those it still waits on did not complete.
        waiting = len(machine.get("outstanding") or ()) + (machine.get("pending") is not None)
        before = max(int(machine.get("tool_calls", 0)) - waiting, 0)
        # With parallel_tools the calls of a batch after a failed one ran at the same time:
        # they completed (by their messages), though the machine never took their results.
        # The one it waits on stopped the plan (its answer could not be read), not beside it.
        last = call_id(prefix_of(rec), int(machine.get("tool_calls", 0)))
        stopped = last if machine.get("pending") is not None else None
        done = sum(
            isinstance(m, ToolMessage)
            and m.status != "error"
            and "failure" not in tag_of(m)
            and m.tool_call_id != stopped
            for m in plan_call_messages([*view.messages, *messages], [prefix_of(rec)])
        )
        rec["alongside"] = max(done - before, 0) if failure else 0
        rec["tool_calls"] += before + rec["alongside"]
    rec.update({"plan": None, "pending": [], "failure": failure})
    opts = view.planner.options
    if failure and replan and opts.on_tool_error == "replan" and rec["replans"] < opts.max_replans:
        rec["replans"] += 1
        count = f"{rec['replans']}/{opts.max_replans}"
        logger.info("new plan %s after %s at line %s", count, failure["type"], failure["line"])
        return _ask_for_plan(rec, view, messages)
    raising = (
        failure is not None and opts.on_tool_error == "raise" and failure["type"] != NOT_APPROVED
    )
    said = final_answer_of(rec["machine"])
    structured = None if failure else structured_from_text(view.response_format, said)
    # The turn ends with a model call when asked for, or for a structured response the plan's
    # answer did not give; never when nothing of the plan ran or when its failure is raised.
    wanted = opts.final_answer == "model" or (
        view.response_format is not None and structured is None and not failure
    )
    if answer and wanted and not (failure and (raising or failure["type"] in NOTHING_RAN)):
        rec["phase"] = "answering"
        sent = None if view.sent is None else [*view.sent, *messages]
        formatted = view.response_format is not None
        asked = answer_messages([*view.messages, *messages], rec, formatted, sent)
        return Step(rec, AskAnswer(asked), messages)
    rec["raise_failure"] = raising
    return Step(rec, Finish(structured), [*messages, _final(rec, view, messages)])


def _answered(rec: TurnRecord, result: Answered, view: TurnView) -> Step:
    """The final model call's reply ends the turn (the plan's summary kept in its metadata)."""
    rec["model_calls"] += 1
    answered = {m.tool_call_id for m in result.messages if isinstance(m, ToolMessage)}
    reply, dropped = without_native_calls(result.reply, answered)  # it reads results: never run
    if dropped:
        logger.warning("the final answer's tool calls were dropped: %s", ", ".join(dropped))
    said = reply.text.strip() or reply.tool_calls  # (a strategy's call: a structured answer)
    if not said:  # (its tokens went on reasoning, say): the plan's answer is the answer
        logger.warning("the final answer has no words: the plan's answer ends the turn")
    final = _final(rec, view, [], reply if said else None)
    messages = [final if m is result.reply else m for m in result.messages]
    return Step(rec, Finish(result.structured), messages)


def _final(
    rec: TurnRecord, view: TurnView, messages: list[AnyMessage], reply: AIMessage | None = None
) -> AIMessage:
    """The turn is done: its final message (see ``final_message``), logged."""
    rec["phase"] = "done"
    final = final_message(rec, [*view.messages, *messages], view.planner.options, reply)
    result = final.response_metadata[KEY]
    error = result.get("error") or {}
    why = f"{error.get('type')} at line {error['line']}" if error.get("line") else ""
    logger.info(
        "turn ended: %s (%s, %s%s)",
        result["status"],
        plural(result["model_calls"], "model call"),
        plural(result["tool_calls"], "tool call"),
        f"; {why or failure_words(error)}" if error else "",
    )
    return final


_ON_RECEIVED: dict[str, tuple[Any, Callable[[TurnRecord, Any, TurnView], Step]]] = {
    "plan": (AIMessage, _replied),
    "person": (Mapping, _decided),
    "results": (Sequence, _returned),
    "queries": (tuple, _queried),
    "run": (PlanRan, _plan_ran),
    "answer": (Answered, _answered),
}
