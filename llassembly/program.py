"""The parsed form of a plan: opcodes, operands, instructions and the program.

Opcode facts (operand kinds, whether it jumps, whether it sets flags) live in one table,
:data:`OPCODE_INFO`, so the parser, the verifier, the emulator and the graph compiler agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, TypeVar

__all__ = [
    "MNEMONICS",
    "OPCODE_INFO",
    "REGISTER_COUNT",
    "Imm",
    "Instruction",
    "Name",
    "Opcode",
    "OpcodeInfo",
    "Operand",
    "OperandKind",
    "PlainAnswer",
    "Program",
    "Reg",
    "ToolShape",
    "UnknownInstruction",
    "Value",
    "find_tool",
    "register_index",
    "register_name",
]

Value: TypeAlias = int | float | str
"""What registers and the stack hold."""


class Opcode(enum.Enum):
    """Every instruction of the language (aliases map onto these, see :data:`MNEMONICS`)."""

    MOV = "MOV"
    PUSH = "PUSH"
    POP = "POP"
    ADD = "ADD"
    SUB = "SUB"
    MUL = "MUL"
    INC = "INC"
    DEC = "DEC"
    CMP = "CMP"
    JMP = "JMP"
    JE = "JE"
    JNE = "JNE"
    JL = "JL"
    JLE = "JLE"
    JG = "JG"
    JGE = "JGE"
    CALL = "CALL"
    RET = "RET"
    NOP = "NOP"
    HLT = "HLT"


OperandKind = Literal["reg", "value", "label", "target"]
"""``reg``: a register to write; ``value``: register, number, string or data label;
``label``: a code label; ``target``: a tool name or a code label."""


@dataclass(frozen=True, slots=True)
class OpcodeInfo:
    """Static facts about one opcode."""

    operands: tuple[OperandKind, ...]
    jump: bool = False
    conditional: bool = False
    ordered: bool = False
    sets_flags: bool = False
    ends_block: bool = False
    writes_state: bool = False


_ARITH = OpcodeInfo(("reg", "value"), sets_flags=True, writes_state=True)
_UNARY = OpcodeInfo(("reg",), sets_flags=True, writes_state=True)
_EQ_JUMP = OpcodeInfo(("label",), jump=True, conditional=True, ends_block=True)
_ORD_JUMP = OpcodeInfo(("label",), jump=True, conditional=True, ordered=True, ends_block=True)

OPCODE_INFO: dict[Opcode, OpcodeInfo] = {
    Opcode.MOV: OpcodeInfo(("reg", "value"), writes_state=True),
    Opcode.PUSH: OpcodeInfo(("value",), writes_state=True),
    Opcode.POP: OpcodeInfo(("reg",), writes_state=True),
    Opcode.ADD: _ARITH,
    Opcode.SUB: _ARITH,
    Opcode.MUL: _ARITH,
    Opcode.INC: _UNARY,
    Opcode.DEC: _UNARY,
    Opcode.CMP: OpcodeInfo(("value", "value"), sets_flags=True),
    Opcode.JMP: OpcodeInfo(("label",), jump=True, ends_block=True),
    Opcode.JE: _EQ_JUMP,
    Opcode.JNE: _EQ_JUMP,
    Opcode.JL: _ORD_JUMP,
    Opcode.JLE: _ORD_JUMP,
    Opcode.JG: _ORD_JUMP,
    Opcode.JGE: _ORD_JUMP,
    Opcode.CALL: OpcodeInfo(("target",), ends_block=True, writes_state=True),
    Opcode.RET: OpcodeInfo((), ends_block=True),
    Opcode.NOP: OpcodeInfo(()),
    Opcode.HLT: OpcodeInfo((), ends_block=True),
}

MNEMONICS: dict[str, Opcode] = {op.value: op for op in Opcode} | {
    "IMUL": Opcode.MUL,
    "JZ": Opcode.JE,
    "JNZ": Opcode.JNE,
    "JLT": Opcode.JL,
    "JB": Opcode.JL,
    "JBE": Opcode.JLE,
    "JGT": Opcode.JG,
    "JA": Opcode.JG,
    "JAE": Opcode.JGE,
    "HALT": Opcode.HLT,
}
"""Upper-case mnemonic (including aliases) to opcode."""

# Registers: R0..R100 are slots 0..100; the x86-style names follow.
_X86_NAMES = ("EAX", "EBX", "ECX", "EDX", "ESI", "EDI", "EBP")
REGISTER_COUNT = 101 + len(_X86_NAMES)
_REGISTER_INDEX: dict[str, int] = {f"R{i}": i for i in range(101)}
for _offset, _name in enumerate(_X86_NAMES):
    _REGISTER_INDEX[_name] = 101 + _offset
    _REGISTER_INDEX["R" + _name[1:]] = 101 + _offset
_REGISTER_NAMES = [f"R{i}" for i in range(101)] + list(_X86_NAMES)


def register_index(name: str) -> int | None:
    """Return the slot of a register name (any case), or ``None`` if it is not a register."""
    return _REGISTER_INDEX.get(name.upper())


def register_name(index: int) -> str:
    """Return the canonical name of register slot ``index``."""
    return _REGISTER_NAMES[index]


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
        if isinstance(self.value, str):
            return '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Name:
    """An identifier: a code label, a data label or a tool name (resolved by the verifier)."""

    name: str

    def __str__(self) -> str:
        return self.name


Operand: TypeAlias = Reg | Imm | Name


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
        return f"{self.op.value} " + ", ".join(str(o) for o in self.operands)


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
    """What the verifier and emulator need to know of a tool: its name and its arity."""

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
