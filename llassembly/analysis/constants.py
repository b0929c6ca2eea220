"""Constant propagation over a plan's paths: which values are the same on every run.

An abstract interpretation of the machine over the states of :mod:`.paths`: for every register,
the flags and the top of the data stack, the one value it holds on every run that gets there,
or :data:`UNKNOWN`. An instruction whose inputs are all known (reading no memory the plan
writes) is run by the machine's own step (:class:`Semantics`, installed by
:mod:`llassembly.machine.steps`), so a constant is what the run computes and a branch so
decided goes one way only; otherwise what it writes is unknown, but a copy keeps what is known
of it, and a tool's results are unknown. Past :data:`~llassembly.language.limits.MAX_VALUE_STEPS`
visits or :data:`~llassembly.language.limits.MAX_VALUE_WORK` values, nothing is known.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from llassembly.analysis.cfg import ControlFlow, Layout
from llassembly.analysis.paths import Paths, fixpoint, joined_stacks, pushed, taken
from llassembly.language.limits import MAX_VALUE_STEPS, MAX_VALUE_WORK
from llassembly.language.program import Effects, Imm, Mem, Name, Operand, Path, Reg, Value, nested


class _Mark:
    """A fact that is no machine value: :data:`UNKNOWN` or :data:`FAILS`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNKNOWN: Final = _Mark("UNKNOWN")
"""A value not known before the run (a tool result, or different on different paths)."""
FAILS: Final = _Mark("FAILS")
"""What :data:`Run` returns for an instruction that fails on the values it was given."""
Fails = _Mark  # the type a Run's FAILS has
Abstract = Value | _Mark


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one instruction did with known inputs.

    Attributes:
        registers: The value of each register it writes.
        flags: The flags after it (``None`` when it does not set them).
        pushed: The values it put on the data stack, bottom first.
        next_pc: Where control went.
    """

    registers: Mapping[int, Value]
    flags: Hashable | None
    pushed: tuple[Value, ...]
    next_pc: int


Run = Callable[[int, Mapping[int, Value], Hashable, Sequence[Value]], "Outcome | Fails | None"]
"""``run(pc, registers read, flags, values taken off the stack)``: the instruction at ``pc``
run on these values; :data:`FAILS` when it fails on them, ``None`` when it cannot be run
alone (the analysis then treats its outputs as unknown)."""


class Semantics(Protocol):
    """How the machine runs one instruction (see :func:`install_semantics`); a class deriving
    from it runs nothing it does not say (:data:`COPIES_ONLY`)."""

    initial_flags: Hashable = None
    """The flags a run starts with."""

    def runner(self, flow: ControlFlow, layout: Layout) -> Run:
        """A :data:`Run` for the instructions of ``flow``'s program."""
        return lambda pc, registers, flags, taken: None


class _CopiesOnly(Semantics):
    """No arithmetic: only copies of known values are followed (every flag is unknown)."""


COPIES_ONLY: Final[Semantics] = _CopiesOnly()
"""Semantics that run nothing: what the summary knows without the machine."""
_INSTALLED: list[Semantics] = []


def install_semantics(semantics: Semantics) -> None:
    """Make ``semantics`` the one the summary runs instructions with by default: the machine
    installs its own when it is loaded (``llassembly.machine.steps``), so the summary computes
    with the very steps the emulator runs; the analysis layer does not import the machine."""
    _INSTALLED[:] = [semantics]


def default_semantics() -> Semantics:
    """The installed :class:`Semantics`, or :data:`COPIES_ONLY` when none is."""
    return _INSTALLED[0] if _INSTALLED else COPIES_ONLY


def _key(value: Abstract) -> Hashable:
    """A key telling machine values apart (``1``, ``1.0`` and ``-0.0`` are three values)."""
    return (float, repr(value)) if type(value) is float else (type(value), value)


def same_value(a: Abstract, b: Abstract) -> bool:
    """Whether two values are the same machine value (same type; ``-0.0`` is not ``0.0``)."""
    return a is b or _key(a) == _key(b)


def join(a: Abstract, b: Abstract) -> Abstract:
    """What is known of a value that is ``a`` on some runs and ``b`` on the others."""
    return a if same_value(a, b) else UNKNOWN


_Regs = tuple[Abstract, ...]  # the tracked registers, in order
_Facts = tuple[_Regs, object, tuple[Abstract, ...]]  # the registers, flags, stack (top last)


def _merge(old: _Facts, new: _Facts) -> _Facts:
    flags = old[1] if old[1] == new[1] else UNKNOWN
    return joined_stacks(old[0], new[0], join), flags, joined_stacks(old[2], new[2], join)


class _Propagation:
    def __init__(self, flow: ControlFlow, layout: Layout, semantics: Semantics) -> None:
        self.flow, self.layout = flow, layout
        self.run = semantics.runner(flow, layout)
        self.initial_flags = semantics.initial_flags
        self.slot = flow.tracked  # the other registers always hold 0
        self.memo: dict[Hashable, Outcome | Fails | None] = {}
        self.opaque = [  # a tool CALL, or reading memory the plan may write: not run alone
            pc in flow.tools or self.reads_live(flow.program.instructions[pc].operands, fx)
            for pc, fx in enumerate(flow.effects)
        ]

    def reads_live(self, operands: tuple[Operand, ...], fx: Effects) -> bool:
        live = self.layout.live
        read = [operands[p] for p in fx.reads]
        read += [operands[p] for p in fx.writes if isinstance(operands[p], Path)]
        return any(  # a live label, or through [reg] any live cell
            (isinstance(part, Name) and part.name.lower() in live)
            or (isinstance(part, Mem) and bool(live) and (part.label or "").lower() in {"", *live})
            for whole in read
            for part in (whole, *nested(whole))
        )

    def register(self, regs: _Regs, index: int) -> Abstract:
        slot = self.slot.get(index)
        return 0 if slot is None else regs[slot]

    def operand(self, operand: Operand, regs: _Regs) -> Abstract:
        """What is known of an operand without running anything (a register, a literal, or
        a data label of one value that the plan never writes)."""
        if isinstance(operand, Reg):
            return self.register(regs, operand.index)
        if isinstance(operand, Imm):
            return operand.value
        if isinstance(operand, Name):
            key = operand.name.lower()
            data = self.flow.program.data.get(key)
            if type(data) in (str, int, float) and key not in self.layout.live:
                return data
        return UNKNOWN

    def transfer(self, pc: int, facts: _Facts) -> _Facts | None:
        """Facts after the instruction at ``pc``; ``None`` when it fails on every run that gets
        here so."""
        regs, flags, stack = facts
        fx, changes = self.flow.effects[pc], self.flow.stack_effect(pc) != (0, 0)
        if not (fx.registers_written or fx.flags_written or changes or fx.info.flow == "branch"):
            return facts  # nothing the summary follows changes (NOP, SAY, jumps...)
        outcome = self.evaluate(pc, fx, facts)
        if outcome is FAILS:
            return None
        if isinstance(outcome, Outcome):
            stack = pushed(taken(stack, fx.info.pops, UNKNOWN)[0], outcome.pushed)
            flags = flags if outcome.flags is None else outcome.flags
            return self.write(regs, outcome.registers), flags, stack
        return self.copies(pc, fx, facts)

    def goes(self, pc: int, facts: _Facts) -> int | None:
        """Where a branch goes when its inputs are known (the machine's step decides)."""
        fx = self.flow.effects[pc]
        outcome = self.evaluate(pc, fx, facts) if fx.info.flow == "branch" else None
        return outcome.next_pc if isinstance(outcome, Outcome) else None

    def evaluate(self, pc: int, fx: Effects, facts: _Facts) -> Outcome | Fails | None:
        """The machine's step on the known inputs, or ``None`` when one is not known."""
        regs, flags, stack = facts
        if self.opaque[pc] or len(stack) < fx.info.pops or (fx.info.condition and flags is UNKNOWN):
            return None
        read = {reg: self.register(regs, reg) for reg in fx.registers_read}
        popped = taken(stack, fx.info.pops, UNKNOWN)[1]
        if any(v is UNKNOWN for v in (*read.values(), *popped)):
            return None
        key = (
            pc,
            tuple((r, _key(v)) for r, v in sorted(read.items())),
            flags if fx.info.condition else None,
            tuple(_key(v) for v in popped),
        )
        if key not in self.memo:
            self.memo[key] = self.run(pc, read, flags, popped)  # type: ignore[arg-type]  # known
        return self.memo[key]

    def copies(self, pc: int, fx: Effects, facts: _Facts) -> _Facts:
        """Facts after an instruction that could not be run: what it writes (a tool's results
        too) is unknown, but a value it copies keeps what is known of it."""
        regs, flags, stack = facts
        count, put = self.flow.stack_effect(pc)
        ops = self.flow.program.instructions[pc].operands
        top = stack[-1] if stack else UNKNOWN
        moved = [(w, top if r == fx.STACK else self.operand(ops[r], regs)) for w, r in fx.copies]
        written: dict[int, Abstract] = {reg: UNKNOWN for reg in fx.registers_written}
        for position in fx.writes:
            if isinstance(target := ops[position], Reg) and target.index:
                sources = [value for w, value in moved if w == position] or [UNKNOWN]
                written[target.index] = functools.reduce(join, sources)
        copied = [value for w, value in moved if w == fx.STACK]
        stack = pushed(taken(stack, count, UNKNOWN)[0], copied + [UNKNOWN] * (put - len(copied)))
        return self.write(regs, written), UNKNOWN if fx.flags_written else flags, stack

    def write(self, regs: _Regs, values: Mapping[int, Abstract]) -> _Regs:
        return tuple(values.get(reg, old) for reg, old in zip(self.slot, regs, strict=True))


def constants(
    paths: Paths, layout: Layout, semantics: Semantics | None = None
) -> Callable[[int], tuple[Abstract, ...]] | None:
    """Propagate constants over the states ``paths`` of a program, whose memory is ``layout``
    (what the plan may write is never a constant), running instructions by ``semantics``
    (default: :func:`default_semantics`).

    Returns:
        ``stack(state)``: the stack (top last, at most its top
        :data:`~llassembly.language.limits.MAX_FOLLOWED_STACK` values) on entry to a state,
        ``()`` for a state no run reaches; or ``None`` when the analysis ran out of steps.
    """
    run = _Propagation(paths.flow, layout, semantics or default_semantics())
    start: _Facts = ((0,) * len(run.slot), run.initial_flags, ())
    limit = min(MAX_VALUE_STEPS, MAX_VALUE_WORK // max(len(run.slot), 1))
    found, stopped = fixpoint(paths, start, run.transfer, _merge, limit, run.goes)
    if stopped is not None:
        return None
    return lambda state: found[state][2] if state in found else ()
