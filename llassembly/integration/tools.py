"""Executing a plan's tool calls the way the agent's own tool node would.

Each call gets its ``ToolRuntime`` (the caller's state, context, store and stream writer, the
call's id and the plan step's config, so its run nests under the agent in traces), goes through
the ``wrap_tool_call`` middleware given to the planner, and returns the tool's *raw* result (the
plan needs the value, not its text).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from langchain.tools import ToolRuntime
from langchain_core.callbacks import CallbackManager
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from llassembly.errors import (
    ExecutionError,
    ToolExecutionError,
    UsageError,
)
from llassembly.integration.graph import PlanRun
from llassembly.integration.messages import (
    jsonable,
    result_text,
)
from llassembly.machine.emulator import ToolCall
from llassembly.machine.externs import Extern
from llassembly.machine.values import short_repr

__all__ = [
    "STREAM_KEY",
    "AModelCall",
    "ModelCall",
    "TurnRun",
    "chain",
    "make_plan_run",
    "tool_runtime",
    "unobserved",
]


ModelCall: TypeAlias = Callable[[list[BaseMessage]], AIMessage]
AModelCall: TypeAlias = Callable[[list[BaseMessage]], Awaitable[AIMessage]]


@dataclass
class TurnRun:
    """What one turn needs from its caller (kept out of graph state; not serialised).

    Attributes:
        externs: The tools the plan may call.
        system_prompt: The planner's system prompt (already filled in).
        call_model: Sends a conversation (without system message) to the model.
        acall_model: Async ``call_model``.
        agent_state: The caller's graph state, given to tools as ``ToolRuntime.state``.
        runtime: The caller's LangGraph ``Runtime`` (context, store, stream writer) or ``None``.
        error: The live exception of the last failed plan (for ``on_tool_error="raise"``).
        context: The caller's own system prompt: the system message of the final answer call
            (``final_answer="model"``).
    """

    externs: Mapping[str, Extern]
    system_prompt: str
    call_model: ModelCall | None = None
    acall_model: AModelCall | None = None
    agent_state: Any = None
    runtime: Any = None
    error: ExecutionError | None = field(default=None, repr=False)
    context: str = ""


def make_plan_run(
    run: TurnRun, prefix: str, middleware: Sequence[Any], record_messages: bool
) -> PlanRun:
    """A :class:`PlanRun` that executes calls with ``ToolRuntime`` and ``wrap_tool_call``
    middleware, calling a tool's function directly when nothing observes the call."""
    seen: dict[int, tuple[RunnableConfig, bool]] = {}  # which configs nobody observes

    def prepare(call: ToolCall, config: RunnableConfig) -> tuple[Extern, dict[str, Any], str]:
        extern = run.externs[call.tool]
        call_id = f"{prefix}{call.number}"
        args = dict(call.args)
        if extern.runtime_param is not None:
            args[extern.runtime_param] = tool_runtime(run, call_id, config)
        return extern, args, call_id

    def invoke(extern: Extern, args: dict[str, Any], config: RunnableConfig) -> Any:
        tool = extern.tool
        if tool is None:
            return extern.call(args)
        direct = _direct_function(tool, extern)
        if direct is not None and direct[0] is not None and unobserved(config, seen):
            return direct[0](**args)
        return tool.invoke(args, config)

    async def ainvoke(extern: Extern, args: dict[str, Any], config: RunnableConfig) -> Any:
        tool = extern.tool
        if tool is None:
            return await extern.acall(args)
        direct = _direct_function(tool, extern)
        if direct is not None and direct[1] is not None and unobserved(config, seen):
            return await direct[1](**args)
        return await tool.ainvoke(args, config)

    def execute(call: ToolCall, config: RunnableConfig) -> Any:
        extern, args, call_id = prepare(call, config)
        if not middleware:
            return invoke(extern, args, config)
        request = _request(extern, args, call_id, run, config)

        def inner(req: ToolCallRequest) -> ToolMessage | Command[Any]:
            return _wrap_result(invoke(extern, _args_of(req, args), config), req)

        handler: Callable[[ToolCallRequest], Any] = chain(middleware, "wrap_tool_call", inner)
        return _unwrap(handler(request), call)

    async def aexecute(call: ToolCall, config: RunnableConfig) -> Any:
        extern, args, call_id = prepare(call, config)
        if not middleware:
            return await ainvoke(extern, args, config)
        request = _request(extern, args, call_id, run, config)

        async def inner(req: ToolCallRequest) -> ToolMessage | Command[Any]:
            return _wrap_result(await ainvoke(extern, _args_of(req, args), config), req)

        handler: Callable[[ToolCallRequest], Awaitable[Any]] = chain(
            middleware, "awrap_tool_call", inner
        )
        return _unwrap(await handler(request), call)

    announce = _announcer(run, prefix)
    if announce is None:
        return PlanRun(execute, aexecute, prefix, record_messages)

    def streamed(call: ToolCall, config: RunnableConfig) -> Any:
        try:
            result = execute(call, config)
        except Exception as exc:
            announce(call, None, exc)
            raise
        announce(call, result, None)
        return result

    async def astreamed(call: ToolCall, config: RunnableConfig) -> Any:
        try:
            result = await aexecute(call, config)
        except Exception as exc:
            announce(call, None, exc)
            raise
        announce(call, result, None)
        return result

    return PlanRun(streamed, astreamed, prefix, record_messages)


STREAM_KEY = "llassembly"
"""Key of the ``stream_mode="custom"`` event the graph path writes for each executed call."""


def _announcer(
    run: TurnRun, prefix: str
) -> Callable[[ToolCall, Any, BaseException | None], None] | None:
    """Writes each executed call, as it completes, to the caller's custom stream:
    ``{"llassembly": {"call": {...}, "result": text}}`` (``"error"`` instead of ``"result"``
    for a call that raised). ``None`` when the caller streams nothing."""
    writer = getattr(run.runtime, "stream_writer", None)
    if writer is None:
        return None

    def announce(call: ToolCall, result: Any, error: BaseException | None) -> None:
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
                event["result"] = result_text(result)
            except (ValueError, RecursionError):  # the plan reports what is wrong with it
                event["result"] = short_repr(result)[:200]
        else:
            event["error"] = str(error)
        writer({STREAM_KEY: event})

    return announce


def tool_runtime(run: TurnRun, call_id: str, config: RunnableConfig) -> ToolRuntime[Any, Any]:
    """The ``ToolRuntime`` a tool gets, as the agent's own tool node would build it."""
    rt = run.runtime
    return ToolRuntime(
        state=run.agent_state,
        context=getattr(rt, "context", None),
        config=config,
        stream_writer=getattr(rt, "stream_writer", None) or _no_stream,
        tool_call_id=call_id,
        store=getattr(rt, "store", None),
        tools=[e.tool for e in run.externs.values() if e.tool is not None],
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
    extern: Extern, args: dict[str, Any], call_id: str, run: TurnRun, config: RunnableConfig
) -> ToolCallRequest:
    visible = {k: v for k, v in args.items() if k != extern.runtime_param}
    runtime = args.get(extern.runtime_param) if extern.runtime_param else None
    return ToolCallRequest(
        tool_call={"name": extern.name, "args": visible, "id": call_id, "type": "tool_call"},
        tool=extern.tool if isinstance(extern.tool, BaseTool) else None,
        state=run.agent_state,
        runtime=runtime or tool_runtime(run, call_id, config),
    )


def _args_of(request: ToolCallRequest, original: dict[str, Any]) -> dict[str, Any]:
    """Arguments after middleware had its say (a wrapper may rewrite ``tool_call['args']``)."""
    return {**original, **request.tool_call.get("args", {})}


class _Raw(ToolMessage):
    """A ToolMessage that still carries the tool's raw result (only inside the middleware chain)."""


def _wrap_result(result: Any, request: ToolCallRequest) -> ToolMessage:

    call = request.tool_call
    return _Raw(
        content=result_text(result),
        artifact=result,
        tool_call_id=call["id"] or "",
        name=call["name"],
    )


def _unwrap(outcome: Any, call: ToolCall) -> Any:
    if isinstance(outcome, _Raw):
        return outcome.artifact
    if isinstance(outcome, ToolMessage):
        if outcome.status == "error":
            raise ToolExecutionError(
                call.tool, RuntimeError(outcome.text), line=call.line, source=call.source
            )
        return outcome.content
    raise UsageError(
        f"a tool middleware returned {type(outcome).__name__} for {call.tool!r}; "
        "plans need a ToolMessage"
    )


# -- calling a tool's function directly when nothing observes the call ---------------------------
#
# ``BaseTool.invoke`` costs about as much as a LangGraph superstep: it builds a callback manager,
# re-inspects the function's signature and re-validates arguments. When no callback handler is
# attached (no tracer, no streaming of events) and the tool is a plain ``StructuredTool`` whose
# errors are not turned into messages, calling its function with the already converted and
# validated arguments is observably the same, and much cheaper. Any handler (LangSmith tracing,
# ``stream_mode="messages"``, a user callback) takes the full ``invoke`` path, so traces nest.

# Keyed by id(tool); the entry keeps the tool alive, so an id is never reused by another tool
# while its entry exists (a stale id would call another tool's function).
_DIRECT: dict[int, tuple[BaseTool, tuple[Any, Any] | None]] = {}
_NOT_DIRECT_PARAMS = frozenset({"callbacks", "run_manager", "config"})


def _direct_function(tool: BaseTool, extern: Extern) -> tuple[Any, Any] | None:
    """``(func, coroutine)`` of a tool that may be called directly, else ``None`` (cached)."""
    key = id(tool)
    cached = _DIRECT.get(key)
    if cached is not None and cached[0] is tool:
        return cached[1]

    found: tuple[Any, Any] | None = None
    if (
        type(tool) is StructuredTool
        and not tool.handle_tool_error
        and not tool.handle_validation_error
        and tool.response_format == "content"
        and set(extern.injected) <= {extern.runtime_param}
    ):
        functions = [f for f in (tool.func, tool.coroutine) if f is not None]
        if all(_NOT_DIRECT_PARAMS.isdisjoint(inspect.signature(f).parameters) for f in functions):
            found = (tool.func, tool.coroutine)
    if len(_DIRECT) > 4096:
        _DIRECT.clear()
    _DIRECT[key] = (tool, found)
    return found


def unobserved(
    config: RunnableConfig, seen: dict[int, tuple[RunnableConfig, bool]] | None = None
) -> bool:
    """Whether a tool run under ``config`` would have no callback handler at all.

    ``seen`` memoises the answer per config object for the lifetime of one plan run (a node's
    config does not change while it runs; the dict keeps the config alive, so ids stay unique).
    """

    if seen is not None:
        cached = seen.get(id(config))
        if cached is not None and cached[0] is config:
            return cached[1]
    quiet = not CallbackManager.configure(inheritable_callbacks=config.get("callbacks")).handlers
    if seen is not None:
        seen[id(config)] = (config, quiet)
    return quiet
