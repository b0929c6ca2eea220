"""The parsed form of a plan: operands, instructions and the program, and what each parsed
instruction reads and writes (:func:`effects`, from the one table of
:mod:`llassembly.language.instructions`, which names every opcode and register).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, Protocol, TypeAlias, TypeVar

from llassembly.language.instructions import OPCODE_INFO, Opcode, OpcodeInfo

Value: TypeAlias = int | float | str | None
"""What registers and the stack hold (``None`` is :data:`NONE`)."""

NONE: Final = None
"""The value "no value", written ``NONE`` (or ``NULL``): Python's ``None``, a value of its own
that no text is ever taken for (see *Values* in ``docs/language.md``)."""


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
        if self.value is None:
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
    """A memory operand: ``[label + base + index*scale + disp]``, any part left out (``label``
    as written, ``None`` for ``[ESI]``; ``scale`` 1, 2, 4 or 8; ``disp`` a byte offset), after
    a size word of ``size`` bytes (``dword`` is 4; 0 for none); ``text`` as written."""

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
    """A part of a structured value: ``R1.items[0].id``, ``page["next-cursor"]``, ``[EBX].name``
    (see *Structured values* in ``docs/language.md``): the ``base`` that holds the JSON text (a
    register, ``[EBX]`` read as ``EBX``, a name or a memory cell), one key per step (``Imm`` for
    a key written in the plan, else the register or variable holding it: ``[ESI]``, ``[i]``),
    and the ``text`` as written."""

    base: Reg | Name | Mem
    steps: tuple[Imm | Reg | Name, ...]
    text: str = ""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Template:
    """A string literal with placeholders (``"Invoice {R1} for {R2.name}"``), filled as it is
    read (see :mod:`llassembly.language.templates`): its ``text`` (escapes read), the ``pieces``
    around the placeholders (one more than ``fills``), what each placeholder reads (``fills``),
    its format (``specs``: ``".2f"`` from ``{R1:.2f}``, ``""`` for none) and its 1-based column
    in its line (``columns``)."""

    text: str
    pieces: tuple[str, ...]
    fills: tuple[Reg | Name | Mem | Path, ...]
    specs: tuple[str, ...]
    columns: tuple[int, ...] = ()

    def __str__(self) -> str:
        return str(Imm(self.text))


Operand: TypeAlias = Reg | Imm | Name | Mem | Path | Template


def one_place(first: object, second: object) -> bool:
    """Whether two operands are one place: one register, by any of its names (``EAX``, ``RAX``,
    ``AX`` and ``AL`` are one), or one variable, cell or path written twice alike. ``XOR r, r``
    clears it, ``TEST r, r`` tests its value, ``CMP r, r`` finds it equal (see
    :attr:`OpcodeInfo.same_register`)."""
    if isinstance(first, Reg) and isinstance(second, Reg):
        return first.index == second.index
    return isinstance(first, Name | Mem | Path) and first == second


def nested(operand: Operand) -> tuple[Operand, ...]:
    """The operands read to find ``operand``'s value or place, at any depth (not ``operand``
    itself): the registers of an address, the base and key operands of a path, the fills of a
    template. A path written is read too: its base is changed in place."""
    if isinstance(operand, Mem):
        return operand.registers
    parts: tuple[Operand, ...] = ()
    if isinstance(operand, Path | Template):
        parts = (operand.base, *operand.steps) if isinstance(operand, Path) else operand.fills
    return tuple(p for part in parts if not isinstance(part, Imm) for p in (part, *nested(part)))


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


def row_json(cells: Sequence[Value], limit: int) -> str | None:
    """The JSON list of ``cells`` (what a row read whole gives), or ``None`` when it would be
    longer than ``limit`` characters.

    The size is bounded from below before anything is built (each string is at least its
    length plus its quotes), so a row of huge strings is refused without building its text.
    """
    if len(cells) + 1 + sum(len(c) + 2 if type(c) is str else 1 for c in cells) > limit:
        return None
    text = json.dumps(list(cells), separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else None


@dataclass(frozen=True, slots=True)
class Instruction:
    """One parsed instruction: its opcode ``op`` (aliases already mapped), its ``operands`` as
    written, in order, its 1-based ``line`` in the model's reply and ``column`` where the mnemonic
    starts, its ``text`` as written (without label or comment) and the 1-based column of each
    operand (``operand_columns``, for diagnostics)."""

    op: Opcode
    operands: tuple[Operand, ...]
    line: int
    column: int
    text: str
    operand_columns: tuple[int, ...] = ()

    def __str__(self) -> str:
        shown = self.operands[:1] if OPCODE_INFO[self.op].variadic else self.operands
        return " ".join([self.op.name, ", ".join(str(o) for o in shown)]).rstrip()

    @property
    def mnemonic(self) -> str:
        """The mnemonic as the model wrote it (``JB`` rather than ``JL``), upper-cased."""
        words = self.text.split(maxsplit=1)
        return words[0].upper() if words else self.op.name


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
        code_lines: The lines of the reply read as the program (1-based; no fence nor prose).
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
    code_lines: tuple[int, ...] = ()

    def source_of(self, line: int) -> str:
        """Return the text of 1-based ``line`` of the reply, or ``""``."""
        return self.source_lines[line - 1] if 1 <= line <= len(self.source_lines) else ""

    def listing(self) -> str:
        """Return the program as text, one instruction per line, labels included."""
        # by position, each label (in name order) before the instruction it marks
        rows = [(at, 0, self.label_names.get(key, key), ":") for key, at in self.labels.items()]
        rows += [(at, 1, f"    {ins}", "") for at, ins in enumerate(self.instructions)]
        return "\n".join(text + colon for *_, text, colon in sorted(rows))


@dataclass(frozen=True, slots=True)
class PlainAnswer:
    """A reply that holds no instruction at all: the model answered in words."""

    text: str


class ToolShape(Protocol):
    """What the verifier and emulator need to know of a tool: its name and its arity.

    A tool may tell more, read if present: ``result_types`` (the annotations of its results, for the
    shapes the check follows) and ``refuses(position, value)`` (why it would refuse a value the plan
    writes for a parameter, a :class:`Template` too, or ``None``; see
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
    if name in tools:
        return tools[name]
    matches = [tool for key, tool in tools.items() if key.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else None


# -- one instruction's effects ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Effects:
    """What one instruction, with its operands as written, reads and writes: its opcode's facts
    (``info``: flow, stack, condition...) applied to its operands.

    ``registers_read`` and ``registers_written`` are every register it reads and writes: the
    implicit ones, and those named inside memory operands (an address is read to find the cell,
    whatever the instruction does with the cell); ``R0`` is never written (it always reads 0).
    Memory is found through the operand positions (a memory operand, or a data label or variable, at
    a position read or written): ``writes_memory``, it writes a cell. ``reads``, ``writes``,
    ``implicit_reads`` and ``implicit_writes`` are those of its operand form, ``numeric``, ``moves``
    and ``flags_written`` (it sets the flags) its :class:`OpcodeInfo`'s, for the operands as written
    (``XOR r, r`` reads nothing: see :attr:`OpcodeInfo.same_register`). A tool ``CALL``'s stack is
    the tool's (see :meth:`llassembly.analysis.cfg.ControlFlow.stack_effect`).
    """

    info: OpcodeInfo
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    registers_read: frozenset[int]
    registers_written: frozenset[int]
    implicit_reads: tuple[int, ...]
    implicit_writes: tuple[int, ...]
    flags_written: bool
    numeric: bool
    moves: tuple[tuple[int, int], ...]
    writes_memory: bool
    STACK: ClassVar[int] = -1  # in copies: the top of the data stack, as a place

    @property
    def copies(self) -> tuple[tuple[int, int], ...]:
        """``(to, from)``, operand positions or :attr:`STACK`: each value it writes unchanged
        (:attr:`moves`, ``POP``'s off the stack, ``PUSH``'s read); any other it computed."""
        popped = [(w, self.STACK) for w in self.writes] if self.info.pops and not self.moves else []
        return (*self.moves, *popped, *((self.STACK, r) for r in self.reads if self.info.pushes))

    @property
    def changes_state(self) -> bool:
        """It changes a register, memory, the data stack or the return stack (flags aside)."""
        stack = self.info.pops or self.info.pushes or self.info.flow == "call"
        return bool(self.registers_written or self.writes_memory or stack)


@functools.lru_cache(maxsize=16_384)
def effects(instruction: Instruction) -> Effects:
    """What ``instruction`` reads and writes (see :class:`Effects`).

    An instruction whose operands fit no form of its opcode (the verifier refuses it) is read
    by its usual form, as far as its operands go.
    """
    operands, count = instruction.operands, len(instruction.operands)
    info = OPCODE_INFO[instruction.op]
    form = info.shape(count) or info.shapes[0]
    # XOR r, r reads nothing and writes 0, TEST r, r tests text too: neither asks for numbers
    same = count == 2 and bool(info.same_register) and one_place(*operands)
    read = () if same and info.same_register == "clears" else form.reads
    reads = tuple(p for p in read if p < count)
    writes = tuple(p for p in form.writes if p < count)
    registers_read = {r.index for p in reads if isinstance(r := operands[p], Reg)}
    for operand in operands:  # an address, a path's base and keys, a template's fills
        registers_read.update(r.index for r in nested(operand) if isinstance(r, Reg))
    registers_read.update(form.implicit_reads)
    registers_written = {r.index for p in writes if isinstance(r := place_of(operands[p]), Reg)}
    registers_written.update(form.implicit_writes)
    return Effects(
        info=info,
        reads=reads,
        writes=writes,
        registers_read=frozenset(registers_read - {0}),  # R0 reads 0 whatever was written to it
        registers_written=frozenset(registers_written - {0}),
        implicit_reads=form.implicit_reads,
        implicit_writes=form.implicit_writes,
        flags_written=info.sets_flags,
        numeric=info.numeric and not same,
        moves=tuple((w, r) for w, r in info.moves if w < count and r < count),
        writes_memory=any(isinstance(place_of(operands[p]), Mem | Name) for p in writes),
    )


def place_of(operand: Operand) -> Operand:
    """Where a written operand's value lives: a path writes its base (the JSON text changes)."""
    while isinstance(operand, Path):
        operand = operand.base
    return operand


def arguments_of(tool: ToolShape, operands: Sequence[Operand]) -> int:
    """The values a ``CALL`` of ``tool`` takes: ``N`` for ``CALL tool, N`` (when ``N`` is a
    count the tool allows, see :func:`fewest_arguments`), else one per parameter."""
    count = operands[1].value if len(operands) == 2 and isinstance(operands[1], Imm) else None
    if type(count) is int and fewest_arguments(tool) <= count <= len(tool.params):
        return count
    return len(tool.params)


def param_names(tool: ToolShape) -> list[str]:
    """The names of ``tool``'s parameters, in order (a parameter given as text is its name)."""
    return [str(getattr(p, "name", p)) for p in tool.params]


def fewest_arguments(tool: ToolShape) -> int:
    """The fewest arguments a plan may push for ``tool``: up to its last parameter without a
    default (the ones after it may be left out with ``CALL tool, N``)."""
    needed = [i + 1 for i, p in enumerate(tool.params) if not getattr(p, "has_default", False)]
    return max(needed, default=0)
