"""The agent path's results: what a plan call gave the plan, read from its ``ToolMessage``.

The planner's ``wrap_tool_call`` (:mod:`llassembly.integration.calls`) sees the tool's own
return value and records, in the message's metadata, whether the tool ran and, when the
message's text would read differently, the values the plan gets (by the one conversion every
path uses, :meth:`~llassembly.machine.externs.Extern.to_values`). The next step reads them
back here (:func:`outcome_of`): the recorded values; else the text, read by the tool's
declared return type (a result a middleware wrote without running the tool); or the failure
an error message stands for.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, get_origin

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from llassembly.errors import (
    AsmRuntimeError,
    CallNotRun,
    ExecutionError,
    QueryFailed,
    ToolExecutionError,
)
from llassembly.integration.query import answer_tag
from llassembly.integration.record import (
    FAILURE_ARTIFACT,
    KEY,
    Failed,
    Failure,
    execution_failure,
    refusal_failure,
)
from llassembly.machine.externs import Extern
from llassembly.machine.values import strip_annotation, type_label

__all__ = ["altered", "decode_text", "message_text", "outcome_of", "refusal_tag", "value_tag"]

_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_SHOWN = 80  # characters of an undecodable result quoted in the error


# -- results: ToolMessage text back to values, by the tool's declared return type ---------------


def _undecodable(extern: Extern, text: str, label: str, pending: Mapping[str, Any]) -> Exception:
    shown = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
    return AsmRuntimeError(
        f"tool {extern.name!r} is declared to return {label}, but its result {shown!r} cannot "
        "be read as one",
        line=int(pending.get("line", 0)),
        source=str(pending.get("source", "")),
    )


def _json(text: str) -> Any:
    """``json.loads`` whose failures, nesting too deep included, are ``ValueError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _decode_one(annotation: Any, text: str) -> Any:
    """One declared value from its ``ToolMessage`` text; raises ``ValueError`` when it is not.

    What the plan gets is what the tool returned, as on the graph path: numbers are read as
    JSON numbers (a ``-> float`` tool returning ``3`` gives ``3``), and ``null`` is ``None``
    (an ``Optional`` result, which the plan holds as ``NONE``).
    """
    kind = _kind(annotation)
    if kind == "text":
        return text
    if kind in ("number", "bool"):
        stripped = text.strip()
        if kind == "bool" and stripped.lower() in ("true", "false", "1", "0"):
            return stripped.lower() in ("true", "1")
        # A JSON integer (what the tool node writes for an int) is read without the JSON
        # decoder; anything else goes through it, with its rules.
        number = int(stripped) if _JSON_INT.fullmatch(stripped) else _json(stripped)
        if number is not None and type(number) not in (int, float, bool):
            raise ValueError(text)
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError(text)
        return number
    try:
        data = _json(text)
    except ValueError:
        if kind == "strict":
            raise
        return text
    if isinstance(data, str) and kind == "loose":
        return text  # a tool's plain text that happens to be valid JSON stays as it was
    if isinstance(data, float) and not math.isfinite(data):
        raise ValueError(text)
    return data


def _kind(annotation: Any) -> str:
    """How a declared result type is read back (worked out once per annotation)."""
    try:
        return _cached_kind(annotation)
    except TypeError:  # an annotation that cannot be hashed
        return _kind_of(annotation)


def _kind_of(annotation: Any) -> str:
    """``text`` (kept as it is), ``number``, ``bool``, ``strict`` (JSON of a declared type,
    or an error), ``lenient`` (JSON when it reads as such: enums, literals) or ``loose``
    (undeclared: JSON, but plain text that happens to be a JSON string stays text)."""
    ann = strip_annotation(annotation)
    if ann is str or _is_message_like(ann):
        return "text"
    if ann in (int, float):
        return "number"
    if ann is bool:
        return "bool"
    if ann in (None, Any) or ann is type(None) or ann is object:
        return "loose"
    if get_origin(ann) is Literal or _is_enum(ann):
        return "lenient"
    return "strict"


_cached_kind = functools.lru_cache(maxsize=1024)(_kind_of)


def _is_message_like(annotation: Any) -> bool:
    """A tool declared to return a ``Command`` or ``ToolMessage``: its value is the text of the
    ``ToolMessage`` it hands the agent."""
    target = get_origin(annotation) or annotation
    return isinstance(target, type) and issubclass(target, (Command, ToolMessage))


def _is_enum(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def decode_text(extern: Extern, text: str, pending: Mapping[str, Any]) -> Any:
    """What the plan gets from a result's text, read by the tool's declared return type (the
    text as it is for ``str``, numbers as JSON numbers, a ``tuple[...]`` as a JSON array).

    Raises:
        AsmRuntimeError: The text cannot be read as the declared type (names the tool and line).
    """
    if extern.n_results == 0:
        return None
    if extern.n_results == 1:
        annotation = extern.result_types[0] if extern.result_types else None
        try:
            return _decode_one(annotation, text)
        except ValueError:
            raise _undecodable(extern, text, type_label(annotation), pending) from None
    label = f"{extern.n_results} values (a JSON array)"
    try:
        data = _json(text)
    except ValueError:
        raise _undecodable(extern, text, label, pending) from None
    if not isinstance(data, list) or len(data) != extern.n_results:
        raise _undecodable(extern, text, label, pending)
    return data


def altered(made: str, seen: str) -> bool:
    """Whether a middleware between the tool and the agent altered a result: the text the
    tool's result made (``made``) no longer stands whole in the text the agent sees (``seen``).

    A middleware that only adds text around the result (``HumanInTheLoopMiddleware``'s
    notice of an edited call) leaves the plan the tool's own value; one that changes or
    removes any of it (a redaction, a correction) decides what the plan reads: the text the
    agent sees, read as the tool's declared type."""
    return made not in seen


def message_text(message: ToolMessage) -> str:
    """A ``ToolMessage``'s content as text."""
    content = message.content
    return content if type(content) is str else str(message.text)


def value_tag(extern: Extern, result: Any, text: str, pending: Mapping[str, Any]) -> dict[str, Any]:
    """What a result's message records beside its text: nothing when ``text`` reads back as
    the values the plan gets from ``result`` (the tool's own return value); those values when
    it would not; the failure when the value cannot be held."""
    line, source = int(pending.get("line", 0)), str(pending.get("source", ""))
    try:
        values = extern.to_values(result, line=line, source=source)
    except ExecutionError as error:
        return {"failure": dict(execution_failure(error))}
    try:
        read = extern.to_values(decode_text(extern, text, pending))
    except ExecutionError:
        read = None
    if read is not None and _same(read, values):
        return {}
    return {"values": list(values)}


def refusal_tag(error: BaseException) -> dict[str, Any]:
    """What the message of a failed call records: that the tool did not run, when a person or
    a middleware decided so; for a failed query, that it is one and its model calls."""
    if isinstance(error, QueryFailed):
        return answer_tag(error.attempts)
    return {"ran": False} if isinstance(error, CallNotRun) else {}


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(
        type(x) is type(y) and x == y for x, y in zip(a, b, strict=True)
    )


def outcome_of(extern: Extern | None, message: ToolMessage, pending: Mapping[str, Any]) -> Any:
    """What a plan call's ``ToolMessage`` gives the plan: the tool's value (as
    :meth:`~llassembly.emulator.Emulator.complete` takes it) or :class:`Failed`."""
    tag = message.response_metadata.get(KEY)
    tag = tag if isinstance(tag, Mapping) else {}
    line, source = int(pending["line"]), str(pending["source"])
    if isinstance(tag.get("failure"), Mapping):
        return Failed(Failure(**tag["failure"]))  # type: ignore[typeddict-item]
    artifact = message.artifact
    if isinstance(artifact, Mapping) and isinstance(artifact.get(FAILURE_ARTIFACT), Mapping):
        return Failed(Failure(**artifact[FAILURE_ARTIFACT]))  # type: ignore[typeddict-item]
    if message.status == "error":
        text = message_text(message)
        if not tag or tag.get("ran") is False:  # a person or a middleware answered instead
            return Failed(refusal_failure(str(pending["tool"]), line, source, text))
        error = ToolExecutionError(
            str(pending["tool"]), RuntimeError(text), line=line, source=source
        )
        return Failed(execution_failure(error))
    if extern is None:
        gone = AsmRuntimeError(
            f"tool {pending['tool']!r} is no longer offered by the agent", line=line, source=source
        )
        return Failed(execution_failure(gone))
    if "values" in tag:
        values = list(tag["values"])
        return None if extern.n_results == 0 else values[0] if extern.n_results == 1 else values
    try:
        return decode_text(extern, message_text(message), pending)
    except ExecutionError as error:
        return Failed(execution_failure(error))
