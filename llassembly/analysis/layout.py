"""Static facts of a plan that depend on its tools: memory layout, variables, conventions.

* **Memory**: every data label is a row of cells (see :class:`~llassembly.program.MemoryLabel`)
  at an address of its own (:data:`SPAN` bytes apart), so ``LEA ESI, [table]`` then
  ``MOV EAX, [ESI + 4]`` reads ``table``'s second dword cell.
* **Variables**: a name that is no register, data label, code label or tool, written by ``MOV``
  or ``POP`` (``MOV result_id, EAX``), is a one-cell writable label of its own.

(The EAX convention, also a fact that depends on the tools, is the control-flow graph's:
:mod:`llassembly.analysis.cfg`.)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from llassembly.language.limits import MAX_MEMORY_CELLS
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    MemoryLabel,
    Name,
    Operand,
    Path,
    Program,
    ToolShape,
    Value,
    effects,
    find_tool,
)

__all__ = [
    "MAX_MEMORY_CELLS",
    "SPAN",
    "Layout",
    "layout_of",
    "literal_zero",
    "static_index",
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


def _copies_into(ins: Instruction) -> bool:
    """Whether ``ins`` copies a value into its first operand without reading it first
    (``MOV x, EAX``, ``POP x``): how a variable comes to be."""
    fx = effects(ins)
    return 0 in fx.writes and 0 not in fx.reads and bool(fx.moves or fx.pops)


def variables_of(program: Program, tools: Mapping[str, ToolShape]) -> dict[str, Instruction]:
    """Undeclared names written by ``MOV``/``POP``, to the first instruction writing each."""
    found: dict[str, Instruction] = {}
    for ins in program.instructions:
        if not ins.operands or not _copies_into(ins):
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
        for position in effects(ins).writes:
            operand = ins.operands[position]
            while isinstance(operand, Path):  # a path written changes its base
                operand = operand.base
            if isinstance(operand, Mem) and operand.label is None:
                written.update(k for k, label in labels.items() if label.writable)
            elif isinstance(operand, Mem | Name):
                written.add(str(operand.label if isinstance(operand, Mem) else operand).lower())
    live = frozenset(k for k in written if k in labels and labels[k].writable)
    return Layout(labels, tuple(labels), frozenset(found), live)


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
