"""The messages of a planner turn: what the planner model is shown, how the turn ends, and
what it says to the user.

* **The planner's requests**: the conversation without tool-call blocks (:func:`planner_view`:
  the planner model is offered no tools, and Anthropic and Bedrock refuse a request that holds
  tool-use / tool-result blocks but defines no tools), the repair and replan requests, and
  what a reply holds (native tool calls in a planner reply never run).
* **The end of a turn**: ``final_answer="plan"`` (the default) ends it with the text the plan
  said (``SAY``), or a summary of its calls; ``final_answer="model"`` asks the model once more
  after the plan, like a joiner (:func:`answer_messages`). With ``create_agent``'s
  ``response_format``, the plan's answer fills ``structured_response`` when it is JSON that
  validates into the schema; otherwise the final model call carries the agent's
  ``response_format``, so the agent's own strategy produces and validates it.
* **The final message** (:func:`final_message`), with what happened in its metadata.

Every message a turn adds carries ``response_metadata["llassembly"]`` with its ``kind``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from llassembly.errors import MAX_DIAGNOSTICS_SHOWN, Diagnostic, PlanError, PlanRejected, UsageError
from llassembly.integration.calls import plan_call_messages, shown_result
from llassembly.integration.record import CALL_REFUSED, KEY, NOT_APPROVED, NOTHING_RAN
from llassembly.language.templates import render
from llassembly.machine.text import final_answer_of

if TYPE_CHECKING:
    from langchain.agents.middleware import ModelRequest

    from llassembly.machine.externs import Extern

_M = TypeVar("_M", bound=BaseMessage)


# -- the planner's requests ------------------------------------------------------------

MAX_REPAIR_REQUEST_CHARS = 8192
"""Longest repair request sent back to the model, whatever the reply was."""


def repair_request(error: PlanError) -> str:
    """The message that asks the model to fix its plan, listing its problems (bounded)."""
    tail = "\n\nWrite the whole corrected program again in one ```asm block."
    problems = "\n".join(d.render() for d in error.diagnostics[:MAX_DIAGNOSTICS_SHOWN])
    hidden = len(error.diagnostics) - MAX_DIAGNOSTICS_SHOWN
    if hidden > 0:
        problems += f"\n... and {hidden} more problem{'s' if hidden != 1 else ''} like these"
    body = f"Your program cannot run: {error.summary}.\n\n{problems}".rstrip()
    room = MAX_REPAIR_REQUEST_CHARS - len(tail)
    if len(body) > room:
        body = body[: room - 40] + "\n... (more problems not shown)"
    return body + tail


def replan_request(failure: Mapping[str, Any]) -> str:
    """The message that asks for a new plan after a run-time failure (or a rejected plan)."""
    if failure.get("type") == NOT_APPROVED:
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


def split_system(
    messages: Sequence[_M], system_message: BaseMessage | None = None
) -> tuple[str, list[_M]]:
    """The caller's system prompt (``system_message`` and any system message in the
    conversation, joined: the planner prompt's ``{context}``; the model then sees exactly one
    system message, ours) and the conversation without them."""
    parts = [system_message.text] if system_message is not None else []
    parts += [m.text for m in messages if isinstance(m, SystemMessage)]
    context = "\n\n".join(p for p in parts if p)
    return context, [m for m in messages if not isinstance(m, SystemMessage)]


def as_any(messages: list[BaseMessage]) -> list[AnyMessage]:
    """The planner's messages as the type ``ModelRequest`` declares (they are already)."""
    return cast("list[AnyMessage]", messages)


# -- the end of a turn ------------------------------------------------------------------


class AnswerRequest(list[BaseMessage]):
    """The conversation for the final answer call (a list, marked so a driver knows that this
    request keeps the agent's own system prompt and ``response_format``)."""


@dataclass
class Answered:
    """What the final answer call gave: its messages (the reply last but for a
    ``ToolStrategy`` result's ``ToolMessage``) and the structured response, if any."""

    messages: list[AnyMessage]
    structured: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def reply(self) -> AIMessage:
        """The model's reply."""
        return next(m for m in reversed(self.messages) if isinstance(m, AIMessage))


def answer_request(request: ModelRequest[Any], messages: AnswerRequest) -> ModelRequest[Any]:
    """The final answer call inside ``create_agent``: the agent's own system prompt and
    ``response_format``, the calls shown as text, no tools."""
    return request.override(
        messages=cast("list[AnyMessage]", list(messages)), tools=[], tool_choice=None
    )


def answered(response: Any) -> Answered:
    """An :class:`Answered` from what a model handler returned (``ModelResponse``,
    ``ExtendedModelResponse`` or an ``AIMessage``)."""
    if isinstance(response, AIMessage):
        return Answered([response])
    inner = getattr(response, "model_response", response)
    messages = list(getattr(inner, "result", []))
    if not any(isinstance(m, AIMessage) for m in messages):
        raise UsageError(f"the model handler returned no AIMessage ({type(response).__name__})")
    return Answered(messages, getattr(inner, "structured_response", None))


def needs_model(
    final_answer: str,
    failure: Mapping[str, Any] | None,
    raising: bool,
    response_format: Any,
    structured: Any,
) -> bool:
    """Whether the turn ends with a model call: asked for (``final_answer="model"``), or the
    agent wants a structured response the plan's answer did not give. Never when nothing of
    the plan ran (rejected, no valid plan) or when its failure is raised."""
    if failure and (raising or failure.get("type") in NOTHING_RAN):
        return False
    if final_answer == "model":
        return True
    return response_format is not None and structured is None and not failure


def structured_from_text(response_format: Any, text: str | None) -> Any:
    """The plan's answer validated into the agent's ``response_format``, or ``None``.

    The answer must be JSON of the schema (any of them, for a union ``ToolStrategy``); it is
    parsed and validated by LangChain's own binding for the schema.
    """
    if response_format is None or not text or text.lstrip()[:1] not in "{[":
        return None
    from langchain.agents.structured_output import (
        ProviderStrategy,
        ProviderStrategyBinding,
        ToolStrategy,
    )

    if isinstance(response_format, ProviderStrategy):
        specs = [response_format.schema_spec]
    elif isinstance(response_format, ToolStrategy):
        specs = list(response_format.schema_specs)
    else:  # AutoStrategy or a bare schema
        specs = ToolStrategy(getattr(response_format, "schema", response_format)).schema_specs
    for spec in specs:
        try:
            return ProviderStrategyBinding.from_schema_spec(spec).parse(AIMessage(content=text))
        except Exception:
            continue
    return None


def answer_messages(
    conversation: Sequence[BaseMessage],
    turn: Sequence[BaseMessage],
    summary: Mapping[str, Any],
    structured: bool = False,
) -> AnswerRequest:
    """The final answer request: the conversation (with this turn's plans), then one message
    listing this turn's calls and results and asking for the reply.

    Args:
        conversation: The messages before and during the turn (no system message).
        turn: This turn's call messages (they are shown as text, in the last message).
        summary: The turn's record (``machine``, ``failure``).
        structured: The reply is a structured response (the agent's ``response_format``):
            the request asks for it rather than for words.
    """
    calls = {id(m) for m in turn}
    kept = [m for m in conversation if id(m) not in calls and not _is_call(m, turn)]
    lines: list[str] = []
    for message in planner_view(list(turn)):
        if isinstance(message, HumanMessage):
            lines.append(message.text)
    if not lines:
        lines.append("The program called no tool.")
    failure = summary.get("failure")
    if failure:
        lines.append(
            f"The program stopped at line {failure.get('line', 0)} "
            f"({failure.get('source', '')}): {failure.get('detail') or failure.get('message')}."
        )
    said = final_answer_of(summary.get("machine"))
    if said:
        lines.append(f"The program's own answer:\n{said}")
    if structured:
        lines.append(
            "Now reply to the user's last message from these results, in the structured "
            "format you are asked for. Write no program."
        )
    else:
        lines.append(
            "Now reply to the user's last message from these results, in words. Write no "
            "program and call no tool."
        )
    return AnswerRequest([*planner_view(kept), HumanMessage("\n\n".join(lines))])


def _is_call(message: BaseMessage, turn: Sequence[BaseMessage]) -> bool:
    """A call message of this turn given again as another object (same id)."""
    if not message.id:
        return False
    return any(m.id == message.id for m in turn if isinstance(m, AIMessage | ToolMessage))


# -- the final message -----------------------------------------------------------------


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
        text = finished_summary(_turn_calls(calls, externs), registers)
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


def _turn_calls(
    messages: Sequence[BaseMessage], externs: Mapping[str, Extern] | None = None
) -> list[tuple[str, dict[str, Any], str | None]]:
    """The plan calls among ``messages``, in order: ``(tool, args, result)``. The result is
    what the plan got (see :func:`~llassembly.integration.calls.shown_result`), ``None`` for
    a call that has no result."""
    calls: dict[str, tuple[str, dict[str, Any], str | None]] = {}
    for message in messages:
        if KEY not in message.response_metadata:
            continue
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call.get("id") or ""] = (call["name"], dict(call.get("args") or {}), None)
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            name, args, _ = calls[message.tool_call_id]
            shown = shown_result((externs or {}).get(name), message)
            calls[message.tool_call_id] = (name, args, shown)
    return list(calls.values())


_VALUES_SHOWN = 6  # register values named in a summary


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
