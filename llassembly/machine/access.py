"""Reading and writing operands at run time: registers, constants, data labels, memory, and the
parts of structured values (JSON text) read and written by path.

Each operand is turned once, when the plan is compiled, into a getter (``state -> value``) or a
setter (``(state, value) -> None``). Memory operands compute their cell from the registers they
name; a cell out of bounds or not at a cell boundary stops the plan with an error naming the line.

A structure is held as its JSON text: reading a path parses it (each state keeps the last texts it
parsed) and gives the part as a value; writing one builds the whole structure's text again, within
the run's bounds (see *Structured values* and *Text* in ``docs/language.md``).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any, Final, TypeAlias

from llassembly.analysis.cfg import Layout
from llassembly.analysis.dataflow import place_parts
from llassembly.analysis.shapes import fields_line
from llassembly.errors import AsmRuntimeError, UsageError, plural
from llassembly.language.limits import (
    INT_MAX,
    INT_MIN,
    MAX_BUILT_TEXT_CHARS,
    MAX_DATA_TEXT_CHARS,
    MAX_ROW_TEXT_PER_RUN,
)
from llassembly.language.parser import no_constant
from llassembly.language.program import (
    NONE,
    Imm,
    Instruction,
    Mem,
    MemoryLabel,
    Name,
    Operand,
    Path,
    Program,
    Reg,
    Template,
    Value,
    row_json,
)
from llassembly.language.templates import in_json_strings, render
from llassembly.machine.externs import short_repr
from llassembly.machine.state import MachineState

_KEPT: Final = 8  # parsed texts each state keeps
_MISSING: Final = object()
NOT_JSON: Final[Any] = None
"""What :func:`structure_of` gives for a value that is no JSON object or array (no structure
is ``None``)."""


def fail(ins: Instruction, message: str, words: str = "", plain: bool = False) -> AsmRuntimeError:
    """The error of an instruction that cannot go on, at its line, with the ``words`` the
    planner is shown (:class:`AsmRuntimeError`; ``plain``: the message holds no value)."""
    said = message if plain else words or f"{ins.mnemonic} met a value it cannot work with"
    return AsmRuntimeError(message, line=ins.line, source=ins.text, words=said)


_READ_ONCE: Final = (
    "read the parts you need once (MOV R2, R1.items) rather than again in every round"
)


def _count(st: MachineState, chars: int, ins: Instruction, advice: str = _READ_ONCE) -> None:
    st.text_built += chars
    if chars > MAX_ROW_TEXT_PER_RUN:  # (no way of reading it helps)
        what = f"this JSON text holds {chars} characters, more than a run may read"
        raise fail(
            ins, f"{what} ({MAX_ROW_TEXT_PER_RUN}); ask the tool for less (a filter, a page)"
        )
    if st.text_built > MAX_ROW_TEXT_PER_RUN:
        passed = f"has passed {MAX_ROW_TEXT_PER_RUN} characters in this run"
        raise fail(ins, f"reading and building structured text {passed}; {advice}")


def structure_of(st: MachineState, value: Value, ins: Instruction) -> Any:
    """The JSON object (a dict) or array (a list) ``value`` holds, else :data:`NOT_JSON`.

    Each state keeps the last :data:`_KEPT` texts it parsed; what it gives must not be
    changed (a write copies what it changes).
    """
    if type(value) is not str or not value or value[0] not in "[{ \t\n\r":
        return NOT_JSON
    cache = st.parsed
    if (found := cache.get(value, _MISSING)) is not _MISSING:
        return found
    if value.lstrip()[:1] not in ("[", "{"):
        return NOT_JSON
    _count(st, len(value), ins)
    try:
        node = json.loads(value, parse_constant=no_constant)  # starts with [ or {: a list or a dict
    except RecursionError:
        raise fail(ins, "the JSON text is nested too deeply to read") from None
    except ValueError:
        node = NOT_JSON
    if len(cache) >= _KEPT:
        cache.pop(next(iter(cache)))
    cache[value] = node
    return node


def _dumps(node: Any) -> str:
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def value_of(st: MachineState, node: Any, ins: Instruction, where: str) -> Value:
    """A part of a structure as a machine value: a number, a text, ``1``/``0`` for
    ``true``/``false``, :data:`NONE` for ``null``, the compact JSON text of a structure."""
    if node is None:
        return NONE
    if node is True or node is False:
        return 1 if node else 0
    kind = type(node)
    if kind is int:
        return node if INT_MIN <= node <= INT_MAX else str(node)  # a long id: its digits
    if kind is float and not math.isfinite(node):
        raise fail(ins, f"{where} is a number too large to hold")
    if kind is float or kind is str:
        return node  # type: ignore[no-any-return]
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


def whole_number(value: Value) -> int | None:
    """``value`` as a whole number (an int, or a float that is one), else ``None``."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def _child(node: Any, key: Value, where: str, ins: Instruction, path: Path) -> Any:
    """``node[key]``, or the error naming ``where`` (the path up to ``node``, its computed keys'
    values shown) and, in its words, ``path`` as the plan wrote it."""
    if isinstance(node, dict):
        if type(key) is not str:
            wrong = f"{where} is an object: [{short_repr(key)}] needs a field name"
            raise _off(ins, f"{wrong}; {fields_line(node)}", path, "an object meets a non-text key")
        if key not in node:
            words = "an object has no field the path names"
            raise _off(ins, f"{where} has no field {key!r}; {fields_line(node)}", path, words)
        return node[key]
    if isinstance(node, list):
        index = whole_number(key)
        if index is None:
            raise _off(
                ins,
                f"{where} is a list: its elements are found by a whole number ([0], [-1]), "
                f"not {short_repr(key)}",
                path,
                "a list meets a key that is no whole number",
            )
        size = len(node)
        if not -size <= index < size:
            have = f"it has {plural(size, 'element')} (0..{size - 1})" if size else "it is empty"
            words = "an index is past the end of its list"
            raise _off(ins, f"{where}[{index}] is past the end of {where}: {have}", path, words)
        return node[index]
    wrong = f"not an object or a list: it has no {key_text(key)}"
    words = "a step meets a value that is not an object or a list"
    raise _off(ins, f"{where} is {_kind(node)}, {wrong}", path, words)


def _off(ins: Instruction, message: str, path: Path, what: str) -> AsmRuntimeError:
    """The error of a path that cannot be followed; its words name the path as written."""
    return fail(ins, message, f"on the path {path}, {what}")


def _root(st: MachineState, base: Value, path: Path, ins: Instruction) -> Any:
    root = structure_of(st, base, ins)
    if root is NOT_JSON:
        shown = "null (NONE)" if base is None else short_repr(base, 40)
        raise fail(
            ins,
            f"{path}: {path.base} holds {shown}, not the JSON text of an object or a list",
            f"on the path {path}, {path.base} holds no JSON text of an object or a list",
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
        node = _child(node, key, _steps(path, keys)[number], ins, path)  # an error, or a float
    return value_of(st, node, ins, str(path))


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
        child = _child(node, key, shown[number], ins, path)
        if isinstance(child, dict | list):  # else the next step says it has no parts
            child = dict(child) if isinstance(child, dict) else list(child)
            node[key if isinstance(node, dict) else whole_number(key)] = child
        node = child
    last, where = keys[-1], shown[-2]
    found = structure_of(st, value, ins)  # NONE is null, JSON text of a structure is it
    part = value if found is NOT_JSON else found
    if isinstance(node, dict) and type(last) is str:
        node[last] = part
    elif isinstance(node, list) and whole_number(last) == len(node):
        node.append(part)
    else:
        _child(node, last, where, ins, path)  # the error, when there is no such element
        node[whole_number(last)] = part
    try:
        text = _dumps(copy)
    except RecursionError:  # (text a template built may nest deeper than JSON is written)
        raise fail(ins, f"{path}: the JSON text would be nested too deeply to write") from None
    _count(st, len(text), ins)
    if len(text) > MAX_BUILT_TEXT_CHARS:
        raise fail(
            ins,
            f"{path}: the structure would grow past the {MAX_BUILT_TEXT_CHARS} characters a "
            "plan may build",
        )
    return text


def _filled(template: Template, fills: Sequence[Getter], ins: Instruction) -> Getter:
    """A template's text as it is read: its pieces with each fill's value rendered between them."""
    pieces, specs, shown = template.pieces, template.specs, [str(f) for f in template.fills]
    in_strings = in_json_strings(pieces)

    def text(st: MachineState) -> str:
        values = [fill(st) for fill in fills]
        parts, size = [pieces[0]], len(pieces[0])
        for value, piece, spec, name, in_string in zip(
            values, pieces[1:], specs, shown, in_strings, strict=True
        ):
            try:
                rendered = render(value, spec)
            except ValueError as exc:
                said = f"{{{name}:{spec}}}"  # the placeholder as written
                words = f"{said}: the value does not fit the format {spec}"
                raise fail(ins, f"{said}: {exc} ({short_repr(value, 40)})", words) from None
            if in_string:  # (a string of JSON text: the value stays in it, whatever it holds)
                rendered = json.dumps(rendered, ensure_ascii=False)[1:-1]
            size += len(rendered) + len(piece)
            if size > MAX_BUILT_TEXT_CHARS:
                limit = MAX_BUILT_TEXT_CHARS
                raise fail(ins, f"the text would grow past the {limit} characters a plan may build")
            parts += [rendered, piece]
        return "".join(parts)

    return text


Getter: TypeAlias = "Callable[[MachineState], Value]"
Setter: TypeAlias = "Callable[[MachineState, Value], None]"
_Locator: TypeAlias = "Callable[[MachineState], tuple[str, int]]"


@dataclass(frozen=True, slots=True)
class Context:
    """What compiling one instruction needs to know of the whole plan."""

    program: Program
    end: int
    max_stack_depth: int
    layout: Layout


def show(value: Value) -> str:
    """A value as an error message shows it (``NONE`` as written)."""
    return "NONE" if value is None else short_repr(value, 60)


def parts(
    operands: Iterable[Operand], ctx: Context
) -> tuple[tuple[int, ...], tuple[Mem, ...], tuple[str, ...]]:
    """What reading the values of ``operands`` reads that a run may change (constants and
    read-only data change in no run): the registers, in order (never ``R0``: it always reads
    0); the memory operands whose cell is found as the plan runs (of a writable label, or by
    an address alone); the writable labels read whole (a one-cell label is its cell). A path's
    base and keys and a template's placeholders are read as those operands."""
    registers: dict[int, None] = {}
    cells: list[Mem] = []
    rows: list[str] = []
    live = ctx.layout.live

    def read(found: Iterable[Operand]) -> None:
        for operand in found:
            if isinstance(operand, Reg):
                registers[operand.index] = None
            elif isinstance(operand, Mem):
                registers.update(dict.fromkeys(r.index for r in operand.registers))
                if operand.label is None or operand.label.lower() in live:
                    cells.append(operand)
            elif isinstance(operand, Name) and operand.name.lower() in live:
                rows.append(operand.name.lower())
            elif isinstance(operand, Path | Template):
                read(place_parts(operand) if isinstance(operand, Path) else operand.fills)

    read(operands)
    registers.pop(0, None)
    return tuple(registers), tuple(cells), tuple(rows)


def getter(operand: Operand, ctx: Context, ins: Instruction) -> Getter:
    """How to read ``operand`` (a register, constant, data label, variable or memory cell, a
    path into the JSON text its base holds, a template's text filled as it is read)."""
    if isinstance(operand, Reg):
        index = operand.index
        if index == 0:
            return lambda st: 0
        return lambda st: st.regs[index]
    if isinstance(operand, Imm):
        constant = operand.value
        return lambda st: constant
    if isinstance(operand, Path):  # R1.items[0].id
        path, base = operand, getter(operand.base, ctx, ins)
        keys = [getter(step, ctx, ins) for step in path.steps]
        if all(isinstance(step, Imm) for step in path.steps):
            fixed = [step.value for step in path.steps if isinstance(step, Imm)]
            return lambda st: read_path(st, base(st), fixed, path, ins)
        return lambda st: read_path(st, base(st), [key(st) for key in keys], path, ins)
    if isinstance(operand, Template):
        return _filled(operand, [getter(fill, ctx, ins) for fill in operand.fills], ins)
    live = ctx.layout.live
    if isinstance(operand, Mem):
        locate = cell_locator(operand, ctx, ins)
        if operand.label is None:  # [reg]: the label is known only from the address
            return _text_or_cell(operand, locate, ctx)
        fixed_key = operand.label.lower()
        if fixed_key in live:
            return lambda st: st.mem[fixed_key][locate(st)[1]]
        cells = ctx.layout.labels[fixed_key].cells  # never written: read from the program
        return lambda st: cells[locate(st)[1]]
    key = operand.name.lower()
    label = ctx.layout.labels.get(key)
    if label is None or key not in live:
        value: Value = ctx.program.data[key] if key in ctx.program.data else label.cells[0]  # type: ignore[union-attr]
        return lambda st: value
    if len(label.cells) == 1:
        return lambda st: st.mem[key][0]
    return _row_reader(key, ctx, ins)


def _text_or_cell(mem: Mem, locate: _Locator, ctx: Context) -> Getter:
    """A memory operand found by its address alone. ``[ESI]`` (one register and nothing else)
    read with text in ``ESI`` gives the code of its first character, ``0`` when it is empty
    (C's ``*s``: ``CMP BYTE [ESI], 0`` tests for an empty string); with an address, its cell."""
    live, labels = ctx.layout.live, ctx.layout.labels

    def cell(st: MachineState) -> Value:
        key, index = locate(st)
        return (st.mem[key] if key in live else labels[key].cells)[index]

    if mem.index is not None or mem.disp or mem.base is None:
        return cell
    index = mem.base.index

    def read(st: MachineState) -> Value:
        held = st.regs[index] if index else 0
        if type(held) is str:
            return ord(held[0]) if held else 0
        if held is None:
            return 0
        return cell(st)

    return read


def _row_reader(key: str, ctx: Context, ins: Instruction) -> Getter:
    """A writable row read whole: its cells as JSON text, as a read-only row reads.

    The text is built once per content: the state keeps it with the cells it was built from
    and gives it again while the row holds the very same values (a loop reading an unchanged
    row builds nothing). A text longer than :data:`MAX_DATA_TEXT_CHARS` (or than the row's
    text as the plan wrote it, if longer) stops the plan at this line before it is built:
    writing a row's text into the row and reading it again would otherwise double it each
    round. All the text built in a run counts against :data:`MAX_ROW_TEXT_PER_RUN`.
    """
    written = ctx.program.data.get(key)
    limit = max(MAX_DATA_TEXT_CHARS, len(written) if isinstance(written, str) else 0)

    def read_row(st: MachineState) -> Value:
        cells = st.mem[key]
        kept = st.row_texts.get(key)
        if kept is not None:
            built_from, text = kept
            if len(built_from) == len(cells) and all(map(is_, built_from, cells)):
                return text
        built = row_json(cells, limit)
        if built is None:
            raise fail(
                ins,
                f"reading {key!r} whole would build more than {limit} characters of JSON text "
                "(the row holds too much text); read one cell ([row + i*size]) instead",
            )
        advice = "read the cells you need ([row + i*size]), or the row whole once, after the loop"
        _count(st, len(built), ins, f"each changed row read whole is written again: {advice}")
        st.row_texts[key] = (list(cells), built)
        return built

    return read_row


def setter(operand: Operand, ctx: Context, ins: Instruction) -> Setter:
    """How to write ``operand`` (a register, a variable, a one-cell label, a memory cell, a
    path: its base gets the new text of the whole structure)."""
    if isinstance(operand, Reg):
        index = operand.index

        def write_register(st: MachineState, value: Value) -> None:
            st.regs[index] = value

        return write_register
    if isinstance(operand, Path):
        at = place(operand, ctx, ins)
        return lambda st, value: at(st)(value)
    if isinstance(operand, Mem):
        locate = _writable(operand, ctx, ins)

        def write_memory(st: MachineState, value: Value) -> None:
            key, index = locate(st)
            st.mem[key][index] = value

        return write_memory
    if isinstance(operand, Name) and (key := operand.name.lower()) in ctx.layout.live:
        return lambda st, value: st.mem[key].__setitem__(0, value)
    raise UsageError(f"destination {operand} cannot be written (was the program verified?)")


def place(operand: Operand, ctx: Context, ins: Instruction) -> Callable[[MachineState], Any]:
    """Where ``operand`` writes, found when called (a cell's address, a path's keys, from the
    registers as they are then): a function writing a value there. ``XCHG`` finds both of its
    places before it writes either, as x86 works out an address once."""
    if isinstance(operand, Mem):
        locate = _writable(operand, ctx, ins)

        def cell(st: MachineState) -> Callable[[Value], None]:
            key, index = locate(st)
            return lambda value: st.mem[key].__setitem__(index, value)

        return cell
    if isinstance(operand, Path):
        base, where = getter(operand.base, ctx, ins), place(operand.base, ctx, ins)
        keys = [getter(step, ctx, ins) for step in operand.steps]

        def part(st: MachineState) -> Callable[[Value], None]:
            found, put = [key(st) for key in keys], where(st)
            return lambda value: put(write_path(st, base(st), found, value, operand, ins))

        return part
    put = setter(operand, ctx, ins)
    return lambda st: functools.partial(put, st)


def _writable(operand: Mem, ctx: Context, ins: Instruction) -> Callable[[MachineState], Any]:
    """The cell a memory operand names, as ``(label, index)``; one in read-only data fails."""
    locate, live = cell_locator(operand, ctx, ins), ctx.layout.live

    def cell(st: MachineState) -> tuple[str, int]:
        key, index = locate(st)
        if key not in live:
            raise fail(ins, f"{operand} is in read-only data ({key!r}); write to .data")
        return key, index

    return cell


def _offset(operand: Mem, ins: Instruction) -> Callable[[MachineState], int]:
    """``disp + base + index*scale`` of a memory operand, from the registers it names (each
    must hold a whole number)."""
    pairs = ((operand.base, 1), (operand.index, operand.scale))
    registers, disp = [(r, scale) for r, scale in pairs if r is not None], operand.disp

    def offset(st: MachineState) -> int:
        total = disp
        for reg, scale in registers:
            value = st.regs[reg.index] if reg.index else 0
            if type(value) is not int:
                wrong = f"needs a whole number in {reg}, which holds {show(value)}"
                raise fail(ins, f"the address {operand} {wrong}")
            total += value * scale
        return total

    return offset


def address_of(operand: Mem, ctx: Context, ins: Instruction) -> Getter:
    """The address a memory operand names (``LEA``): its label's address plus the offset."""
    base = ctx.layout.base(operand.label.lower()) if operand.label else 0
    offset = _offset(operand, ins)

    def address(st: MachineState) -> Value:
        total = base + offset(st)
        if not INT_MIN <= total <= INT_MAX:
            raise fail(ins, f"the address {operand} is out of the 64-bit range")
        return total

    return address


def cell_locator(operand: Mem, ctx: Context, ins: Instruction) -> _Locator:
    """``state -> (label, cell index)`` of a memory operand, checking bounds and alignment as
    reading it would (the provenance of a cell is kept by its place: see
    :mod:`llassembly.machine.provenance`)."""
    layout = ctx.layout
    if operand.label is None:
        address = address_of(operand, ctx, ins)

        def by_address(st: MachineState) -> tuple[str, int]:
            where = layout.locate(int(address(st)))  # type: ignore[arg-type]  # an int
            if where is None:
                raise fail(ins, f"{operand} points outside every data label")
            key, offset = where
            return key, _cell(key, offset, layout.labels[key], operand, ins)

        return by_address
    key = operand.label.lower()
    label, offset = layout.labels[key], _offset(operand, ins)
    if operand.base is None and operand.index is None:
        fixed = (key, _cell(key, operand.disp, label, operand, ins))
        return lambda st: fixed
    return lambda st: (key, _cell(key, offset(st), label, operand, ins))


def _cell(key: str, offset: int, label: MemoryLabel, operand: Mem, ins: Instruction) -> int:
    index, rest = divmod(offset, label.size)
    if rest:
        raise fail(
            ins,
            f"{operand} is at byte {offset} of {key!r}, not at a cell: its cells are "
            f"{label.size} bytes apart (cell i is at byte i*{label.size})",
        )
    if not 0 <= index < len(label.cells):
        raise fail(
            ins,
            f"{operand} reads cell {index} of {key!r}, which has {len(label.cells)} "
            f"(0..{len(label.cells) - 1})",
        )
    return index
