"""The agent path's results: a plan call's ``ToolMessage`` read back into the value the plan
gets (by the tool's declared return type), or the failure it stands for."""

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
    ToolExecutionError,
)
from llassembly.integration.messages import failure_record
from llassembly.machine.externs import Extern
from llassembly.machine.values import (
    strip_annotation,
    type_label,
)

__all__ = ["decode_result", "failure_of"]

_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_SHOWN = 80  # characters of an undecodable result quoted in the error
# HumanInTheLoopMiddleware prepends a notice to the result of a call a reviewer edited,
# ending with this line; the plan wants the tool's value, so the notice is read past.
_REVIEW_NOTICE_END = "\n\nTool response:\n"


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
    (an ``Optional`` result, which the plan holds as the text ``"null"``).
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


def decode_result(extern: Extern, message: ToolMessage, pending: Mapping[str, Any]) -> Any:
    """The value a plan gets from a tool's ``ToolMessage``, by the tool's declared return type.

    The agent's tool node turns results into text (JSON for anything but a string); this reads
    it back so the plan sees what it would see on the graph path: ``int``/``float``/``bool``/
    ``str`` as themselves, a ``tuple[...]`` as several values, lists, dicts and pydantic models
    as JSON text.

    Raises:
        AsmRuntimeError: The text cannot be read as the declared type (names the tool and line).
    """
    if extern.n_results == 0:
        return None
    content = message.content
    text: str = content if type(content) is str else str(message.text)
    if _REVIEW_NOTICE_END in text:
        notice, _, rest = text.partition(_REVIEW_NOTICE_END)
        if " Executed instead: " in notice:
            text = rest
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


def failure_of(message: ToolMessage, pending: Mapping[str, Any]) -> dict[str, Any] | None:
    """The failure an error ``ToolMessage`` stands for (a tool raised, a limit refused the call,
    a person rejected it), or ``None`` for a result."""
    if message.status != "error":
        return None
    artifact = message.artifact
    if isinstance(artifact, Mapping) and isinstance(artifact.get("llassembly_failure"), Mapping):
        return dict(artifact["llassembly_failure"])
    error = ToolExecutionError(
        str(pending["tool"]),
        RuntimeError(message.text),
        line=int(pending["line"]),
        source=str(pending["source"]),
    )
    return failure_record(error)
