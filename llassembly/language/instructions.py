"""The one table of instruction facts: what each opcode takes, reads, writes and where it goes.

Every stage asks this table (:data:`OPCODE_INFO`) instead of keeping its own list of opcodes:
the scanner and parser (operand shapes, mnemonics and aliases), the verifier and the plan
summary (effects, control flow), the machine's compilers and the graph compiler.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from llassembly.language.opcodes import Opcode
from llassembly.language.program import ToolShape

__all__ = [
    "MNEMONICS",
    "OPCODE_INFO",
    "Flow",
    "OpcodeInfo",
    "OperandKind",
    "stack_effect",
    "successors",
]


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
