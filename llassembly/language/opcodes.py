"""The instruction set's names: every opcode, and every register a plan can name.

The facts about each opcode (operands, effects, control flow) are in
:mod:`llassembly.language.instructions`; the parsed forms in :mod:`llassembly.language.program`.
"""

from __future__ import annotations

import enum

__all__ = [
    "EAX_INDEX",
    "ECX_INDEX",
    "EDX_INDEX",
    "REGISTER_COUNT",
    "XMM0_INDEX",
    "Opcode",
    "register_index",
    "register_name",
]


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
    ROUNDSD = "ROUNDSD"
    # The plan's answer to the user (see "Answers" in docs/language.md).
    SAY = "SAY"
    # Structured values and text (see "Structured values" and "Text" in docs/language.md).
    LEN = "LEN"
    HAS = "HAS"
    FIND = "FIND"
    SUBSTR = "SUBSTR"
    CMPI = "CMPI"
    LOWER = "LOWER"
    UPPER = "UPPER"
    NUM = "NUM"


# Registers: R0..R100 are slots 0..100; the x86-style names follow, then xmm0..xmm15.
_X86_NAMES = ("EAX", "EBX", "ECX", "EDX", "ESI", "EDI", "EBP")
_XMM_NAMES = tuple(f"XMM{i}" for i in range(16))
REGISTER_COUNT = 101 + len(_X86_NAMES) + len(_XMM_NAMES)
EAX_INDEX = 101
ECX_INDEX = 103
EDX_INDEX = 104
XMM0_INDEX = 101 + len(_X86_NAMES)
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
