"""A plan's call, from the machine's request to the plan's values: the one tool path.

Every way a plan runs (the agent path, a plan graph) makes its calls here; the drivers only
decide *where* the tool runs: the agent's tool node gives the planner's ``wrap_tool_call`` its
handler for :func:`run_call`, a plan graph gives it :func:`invoke_tool`. :func:`outcome_of`
reads any plan call's ``ToolMessage`` back into what the machine takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain.tools import ToolRuntime
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel, RootModel
from pydantic_core import to_jsonable_python

from llassembly import compat
from llassembly.analysis.shapes import Shape, options_of, read_keys, shape_of
from llassembly.errors import (
    AsmRuntimeError,
    CallNotRun,
    ExecutionError,
    Failure,
    QueryFailed,
    ToolExecutionError,
    UsageError,
    clip,
    error_of,
    failure_of,
    plural,
    safe_text,
)
from llassembly.integration.record import KEY, tag_of
from llassembly.machine.emulator import Failed, adrive, drive, tool_error
from llassembly.machine.externs import Extern, label, short_repr
from llassembly.machine.state import ToolCall

ENDS_RUN: Final = "ends_run"
"""In a plan call's tag: its tool is ``return_direct`` (its result ends the run)."""
ADDED_BY_CALL: Final = "llassembly_added_by_call"
"""In ``response_metadata``: the id of the plan call whose tool added this message."""
logger = logging.getLogger("llassembly")
_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_SHOWN = 80  # characters of an undecodable result quoted in the error
_Result = ToolMessage | Command[Any] | list[ToolMessage | Command[Any]]


# -- the call as a message -----------------------------------------------------------------------


def call_id(prefix: str, number: int) -> str:
    """The tool-call id of the plan's call number ``number`` (the plan's ``prefix`` first)."""
    return f"{prefix}{number}"


def place(call: ToolCall, **extra: Any) -> dict[str, Any]:
    """The ``response_metadata`` of a plan call's messages: where the call is in the plan."""
    tag = {"kind": "call", "index": call.index, "line": call.line, "source": call.source}
    tag.update(extra)
    return {KEY: tag}


def call_request(calls: Sequence[ToolCall], prefix: str, *, query: bool = False) -> AIMessage:
    """The ``AIMessage`` carrying a plan's calls as tool calls (one, or a batch run at once;
    ``query``: a batch of queries); its id is the first call's, its metadata names the first
    call and, for a batch, lists every call under ``"batch"``."""
    ids = [call_id(prefix, c.number) for c in calls]
    meta = place(calls[0], kind="query") if query else place(calls[0])
    if len(calls) > 1:
        meta[KEY]["batch"] = [place(c)[KEY] for c in calls]
    tool_calls = [
        {"name": c.tool, "args": jsonable(c.args, as_read=True), "id": i, "type": "tool_call"}
        for c, i in zip(calls, ids, strict=True)
    ]
    return AIMessage(content="", tool_calls=tool_calls, response_metadata=meta, id=ids[0])


def jsonable(value: Any, as_read: bool = False) -> Any:
    """``value`` as JSON-ready data, as pydantic writes it as JSON (what a model calling the
    tool sends: a model or dataclass as an object, an enum member as its value, a set as an
    array, a time as ISO text); containers walked, anything it cannot write as its text.
    ``as_read``: a call's arguments, which the tool node validates again: a model is written
    with the keys and values it reads (not as it dumps itself: aliases, excluded fields,
    serializers), a secret as the text the plan holds."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    try:
        if hasattr(value, "get_secret_value"):  # a secret: the plan holds its text; the tool too
            return jsonable(value.get_secret_value(), as_read)
        if isinstance(value, BaseModel):
            value = _as_read(value) if as_read else value.model_dump()
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            return {safe_text(jsonable(k)): jsonable(v, as_read) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [jsonable(v, as_read) for v in value]
        return to_jsonable_python(value, by_alias=False, fallback=safe_text)
    except (ValueError, TypeError, AttributeError, RecursionError):  # (a failing serializer)
        return safe_text(value)


def _as_read(model: BaseModel) -> Any:
    """A model's fields by the keys it validates (:func:`~llassembly.analysis.shapes.read_keys`),
    and its other keys (``extra="allow"``); a ``RootModel``'s root value."""
    if isinstance(model, RootModel):
        return model.root
    read: dict[str, Any] = dict(model.__pydantic_extra__ or {})
    read.update((key, getattr(model, name)) for name, key in read_keys(type(model)).items())
    return read


def result_text(result: Any) -> str:
    """The text a value shows as in a ``ToolMessage`` (JSON for anything but text)."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(jsonable(result), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return short_repr(result, 2000)


def message_text(message: ToolMessage) -> str:
    """A ``ToolMessage``'s content as text."""
    return message.content if type(message.content) is str else str(message.text)


def _result(
    call: ToolCall, prefix: str, text: str = "", failure: Failure | None = None, **tag: Any
) -> ToolMessage:
    """A plan call's ``ToolMessage`` of ``text`` (or the error of ``failure``, its record in the
    tag), tagged with the call's place and ``tag``."""
    if failure is not None:
        text, tag = failure["message"], {"failure": dict(failure), **tag}
    return ToolMessage(
        content=text,
        tool_call_id=call_id(prefix, call.number),
        name=call.tool,
        status="success" if failure is None else "error",
        response_metadata=place(call, **tag),
    )


def query_message(
    call: ToolCall, prefix: str, attempts: int, *, value: Any = None, failure: Failure | None = None
) -> ToolMessage:
    """A query's answer (or why it failed) as its ``ToolMessage``, tagged as a query with the
    model calls it made."""
    return _result(call, prefix, result_text(value), failure, kind="query", attempts=attempts)


def as_message(extern: Extern, call: ToolCall, prefix: str, result: Any) -> ToolMessage:
    """What a call gave, as its ``ToolMessage``: the one the tool path made (a ``Command``'s
    own message for this call), or one made of a raw result (tagged with the plan's values
    when its text would read differently)."""
    cid = call_id(prefix, call.number)
    if _is_answer(result):
        found = (m for m in _carried(result) if isinstance(m, ToolMessage))
        result = next((m for m in found if m.tool_call_id == cid), "")
    if isinstance(result, ToolMessage):
        return result
    text = result_text(result)
    return _result(call, prefix, text, **_value_tag(extern, result, text, call))


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _is_answer(value: Any) -> bool:
    """Whether a tool's value is its answer as the agent's tool node takes one: a ``Command``,
    or a list of ``Command``s and ``ToolMessage``s."""
    items = value if isinstance(value, list) and value else [value]
    return isinstance(value, Command | list) and all(
        isinstance(i, ToolMessage | Command) for i in items
    )


def _carried(result: Any) -> list[Any]:
    """The messages a tool's result carries: itself, a ``Command``'s update's, or those of each
    item of a list of them."""
    if isinstance(result, list):
        return [m for item in result for m in _carried(item)]
    if isinstance(result, Command):
        return _listed(result.update.get("messages", []) if isinstance(result.update, dict) else [])
    return [result]


# -- running a call ------------------------------------------------------------------------------


@dataclass
class CallContext:
    """What a plan's calls need from their driver (live objects, never in graph state).

    Attributes:
        planner: Its options' ``tool_middleware``, its tools' recording copies and direct functions.
        externs: The tools the plan may call.
        prefix: The plan's call-id prefix.
        state: The caller's graph state, given to tools as ``ToolRuntime.state``.
        runtime: The caller's LangGraph ``Runtime`` (context, store, stream writer) or ``None``.
        query_model: The chat model that answers the plan's queries.
        errors: The live exceptions of failed calls, by call id (to raise them as they are).
        hand_off: A plan graph stops before calls that end the run, for the agent's tool node.
    """

    planner: Any  # a Planner (planner.py imports this module)
    externs: Mapping[str, Extern]
    prefix: str = ""
    state: Any = None
    runtime: Any = None
    query_model: Any = None
    errors: dict[str, ExecutionError] = field(default_factory=dict)
    hand_off: bool = False
    # Worked out once per run: whether anything observes it (callback handlers, tracing: a
    # run's nodes inherit the handlers of the config it started with), the tools a
    # ToolRuntime lists.
    observed: bool = True

    @functools.cached_property
    def tools(self) -> list[BaseTool]:
        """The LangChain tools among :attr:`externs` (as a ``ToolRuntime`` lists them)."""
        return [e.tool for e in self.externs.values() if e.tool is not None]

    @functools.cached_property
    def steps(self) -> tuple[Callable[[Any, Any, BaseTool], Any], Callable[[Any, Any], Any]]:
        """:func:`llassembly.compat.tool_node_steps` for :attr:`tools`."""
        return compat.tool_node_steps(self.tools)


def run_call(
    ctx: CallContext,
    call: ToolCall,
    request: ToolCallRequest,
    handler: Callable[[ToolCallRequest], Any],
    asynchronous: bool = False,
) -> Any:
    """Run one plan call through the planner's ``tool_middleware`` and ``handler`` (where it
    runs; awaitable when ``asynchronous``); return its result tagged with the call's place,
    whether the tool ran and, when its text would read differently, the values the plan gets.
    A tool's exception becomes the call's failure (an error ``ToolMessage``), so the plan's
    ``on_tool_error`` decides."""
    hook = "awrap_tool_call" if asynchronous else "wrap_tool_call"
    # Each middleware's hook wraps the handler, the first one outermost (as create_agent nests).
    for mw in reversed(ctx.planner.options.tool_middleware):
        handler = _bind(getattr(mw, hook), handler)
    return (adrive if asynchronous else drive)(_running(ctx, call, request), handler)


def _running(
    ctx: CallContext, call: ToolCall, request: ToolCallRequest
) -> Generator[ToolCallRequest, _Result, _Result]:
    """A call's life, sans-IO: yields the request (with the recording copy of its tool), takes
    the chained handler's result, noting what the tool did (interrupts pass: see
    :func:`~llassembly.machine.emulator.drive`), and returns it tagged as :func:`run_call`
    says. A ``return_direct`` tool's result is marked: the run ends with it, and the next run
    must not take the plan up again. Messages a ``Command`` adds beside the result are marked
    as the call's, so the next step knows they belong to this run; one that adds no message of
    the call gets one of no text, so every path reads the same answer and the agent's history
    answers every call; so do those of a list of them (as the agent's tool node takes it). A
    result of another type is the call's failure."""
    noted, tool, extern = compat.Recorded(), request.tool, ctx.externs.get(call.tool)

    def _refusal(exc: BaseException) -> Any:  # the tool's schema refused the arguments
        if exc is not noted.refused or extern is None:
            return exc
        return extern.refused_by_schema(exc, call.args, line=call.line, source=call.source)

    if tool is not None and not compat.is_recording(tool):  # (a plan graph's request has the copy)
        request = request.override(tool=ctx.planner.recording_tool_of(tool))
    ends = {ENDS_RUN: True} if tool is not None and tool.return_direct else {}
    try:
        with compat.recording(noted):
            result = yield request
        if not isinstance(result, ToolMessage) and not _is_answer(result):
            raise UsageError(  # the call's failure, as a middleware's exception is
                f"the call of {call.tool!r} gave a {type(result).__name__}, where a plan takes a "
                "ToolMessage, a Command or a list of them (from the tool or a tool middleware)"
            )
        compat.refuse_other_answer(result, str(request.tool_call["id"]))
    except Exception as exc:
        if compat.invalid_resume(exc) or (isinstance(exc, NotImplementedError) and not noted.ran):
            raise  # an answer an interrupt refused, a middleware without the hook this run
            # needs: LangChain fails the run on either
        # The call's failure (its live error kept), but for LangChain failing to write what
        # the tool returned (an integer too long to print): the tool gave the plan that value,
        # read as any result is. (A middleware's error after the tool, a guard's, is a failure.)
        if noted.unwritten is exc and extern is not None:
            message = as_message(extern, call, ctx.prefix, extern.result_of(noted.value))
        else:
            message = raised_message(ctx.errors, call, ctx.prefix, _refusal(exc))
        message.response_metadata[KEY].update(ends)  # create_agent ends its run on it too
        return message
    extra: dict[str, Any] = ends if noted.ran else {"ran": False, **ends}
    if noted.refused is not None and isinstance(result, ToolMessage) and result.status == "error":
        # (the tool node's own message for it, which does not say why: the failure does)
        error = ctx.errors[call_id(ctx.prefix, call.number)] = _refusal(noted.refused)
        extra["failure"] = dict(failure_of(error))
    cid = str(request.tool_call.get("id"))

    def tagged(message: ToolMessage) -> ToolMessage:
        more = dict(extra)
        if _as_made(message, noted) and extern is not None and message.status != "error":
            value = extern.result_of(noted.value)
            more.update(_value_tag(extern, value, message_text(message), call))
        # The tool node built this message for this call: its metadata is set, not copied.
        message.response_metadata = {**message.response_metadata, **place(call, **more)}
        return message

    if isinstance(result, ToolMessage):
        return tagged(result)
    if isinstance(result, Command) and (result.graph or type(result.update) is not dict):
        return result
    answered = clears = False

    def marked(m: BaseMessage) -> BaseMessage:  # the call's answer, or a message beside it
        nonlocal answered
        if isinstance(m, ToolMessage) and m.tool_call_id == cid:
            answered = True
            return tagged(m)
        kept = {k: v for k, v in m.response_metadata.items() if k != KEY}  # (a forged tag)
        return m.model_copy(update={"response_metadata": {**kept, ADDED_BY_CALL: cid}})

    out: list[Any] = []
    for item in _listed(result):
        if isinstance(item, ToolMessage):
            item = marked(item)
        elif item.graph is None and isinstance(update := item.update, dict):
            listed = convert_to_messages(_listed(update.get("messages", [])))  # dicts too
            clears |= listed == [RemoveMessage(id=REMOVE_ALL_MESSAGES)]  # (no answer asked)
            update = {**update, "messages": [marked(m) for m in listed]}
            item = Command(update=update, resume=item.resume, goto=item.goto)
        out.append(item)
    if not answered and not clears and extern is not None:  # its answer is no text
        empty = as_message(extern, call, ctx.prefix, "")
        empty.response_metadata[KEY].update(extra)
        (out if isinstance(result, list) else out[0].update["messages"]).append(empty)
    return out if isinstance(result, list) else out[0]


def tool_request(ctx: CallContext, call: ToolCall, config: RunnableConfig) -> ToolCallRequest:
    """The request of a plan call that runs in a plan graph, as the agent's tool node would
    build it: the tool, its ``ToolRuntime`` (the caller's state, context, store and stream
    writer, the call's id and config)."""
    tool, cid, rt = ctx.externs[call.tool].tool, call_id(ctx.prefix, call.number), ctx.runtime
    runtime = ToolRuntime(
        state=ctx.state,
        context=getattr(rt, "context", None),
        config=config,
        stream_writer=getattr(rt, "stream_writer", None) or (lambda chunk: None),
        tool_call_id=cid,
        store=getattr(rt, "store", None),
        tools=ctx.tools,
        execution_info=getattr(rt, "execution_info", None),
        server_info=getattr(rt, "server_info", None),
    )
    return ToolCallRequest(
        tool_call={"name": call.tool, "args": dict(call.args), "id": cid, "type": "tool_call"},
        tool=ctx.planner.recording_tool_of(tool) if tool is not None else None,
        state=ctx.state,
        runtime=runtime,
    )


def invoke_tool(
    ctx: CallContext, call: ToolCall, config: RunnableConfig, *, asynchronous: bool = False
) -> Callable[[ToolCallRequest], Any]:
    """The handler that runs a plan graph's ``call`` (awaitable when ``asynchronous``): the
    tool invoked with the tool call, what the agent's tool node injects added, as that node
    invokes it (its function called directly when nothing could observe the difference: see
    :func:`llassembly.compat.direct_function`; and when the arguments are the plan's, which the
    library checked, and need no validation to become what the function takes)."""

    inject, normalize = ctx.steps

    def done(call: dict[str, Any], output: Any, direct: bool) -> Any:
        if direct:  # written as BaseTool.run writes it, noted as the recording copy notes it
            output = compat.tool_message(output, call["id"], call["name"])
        return normalize(output, call)

    async def awaited(call: dict[str, Any], output: Awaitable[Any], direct: bool) -> Any:
        return done(call, await output, direct)

    def invoke(request: ToolCallRequest) -> Any:
        tool = request.tool
        if tool is None:  # pragma: no cover - a plan graph runs only the tools it was given
            raise UsageError(f"tool {request.tool_call['name']!r} is not a LangChain tool")
        sent = {**inject(request.tool_call, request.runtime, tool), "type": "tool_call"}
        extern = ctx.externs.get(sent["name"])
        given = extern is None or set(extern.injected) <= set(sent["args"])  # invoke adds the rest
        plans = request.tool_call["args"] == call.args  # (not a middleware's or a person's)
        taken = plans and given and not (extern and extern.unvalidated)  # as the function takes
        direct = ctx.planner.direct_of(tool, asynchronous) if taken and not ctx.observed else None
        if direct is None:
            output = (tool.ainvoke if asynchronous else tool.invoke)(sent, config)
        else:
            output = direct(sent)
        return (awaited if asynchronous else done)(sent, output, direct is not None)

    return invoke


def check_tool_middleware(middleware: Sequence[Any], asynchronous: bool) -> None:
    """Raise ``NotImplementedError``, as ``create_agent`` raises it at the first tool call, when
    a ``tool_middleware`` lacks the hook this run needs (``awrap_tool_call`` under ``ainvoke``,
    ``wrap_tool_call`` under ``invoke``): before anything runs."""
    hook = "awrap_tool_call" if asynchronous else "wrap_tool_call"
    if lacking := [type(m).__name__ for m in middleware if not compat.defines_hook(m, hook)]:
        run = "ainvoke" if asynchronous else "invoke"
        raise NotImplementedError(
            f"tool_middleware {', '.join(lacking)} has no {hook}, which a run with {run} needs: "
            "define it, or run the other way (nothing has run)"
        )


def _bind(wrapper: Callable[[ToolCallRequest, Any], Any], handler: Any) -> Any:
    return lambda request: wrapper(request, handler)


def ends_run(messages: Sequence[BaseMessage]) -> bool:
    """Whether ``messages`` end with plan-call results that end the run, as ``create_agent``
    ends it after its tool node: each marked :data:`ENDS_RUN` (its tool is ``return_direct``)."""
    results = list(itertools.takewhile(lambda m: isinstance(m, ToolMessage), reversed(messages)))
    return bool(results) and all(tag_of(m).get(ENDS_RUN) for m in results)


def raised_message(
    errors: dict[str, ExecutionError], call: ToolCall, prefix: str, exc: Exception
) -> ToolMessage:
    """The error ``ToolMessage`` of a plan call whose tool (or query) raised ``exc``, its live
    error kept in ``errors`` by call id (to raise it as it is)."""
    errors[call_id(prefix, call.number)] = error = tool_error(call, exc)
    if isinstance(error, QueryFailed):
        return query_message(call, prefix, error.attempts, failure=failure_of(error))
    return _result(call, prefix, failure=failure_of(error))


def _as_made(message: ToolMessage, noted: compat.Recorded) -> bool:
    """Whether ``message`` holds the result as the tool made it, so the plan reads the tool's
    own value. A ``wrap_tool_call`` middleware that altered the content after the tool (a
    redaction, a correction) decides what the agent sees, and so what the plan reads: its
    text. One that only adds lines or blocks before or after the result, which stands whole
    (``HumanInTheLoopMiddleware``'s notice of an edited call), leaves the plan the tool's own
    value."""
    if not noted.returned or _is_answer(noted.value):
        return False  # the tool's value is its answer: the message
    content, made = message.content, noted.content
    if made is None or content == made:
        return True
    if isinstance(content, str):  # the tool's text whole, a line added before or after it
        own = made if isinstance(made, str) else message_text(ToolMessage(made, tool_call_id=""))
        if not own:  # (HumanInTheLoopMiddleware puts its notice alone before no text)
            return compat.edit_notice(content)
        return content.startswith(f"{own}\n") or content.endswith(f"\n{own}")
    blocks = made if isinstance(made, list) else [made]  # its blocks, one added before or after
    return blocks in (content[: len(blocks)], content[len(content) - len(blocks) :])


def _value_tag(extern: Extern, result: Any, text: str, call: ToolCall) -> dict[str, Any]:
    """What a result's message records beside its text: nothing when the text reads back as
    the values the plan gets from ``result`` (the tool's own return value); those values
    when it would not; the failure when the value cannot be held."""
    try:
        values = extern.to_values(result, line=call.line, source=call.source)
    except ExecutionError as error:
        return {"failure": dict(failure_of(error))}
    try:
        read = extern.to_values(decode_text(extern, text, call))
    except ExecutionError:
        read = None
    if read is not None and read == values and list(map(type, read)) == list(map(type, values)):
        return {}
    return {"values": list(values)}


# -- reading a result back -----------------------------------------------------------------------


def outcome_of(extern: Extern | None, message: ToolMessage, call: ToolCall) -> Any:
    """What a plan call's ``ToolMessage`` gives the plan: the tool's value (as the machine's
    ``complete_batch`` takes it) or :class:`~llassembly.machine.emulator.Failed`.

    The one rule for whether the call ran: an error message that did not pass the planner's tool
    path (no tag: a person or a middleware before it answered instead) or that says the tool did not
    run is a decision (:class:`~llassembly.errors.CallNotRun`); any other is the tool's failure.
    """
    tag, recorded = tag_of(message), failure_in(message)
    if recorded is not None:
        outcome: Any = Failed(error_of(recorded))
    elif message.status == "error":
        text, where = message_text(message), dict[str, Any](line=call.line, source=call.source)
        if not tag or tag.get("ran") is False:  # a person or a middleware answered instead
            outcome = Failed(CallNotRun(call.tool, text, **where))
        else:
            # (what the tool answered as an error message: a ToolException, as Extern.call says)
            outcome = Failed(ToolExecutionError(call.tool, ToolException(text), **where))
    elif extern is None:
        gone = f"tool {call.tool!r} is no longer offered by the agent"
        outcome = Failed(AsmRuntimeError(gone, line=call.line, source=call.source, words=gone))
    elif "values" in tag:
        values, n = list(tag["values"]), extern.n_results
        outcome = None if n == 0 else values[0] if n == 1 else values
    else:
        try:
            outcome = decode_text(extern, message_text(message), call)
        except ExecutionError as error:
            outcome = Failed(error)
    if logger.isEnabledFor(logging.DEBUG):
        shown = outcome.error if isinstance(outcome, Failed) else short_repr(outcome, 120)
        args = short_repr(call.args, 200)
        logger.debug("line %d: %s(%s) -> %s", call.line, call.tool, args, shown)
    return outcome


def failure_in(message: ToolMessage) -> Mapping[str, Any] | None:
    """The failure record a plan call's message carries in its tag (which only the tool path
    writes), if any; never one in what a tool returned (its content, its artifact)."""
    found = tag_of(message).get("failure")
    return found if isinstance(found, Mapping) else None


def decode_text(extern: Extern, text: str, call: ToolCall) -> Any:
    """What the plan gets from a result's text, read by the tool's declared result type (the
    text as it is for text, numbers as JSON numbers, a ``tuple[...]`` as a JSON array).

    Raises:
        AsmRuntimeError: The text cannot be read as the declared type (names the tool and line).
    """
    n = extern.n_results
    if n == 0:
        return None
    shape = shape_of(extern.result_types[0]) if n == 1 and extern.result_types else None
    try:
        if n == 1 and not extern.unpacks:
            return _decode_one(shape, text)
        data = _json(text)
        if isinstance(data, list) and len(data) == n:
            return data
    except ValueError:
        # An MCP server declaring a plain result as {"result": ...} (FastMCP) sends the bare
        # value as the text: that text is the field's value.
        if extern.structured and shape is not None and [k for k, _ in shape.fields] == ["result"]:
            with contextlib.suppress(ValueError):
                return {"result": _decode_one(shape.fields[0][1], text)}
    what = label(shape) if shape else "any"
    if n > 1 or extern.unpacks:
        what = f"{plural(n, 'value')} (a JSON array)"
    shown = clip(text, _SHOWN)
    raise AsmRuntimeError(
        f"tool {extern.name!r} is declared to return {what}, but its result {shown!r} cannot "
        "be read as one",
        line=call.line,
        source=call.source,
        words=f"the result of tool {extern.name!r} cannot be read as {what}",
    )


def _decode_one(shape: Shape | None, text: str) -> Any:
    """One declared value from its ``ToolMessage`` text; ``ValueError`` when it is not one.

    What the plan gets is what the tool returned: numbers are read as JSON numbers (a
    ``-> float`` tool returning ``3`` gives ``3``), ``null`` is ``None`` (held as ``NONE``),
    text stays as it was; undeclared results are JSON when they read as such, but plain text
    that happens to be a JSON string stays text.
    """
    options = () if shape is None else options_of(shape)
    kinds = {o.kind for o in options if o.kind != "none"}
    plain = bool(kinds) and not any(o.choices for o in options)  # (no Literal, no enum)
    if plain and kinds <= {"text", "decimal"}:
        return text
    if plain and kinds <= {"int", "float", "number"}:
        stripped = text.strip()
        if any(o.name == "bool" for o in options) and stripped.lower() in ("true", "false"):
            return stripped.lower() == "true"
        # A JSON integer (what the tool node writes for an int) is read without the decoder.
        number = int(stripped) if _JSON_INT.fullmatch(stripped) else _json(stripped)
        if number is not None and type(number) not in (int, float, bool):
            raise ValueError(text)
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError(text)
        return number
    try:
        data = _json(text)
    except ValueError:
        if plain and "any" not in kinds:
            raise
        return text
    if isinstance(data, str) and not kinds:
        return text  # a tool's plain text that happens to be valid JSON stays as it was
    if isinstance(data, float) and not math.isfinite(data):
        raise ValueError(text)
    return data


def _json(text: str) -> Any:
    """``json.loads`` whose failures, nesting too deep included, are ``ValueError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def plan_call_messages(
    messages: Sequence[BaseMessage], prefixes: Sequence[str]
) -> list[AnyMessage]:
    """The messages recording a turn's plan calls (their call ids start with a plan's prefix):
    each call ``AIMessage`` and each ``ToolMessage``, in order."""
    starts = tuple(prefixes)  # (no prefix starts any id)
    return [
        m
        for m in messages
        if (isinstance(m, ToolMessage) and m.tool_call_id.startswith(starts))
        or (
            isinstance(m, AIMessage)
            and bool(m.tool_calls)
            and all((c.get("id") or "").startswith(starts) for c in m.tool_calls)
        )
    ]


def without_plan_calls(messages: Sequence[AnyMessage], prefixes: Sequence[str]) -> list[AnyMessage]:
    """``messages`` less those recording the turn's plan calls (``infer_tools_messages=False``)."""
    dropped = {id(m) for m in plan_call_messages(messages, prefixes)}
    return [m for m in messages if id(m) not in dropped]
