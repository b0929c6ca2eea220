"""What the planner model is shown: the conversation without tool-call blocks, the repair and
replan requests, and what its reply holds.

The planner model is offered no tools, and Anthropic and Bedrock refuse a request that holds
tool-use / tool-result blocks but defines no tools: :func:`planner_view` shows earlier calls as
text. Tool calls a model makes natively in a planner reply never run
(:func:`without_native_calls`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from llassembly.errors import MAX_DIAGNOSTICS_SHOWN, Diagnostic, PlanError, PlanRejected, UsageError
from llassembly.integration.record import NOT_APPROVED

__all__ = [
    "MAX_REPAIR_REQUEST_CHARS",
    "as_any",
    "model_reply",
    "native_calls_error",
    "planner_view",
    "repair_request",
    "replan_request",
    "request_context",
    "without_native_calls",
]

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


def request_context(system_message: BaseMessage | None, messages: Sequence[BaseMessage]) -> str:
    """The agent's system prompt and any system message in the conversation (the planner
    prompt's ``{context}``; the model then sees exactly one system message, ours)."""
    parts = [system_message.text] if system_message is not None else []
    parts += [m.text for m in messages if isinstance(m, SystemMessage)]
    return "\n\n".join(p for p in parts if p)


def as_any(messages: list[BaseMessage]) -> list[AnyMessage]:
    """The planner's messages as the type ``ModelRequest`` declares (they are already)."""
    return cast("list[AnyMessage]", messages)
