"""Structured values at run time: parts of JSON text read and written by path, and texts
filled in from templates (see *Structured values* and *Text* in ``docs/language.md``).

A structure is held as its JSON text (an object or an array), so registers and the stack keep
integers, floats and strings only. Reading ``R1.items[0].id`` parses the text (each state keeps
the last few texts it parsed, so a loop over a list parses it once), walks the keys and gives
the part as a value: a number, a text, ``1``/``0`` for ``true``/``false``, :data:`NONE` for
``null`` and the compact JSON text of an object or an array. Writing a path builds the new text
of the whole structure. Every text parsed or built counts against the run's work bound
(:data:`~llassembly.language.limits.MAX_ROW_TEXT_PER_RUN`), and a built text may hold at most
:data:`~llassembly.language.limits.MAX_BUILT_TEXT_CHARS` characters.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from llassembly.errors import AsmRuntimeError
from llassembly.language.limits import (
    INT_MAX,
    INT_MIN,
    MAX_BUILT_TEXT_CHARS,
    MAX_ROW_TEXT_PER_RUN,
)
from llassembly.language.program import NONE, Imm, Instruction, Path, Value
from llassembly.language.templates import render
from llassembly.machine.values import short_repr

if TYPE_CHECKING:
    from llassembly.machine.state import MachineState

__all__ = [
    "NOT_JSON",
    "as_node",
    "filled",
    "key_text",
    "read_path",
    "structure_of",
    "value_of",
    "write_path",
]

_KEPT: Final = 8  # parsed texts each state keeps
_MISSING: Final = object()
_SHOWN_FIELDS: Final = 20


class _NotJson:
    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Final[Any] = _NotJson()
"""What :func:`structure_of` gives for a value that is no JSON object or array."""


def _fail(ins: Instruction, message: str) -> AsmRuntimeError:
    return AsmRuntimeError(message, line=ins.line, source=ins.text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _count(st: MachineState, chars: int, ins: Instruction) -> None:
    st.text_built += chars
    if st.text_built > MAX_ROW_TEXT_PER_RUN:
        raise _fail(
            ins,
            f"reading and building structured text has passed {MAX_ROW_TEXT_PER_RUN} characters "
            "in this run; read the parts you need once (MOV R2, R1.items) rather than again "
            "in every round",
        )


def structure_of(st: MachineState, value: Value, ins: Instruction) -> Any:
    """The JSON object (a dict) or array (a list) ``value`` holds, else :data:`NOT_JSON`.

    Each state keeps the last :data:`_KEPT` texts it parsed; what it gives must not be
    changed (a write copies what it changes).
    """
    if type(value) is not str or not value or value[0] not in "[{ \t\n\r":
        return NOT_JSON
    cache = st.parsed
    found = cache.get(value, None)
    if found is not None:
        return found
    if value.lstrip()[:1] not in ("[", "{"):
        return NOT_JSON
    _count(st, len(value), ins)
    try:
        node = json.loads(value, parse_constant=_refuse_constant)
    except RecursionError:
        raise _fail(ins, "the JSON text is nested too deeply to read") from None
    except ValueError:
        node = NOT_JSON
    if not isinstance(node, dict | list):
        node = NOT_JSON
    if len(cache) >= _KEPT:
        cache.pop(next(iter(cache)))
    cache[value] = node
    return node


def _dumps(node: Any) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def value_of(st: MachineState, node: Any, ins: Instruction, where: str) -> Value:
    """A part of a structure as a machine value (see the module doc)."""
    if node is None:
        return NONE
    if node is True or node is False:
        return 1 if node else 0
    kind = type(node)
    if kind is int:
        return node if INT_MIN <= node <= INT_MAX else str(node)  # a long id: its digits
    if kind is float:
        if not math.isfinite(node):
            raise _fail(ins, f"{where} is a number too large to hold")
        return float(node)
    if kind is str:
        return str(node)
    text = _dumps(node)
    _count(st, len(text), ins)
    return text


def key_text(key: Value) -> str:
    """A key as a path step shows it: ``.name``, ``[3]`` or ``["odd key"]``."""
    if type(key) is str:
        return f".{key}" if key.isidentifier() else f"[{json.dumps(key, ensure_ascii=False)}]"
    return f"[{key}]"


def _kind(node: Any) -> str:
    if node is None:
        return "null (NONE)"
    if isinstance(node, bool):
        return "true or false"
    if isinstance(node, int | float):
        return f"the number {node!r}"
    return f"the text {short_repr(node, 40)}"


def _fields(node: dict[str, Any]) -> str:
    names = list(node)
    shown = ", ".join(names[:_SHOWN_FIELDS]) + (", ..." if len(names) > _SHOWN_FIELDS else "")
    return f"its fields: {shown}" if names else "it has no fields"


def _index(key: Value) -> int | None:
    if type(key) is int:
        return key
    if type(key) is float and key.is_integer():
        return int(key)
    return None


def _child(node: Any, key: Value, where: str, ins: Instruction) -> Any:
    """``node[key]``, or the error naming ``where`` (the path up to ``node``)."""
    if isinstance(node, dict):
        if type(key) is not str:
            wrong = f"[{short_repr(key)}] needs a field name"
            raise _fail(ins, f"{where} is an object: {wrong}; {_fields(node)}")
        if key not in node:
            raise _fail(ins, f"{where} has no field {key!r}; {_fields(node)}")
        return node[key]
    if isinstance(node, list):
        index = _index(key)
        if index is None:
            raise _fail(
                ins,
                f"{where} is a list: its elements are found by a whole number ([0], [-1]), "
                f"not {short_repr(key)}",
            )
        if not -len(node) <= index < len(node):
            have = (
                "it is empty"
                if not node
                else f"it has {len(node)} element{'s' * (len(node) != 1)} (0..{len(node) - 1})"
            )
            raise _fail(ins, f"{where}[{index}] is past the end of {where}: {have}")
        return node[index]
    wrong = f"not an object or a list: it has no {key_text(key)}"
    raise _fail(ins, f"{where} is {_kind(node)}, {wrong}")


def _root(st: MachineState, base: Value, path: Path, ins: Instruction) -> Any:
    root = structure_of(st, base, ins)
    if root is NOT_JSON:
        shown = "null (NONE)" if base == NONE else short_repr(base, 40)
        raise _fail(
            ins,
            f"{path}: {path.base} holds {shown}, not the JSON text of an object or a list",
        )
    return root


def _steps(path: Path, keys: Sequence[Value]) -> list[str]:
    """The path up to each step, as written, with the value of each computed key."""
    shown = [str(path.base)]
    for step, key in zip(path.steps, keys, strict=True):
        text = key_text(key) if isinstance(step, Imm) else f"[{step}={short_repr(key, 30)}]"
        shown.append(shown[-1] + text)
    return shown


def read_path(
    st: MachineState, base: Value, keys: Sequence[Value], path: Path, ins: Instruction
) -> Value:
    """The value at ``path`` in ``base`` (the JSON text its base holds), ``keys`` its steps."""
    node = _root(st, base, path, ins)
    for number, key in enumerate(keys):
        if type(node) is dict and type(key) is str:
            child = node.get(key, _MISSING)
            if child is not _MISSING:
                node = child
                continue
        elif type(node) is list and type(key) is int and -len(node) <= key < len(node):
            node = node[key]
            continue
        node = _child(node, key, _steps(path, keys)[number], ins)  # an error, or a float key
    return value_of(st, node, ins, str(path))


def as_node(st: MachineState, value: Value, ins: Instruction) -> Any:
    """A value as a part of a structure: ``NONE`` is ``null``, the JSON text of an object or
    an array is that structure, anything else itself."""
    if value == NONE:
        return None
    found = structure_of(st, value, ins)
    return value if found is NOT_JSON else found


def write_path(
    st: MachineState,
    base: Value,
    keys: Sequence[Value],
    value: Value,
    path: Path,
    ins: Instruction,
) -> str:
    """The JSON text of ``base`` with ``value`` at ``path``: a field of an object is set (or
    added), an element of a list replaced (at the list's length: added at its end)."""
    root = _root(st, base, path, ins)
    shown = _steps(path, keys)
    copy: Any = dict(root) if isinstance(root, dict) else list(root)
    node = copy
    for number, key in enumerate(keys[:-1]):
        child = _child(node, key, shown[number], ins)
        if not isinstance(child, dict | list):
            wrong = f"{shown[number + 1]} is {_kind(child)}"
            raise _fail(ins, f"{path}: {wrong}, not an object or a list")
        child = dict(child) if isinstance(child, dict) else list(child)
        node[key if isinstance(node, dict) else _index(key)] = child
        node = child
    last, where = keys[-1], shown[-2]
    part = as_node(st, value, ins)
    if isinstance(node, dict):
        if type(last) is not str:
            raise _fail(ins, f"{where} is an object: [{short_repr(last)}] needs a field name")
        node[last] = part
    elif _index(last) == len(node):
        node.append(part)
    else:
        _child(node, last, where, ins)  # the error, when there is no such element
        node[_index(last)] = part
    text = _dumps(copy)
    _count(st, len(text), ins)
    if len(text) > MAX_BUILT_TEXT_CHARS:
        raise _fail(
            ins,
            f"{path}: the structure would grow past the {MAX_BUILT_TEXT_CHARS} characters a "
            "plan may build",
        )
    return text


def filled(
    st: MachineState,
    values: Sequence[Value],
    pieces: Sequence[str],
    specs: Sequence[str],
    shown: Sequence[str],
    ins: Instruction,
) -> str:
    """A template's text: ``pieces`` with each value rendered (by its format) between them."""
    parts = [pieces[0]]
    size = len(pieces[0])
    for value, piece, spec, name in zip(values, pieces[1:], specs, shown, strict=True):
        try:
            text = render(value, spec)
        except ValueError as exc:
            raise _fail(ins, f"{{{name}:{spec}}}: {exc} ({short_repr(value, 40)})") from None
        size += len(text) + len(piece)
        if size > MAX_BUILT_TEXT_CHARS:
            limit = MAX_BUILT_TEXT_CHARS
            raise _fail(ins, f"the text would grow past the {limit} characters a plan may build")
        parts += [text, piece]
    return "".join(parts)
