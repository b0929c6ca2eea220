"""The instruction set: every opcode, every register, and the one table of instruction facts
(:data:`OPCODE_INFO`), which every stage asks instead of keeping its own list of opcodes, as
CPython's ``dis`` asks ``opcode``; :func:`~llassembly.language.program.effects` applies it to
one parsed instruction (see *Facts in one place* in ``docs/architecture.md``).

Operand forms are written as C's inline assembly writes its constraints: ``"=reg"`` is written
and not read, ``"+reg"`` read and written, a bare kind only read; after a ``;`` come the
registers used without being named (``"value; +EAX =EDX"`` is ``DIV src``: it reads ``src``
and ``EAX``, writes ``EAX`` and ``EDX``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

# The conditions this machine tests, each with its x86 condition-code spellings (see "Flags" in
# docs/language.md: there is no separate sign or carry flag; S and B read LT).
_CONDITIONS: dict[str, tuple[str, ...]] = {
    "E": ("E", "Z"),
    "NE": ("NE", "NZ"),
    "L": ("L", "LT", "B", "C", "S", "NGE", "NAE"),
    "LE": ("LE", "BE", "NG", "NA"),
    "G": ("G", "GT", "A", "NLE", "NBE"),
    "GE": ("GE", "AE", "NC", "NS", "NL", "NB"),
}
_CONDITIONAL = ("J", "SET", "CMOV")


Opcode = enum.Enum(
    "Opcode",
    "MOV PUSH POP ADD SUB MUL INC DEC CMP JMP JE JNE JL JLE JG JGE CALL RET NOP HLT "
    # x86 habits (see docs/language.md): division, bit logic, shifts, addresses, loops,
    # flags into values, swaps and floating point by the SSE names.
    "DIV MOD AND OR XOR NOT NEG TEST SHL SHR SAR LEA LOOP XCHG "
    "SETE SETNE SETL SETLE SETG SETGE CMOVE CMOVNE CMOVL CMOVLE CMOVG CMOVGE "
    "CVTSI2SD CVTTSD2SI CVTSD2SI ADDSD SUBSD MULSD DIVSD SQRTSD MINSD MAXSD ROUNDSD "
    # The plan's answer to the user, then structured values and text (see "Answers",
    # "Structured values" and "Text" in docs/language.md).
    "SAY LEN HAS KEYS FIND SUBSTR CMPI LOWER UPPER NUM",
)
Opcode.__doc__ = """Every instruction of the language, by its name (aliases map onto these, see
:data:`MNEMONICS`); the conditional jumps, sets and moves are one per condition (``JE`` ...
``CMOVGE``)."""


# Registers: R0..R100 are slots 0..100; the x86-style names follow, then xmm0..xmm15.
_X86_NAMES = ("EAX", "EBX", "ECX", "EDX", "ESI", "EDI", "EBP")
_XMM_NAMES = tuple(f"XMM{i}" for i in range(16))
REGISTER_COUNT = 101 + len(_X86_NAMES) + len(_XMM_NAMES)
EAX_INDEX = 101
ECX_INDEX = 103
EDX_INDEX = 104
XMM0_INDEX = 101 + len(_X86_NAMES)
_REGISTER_NAMES = [f"R{i}" for i in range(101)] + list(_X86_NAMES) + list(_XMM_NAMES)
_REGISTER_INDEX = {name: index for index, name in enumerate(_REGISTER_NAMES)}
# RAX..RBP, AX..BP and AL..BPL, the 64-, 16- and 8-bit names, are the same registers (SETcc
# writes AL; nothing here is a byte).
for _name, _byte in zip(_X86_NAMES, ("AL", "BL", "CL", "DL", "SIL", "DIL", "BPL"), strict=True):
    for _alias in ("R" + _name[1:], _name[1:], _byte):
        _REGISTER_INDEX[_alias] = _REGISTER_INDEX[_name]


def register_index(name: str) -> int | None:
    """Return the slot of a register name (any case), or ``None`` if it is not a register."""
    return _REGISTER_INDEX.get(name.upper())


def register_name(index: int) -> str:
    """Return the canonical name of register slot ``index``."""
    return _REGISTER_NAMES[index]


OperandKind = Literal["reg", "value", "label", "target", "mem", "count"]
"""``reg``: where a result goes (a register, a memory operand or a variable); ``value``: register,
number, string, data label or memory operand; ``label``: a code label; ``target``: a tool name or a
code label; ``mem``: a memory operand whose address is computed and not read (``LEA``); ``count``: a
whole number written in the plan (``CALL tool, N``: the arguments pushed)."""
Flow = Literal["next", "jump", "branch", "call", "return", "halt"]
"""Where control goes after an instruction: see :func:`successors`."""


@dataclass(frozen=True, slots=True)
class Form:
    """One operand shape of an opcode (its operand ``kinds``, in order) and what it does with
    each: the positions whose value it reads and those it writes, and the registers it reads and
    writes without naming them (``MUL src`` reads ``EAX``; ``DIV src`` writes ``EAX``, ``EDX``)."""

    kinds: tuple[OperandKind, ...]
    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    implicit_reads: tuple[int, ...] = ()
    implicit_writes: tuple[int, ...] = ()


def _form(spec: str) -> Form:
    """A :class:`Form` from its spelling: ``"+reg, value; +EAX =EDX"`` (see the module doc)."""
    named, _, implicit = spec.partition(";")
    words = [word.strip() for word in named.split(",") if word.strip()]
    registers = [(word[0], register_index(word.lstrip("=+"))) for word in implicit.split()]
    return Form(
        cast("tuple[OperandKind, ...]", tuple(word.lstrip("=+") for word in words)),
        tuple(p for p, word in enumerate(words) if word[0] == "+" or word == "value"),
        tuple(p for p, word in enumerate(words) if word[0] in "=+"),
        tuple(cast("int", index) for access, index in registers if access != "="),
        tuple(cast("int", index) for access, index in registers if access in "=+"),
    )


@dataclass(frozen=True, slots=True)
class OpcodeInfo:
    """Static facts about one opcode.

    Attributes:
        shapes: Its operand forms, the usual one first (``DIV ECX`` beside ``DIV EAX, ECX``).
        flow: Its control flow (see :func:`successors`).
        condition: For instructions that test the flags: ``e ne l le g ge``. (``LOOP`` is
            conditional, on ``ECX``, and tests no flag.)
        sets_flags: It sets every flag: equal, less, and whether numbers or strings were compared.
        compares: It sets the flags by comparing its operands, strings too (``CMP``, ``TEST``),
            not from a number it computed.
        numeric: The values it reads must be numbers (its result is a number too).
        moves: ``(written, read)`` operand positions: the value written at the first is the
            value read at the second (``MOV``, ``XCHG``; ``CMOVcc`` writes one of two). What
            an instruction writes elsewhere is a number it computed.
        same_register: What it does when both operands are one register: ``"clears"``
            (``XOR r, r`` reads nothing and writes 0), ``"tests"`` (``TEST r, r`` tests any
            value, text too: is it empty?) or ``"equal"`` (``CMP r, r``, as ``CMP 1, 1``: equal).
        divides: Its last operand is a divisor (0 there is a division by zero).
        variadic: Its last operand kind repeats: ``SAY`` reads one more value per placeholder
            of its text (the parser adds them).
        pops: Values it takes off the data stack (and ``pushes``, puts on it); a tool ``CALL``
            takes the tool's parameters and puts its results (see
            :meth:`llassembly.analysis.cfg.ControlFlow.stack_effect`).
        produces: What it writes when it computes a value: ``"number"`` (arithmetic, ``LEN``,
            ``FIND``...), ``"text"`` (``SUBSTR``, ``LOWER``...), ``"texts"`` (the JSON list of
            texts ``KEYS`` gives) or ``""`` (a copy, or nothing).
        takes: What a structure instruction reads (``LEN``: a list, an object or text), in
            words; ``never``: the kinds of value (``analysis.shapes.Kind``) it fails on at every
            run (``LEN`` of a number, ``KEYS`` of a list), which the verifier refuses.
    """

    shapes: tuple[Form, ...]
    flow: Flow = "next"
    condition: str = ""
    sets_flags: bool = False
    compares: bool = False
    numeric: bool = False
    moves: tuple[tuple[int, int], ...] = ()
    same_register: Literal["", "clears", "tests", "equal"] = ""
    divides: bool = False
    variadic: bool = False
    pops: int = 0
    pushes: int = 0
    produces: Literal["", "number", "text", "texts"] = ""
    takes: str = ""
    never: frozenset[str] = frozenset()

    @property
    def operands(self) -> tuple[OperandKind, ...]:
        """The operand kinds of its usual form."""
        return self.shapes[0].kinds

    @property
    def ordered(self) -> bool:
        """Its condition asks for an order (less, greater): two numbers or two texts have one,
        a number and a text have none."""
        return self.condition in ("l", "le", "g", "ge")

    def shape(self, count: int) -> Form | None:
        """The form with ``count`` operands, or ``None`` when none has that many."""
        first = self.shapes[0]
        if self.variadic and count > len(first.kinds):
            extra = tuple(range(len(first.kinds), count))
            return Form(first.kinds + first.kinds[-1:] * len(extra), first.reads + extra)
        return next((form for form in self.shapes if len(form.kinds) == count), None)


def _info(*forms: str, **facts: object) -> OpcodeInfo:
    facts.setdefault("produces", "number" if facts.get("numeric") else "")  # arithmetic: numbers
    return OpcodeInfo(tuple(_form(spec) for spec in forms), **facts)  # type: ignore[arg-type]


def _each(names: str, *forms: str, **facts: object) -> dict[Opcode, OpcodeInfo]:
    """The opcodes called ``names`` (separated by spaces), which share their facts."""
    return dict.fromkeys([Opcode[name] for name in names.split()], _info(*forms, **facts))


_ARITH = {"sets_flags": True, "numeric": True}
_NUMBERS = frozenset({"int", "float", "number"})
_STRUCTURES = frozenset({"object", "map", "list", "tuple"})


OPCODE_INFO: dict[Opcode, OpcodeInfo] = {
    Opcode.MOV: _info("=reg, value", moves=((0, 1),)),
    Opcode.PUSH: _info("value", pushes=1),
    Opcode.POP: _info("=reg", pops=1),
    **_each("ADD SUB AND OR", "+reg, value", **_ARITH),
    Opcode.MUL: _info("+reg, value", "value; +EAX", "=reg, value, value", **_ARITH),
    **_each("INC DEC NEG", "+reg", **_ARITH),
    # CMPI is CMP ignoring the case of texts.
    **_each("CMP CMPI", "value, value", sets_flags=True, compares=True, same_register="equal"),
    Opcode.JMP: _info("label", flow="jump"),
    # CALL tool, N: only the first N arguments were pushed; the others take their defaults.
    Opcode.CALL: _info("target", "target, count", flow="call"),
    # At top level RET returns the value of EAX or XMM0 (see "The x86 return value").
    Opcode.RET: _info("; EAX XMM0", flow="return"),
    Opcode.NOP: _info(""),
    Opcode.HLT: _info("", flow="halt"),
    Opcode.DIV: _info("+reg, value", "value; +EAX =EDX", divides=True, **_ARITH),
    Opcode.MOD: _info("+reg, value", divides=True, **_ARITH),
    Opcode.XOR: _info("+reg, value", same_register="clears", **_ARITH),
    Opcode.NOT: _info("+reg", numeric=True),  # the flags are left as they are, as on x86
    Opcode.TEST: _info("value, value", compares=True, same_register="tests", **_ARITH),
    **_each("SHL SHR SAR", "+reg, value", "+reg", **_ARITH),
    Opcode.LEA: _info("=reg, mem", produces="number"),
    Opcode.LOOP: _info("label; +ECX", flow="branch", numeric=True),
    Opcode.XCHG: _info("+reg, +reg", moves=((0, 1), (1, 0))),
    # Conversions and floating point leave the flags as they are, as on x86.
    **_each("CVTSI2SD CVTTSD2SI CVTSD2SI SQRTSD", "=reg, value", numeric=True),
    **_each("ADDSD SUBSD MULSD MINSD MAXSD", "+reg, value", numeric=True),
    Opcode.DIVSD: _info("+reg, value", numeric=True, divides=True),
    Opcode.ROUNDSD: _info("=reg, value, value", "=reg, value", numeric=True),
    # The plan's answer to the user (see "Answers" in docs/language.md).
    Opcode.SAY: _info("value", variadic=True),
    # Structured values and text: results are numbers or text; the flags are left as they are.
    Opcode.LEN: _info(
        "=reg, value", produces="number", takes="a list, an object or text", never=_NUMBERS
    ),
    Opcode.NUM: _info(
        "=reg, value", produces="number", takes="a number or a text holding one", never=_STRUCTURES
    ),
    Opcode.HAS: _info(
        "=reg, value, value", produces="number", takes="an object or a list", never=_NUMBERS
    ),
    Opcode.FIND: _info("=reg, value, value", produces="number"),
    Opcode.KEYS: _info(
        "=reg, value",
        produces="texts",
        takes="an object",
        never=_NUMBERS | {"list", "tuple", "none"},
    ),
    Opcode.SUBSTR: _info("=reg, value, value, value", "=reg, value, value", produces="text"),
    **_each("LOWER UPPER", "=reg, value", produces="text"),
}

CONDITIONS: dict[str, Callable[[bool, bool], bool]] = {
    "e": lambda zf, lt: zf,
    "ne": lambda zf, lt: not zf,
    "l": lambda zf, lt: lt,
    "le": lambda zf, lt: lt or zf,
    "g": lambda zf, lt: not lt and not zf,
    "ge": lambda zf, lt: not lt,
}
"""Each condition on the flags ``ZF`` and ``LT`` (see ``OpcodeInfo.condition``)."""
for _cc in _CONDITIONS:  # the conditional jumps, sets and moves
    _if = {"condition": _cc.lower()}
    OPCODE_INFO[Opcode["J" + _cc]] = _info("label", flow="branch", **_if)
    OPCODE_INFO[Opcode["SET" + _cc]] = _info("=reg", produces="number", **_if)
    # CMOVcc reads its destination: it is kept when the condition does not hold.
    OPCODE_INFO[Opcode["CMOV" + _cc]] = _info("+reg, value", moves=((0, 1), (0, 0)), **_if)

# The x86 spellings of the same instructions (values have no width, lanes or sign extension).
_ALIASES = (
    (Opcode.MUL, "IMUL"),
    (Opcode.DIV, "IDIV"),
    (Opcode.HLT, "HALT"),
    (Opcode.SHL, "SAL"),
    (Opcode.LOOP, "LOOPD"),
    (Opcode.MOV, "MOVZX MOVSX MOVSXD MOVSS MOVSD MOVAPS MOVAPD MOVUPS MOVUPD MOVQ MOVD"),
    (Opcode.NOP, "CDQ CQO CWD CDQE"),
    (Opcode.CMP, "COMISS COMISD UCOMISS UCOMISD"),
    (Opcode.XOR, "PXOR XORPS XORPD"),
)
MNEMONICS: dict[str, Opcode] = {op.name: op for op in Opcode}
MNEMONICS |= {alias: op for op, names in _ALIASES for alias in names.split()}
# The single-precision names are the double-precision instructions (values have no width).
MNEMONICS |= {op.name.replace("SD", "SS", 1): op for op in Opcode if "SD" in op.name}
for _prefix in _CONDITIONAL:
    for _cc, _names in _CONDITIONS.items():
        for _spelling in _names:
            MNEMONICS.setdefault(_prefix + _spelling, Opcode[_prefix + _cc])
"""Upper-case mnemonic (including aliases) to opcode."""


def tests_carry(mnemonic: str) -> bool:
    """Whether an instruction, by the x86 name it is written with, tests the carry: ``JC``,
    ``JNC``, ``SETC``, ``SETNC``, ``CMOVC``, ``CMOVNC`` (the same conditions as ``JL``/``JGE``:
    the carry is ``LT``). Right after a tool ``CALL``, it tests whether the call failed (see
    :mod:`llassembly.analysis.cfg`, *calls the plan tests*)."""
    return any(mnemonic in (prefix + "C", prefix + "NC") for prefix in _CONDITIONAL)


def successors(info: OpcodeInfo, pc: int, target: int | None) -> tuple[int | None, ...]:
    """Where control goes after the instruction at ``pc`` (the one control-flow rule).

    ``target`` is the index of its label (a jump, ``CALL label``), ``None`` otherwise. A tool
    ``CALL`` goes on to ``pc + 1``; ``CALL label`` to the label (the return comes back to
    ``pc + 1``: see :class:`llassembly.analysis.cfg.ControlFlow`); ``RET`` (its destinations
    are the call stack's) and ``HLT`` have none here. A branch lists the taken successor first.
    """
    if info.flow in ("return", "halt"):
        return ()
    if info.flow == "jump" or (info.flow == "call" and target is not None):
        return (target,)
    return (target, pc + 1) if info.flow == "branch" else (pc + 1,)
