"""The messages of a planner turn: what the planner model is shown, the repair and replan
requests, the messages recording a plan's calls (both paths), the final message, and failure
records (and back into errors). The tool layer and both execution paths build them here.

The planner model is offered no tools, and Anthropic and Bedrock refuse a request that holds
tool-use / tool-result blocks but defines no tools: :func:`planner_view` shows earlier calls as
text. Tool calls a model makes natively in a planner reply never run
(:func:`without_native_calls`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import BaseModel

from llassembly.errors import (
    Diagnostic,
    ExecutionError,
    PlanError,
    PlanRejected,
    RepairsExhausted,
    ToolExecutionError,
    UsageError,
)
from llassembly.language.templates import render
from llassembly.machine.say import answer_of

if TYPE_CHECKING:
    from llassembly.machine.state import ToolCall

__all__ = [
    "MAX_REPAIR_REQUEST_CHARS",
    "NOT_APPROVED",
    "MessageOptions",
    "batch_messages",
    "batch_request",
    "call_messages",
    "call_request",
    "error_from_record",
    "failure_record",
    "final_message",
    "finished_summary",
    "jsonable",
    "model_reply",
    "native_calls_error",
    "plan_failure",
    "planner_view",
    "repair_request",
    "replan_request",
    "result_text",
    "turn_calls",
    "turn_messages",
    "without_native_calls",
]


class MessageOptions(Protocol):
    """The planner options the final message reads (``llassembly.planner.PlannerOptions``)."""

    @property
    def granularity(self) -> str: ...
    @property
    def execution(self) -> str: ...
    @property
    def infer_tools_messages(self) -> bool: ...


MAX_REPAIR_REQUEST_CHARS = 8192
"""Longest repair request sent back to the model, whatever the reply was."""


def repair_request(error: PlanError) -> str:
    """The message that asks the model to fix its plan, listing its problems (bounded)."""
    tail = "\n\nWrite the whole corrected program again in one ```asm block."
    body = f"Your program cannot run: {error.summary}.\n\n{error}"
    room = MAX_REPAIR_REQUEST_CHARS - len(tail)
    if len(body) > room:
        body = body[: room - 40] + "\n... (more problems not shown)"
    return body + tail


def replan_request(failure: Mapping[str, Any]) -> str:
    """The message that asks for a new plan after a run-time failure (or a rejected plan)."""
    if failure.get("type") == "PlanNotApproved":
        return (
            f"Your program did not run: {failure.get('detail', 'a reviewer rejected it')}.\n"
            "Nothing of it ran. Write a new program that takes this into account, in one "
            "```asm block."
        )
    return (
        f"Your program stopped at line {failure.get('line', 0)} ({failure.get('source', '')}): "
        f"{failure.get('detail', failure.get('message', 'error'))}.\n"
        "The tool calls above already ran and their results are final; do not repeat what "
        "succeeded. Write a new program that finishes the task from here, in one ```asm block."
    )


def model_reply(response: Any) -> AIMessage:
    """The AIMessage inside whatever a model handler returned."""
    if isinstance(response, AIMessage):
        return response
    inner = getattr(response, "model_response", response)
    for message in reversed(getattr(inner, "result", [])):
        if isinstance(message, AIMessage):
            return message
    raise UsageError(f"the model handler returned no AIMessage ({type(response).__name__})")


# -- what the planner model is shown ----------------------------------------------------------
#
# The planner's own requests offer the model no tools, and Anthropic and Bedrock refuse a
# request that holds tool-use / tool-result blocks but defines no tools. So earlier tool calls
# and their results (of earlier plans, or of a ReAct turn before the planner was added) are shown
# as text: one message per run of calls, bounded in size.

_RESULT_CHARS = 2000  # most characters of one tool result shown to the planner model


def _clip(text: str, limit: int = _RESULT_CHARS) -> str:
    return text if len(text) <= limit else f"{text[: limit - 15]}... [truncated]"


def _call_line(call: Mapping[str, Any]) -> str:
    try:
        args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        args = str(call.get("args"))
    return f"{call.get('name', '?')}({_clip(args, 500)})"


def planner_view(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The conversation as the planner model sees it: no tool-call or tool-result blocks.

    Each run of ``AIMessage`` tool calls and ``ToolMessage`` results becomes one
    ``HumanMessage`` listing the calls in order with their results (text of any ``AIMessage``
    stays an ``AIMessage``). Every other message is kept as it is.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> call = {"name": "add", "args": {"a": 1}, "id": "c1", "type": "tool_call"}
        >>> answer = ToolMessage("2", tool_call_id="c1")
        >>> view = planner_view([AIMessage("", tool_calls=[call]), answer])
        >>> print(view[0].content)
        Tool calls made so far, with their results:
        1. add({"a": 1}) -> 2
    """
    out: list[BaseMessage] = []
    lines: list[str] = []
    calls: dict[str, int] = {}  # tool-call id -> index in lines

    def flush() -> None:
        if lines:
            head = "Tool calls made so far, with their results:"
            out.append(HumanMessage("\n".join([head, *lines])))
            lines.clear()
            calls.clear()

    for message in messages:
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            text = message.text
            if text.strip():
                flush()
                out.append(AIMessage(text, id=message.id, name=message.name))
            for call in message.tool_calls:
                calls[call.get("id") or ""] = len(lines)
                lines.append(f"{len(lines) + 1}. {_call_line(call)} -> (no result)")
        elif isinstance(message, ToolMessage):
            shown = _clip(message.text)
            if message.status == "error":
                shown = f"ERROR: {shown}"
            index = calls.get(message.tool_call_id)
            if index is None:
                lines.append(f"{len(lines) + 1}. {message.name or 'tool'} -> {shown}")
            else:
                lines[index] = lines[index].replace("-> (no result)", f"-> {shown}", 1)
        else:
            flush()
            out.append(message)
    flush()
    return out


def without_native_calls(reply: AIMessage) -> tuple[AIMessage, list[str]]:
    """The reply with any native tool calls taken out (they never run unverified).

    Returns the cleaned reply and the names of the tools it tried to call directly.
    """
    native = [c.get("name") or "?" for c in reply.tool_calls]
    native += [c.get("name") or "?" for c in reply.invalid_tool_calls]
    blocks = isinstance(reply.content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_call") for b in reply.content
    )
    if not native and not blocks and "tool_calls" not in reply.additional_kwargs:
        return reply, []
    content: Any = reply.content
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (isinstance(b, dict) and b.get("type") in ("tool_use", "tool_call"))
        ]
    kwargs = {k: v for k, v in reply.additional_kwargs.items() if k != "tool_calls"}
    meta = {**reply.response_metadata, "llassembly_dropped_tool_calls": native}
    cleaned = AIMessage(
        content=content,
        additional_kwargs=kwargs,
        response_metadata=meta,
        id=reply.id,
        name=reply.name,
        usage_metadata=reply.usage_metadata,
    )
    return cleaned, native


def native_calls_error(names: Sequence[str]) -> PlanRejected:
    listed = ", ".join(dict.fromkeys(names))
    return PlanRejected(
        (
            Diagnostic(
                1,
                1,
                f"the reply called tools directly ({listed}) instead of writing a program; "
                "tools run only through CALL inside one ```asm block",
            ),
        )
    )


def plan_failure(error: RepairsExhausted) -> dict[str, Any]:
    """The failure record of a turn whose model wrote no valid plan (nothing of it ran)."""
    first = error.diagnostics[0] if error.diagnostics else None
    return {
        "type": "RepairsExhausted",
        "message": str(error),
        "detail": error.summary,
        "line": first.line if first else 0,
        "source": first.source if first else "",
        "attempts": error.attempts,
    }


def error_from_record(record: Mapping[str, Any]) -> ExecutionError:
    """Rebuild the error a failure record (see ``failure_record``) describes.

    Used where the live exception is gone: after a checkpoint, or in another process.
    """
    cls = _EXECUTION_ERRORS.get(str(record.get("type")), ExecutionError)
    error = cls.__new__(cls)
    ExecutionError.__init__(
        error,
        str(record.get("detail", record.get("message", "the plan failed"))),
        line=int(record.get("line", 0) or 0),
        source=str(record.get("source", "")),
    )
    for attr in ("tool", "budget", "limit", "reached", "argument"):
        if attr in record:
            setattr(error, attr, record[attr])
    if isinstance(error, ToolExecutionError):
        error.original = RuntimeError(str(record.get("detail", "")))
    return error


def _subclasses(cls: type[ExecutionError]) -> list[type[ExecutionError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _subclasses(sub)
    return found


_EXECUTION_ERRORS = {c.__name__: c for c in _subclasses(ExecutionError)}


NOT_APPROVED: Final = "PlanNotApproved"
"""The ``type`` of the failure record of a plan a reviewer rejected."""


def final_message(state: Mapping[str, Any], options: MessageOptions) -> AIMessage:
    """The ``AIMessage`` that ends the turn, with what happened in metadata.

    Its text is the plan's answer (``SAY``), or a summary of the calls when it said nothing,
    or what went wrong. Under ``final_answer="model"`` it is the model's reply
    (``state["final_reply"]``), and the text the plan would have ended with is kept in the
    metadata as ``summary``.
    """
    machine = state.get("machine") or {}
    failure = state.get("failure")
    registers = machine.get("registers", {})
    said = answer_of(machine)
    tool_calls = state.get("tool_calls", 0)
    executed = state.get("executed", 0)
    meta: dict[str, Any] = {
        "status": "stopped" if failure else "finished",
        "model_calls": state.get("model_calls", 0),
        "repairs": state.get("repairs", 0),
        "replans": state.get("replans", 0),
        "tool_calls": tool_calls,
        "instructions": executed,
        "registers": registers,
        "granularity": options.granularity,
        "execution": options.execution,
        "answer": said,
    }
    plural = "s" if tool_calls != 1 else ""
    if failure and failure.get("type") == NOT_APPROVED:
        meta["status"] = "rejected"
        meta["error"] = dict(failure)
        text = f"The plan did not run: {failure.get('detail', '')}."
    elif failure and failure.get("type") == "RepairsExhausted":
        meta["error"] = dict(failure)
        text = (
            f"No plan could run: {failure.get('detail', '')}. "
            f"{tool_calls} tool call{plural} completed before it."
        )
    elif failure:
        meta["error"] = dict(failure)
        what = failure.get("detail") or failure.get("message", "")
        text = (
            f"The plan stopped at line {failure.get('line', 0)} ({failure.get('source', '')}): "
            f"{what}. {tool_calls} tool call{plural} completed before it."
        )
    elif said is not None:
        text = said
    else:
        text = finished_summary(turn_calls(state.get("new_messages", [])), registers)
    reply = state.get("final_reply")
    if isinstance(reply, AIMessage):  # final_answer="model": the model's reply ends the turn
        meta["summary"] = text
        return reply.model_copy(
            update={"response_metadata": {**reply.response_metadata, "llassembly": meta}}
        )
    return AIMessage(content=text, response_metadata={"llassembly": meta})


_CALLS_SHOWN = 10  # calls listed in a summary; the rest are counted
_VALUES_SHOWN = 6  # register values named in a summary


def turn_calls(messages: Sequence[BaseMessage]) -> list[tuple[str, dict[str, Any], str | None]]:
    """The plan calls among ``messages``, in order: ``(tool, args, result text)``; the text is
    ``None`` for a call that has no result, and starts with ``ERROR:`` for a failed one."""
    calls: dict[str, tuple[str, dict[str, Any], str | None]] = {}
    for message in messages:
        if "llassembly" not in message.response_metadata:
            continue
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call.get("id") or ""] = (call["name"], dict(call.get("args") or {}), None)
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            name, args, _ = calls[message.tool_call_id]
            content = message.content
            text = content if type(content) is str else message.text
            calls[message.tool_call_id] = (
                name,
                args,
                text if message.status != "error" else f"ERROR: {text}",
            )
    return list(calls.values())


def _shown(value: Any, limit: int) -> str:
    if isinstance(value, str):
        text = repr(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        text = render(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return _clip(text, limit)


def _number_read(text: str) -> str:
    """A result that is a JSON number, rendered as one (``7.0`` reads ``7``)."""
    try:
        value: Any = json.loads(text) if text[:1].isdigit() or text[:1] == "-" else None
    except ValueError:
        return text
    return render(value) if type(value) in (int, float) else text


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
            outcome = "(no result)" if result is None else _clip(_number_read(result), 120)
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


def turn_messages(state: Mapping[str, Any], options: MessageOptions) -> list[AnyMessage]:
    """The messages a turn adds: plans, executed calls (if kept) and the final message."""
    messages: list[AnyMessage] = list(state.get("new_messages", []))
    if not options.infer_tools_messages:
        messages = [m for m in messages if "llassembly" not in m.response_metadata]
    return [*messages, final_message(state, options)]


def request_context(system_message: BaseMessage | None, messages: Sequence[BaseMessage]) -> str:
    """The agent's system prompt and any system message in the conversation (the planner
    prompt's ``{context}``; the model then sees exactly one system message, ours)."""
    parts = [system_message.text] if system_message is not None else []
    parts += [m.text for m in messages if isinstance(m, SystemMessage)]
    return "\n\n".join(p for p in parts if p)


def as_any(messages: list[BaseMessage]) -> list[AnyMessage]:
    """The planner's messages as the type ``ModelRequest`` declares (they are already)."""
    return cast("list[AnyMessage]", messages)


# -- a plan's calls as messages (both paths) ----------------------------------------------------


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data (pydantic models dumped, anything else unknown as text)."""
    return _jsonable(value)


def _plain(kind: type) -> bool:
    """An exact type that is its own JSON: tested by identity before the slower ``isinstance``
    tests of :func:`_jsonable` (pydantic's ABC metaclass makes those cost more than the rest
    of a call's conversion); identity, because a class need not be hashable."""
    return kind is str or kind is int or kind is float or kind is bool or kind is _NONE


_NONE: Final = type(None)


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if _plain(kind):
        return value
    if kind is dict:
        return {str(k): v if _plain(type(v)) else _jsonable(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def result_text(result: Any) -> str:
    """The text a ``ToolMessage`` shows for a raw tool result."""
    if isinstance(result, str):
        return result
    if isinstance(result, ToolMessage):
        return result.text
    try:
        return json.dumps(_jsonable(result), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


# What every call request is built from: an empty AIMessage, validated once.
_EMPTY_REQUEST: Final = AIMessage(content="")
_REQUEST_FIELDS: Final = frozenset({"content", "tool_calls", "response_metadata"})
_M = TypeVar("_M", bound=BaseModel)


def built_from(template: _M, values: dict[str, Any], fields_set: AbstractSet[str]) -> _M:
    """A copy of the validated ``template`` whose fields ``values`` replace, each given new.

    It is the message the constructor would build from the same, already valid, values
    (equal, dumped alike, with the same fields marked as set), at a fifth of the cost of
    validating them again or of ``model_copy`` (each step of a plan on the agent path builds
    one for its call and one for the call's result).
    """
    message = _new(type(template))
    fields = dict(template.__dict__)
    fields.update(values)
    _set(message, "__dict__", fields)
    _set(message, "__pydantic_fields_set__", set(fields_set))
    extra = template.__pydantic_extra__
    _set(message, "__pydantic_extra__", None if extra is None else dict(extra))
    private = template.__pydantic_private__
    _set(message, "__pydantic_private__", None if private is None else dict(private))
    return message


_new = object.__new__
_set = object.__setattr__


def call_request(call: ToolCall, call_id: str) -> AIMessage:
    """The ``AIMessage`` carrying one executed CALL as a tool call (source line in metadata)."""
    meta = {"llassembly": {"index": call.index, "line": call.line, "source": call.source}}
    tool_call = {
        "name": call.tool,
        "args": _jsonable(call.args),
        "id": call_id,
        "type": "tool_call",
    }
    return built_from(
        _EMPTY_REQUEST,
        {
            "tool_calls": [tool_call],
            "response_metadata": meta,
            "additional_kwargs": {},
            "invalid_tool_calls": [],
        },
        _REQUEST_FIELDS,
    )


def batch_request(calls: list[ToolCall], call_ids: list[str]) -> AIMessage:
    """The ``AIMessage`` carrying a batch of CALLs run at once (``parallel_tools``); one
    call gives :func:`call_request`'s message. Its metadata names the first call and lists
    every call under ``"batch"``."""
    if len(calls) == 1:
        return call_request(calls[0], call_ids[0])
    where = [{"index": c.index, "line": c.line, "source": c.source} for c in calls]
    return AIMessage(
        content="",
        tool_calls=[
            {"name": c.tool, "args": _jsonable(c.args), "id": i, "type": "tool_call"}
            for c, i in zip(calls, call_ids, strict=True)
        ],
        response_metadata={"llassembly": {**where[0], "batch": where}},
    )


def batch_messages(
    calls: list[ToolCall], answers: list[tuple[str, bool]], call_ids: list[str]
) -> list[AnyMessage]:
    """The ``AIMessage`` of a batch and a ``ToolMessage`` per call (``(text, is_error)``)."""
    messages: list[AnyMessage] = [batch_request(calls, call_ids)]
    for call, (content, error), call_id in zip(calls, answers, call_ids, strict=True):
        meta = {"llassembly": {"index": call.index, "line": call.line, "source": call.source}}
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
    call: ToolCall, content: str, call_id: str, *, error: bool = False
) -> list[AnyMessage]:
    """The ``AIMessage`` (one tool call) and ``ToolMessage`` pair recording an executed CALL."""
    request = call_request(call, call_id)
    answer = ToolMessage(
        content=content,
        tool_call_id=call_id,
        name=call.tool,
        status="error" if error else "success",
        response_metadata=request.response_metadata,
    )
    return [request, answer]


def failure_record(exc: ExecutionError) -> dict[str, Any]:
    """A plain-data description of a failed run (kept in graph state)."""
    record: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": str(exc),
        "detail": exc.detail,
        "line": exc.line,
        "source": exc.source,
    }
    for attr in ("tool", "budget", "limit", "reached", "argument"):
        if hasattr(exc, attr):
            record[attr] = getattr(exc, attr)
    return record
