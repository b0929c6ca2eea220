"""The agent path's tool side: a plan's call as the agent's tool node runs it.

The middleware's ``wrap_tool_call`` hands plan calls here: they go through the planner's
``tool_middleware``, a tool's exception becomes the call's failure (an error ``ToolMessage``,
so the plan's ``on_tool_error`` decides what follows), and the result is tagged with the
call's source line and with what the next step must know (see ``_agent._answer``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from llassembly.errors import ExecutionError
from llassembly.integration.agent import (
    ADDED_BY_CALL,
    ENDS_RUN,
    PLAN_CALL_KEY,
    call_meta,
    failure_message,
    pending_calls,
)
from llassembly.integration.messages import built_from
from llassembly.integration.tools import chain
from llassembly.machine.emulator import (
    ToolCall,
    tool_error,
)

__all__ = ["arun_plan_call", "plan_call", "run_plan_call"]

_Msg = TypeVar("_Msg", bound=BaseMessage)
_Result = ToolMessage | Command[Any]


def plan_call(request: ToolCallRequest) -> Mapping[str, Any] | None:
    """The pending plan call this tool request runs, or ``None`` for any other call."""
    state = request.state
    record = state.get(PLAN_CALL_KEY) if isinstance(state, dict) else None
    if not record:
        return None
    call_id = request.tool_call.get("id")
    pending = record.get("pending")
    if type(pending) is dict and not record.get("batch"):  # the usual case: one call
        return pending if pending["id"] == call_id else None
    return next((p for p in pending_calls(record) if p["id"] == call_id), None)


def run_plan_call(
    request: ToolCallRequest,
    pending: Mapping[str, Any],
    handler: Callable[[ToolCallRequest], _Result],
    tool_middleware: Sequence[Any],
) -> _Result:
    """Run one plan call through ``tool_middleware`` and ``handler`` (the tool node's)."""
    chained = chain(tool_middleware, "wrap_tool_call", handler)
    try:
        return _tagged(chained(request), pending, request)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return failure_message(pending, _tool_failure(pending, exc))


async def arun_plan_call(
    request: ToolCallRequest,
    pending: Mapping[str, Any],
    handler: Callable[[ToolCallRequest], Awaitable[_Result]],
    tool_middleware: Sequence[Any],
) -> _Result:
    """Async :func:`run_plan_call`."""
    chained = chain(tool_middleware, "awrap_tool_call", handler)
    try:
        return _tagged(await chained(request), pending, request)
    except GraphBubbleUp:
        raise
    except Exception as exc:
        return failure_message(pending, _tool_failure(pending, exc))


def _tagged(result: _Result, pending: Mapping[str, Any], request: ToolCallRequest) -> _Result:
    """A plan call's result with the call's source line in its ``ToolMessage`` metadata.

    A ``return_direct`` tool's result is marked: the run ends with it, and the next run must
    not take the plan up again. Messages a ``Command`` adds beside the result are marked as
    the call's, so the next step knows they belong to this run.
    """
    meta = call_meta(pending)
    if request.tool is not None and request.tool.return_direct:
        meta[PLAN_CALL_KEY] = {**meta[PLAN_CALL_KEY], ENDS_RUN: True}
    if isinstance(result, ToolMessage):
        return _with_meta(result, meta)
    update = result.update
    if result.graph is not None or not isinstance(update, dict) or "messages" not in update:
        return result
    added = {ADDED_BY_CALL: pending["id"]}
    messages = [
        _with_meta(m, meta if _answers(m, pending) else added) if isinstance(m, BaseMessage) else m
        for m in _as_list(update["messages"])
    ]
    return Command(update={**update, "messages": messages}, resume=result.resume, goto=result.goto)


def _with_meta(message: _Msg, meta: dict[str, Any]) -> _Msg:
    return built_from(
        message,
        {"response_metadata": {**message.response_metadata, **meta}},
        message.__pydantic_fields_set__ | {"response_metadata"},
    )


def _answers(message: BaseMessage, pending: Mapping[str, Any]) -> bool:
    return isinstance(message, ToolMessage) and message.tool_call_id == pending["id"]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _tool_failure(pending: Mapping[str, Any], exc: Exception) -> ExecutionError:
    """What a plan call's exception becomes, by the same rule as on the graph path."""
    call = ToolCall(
        pending["tool"], {}, pending["index"], pending["line"], pending["source"], pending["number"]
    )
    error = tool_error(call, exc)
    return error if isinstance(error, ExecutionError) else ExecutionError(str(exc))
