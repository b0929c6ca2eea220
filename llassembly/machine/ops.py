"""Step compilers for the x86 families: division, bit logic, shifts, addresses, ``LOOP``,
``SETcc``/``CMOVcc``, ``XCHG`` and floating point by the SSE names (see ``docs/language.md``).

Shared with ``llassembly._steps``: the flag modes, the flag test of conditional instructions
and the arithmetic step that sets the flags from its result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from llassembly.language.instructions import EAX_INDEX, ECX_INDEX, EDX_INDEX, OPCODE_INFO, Opcode
from llassembly.language.program import (
    NONE,
    Instruction,
    Mem,
    Operand,
    Reg,
    Value,
)
from llassembly.machine.access import (
    Context,
    Getter,
    address_of,
    fail,
    getter,
    setter,
    show,
)
from llassembly.machine.state import (
    ORDERED,
    UNORDERED,
    UNSET,
)

if TYPE_CHECKING:
    from llassembly.machine.state import MachineState

__all__ = [
    "CONDITIONS",
    "EAX",
    "NEW_COMPILERS",
    "ORDERED",
    "UNORDERED",
    "UNSET",
    "arith",
    "flags_check",
    "mnemonic",
]

Step: TypeAlias = "Callable[[MachineState, int], int]"
INT_LIMIT = 2**63 - 1
_MASK64 = (1 << 64) - 1
# Flag modes: no flag-setting instruction yet, numbers compared, strings compared.
EAX = Reg(EAX_INDEX, "EAX")
ECX = Reg(ECX_INDEX, "ECX")
EDX = Reg(EDX_INDEX, "EDX")


def mnemonic(ins: Instruction) -> str:
    """The mnemonic as the model wrote it (``IDIV`` rather than ``DIV``), upper-cased."""
    words = ins.text.split(maxsplit=1)
    return words[0].upper() if words else ins.op.value


def flags_check(ins: Instruction) -> Callable[[MachineState], None]:
    """What an instruction that tests the flags checks first: that they are set, and set by
    a compare of numbers when it tests an order."""
    ordered = OPCODE_INFO[ins.op].ordered
    name = mnemonic(ins)

    def check(st: MachineState) -> None:
        mode = st.flag_mode
        if mode != ORDERED and (ordered or mode == UNSET):
            if mode == UNSET:
                raise fail(ins, f"{name} before any CMP or arithmetic set the flags")
            raise fail(
                ins,
                f"{name} needs an ordered compare, but the last CMP or TEST compared strings "
                "(only JE/JNE are defined for strings)",
            )

    return check


CONDITIONS: dict[str, Callable[[bool, bool], bool]] = {
    "e": lambda zf, lt: zf,
    "ne": lambda zf, lt: not zf,
    "l": lambda zf, lt: lt,
    "le": lambda zf, lt: lt or zf,
    "g": lambda zf, lt: not lt and not zf,
    "ge": lambda zf, lt: not lt,
}
"""Each condition on the flags (see ``OpcodeInfo.condition``)."""


def arith(
    ins: Instruction,
    ctx: Context,
    op: Callable[[Any, Any], Any],
    src: Getter,
    target: Operand | None = None,
    first: Getter | None = None,
) -> Step:
    """``target = first op src`` with the flags set from the result (numbers only)."""
    target = ins.operands[0] if target is None else target
    put = setter(target, ctx, ins)
    reg = target.index if isinstance(target, Reg) else -1  # registers: written in place
    name = mnemonic(ins)
    read_dst: Getter = getter(target, ctx, ins) if first is None else first

    def step(st: MachineState, pc: int) -> int:
        a, b = read_dst(st), src(st)
        if type(a) is str or type(b) is str:
            raise fail(ins, f"{name} needs numbers, got {show(a)} and {show(b)}")
        try:
            result = op(a, b)
        except OverflowError:  # an int too large to mix with a float
            raise fail(ins, f"{name} overflowed the number range") from None
        if type(result) is int:
            if not -INT_LIMIT - 1 <= result <= INT_LIMIT:
                raise fail(ins, f"{name} overflowed the 64-bit integer range")
        elif not math.isfinite(result):
            raise fail(ins, f"{name} gave a non-finite number ({result})")
        if reg >= 0:
            st.regs[reg] = result
        else:
            put(st, result)
        st.zf = result == 0
        st.lt = result < 0
        st.flag_mode = ORDERED
        return pc + 1

    return step


def _numbers(ins: Instruction, *values: Value) -> None:
    if any(type(v) is str for v in values):
        shown = " and ".join(show(v) for v in values)
        raise fail(ins, f"{mnemonic(ins)} needs numbers, got {shown}")


def _ints(ins: Instruction, *values: Value) -> None:
    if any(type(v) is not int for v in values):
        shown = " and ".join(show(v) for v in values)
        raise fail(
            ins,
            f"{mnemonic(ins)} needs whole numbers, got {shown} (bit operations are defined on "
            "integers only)",
        )


def _set_flags(st: MachineState, result: Value) -> None:
    st.zf = result == 0
    st.lt = result < 0  # type: ignore[operator]  # a number here
    st.flag_mode = ORDERED


def _checked(ins: Instruction, result: int | float) -> int | float:
    """A result within the machine's numbers: a 64-bit integer or a finite float."""
    if type(result) is int:
        if not -INT_LIMIT - 1 <= result <= INT_LIMIT:
            raise fail(ins, f"{mnemonic(ins)} overflowed the 64-bit integer range")
    elif not math.isfinite(result):
        raise fail(ins, f"{mnemonic(ins)} gave a non-finite number ({result})")
    return result


def _update(
    ins: Instruction, ctx: Context, compute: Callable[[MachineState, Value, Value], Value | None]
) -> Step:
    """``dst = compute(state, dst, src)`` (``None``: leave ``dst``), one or two operands."""
    dst = ins.operands[0]
    read, put = getter(dst, ctx, ins), setter(dst, ctx, ins)
    src = getter(ins.operands[1], ctx, ins) if len(ins.operands) > 1 else (lambda st: 1)

    def step(st: MachineState, pc: int) -> int:
        result = compute(st, read(st), src(st))
        if result is not None:
            put(st, result)
        return pc + 1

    return step


# -- division ---------------------------------------------------------------------------------


def _divide(ins: Instruction, a: Value, b: Value) -> tuple[int | float, int | float]:
    """Quotient and remainder as x86 ``IDIV`` gives them: truncated toward zero, the
    remainder with the sign of the dividend; with a float, the exact quotient and ``fmod``."""
    _numbers(ins, a, b)
    if b == 0:
        raise fail(ins, f"{mnemonic(ins)}: division by zero")
    if type(a) is int and type(b) is int:
        quotient = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            quotient = -quotient
        return _checked(ins, quotient), a - quotient * b
    try:
        return _checked(ins, a / b), math.fmod(a, b)  # type: ignore[operator,arg-type]
    except OverflowError:
        raise fail(ins, f"{mnemonic(ins)} overflowed the number range") from None


def _compile_div(ins: Instruction, ctx: Context) -> Step:
    if len(ins.operands) == 1:  # DIV src: EAX = EAX / src, EDX = the remainder
        src, eax = getter(ins.operands[0], ctx, ins), getter(EAX, ctx, ins)

        def step(st: MachineState, pc: int) -> int:
            quotient, remainder = _divide(ins, eax(st), src(st))
            st.regs[EAX_INDEX], st.regs[EDX_INDEX] = quotient, remainder
            _set_flags(st, quotient)
            return pc + 1

        return step

    def quotient(st: MachineState, a: Value, b: Value) -> Value:
        result = _divide(ins, a, b)[0]
        _set_flags(st, result)
        return result

    return _update(ins, ctx, quotient)


def _compile_mod(ins: Instruction, ctx: Context) -> Step:
    def remainder(st: MachineState, a: Value, b: Value) -> Value:
        result = _divide(ins, a, b)[1]
        _set_flags(st, result)
        return result

    return _update(ins, ctx, remainder)


# -- bit logic and shifts ---------------------------------------------------------------------


def _same_register(ins: Instruction) -> bool:
    first, second = ins.operands[0], ins.operands[-1]
    return len(ins.operands) == 2 and isinstance(first, Reg) and first == second


def _logic(op: Callable[[int, int], int]) -> Callable[[Instruction, Context], Step]:
    def compile_logic(ins: Instruction, ctx: Context) -> Step:
        clears = OPCODE_INFO[ins.op].same_register == "clears" and _same_register(ins)

        def compute(st: MachineState, a: Value, b: Value) -> Value:
            if clears:  # XOR r, r: 0, whatever r held
                result = 0
            else:
                _ints(ins, a, b)
                result = op(a, b)  # type: ignore[arg-type]
            _set_flags(st, result)
            return result

        return _update(ins, ctx, compute)

    return compile_logic


def _compile_not(ins: Instruction, ctx: Context) -> Step:
    def compute(st: MachineState, a: Value, b: Value) -> Value:
        _ints(ins, a)
        return ~a  # type: ignore[operator]  # NOT leaves the flags as they are, as on x86

    return _update(ins, ctx, compute)


def _compile_neg(ins: Instruction, ctx: Context) -> Step:
    def compute(st: MachineState, a: Value, b: Value) -> Value:
        _numbers(ins, a)
        result = _checked(ins, -a)  # type: ignore[operator]
        _set_flags(st, result)
        return result

    return _update(ins, ctx, compute)


def _compile_test(ins: Instruction, ctx: Context) -> Step:
    get_a, get_b = getter(ins.operands[0], ctx, ins), getter(ins.operands[1], ctx, ins)
    same = ins.operands[0] == ins.operands[1]

    def step(st: MachineState, pc: int) -> int:
        a, b = get_a(st), get_b(st)
        if same and type(a) is str:  # TEST r, r on text: is it empty (NONE is)?
            st.zf, st.lt, st.flag_mode = a in ("", NONE), False, UNORDERED
            return pc + 1
        if same:  # TEST r, r on a number: zero? negative?
            _set_flags(st, a)
            return pc + 1
        _ints(ins, a, b)
        _set_flags(st, a & b)  # type: ignore[operator]
        return pc + 1

    return step


def _shift_count(ins: Instruction, count: Value) -> int:
    if type(count) is not int or not 0 <= count <= 63:
        raise fail(ins, f"{mnemonic(ins)} shifts by 0 to 63 bits, not {show(count)}")
    return count


def _shift(op: Callable[[int, int], int]) -> Callable[[Instruction, Context], Step]:
    def compile_shift(ins: Instruction, ctx: Context) -> Step:
        def compute(st: MachineState, a: Value, b: Value) -> Value:
            _ints(ins, a)
            result = _checked(ins, op(a, _shift_count(ins, b)))  # type: ignore[arg-type]
            _set_flags(st, result)
            return result

        return _update(ins, ctx, compute)

    return compile_shift


def _shr(a: int, n: int) -> int:
    """Logical shift: the 64-bit pattern of ``a`` shifted in zeros (a negative ``a`` shifted by
    at least one bit becomes a large positive number, as on x86)."""
    return a >> n if a >= 0 or n == 0 else (a & _MASK64) >> n


# -- addresses, loops, swaps ------------------------------------------------------------------


def _compile_lea(ins: Instruction, ctx: Context) -> Step:
    mem = ins.operands[1]
    if not isinstance(mem, Mem):
        raise fail(ins, "LEA needs a memory operand (was the program verified?)")
    address, put = address_of(mem, ctx, ins), setter(ins.operands[0], ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        put(st, address(st))
        return pc + 1

    return step


def _compile_loop(ins: Instruction, ctx: Context) -> Step:
    label = ins.operands[0]
    target = ctx.program.labels[str(label).lower()]

    def step(st: MachineState, pc: int) -> int:
        count = st.regs[ECX_INDEX]
        if type(count) is not int:
            raise fail(ins, f"LOOP counts down ECX, which holds {show(count)}, not a whole number")
        st.regs[ECX_INDEX] = count = count - 1
        if count < -INT_LIMIT:
            raise fail(ins, "LOOP overflowed the 64-bit integer range")
        return target if count != 0 else pc + 1

    return step


def _compile_xchg(ins: Instruction, ctx: Context) -> Step:
    first, second = ins.operands
    get_a, put_a = getter(first, ctx, ins), setter(first, ctx, ins)
    get_b, put_b = getter(second, ctx, ins), setter(second, ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        a, b = get_a(st), get_b(st)
        put_a(st, b)
        put_b(st, a)
        return pc + 1

    return step


# -- flags into values ------------------------------------------------------------------------


def _compile_set(ins: Instruction, ctx: Context) -> Step:
    check, taken = flags_check(ins), CONDITIONS[OPCODE_INFO[ins.op].condition]
    put = setter(ins.operands[0], ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        check(st)
        put(st, 1 if taken(st.zf, st.lt) else 0)
        return pc + 1

    return step


def _compile_cmov(ins: Instruction, ctx: Context) -> Step:
    check, taken = flags_check(ins), CONDITIONS[OPCODE_INFO[ins.op].condition]
    put, get = setter(ins.operands[0], ctx, ins), getter(ins.operands[1], ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        check(st)
        if taken(st.zf, st.lt):
            put(st, get(st))
        return pc + 1

    return step


# -- floating point ---------------------------------------------------------------------------


def _float_op(op: Callable[[float, float], float]) -> Callable[[Instruction, Context], Step]:
    """SSE arithmetic: on floats, the flags left as they are (as on x86)."""

    def compile_float(ins: Instruction, ctx: Context) -> Step:
        def compute(st: MachineState, a: Value, b: Value) -> Value:
            _numbers(ins, a, b)
            try:
                return _checked(ins, op(float(a), float(b)))
            except ZeroDivisionError:
                raise fail(ins, f"{mnemonic(ins)}: division by zero") from None
            except (OverflowError, ValueError):
                raise fail(ins, f"{mnemonic(ins)} gave no finite number") from None

        return _update(ins, ctx, compute)

    return compile_float


def _convert(op: Callable[[Value], Value]) -> Callable[[Instruction, Context], Step]:
    """``dst = op(src)``: conversions and square roots, the flags left as they are."""

    def compile_convert(ins: Instruction, ctx: Context) -> Step:
        def compute(st: MachineState, a: Value, b: Value) -> Value:
            _numbers(ins, b)
            try:
                return _checked(ins, op(b))  # type: ignore[arg-type]
            except (OverflowError, ValueError):
                raise fail(ins, f"{mnemonic(ins)} cannot convert {show(b)}") from None

        return _update(ins, ctx, compute)

    return compile_convert


def _sqrt(value: Value) -> float:
    if value < 0:  # type: ignore[operator]
        raise ValueError(value)
    return math.sqrt(value)  # type: ignore[arg-type]


NEW_COMPILERS: dict[Opcode, Callable[[Instruction, Context], Step]] = {
    Opcode.DIV: _compile_div,
    Opcode.MOD: _compile_mod,
    Opcode.AND: _logic(lambda a, b: a & b),
    Opcode.OR: _logic(lambda a, b: a | b),
    Opcode.XOR: _logic(lambda a, b: a ^ b),
    Opcode.NOT: _compile_not,
    Opcode.NEG: _compile_neg,
    Opcode.TEST: _compile_test,
    Opcode.SHL: _shift(lambda a, n: a << n),
    Opcode.SHR: _shift(_shr),
    Opcode.SAR: _shift(lambda a, n: a >> n),
    Opcode.LEA: _compile_lea,
    Opcode.LOOP: _compile_loop,
    Opcode.XCHG: _compile_xchg,
    Opcode.SETE: _compile_set,
    Opcode.SETNE: _compile_set,
    Opcode.SETL: _compile_set,
    Opcode.SETLE: _compile_set,
    Opcode.SETG: _compile_set,
    Opcode.SETGE: _compile_set,
    Opcode.CMOVE: _compile_cmov,
    Opcode.CMOVNE: _compile_cmov,
    Opcode.CMOVL: _compile_cmov,
    Opcode.CMOVLE: _compile_cmov,
    Opcode.CMOVG: _compile_cmov,
    Opcode.CMOVGE: _compile_cmov,
    Opcode.CVTSI2SD: _convert(float),
    Opcode.CVTTSD2SI: _convert(lambda v: int(v)),
    Opcode.CVTSD2SI: _convert(lambda v: round(float(v))),
    Opcode.ADDSD: _float_op(lambda a, b: a + b),
    Opcode.SUBSD: _float_op(lambda a, b: a - b),
    Opcode.MULSD: _float_op(lambda a, b: a * b),
    Opcode.DIVSD: _float_op(lambda a, b: a / b),
    Opcode.SQRTSD: _convert(_sqrt),
    Opcode.MINSD: _float_op(min),
    Opcode.MAXSD: _float_op(max),
}
"""Compilers of the x86 families, merged into ``llassembly._steps``' table."""
