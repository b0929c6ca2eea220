"""The parsed form of a plan: opcodes, operands, instructions and the program.

Opcode facts (operand kinds, whether it jumps, whether it sets flags) live in one table,
:data:`OPCODE_INFO`, so the parser, the verifier, the emulator and the graph compiler agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, TypeAlias, TypeVar

__all__ = [
    "MNEMONICS",
    "OPCODE_INFO",
    "REGISTER_COUNT",
    "Flow",
    "Imm",
    "Instruction",
    "Mem",
    "MemoryLabel",
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
    "stack_effect",
    "successors",
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
    # x86 habits (see docs/language.md): division, bit logic, shifts, addresses, loops,
    # flags into values, swaps and floating point by the SSE names.
    DIV = "DIV"
    MOD = "MOD"
    AND = "AND"
    OR = "OR"
    XOR = "XOR"
    NOT = "NOT"
    NEG = "NEG"
    TEST = "TEST"
    SHL = "SHL"
    SHR = "SHR"
    SAR = "SAR"
    LEA = "LEA"
    LOOP = "LOOP"
    XCHG = "XCHG"
    SETE = "SETE"
    SETNE = "SETNE"
    SETL = "SETL"
    SETLE = "SETLE"
    SETG = "SETG"
    SETGE = "SETGE"
    CMOVE = "CMOVE"
    CMOVNE = "CMOVNE"
    CMOVL = "CMOVL"
    CMOVLE = "CMOVLE"
    CMOVG = "CMOVG"
    CMOVGE = "CMOVGE"
    CVTSI2SD = "CVTSI2SD"
    CVTTSD2SI = "CVTTSD2SI"
    CVTSD2SI = "CVTSD2SI"
    ADDSD = "ADDSD"
    SUBSD = "SUBSD"
    MULSD = "MULSD"
    DIVSD = "DIVSD"
    SQRTSD = "SQRTSD"
    MINSD = "MINSD"
    MAXSD = "MAXSD"
    # The plan's answer to the user (see "Answers" in docs/language.md).
    SAY = "SAY"


OperandKind = Literal["reg", "value", "label", "target", "mem"]
Flow = Literal["next", "jump", "branch", "call", "return", "halt"]
"""Where control goes after an instruction: see :func:`successors`."""
"""``reg``: where a result goes (a register, a memory operand or a variable); ``value``:
register, number, string, data label or memory operand; ``label``: a code label; ``target``: a
tool name or a code label; ``mem``: a memory operand (``LEA``)."""


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
    numeric: bool = False
    """Its operands (all but a plain destination) must be numbers."""
    reads_dst: bool = False
    """It reads its destination before writing it (``ADD``, not ``MOV``)."""
    forms: tuple[tuple[OperandKind, ...], ...] = ()
    """Other operand shapes it accepts (``DIV ECX`` beside ``DIV EAX, ECX``)."""
    condition: str = ""
    """For instructions that test the flags: ``e ne l le g ge``. (``LOOP`` is conditional,
    on ``ECX``, and tests no flag.)"""
    variadic: bool = False
    """Its last operand kind repeats: ``SAY`` reads one more value per placeholder of its
    text (the parser adds them, see :func:`answer_template`)."""
    flow: Flow = "next"
    """Its control flow (read by the verifier and the graph compiler through
    :func:`successors`)."""
    r0_noop: bool = False
    """Its only effect is its destination register: with ``R0`` there it changes nothing."""
    stack: tuple[int, int] = (0, 0)
    """Values it takes off the data stack and puts on it; a tool ``CALL`` takes the tool's
    parameters and puts its results (see :func:`stack_effect`)."""

    def accepts(self, count: int) -> tuple[OperandKind, ...] | None:
        """The operand shape for ``count`` operands, or ``None`` when none has that many."""
        if len(self.operands) == count:
            return self.operands
        if self.variadic and count > len(self.operands):
            return self.operands + self.operands[-1:] * (count - len(self.operands))
        return next((form for form in self.forms if len(form) == count), None)


_ARITH = OpcodeInfo(
    ("reg", "value"), sets_flags=True, writes_state=True, numeric=True, reads_dst=True
)
_UNARY = OpcodeInfo(("reg",), sets_flags=True, writes_state=True, numeric=True, reads_dst=True)
_SHIFT = OpcodeInfo(
    ("reg", "value"),
    sets_flags=True,
    writes_state=True,
    numeric=True,
    reads_dst=True,
    forms=(("reg",),),
)
_FLOAT = OpcodeInfo(("reg", "value"), writes_state=True, numeric=True, reads_dst=True)
_CONVERT = OpcodeInfo(("reg", "value"), writes_state=True, numeric=True)


def _eq_jump(condition: str) -> OpcodeInfo:
    return OpcodeInfo(
        ("label",), jump=True, conditional=True, ends_block=True, condition=condition, flow="branch"
    )


def _ord_jump(condition: str) -> OpcodeInfo:
    return OpcodeInfo(
        ("label",),
        jump=True,
        conditional=True,
        ordered=True,
        ends_block=True,
        condition=condition,
        flow="branch",
    )


def _set(condition: str) -> OpcodeInfo:
    ordered = condition not in ("e", "ne")
    return OpcodeInfo(
        ("reg",), conditional=True, ordered=ordered, writes_state=True, condition=condition
    )


def _cmov(condition: str) -> OpcodeInfo:
    ordered = condition not in ("e", "ne")
    return OpcodeInfo(
        ("reg", "value"),
        conditional=True,
        ordered=ordered,
        writes_state=True,
        condition=condition,
    )


OPCODE_INFO: dict[Opcode, OpcodeInfo] = {
    Opcode.MOV: OpcodeInfo(("reg", "value"), writes_state=True, r0_noop=True),
    Opcode.PUSH: OpcodeInfo(("value",), writes_state=True, stack=(0, 1)),
    Opcode.POP: OpcodeInfo(("reg",), writes_state=True, stack=(1, 0)),
    Opcode.ADD: replace(_ARITH, r0_noop=True),
    Opcode.SUB: replace(_ARITH, r0_noop=True),
    Opcode.MUL: OpcodeInfo(
        ("reg", "value"),
        sets_flags=True,
        writes_state=True,
        numeric=True,
        reads_dst=True,
        forms=(("value",), ("reg", "value", "value")),
        r0_noop=True,
    ),
    Opcode.INC: replace(_UNARY, r0_noop=True),
    Opcode.DEC: replace(_UNARY, r0_noop=True),
    Opcode.CMP: OpcodeInfo(("value", "value"), sets_flags=True),
    Opcode.JMP: OpcodeInfo(("label",), jump=True, ends_block=True, flow="jump"),
    Opcode.JE: _eq_jump("e"),
    Opcode.JNE: _eq_jump("ne"),
    Opcode.JL: _ord_jump("l"),
    Opcode.JLE: _ord_jump("le"),
    Opcode.JG: _ord_jump("g"),
    Opcode.JGE: _ord_jump("ge"),
    Opcode.CALL: OpcodeInfo(("target",), ends_block=True, writes_state=True, flow="call"),
    Opcode.RET: OpcodeInfo((), ends_block=True, flow="return"),
    Opcode.NOP: OpcodeInfo(()),
    Opcode.HLT: OpcodeInfo((), ends_block=True, flow="halt"),
    Opcode.DIV: OpcodeInfo(
        ("reg", "value"),
        sets_flags=True,
        writes_state=True,
        numeric=True,
        reads_dst=True,
        forms=(("value",),),
    ),
    Opcode.MOD: _ARITH,
    Opcode.AND: _ARITH,
    Opcode.OR: _ARITH,
    Opcode.XOR: _ARITH,
    Opcode.NOT: OpcodeInfo(("reg",), writes_state=True, numeric=True, reads_dst=True),
    Opcode.NEG: _UNARY,
    Opcode.TEST: OpcodeInfo(("value", "value"), sets_flags=True, numeric=True),
    Opcode.SHL: _SHIFT,
    Opcode.SHR: _SHIFT,
    Opcode.SAR: _SHIFT,
    Opcode.LEA: OpcodeInfo(("reg", "mem"), writes_state=True),
    Opcode.LOOP: OpcodeInfo(
        ("label",),
        jump=True,
        conditional=True,
        ends_block=True,
        writes_state=True,
        numeric=True,
        flow="branch",
    ),
    Opcode.XCHG: OpcodeInfo(("reg", "reg"), writes_state=True, reads_dst=True),
    Opcode.SETE: _set("e"),
    Opcode.SETNE: _set("ne"),
    Opcode.SETL: _set("l"),
    Opcode.SETLE: _set("le"),
    Opcode.SETG: _set("g"),
    Opcode.SETGE: _set("ge"),
    Opcode.CMOVE: _cmov("e"),
    Opcode.CMOVNE: _cmov("ne"),
    Opcode.CMOVL: _cmov("l"),
    Opcode.CMOVLE: _cmov("le"),
    Opcode.CMOVG: _cmov("g"),
    Opcode.CMOVGE: _cmov("ge"),
    Opcode.CVTSI2SD: _CONVERT,
    Opcode.CVTTSD2SI: _CONVERT,
    Opcode.CVTSD2SI: _CONVERT,
    Opcode.ADDSD: _FLOAT,
    Opcode.SUBSD: _FLOAT,
    Opcode.MULSD: _FLOAT,
    Opcode.DIVSD: _FLOAT,
    Opcode.SQRTSD: _CONVERT,
    Opcode.MINSD: _FLOAT,
    Opcode.MAXSD: _FLOAT,
    Opcode.SAY: OpcodeInfo(("value",), variadic=True),
}

# Condition-code spellings x86 has for each condition this machine tests (see "Flags" in
# docs/language.md: there is no separate sign or carry flag; S and B read LT).
_CONDITIONS: dict[str, tuple[str, ...]] = {
    "e": ("E", "Z"),
    "ne": ("NE", "NZ"),
    "l": ("L", "LT", "B", "C", "S", "NGE", "NAE"),
    "le": ("LE", "BE", "NG", "NA"),
    "g": ("G", "GT", "A", "NLE", "NBE"),
    "ge": ("GE", "AE", "NC", "NS", "NL", "NB"),
}
_BY_CONDITION = {
    prefix: {info.condition: op for op, info in OPCODE_INFO.items() if op.value.startswith(prefix)}
    for prefix in ("J", "SET", "CMOV")
}

MNEMONICS: dict[str, Opcode] = {op.value: op for op in Opcode} | {
    "IMUL": Opcode.MUL,
    "IDIV": Opcode.DIV,
    "HALT": Opcode.HLT,
    "SAL": Opcode.SHL,
    "LOOPD": Opcode.LOOP,
    "MOVZX": Opcode.MOV,
    "MOVSX": Opcode.MOV,
    "MOVSXD": Opcode.MOV,
    "MOVSS": Opcode.MOV,
    "MOVSD": Opcode.MOV,
    "MOVAPS": Opcode.MOV,
    "MOVAPD": Opcode.MOV,
    "MOVUPS": Opcode.MOV,
    "MOVUPD": Opcode.MOV,
    "MOVQ": Opcode.MOV,
    "MOVD": Opcode.MOV,
    "CDQ": Opcode.NOP,
    "CQO": Opcode.NOP,
    "CWD": Opcode.NOP,
    "CDQE": Opcode.NOP,
    "COMISS": Opcode.CMP,
    "COMISD": Opcode.CMP,
    "UCOMISS": Opcode.CMP,
    "UCOMISD": Opcode.CMP,
    "PXOR": Opcode.XOR,
    "XORPS": Opcode.XOR,
    "XORPD": Opcode.XOR,
    "CVTSI2SS": Opcode.CVTSI2SD,
    "CVTTSS2SI": Opcode.CVTTSD2SI,
    "CVTSS2SI": Opcode.CVTSD2SI,
    "ADDSS": Opcode.ADDSD,
    "SUBSS": Opcode.SUBSD,
    "MULSS": Opcode.MULSD,
    "DIVSS": Opcode.DIVSD,
    "SQRTSS": Opcode.SQRTSD,
    "MINSS": Opcode.MINSD,
    "MAXSS": Opcode.MAXSD,
}
for _prefix, _ops in _BY_CONDITION.items():
    for _condition, _names in _CONDITIONS.items():
        for _spelling in _names:
            MNEMONICS.setdefault(_prefix + _spelling, _ops[_condition])
"""Upper-case mnemonic (including aliases) to opcode."""

# Registers: R0..R100 are slots 0..100; the x86-style names follow, then xmm0..xmm15.
_X86_NAMES = ("EAX", "EBX", "ECX", "EDX", "ESI", "EDI", "EBP")
_XMM_NAMES = tuple(f"XMM{i}" for i in range(16))
REGISTER_COUNT = 101 + len(_X86_NAMES) + len(_XMM_NAMES)
EAX_INDEX = 101
ECX_INDEX = 103
EDX_INDEX = 104
_REGISTER_INDEX: dict[str, int] = {f"R{i}": i for i in range(101)}
for _offset, _name in enumerate(_X86_NAMES):
    _REGISTER_INDEX[_name] = 101 + _offset
    _REGISTER_INDEX["R" + _name[1:]] = 101 + _offset  # RAX..RBP: the 64-bit names
    _REGISTER_INDEX[_name[1:]] = 101 + _offset  # AX..BP: the 16-bit names
for _offset, _name in enumerate(_XMM_NAMES):
    _REGISTER_INDEX[_name] = 101 + len(_X86_NAMES) + _offset
# The 8-bit names are the same registers too (SETcc writes AL; nothing here is a byte).
for _short, _name in (("AL", "EAX"), ("BL", "EBX"), ("CL", "ECX"), ("DL", "EDX")):
    _REGISTER_INDEX[_short] = _REGISTER_INDEX[_name]
for _short, _name in (("SIL", "ESI"), ("DIL", "EDI"), ("BPL", "EBP")):
    _REGISTER_INDEX[_short] = _REGISTER_INDEX[_name]
_REGISTER_NAMES = [f"R{i}" for i in range(101)] + list(_X86_NAMES) + list(_XMM_NAMES)


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


Operand: TypeAlias = Reg | Imm | Name | Mem


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
    """What the verifier and emulator need to know of a tool: its name and its arity."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> Sequence[object]: ...

    @property
    def n_results(self) -> int: ...


_T = TypeVar("_T")


def stack_effect(info: OpcodeInfo, tool: ToolShape | None = None) -> tuple[int, int]:
    """``(values taken, values put)`` on the data stack: a tool ``CALL`` takes the tool's
    parameters and puts its results (its result in ``EAX`` instead is the caller's rule, see
    ``llassembly._layout``); every other instruction as :attr:`OpcodeInfo.stack` says."""
    if tool is not None:
        return len(tool.params), max(tool.n_results, 0)
    return info.stack


def successors(info: OpcodeInfo, pc: int, target: int | None) -> tuple[int | None, ...]:
    """Where control goes after the instruction at ``pc`` (the one control-flow rule).

    ``target`` is the index of its label (a jump, ``CALL label``), ``None`` otherwise. A tool
    ``CALL`` goes on to ``pc + 1``; ``CALL label`` to the label (the verifier adds ``pc + 1``,
    as if the subroutine returned); ``RET`` (its destinations are the call stack's) and ``HLT``
    have none here. A branch lists the taken successor first.
    """
    flow = info.flow
    if flow == "return" or flow == "halt":
        return ()
    if flow == "jump" or (flow == "call" and target is not None):
        return (target,)
    if flow == "branch":
        return (target, pc + 1)
    return (pc + 1,)


def find_tool(name: str, tools: Mapping[str, _T]) -> _T | None:
    """Return the tool called ``name``: an exact match, else the unique case-insensitive one."""
    exact = tools.get(name)
    if exact is not None:
        return exact
    lowered = name.lower()
    matches = [tool for key, tool in tools.items() if key.lower() == lowered]
    return matches[0] if len(matches) == 1 else None
