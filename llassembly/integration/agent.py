"""The agent path: a plan's calls run through the agent's own tool node.

Inside ``create_agent`` the planner takes the model's place between tool turns. Each visit of
the agent's model node is one *step*:

1. No plan is waiting for a result: ask the model for a plan (repairing it until it parses and
   verifies), start the machine, and run pure instructions up to the first ``CALL``.
2. A plan is waiting: read the result of its pending call from the ``ToolMessage`` the agent's
   tool node (or an approval or limit middleware) wrote, hand it to the machine, and run on to
   the next ``CALL``.

A step answers the model turn with an ``AIMessage`` carrying that one tool call, and the agent
routes it to its tool node like any call the model made. When the plan ends (or fails and the
policy says so) the step answers with the final ``AIMessage`` and no tool calls, which ends the
agent's loop. The machine lives in the agent's private state as plain data, so every step is
checkpointed and can continue in any process.

The body of a step is a sans-IO generator: it yields the conversations it wants the model to
answer (planning, repairs, replans) and returns a :class:`StepOutcome`; the middleware drives it
with the agent's model handler, sync or async.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from llassembly.errors import (
    AsmRuntimeError,
    ExecutionError,
    PlanError,
    RepairsExhausted,
)
from llassembly.integration.approval import (
    decide,
    decided,
    edit_note,
)
from llassembly.integration.final import (
    Answered,
    answer_messages,
    needs_model,
    plan_call_messages,
    structured_from_text,
    turn_summary,
)
from llassembly.integration.messages import (
    batch_request,
    failure_record,
    final_message,
    plan_failure,
    replan_request,
)
from llassembly.integration.planner import (
    Turn,
    short_hash,
)
from llassembly.integration.results import (
    decode_result,
    failure_of,
)
from llassembly.machine.emulator import (
    Emulator,
    ToolCall,
)
from llassembly.machine.externs import (
    Extern,
    check_sync_tools,
)
from llassembly.machine.say import answer_of

__all__ = [
    "PLAN_CALL_KEY",
    "StepOutcome",
    "agent_step",
    "call_meta",
    "counter_updates",
    "decode_result",
    "failure_message",
    "pending_call",
    "quick_step",
]

PLAN_CALL_KEY = "llassembly"
"""Key of the plan-call record in ``response_metadata`` (and of the planner's private state)."""
ENDS_RUN = "ends_run"
"""In a plan call's record: its tool is ``return_direct`` (its result ends the run)."""
ADDED_BY_CALL = "llassembly_added_by_call"
"""In ``response_metadata``: the id of the plan call whose tool added this message."""

# ModelCallLimitMiddleware's counters: a planner step that calls no model takes back the count
# that middleware's after_model adds for every model-node visit (see counter_updates).
_MODEL_COUNTERS = ("thread_model_call_count", "run_model_call_count")


@dataclass
class StepOutcome:
    """What one step answers.

    Attributes:
        messages: The model turn's answer; its last message is the ``AIMessage`` the agent
            routes on (a tool call, or the final message).
        record: The planner's private state after the step.
        removals: Ids of messages to take out of the agent state (``infer_tools_messages``
            is off and the turn ended).
        model_calls: Real model calls made during the step.
        structured: The agent's ``structured_response`` when the turn ends with one.
    """

    messages: list[AnyMessage]
    record: dict[str, Any]
    removals: list[str] = field(default_factory=list)
    model_calls: int = 0
    structured: Any = None
    ended: bool = False
    """The step ends the turn with the planner's final message (a plan ran, or could not)."""


_M = TypeVar("_M", bound=BaseMessage)


def conversation(messages: Sequence[_M]) -> list[_M]:
    """The messages the planner model sees after its system prompt (system messages dropped)."""
    return [m for m in messages if not isinstance(m, SystemMessage)]


def pending_call(record: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The call a plan in ``record`` is waiting on, or ``None`` (the record's own entry: read
    it, do not change it)."""
    if not record:
        return None
    pending = record.get("pending")
    return pending if isinstance(pending, Mapping) else None


def pending_calls(record: Mapping[str, Any] | None) -> Sequence[Mapping[str, Any]]:
    """Every call a plan in ``record`` is waiting on: one, or a batch run at once
    (``parallel_tools``; ``pending`` is then its first call), in program order (the record's
    own entries: read them, do not change them)."""
    pending = pending_call(record)
    if pending is None or record is None:
        return ()
    batch = record.get("batch")
    return batch if isinstance(batch, list) and batch else (pending,)


def call_meta(pending: Mapping[str, Any]) -> dict[str, Any]:
    """The ``response_metadata`` record of one plan call (as on the graph path)."""
    return {
        PLAN_CALL_KEY: {
            "index": pending["index"],
            "line": pending["line"],
            "source": pending["source"],
        }
    }


def failure_message(pending: Mapping[str, Any], error: ExecutionError) -> ToolMessage:
    """The error ``ToolMessage`` for a plan call whose tool raised (the graph path's text)."""
    return ToolMessage(
        content=str(error),
        tool_call_id=pending["id"],
        name=pending["tool"],
        status="error",
        artifact={"llassembly_failure": failure_record(error)},
        response_metadata=call_meta(pending),
    )


def _answer(messages: Sequence[AnyMessage], call_id: str) -> ToolMessage | None:
    """The ``ToolMessage`` answering ``call_id`` in the current run, or ``None``.

    Searched back to the call's own ``AIMessage``. A tool may add other messages beside its
    result (a ``Command`` update, tagged with :data:`ADDED_BY_CALL` by the middleware's
    ``wrap_tool_call``); they do not hide it. Any other ``AIMessage`` after the call means the
    run that made it has ended (a limit answered it and ended the run, and a new run is
    starting), as does a result marked :data:`ENDS_RUN` (a ``return_direct`` tool): the plan
    is let go and the new run plans afresh.
    """
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id != call_id:
                continue
            tag = message.response_metadata.get(PLAN_CALL_KEY)
            return None if isinstance(tag, Mapping) and tag.get(ENDS_RUN) else message
        if isinstance(message, AIMessage):
            if any(c.get("id") == call_id for c in message.tool_calls):
                return None
            if message.response_metadata.get(ADDED_BY_CALL) != call_id:
                return None
    return None


# -- one step -------------------------------------------------------------------------------------


def _new_record(externs: Mapping[str, Extern]) -> dict[str, Any]:
    return {
        "plan": None,
        "tools": list(externs),
        "plan_number": 0,
        "prefix": "",
        "prefixes": [],
        "machine": None,
        "pending": None,
        "failure": None,
        "model_calls": 0,
        "repairs": 0,
        "replans": 0,
        "executed": 0,
        "tool_calls": 0,
    }


def agent_step(
    turn: Turn,
    *,
    state_messages: Sequence[AnyMessage],
    model_messages: Sequence[AnyMessage],
    record: Mapping[str, Any] | None,
    externs: Mapping[str, Extern],
    synchronous: bool = False,
    response_format: Any = None,
) -> Generator[list[BaseMessage], Any, StepOutcome]:
    """One visit of the agent's model node (sans-IO: yields conversations for the model).

    A planner request is answered with the model's ``AIMessage``; the final answer request
    (an :class:`~llassembly._final.AnswerRequest`) with an :class:`~llassembly._final.Answered`.

    Args:
        turn: The planner turn (options and caches).
        state_messages: The agent state's messages (where tool results are read).
        model_messages: The messages the model request holds (what the planner model is shown).
        record: The planner's private state, or ``None``.
        externs: The tools plans may call.
        synchronous: The agent runs with ``invoke``: a plan that calls async-only tools is
            refused with a ``UsageError`` before its first call.
        response_format: The agent's ``response_format`` (``None`` without one).
    """
    outcome = yield from _visit(turn, state_messages, model_messages, record, externs, synchronous)
    return (yield from finish(turn, outcome, model_messages, state_messages, response_format))


def _visit(
    turn: Turn,
    state_messages: Sequence[AnyMessage],
    model_messages: Sequence[AnyMessage],
    record: Mapping[str, Any] | None,
    externs: Mapping[str, Extern],
    synchronous: bool,
) -> Generator[list[BaseMessage], AIMessage, StepOutcome]:
    """The step up to the turn's final message (see :func:`agent_step`)."""
    pending = pending_call(record)
    if record is not None and pending is None and decided(record):
        rec = dict(record)
        return (yield from _decided(turn, rec, model_messages, state_messages, externs))
    calls = pending_calls(record)
    answers = [_answer(state_messages, c["id"]) for c in calls]
    answer = answers[0] if answers and None not in answers else None
    if record is None or pending is None or answer is None:
        rec = _new_record(externs)
        out: list[AnyMessage] = []
        asked: list[BaseMessage] = list(conversation(model_messages))
        rec["synchronous"] = synchronous
        return (yield from _plan(turn, rec, asked, out, state_messages, externs))

    rec = dict(record)
    try:
        emulator = _machine(turn, rec, externs)
    except PlanError as error:
        # The agent offers other tools now than when the plan was checked (a tool selector
        # listed before the planner): the plan cannot go on; that is its failure.
        return _end(turn, _stopped(rec), _tools_changed(error, pending), [], state_messages)
    failure = _complete(emulator, calls, [a for a in answers if a is not None], externs)
    return (
        yield from _continue(
            turn, rec, emulator, failure, [], model_messages, state_messages, externs
        )
    )


def _complete(
    emulator: Emulator,
    calls: Sequence[Mapping[str, Any]],
    answers: Sequence[ToolMessage],
    externs: Mapping[str, Extern],
) -> dict[str, Any] | None:
    """Give the machine each call's result in program order; the first failure (an error
    ``ToolMessage``, or a result that cannot be read) stops there, keeping those before it."""
    for pending, answer in zip(calls, answers, strict=True):
        failure = failure_of(answer, pending)
        if failure is not None:
            return failure
        extern = externs.get(str(pending["tool"]))
        try:
            if extern is None:
                raise AsmRuntimeError(
                    f"tool {pending['tool']!r} is no longer offered by the agent",
                    line=int(pending["line"]),
                    source=str(pending["source"]),
                )
            emulator.complete_batch([decode_result(extern, answer, pending)])
        except ExecutionError as exc:
            return failure_record(exc)
    return None


def _stopped(rec: dict[str, Any]) -> dict[str, Any]:
    """The record of a plan that ends where it is (its machine is left as it was)."""
    machine = rec.get("machine") or {}
    rec["executed"] += int(machine.get("executed", 0))
    rec["tool_calls"] += int(machine.get("tool_calls", 0))
    rec.update(pending=None, plan=None)
    return rec


def _tools_changed(error: PlanError, pending: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "PlanRejected",
        "message": str(error)[:2000],
        "detail": f"the plan no longer fits the tools the agent offers now: {error.summary}",
        "line": int(pending.get("line", 0)),
        "source": str(pending.get("source", "")),
    }


# The machines of steps that answered with a call, by the identity of the snapshot saved for
# them: when the next step of the same plan, in this process, gets that very dict back from the
# agent state, it takes the machine instead of rebuilding it from the snapshot (the snapshot is
# that machine's state, so the result is the same; a checkpoint read back from storage, or any
# other dict, is restored as always). An entry also names the planner turn, the tools and the
# plan it ran with, and serves only a step with the same three. Each entry is taken at most
# once and holds its dict, so an id is never reused while its entry lives. Bounded: the oldest
# entries go first. Agents on several threads share it: each operation on it is one C call
# (no iteration another thread could upset).
_LIVE: OrderedDict[int, tuple[Mapping[str, Any], Emulator, Turn, Mapping[str, Extern], str]] = (
    OrderedDict()
)
_LIVE_KEPT = 256


def _keep_live(
    snapshot: Mapping[str, Any],
    emulator: Emulator,
    turn: Turn,
    externs: Mapping[str, Extern],
    plan: str,
) -> None:
    _LIVE[id(snapshot)] = (snapshot, emulator, turn, externs, plan)
    while len(_LIVE) > _LIVE_KEPT:
        try:
            _LIVE.popitem(last=False)
        except KeyError:  # another thread took the last ones meanwhile
            break


def _take_live(
    turn: Turn, rec: Mapping[str, Any], externs: Mapping[str, Extern]
) -> Emulator | None:
    """The machine kept for ``rec``'s snapshot by this turn, tools and plan (taken), or ``None``."""
    snapshot = rec["machine"]
    live = _LIVE.pop(id(snapshot), None)
    if live is None or live[0] is not snapshot:
        return None
    if live[2] is not turn or live[3] is not externs or live[4] != rec["plan"]:
        return None
    return live[1]


def _machine(turn: Turn, rec: Mapping[str, Any], externs: Mapping[str, Extern]) -> Emulator:
    if rec["machine"] is not None:
        emulator = _take_live(turn, rec, externs)
        if emulator is not None:
            return emulator
    opts = turn.options
    return Emulator(
        turn.compiled(str(rec["plan"]), externs),
        max_instructions_to_exec=opts.max_instructions_to_exec,
        max_tool_calls=opts.max_tool_calls,
        max_stack_depth=opts.max_stack_depth,
        state=rec["machine"],
        parallel_tools=opts.parallel_tools,
    )


def quick_step(
    turn: Turn,
    record: Mapping[str, Any],
    state_messages: Sequence[AnyMessage],
    externs: Mapping[str, Extern],
) -> StepOutcome | None:
    """The usual step of a running plan, taken directly; ``None`` when it is not that step.

    The usual step: the plan waits on one call (no batch), the call's result is the last
    message and is not an error, the machine the previous step left in this process is at
    hand, and the plan goes on to its next call. The step then gives the result to the
    machine, runs it to that call and answers with it, as :func:`agent_step` would, without
    its general machinery (most of a plan's steps are this one, and each costs the agent a
    model-node visit's time).

    Anything else returns ``None``, and :func:`agent_step` takes the step. The machine may have
    moved by then (the plan ended or failed on the way), but the state has not changed and the
    machine is no longer kept: that step restores it from the snapshot (an exact copy of its
    state) and meets the same end.
    """
    pending = record.get("pending")
    if not isinstance(pending, Mapping) or record.get("batch") or not state_messages:
        return None
    answer = state_messages[-1]
    if not isinstance(answer, ToolMessage) or answer.tool_call_id != pending["id"]:
        return None
    tag = answer.response_metadata.get(PLAN_CALL_KEY)
    if answer.status == "error" or (isinstance(tag, Mapping) and tag.get(ENDS_RUN)):
        return None
    extern = externs.get(str(pending["tool"]))
    if extern is None or record.get("machine") is None:
        return None
    emulator = _take_live(turn, record, externs)
    if emulator is None:
        return None
    if emulator.marked:  # parallel_tools: batches are the general step's
        _keep_live(record["machine"], emulator, turn, externs, str(record["plan"]))
        return None
    try:
        emulator.complete(decode_result(extern, answer, pending))
        call = emulator.advance()
    except ExecutionError:
        return None
    if call is None:
        return None
    return _calling(turn, dict(record), emulator, [call], [], externs)


def _plan(
    turn: Turn,
    rec: dict[str, Any],
    asked: list[BaseMessage],
    out: list[AnyMessage],
    state_messages: Sequence[AnyMessage],
    externs: Mapping[str, Extern],
) -> Generator[list[BaseMessage], AIMessage, StepOutcome]:
    """Ask for a plan (or a new one), then start it; a plain answer ends the turn."""
    try:
        reply, is_program, calls = yield from turn.draft(asked, externs)
    except RepairsExhausted as error:
        if turn.options.on_tool_error == "raise":
            raise
        rec["model_calls"] += error.attempts
        rec["repairs"] += error.attempts - 1
        rec.update(plan=None, pending=None)
        outcome = _end(turn, rec, plan_failure(error), out, state_messages)
        outcome.model_calls = error.attempts
        return outcome
    rec["model_calls"] += calls
    rec["repairs"] += calls - 1
    out.append(reply)
    if not is_program:
        rec["plan"] = None
        # A plan failed and, asked again, the model answered in words: the turn still ends
        # with that failure on record (status "stopped"), after the model's answer.
        failure = rec.get("failure") if rec["plan_number"] else None
        outcome = _end(turn, rec, failure, out, state_messages)
        outcome.ended = False  # the model has just answered in words: no final answer call
        if rec["plan_number"] == 0:
            # A plain answer to a fresh question: the reply itself ends the turn.
            outcome.messages = [reply]
        outcome.model_calls = calls
        return outcome
    number = rec["plan_number"] + 1
    prefix = f"asm{short_hash(reply.text + str(reply.id))}_{number}_"
    rec.update(plan=reply.text, plan_number=number, prefix=prefix, failure=None, machine=None)
    rec["prefixes"] = [*rec["prefixes"], prefix]
    emulator = _machine(turn, rec, externs)
    if rec.get("synchronous"):
        check_sync_tools((t.name for t in emulator.compiled.tools if t), emulator.compiled.externs)
    request = turn.approval(reply.text, externs)
    if request is not None:  # a person decides first (the planner's after_model asks)
        rec["approval"] = {"state": "awaiting", "request": request}
        return StepOutcome(out, rec, model_calls=calls)
    outcome = yield from _continue(turn, rec, emulator, None, out, asked, state_messages, externs)
    outcome.model_calls += calls
    return outcome


def _decided(
    turn: Turn,
    rec: dict[str, Any],
    model_messages: Sequence[AnyMessage],
    state_messages: Sequence[AnyMessage],
    externs: Mapping[str, Extern],
) -> Generator[list[BaseMessage], AIMessage, StepOutcome]:
    """A person answered the plan's approval request: run it, run their edit, or not."""
    approval = rec["approval"]
    check = lambda text: turn.check(text, externs)  # noqa: E731
    kind, result = decide(approval["request"], approval["decision"], check)
    out: list[AnyMessage] = []
    if kind == "again":  # a broken edit: the after_model hook asks again
        rec["approval"] = {"state": "awaiting", "request": result}
        return StepOutcome(out, rec)
    if kind == "edit":
        rec.update(plan=result, prefix=f"asm{short_hash(result)}_{rec['plan_number']}_")
        rec["prefixes"] = [*rec["prefixes"], rec["prefix"]]
        out.append(edit_note(result))
    failure = result if kind == "reject" else None
    rec["approval"] = None if failure else {"state": "approved", "prefix": rec["prefix"]}
    emulator = _machine(turn, rec, externs)
    if failure is None and rec.get("synchronous"):
        check_sync_tools((t.name for t in emulator.compiled.tools if t), emulator.compiled.externs)
    outcome = yield from _continue(
        turn, rec, emulator, failure, out, model_messages, state_messages, externs
    )
    if failure is not None:
        outcome.record["raise"] = False  # a rejection ends the turn; it is not an error
    return outcome


def _continue(
    turn: Turn,
    rec: dict[str, Any],
    emulator: Emulator,
    failure: dict[str, Any] | None,
    out: list[AnyMessage],
    model_messages: Sequence[BaseMessage],
    state_messages: Sequence[AnyMessage],
    externs: Mapping[str, Extern],
) -> Generator[list[BaseMessage], AIMessage, StepOutcome]:
    """Run the machine to its next call (answer with it) or to its end (finish the plan)."""
    if failure is None:
        try:
            calls = _next_calls(emulator)
        except ExecutionError as exc:
            failure, calls = failure_record(exc), []
        if calls:
            return _calling(turn, rec, emulator, calls, out, externs)
    rec["machine"] = emulator.snapshot()
    _stopped(rec)["failure"] = failure
    opts = turn.options
    if failure and opts.on_tool_error == "replan" and rec["replans"] < opts.max_replans:
        rec["replans"] += 1
        asked: list[BaseMessage] = [
            *conversation(model_messages),
            *out,
            HumanMessage(replan_request(failure)),
        ]
        return (yield from _plan(turn, rec, asked, out, state_messages, externs))
    return _end(turn, rec, failure, out, state_messages)


def _calling(
    turn: Turn,
    rec: dict[str, Any],
    emulator: Emulator,
    calls: list[ToolCall],
    out: list[AnyMessage],
    externs: Mapping[str, Extern],
) -> StepOutcome:
    """The step that answers with the machine's next call (or batch): the record saves the
    machine and the calls it waits on, and the machine is kept for the next step."""
    rec["machine"] = emulator.snapshot()
    _keep_live(rec["machine"], emulator, turn, externs, str(rec["plan"]))
    batch = [_pending(call, str(rec["prefix"])) for call in calls]
    rec["pending"], rec["batch"] = batch[0], batch if len(batch) > 1 else None
    out.append(batch_request(calls, [p["id"] for p in batch]))
    return StepOutcome(out, rec)


def _end(
    turn: Turn,
    rec: dict[str, Any],
    failure: dict[str, Any] | None,
    out: list[AnyMessage],
    state_messages: Sequence[AnyMessage],
) -> StepOutcome:
    opts = turn.options
    rec["failure"] = failure
    out.append(final_message(turn_summary(rec, out, state_messages), opts))
    if failure and opts.on_tool_error == "raise":
        rec["raise"] = True
    removals: list[str] = []
    if not opts.infer_tools_messages:
        removals = _call_message_ids(state_messages, tuple(rec["prefixes"]))
    return StepOutcome(out, rec, removals, ended=True)


def _next_calls(emulator: Emulator) -> list[ToolCall]:
    """The machine's next call, or its next batch when tools are marked ``parallel_tools``."""
    if emulator.marked:
        return emulator.advance_batch()
    call = emulator.advance()
    return [] if call is None else [call]


def _pending(call: ToolCall, prefix: str) -> dict[str, Any]:
    return {
        "id": f"{prefix}{call.number}",
        "tool": call.tool,
        "index": call.index,
        "line": call.line,
        "source": call.source,
        "number": call.number,
    }


def _call_message_ids(messages: Sequence[AnyMessage], prefixes: tuple[str, ...]) -> list[str]:
    """Ids of the call ``AIMessage``/``ToolMessage`` pairs the turn's plans added."""
    return [m.id for m in plan_call_messages(messages, prefixes) if m.id]


def removal_messages(ids: Sequence[str]) -> list[RemoveMessage]:
    """``RemoveMessage`` updates for ``ids``."""
    return [RemoveMessage(id=i) for i in ids]


def counter_updates(state: Any, model_calls: int, old_lag: int, lag: int) -> dict[str, int]:
    """Make ``ModelCallLimitMiddleware`` count real model calls, not planner steps.

    That middleware adds one per model-node visit in ``after_model`` and, before every visit,
    stops the run once its count reaches the limit. So while a plan runs, its counters are
    held one below the real number of model calls (``lag``), and the step that ends the plan
    gives the one back: a plan's steps are never refused for the model call that wrote it, and
    at the end of the turn the counters equal the real model calls. (Writing a key no
    middleware declared is ignored by LangGraph, so this is a no-op without that middleware.)
    """
    if not isinstance(state, dict):
        return {}
    delta = old_lag + model_calls - lag - 1
    if delta == 0:
        return {}
    updates: dict[str, int] = {}
    for key in _MODEL_COUNTERS:
        value = state.get(key, 0)
        if isinstance(value, int):
            updates[key] = value + delta
    return updates


def finish(
    turn: Turn,
    outcome: StepOutcome,
    model_messages: Sequence[AnyMessage],
    state_messages: Sequence[AnyMessage],
    response_format: Any,
) -> Generator[list[BaseMessage], Any, StepOutcome]:
    """End the turn with the plan's answer, or with one more model call (``_final``)."""
    if not outcome.ended:
        return outcome
    opts, rec = turn.options, outcome.record
    failure = rec.get("failure")
    said = answer_of(rec.get("machine"))
    structured = None if failure else structured_from_text(response_format, said)
    raising = opts.on_tool_error == "raise"
    if not needs_model(opts.final_answer, failure, raising, response_format, structured):
        outcome.structured = structured
        return outcome
    outcome.messages.pop()  # the plan's final message: the model's reply takes its place
    calls = plan_call_messages(state_messages, tuple(rec["prefixes"]))
    asked = [*conversation(model_messages), *outcome.messages]
    result: Answered = yield answer_messages(asked, calls, rec)
    rec["model_calls"] += 1
    summary = {**turn_summary(rec, outcome.messages, state_messages), "final_reply": result.reply}
    final = final_message(summary, opts)
    outcome.messages += [final if m is result.reply else m for m in result.messages]
    outcome.model_calls += 1
    outcome.structured = result.structured
    return outcome
