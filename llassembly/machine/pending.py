"""Pending results: what an instruction run ahead of outstanding calls reads, and filling in.

With ``parallel_tools`` the machine issues a marked call and runs on before its results are in
(see :mod:`llassembly.machine.ahead`); each result is a :class:`~llassembly.machine.state.
Pending` value where the sequential run would put the result (the stack, or ``EAX`` by the EAX
convention). Instructions run on while none *reads* a pending value. The rule comes from the
instruction table (:func:`~llassembly.language.instructions.effects`), never from a list of
opcodes:

* a value an instruction **copies** (:attr:`~llassembly.language.instructions.Effects.copies`:
  ``MOV``, ``XCHG``, ``CMOVcc``, ``PUSH``, ``POP``) from a plain place to a plain place (a
  register, a memory cell, a variable or one-cell label, the stack) is moved, not read: a
  pending value moves with it (and a place it overwrites drops the pending value it held);
* every other value it uses is read: an operand it reads (arithmetic, compares, ``SAY``,
  text and structure instructions, an argument of a tool call), a register of an address,
  the base or a key of a path (read or written: writing a part rebuilds the whole text), a
  placeholder of a text, a row read whole, a register it uses without naming it (``LOOP``'s
  ``ECX``, ``MUL src``'s ``EAX``), the stack top a ``POP`` writes into a path;
* a ``RET`` that ends the plan, like the end of the plan itself, reads everything.

:func:`read_checks` gives, per instruction, the test "would it read a pending value now?";
:func:`fill` puts a completed call's values wherever its pending values are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from llassembly.errors import ExecutionError, UsageError
from llassembly.language.program import (
    Effects,
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Path,
    Reg,
    Template,
    effects,
)
from llassembly.machine.access import Context, getter
from llassembly.machine.state import MachineState, Pending

if TYPE_CHECKING:
    from llassembly.machine.steps import CompiledProgram

__all__ = ["Check", "check_pending", "fill", "read_checks"]

STACK = Effects.STACK
Check: TypeAlias = "Callable[[MachineState], bool]"
"""Whether the instruction would read a pending value in this state."""
_CACHE_KEY = "pending reads"


def read_checks(compiled: CompiledProgram) -> tuple[Check | None, ...]:
    """Per instruction, the check that it reads no pending value (``None``: it reads none, or
    it is a tool ``CALL``, which the machine checks itself); built once per program."""
    found = compiled.cache.get(_CACHE_KEY)
    if found is None:
        program, layout = compiled.program, compiled.layout
        if layout is None:  # pragma: no cover - every compiled program has a layout
            raise UsageError("internal error: a compiled program without a layout")
        ctx = Context(program, len(program.instructions), compiled.max_stack_depth, layout)
        found = tuple(
            None if step is None else _check(ins, effects(ins), ctx)
            for ins, step in zip(program.instructions, compiled.steps, strict=True)
        )
        compiled.cache[_CACHE_KEY] = found
    checks: tuple[Check | None, ...] = found
    return checks


def _plain(operand: Operand, ctx: Context) -> bool:
    """A place holding one value as it is: a register, a memory cell, a one-cell label."""
    if isinstance(operand, Reg | Mem):
        return True
    if isinstance(operand, Name):
        label = ctx.layout.labels.get(operand.name.lower())
        return label is not None and len(label.cells) == 1
    return False


def _check(ins: Instruction, fx: Effects, ctx: Context) -> Check | None:
    if fx.flow == "return":  # a RET that ends the plan reads what the plan leaves
        return _at_top_level
    operands = ins.operands
    copies = fx.copies
    # Positions whose value is only copied from a plain place to plain places.
    moved = {r for _w, r in copies if r != STACK and _plain(operands[r], ctx)}
    moved -= {r for w, r in copies if w != STACK and not _plain(operands[w], ctx)}
    pops_into_place = any(r == STACK and _plain(operands[w], ctx) for w, r in copies)
    probe = _Probe(ctx, ins, set(fx.implicit_reads))
    for position, operand in enumerate(operands):
        if position in fx.reads and position not in moved:
            probe.value(operand)
        elif position in fx.writes and isinstance(operand, Path):
            probe.value(operand)  # a part written: the whole text is read and built again
        elif isinstance(operand, Mem):  # moved or written: its address is read
            probe.registers.update(r.index for r in operand.registers)
    return probe.build(fx.pops > 0 and not pops_into_place)


def _at_top_level(st: MachineState) -> bool:
    return not st.calls


class _Probe:
    """What one instruction reads: registers, memory cells, rows read whole."""

    def __init__(self, ctx: Context, ins: Instruction, registers: set[int]) -> None:
        self.ctx, self.ins = ctx, ins
        self.registers = registers
        self.cells: list[Callable[[MachineState], Any]] = []
        self.rows: list[str] = []

    def value(self, operand: Operand) -> None:
        """``operand``'s value is read: everything it is made of."""
        live = self.ctx.layout.live
        if isinstance(operand, Reg):
            self.registers.add(operand.index)
        elif isinstance(operand, Mem):
            self.registers.update(r.index for r in operand.registers)
            if operand.label is None or operand.label.lower() in live:
                self.cells.append(getter(operand, self.ctx, self.ins))
        elif isinstance(operand, Name):
            key = operand.name.lower()
            if key in live:
                if len(self.ctx.layout.labels[key].cells) == 1:
                    self.cells.append(getter(operand, self.ctx, self.ins))
                else:
                    self.rows.append(key)  # read whole, as JSON text
        elif isinstance(operand, Path):
            self.value(operand.base)
            for step in operand.steps:
                if not isinstance(step, Imm):
                    self.value(step)
        elif isinstance(operand, Template):
            for part in operand.fills:
                self.value(part)

    def build(self, reads_top: bool) -> Check | None:
        registers = tuple(sorted(self.registers - {0}))  # R0 always reads 0
        cells, rows = tuple(self.cells), tuple(self.rows)
        if not (registers or cells or rows or reads_top):
            return None

        def check(st: MachineState) -> bool:
            regs: list[Any] = st.regs
            if any(type(regs[i]) is Pending for i in registers):
                return True  # (registers first: an address needs them)
            stack: list[Any] = st.stack
            if reads_top and stack and type(stack[-1]) is Pending:
                return True
            for cell in cells:
                try:
                    if type(cell(st)) is Pending:
                        return True
                except ExecutionError:
                    return False  # the instruction fails there itself, as sequentially
            mem: dict[str, list[Any]] = st.mem
            return any(type(v) is Pending for key in rows for v in mem[key])

        return check


def fill(st: MachineState, call: int, values: Sequence[Any]) -> None:
    """Put call number ``call``'s ``values`` wherever its pending values are."""
    places: list[list[Any]] = [st.regs, st.stack, *st.mem.values()]
    for place in places:
        for i, v in enumerate(place):
            if type(v) is Pending and v.call == call:
                place[i] = values[v.result]


def check_pending(st: MachineState, results: dict[int, int]) -> None:
    """Refuse a state whose pending values are not those of its outstanding calls
    (``results``: call number to how many values it gives).

    Raises:
        UsageError: A pending value names no outstanding call, or a value it does not give.
    """
    places: list[list[Any]] = [st.regs, st.stack, *st.mem.values()]
    for place in places:
        for v in place:
            if type(v) is Pending and not 0 <= v.result < results.get(v.call, 0):
                raise UsageError("the state holds a pending value of no outstanding call")
