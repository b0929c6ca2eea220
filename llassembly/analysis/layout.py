"""Static facts of a plan that depend on its tools: memory layout, variables, conventions.

* **Memory**: every data label is a row of cells (see :class:`~llassembly.program.MemoryLabel`)
  at an address of its own (:data:`SPAN` bytes apart), so ``LEA ESI, [table]`` then
  ``MOV EAX, [ESI + 4]`` reads ``table``'s second dword cell.
* **Variables**: a name that is no register, data label, code label or tool, written by ``MOV``
  or ``POP`` (``MOV result_id, EAX``), is a one-cell writable label of its own.
* **The EAX convention**: a tool ``CALL`` whose one result is read in ``EAX``/``RAX`` before
  anything POPs it gets that result in ``EAX`` instead of on the stack (:func:`eax_calls`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from llassembly.language.instructions import OPCODE_INFO
from llassembly.language.limits import MAX_MEMORY_CELLS
from llassembly.language.opcodes import (
    EAX_INDEX,
    Opcode,
)
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    MemoryLabel,
    Name,
    Operand,
    Program,
    Reg,
    ToolShape,
    Value,
    find_tool,
)

__all__ = [
    "MAX_MEMORY_CELLS",
    "SPAN",
    "Layout",
    "eax_calls",
    "layout_of",
    "reads_eax",
    "variables_of",
]

SPAN = 1 << 20
"""Bytes between the addresses of two data labels (a label holds at most 32 KiB)."""
VARIABLE_SIZE = 8  # a variable is one qword cell


@dataclass(frozen=True)
class Layout:
    """Where each data label and variable lives.

    Attributes:
        labels: Lower-cased name to its cells (variables included).
        order: The names in address order.
        variables: Lower-cased names of variables (undeclared names written by MOV/POP).
    """

    labels: Mapping[str, MemoryLabel]
    order: tuple[str, ...]
    variables: frozenset[str]
    live: frozenset[str] = frozenset()
    """Writable labels the plan may write (kept in the machine state; the rest are read
    from the program, so a plan that never writes memory has none in its snapshots)."""

    def base(self, key: str) -> int:
        """The address of a label's first cell."""
        return self._bases[key]

    @functools.cached_property
    def _bases(self) -> dict[str, int]:
        return {key: SPAN * (i + 1) for i, key in enumerate(self.order)}

    def locate(self, address: int) -> tuple[str, int] | None:
        """The label an address falls in and the byte offset in it, or ``None``."""
        slot, offset = divmod(address, SPAN)
        if not 1 <= slot <= len(self.order):
            return None
        return self.order[slot - 1], offset

    def initial_memory(self) -> dict[str, list[Value]]:
        """The writable cells as a run starts (read-only labels are read from the program)."""
        return {key: list(self.labels[key].cells) for key in self.order if key in self.live}

    @property
    def cells(self) -> int:
        """How many cells the plan declares."""
        return sum(len(label.cells) for label in self.labels.values())


def variables_of(program: Program, tools: Mapping[str, ToolShape]) -> dict[str, Instruction]:
    """Undeclared names written by ``MOV``/``POP``, to the first instruction writing each."""
    found: dict[str, Instruction] = {}
    for ins in program.instructions:
        if ins.op not in (Opcode.MOV, Opcode.POP) or not ins.operands:
            continue
        dst = ins.operands[0]
        if not isinstance(dst, Name):
            continue
        key = dst.name.lower()
        if key in program.data or key in program.labels or key in found:
            continue
        if find_tool(dst.name, tools) is not None:
            continue
        found[key] = ins
    return found


def layout_of(program: Program, tools: Mapping[str, ToolShape]) -> Layout:
    """The memory layout of ``program`` with ``tools`` (variables depend on tool names)."""
    labels: dict[str, MemoryLabel] = dict(program.memory)
    found = variables_of(program, tools)
    for key, ins in found.items():
        labels[key] = MemoryLabel((0,), VARIABLE_SIZE, True, ins.line)
    written: set[str] = set()
    for ins in program.instructions:
        info = OPCODE_INFO[ins.op]
        shape = info.accepts(len(ins.operands)) or ()
        for kind, operand in zip(shape, ins.operands, strict=False):
            if kind != "reg":
                continue
            if isinstance(operand, Mem) and operand.label is None:
                written.update(k for k, label in labels.items() if label.writable)
            elif isinstance(operand, Mem | Name):
                written.add(str(operand.label if isinstance(operand, Mem) else operand).lower())
    live = frozenset(k for k in written if k in labels and labels[k].writable)
    return Layout(labels, tuple(labels), frozenset(found), live)


# -- the EAX convention ------------------------------------------------------------------------


def _is_eax(operand: Operand) -> bool:
    return isinstance(operand, Reg) and operand.index == EAX_INDEX


def _in_address(operand: Operand) -> bool:
    return isinstance(operand, Mem) and any(r.index == EAX_INDEX for r in operand.registers)


def reads_eax(ins: Instruction) -> bool:
    """Whether ``ins`` reads ``EAX`` (as an operand, in an address, or implicitly)."""
    info = OPCODE_INFO[ins.op]
    operands = ins.operands
    if ins.op in (Opcode.MUL, Opcode.DIV) and len(operands) == 1:
        return True  # MUL src / DIV src work on EAX
    if ins.op is Opcode.XOR and len(operands) == 2 and operands[0] == operands[1]:
        return False  # XOR EAX, EAX only clears it
    for position, operand in enumerate(operands):
        if _in_address(operand):
            return True
        if not _is_eax(operand):
            continue
        kind = info.operands[position] if position < len(info.operands) else "value"
        if kind != "reg" or info.reads_dst or ins.op.value.startswith("CMOV"):
            return True
    return False


def _writes_eax(ins: Instruction) -> bool:
    if ins.op in (Opcode.MUL, Opcode.DIV) and len(ins.operands) == 1:
        return True
    info = OPCODE_INFO[ins.op]
    return any(
        _is_eax(operand) and position < len(info.operands) and info.operands[position] == "reg"
        for position, operand in enumerate(ins.operands)
    )


@dataclass(frozen=True)
class Conventions:
    """Which tool ``CALL``s leave their result in ``EAX``, and the plans mixing both ways.

    Attributes:
        eax: Indexes of tool ``CALL`` instructions whose result goes to ``EAX``.
        mixed: ``(CALL index, index of the instruction reading EAX, index of the POP)``: the
            result is read in ``EAX`` and then a ``POP`` would take it off the stack too.
    """

    eax: frozenset[int]
    mixed: tuple[tuple[int, int, int], ...]


def eax_calls(program: Program, tool_at: Mapping[int, ToolShape]) -> Conventions:
    """Decide, for each one-result tool ``CALL``, where its result goes.

    The rule (static, from the straight-line code after the ``CALL``): the result goes to
    ``EAX`` when ``EAX`` is read before any ``POP``, ``PUSH``, ``CALL``, jump or write of
    ``EAX``; otherwise it is pushed, as always. A ``POP`` after such a read, before any
    ``PUSH`` or ``CALL``, mixes the two ways and is reported, unless it restores a register
    saved just below the call's arguments (``PUSH ECX``, the arguments, ``CALL``, ``POP ECX``).
    """
    eax: set[int] = set()
    mixed: list[tuple[int, int, int]] = []
    instructions = program.instructions
    for pc, tool in tool_at.items():
        if tool.n_results != 1:
            continue
        reader = _first_eax_read(instructions, pc)
        if reader is None:
            continue
        eax.add(pc)
        saved = _saved_below(program, pc, len(tool.params))
        pop = _pop_after(instructions, reader, saved)
        if pop is not None:
            mixed.append((pc, reader, pop))
    return Conventions(frozenset(eax), tuple(sorted(mixed)))


def _straight_after(instructions: tuple[Instruction, ...], pc: int) -> Iterator[int]:
    """Indexes of the straight-line code after ``pc``, up to (and with) a jump or the end."""
    for index in range(pc + 1, len(instructions)):
        yield index
        info = OPCODE_INFO[instructions[index].op]
        if info.jump or info.ends_block:
            return


def _first_eax_read(instructions: tuple[Instruction, ...], pc: int) -> int | None:
    for index in _straight_after(instructions, pc):
        ins = instructions[index]
        if ins.op in (Opcode.POP, Opcode.PUSH, Opcode.CALL, Opcode.RET, Opcode.HLT):
            return index if ins.op is Opcode.PUSH and reads_eax(ins) else None
        if reads_eax(ins):
            return index
        if _writes_eax(ins) or OPCODE_INFO[ins.op].jump:
            return None
    return None


def _saved_below(program: Program, pc: int, n_args: int) -> list[Operand]:
    """The values ``PUSH``ed just below a ``CALL``'s arguments in the straight-line code
    before it, top first: registers saved around the call (``PUSH ECX`` ... ``POP ECX``)."""
    instructions = program.instructions
    targets = set(program.labels.values())
    pushed: list[Operand] = []
    for index in range(pc - 1, -1, -1):
        ins = instructions[index]
        info = OPCODE_INFO[ins.op]
        if ins.op is Opcode.PUSH and ins.operands:
            pushed.append(ins.operands[0])
        elif ins.op in (Opcode.POP, Opcode.CALL) or info.jump or info.ends_block:
            break
        if index in targets:
            break
    return pushed[n_args:]


def _same_place(a: Operand, b: Operand) -> bool:
    if isinstance(a, Reg) and isinstance(b, Reg):
        return a.index == b.index
    return str(a).lower() == str(b).lower()


def _pop_after(
    instructions: tuple[Instruction, ...], reader: int, saved: list[Operand]
) -> int | None:
    """The first ``POP`` after ``reader`` that would take the result (not one restoring a
    value saved below the call's arguments, as x86 code does around a call), or ``None``."""
    if instructions[reader].op is Opcode.PUSH:
        return None
    restores = list(saved)
    for index in _straight_after(instructions, reader):
        ins = instructions[index]
        if ins.op is Opcode.POP:
            if restores and ins.operands and _same_place(ins.operands[0], restores[0]):
                restores.pop(0)
                continue
            return index
        if ins.op in (Opcode.PUSH, Opcode.CALL, Opcode.RET, Opcode.HLT):
            return None
    return None


def static_index(mem: Mem, label: MemoryLabel) -> tuple[int, int] | None:
    """``(byte offset, cell index)`` of a memory operand with no register, else ``None``."""
    if mem.registers:
        return None
    return mem.disp, mem.disp // label.size


def literal_zero(operand: Operand, program: Program) -> bool:
    """Whether an operand is the number 0 written in the program (a literal or constant)."""
    if isinstance(operand, Imm):
        return not isinstance(operand.value, str) and operand.value == 0
    if isinstance(operand, Name):
        key = operand.name.lower()
        label = program.memory.get(key)
        value = program.data.get(key)
        writable = label is not None and label.writable
        return not writable and value is not None and not isinstance(value, str) and value == 0
    return False
