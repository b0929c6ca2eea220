"""The messages a planner turn adds: one ``AIMessage``/``ToolMessage`` pair per call a plan
makes (or one ``AIMessage`` per batch run at once), and the final message that ends the turn.

Both paths build them here, so a plan's calls read the same on the agent path (where the
agent's tool node writes the ``ToolMessage``) and on the graph path. Each carries its place in
the plan (instruction index, line, source) in ``response_metadata["llassembly"]``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ToolMessage,
)
from pydantic import BaseModel

from llassembly.errors import ExecutionError
from llassembly.integration.record import CALL_REFUSED, KEY, NOT_APPROVED
from llassembly.integration.results import decode_text, message_text
from llassembly.language.templates import render
from llassembly.machine.say import final_answer_of

if TYPE_CHECKING:
    from llassembly.machine.externs import Extern
    from llassembly.machine.state import ToolCall

_M = TypeVar("_M", bound=BaseMessage)

__all__ = [
    "MessageOptions",
    "batch_messages",
    "batch_request",
    "call_messages",
    "call_meta",
    "call_request",
    "calls_alongside",
    "completed_calls",
    "final_message",
    "finished_summary",
    "jsonable",
    "marked",
    "plan_call_messages",
    "query_model_calls",
    "result_text",
    "turn_calls",
]


class MessageOptions(Protocol):
    """The planner options the final message reads (a ``PlannerOptions``)."""

    @property
    def granularity(self) -> str: ...
    @property
    def execution(self) -> str: ...


def final_message(
    record: Mapping[str, Any],
    calls: Sequence[BaseMessage],
    options: MessageOptions,
    reply: AIMessage | None = None,
    externs: Mapping[str, Extern] | None = None,
) -> AIMessage:
    """The ``AIMessage`` that ends the turn, with what happened in its metadata.

    Its text is the plan's answer (``SAY``), or a summary of ``calls`` (the turn's call
    messages) when it said nothing, or what went wrong, in words a user can act on. With
    ``reply`` (the final model call's reply) the reply ends the turn instead, and the text
    the plan would have ended with is kept in the metadata as ``summary``.
    """
    machine = record.get("machine") or {}
    failure = record.get("failure")
    registers = machine.get("registers", {})
    said = final_answer_of(machine)
    completed = int(record.get("tool_calls", 0))
    meta: dict[str, Any] = {
        "kind": "answer",
        "status": "stopped" if failure else "finished",
        "model_calls": record.get("model_calls", 0),
        "repairs": record.get("repairs", 0),
        "replans": record.get("replans", 0),
        "tool_calls": completed,
        "instructions": record.get("executed", 0),
        "registers": registers,
        "granularity": options.granularity,
        "execution": options.execution,
        "answer": said,
        "returned": machine.get("returned"),
    }
    if failure:
        meta["error"] = dict(failure)
        text = _failure_text(failure, completed, int(record.get("alongside", 0)))
        if failure.get("type") == NOT_APPROVED:
            meta["status"] = "rejected"
    elif said is not None:
        text = said
    else:
        text = finished_summary(turn_calls(calls, externs), registers)
    if reply is not None:  # the final model call's reply ends the turn
        meta["summary"] = text
        return reply.model_copy(
            update={"response_metadata": {**reply.response_metadata, KEY: meta}}
        )
    return AIMessage(content=text, response_metadata={KEY: meta})


def _failure_text(failure: Mapping[str, Any], completed: int, alongside: int = 0) -> str:
    """What went wrong, for the user: the problem and its line, and what ran before it (and,
    with ``parallel_tools``, beside it)."""
    before = completed - alongside
    done = f"{before} tool call{'s' if before != 1 else ''} completed before it."
    if alongside:
        done += (
            f" {alongside} more, run at the same time, completed after it"
            " (the plan did not use their results)."
        )
    kind = failure.get("type")
    detail = str(failure.get("detail") or failure.get("message") or "")
    if kind == NOT_APPROVED:
        return f"The plan did not run: {detail}."
    if kind == "RepairsExhausted":
        problems = "\n".join(f"- {p}" for p in failure.get("problems") or ())
        head = f"No plan could run: {detail}."
        return f"{head}\n{problems}\n{done}" if problems else f"{head} {done}"
    where = f"at line {failure.get('line', 0)} ({failure.get('source', '')})"
    if kind == CALL_REFUSED:
        return f"The plan stopped {where}: {detail} (a decision, not an error). {done}"
    return f"The plan stopped {where}: {detail}. {done}"


_CALLS_SHOWN = 10  # calls listed in a summary; the rest are counted


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 15]}... [truncated]"


_VALUES_SHOWN = 6  # register values named in a summary


def turn_calls(
    messages: Sequence[BaseMessage], externs: Mapping[str, Extern] | None = None
) -> list[tuple[str, dict[str, Any], str | None]]:
    """The plan calls among ``messages``, in order: ``(tool, args, result)``. The result is
    what the plan got (a number as the plan holds it, text as the tool wrote it), ``None`` for
    a call that has no result, and starts with ``ERROR:`` for a failed one."""
    calls: dict[str, tuple[str, dict[str, Any], str | None]] = {}
    for message in messages:
        if KEY not in message.response_metadata:
            continue
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call.get("id") or ""] = (call["name"], dict(call.get("args") or {}), None)
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            name, args, _ = calls[message.tool_call_id]
            text = message_text(message)
            if message.status == "error":
                shown = f"ERROR: {text}"
            else:
                shown = _as_the_plan_got_it(externs, name, message, text)
            calls[message.tool_call_id] = (name, args, shown)
    return list(calls.values())


def _as_the_plan_got_it(
    externs: Mapping[str, Extern] | None, name: str, message: ToolMessage, text: str
) -> str:
    """A result as the plan got it: its recorded values, or the text read by the tool's
    declared type (``7.0`` from a ``-> float`` tool reads ``7``; text stays as it is)."""
    tag = message.response_metadata.get(KEY)
    values = tag.get("values") if isinstance(tag, Mapping) else None
    if isinstance(values, list) and len(values) == 1:
        return render(values[0])
    extern = (externs or {}).get(name)
    if extern is None or extern.n_results != 1:
        return text
    try:
        value = decode_text(extern, text, {})
    except ExecutionError:
        return text
    return render(value) if type(value) in (int, float) else text


def _shown(value: Any, limit: int) -> str:
    if isinstance(value, str):
        text = repr(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        text = render(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return _clip(text, limit)


def finished_summary(
    calls: Sequence[tuple[str, Mapping[str, Any], str | None]], registers: Mapping[str, Any]
) -> str:
    """What a finished plan that said nothing (no ``SAY``) did, in sentences.

    Example:
        >>> print(finished_summary([("get_temperature", {"city": "Paris"}, "19.5")], {"R1": 19.5}))
        I made 1 tool call:
        - get_temperature('Paris') → 19.5
        At the end, R1 held 19.5.
    """
    if calls:
        plural = "s" if len(calls) != 1 else ""
        lines = [f"I made {len(calls)} tool call{plural}:"]
        for name, args, result in calls[:_CALLS_SHOWN]:
            shown = ", ".join(_shown(v, 60) for v in args.values())
            outcome = "(no result)" if result is None else _clip(result, 120)
            lines.append(f"- {name}({shown}) → {outcome}")
        if len(calls) > _CALLS_SHOWN:
            lines.append(f"- ... and {len(calls) - _CALLS_SHOWN} more.")
    else:
        lines = ["The plan finished without calling a tool."]
    values = [f"{name} held {_shown(v, 80)}" for name, v in registers.items()][:_VALUES_SHOWN]
    if values:
        listed = values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]
        more = " (among others)" if len(registers) > _VALUES_SHOWN else ""
        lines.append(f"At the end, {listed}{more}.")
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data: pydantic models dumped, containers walked, anything else
    that JSON has no type for as its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def result_text(result: Any) -> str:
    """The text a ``ToolMessage`` shows for a raw tool result (JSON for anything but text)."""
    if isinstance(result, str):
        return result
    if isinstance(result, ToolMessage):
        return result.text
    try:
        return json.dumps(jsonable(result), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)
    except RecursionError:
        return f"<a {type(result).__name__} nested too deeply to show>"


def plan_call_messages(
    messages: Sequence[BaseMessage], prefixes: Sequence[str]
) -> list[BaseMessage]:
    """The messages recording a turn's plan calls (their call ids start with a plan's prefix):
    each call ``AIMessage`` and each ``ToolMessage``, in order."""
    starts = tuple(prefixes)
    if not starts:
        return []
    found: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            ours = message.tool_call_id.startswith(starts)
        elif isinstance(message, AIMessage) and message.tool_calls:
            ours = all((c.get("id") or "").startswith(starts) for c in message.tool_calls)
        else:
            ours = False
        if ours:
            found.append(message)
    return found


def query_model_calls(messages: Sequence[BaseMessage]) -> int:
    """The model calls the queries recorded among ``messages`` made (each query's message
    records its attempts)."""
    total = 0
    for message in messages:
        tag = message.response_metadata.get(KEY) if isinstance(message, ToolMessage) else None
        if isinstance(tag, Mapping) and tag.get("kind") == "query":
            total += int(tag.get("attempts", 1))
    return total


def completed_calls(machine: Mapping[str, Any]) -> int:
    """The calls a plan completed, from its machine's snapshot: the machine counts a call when
    it starts it, so the calls it still waits on (one that failed, or was not run) are not
    among them."""
    waiting = len(machine.get("outstanding") or ()) + (machine.get("pending") is not None)
    return max(int(machine.get("tool_calls", 0)) - waiting, 0)


def calls_alongside(messages: Sequence[BaseMessage], prefix: str, before: int) -> int:
    """The calls of a stopped plan (its call ids start with ``prefix``) that completed
    although the machine never took their results: with ``parallel_tools``, the calls of a
    batch after the one that failed ran at the same time. Counted from the plan's call
    messages (a result the plan got, or could have got), less the ``before`` it took."""
    done = 0
    for m in plan_call_messages(messages, [prefix]):
        tag = m.response_metadata.get(KEY)
        ok = isinstance(m, ToolMessage) and m.status != "error"
        done += ok and not (isinstance(tag, Mapping) and "failure" in tag)
    return max(done - before, 0)


def call_meta(index: int, line: int, source: str) -> dict[str, Any]:
    """The ``response_metadata`` of a plan call's messages: where the call is in the plan."""
    return {KEY: {"kind": "call", "index": index, "line": line, "source": source}}


def marked(message: _M, kind: str, *, new_id: bool = False) -> _M:
    """``message`` with ``response_metadata["llassembly"]["kind"]`` set: what it is in the
    turn (``"plan"``, ``"answer"``, ``"draft"``, ``"note"``; a call's messages are ``"call"``).
    ``new_id`` gives it an id of its own (the copy is then a message of its own: a stream shows
    it, though the model's reply it copies streamed already)."""
    tag = message.response_metadata.get(KEY)
    meta = {
        **message.response_metadata,
        KEY: {**(tag if isinstance(tag, Mapping) else {}), "kind": kind},
    }
    update: dict[str, Any] = {"response_metadata": meta}
    if new_id:
        update["id"] = f"llassembly-{uuid.uuid4()}"
    return message.model_copy(update=update)


def _tool_call(call: ToolCall, call_id: str) -> dict[str, Any]:
    return {"name": call.tool, "args": jsonable(call.args), "id": call_id, "type": "tool_call"}


def call_request(call: ToolCall, call_id: str) -> AIMessage:
    """The ``AIMessage`` carrying one executed CALL as a tool call (its place in metadata; the
    call's id is the message's too)."""
    return AIMessage(
        content="",
        tool_calls=[_tool_call(call, call_id)],
        response_metadata=call_meta(call.index, call.line, call.source),
        id=call_id,
    )


def batch_request(calls: list[ToolCall], call_ids: list[str]) -> AIMessage:
    """The ``AIMessage`` carrying a batch of CALLs run at once (``parallel_tools``); one
    call gives :func:`call_request`'s message. Its metadata names the first call and lists
    every call under ``"batch"``."""
    if len(calls) == 1:
        return call_request(calls[0], call_ids[0])
    where = [call_meta(c.index, c.line, c.source)[KEY] for c in calls]
    return AIMessage(
        content="",
        tool_calls=[_tool_call(c, i) for c, i in zip(calls, call_ids, strict=True)],
        response_metadata={KEY: {**where[0], "batch": where}},
        id=call_ids[0],
    )


def batch_messages(
    calls: list[ToolCall],
    answers: list[tuple[str, bool]],
    call_ids: list[str],
    tags: Sequence[Mapping[str, Any]] = (),
) -> list[AnyMessage]:
    """The ``AIMessage`` of a batch and a ``ToolMessage`` per call (``(text, is_error)``);
    ``tags`` adds, per call, what the result's metadata records beside the call's place (a
    ``"kind"`` all the calls' tags share, ``"query"``, is the ``AIMessage``'s kind too)."""
    request = batch_request(calls, call_ids)
    kinds = {tag.get("kind") for tag in tags}
    kind = kinds.pop() if len(tags) == len(calls) and len(kinds) == 1 else None
    if kind:
        request.response_metadata[KEY]["kind"] = kind
    messages: list[AnyMessage] = [request]
    for k, (call, (content, error), call_id) in enumerate(
        zip(calls, answers, call_ids, strict=True)
    ):
        meta = call_meta(call.index, call.line, call.source)
        meta[KEY].update(tags[k] if k < len(tags) else {})
        messages.append(
            ToolMessage(
                content=content,
                tool_call_id=call_id,
                name=call.tool,
                status="error" if error else "success",
                response_metadata=meta,
            )
        )
    return messages


def call_messages(
    call: ToolCall,
    content: str,
    call_id: str,
    *,
    error: bool = False,
    tag: Mapping[str, Any] | None = None,
) -> list[AnyMessage]:
    """The ``AIMessage`` (one tool call) and ``ToolMessage`` pair recording an executed CALL."""
    return batch_messages([call], [(content, error)], [call_id], [tag or {}])
