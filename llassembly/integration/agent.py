"""The agent path: the turn state machine driven from ``create_agent``'s model node.

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
agent routes to its tool node like any call the model made; or with the final message, which
ends the agent's loop. A step that needs another model call (a repair, a new plan after a
failure, the final answer call) ends with a message that shows the progress; the agent's loop
stops there and the planner's ``after_agent`` sends it back to its model node, so every model
call is a visit of its own: ``before_model`` middleware such as ``ModelCallLimitMiddleware``
see each one. A person's decision on a plan is asked in the visit after the one that wrote
it (``interrupt()``), once the plan is saved. The machine lives in the agent's private state
as plain data (the :class:`TurnRecord`), so every step is checkpointed and can continue in any
process.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.types import interrupt

from llassembly.compat import MODEL_CALL_COUNTERS
from llassembly.integration.approval import read_decision
from llassembly.integration.final import Answered, AnswerRequest
from llassembly.integration.messages import plan_call_messages, query_model_calls
from llassembly.integration.record import KEY, PendingCall, TurnRecord
from llassembly.integration.results import outcome_of
from llassembly.integration.turn import (
    AskAnswer,
    AskModel,
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
    RunPlan,
    TurnView,
    step,
)
from llassembly.machine.externs import Extern

__all__ = [
    "ADDED_BY_CALL",
    "ENDS_RUN",
    "Visit",
    "answer_of_call",
    "conversation",
    "counter_updates",
    "record_of",
    "visit",
]

ENDS_RUN = "ends_run"
"""In a plan call's tag: its tool is ``return_direct`` (its result ends the run)."""
ADDED_BY_CALL = "llassembly_added_by_call"
"""In ``response_metadata``: the id of the plan call whose tool added this message."""


def conversation(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages the planner model sees after its system prompt (system messages dropped)."""
    return [m for m in messages if not isinstance(m, SystemMessage)]


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
    phase = record["phase"]
    if phase == "running" and record["pending"]:
        answers = [answer_of_call(messages, p["id"]) for p in record["pending"]]
        if all(a is not None for a in answers):
            return Returned(
                [_outcome(externs, a, p) for a, p in zip(answers, record["pending"], strict=True)]  # type: ignore[arg-type]
            )
        return Begin()
    approval = record["approval"]
    if (
        phase == "approval"
        and approval is not None
        and approval["state"] == "awaiting"
        and _latest(record, messages)
    ):  # the plan and its request are saved: a person decides now (asked again on resume)
        return Decided(read_decision(interrupt(approval.get("request") or {})))
    if phase in ("planning", "answering", "running") and _latest(record, messages):
        return Proceed()
    return Begin()


def _outcome(externs: Mapping[str, Extern], answer: ToolMessage, pending: PendingCall) -> Any:
    return outcome_of(externs.get(pending["tool"]), answer, pending)


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
                reply = yield [*conversation(shown), *out, *action.extra]
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


def removal_messages(ids: Sequence[str]) -> list[RemoveMessage]:
    """``RemoveMessage`` updates for ``ids``."""
    return [RemoveMessage(id=i) for i in ids]


def is_answer_request(messages: Any) -> bool:
    """Whether a request the visit yields is the final answer call."""
    return isinstance(messages, AnswerRequest)
