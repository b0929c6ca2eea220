"""Reading and writing operands at run time: registers, constants, data labels and memory.

Each operand of an instruction is turned once, when the plan is compiled, into a getter
(``state -> value``) or a setter (``(state, value) -> None``). Memory operands compute their
cell from the registers they name; a cell out of bounds or not at a cell boundary stops the
plan with an error naming the line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import is_
from typing import TYPE_CHECKING, TypeAlias

from llassembly.analysis.cfg import Layout
from llassembly.errors import (
    AsmRuntimeError,
    UsageError,
)
from llassembly.language.limits import MAX_DATA_TEXT_CHARS, MAX_ROW_TEXT_PER_RUN
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
from llassembly.machine.structured import filled, read_path, write_path
from llassembly.machine.values import short_repr

if TYPE_CHECKING:
    from llassembly.machine.state import MachineState

__all__ = ["Context", "Getter", "Setter", "address_of", "cell_locator", "getter", "setter"]

INT_LIMIT = 2**63 - 1

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
    eax_calls: frozenset[int] = frozenset()


def fail(instruction: Instruction, message: str) -> AsmRuntimeError:
    return AsmRuntimeError(message, line=instruction.line, source=instruction.text)


def show(value: Value) -> str:
    """A value in an error message: :func:`~llassembly._values.short_repr`, 60 characters."""
    return short_repr(value, 60)


def getter(operand: Operand, ctx: Context, ins: Instruction) -> Getter:
    """How to read ``operand`` (a register, constant, data label, variable or memory cell)."""
    if isinstance(operand, Reg):
        index = operand.index
        if index == 0:
            return lambda st: 0
        return lambda st: st.regs[index]
    if isinstance(operand, Imm):
        constant = operand.value
        return lambda st: constant
    if isinstance(operand, Path):
        return _path_reader(operand, ctx, ins)
    if isinstance(operand, Template):
        return _template_reader(operand, ctx, ins)
    live = ctx.layout.live
    if isinstance(operand, Mem):
        locate = _locator(operand, ctx, ins)
        if operand.label is None:  # [reg]: the label is known only from the address

            def read(st: MachineState) -> Value:
                key, index = locate(st)
                return (st.mem[key] if key in live else ctx.layout.labels[key].cells)[index]

            return _text_or_cell(operand, read) if _text_address(operand) else read
        fixed = operand.label.lower()
        if fixed in live:
            return lambda st: st.mem[fixed][locate(st)[1]]
        cells = ctx.layout.labels[fixed].cells  # never written: read from the program
        return lambda st: cells[locate(st)[1]]
    key = operand.name.lower()
    label = ctx.layout.labels.get(key)
    if label is None or key not in live:
        value: Value = ctx.program.data[key] if key in ctx.program.data else label.cells[0]  # type: ignore[union-attr]
        return lambda st: value
    if len(label.cells) == 1:
        return lambda st: st.mem[key][0]
    return _row_reader(key, ctx, ins)


def _text_address(mem: Mem) -> bool:
    """``[ESI]``: one register and nothing else, which may hold text (see :func:`getter`)."""
    return mem.label is None and mem.index is None and not mem.disp and mem.base is not None


def _text_or_cell(mem: Mem, cell: Getter) -> Getter:
    """``[ESI]`` read: with an address in ``ESI``, its cell; with text in it, the code of its
    first character, ``0`` when it is empty (C's ``*s``: ``CMP BYTE [ESI], 0`` tests for an
    empty string)."""
    assert mem.base is not None
    index = mem.base.index

    def read(st: MachineState) -> Value:
        held = st.regs[index] if index else 0
        if type(held) is str:
            return ord(held[0]) if held and held != NONE else 0
        return cell(st)

    return read


def _path_reader(path: Path, ctx: Context, ins: Instruction) -> Getter:
    """``R1.items[0].id``: the part of the JSON text the base holds (see
    :mod:`llassembly.machine.structured`)."""
    base = getter(path.base, ctx, ins)
    keys = [getter(step, ctx, ins) for step in path.steps]
    if all(isinstance(step, Imm) for step in path.steps):
        fixed = [step.value for step in path.steps if isinstance(step, Imm)]
        return lambda st: read_path(st, base(st), fixed, path, ins)
    return lambda st: read_path(st, base(st), [key(st) for key in keys], path, ins)


def _template_reader(template: Template, ctx: Context, ins: Instruction) -> Getter:
    """A string with placeholders: the text, each placeholder filled in as it is read."""
    fills = [getter(fill, ctx, ins) for fill in template.fills]
    shown = [str(fill) for fill in template.fills]
    pieces, specs = template.pieces, template.specs
    return lambda st: filled(st, [fill(st) for fill in fills], pieces, specs, shown, ins)


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
        text_or_none = row_json(cells, limit)
        if text_or_none is None:
            raise fail(
                ins,
                f"reading {key!r} whole would build more than {limit} characters of JSON text "
                "(the row holds too much text); read one cell ([row + i*size]) instead",
            )
        st.text_built += len(text_or_none)
        if st.text_built > MAX_ROW_TEXT_PER_RUN:
            raise fail(
                ins,
                f"reading rows whole has built more than {MAX_ROW_TEXT_PER_RUN} characters of "
                "text in this run (each changed row is written out again); read the cells you "
                "need ([row + i*size]), or read the row whole once, after the loop",
            )
        st.row_texts[key] = (list(cells), text_or_none)
        return text_or_none

    return read_row


def setter(operand: Operand, ctx: Context, ins: Instruction) -> Setter:
    """How to write ``operand`` (a register, a variable, a one-cell label or a memory cell)."""
    if isinstance(operand, Reg):
        index = operand.index

        def write_register(st: MachineState, value: Value) -> None:
            st.regs[index] = value

        return write_register
    if isinstance(operand, Path):  # the base gets the new text of the whole structure
        base, put = getter(operand.base, ctx, ins), setter(operand.base, ctx, ins)
        keys = [getter(step, ctx, ins) for step in operand.steps]
        path = operand

        def write_part(st: MachineState, value: Value) -> None:
            put(st, write_path(st, base(st), [key(st) for key in keys], value, path, ins))

        return write_part
    if isinstance(operand, Mem):
        locate = _locator(operand, ctx, ins)

        def write_memory(st: MachineState, value: Value) -> None:
            key, index = locate(st)
            if key not in ctx.layout.live:
                raise fail(ins, f"{operand} is in read-only data ({key!r}); write to .data")
            st.mem[key][index] = value

        return write_memory
    if isinstance(operand, Name):
        key = operand.name.lower()
        if key in ctx.layout.live:

            def write_cell(st: MachineState, value: Value) -> None:
                st.mem[key][0] = value

            return write_cell
    raise UsageError(f"destination {operand} cannot be written (was the program verified?)")


def _register_number(st: MachineState, reg: Reg, operand: Mem, ins: Instruction) -> int:
    value = st.regs[reg.index] if reg.index else 0
    if type(value) is not int:
        raise fail(
            ins,
            f"the address {operand} needs a whole number in {reg}, which holds {show(value)}",
        )
    return value


def address_of(operand: Mem, ctx: Context, ins: Instruction) -> Getter:
    """The address a memory operand names (``LEA``): its label's address plus the offset."""
    base = ctx.layout.base(operand.label.lower()) if operand.label else 0
    registers = [(r, 1) for r in ([operand.base] if operand.base else [])]
    if operand.index is not None:
        registers.append((operand.index, operand.scale))
    disp = operand.disp

    def address(st: MachineState) -> Value:
        total = base + disp
        for reg, scale in registers:
            total += _register_number(st, reg, operand, ins) * scale
        if not -INT_LIMIT - 1 <= total <= INT_LIMIT:
            raise fail(ins, f"the address {operand} is out of the 64-bit range")
        return total

    return address


def cell_locator(operand: Mem, ctx: Context, ins: Instruction) -> _Locator:
    """``state -> (label, cell index)`` of a memory operand, raising as reading it would (the
    provenance of a cell is kept by its place: see :mod:`llassembly.machine.provenance`)."""
    return _locator(operand, ctx, ins)


def _locator(operand: Mem, ctx: Context, ins: Instruction) -> _Locator:
    """``state -> (label, cell index)`` for a memory operand, checking bounds and alignment."""
    layout = ctx.layout
    if operand.label is None:
        address = address_of(operand, ctx, ins)

        def by_address(st: MachineState) -> tuple[str, int]:
            where = layout.locate(int(address(st)))
            if where is None:
                raise fail(ins, f"{operand} points outside every data label")
            key, offset = where
            return key, _cell(key, offset, layout.labels[key], operand, ins)

        return by_address
    key = operand.label.lower()
    label = layout.labels[key]
    registers = [(r, 1) for r in ([operand.base] if operand.base else [])]
    if operand.index is not None:
        registers.append((operand.index, operand.scale))
    disp = operand.disp
    if not registers:
        fixed = (key, _cell(key, disp, label, operand, ins))
        return lambda st: fixed

    def by_label(st: MachineState) -> tuple[str, int]:
        offset = disp
        for reg, scale in registers:
            offset += _register_number(st, reg, operand, ins) * scale
        return key, _cell(key, offset, label, operand, ins)

    return by_label


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
