"""Running a plan's tool calls the way the agent's own tool node would (the graph path).

Each call gets its ``ToolRuntime`` (the caller's state, context, store and stream writer, the
call's id and the plan step's config, so its run nests under the caller in traces), goes
through the planner's ``tool_middleware`` (``wrap_tool_call`` hooks, first outermost), and
gives back the tool's own return value (the plan needs the value, not its text). Each finished
call is written to the caller's custom stream (``stream_mode="custom"``) under ``"llassembly"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from llassembly.errors import CallNotRun, ToolExecutionError, UsageError
from llassembly.integration.graph import PlanRun
from llassembly.integration.messages import jsonable, result_text
from llassembly.integration.query import answered_value, arun_query, run_query
from llassembly.integration.record import KEY
from llassembly.integration.results import altered, decode_text, message_text
from llassembly.machine.emulator import ToolCall
from llassembly.machine.externs import Extern
from llassembly.machine.query import is_query
from llassembly.machine.values import short_repr

__all__ = ["STREAM_KEY", "ToolContext", "chain", "make_plan_run", "tool_runtime"]

STREAM_KEY = KEY
"""Key of the ``stream_mode="custom"`` event the graph path writes for each executed call."""


@dataclass(frozen=True)
class ToolContext:
    """What a plan's calls need from their caller (live objects, never in graph state).

    Attributes:
        externs: The tools the plan may call.
        state: The caller's graph state, given to tools as ``ToolRuntime.state``.
        runtime: The caller's LangGraph ``Runtime`` (context, store, stream writer) or ``None``.
        query_model: The chat model that answers the plan's queries (``CALL query_text``).
    """

    externs: Mapping[str, Extern]
    state: Any = None
    runtime: Any = None
    query_model: Any = None


def make_plan_run(tools: ToolContext, prefix: str, middleware: Sequence[Any]) -> PlanRun:
    """A :class:`PlanRun` that runs each call with its ``ToolRuntime``, through
    ``middleware``, and announces it on the caller's custom stream."""

    def prepare(call: ToolCall, config: RunnableConfig) -> tuple[Extern, dict[str, Any], str]:
        extern = tools.externs[call.tool]
        call_id = f"{prefix}{call.number}"
        args = dict(call.args)
        if extern.runtime_param is not None:
            args[extern.runtime_param] = tool_runtime(tools, call_id, config)
        return extern, args, call_id

    def execute(call: ToolCall, config: RunnableConfig) -> Any:
        if is_query(tools.externs[call.tool]):  # a model answers it, not a tool
            return run_query(_query_model(tools), call, f"{prefix}{call.number}", config)
        extern, args, call_id = prepare(call, config)
        if not middleware:
            return _invoke(extern, args, config)
        ran: list[bool] = []

        def inner(request: ToolCallRequest) -> ToolMessage:
            ran.append(True)
            return _carrying(_invoke(extern, _args_of(request, args), config), request)

        request = _request(extern, args, call_id, tools, config)
        outcome = chain(middleware, "wrap_tool_call", inner)(request)
        return _unwrap(outcome, call, extern, bool(ran))

    async def aexecute(call: ToolCall, config: RunnableConfig) -> Any:
        if is_query(tools.externs[call.tool]):
            return await arun_query(_query_model(tools), call, f"{prefix}{call.number}", config)
        extern, args, call_id = prepare(call, config)
        if not middleware:
            return await _ainvoke(extern, args, config)
        ran: list[bool] = []

        async def inner(request: ToolCallRequest) -> ToolMessage:
            ran.append(True)
            return _carrying(await _ainvoke(extern, _args_of(request, args), config), request)

        request = _request(extern, args, call_id, tools, config)
        outcome = await chain(middleware, "awrap_tool_call", inner)(request)
        return _unwrap(outcome, call, extern, bool(ran))

    announce = _announcer(tools, prefix)

    def announced(call: ToolCall, config: RunnableConfig) -> Any:
        try:
            result = execute(call, config)
        except Exception as exc:
            announce(call, None, exc)
            raise
        announce(call, result, None)
        return result

    async def aannounced(call: ToolCall, config: RunnableConfig) -> Any:
        try:
            result = await aexecute(call, config)
        except Exception as exc:
            announce(call, None, exc)
            raise
        announce(call, result, None)
        return result

    return PlanRun(announced, aannounced, prefix)


def _query_model(tools: ToolContext) -> Any:
    if tools.query_model is None:  # pragma: no cover - every driver gives one with queries on
        raise UsageError("the plan makes a query, but no query model was given")
    return tools.query_model


def _invoke(extern: Extern, args: dict[str, Any], config: RunnableConfig) -> Any:
    if extern.tool is None:
        return extern.call(args)
    return extern.tool.invoke(args, config)


async def _ainvoke(extern: Extern, args: dict[str, Any], config: RunnableConfig) -> Any:
    if extern.tool is None:
        return await extern.acall(args)
    return await extern.tool.ainvoke(args, config)


def _announcer(tools: ToolContext, prefix: str) -> Callable[[ToolCall, Any, Any], None]:
    """Writes each executed call, as it completes, to the caller's custom stream:
    ``{"llassembly": {"call": {...}, "result": text}}`` (``"error"`` instead of ``"result"``
    for a call that raised); nothing when the caller streams nothing."""
    writer = getattr(tools.runtime, "stream_writer", None)

    def announce(call: ToolCall, result: Any, error: BaseException | None) -> None:
        if writer is None:
            return
        event: dict[str, Any] = {
            "call": {
                "id": f"{prefix}{call.number}",
                "tool": call.tool,
                "args": jsonable(call.args),
                "line": call.line,
                "source": call.source,
                "number": call.number,
            }
        }
        if error is None:
            try:
                event["result"] = result_text(answered_value(result)[0])
            except ValueError:  # the plan reports what is wrong with it
                event["result"] = short_repr(result)[:200]
        else:
            event["error"] = str(error)
        writer({STREAM_KEY: event})

    return announce


def tool_runtime(tools: ToolContext, call_id: str, config: RunnableConfig) -> ToolRuntime[Any, Any]:
    """The ``ToolRuntime`` a tool gets, as the agent's own tool node would build it."""
    rt = tools.runtime
    return ToolRuntime(
        state=tools.state,
        context=getattr(rt, "context", None),
        config=config,
        stream_writer=getattr(rt, "stream_writer", None) or _no_stream,
        tool_call_id=call_id,
        store=getattr(rt, "store", None),
        tools=[e.tool for e in tools.externs.values() if e.tool is not None],
    )


def _no_stream(chunk: Any) -> None:
    """Stream writer used when the caller has none."""


def chain(middleware: Sequence[Any], hook: str, handler: Any) -> Any:
    """``handler`` wrapped by each middleware's ``hook`` (``"wrap_tool_call"`` or
    ``"awrap_tool_call"``), the first one outermost, as ``create_agent`` nests them."""
    for mw in reversed(middleware):
        handler = _bind(getattr(mw, hook), handler)
    return handler


def _bind(wrapper: Callable[[ToolCallRequest, Any], Any], handler: Any) -> Any:
    return lambda request: wrapper(request, handler)


def _request(
    extern: Extern,
    args: dict[str, Any],
    call_id: str,
    tools: ToolContext,
    config: RunnableConfig,
) -> ToolCallRequest:
    visible = {k: v for k, v in args.items() if k != extern.runtime_param}
    runtime = args.get(extern.runtime_param) if extern.runtime_param else None
    return ToolCallRequest(
        tool_call={"name": extern.name, "args": visible, "id": call_id, "type": "tool_call"},
        tool=extern.tool if isinstance(extern.tool, BaseTool) else None,
        state=tools.state,
        runtime=runtime or tool_runtime(tools, call_id, config),
    )


def _args_of(request: ToolCallRequest, original: dict[str, Any]) -> dict[str, Any]:
    """Arguments after middleware had its say (a wrapper may rewrite ``tool_call['args']``)."""
    return {**original, **request.tool_call.get("args", {})}


class _Carrying(ToolMessage):
    """A ``ToolMessage`` that still carries the tool's return value (only inside the chain)."""


def _carrying(result: Any, request: ToolCallRequest) -> ToolMessage:
    call = request.tool_call
    return _Carrying(
        content=result_text(result),
        artifact=result,
        tool_call_id=call["id"] or "",
        name=call["name"],
    )


def _unwrap(outcome: Any, call: ToolCall, extern: Extern, ran: bool) -> Any:
    """The plan's value from what the middleware chain returned (``ran``: the tool ran): the
    tool's own value unless a middleware altered its text (see
    :func:`~llassembly.integration.results.altered`), else the message's text read as the
    tool's declared type, as the agent path reads it (a middleware altered the result, or
    answered instead of the tool: the plan reads what it wrote)."""
    if isinstance(outcome, _Carrying):
        made = result_text(outcome.artifact)
        if outcome.content == made or not altered(made, message_text(outcome)):
            return outcome.artifact
    if isinstance(outcome, ToolMessage):
        if outcome.status == "error" and not ran:  # a person or a middleware decided
            raise CallNotRun(call.tool, outcome.text, line=call.line, source=call.source)
        if outcome.status == "error":
            raise ToolExecutionError(
                call.tool, RuntimeError(outcome.text), line=call.line, source=call.source
            )
        return decode_text(
            extern, message_text(outcome), {"line": call.line, "source": call.source}
        )
    if isinstance(outcome, Command):
        return outcome
    raise UsageError(
        f"a tool middleware returned {type(outcome).__name__} for {call.tool!r}; "
        "plans need a ToolMessage"
    )
