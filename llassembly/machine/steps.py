"""Compiling a verified program into step closures, one compiler per opcode.

A step function takes the machine state and its own pc and returns the next pc. Every
instruction is compiled once, so the emulator's loop is a list index and a call. The table
``_COMPILERS`` is checked against :class:`~llassembly.program.Opcode` at import: a missing
handler fails at import, not at run time. Which instruction is a tool call, and where a
result goes, comes from the control-flow graph (:mod:`llassembly.analysis.cfg`).

The same steps are the plan summary's semantics (:class:`StepSemantics`, installed at import):
the summary runs an instruction whose inputs it knows by its own step, so a constant it shows
is the value the run computes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from llassembly.analysis.cfg import ControlFlow, Layout, control_flow, layout_of
from llassembly.analysis.constants import FAILS, Fails, Outcome, Run, install_semantics
from llassembly.analysis.policies import DataFlowPolicy
from llassembly.analysis.verifier import verify
from llassembly.errors import (
    AsmRuntimeError,
    StackDepthExceeded,
    UsageError,
)
from llassembly.language.instructions import EAX_INDEX, OPCODE_INFO, Opcode
from llassembly.language.limits import DEFAULT_MAX_STACK_DEPTH
from llassembly.language.program import (
    Instruction,
    Name,
    Operand,
    Program,
    Reg,
    Value,
)
from llassembly.machine.access import (
    Context,
    fail,
    getter,
    setter,
)
from llassembly.machine.externs import Extern, ToolSpec, externs_of
from llassembly.machine.ops import (
    CONDITIONS,
    EAX,
    NEW_COMPILERS,
    ORDERED,
    UNORDERED,
    UNSET,
    arith,
    flags_check,
)
from llassembly.machine.provenance import Guards, guards_for, instrument
from llassembly.machine.say import compile_say, returned_value
from llassembly.machine.state import MachineState
from llassembly.machine.textops import TEXT_COMPILERS, same_text

__all__ = [
    "ORDERED",
    "UNORDERED",
    "UNSET",
    "CompiledProgram",
    "Step",
    "compile_program",
    "compile_step",
    "recompiled",
]


# ---------------------------------------------------------------------------------------------
# Compiling instructions to closures. A step function takes the state and its own pc and
# returns the next pc. One compiler per opcode; the table is checked at import.

Step: TypeAlias = "Callable[[MachineState, int], int]"
"""A compiled instruction: ``(state, its own pc) -> the next pc``."""
_Context = Context


def _target(operand: Operand, ctx: _Context) -> int:
    if not isinstance(operand, Name):
        raise UsageError(f"jump target {operand} is not a label (was the program verified?)")
    return ctx.program.labels[operand.name.lower()]


def _compile_mov(ins: Instruction, ctx: _Context) -> Step:
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


def _compile_push(ins: Instruction, ctx: _Context) -> Step:
    get, limit = getter(ins.operands[0], ctx, ins), ctx.max_stack_depth

    def step(st: MachineState, pc: int) -> int:
        depth = len(st.stack) + len(st.calls)
        if depth >= limit:
            raise StackDepthExceeded(limit, depth + 1, line=ins.line, source=ins.text)
        st.stack.append(get(st))
        return pc + 1

    return step


def _compile_pop(ins: Instruction, ctx: _Context) -> Step:
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


def _compile_add(ins: Instruction, ctx: _Context) -> Step:
    return arith(ins, ctx, _add, getter(ins.operands[1], ctx, ins))


def _compile_sub(ins: Instruction, ctx: _Context) -> Step:
    return arith(ins, ctx, _sub, getter(ins.operands[1], ctx, ins))


def _compile_mul(ins: Instruction, ctx: _Context) -> Step:
    operands = ins.operands
    if len(operands) == 1:  # MUL src: EAX = EAX * src
        return arith(ins, ctx, _mul, getter(operands[0], ctx, ins), target=EAX)
    if len(operands) == 3:  # IMUL dst, a, b: dst = a * b
        first = getter(operands[1], ctx, ins)
        return arith(ins, ctx, _mul, getter(operands[2], ctx, ins), first=first)
    return arith(ins, ctx, _mul, getter(operands[1], ctx, ins))


def _compile_inc(ins: Instruction, ctx: _Context) -> Step:
    return arith(ins, ctx, _add, lambda st: 1)


def _compile_dec(ins: Instruction, ctx: _Context) -> Step:
    return arith(ins, ctx, _sub, lambda st: 1)


def _compile_cmp(ins: Instruction, ctx: _Context) -> Step:
    get_a, get_b = getter(ins.operands[0], ctx, ins), getter(ins.operands[1], ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        a, b = get_a(st), get_b(st)
        if type(a) is str or type(b) is str:
            st.zf = type(a) is str and type(b) is str and same_text(a, b)
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


def _compile_jcc(ins: Instruction, ctx: _Context) -> Step:
    target = _target(ins.operands[0], ctx)
    check, taken = flags_check(ins), CONDITIONS[OPCODE_INFO[ins.op].condition]
    ordered = OPCODE_INFO[ins.op].ordered

    def step(st: MachineState, pc: int) -> int:
        mode = st.flag_mode
        if mode != ORDERED and (ordered or mode == UNSET):
            check(st)
        return target if taken(st.zf, st.lt) else pc + 1

    return step


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
    end, program = ctx.end, ctx.program

    def step(st: MachineState, pc: int) -> int:
        if st.calls:
            return st.calls.pop()
        st.returned = returned_value(st, program, pc)  # the x86 return value, at top level
        return end

    return step


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
    Opcode.JE: _compile_jcc,
    Opcode.JNE: _compile_jcc,
    Opcode.JL: _compile_jcc,
    Opcode.JLE: _compile_jcc,
    Opcode.JG: _compile_jcc,
    Opcode.JGE: _compile_jcc,
    Opcode.CALL: _compile_call,
    Opcode.RET: _compile_ret,
    Opcode.NOP: _compile_nop,
    Opcode.HLT: _compile_hlt,
    Opcode.SAY: compile_say,
    **NEW_COMPILERS,
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
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH
    layout: Layout | None = None
    eax_calls: frozenset[int] = frozenset()
    """Tool ``CALL``s whose one result goes to ``EAX`` rather than the stack."""
    registers: tuple[int, ...] = ()
    """The registers a run may write, in order (see :func:`written_registers`)."""
    flow: ControlFlow | None = None
    """The control-flow graph the program was compiled from (tool calls, jump targets, the
    EAX convention, loops): see :mod:`llassembly.analysis.cfg`."""
    dataflow: Guards | None = None
    """The data-flow policies checked before each call (``None``: none; the steps then keep
    no provenance): see :mod:`llassembly.machine.provenance`."""
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What is worked out from the program once, on first use, for every run (see
    :func:`llassembly.machine.pending.read_checks`)."""

    def initial_memory(self) -> dict[str, list[Value]]:
        """The writable memory as a run starts."""
        return self.layout.initial_memory() if self.layout is not None else {}


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
    ctx = Context(program, len(program.instructions), max_stack_depth, layout, flow.eax)
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
    return CompiledProgram(
        program,
        tuple(steps),
        tuple(tools),
        externs,
        max_stack_depth,
        layout,
        flow.eax,
        written_registers(flow),
        flow,
        guards,
    )


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
    found = {reg for fx in flow.effects for reg in fx.registers_written}
    if flow.eax:
        found.add(EAX_INDEX)
    return tuple(sorted(found))


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
        ctx = Context(program, flow.end, sys.maxsize, layout, flow.eax)
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
