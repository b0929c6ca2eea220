"""The agent path's tool side: a plan's call as the agent's tool node runs it.

The planner's ``wrap_tool_call`` hands plan calls here. The call runs through the planner's
``tool_middleware`` and the rest of the agent's tool path, on a copy of the tool that notes its
own return value (:func:`llassembly.compat.recording_tool`). A tool's exception becomes the
call's failure (an error ``ToolMessage``, so the plan's ``on_tool_error`` decides what
follows). The result is tagged with the call's place in the plan, whether the tool ran, and,
when its text would read differently, the values the plan gets (see
:mod:`llassembly.integration.results`); a result a middleware rewrote after the tool is read
from its text, as the agent sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from llassembly.compat import Recorded, bubbling_errors, recording
from llassembly.errors import ExecutionError
from llassembly.integration.agent import ADDED_BY_CALL, ENDS_RUN, record_of
from llassembly.integration.messages import call_meta
from llassembly.integration.planner import Planner
from llassembly.integration.record import FAILURE_ARTIFACT, KEY, PendingCall, execution_failure
from llassembly.integration.results import altered, message_text, value_tag
from llassembly.integration.tools import chain
from llassembly.machine.emulator import ToolCall, tool_error

__all__ = ["arun_plan_call", "plan_call", "run_plan_call"]

_Msg = TypeVar("_Msg", bound=BaseMessage)
_Result = ToolMessage | Command[Any]


def plan_call(request: ToolCallRequest) -> PendingCall | None:
    """The pending plan call this tool request runs, or ``None`` for any other call."""
    record = record_of(request.state)
    if record is None:
        return None
    call_id = request.tool_call.get("id")
    return next((p for p in record["pending"] if p["id"] == call_id), None)


def run_plan_call(
    planner: Planner,
    request: ToolCallRequest,
    pending: PendingCall,
    handler: Callable[[ToolCallRequest], _Result],
) -> _Result:
    """Run one plan call through the planner's ``tool_middleware`` and ``handler``."""
    noted = Recorded()
    chained = chain(planner.options.tool_middleware, "wrap_tool_call", handler)
    try:
        with recording(noted):
            result = chained(_recording(planner, request))
    except bubbling_errors():
        raise
    except Exception as exc:
        return _failure_message(pending, exc)
    return _tagged(planner, result, pending, request, noted)


async def arun_plan_call(
    planner: Planner,
    request: ToolCallRequest,
    pending: PendingCall,
    handler: Callable[[ToolCallRequest], Awaitable[_Result]],
) -> _Result:
    """Async :func:`run_plan_call`."""
    noted = Recorded()
    chained = chain(planner.options.tool_middleware, "awrap_tool_call", handler)
    try:
        with recording(noted):
            result = await chained(_recording(planner, request))
    except bubbling_errors():
        raise
    except Exception as exc:
        return _failure_message(pending, exc)
    return _tagged(planner, result, pending, request, noted)


def _recording(planner: Planner, request: ToolCallRequest) -> ToolCallRequest:
    if request.tool is None:
        return request
    return request.override(tool=planner.recording_tool_of(request.tool))


def _failure_message(pending: PendingCall, exc: Exception) -> ToolMessage:
    """The error ``ToolMessage`` of a plan call whose tool raised (the graph path's text)."""
    call = ToolCall(
        pending["tool"], {}, pending["index"], pending["line"], pending["source"], pending["number"]
    )
    wrapped = tool_error(call, exc)
    error = wrapped if isinstance(wrapped, ExecutionError) else ExecutionError(str(exc))
    return ToolMessage(
        content=str(error),
        tool_call_id=pending["id"],
        name=pending["tool"],
        status="error",
        artifact={FAILURE_ARTIFACT: dict(execution_failure(error))},
        response_metadata=_tag(pending),
    )


def _tag(pending: PendingCall, **extra: Any) -> dict[str, Any]:
    meta = call_meta(pending["index"], pending["line"], pending["source"])
    meta[KEY].update(extra)
    return meta


def _tagged(
    planner: Planner,
    result: _Result,
    pending: PendingCall,
    request: ToolCallRequest,
    noted: Recorded,
) -> _Result:
    """A plan call's result with the call's place in its metadata, whether the tool ran, and
    what the plan gets when the text would not say it.

    A ``return_direct`` tool's result is marked: the run ends with it, and the next run must
    not take the plan up again. Messages a ``Command`` adds beside the result are marked as
    the call's, so the next step knows they belong to this run.
    """
    extra: dict[str, Any] = {} if noted.ran else {"ran": False}
    if request.tool is not None and request.tool.return_direct:
        extra[ENDS_RUN] = True
    extern = planner.extern_of(request.tool) if request.tool is not None else None

    def tagged(message: ToolMessage) -> ToolMessage:
        more = dict(extra)
        if _as_made(message, noted) and extern is not None and message.status != "error":
            more.update(value_tag(extern, noted.value, message_text(message), pending))
        # The tool node built this message for this call: its metadata is set, not copied.
        message.response_metadata = {**message.response_metadata, **_tag(pending, **more)}
        return message

    if isinstance(result, ToolMessage):
        return tagged(result)
    update = result.update
    if result.graph is not None or not isinstance(update, dict) or "messages" not in update:
        return result
    messages = [
        (tagged(m) if isinstance(m, ToolMessage) and _answers(m, pending) else _marked(m, pending))
        if isinstance(m, BaseMessage)
        else m
        for m in _as_list(update["messages"])
    ]
    return Command(update={**update, "messages": messages}, resume=result.resume, goto=result.goto)


def _as_made(message: ToolMessage, noted: Recorded) -> bool:
    """Whether ``message`` holds the result as the tool made it (see
    :func:`~llassembly.integration.results.altered`), so the plan reads the tool's own value.
    A ``wrap_tool_call`` middleware that altered the content after the tool (a redaction, a
    correction) decides what the agent sees, and so what the plan reads: its text."""
    if not noted.returned:
        return False
    if noted.content is None or message.content == noted.content:
        return True
    made = message_text(ToolMessage(content=noted.content, tool_call_id=message.tool_call_id))
    return not altered(made, message_text(message))


def _marked(message: _Msg, pending: Mapping[str, Any]) -> _Msg:
    meta = {**message.response_metadata, ADDED_BY_CALL: pending["id"]}
    return message.model_copy(update={"response_metadata": meta})


def _answers(message: BaseMessage, pending: Mapping[str, Any]) -> bool:
    return isinstance(message, ToolMessage) and message.tool_call_id == pending["id"]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]
