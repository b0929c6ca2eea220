"""Provenance as the plan runs: each step keeps the sources of what it writes, and each call is
checked against the data-flow policies before it runs.

With data-flow policies (``Emulator(..., dataflow=[...])``, or a planner's ``plan_policy``
holding some) the program is compiled with :func:`instrument`: every step that writes
something is wrapped by one that reads the sources of what the instruction reads (its
:class:`~llassembly.analysis.dataflow.Transfer`, the same facts the analysis before the run
follows), runs the step, and writes those sources beside what the step wrote in the state's
:class:`~llassembly.machine.state.Shadow`. Sources are read before the step runs (it may
overwrite what it reads) and written only once it has run (a step that fails changes nothing).
Without policies nothing is wrapped: the machine runs the very steps it runs otherwise.

A tool ``CALL`` is the machine's own (``Emulator._begin_call``): its arguments' sources are
checked by :meth:`Guards.check` where the emulator builds the call, then taken off the shadow
stack with the values; its results get the tool (:meth:`Shadow.results`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from llassembly.analysis.cfg import ControlFlow
from llassembly.analysis.dataflow import NO_SOURCES, Sources, transfer_of
from llassembly.analysis.policies import DataFlowPolicy, check_names
from llassembly.errors import DataFlowRefused, ExecutionError, UsageError
from llassembly.language.program import (
    Instruction,
    Mem,
    Name,
    Operand,
    Reg,
    ToolShape,
    Value,
    param_names,
    place_of,
)
from llassembly.machine.access import Context, cell_locator, parts
from llassembly.machine.externs import short_repr
from llassembly.machine.state import Shadow

if TYPE_CHECKING:
    from llassembly.machine.state import MachineState


Step: TypeAlias = "Callable[[MachineState, int], int]"
_Reader: TypeAlias = "Callable[[MachineState, Shadow], Sources]"
_Place: TypeAlias = "Callable[[MachineState], int | tuple[str, int] | None]"


# -- reading and writing sources ----------------------------------------------------------------


def _reader(operands: Sequence[Operand], ctx: Context, ins: Instruction) -> _Reader | None:
    """How to read the sources of what reading ``operands`` reads (see
    :func:`~llassembly.machine.access.parts`; ``None``: nothing that carries any)."""
    registers, cells, rows_read = parts(operands, ctx)
    places, labels = [_place(cell, ctx, ins) for cell in cells], ctx.layout.labels
    rows = [(key, i) for key in rows_read for i in range(len(labels[key].cells))]
    if not (registers or places or rows):
        return None

    def read(st: MachineState, shadow: Shadow) -> Sources:
        regs, mem = shadow.regs, shadow.mem
        held = [regs.get(i, NO_SOURCES) for i in registers]
        held += [mem.get(cell, NO_SOURCES) for cell in rows]
        held += [mem.get(w, NO_SOURCES) for place in places if isinstance(w := place(st), tuple)]
        return NO_SOURCES.union(*held)

    return read


def _place(operand: Operand, ctx: Context, ins: Instruction) -> _Place:
    """Where a value written to ``operand`` lives: a register index, a live ``(label, cell)``,
    or ``None`` (``R0``, read-only data, an address the step itself refuses)."""
    operand, live = place_of(operand), ctx.layout.live  # a path written changes its base
    if isinstance(operand, Mem):
        locate = cell_locator(operand, ctx, ins)

        def cell(st: MachineState) -> tuple[str, int] | None:
            try:
                key, index = locate(st)
            except ExecutionError:  # the step raises it (or reads text through [reg])
                return None
            return (key, index) if key in live else None

        return cell
    fixed: int | tuple[str, int] | None = None
    if isinstance(operand, Reg):
        fixed = operand.index or None
    elif isinstance(operand, Name) and operand.name.lower() in live:
        fixed = (operand.name.lower(), 0)
    return lambda st: fixed


def instrument(step: Step, ins: Instruction, ctx: Context) -> Step:
    """``step`` wrapped to keep the sources of what it writes (see the module doc); the step
    itself when the instruction writes nothing that carries sources."""
    move = transfer_of(ins)
    if move is None:
        return step
    # One reader for everything read, one per copy (None: only literals), built once.
    read_all = _reader(move.reads, ctx, ins)
    writes = [
        (_place(w.place, ctx, ins), w.copies is not None, _reader(w.copies or (), ctx, ins))
        for w in move.writes
    ]
    info, registers, sets_flags = move.fx.info, move.fx.implicit_writes, move.fx.flags_written
    pops, pushes, flags = info.pops, info.pushes, bool(info.condition)

    def step_with_sources(st: MachineState, pc: int) -> int:
        shadow = st.provenance
        if shadow is None:
            raise UsageError("a program compiled with data-flow policies runs with provenance")
        everything = NO_SOURCES if read_all is None else read_all(st, shadow)
        if pops and len(shadow.stack) >= pops:
            everything = everything.union(*shadow.stack[-pops:])
        if flags:
            everything = everything | shadow.flags
        chosen = shadow.flags if flags else NO_SOURCES
        targets = [
            (place(st), (chosen | copy(st, shadow) if copy else chosen) if copies else everything)
            for place, copies, copy in writes
        ]
        after = step(st, pc)
        for where, sources in targets:
            if where is not None:
                shadow.put(where, sources)
        for reg in registers:
            shadow.put(reg, everything)
        if pops:
            del shadow.stack[-pops:]
        if pushes:
            shadow.stack.extend([everything] * pushes)
        if sets_flags:
            shadow.flags = everything
        return after

    return step_with_sources


# -- the policies, per call site --------------------------------------------------------------


@dataclass(frozen=True)
class Guards:
    """The data-flow policies of a compiled program, per tool ``CALL``.

    Attributes:
        policies: The policies, as given.
        calls: ``CALL`` index to ``(parameter position, policy)`` for each policy about its tool.
    """

    policies: tuple[DataFlowPolicy, ...]
    calls: Mapping[int, tuple[tuple[int, DataFlowPolicy], ...]]

    def check(
        self, index: int, ins: Instruction, values: Sequence[Value], sources: Sequence[Sources]
    ) -> None:
        """Refuse the call at ``index`` when an argument derives from a result a policy refuses
        there (``values`` and their ``sources``: one per parameter, first pushed first).

        Raises:
            DataFlowRefused: Naming the argument, its value, the value's sources and the policy.
        """
        for position, policy in self.calls.get(index, ()):
            held = sources[position] if position < len(sources) else NO_SOURCES
            if policy.refused(held):  # (never for no sources: so the argument was given)
                raise DataFlowRefused(
                    policy.tool,
                    policy.argument,
                    short_repr(values[position], 80),
                    sorted(held),
                    str(policy),
                    policy.rule(),
                    line=ins.line,
                    source=ins.text,
                )


def guards_for(
    flow: ControlFlow, tools: Mapping[str, ToolShape], policies: Sequence[DataFlowPolicy]
) -> Guards:
    """The :class:`Guards` of a program's calls.

    Raises:
        UsageError: A policy names a tool or an argument the tools do not have (a misspelt
            name would switch the policy off without a word); the message names the policy,
            the unknown name and the closest ones.
    """
    for policy in policies:
        subject = f"the data-flow policy {policy}"
        check_names(subject, tools, policy.tool_names, policy.tool_arguments)
    calls = {
        pc: tuple(
            (param_names(shape).index(p.argument), p) for p in policies if p.tool == shape.name
        )
        for pc, shape in flow.tools.items()
    }
    return Guards(tuple(policies), {pc: found for pc, found in calls.items() if found})
