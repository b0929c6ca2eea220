"""How a tool reads in the system prompt: its signature, description, arguments, the fields of
its structures and an example that calls it (see ``docs/language.md`` and
:mod:`llassembly.integration.prompt`).

A block is short for a tool of plain values and says what a model needs for structures: the
fields (``name: type``) of each object its parameters and results hold, described once per
prompt, and an example that builds one (a JSON literal) or reads one (a path to a field). Every
block stays within :data:`TOOL_BLOCK_BUDGET` characters, whatever the tool, so a prompt grows
linearly with the toolset.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import inspect
import json
import re
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Literal, Protocol, get_args, get_origin

from pydantic import BaseModel

from llassembly.machine.values import EMPTY

__all__ = [
    "TOOL_BLOCK_BUDGET",
    "Described",
    "describe_extern",
    "docstring_args",
    "extern_signature",
    "first_paragraph",
    "type_text",
]

TOOL_BLOCK_BUDGET: Final = 1200
"""Most characters one tool's block takes in the prompt."""
_DESCRIPTION: Final = 400  # characters of the tool's own description kept
_LITERAL: Final = 60  # longest JSON literal an example pushes
_TYPES_LINE: Final = 500  # characters of field lists per tool
_DEPTH: Final = 3


class _Param(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def annotation(self) -> Any: ...

    @property
    def description(self) -> str: ...

    @property
    def has_default(self) -> bool: ...

    @property
    def default_text(self) -> str: ...


class Described(Protocol):
    """What a block shows of a tool (an :class:`~llassembly.machine.externs.Extern`)."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> Sequence[_Param]: ...

    @property
    def n_results(self) -> int: ...

    @property
    def description(self) -> str: ...

    @property
    def result_types(self) -> tuple[Any, ...]: ...


# -- types as the prompt writes them ------------------------------------------------------------

_TEXT_TYPES: dict[type, str] = {
    datetime.datetime: "str (datetime)",
    datetime.date: "str (date)",
    datetime.time: "str (time)",
    decimal.Decimal: "str (decimal)",
    uuid.UUID: "str",
    bytes: "str",
}


def _bare(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _fields(annotation: Any) -> list[tuple[str, Any]] | None:
    """The fields of a pydantic model, ``TypedDict`` or dataclass, else ``None``."""
    ann = _bare(annotation)
    if not isinstance(ann, type):
        return None
    if issubclass(ann, BaseModel):
        return [(n, f.annotation) for n, f in ann.model_fields.items()]
    if typing.is_typeddict(ann) or dataclasses.is_dataclass(ann):
        try:
            hints = typing.get_type_hints(ann)
        except Exception:
            hints = dict(getattr(ann, "__annotations__", {}))
        if typing.is_typeddict(ann):
            return list(hints.items())
        return [(f.name, hints.get(f.name, Any)) for f in dataclasses.fields(ann)]  # type: ignore[arg-type]
    return None


def type_text(annotation: Any, depth: int = 0) -> str:
    """A type as the prompt writes it: ``int``, ``str | None``, ``list[Event]``, ``Contact``."""
    ann = _bare(annotation)
    if ann is Any or ann is EMPTY or ann is object or depth > _DEPTH:
        return "any"
    if ann is None or ann is type(None):
        return "None"
    origin, args = get_origin(ann), get_args(ann)
    if origin is typing.Union or type(ann).__name__ == "UnionType":
        return " | ".join(type_text(a, depth + 1) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if isinstance(ann, type):
        if issubclass(ann, enum.Enum):
            return "one of " + ", ".join(json.dumps(m.value) for m in ann)
        if ann is bool:
            return "bool (1 or 0)"
        if ann in (int, float, str):
            return ann.__name__
        for kind, text in _TEXT_TYPES.items():
            if issubclass(ann, kind):
                return text
        if _fields(ann) is not None:
            return ann.__name__
    container = origin if origin is not None else ann
    if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return "[" + ", ".join(type_text(a, depth + 1) for a in args) + "]"
    if isinstance(container, type) and issubclass(container, Mapping):
        return f"dict[str, {type_text(args[1], depth + 1)}]" if len(args) == 2 else "JSON object"
    if isinstance(container, type) and issubclass(container, list | tuple | set | frozenset):
        return f"list[{type_text(args[0], depth + 1)}]" if args else "JSON list"
    return str(getattr(ann, "__name__", ann)).replace("typing.", "")


def _named(annotations: Sequence[Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each structured type the annotations hold (fields first met first), once."""
    found: dict[str, list[tuple[str, Any]]] = {}
    todo = list(annotations)
    while todo and len(found) < 16:
        ann = _bare(todo.pop(0))
        fields = _fields(ann)
        if fields is not None:
            name = ann.__name__
            if name not in found:
                found[name] = fields
                todo += [a for _, a in fields]
            continue
        todo += [a for a in get_args(ann) if a is not Ellipsis and not isinstance(a, str | int)]
    return list(found.items())


# -- the block ----------------------------------------------------------------------------------


def extern_signature(extern: Described) -> str:
    """Return ``name(a: int, b: str = "x") -> Page`` (``-> (int, int)`` for two results)."""
    args = ", ".join(
        f"{p.name}: {type_text(p.annotation)}"
        + (f" = {p.default_text or 'default'}" if p.has_default else "")
        for p in extern.params
    )
    if extern.n_results == 0:
        returns = "nothing"
    elif extern.n_results == 1:
        returns = type_text(extern.result_types[0] if extern.result_types else Any)
    else:
        returns = "(" + ", ".join(type_text(t) for t in extern.result_types) + ")"
    return f"{extern.name}({args}) -> {returns}"


def describe_extern(extern: Described, described: set[str] | None = None) -> str:
    """Return the prompt block for one tool: signature, description, arguments, the fields of
    its structures, and an example.

    Args:
        extern: The tool.
        described: Names of the structured types earlier blocks of the same prompt described;
            they are named, not described again (and this block's are added).

    Example:
        >>> from llassembly.externs import externs_from
        >>> def make_one_step(x: int, y: int) -> int:
        ...     '''Move one step towards (x, y).'''
        ...     return 0
        >>> print(describe_extern(externs_from([make_one_step])["make_one_step"]))
        ## make_one_step
        make_one_step(x: int, y: int) -> int
        Move one step towards (x, y).
        Arguments, push in this order: x, y
        Example:
            PUSH 5             ; x
            PUSH 7             ; y
            CALL make_one_step
            POP R1             ; result
    """
    lines = [f"## {extern.name}", extern_signature(extern)]
    if extern.description:
        about = extern.description
        lines.append(about if len(about) <= _DESCRIPTION else about[: _DESCRIPTION - 3] + "...")
    params = extern.params
    if any(p.description for p in params):
        lines.append("Arguments, push in this order:")
        lines += [f"  {p.name}: {p.description or type_text(p.annotation)}" for p in params]
    elif params:
        lines.append("Arguments, push in this order: " + ", ".join(p.name for p in params))
    n = extern.n_results
    if n == 0:
        lines.append("Returns nothing: do not POP after it.")
    elif n > 1:
        lines.append(f"Returns {n} values: the first POP gets the first one.")
    types = _types_line([p.annotation for p in params] + list(extern.result_types), described)
    if types:
        lines.append(types)
    lines.append("Example:")
    lines += _example(extern)
    block = "\n".join(lines)
    if len(block) > TOOL_BLOCK_BUDGET:  # a description or an example far too long: cut
        block = block[: TOOL_BLOCK_BUDGET - 4] + " ..."
    return block


def _types_line(annotations: list[Any], described: set[str] | None) -> str:
    """``Fields: Page {items: list[Item], next_cursor: str | None}; Item {...}``."""
    parts: list[str] = []
    for name, fields in _named(annotations):
        if described is not None and name in described:
            continue  # its fields are in an earlier block
        inner = ", ".join(f"{f}: {type_text(a, 1)}" for f, a in fields)
        parts.append(f"{name} {{{inner}}}")
        if described is not None:
            described.add(name)
    if not parts:
        return ""
    line = "Fields: " + "; ".join(parts)
    return line if len(line) <= _TYPES_LINE else line[: _TYPES_LINE - 4] + " ..."


def _example(extern: Described) -> list[str]:
    rows = [
        ("PUSH NONE", f"{p.name}: its default") if p.has_default else _push(p, i)
        for i, p in enumerate(extern.params)
    ]
    rows.append((f"CALL {extern.name}", ""))
    n = extern.n_results
    if n == 1:
        rows.append(("POP R1", "result"))
        path = _path_to_scalar(extern.result_types[0] if extern.result_types else Any, "R1")
        if path == "R1[0]":  # a list of plain values
            rows += [("MOV R2, R1[0]", "its first element"), ("LEN R3, R1", "how many")]
        elif path:
            rows.append((f"MOV R2, {path}", "a field"))
    else:
        rows += [(f"POP R{i + 1}", f"result {i + 1}") for i in range(n)]
    width = max(len(code) for code, _ in rows) + 1
    return [f"    {code.ljust(width)}; {note}" if note else f"    {code}" for code, note in rows]


def _push(param: _Param, index: int) -> tuple[str, str]:
    operand = _operand(param.annotation, index)
    if operand == "R3":  # a structure too long to write out: one the plan holds
        return "PUSH R3", f"{param.name}: a {type_text(param.annotation)} (JSON text)"
    return f"PUSH {operand}", param.name


def _path_to_scalar(annotation: Any, base: str) -> str:
    """A path from ``base`` to the first plain field of a structured result (``R1.items[0].id``),
    or ``""`` for a result of plain values."""
    path, ann = base, _bare(annotation)
    for _ in range(_DEPTH + 1):
        fields = _fields(ann)
        origin, args = get_origin(ann), get_args(ann)
        if fields:
            name, ann = fields[0]
            path += f".{name}" if name.isidentifier() else f"[{json.dumps(name)}]"
        elif isinstance(origin, type) and issubclass(origin, list | tuple | set) and args:
            path += "[0]"
            ann = args[0]
        else:
            break
        ann = _strip_optional(_bare(ann))
    return path if path != base else ""


def _strip_optional(ann: Any) -> Any:
    args = get_args(ann)
    if (get_origin(ann) is typing.Union or type(ann).__name__ == "UnionType") and args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else ann
    return ann


def _operand(annotation: Any, index: int) -> str:
    """A literal that fits ``annotation``, for the call example."""
    sample = _sample(annotation)
    if isinstance(sample, bool):
        return "1" if sample else "0"
    if isinstance(sample, int):
        return str(5 + 2 * index)
    if isinstance(sample, float | str):
        return json.dumps(sample)
    text = json.dumps(sample, ensure_ascii=False)
    if len(text) > _LITERAL:  # too long to show whole: a register holding one
        return "R3"
    return "'" + text + "'"  # JSON text in single quotes


def _sample(annotation: Any, depth: int = 0) -> Any:
    """A small JSON-compatible value of this type."""
    ann = _strip_optional(_bare(annotation))
    origin, args = get_origin(ann), get_args(ann)
    fields = _fields(ann)
    if fields is not None:
        return {name: _sample(a, depth + 1) for name, a in fields} if depth < _DEPTH else {}
    if origin is Literal:
        return args[0]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return next(iter(ann)).value
    simple: dict[Any, Any] = {bool: True, float: 0.5, str: "text", dict: {}, list: []}
    if ann in simple:
        return simple[ann]
    if isinstance(ann, type) and any(issubclass(ann, kind) for kind in _TEXT_TYPES):
        return "text"
    if origin in (list, tuple, set, frozenset):
        return [_sample(args[0], depth + 1)] if args and depth < _DEPTH else []
    if origin is dict:
        return {}
    return 1  # int, Any and anything else: a number


# -- reading a tool's docstring --------------------------------------------------------------


def first_paragraph(text: str | None) -> str:
    """The first paragraph of a tool's description or docstring, on one line."""
    text = inspect.cleandoc(text or "")
    return " ".join(text.split("\n\n", 1)[0].split())


def docstring_args(doc: str | None) -> dict[str, str]:
    """Parse the ``Args:`` section of a Google-style docstring into name -> description."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() in ("Args:", "Arguments:")), None)
    if start is None:
        return out
    current = ""
    indent = -1
    for ln in lines[start + 1 :]:
        if not ln.strip():
            continue
        depth = len(ln) - len(ln.lstrip())
        if depth == 0:
            break
        match = re.match(r"\s*\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)", ln)
        if match and (indent < 0 or depth <= indent):
            indent, current = depth, match.group(1)
            out[current] = match.group(3).strip()
        elif current:
            out[current] = f"{out[current]} {ln.strip()}".strip()
    return out
