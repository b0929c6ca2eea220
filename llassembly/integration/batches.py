"""A batch of calls in the plan graph: each call's outcome as plain data, taken in program order.

On the graph path a batch of several calls (``parallel_tools``) runs as one LangGraph task per
call, so that an interrupt in one call leaves the others' results saved (see
:mod:`llassembly.integration.graph`). A task writes its call's outcome to the graph state, which
must stay plain data: so the outcome is read there, where the tool's own return value is at hand
(the plan values, the message text and tag, or the failure record), and the live exception of a
failed call is kept beside the run, by call number, for as long as the process lives.
:func:`take_batch` then gives the outcomes to the machine in program order and records the
batch's messages exactly as a batch run in one node records them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from langchain_core.messages import AnyMessage

from llassembly.errors import ExecutionError
from llassembly.integration.messages import batch_messages, result_text
from llassembly.integration.query import answer_tag, answered_value
from llassembly.integration.record import (
    Failure,
    QueryDue,
    error_from_failure,
    execution_failure,
)
from llassembly.integration.results import refusal_tag, value_tag
from llassembly.machine.ahead import Failed, Outcome
from llassembly.machine.emulator import Emulator, ToolCall, tool_error
from llassembly.machine.externs import Extern

__all__ = ["CallInput", "CallOutcome", "call_outcome", "gathered", "query_outcomes", "take_batch"]


class CallInput(TypedDict):
    """What a ``call`` task gets (its ``Send``): where the call is and its argument values, as
    the machine holds them (:func:`llassembly.machine.ahead.call_request` rebuilds the call)."""

    index: int
    values: list[Any]
    number: int


class CallOutcome(TypedDict):
    """What one call of a batch gave, as plain data (written by its ``call`` task).

    Attributes:
        number: The call's number in the plan (1 for the first call).
        values: The plan values of its result (``None`` when it failed).
        text: The text of its ``ToolMessage``.
        error: Whether that message reports an error.
        tag: What the message's metadata records beside the call's place.
        failure: Why the call failed, or ``None``.
    """

    number: int
    values: list[Any] | None
    text: str
    error: bool
    tag: dict[str, Any]
    failure: Failure | None


def gathered(
    old: list[CallOutcome] | None, new: list[CallOutcome] | None
) -> list[CallOutcome] | None:
    """The reducer of the ``results`` channel: each ``call`` task adds its outcome; ``None``
    empties it (the join writes it once the batch is taken)."""
    return None if new is None else [*(old or []), *new]


def call_outcome(
    externs: Mapping[str, Extern],
    call: ToolCall,
    outcome: Outcome,
    errors: dict[int, ExecutionError],
) -> CallOutcome:
    """A call's outcome (its raw result, or :class:`Failed`) as plain data: its plan values,
    message text and tag, or why it failed (the live error goes to ``errors``).

    Raises:
        BaseException: What the call raised, when it is not an ``Exception``.
    """
    extern = externs[call.tool]
    if isinstance(outcome, Failed):
        if not isinstance(outcome.error, Exception):
            raise outcome.error
        error = tool_error(call, outcome.error)
        if error is not outcome.error:
            error.__cause__ = outcome.error
        return _failed(call, error, refusal_tag(outcome.error), errors)
    outcome, noted = answered_value(outcome)  # a query's: its value
    text = result_text(outcome)
    tag = value_tag(extern, outcome, text, {"line": call.line, "source": call.source}) | noted
    try:
        values = extern.to_values(outcome, line=call.line, source=call.source)
    except ExecutionError as exc:
        return _failed(call, exc, tag, errors)
    return CallOutcome(
        number=call.number, values=list(values), text=text, error=False, tag=tag, failure=None
    )


def _failed(
    call: ToolCall, error: BaseException, tag: dict[str, Any], errors: dict[int, ExecutionError]
) -> CallOutcome:
    if not isinstance(error, ExecutionError):  # pragma: no cover - tool_error wraps the rest
        raise error
    errors[call.number] = error
    return CallOutcome(
        number=call.number,
        values=None,
        text=str(error),
        error=True,
        tag=tag,
        failure=execution_failure(error),
    )


def query_outcomes(dues: Sequence[QueryDue]) -> list[CallOutcome]:
    """The settled queries of a batch the turn asked (agent path) as the outcomes a plan
    graph's batch gives, each tagged as a query with its model calls."""
    outcomes = []
    for due in dues:
        failure = due.get("failure")
        attempts = len(due["refused"]) + 1
        if failure is not None:
            attempts = int(failure.get("attempts", attempts))
        outcome = CallOutcome(
            number=due["call"]["number"],
            values=None if failure else [due["value"]],
            text=failure["message"] if failure else result_text(due["value"]),
            error=failure is not None,
            tag=answer_tag(attempts),
            failure=failure,
        )
        outcomes.append(outcome)
    return outcomes


def take_batch(
    emulator: Emulator,
    batch: list[ToolCall],
    outcomes: list[CallOutcome],
    errors: dict[int, ExecutionError],
    record: tuple[list[AnyMessage], str] | None,
) -> None:
    """Give a batch's outcomes to the machine in program order; with ``record`` (the message
    list and the call-id prefix), add the batch's ``AIMessage`` and a ``ToolMessage`` per call,
    also when it fails.

    Raises:
        ExecutionError: A call failed (its live error from ``errors``, else rebuilt from its
            record), or its result does not fit; the results before it were given.
    """
    answers = [(o["text"], o["error"]) for o in outcomes]
    try:
        for k, (call, outcome) in enumerate(zip(batch, outcomes, strict=True)):
            if outcome["failure"] is not None:
                raise errors.pop(call.number, None) or error_from_failure(outcome["failure"])
            values = outcome["values"] or []
            # The values as a raw result that reads back as themselves (to_values keeps plan
            # values as they are): one value, a list of them, or nothing.
            result = values[0] if len(values) == 1 else (list(values) if values else None)
            try:
                emulator.complete_batch([result])
            except ExecutionError as exc:
                answers[k] = (str(exc), True)
                raise
    finally:
        if record is not None:
            messages, prefix = record
            ids = [f"{prefix}{c.number}" for c in batch]
            messages.extend(batch_messages(batch, answers, ids, [o["tag"] for o in outcomes]))
