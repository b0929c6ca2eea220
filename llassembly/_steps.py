"""Compiling a verified program into step closures, one compiler per opcode.

A step function takes the machine state and its own pc and returns the next pc. Every
instruction is compiled once, so the emulator's loop is a list index and a call. The table
``_COMPILERS`` is checked against :class:`~llassembly.program.Opcode` at import: a missing
handler fails at import, not at run time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from .errors import AsmRuntimeError, StackDepthExceeded, UsageError
from .externs import Extern
from .program import (
    OPCODE_INFO,
    Imm,
    Instruction,
    Name,
    Opcode,
    Operand,
    Program,
    Reg,
    Value,
    find_tool,
)
from .verifier import verify

if TYPE_CHECKING:
    from .emulator import MachineState

__all__ = ["CompiledProgram", "compile_program"]

INT_LIMIT = 2**63 - 1
DEFAULT_MAX_STACK_DEPTH = 256
# Flag modes: no flag-setting instruction yet, numbers compared, strings compared.
UNSET, ORDERED, UNORDERED = 0, 1, 2

# ---------------------------------------------------------------------------------------------
# Compiling instructions to closures. A step function takes the state and its own pc and
# returns the next pc. One compiler per opcode; the table is checked at import.

Step: TypeAlias = "Callable[[MachineState, int], int]"
Getter: TypeAlias = "Callable[[MachineState], Value]"


@dataclass(frozen=True, slots=True)
class _Context:
    program: Program
    end: int
    max_stack_depth: int


def _show(value: Value) -> str:
    """``repr`` for messages: short, and safe for ints too long for ``repr`` to convert."""
    if type(value) is int and not -INT_LIMIT <= value <= INT_LIMIT:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fail(instruction: Instruction, message: str) -> AsmRuntimeError:
    return AsmRuntimeError(message, line=instruction.line, source=instruction.text)


def _getter(operand: Operand, ctx: _Context) -> Getter:
    if isinstance(operand, Reg):
        index = operand.index
        if index == 0:
            return lambda st: 0
        return lambda st: st.regs[index]
    value: Value = (
        operand.value if isinstance(operand, Imm) else ctx.program.data[operand.name.lower()]
    )
    return lambda st: value


def _target(operand: Operand, ctx: _Context) -> int:
    if not isinstance(operand, Name):
        raise UsageError(f"jump target {operand} is not a label (was the program verified?)")
    return ctx.program.labels[operand.name.lower()]


def _dest(operand: Operand) -> int:
    if not isinstance(operand, Reg):
        raise UsageError(f"destination {operand} is not a register (was the program verified?)")
    return operand.index


def _compile_mov(ins: Instruction, ctx: _Context) -> Step:
    dst, get = _dest(ins.operands[0]), _getter(ins.operands[1], ctx)

    def step(st: MachineState, pc: int) -> int:
        st.regs[dst] = get(st)
        return pc + 1

    return step


def _compile_push(ins: Instruction, ctx: _Context) -> Step:
    get, limit = _getter(ins.operands[0], ctx), ctx.max_stack_depth

    def step(st: MachineState, pc: int) -> int:
        depth = len(st.stack) + len(st.calls)
        if depth >= limit:
            raise StackDepthExceeded(limit, depth + 1, line=ins.line, source=ins.text)
        st.stack.append(get(st))
        return pc + 1

    return step


def _compile_pop(ins: Instruction, ctx: _Context) -> Step:
    dst = _dest(ins.operands[0])

    def step(st: MachineState, pc: int) -> int:
        if not st.stack:
            raise fail(ins, "POP on an empty stack")
        st.regs[dst] = st.stack.pop()
        return pc + 1

    return step


def _arith(ins: Instruction, ctx: _Context, op: Callable[[Any, Any], Any], src: Getter) -> Step:
    dst = _dest(ins.operands[0])
    name = ins.op.value
    read_dst: Getter = _getter(ins.operands[0], ctx)

    def step(st: MachineState, pc: int) -> int:
        a, b = read_dst(st), src(st)
        if type(a) is str or type(b) is str:
            raise fail(ins, f"{name} needs numbers, got {_show(a)} and {_show(b)}")
        try:
            result = op(a, b)
        except OverflowError:  # an int too large to mix with a float
            raise fail(ins, f"{name} overflowed the number range") from None
        if type(result) is int:
            if not -INT_LIMIT <= result <= INT_LIMIT:
                raise fail(ins, f"{name} overflowed the 64-bit integer range")
        elif not math.isfinite(result):
            raise fail(ins, f"{name} gave a non-finite number ({result})")
        st.regs[dst] = result
        st.zf = result == 0
        st.lt = result < 0
        st.flag_mode = ORDERED
        return pc + 1

    return step


def _add(a: Any, b: Any) -> Any:
    return a + b


def _sub(a: Any, b: Any) -> Any:
    return a - b


def _mul(a: Any, b: Any) -> Any:
    return a * b


def _compile_add(ins: Instruction, ctx: _Context) -> Step:
    return _arith(ins, ctx, _add, _getter(ins.operands[1], ctx))


def _compile_sub(ins: Instruction, ctx: _Context) -> Step:
    return _arith(ins, ctx, _sub, _getter(ins.operands[1], ctx))


def _compile_mul(ins: Instruction, ctx: _Context) -> Step:
    return _arith(ins, ctx, _mul, _getter(ins.operands[1], ctx))


def _compile_inc(ins: Instruction, ctx: _Context) -> Step:
    return _arith(ins, ctx, _add, lambda st: 1)


def _compile_dec(ins: Instruction, ctx: _Context) -> Step:
    return _arith(ins, ctx, _sub, lambda st: 1)


def _compile_cmp(ins: Instruction, ctx: _Context) -> Step:
    get_a, get_b = _getter(ins.operands[0], ctx), _getter(ins.operands[1], ctx)

    def step(st: MachineState, pc: int) -> int:
        a, b = get_a(st), get_b(st)
        if type(a) is str or type(b) is str:
            st.zf = type(a) is str and type(b) is str and a == b
            st.lt = False
            st.flag_mode = UNORDERED
        else:
            st.zf = a == b
            st.lt = a < b  # type: ignore[operator]  # both are numbers here
            st.flag_mode = ORDERED
        return pc + 1

    return step


def _compile_jmp(ins: Instruction, ctx: _Context) -> Step:
    target = _target(ins.operands[0], ctx)
    return lambda st, pc: target


def _conditional(ins: Instruction, ctx: _Context, taken: Callable[[bool, bool], bool]) -> Step:
    target = _target(ins.operands[0], ctx)
    ordered = OPCODE_INFO[ins.op].ordered
    name = ins.op.value

    def step(st: MachineState, pc: int) -> int:
        mode = st.flag_mode
        if mode != ORDERED and (ordered or mode == UNSET):
            if mode == UNSET:
                raise fail(ins, f"{name} before any CMP or arithmetic set the flags")
            raise fail(
                ins,
                f"{name} needs an ordered compare, but the last CMP compared strings "
                "(only JE/JNE are defined for strings)",
            )
        return target if taken(st.zf, st.lt) else pc + 1

    return step


def _compile_je(ins: Instruction, ctx: _Context) -> Step:
    return _conditional(ins, ctx, lambda zf, lt: zf)


def _compile_jne(ins: Instruction, ctx: _Context) -> Step:
    return _conditional(ins, ctx, lambda zf, lt: not zf)


def _compile_jl(ins: Instruction, ctx: _Context) -> Step:
    return _conditional(ins, ctx, lambda zf, lt: lt)


def _compile_jle(ins: Instruction, ctx: _Context) -> Step:
    return _conditional(ins, ctx, lambda zf, lt: lt or zf)


def _compile_jg(ins: Instruction, ctx: _Context) -> Step:
    return _conditional(ins, ctx, lambda zf, lt: not lt and not zf)


def _compile_jge(ins: Instruction, ctx: _Context) -> Step:
    return _conditional(ins, ctx, lambda zf, lt: not lt)


def _compile_call(ins: Instruction, ctx: _Context) -> Step:
    # Only subroutine calls get here; tool calls are handled by the run loop itself.
    target, limit = _target(ins.operands[0], ctx), ctx.max_stack_depth

    def step(st: MachineState, pc: int) -> int:
        depth = len(st.stack) + len(st.calls)
        if depth >= limit:
            raise StackDepthExceeded(limit, depth + 1, line=ins.line, source=ins.text)
        st.calls.append(pc + 1)
        return target

    return step


def _compile_ret(ins: Instruction, ctx: _Context) -> Step:
    end = ctx.end
    return lambda st, pc: st.calls.pop() if st.calls else end


def _compile_nop(ins: Instruction, ctx: _Context) -> Step:
    return lambda st, pc: pc + 1


def _compile_hlt(ins: Instruction, ctx: _Context) -> Step:
    end = ctx.end
    return lambda st, pc: end


_COMPILERS: dict[Opcode, Callable[[Instruction, _Context], Step]] = {
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
    Opcode.JE: _compile_je,
    Opcode.JNE: _compile_jne,
    Opcode.JL: _compile_jl,
    Opcode.JLE: _compile_jle,
    Opcode.JG: _compile_jg,
    Opcode.JGE: _compile_jge,
    Opcode.CALL: _compile_call,
    Opcode.RET: _compile_ret,
    Opcode.NOP: _compile_nop,
    Opcode.HLT: _compile_hlt,
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
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH


def _compile_steps(
    program: Program, externs: Mapping[str, Extern], max_stack_depth: int
) -> CompiledProgram:
    ctx = _Context(program, len(program.instructions), max_stack_depth)
    steps: list[Step | None] = []
    tools: list[Extern | None] = []
    for ins in program.instructions:
        tool = None
        if ins.op is Opcode.CALL and isinstance(ins.operands[0], Name):
            tool = find_tool(ins.operands[0].name, externs)
        tools.append(tool)
        steps.append(None if tool is not None else _COMPILERS[ins.op](ins, ctx))
    return CompiledProgram(program, tuple(steps), tuple(tools), externs, max_stack_depth)


def compile_program(
    program: Program, externs: Mapping[str, Extern], *, max_stack_depth: int
) -> CompiledProgram:
    """Verify ``program`` and compile it. Raises :class:`~llassembly.errors.PlanRejected`."""
    verify(program, externs)
    return _compile_steps(program, externs, max_stack_depth)
