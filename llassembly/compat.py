"""Every assumption the library makes about LangChain and LangGraph beyond their documented API.

Each one is named here, once, in a function or constant that says what it assumes, and pinned by
``tests/integration/test_compat.py`` against the installed versions, so an upgrade that changes
one fails that test rather than a plan in production. Nothing here imports LangChain or LangGraph
at import time (the engine loads neither); each function imports what it needs when it is called.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from llassembly.errors import UsageError, first_line

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


MODEL_CALL_COUNTERS: Final = ("thread_model_call_count", "run_model_call_count")
"""The agent-state keys of ``ModelCallLimitMiddleware``'s counters (thread and run), which the
planner corrects to count real model calls (``integration.middleware.counter_updates``)."""


def defines_hook(middleware: Any, hook: str) -> bool:
    """Whether ``middleware`` defines the tool-call ``hook`` (``wrap_tool_call``,
    ``awrap_tool_call``) itself, not ``AgentMiddleware``'s, which raises ``NotImplementedError``:
    what ``create_agent`` asks to chain a middleware around a tool call, and to run it."""
    from langchain.agents.middleware import AgentMiddleware

    return getattr(type(middleware), hook, None) not in (None, getattr(AgentMiddleware, hook))


def private_state() -> Any:
    """LangChain's ``PrivateStateAttr``: annotates an agent-state key that stays out of the
    agent's input and output schemas."""
    from langchain.agents.middleware.types import PrivateStateAttr

    return PrivateStateAttr


def edit_notice(text: str) -> bool:
    """Whether ``text`` is ``HumanInTheLoopMiddleware``'s notice of a call a reviewer edited
    (in its default words), which it puts before the call's result."""
    from langchain.agents.middleware import human_in_the_loop

    notice = getattr(human_in_the_loop, "_EDIT_NOTICE", None)
    return isinstance(notice, str) and text.startswith(notice)


def bubbling_errors() -> tuple[type[BaseException], ...]:
    """LangGraph's ``GraphBubbleUp`` (interrupts, parent commands) once ``langgraph.errors``
    is loaded, else nothing (no such exception can exist before)."""
    errors = sys.modules.get("langgraph.errors")
    kind = getattr(errors, "GraphBubbleUp", None)
    return (kind,) if isinstance(kind, type) and issubclass(kind, BaseException) else ()


def invalid_resume(error: BaseException) -> bool:
    """Whether ``error`` is LangGraph's for a resume value an ``interrupt``'s
    ``response_schema`` refused: no failure of the tool, it fails the run, so that the
    interrupt can be answered again (as LangGraph's tool node lets it)."""
    check = getattr(sys.modules.get("langgraph.errors"), "is_invalid_resume", None)
    return callable(check) and check(error) is True


@dataclass
class Recorded:
    """What a :func:`recording_tool` saw during one call: whether the tool's code ran, what
    it returned (a ``(content, artifact)`` pair, for a ``content_and_artifact`` tool), the
    content of the ``ToolMessage`` the tool made of it (``None`` when it made none) and the
    error LangChain raised making it (``unwritten``: an integer too long to print), so a caller
    can tell whether a ``wrap_tool_call`` middleware rewrote the result after the tool, and
    that error from a middleware's; ``refused``: the error of the tool's own ``args_schema``
    refusing the arguments before its code ran. An attempt (a retry) starts over, but for
    ``ran``."""

    ran: bool = False
    returned: bool = False
    value: Any = None
    content: Any = None
    unwritten: BaseException | None = None
    refused: BaseException | None = None


_RECORDING: ContextVar[Recorded | None] = ContextVar("llassembly_recording", default=None)
_RECORDING_MARK: Final = "_llassembly_recording"


def is_recording(tool: Any) -> bool:
    """Whether ``tool`` is a :func:`recording_tool` copy."""
    return bool(getattr(tool, _RECORDING_MARK, False))


def _current() -> Recorded:
    """The record of the :func:`recording` around this call (one nobody reads outside one)."""
    return _RECORDING.get() or Recorded()


@contextmanager
def recording(record: Recorded) -> Iterator[Recorded]:
    """Within this block, a :func:`recording_tool` notes its call in ``record`` (the block
    and the tool's code run in the same context: the agent's tool node runs a call's
    ``wrap_tool_call`` chain and the tool on one thread, or in one task)."""
    token = _RECORDING.set(record)
    try:
        yield record
    finally:
        _RECORDING.reset(token)


def recording_tool(tool: BaseTool) -> BaseTool:
    """A copy of ``tool`` that notes, in the :func:`recording` around its call, that it ran
    and what it returned.

    ``BaseTool.run``/``arun`` call the tool's ``_run``/``_arun`` and turn the value into
    message content; the copy's own ``_run``/``_arun`` (with the same signature, which
    ``run`` inspects for ``config`` and ``run_manager``) note the value first; its ``run``/
    ``arun`` note the content of the ``ToolMessage`` they return. Everything else
    (schema, name, error handling, ``return_direct``) is the tool's. Build it once per tool.
    """
    from langchain_core.messages import ToolMessage

    pair = tool.response_format == "content_and_artifact"

    def returned(value: Any) -> Any:
        if pair and not (isinstance(value, tuple) and len(value) == 2):
            return value  # (not the pair it declares, which LangChain refuses: a failure)
        record = _current()
        record.returned, record.value = True, value
        return value

    def made(output: Any) -> Any:
        if isinstance(output, ToolMessage):
            _current().content = output.content
        return output

    copy = tool.model_copy()
    for name, noted in (("_run", returned), ("_arun", returned), ("run", made), ("arun", made)):
        code = name.startswith("_")  # the tool's code: it runs, whether it returns or raises
        func = _noting(getattr(tool if code else copy, name), noted, code, "arun" in name)
        object.__setattr__(copy, name, func)
    object.__setattr__(copy, _RECORDING_MARK, True)
    return copy


def _noting(
    func: Callable[..., Any], noted: Callable[[Any], Any], code: bool, asynchronous: bool
) -> Callable[..., Any]:
    """``func`` noting, in the :func:`recording` around it, that the tool's code ran (``code``)
    or that an attempt starts (``BaseTool.run``: an error it raises after the code returned is
    :attr:`Recorded.unwritten`), then its output (``noted``; a coroutine's once awaited)."""

    def failed(exc: Exception) -> None:
        record = _current()
        if not code and record.returned:
            record.unwritten = exc
        elif not code and not record.ran and _is_validation_error(exc):
            record.refused = exc

    async def awaited(output: Awaitable[Any]) -> Any:
        try:
            return noted(await output)
        except Exception as exc:
            failed(exc)
            raise

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        record = _current()
        if code:
            record.ran = True
        else:
            record.returned = False
            record.value = record.content = record.unwritten = record.refused = None
        try:
            output = func(*args, **kwargs)
        except Exception as exc:
            failed(exc)
            raise
        return awaited(output) if asynchronous else noted(output)

    return call


_NOT_DIRECT: Final = frozenset({"callbacks", "run_manager", "config"})
_VARIADIC: Final = frozenset({"args", "kwargs"})  # (fields pydantic makes of *args, **kwargs)


def direct_function(tool: BaseTool, *, asynchronous: bool = False) -> Callable[..., Any] | None:
    """What ``tool.invoke(tool_call)`` (``ainvoke``: a coroutine) does up to its output, as a
    function of the tool call, when invoking does nothing else a caller could observe and no
    handler listens: a plain ``StructuredTool``, no error handlers or callbacks of its own,
    ``response_format="content"``, a function taking no callbacks or config (else ``None``);
    the arguments read as ``invoke`` reads them (``_to_args_and_kwargs``: validators, aliases)."""
    from langchain_core.tools import StructuredTool

    func = getattr(tool, "coroutine" if asynchronous else "func", None)
    if (
        type(tool) is not StructuredTool
        or func is None
        or tool.handle_tool_error
        or tool.handle_validation_error
        or tool.callbacks
        or tool.response_format != "content"
    ):
        return None
    try:
        if _NOT_DIRECT & set(inspect.signature(func).parameters):
            return None
    except (TypeError, ValueError):
        return None
    checked = _checks_nothing_more(tool.args_schema)  # then the library's check is invoke's
    fields: dict[str, Any] = getattr(tool.args_schema, "model_fields", {}) if checked else {}
    defaults = {n: f for n, f in fields.items() if not f.is_required() and n not in _VARIADIC}

    def call(tool_call: dict[str, Any]) -> Any:
        args: tuple[Any, ...] = ()
        kwargs = tool_call["args"]
        if checked and (left_out := defaults.keys() - kwargs.keys()):  # invoke gives its default
            kwargs = kwargs | {
                n: defaults[n].get_default(call_default_factory=True) for n in left_out
            }
        elif not checked:  # read as invoke reads them
            try:
                args, kwargs = tool._to_args_and_kwargs(dict(tool_call["args"]), tool_call["id"])
            except Exception as exc:
                if _is_validation_error(exc):
                    _current().refused = exc
                raise
        _current().ran = True  # it runs, whether it returns or raises
        return func(*args, **kwargs)

    return call


def _is_validation_error(exc: BaseException) -> bool:
    """Whether ``exc`` is pydantic's refusal of values (v2 or v1), as ``BaseTool.run`` tells
    its arguments' from other errors."""
    from pydantic import ValidationError
    from pydantic.v1 import ValidationError as V1Error

    return isinstance(exc, ValidationError | V1Error)


def _checks_nothing_more(schema: Any) -> bool:
    """Whether validating arguments against ``schema`` checks nothing that validating them
    against the tool-call schema made of it (which the library does before every call) does
    not: a pydantic model with no validators, aliases or validation settings of its own."""
    from pydantic import BaseModel, Json

    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return False
    found = schema.__pydantic_decorators__
    if found.validators or found.field_validators or found.root_validators:
        return False
    if found.model_validators or set(schema.model_config) - {"arbitrary_types_allowed", "title"}:
        return False
    return all(  # (a default validated, or made of the other arguments, is invoke's to give)
        f.alias is f.validation_alias is None
        and not f.validate_default
        and not getattr(f, "default_factory_takes_validated_data", False)  # (pydantic 2.10+)
        and not any(type(m) is Json for m in f.metadata)  # (the library passes its text on)
        for f in schema.model_fields.values()
    )


def call_schema(tool: BaseTool) -> Any:
    """A LangChain tool's ``tool_call_schema`` (a ``pydantic.v1`` model's as its JSON schema);
    ``UsageError`` when LangChain cannot make it (a ``pydantic.v1`` field constraint) or it names
    an argument its ``args_schema`` reads only by an alias (which ``tool.invoke`` refuses)."""
    from pydantic import BaseModel
    from pydantic.v1 import BaseModel as V1Model

    model: Any = tool.args_schema
    legacy = isinstance(model, type) and issubclass(model, V1Model)
    try:
        schema: Any = tool.tool_call_schema
        schema = schema.schema() if legacy else schema
    except Exception as exc:
        hint = " (a pydantic.v1 args_schema: give a pydantic v2 model)" if legacy else ""
        msg = f"cannot read the arguments of tool {tool.name!r}{hint}: {first_line(exc)}"
        raise UsageError(msg) from exc
    if isinstance(schema, dict) or not (isinstance(model, type) and issubclass(model, BaseModel)):
        return schema
    fields, config = model.model_fields, model.model_config
    by_name = config.get("validate_by_name") or config.get("populate_by_name")
    for name in () if by_name or config.get("validate_by_alias") is False else schema.model_fields:
        alias = fields[name].validation_alias or fields[name].alias if name in fields else None
        if alias is not None and alias != name:
            raise UsageError(
                f"tool {tool.name!r}: argument {name!r} is read only by its alias {alias!r}, which "
                "LangChain's tool-call schema drops: set populate_by_name=True in its model_config"
            )
    return schema


def invoke_as_call(recorder: BaseTool, args: dict[str, Any], record: Recorded) -> Any:
    """What the code of a :func:`recording_tool` returned when invoked with a tool call, as an
    agent's tool node invokes it (or the content of the message it answered with), noted in
    ``record``; an error message (a failure the tool handles itself) raises ``ToolException``."""
    with recording(record):
        call = _as_call(recorder, args)
        try:
            output = recorder.invoke(call)
        except Exception as exc:
            output = _unwritten(exc, record)
        return _settled(output, record, call["id"])


async def ainvoke_as_call(recorder: BaseTool, args: dict[str, Any], record: Recorded) -> Any:
    """Async :func:`invoke_as_call`."""
    with recording(record):
        call = _as_call(recorder, args)
        try:
            output = await recorder.ainvoke(call)
        except Exception as exc:
            output = _unwritten(exc, record)
        return _settled(output, record, call["id"])


def _unwritten(exc: Exception, record: Recorded) -> Any:
    """What the tool returned when ``exc`` is LangChain failing to write it (an integer too
    long to print): the plan reads that value as any result (and is told if it cannot hold
    it); any other error is raised."""
    if exc is not record.unwritten:
        raise exc
    return record.value


def _as_call(tool: BaseTool, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "name": tool.name, "args": args, "id": f"{tool.name}-call"}


def refuse_other_answer(message: Any, call_id: str) -> None:
    """Raise ``ValueError`` when ``message`` is a ``ToolMessage`` answering another call than
    ``call_id``: it answers none of the plan's (the tool node refuses a ``Command`` so)."""
    from langchain_core.messages import ToolMessage

    if isinstance(message, ToolMessage) and (other := message.tool_call_id) != call_id:
        raise ValueError(f"no matching ToolMessage: it answers the call {other!r}, not {call_id!r}")


def _settled(output: Any, record: Recorded, call_id: str) -> Any:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import ToolException

    value = record.value if record.returned else output
    answer = _answer_in(value, call_id)
    refuse_other_answer(answer or value, call_id)
    for message in (output, answer or value):
        if isinstance(message, ToolMessage) and message.status == "error":
            raise ToolException(message.text)
    if answer is None:
        return value  # (the tool's value; a message it returns itself, read as its text)
    return answer.content if isinstance(answer.content, str) else answer.text


def _answer_in(value: Any, call_id: str) -> Any:
    """The ``ToolMessage`` a ``Command``'s update (or a list of ``Command``s and messages)
    answers the call with, as the tool node reads it (a message written as a dict too); the
    first it carries when none answers the call (:func:`refuse_other_answer` refuses it);
    ``None`` when ``value`` is no such answer or carries no message of a tool."""
    from langchain_core.messages import ToolMessage, convert_to_messages
    from langgraph.types import Command

    items = value if isinstance(value, list) and value else [value]
    if not isinstance(value, Command | list) or not all(
        isinstance(i, Command | ToolMessage) for i in items
    ):
        return None
    carried: list[Any] = []
    for item in items:
        update = item.update if isinstance(item, Command) else {"messages": [item]}
        listed = update.get("messages", []) if isinstance(update, dict) else []
        carried += convert_to_messages(listed if isinstance(listed, list) else [listed])
    answers = [m for m in carried if isinstance(m, ToolMessage)]
    mine = [m for m in answers if m.tool_call_id == call_id]
    if len(mine) > 1 and isinstance(value, list):  # (as the tool node: one Command may)
        raise ValueError(f"{len(mine)} ToolMessages answer the call {call_id!r}: one may")
    return mine[0] if mine else answers[0] if answers else None


def tool_node_steps(
    tools: Sequence[BaseTool],
) -> tuple[Callable[[Any, Any, BaseTool], Any], Callable[[Any, Any], Any]]:
    """What the agent's tool node does around a tool's ``invoke``, for ``tools``: ``(tool_call,
    runtime, tool) -> tool_call`` with what ``ToolNode._inject_tool_args`` adds (state, store,
    ``ToolRuntime``; ``invoke`` adds the tool-call id and config), and ``(output, tool_call) ->
    result`` as ``ToolNode._normalize_tool_response`` takes a tool's output (a ``Command`` must
    answer its call, its answer named after the tool; a list of them holds one answer)."""
    from langgraph.prebuilt import ToolNode

    node = ToolNode(list(tools))
    return node._inject_tool_args, lambda output, call: node._normalize_tool_response(
        output, call, "dict"
    )


def unobserved(config: Any) -> bool:
    """Whether a run under ``config`` has no callback handler at all: none given, and none that
    LangChain adds itself (tracing set up by the environment)."""
    from langchain_core.callbacks import CallbackManager

    callbacks = config.get("callbacks") if isinstance(config, dict) else None
    return not CallbackManager.configure(inheritable_callbacks=callbacks).handlers


def tool_message(output: Any, call_id: str, name: str) -> Any:
    """The ``ToolMessage`` ``BaseTool.run`` makes of a tool's output for a tool call (text and
    content blocks as they are, anything else as JSON, non-ASCII kept, else its ``str``), noted
    in the :func:`recording` around the call as a :func:`recording_tool` notes its call (the
    tool's function was called directly)."""
    from langchain_core.tools.base import _format_output

    record = _current()
    record.ran = record.returned = True
    record.value, record.content, record.unwritten = output, None, None
    try:
        message: Any = _format_output(output, None, call_id, name, "success")
    except Exception as exc:
        record.unwritten = exc
        raise
    record.content = getattr(message, "content", None)  # (a Command, a list: no content)
    return message


MCP_OUTPUT_SCHEMA: Final = "outputSchema"
"""The key of a tool's ``metadata`` where :func:`llassembly.load_mcp_tools` keeps the output
schema an MCP server declared (MCP's name; the adapter drops the schema)."""


def mcp_output_schema(tool: Any) -> dict[str, Any] | None:
    """The output schema an MCP server declared for ``tool`` (see :data:`MCP_OUTPUT_SCHEMA`),
    or ``None``."""
    metadata = getattr(tool, "metadata", None)
    schema = metadata.get(MCP_OUTPUT_SCHEMA) if isinstance(metadata, dict) else None
    return schema if isinstance(schema, dict) else None


def mcp_structured(artifact: Any) -> Any:
    """The structured output of an MCP tool's call, from its artifact (``None``: none)."""
    return artifact.get("structured_content") if isinstance(artifact, dict) else None


def tagged_model(model: Any, tag: str, metadata: dict[str, Any]) -> Any:
    """``model`` whose runs carry ``tag`` and ``metadata`` (streamed chunks do too), still
    usable as the model of a ``ModelRequest`` that offers no tools; a model that is no
    ``Runnable`` (``invoke`` alone) as it is."""
    configured = getattr(model, "with_config", None)
    return model if configured is None else configured(tags=[tag], metadata=metadata)


def structured_model(model: Any, schema: dict[str, Any]) -> Any | None:
    """``model`` answering with JSON of ``schema`` through its native structured output, or
    ``None`` when its ``profile`` does not say it has one (or it cannot bind this way).

    The runnable gives ``{"raw": AIMessage, "parsed": dict | None, "parsing_error": ...}``.
    """
    profile = getattr(model, "profile", None)
    if not (isinstance(profile, dict) and profile.get("structured_output")):
        return None
    try:
        return model.with_structured_output(schema, method="json_schema", include_raw=True)
    except (NotImplementedError, TypeError, ValueError):
        return None
