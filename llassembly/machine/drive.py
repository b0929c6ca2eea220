"""Drive a sans-IO generator with sync or async effects, so each body is written once.

A body is a generator that yields *requests* (a tool call, a model call) and receives their
results. :func:`drive` answers them with a sync function, :func:`adrive` with an async one.
A failing request is thrown back into the generator (wrapped by ``wrap_error``), except
``GraphBubbleUp`` (LangGraph interrupts), which always propagates untouched.

The engine imports no LangGraph: :func:`bubbling` names ``GraphBubbleUp`` only once LangGraph is
loaded (before that, no such exception can exist).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from llassembly.compat import bubbling_errors
from llassembly.errors import ExecutionError, ToolExecutionError
from llassembly.machine.state import ToolCall

__all__ = ["adrive", "bubbling", "drive", "tool_error"]

_Req = TypeVar("_Req")
_Ret = TypeVar("_Ret")


def bubbling() -> tuple[type[BaseException], ...]:
    """The exceptions that always propagate untouched (for ``except bubbling():``): LangGraph's
    interrupts once LangGraph is loaded (see :func:`llassembly.compat.bubbling_errors`)."""
    return bubbling_errors()


def tool_error(call: ToolCall, exc: Exception) -> BaseException:
    """What a tool's exception becomes: a :class:`ToolExecutionError` naming the tool and the
    line of this plan, with the original as its cause.

    Only an error already raised for this very call (same tool, same line) stays as it is.
    Anything else, including the library's own errors from inside the tool (a tool that runs a
    plan of its own), is the tool's failure: it must not escape ``on_tool_error`` or be
    reported at a line of another plan.
    """
    if (
        isinstance(exc, ExecutionError)
        and exc.line == call.line
        and getattr(exc, "tool", call.tool) == call.tool
    ):
        return exc
    error = ToolExecutionError(call.tool, exc, line=call.line, source=call.source)
    error.__cause__ = exc
    return error


def _identity(request: Any, error: Exception) -> BaseException:
    return error


def drive(
    body: Generator[_Req, Any, _Ret],
    execute: Callable[[_Req], Any],
    wrap_error: Callable[[_Req, Exception], BaseException] = _identity,
) -> _Ret:
    """Run ``body`` to its return value, answering each request with ``execute``."""
    try:
        request = next(body)
        while True:
            try:
                result = execute(request)
            except bubbling():
                body.close()
                raise
            except Exception as exc:
                request = body.throw(wrap_error(request, exc))
                continue
            request = body.send(result)
    except StopIteration as stop:
        value: _Ret = stop.value
        return value


async def adrive(
    body: Generator[_Req, Any, _Ret],
    execute: Callable[[_Req], Awaitable[Any]],
    wrap_error: Callable[[_Req, Exception], BaseException] = _identity,
) -> _Ret:
    """Async :func:`drive`: each request is awaited."""
    try:
        request = next(body)
        while True:
            try:
                result = await execute(request)
            except bubbling():
                body.close()
                raise
            except Exception as exc:
                request = body.throw(wrap_error(request, exc))
                continue
            request = body.send(result)
    except StopIteration as stop:
        value: _Ret = stop.value
        return value
