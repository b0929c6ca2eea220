"""The parsed form of a plan: operands, instructions and the program.

Opcodes and registers are named in :mod:`llassembly.language.opcodes`; what each opcode does
is in the one table of :mod:`llassembly.language.instructions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeAlias, TypeVar

from llassembly.language.opcodes import Opcode

__all__ = [
    "NONE",
    "Imm",
    "Instruction",
    "Mem",
    "MemoryLabel",
    "Name",
    "Operand",
    "Path",
    "PlainAnswer",
    "Program",
    "Reg",
    "Template",
    "ToolShape",
    "UnknownInstruction",
    "Value",
    "find_tool",
    "nested",
]

Value: TypeAlias = int | float | str
"""What registers and the stack hold."""

NONE: Final = "\ufdd0"
"""The value "no value": written ``NONE`` (or ``NULL``) in a plan, what a JSON ``null`` or a
``None`` result reads as. Pushed for a tool parameter, the tool's own default applies. It is
held as a text of one Unicode noncharacter (U+FDD0, reserved for exactly such internal use),
so state stays JSON; it compares equal to ``NONE`` and to ``""`` and reads as empty text."""


@dataclass(frozen=True, slots=True)
class Reg:
    """A register operand."""

    index: int
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Imm:
    """An immediate number or string."""

    value: Value

    def __str__(self) -> str:
        if self.value == NONE:
            return "NONE"
        if isinstance(self.value, str):
            return '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Name:
    """An identifier: a code label, a data label or a tool name (resolved by the verifier)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Mem:
    """A memory operand: ``[label + base + index*scale + disp]``, any part left out.

    Attributes:
        label: The data label it is based on, as written (``None`` for ``[ESI]``).
        base: A register added to the address.
        index: A register multiplied by ``scale`` and added.
        scale: 1, 2, 4 or 8.
        disp: A constant byte offset.
        size: Bytes named by a size word (``dword`` is 4), or 0 when none was written.
        text: The operand as written.
    """

    label: str | None
    base: Reg | None = None
    index: Reg | None = None
    scale: int = 1
    disp: int = 0
    size: int = 0
    text: str = ""

    def __str__(self) -> str:
        return self.text

    @property
    def registers(self) -> tuple[Reg, ...]:
        """The registers the address reads."""
        return tuple(r for r in (self.base, self.index) if r is not None)


@dataclass(frozen=True, slots=True)
class Path:
    """A part of a structured value: ``R1.items[0].id``, ``page["next-cursor"]``, ``[EBX].name``.

    The base holds JSON text (an object or an array); each step takes a field of an object or an
    element of an array (see *Structured values* in ``docs/language.md``).

    Attributes:
        base: What holds the JSON text: a register (``R1``, and ``[EBX]`` read as ``EBX``), a data
            label or variable, or a memory cell.
        steps: One key per step, in order: ``Imm`` for a key written in the plan (a field name
            from ``.name`` or ``["name"]``, an index from ``[2]``), a register or a variable
            whose value is the key (``[ESI]``, ``[i]``).
        text: The operand as written.
    """

    base: Reg | Name | Mem
    steps: tuple[Imm | Reg | Name, ...]
    text: str = ""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Template:
    """A string literal with placeholders (``"Invoice {R1} for {R2.name}"``), filled as it is
    read (see :mod:`llassembly.language.templates`).

    Attributes:
        text: The string as written (its escapes read).
        pieces: The text around the placeholders: one more than ``fills``.
        fills: What each placeholder reads (a register, data label, variable, memory or path).
        specs: The format of each placeholder (``".2f"`` from ``{R1:.2f}``; ``""`` for none).
        columns: The 1-based column of each placeholder in its line, for messages.
    """

    text: str
    pieces: tuple[str, ...]
    fills: tuple[Reg | Name | Mem | Path, ...]
    specs: tuple[str, ...]
    columns: tuple[int, ...] = ()

    def __str__(self) -> str:
        return str(Imm(self.text))


Operand: TypeAlias = Reg | Imm | Name | Mem | Path | Template


def nested(operand: Operand) -> tuple[Operand, ...]:
    """The operands read to find ``operand``'s value or place, at any depth (not ``operand``
    itself): the registers of an address, the base and key operands of a path, the fills of a
    template. A path written is read too: its base is changed in place."""
    if isinstance(operand, Mem):
        return operand.registers
    if isinstance(operand, Path):
        found: list[Operand] = [operand.base, *nested(operand.base)]
        for step in operand.steps:
            if not isinstance(step, Imm):
                found += (step, *nested(step))
        return tuple(found)
    if isinstance(operand, Template):
        return tuple(part for fill in operand.fills for part in (fill, *nested(fill)))
    return ()


@dataclass(frozen=True, slots=True)
class MemoryLabel:
    """A data label as memory: its cells, their size in bytes and whether plans may write.

    ``section .data`` and ``.bss`` (and data before any section) are writable, ``.rodata``
    and ``equ`` constants are not. The byte offset of cell ``i`` is ``i * size``.
    """

    cells: tuple[Value, ...]
    size: int
    writable: bool
    line: int = 0


@dataclass(frozen=True, slots=True)
class Instruction:
    """One parsed instruction.

    Attributes:
        op: The opcode (aliases already mapped).
        operands: Operands as written, in order.
        line: 1-based line number in the model's reply.
        column: 1-based column where the mnemonic starts.
        text: The instruction as written (without label or comment).
        operand_columns: 1-based column of each operand, for diagnostics.
    """

    op: Opcode
    operands: tuple[Operand, ...]
    line: int
    column: int
    text: str
    operand_columns: tuple[int, ...] = ()

    def __str__(self) -> str:
        if not self.operands:
            return self.op.value
        shown = self.operands[:1] if self.op is Opcode.SAY else self.operands
        return f"{self.op.value} " + ", ".join(str(o) for o in shown)


@dataclass(frozen=True, slots=True)
class UnknownInstruction:
    """A line shaped like an instruction whose mnemonic the language does not have."""

    mnemonic: str
    line: int
    column: int
    text: str


@dataclass(frozen=True, slots=True)
class Program:
    """A parsed plan.

    Attributes:
        instructions: The code, in order.
        labels: Lower-cased code label to the index of the instruction it marks
            (``len(instructions)`` for a label at the very end).
        data: Lower-cased data label to its value.
        entry: Index of the first instruction to run.
        source_lines: The model's reply split into lines (for carets in messages).
        unknown: Instruction-shaped lines with an unknown mnemonic (the verifier reports them).
        label_lines: Lower-cased label to ``(line, column)`` of every definition (duplicates too).
        label_names: Lower-cased label to the label as written.
        entry_name: The name given by a ``global NAME`` directive, as written (``None``
            without one); the verifier refuses a name that is no code label.
        entry_site: ``(line, column)`` of that name in the reply (``(0, 0)`` without one).
        memory: Lower-cased data label to its cells (see :class:`MemoryLabel`).
    """

    instructions: tuple[Instruction, ...]
    labels: dict[str, int] = field(default_factory=dict)
    data: dict[str, Value] = field(default_factory=dict)
    entry: int = 0
    source_lines: tuple[str, ...] = ()
    unknown: tuple[UnknownInstruction, ...] = ()
    label_lines: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    label_names: dict[str, str] = field(default_factory=dict)
    entry_name: str | None = None
    entry_site: tuple[int, int] = (0, 0)
    memory: dict[str, MemoryLabel] = field(default_factory=dict)

    def source_of(self, line: int) -> str:
        """Return the text of 1-based ``line`` of the reply, or ``""``."""
        if 1 <= line <= len(self.source_lines):
            return self.source_lines[line - 1]
        return ""

    def listing(self) -> str:
        """Return the program as text, one instruction per line, labels included."""
        by_index: dict[int, list[str]] = {}
        for key, index in self.labels.items():
            by_index.setdefault(index, []).append(self.label_names.get(key, key))
        out: list[str] = []
        for index, instruction in enumerate(self.instructions):
            out.extend(f"{name}:" for name in sorted(by_index.get(index, [])))
            out.append(f"    {instruction}")
        out.extend(f"{name}:" for name in sorted(by_index.get(len(self.instructions), [])))
        return "\n".join(out)


@dataclass(frozen=True, slots=True)
class PlainAnswer:
    """A reply that holds no instruction at all: the model answered in words."""

    text: str


class ToolShape(Protocol):
    """What the verifier and emulator need to know of a tool: its name and its arity.

    A tool may also tell more, read where present: ``result_types`` (the annotations of its
    results, for the shapes the check follows) and ``refuses(position, value)`` (why it
    would refuse a value written in the plan for a parameter, or ``None``; see
    :meth:`llassembly.machine.externs.Extern.refuses`).
    """

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> Sequence[object]: ...

    @property
    def n_results(self) -> int: ...


_T = TypeVar("_T")


def find_tool(name: str, tools: Mapping[str, _T]) -> _T | None:
    """Return the tool called ``name``: an exact match, else the unique case-insensitive one."""
    exact = tools.get(name)
    if exact is not None:
        return exact
    lowered = name.lower()
    matches = [tool for key, tool in tools.items() if key.lower() == lowered]
    return matches[0] if len(matches) == 1 else None
