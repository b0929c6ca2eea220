"""Compiling a verified program into step closures, one compiler per opcode.

A step function takes the machine state and its own pc and returns the next pc. Every
instruction is compiled once, so the emulator's loop is a list index and a call. The table
``_COMPILERS`` is checked against :class:`~llassembly.language.instructions.Opcode` at import: a
missing handler fails at import, not at run time. Which instruction is a tool call, and where a
result goes, comes from the control-flow graph (:mod:`llassembly.analysis.cfg`).

The families: moves and the stack, arithmetic and compares (the flag modes, the flag test of
conditional instructions, the arithmetic step that sets the flags from its result), jumps and
subroutines, and x86's division, bit logic, shifts, addresses, ``LOOP``, ``SETcc``/``CMOVcc``,
``XCHG`` and floating point by the SSE names (see ``docs/language.md``); text and structures are
:mod:`llassembly.machine.text`'s.

The same steps are the plan summary's semantics (:class:`StepSemantics`, installed at import):
the summary runs an instruction whose inputs it knows by its own step, so a constant it shows
is the value the run computes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from llassembly.analysis.cfg import ControlFlow, Layout, control_flow, layout_of
from llassembly.analysis.constants import FAILS, Fails, Outcome, Run, install_semantics
from llassembly.analysis.policies import DataFlowPolicy
from llassembly.analysis.verifier import verify
from llassembly.errors import AsmRuntimeError, StackDepthExceeded, UsageError
from llassembly.language.instructions import (
    EAX_INDEX,
    ECX_INDEX,
    EDX_INDEX,
    OPCODE_INFO,
    Opcode,
    OpcodeInfo,
)
from llassembly.language.limits import DEFAULT_MAX_STACK_DEPTH, INT_MAX, INT_MIN
from llassembly.language.program import Instruction, Mem, Name, Operand, Program, Reg, Value
from llassembly.machine.access import (
    Context,
    Getter,
    address_of,
    fail,
    getter,
    setter,
    show,
)
from llassembly.machine.externs import Extern, ToolSpec, externs_of
from llassembly.machine.provenance import Guards, guards_for, instrument
from llassembly.machine.state import ORDERED, UNORDERED, UNSET, MachineState
from llassembly.machine.text import TEXT_COMPILERS, compile_say, returned_value, text_flags

Step: TypeAlias = "Callable[[MachineState, int], int]"
_MASK64 = (1 << 64) - 1
EAX = Reg(EAX_INDEX, "EAX")
ECX = Reg(ECX_INDEX, "ECX")
EDX = Reg(EDX_INDEX, "EDX")


def flags_check(ins: Instruction) -> Callable[[MachineState], None]:
    """What an instruction that tests the flags checks first: that they are set, and set by
    a compare with an order (not of a number with text) when it tests an order."""
    ordered = OPCODE_INFO[ins.op].ordered
    name = ins.mnemonic

    def check(st: MachineState) -> None:
        mode = st.flag_mode
        if mode != ORDERED and (ordered or mode == UNSET):
            if mode == UNSET:
                raise fail(ins, f"{name} before any CMP or arithmetic set the flags")
            raise fail(
                ins,
                f"{name} needs an ordered compare, but the last CMP compared a number with text "
                "(or TEST tested a text), which have no order: only JE/JNE may follow",
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
    name = ins.mnemonic
    read_dst: Getter = getter(target, ctx, ins) if first is None else first

    def step(st: MachineState, pc: int) -> int:
        a, b = read_dst(st), src(st)
        if type(a) is str or type(b) is str or a is None or b is None:
            raise fail(ins, f"{name} needs numbers, got {show(a)} and {show(b)}")
        try:
            result = op(a, b)
        except OverflowError:  # an int too large to mix with a float
            raise fail(ins, f"{name} overflowed the number range") from None
        if type(result) is int:
            if not INT_MIN <= result <= INT_MAX:
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
    if any(type(v) is str or v is None for v in values):
        shown = " and ".join(show(v) for v in values)
        raise fail(ins, f"{ins.mnemonic} needs numbers, got {shown}")


def _ints(ins: Instruction, *values: Value) -> None:
    if any(type(v) is not int for v in values):
        shown = " and ".join(show(v) for v in values)
        raise fail(
            ins,
            f"{ins.mnemonic} needs whole numbers, got {shown} (bit operations are defined on "
            "integers only)",
        )


def _set_flags(st: MachineState, result: Value) -> None:
    st.zf = result == 0
    st.lt = result < 0  # type: ignore[operator]  # a number here
    st.flag_mode = ORDERED


def _checked(ins: Instruction, result: int | float) -> int | float:
    """A result within the machine's numbers: a 64-bit integer or a finite float."""
    if type(result) is int:
        if not INT_MIN <= result <= INT_MAX:
            raise fail(ins, f"{ins.mnemonic} overflowed the 64-bit integer range")
    elif not math.isfinite(result):
        raise fail(ins, f"{ins.mnemonic} gave a non-finite number ({result})")
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
        raise fail(ins, f"{ins.mnemonic}: division by zero")
    if type(a) is int and type(b) is int:
        quotient = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            quotient = -quotient
        return _checked(ins, quotient), a - quotient * b
    try:
        return _checked(ins, a / b), math.fmod(a, b)  # type: ignore[operator,arg-type]
    except OverflowError:
        raise fail(ins, f"{ins.mnemonic} overflowed the number range") from None


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
        if same and (type(a) is str or a is None):  # TEST r, r on text: is it empty (NONE is)?
            st.zf, st.lt, st.flag_mode = not a, False, UNORDERED
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
        raise fail(ins, f"{ins.mnemonic} shifts by 0 to 63 bits, not {show(count)}")
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
        if count < -INT_MAX:
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
                return _checked(ins, op(float(a), float(b)))  # type: ignore[arg-type]
            except ZeroDivisionError:
                raise fail(ins, f"{ins.mnemonic}: division by zero") from None
            except (OverflowError, ValueError):
                raise fail(ins, f"{ins.mnemonic} gave no finite number") from None

        return _update(ins, ctx, compute)

    return compile_float


def _convert(op: Callable[[Any], Value]) -> Callable[[Instruction, Context], Step]:
    """``dst = op(src)``: conversions and square roots, the flags left as they are."""

    def compile_convert(ins: Instruction, ctx: Context) -> Step:
        def compute(st: MachineState, a: Value, b: Value) -> Value:
            _numbers(ins, b)
            try:
                return _checked(ins, op(b))  # type: ignore[arg-type]
            except (OverflowError, ValueError):
                raise fail(ins, f"{ins.mnemonic} cannot convert {show(b)}") from None

        return _update(ins, ctx, compute)

    return compile_convert


def _sqrt(value: Value) -> float:
    if value < 0:  # type: ignore[operator]
        raise ValueError(value)
    return math.sqrt(value)  # type: ignore[arg-type]


# -- moves, the stack, arithmetic, compares, jumps and subroutines ----------------------------


def _target(operand: Operand, ctx: Context) -> int:
    if not isinstance(operand, Name):
        raise UsageError(f"jump target {operand} is not a label (was the program verified?)")
    return ctx.program.labels[operand.name.lower()]


def _compile_mov(ins: Instruction, ctx: Context) -> Step:
    dst, get = ins.operands[0], getter(ins.operands[1], ctx, ins)
    if isinstance(dst, Reg):  # the common case, kept to one call
        index = dst.index

        def to_register(st: MachineState, pc: int) -> int:
            st.regs[index] = get(st)
            return pc + 1

        return to_register
    put = setter(dst, ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        put(st, get(st))
        return pc + 1

    return step


def _compile_push(ins: Instruction, ctx: Context) -> Step:
    get, limit = getter(ins.operands[0], ctx, ins), ctx.max_stack_depth

    def step(st: MachineState, pc: int) -> int:
        depth = len(st.stack) + len(st.calls)
        if depth >= limit:
            raise StackDepthExceeded(limit, depth + 1, line=ins.line, source=ins.text)
        st.stack.append(get(st))
        return pc + 1

    return step


def _compile_pop(ins: Instruction, ctx: Context) -> Step:
    dst = ins.operands[0]
    if isinstance(dst, Reg):  # the common case, kept to one call
        index = dst.index

        def to_register(st: MachineState, pc: int) -> int:
            if not st.stack:
                raise fail(ins, "POP on an empty stack")
            st.regs[index] = st.stack.pop()
            return pc + 1

        return to_register
    put = setter(dst, ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        if not st.stack:
            raise fail(ins, "POP on an empty stack")
        put(st, st.stack.pop())
        return pc + 1

    return step


def _add(a: Any, b: Any) -> Any:
    return a + b


def _sub(a: Any, b: Any) -> Any:
    return a - b


def _mul(a: Any, b: Any) -> Any:
    return a * b


def _compile_add(ins: Instruction, ctx: Context) -> Step:
    return arith(ins, ctx, _add, getter(ins.operands[1], ctx, ins))


def _compile_sub(ins: Instruction, ctx: Context) -> Step:
    return arith(ins, ctx, _sub, getter(ins.operands[1], ctx, ins))


def _compile_mul(ins: Instruction, ctx: Context) -> Step:
    operands = ins.operands
    if len(operands) == 1:  # MUL src: EAX = EAX * src
        return arith(ins, ctx, _mul, getter(operands[0], ctx, ins), target=EAX)
    if len(operands) == 3:  # IMUL dst, a, b: dst = a * b
        first = getter(operands[1], ctx, ins)
        return arith(ins, ctx, _mul, getter(operands[2], ctx, ins), first=first)
    return arith(ins, ctx, _mul, getter(operands[1], ctx, ins))


def _compile_inc(ins: Instruction, ctx: Context) -> Step:
    return arith(ins, ctx, _add, lambda st: 1)


def _compile_dec(ins: Instruction, ctx: Context) -> Step:
    return arith(ins, ctx, _sub, lambda st: 1)


def _compile_cmp(ins: Instruction, ctx: Context) -> Step:
    get_a, get_b = getter(ins.operands[0], ctx, ins), getter(ins.operands[1], ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        a, b = get_a(st), get_b(st)
        if type(a) is str or type(b) is str or a is None or b is None:
            text_flags(st, a, b)
        else:
            st.zf = a == b
            st.lt = a < b  # type: ignore[operator]  # both are numbers here
            st.flag_mode = ORDERED
        return pc + 1

    return step


def _compile_jmp(ins: Instruction, ctx: Context) -> Step:
    target = _target(ins.operands[0], ctx)
    return lambda st, pc: target


def _compile_jcc(ins: Instruction, ctx: Context) -> Step:
    target = _target(ins.operands[0], ctx)
    check, taken = flags_check(ins), CONDITIONS[OPCODE_INFO[ins.op].condition]
    ordered = OPCODE_INFO[ins.op].ordered

    def step(st: MachineState, pc: int) -> int:
        mode = st.flag_mode
        if mode != ORDERED and (ordered or mode == UNSET):
            check(st)
        return target if taken(st.zf, st.lt) else pc + 1

    return step


def _compile_call(ins: Instruction, ctx: Context) -> Step:
    # Only subroutine calls get here; tool calls are handled by the run loop itself.
    target, limit = _target(ins.operands[0], ctx), ctx.max_stack_depth

    def step(st: MachineState, pc: int) -> int:
        depth = len(st.stack) + len(st.calls)
        if depth >= limit:
            raise StackDepthExceeded(limit, depth + 1, line=ins.line, source=ins.text)
        st.calls.append(pc + 1)
        return target

    return step


def _compile_ret(ins: Instruction, ctx: Context) -> Step:
    end, program = ctx.end, ctx.program

    def step(st: MachineState, pc: int) -> int:
        if st.calls:
            return st.calls.pop()
        st.returned = returned_value(st, program, pc)  # the x86 return value, at top level
        return end

    return step


def _compile_nop(ins: Instruction, ctx: Context) -> Step:
    return lambda st, pc: pc + 1


def _compile_hlt(ins: Instruction, ctx: Context) -> Step:
    end = ctx.end
    return lambda st, pc: end


def _conditional(info: OpcodeInfo) -> Callable[[Instruction, Context], Step]:
    """The compiler of an instruction that tests the flags: a jump, ``SETcc`` or ``CMOVcc``."""
    return _compile_jcc if info.jump else _compile_cmov if info.moves else _compile_set


_COMPILERS: dict[Opcode, Callable[[Instruction, Context], Step]] = {
    Opcode.MOV: _compile_mov,
    Opcode.PUSH: _compile_push,
    Opcode.POP: _compile_pop,
    Opcode.ADD: _compile_add,
    Opcode.SUB: _compile_sub,
    Opcode.MUL: _compile_mul,
    Opcode.INC: _compile_inc,
    Opcode.DEC: _compile_dec,
    Opcode.CMP: _compile_cmp,
    Opcode.JMP: _compile_jmp,
    Opcode.CALL: _compile_call,
    Opcode.RET: _compile_ret,
    Opcode.NOP: _compile_nop,
    Opcode.HLT: _compile_hlt,
    Opcode.SAY: compile_say,
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
    **{op: _conditional(info) for op, info in OPCODE_INFO.items() if info.condition},
    **TEXT_COMPILERS,
}
if set(_COMPILERS) != set(Opcode):  # a missing handler fails at import, not at run time
    raise ImportError(f"opcodes without a handler: {set(Opcode) ^ set(_COMPILERS)}")


@dataclass(frozen=True, slots=True)
class CompiledProgram:
    """A verified program compiled for one set of tools and one stack limit; reusable.

    An :class:`Emulator` given a different ``max_stack_depth`` recompiles the steps (without
    verifying again), since the stack limit is baked into the ``PUSH`` and ``CALL`` steps.
    """

    program: Program
    steps: tuple[Step | None, ...]
    tools: tuple[Extern | None, ...]
    externs: Mapping[str, Extern]
    flow: ControlFlow
    """The control-flow graph the program was compiled from (tool calls, jump targets, the
    EAX convention, the calls the plan tests, loops): see :mod:`llassembly.analysis.cfg`."""
    layout: Layout
    registers: tuple[int, ...]
    """The registers a run may write, in order (see :func:`written_registers`)."""
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH
    dataflow: Guards | None = None
    """The data-flow policies checked before each call (``None``: none; the steps then keep
    no provenance): see :mod:`llassembly.machine.provenance`."""
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What is worked out from the program once, on first use, for every run (see
    the emulator's read checks)."""

    def initial_memory(self) -> dict[str, list[Value]]:
        """The writable memory as a run starts."""
        return self.layout.initial_memory()


def compile_step(ins: Instruction, ctx: Context) -> Step:
    """The step of one instruction (a tool ``CALL`` has none: the run loop makes the call)."""
    return _COMPILERS[ins.op](ins, ctx)


def _compile_steps(
    program: Program,
    externs: Mapping[str, Extern],
    max_stack_depth: int,
    dataflow: Sequence[DataFlowPolicy] = (),
) -> CompiledProgram:
    flow = control_flow(program, externs)
    # The graph was built from these externs: its tools are externs.
    tools = [cast("Extern | None", flow.tools.get(pc)) for pc in range(len(program.instructions))]
    layout = layout_of(program, externs)
    ctx = Context(program, len(program.instructions), max_stack_depth, layout)
    steps = [
        None if tool is not None else compile_step(ins, ctx)
        for ins, tool in zip(program.instructions, tools, strict=True)
    ]
    guards = guards_for(flow, externs, dataflow) if dataflow else None
    if guards is not None:  # keep the sources of what each step writes
        steps = [
            None if step is None else instrument(step, ins, ctx)
            for ins, step in zip(program.instructions, steps, strict=True)
        ]
    found = (program, tuple(steps), tuple(tools), externs, flow, layout, written_registers(flow))
    return CompiledProgram(*found, max_stack_depth, guards)


def recompiled(
    compiled: CompiledProgram, max_stack_depth: int, dataflow: tuple[DataFlowPolicy, ...] = ()
) -> CompiledProgram:
    """``compiled`` for another stack limit or other data-flow policies (``()``: the ones it
    has), compiled again without verifying; itself when neither changes."""
    kept = compiled.dataflow.policies if compiled.dataflow is not None else ()
    if compiled.max_stack_depth == max_stack_depth and dataflow in ((), kept):
        return compiled
    return _compile_steps(compiled.program, compiled.externs, max_stack_depth, dataflow or kept)


def written_registers(flow: ControlFlow) -> tuple[int, ...]:
    """The indexes of the registers a run of the program may write, in order.

    A register is written only where the instruction table says an instruction writes it
    (its register operands, or the ones it uses without naming them: ``EAX``/``EDX`` of
    one-operand ``MUL``/``DIV``, ``ECX`` of ``LOOP``), or as ``EAX`` by a call whose result
    goes there. Every other register keeps the value a run starts with, so a snapshot reads
    these and no others (R0 is never written).
    """
    return tuple(sorted({reg for fx in flow.effects for reg in fx.registers_written}))


def compile_program(
    program: Program,
    externs: ToolSpec,
    *,
    max_stack_depth: int,
    dataflow: Sequence[DataFlowPolicy] = (),
) -> CompiledProgram:
    """Verify ``program`` and compile it for the tools ``externs`` (a list or a mapping of
    tools, as every public function takes them: :data:`~llassembly.machine.externs.ToolSpec`),
    with the data-flow policies its calls are checked against (see
    :mod:`llassembly.machine.provenance`).

    Raises:
        PlanRejected: The program does not verify.
        UsageError: ``externs`` is no toolset (see :func:`~llassembly.machine.externs.externs_of`),
            or a data-flow policy names a tool or an argument they do not have.
    """
    by_name = externs_of(externs, param="externs")
    verify(program, by_name)
    return _compile_steps(program, by_name, max_stack_depth, tuple(dataflow))


# -- the same steps for the plan summary ------------------------------------------------------


class _NotWritten:
    """Put in a register an instruction says it writes: still there after it, it did not."""


_NOT_WRITTEN: Any = _NotWritten()


class StepSemantics:
    """The summary's semantics (:class:`llassembly.analysis.constants.Semantics`): one
    instruction run by its own compiled step on a scratch state holding the known values, so
    the constants a person approves are computed exactly as the run computes them."""

    initial_flags: Hashable = (False, False, UNSET)

    def runner(self, flow: ControlFlow, layout: Layout) -> Run:
        """Run instructions of ``flow``'s program alone (see :data:`~llassembly.analysis.
        constants.Run`): steps compiled on first use, no stack limit, a scratch memory that
        no step run here reads (the summary runs none that reads memory the plan writes)."""
        program = flow.program
        ctx = Context(program, flow.end, sys.maxsize, layout)
        steps: dict[int, Step] = {}
        scratch = layout.initial_memory()

        def run(
            pc: int, registers: Mapping[int, Value], flags: Hashable, taken: Sequence[Value]
        ) -> Outcome | Fails | None:
            fx = flow.effects[pc]
            step = steps.get(pc)
            # The compilers expect a verified plan; the summary of one that does not verify
            # still returns, so any error here but the step's own means "cannot tell".
            try:
                if step is None:
                    step = steps[pc] = compile_step(program.instructions[pc], ctx)
                st = MachineState(pc=pc, stack=list(taken), mem=scratch)
                for reg in fx.registers_written:
                    st.regs[reg] = _NOT_WRITTEN
                for reg, value in registers.items():
                    st.regs[reg] = value
                if isinstance(flags, tuple):
                    st.zf, st.lt, st.flag_mode = flags
                next_pc = step(st, pc)
            except AsmRuntimeError:
                return FAILS  # it fails on these values, as the run would
            except Exception:  # an instruction the checks would refuse
                return None
            written = {reg: st.regs[reg] for reg in fx.registers_written}
            if any(value is _NOT_WRITTEN for value in written.values()):
                return None
            flags_after = (st.zf, st.lt, st.flag_mode) if fx.flags_written else None
            return Outcome(written, flags_after, tuple(st.stack), next_pc)

        return run


install_semantics(StepSemantics())
