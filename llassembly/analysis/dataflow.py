"""Provenance: which tool results a value derives from, per instruction and before the run.

A value's *sources* are the tools whose results it was computed from (``docs/dataflow.md``,
"What a value's sources are"). The rule is one for every instruction, read from the instruction
table's :func:`~llassembly.language.program.effects`: **what an instruction writes derives from
what it reads** (:class:`Transfer`, :func:`transfer_of`); a tool ``CALL``'s results derive from
the tool alone (:func:`result_sources`), a query's from what its model read. Control dependence
is not followed: a result can choose between paths the plan wrote, never add one.

The same facts serve the run (:mod:`llassembly.machine.provenance` keeps sources beside values
and checks each call) and the analysis before it (:func:`argument_flows`), so what a person
approves is what runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Final, NamedTuple, TypeAlias

from llassembly.analysis.cfg import Layout
from llassembly.analysis.paths import Paths, fixpoint, joined_stacks, pushed, taken
from llassembly.analysis.queries import is_query, query_site, query_sources
from llassembly.language import program
from llassembly.language.instructions import register_name
from llassembly.language.limits import MAX_VALUE_STEPS, MAX_VALUE_WORK

Sources: TypeAlias = frozenset[str]
"""The tools whose results a value derives from (empty: only the plan's own literals)."""
NO_SOURCES: Final[Sources] = frozenset()


class Write(NamedTuple):
    """One place an instruction writes (a register, a variable or data label, a memory cell, or
    a path: its base) and, for a copy, the operands whose sources it gets (what it copies, and
    the address or the rest of the structure of its own place); ``None`` for a computed value,
    which gets everything the instruction reads."""

    place: program.Operand
    copies: tuple[program.Operand, ...] | None


class Transfer(NamedTuple):
    """How sources move through one instruction (see the module doc).

    Attributes:
        reads: Every operand it reads: value operands, the registers of addresses (its own places'
            too), the bases and keys of paths written, the registers it uses without naming them.
        writes: The places it writes.
        fx: Its effects: the flags it tests and the values it pops join what it writes; the
            registers it writes without naming them, the values it pushes and the flags it
            sets each get everything read.
    """

    reads: tuple[program.Operand, ...]
    writes: tuple[Write, ...]
    fx: program.Effects


def place_parts(operand: program.Operand) -> tuple[program.Operand, ...]:
    """What a written place reads to be found, or keeps: a memory cell's address registers; a
    path's base (the rest of the structure stays) and keys. Nothing for a register or name."""
    if isinstance(operand, program.Mem):
        return operand.registers
    if isinstance(operand, program.Path):
        return (operand.base, *(s for s in operand.steps if not isinstance(s, program.Imm)))
    return ()


@functools.lru_cache(maxsize=16_384)
def transfer_of(instruction: program.Instruction) -> Transfer | None:
    """The :class:`Transfer` of an instruction other than a tool ``CALL`` (see
    :func:`result_sources` for those), from its :func:`~llassembly.language.program.effects`;
    ``None`` when nothing it writes carries sources (a jump, ``NOP``, ``SAY``, ``CALL label``)."""
    fx = program.effects(instruction)
    if not (fx.writes or fx.implicit_writes or fx.info.pops + fx.info.pushes or fx.flags_written):
        return None
    operands = instruction.operands
    reads = [operands[p] for p in fx.reads]
    for position, operand in enumerate(operands):
        if position not in fx.reads:  # a place written, or an address computed (LEA)
            reads += place_parts(operand)
    reads += [program.Reg(index, register_name(index)) for index in fx.implicit_reads]
    writes = []
    for position in fx.writes:
        copied = tuple(operands[r] for w, r in fx.moves if w == position)
        own = place_parts(operands[position])
        writes.append(Write(operands[position], copied + own if copied else None))
    return Transfer(tuple(reads), tuple(writes), fx)


def result_sources(tool: str) -> Sources:
    """The sources of each result of a call of ``tool``: the tool alone. What the tool was
    given is the tool's to use; an allow-list policy (``only_from``) refuses a value passed
    through a tool it does not list (see ``docs/dataflow.md``)."""
    return frozenset((tool,))


# -- before the run: which results may, and must, reach each argument ---------------------------

Flow: TypeAlias = tuple[Sources, Sources]
"""Which tools' results reach a value, or one argument of a call: ``(may, must)``, those on
some run and those on every run that gets there."""
_EMPTY: Final[Flow] = (NO_SOURCES, NO_SOURCES)


def _all(flows: Iterable[Flow]) -> Flow:
    """A value derived from all of these (every run has each)."""
    pairs = list(flows)
    return NO_SOURCES.union(*(p[0] for p in pairs)), NO_SOURCES.union(*(p[1] for p in pairs))


def _join(a: Flow, b: Flow) -> Flow:
    """A value that is the one on some runs, the other on the rest."""
    return a if a == b else (a[0] | b[0], a[1] & b[1])


# registers (the tracked ones, in order), flags, stack (top last), memory (cell -> pair)
_Facts = tuple[tuple[Flow, ...], Flow, tuple[Flow, ...], Mapping[int, Flow]]


def _merge(old: _Facts, new: _Facts) -> _Facts:
    memory = {
        cell: pair
        for cell in {*old[3], *new[3]}
        if (pair := _join(old[3].get(cell, _EMPTY), new[3].get(cell, _EMPTY))) != _EMPTY
    }
    regs = tuple(map(_join, old[0], new[0]))
    return regs, _join(old[1], new[1]), joined_stacks(old[2], new[2], _join), memory


def argument_flows(paths: Paths, layout: Layout) -> Callable[[int], tuple[Flow, ...]] | None:
    """Which tools' results can reach the arguments of the tool ``CALL`` of each state: a sound
    over-approximation over the states of the paths, by the same :class:`Transfer` facts the
    machine follows (a run's sources for an argument always hold its *must* and are always
    within its *may*). Cells found through registers are weakly updated; a stack slot deeper
    than :data:`~llassembly.language.limits.MAX_FOLLOWED_STACK` may hold any tool's result and
    any query's answer. A query's answer derives from what its model read
    (:func:`~llassembly.analysis.queries.query_sources`); it is also marked as the answer of
    the query at its line (``query_text@9``, :func:`~llassembly.analysis.queries.query_site`),
    for the summary; the machine never carries those marks.

    Returns:
        ``flows(state)`` for a tool ``CALL``'s state: one :data:`Flow` per argument pushed,
        first pushed first; or ``None`` when the paths are incomplete or the analysis ran out
        of steps (nothing is known then).
    """
    if not paths.complete:
        return None
    flow, lines = paths.flow, paths.flow.program.instructions
    slot = flow.tracked  # the other registers always hold 0
    marks = {pc: query_site(lines[pc].line) for pc, t in flow.tools.items() if is_query(t)}
    # What a value the analysis cannot follow (below the stack followed) may derive from:
    # any tool's result and, marked, any query's answer.
    top: Flow = (frozenset({t.name for t in flow.tools.values()} | {*marks.values()}), NO_SOURCES)

    def value(operand: program.Operand, facts: _Facts) -> Flow:
        regs, _, _, memory = facts
        if isinstance(operand, program.Reg):
            return _EMPTY if operand.index not in slot else regs[slot[operand.index]]
        if isinstance(operand, program.Name):
            # read-only data, a constant: the plan's own (no cells written); one cell, or a
            # row read whole: every cell is in the text
            if operand.name.lower() not in layout.live:
                return _EMPTY
            return _all(memory.get(number, _EMPTY) for number in layout.cells_of(operand)[0])
        if isinstance(operand, program.Mem):  # one of its cells (through [reg] also read-only data,
            cells = layout.cells_of(operand)[0]  # or text in reg), and its registers
            held = [memory.get(n, _EMPTY) for n in cells]
            held += [_EMPTY] if operand.label is None or not cells else []
            found = functools.reduce(_join, held)
            return _all([found, *(value(reg, facts) for reg in operand.registers)])
        if isinstance(operand, program.Path | program.Template):  # its base, keys or fills
            return _all(value(part, facts) for part in program.nested(operand))
        return _EMPTY  # a literal

    def write(
        place: program.Operand, pair: Flow, regs: list[Flow], memory: Mapping[int, Flow]
    ) -> Mapping[int, Flow]:
        """Write ``pair`` to ``place``: a register in ``regs``, in place; memory copied on
        write (the new memory is returned). A path written changes its base, which holds the
        new text of the whole; a cell found through a register may keep what it held."""
        place = program.place_of(place)
        if isinstance(place, program.Reg) and place.index in slot:
            regs[slot[place.index]] = pair
        cells, exact = layout.cells_of(place)  # none for a register
        joined = {n: pair if exact else _join(memory.get(n, _EMPTY), pair) for n in cells}
        return {**memory, **joined} if joined else memory

    def transfer(pc: int, facts: _Facts) -> _Facts:
        regs, flags, stack, memory = facts
        tool, move, fx = flow.tools.get(pc), transfer_of(lines[pc]), flow.effects[pc]
        if tool is None and move is None:
            return facts
        count, put = flow.stack_effect(pc)
        stack, popped = taken(stack, count, top)
        said = None  # (what EAX and the flags get, where it differs from everything)
        if tool is not None:  # its results, its error in EAX and the flags (did it fail)
            everything, writes = (result_sources(tool.name),) * 2, []
            if is_query(tool):  # its answer derives from what its model read, and is a model's
                (may, must), mark = _all(popped), marks[pc]  # every query's CALL has a mark
                everything = query_sources(may | {mark}), query_sources(must | {mark})
            elif pc in flow.tested:  # its arguments refused: why, in EAX, quotes them
                said = everything[0] | _all(popped)[0], everything[1]
        elif move is not None:
            chose = [flags] if fx.info.condition else []  # SETcc: what the flags chose is data
            everything = _all([*(value(o, facts) for o in move.reads), *popped, *chose])
            writes = [  # everything is read before anything is written (XCHG)
                (w.place, everything)
                if w.copies is None
                else (w.place, _all([*chose, *(value(o, facts) for o in w.copies)]))
                for w in move.writes
            ]
        said = said or everything
        writes += [(program.Reg(reg, register_name(reg)), said) for reg in fx.implicit_writes]
        new_regs = list(regs)
        for place, pair in writes:
            memory = write(place, pair, new_regs, memory)
        flags = said if fx.flags_written else flags
        return tuple(new_regs), flags, pushed(stack, [everything] * put), memory

    start: _Facts = ((_EMPTY,) * len(slot), _EMPTY, (), {})
    limit = min(MAX_VALUE_STEPS, MAX_VALUE_WORK // max(len(slot) + layout.live_cells, 1))
    found, stopped = fixpoint(paths, start, transfer, _merge, limit)
    if stopped is not None:
        return None

    def flows(state: int) -> tuple[Flow, ...]:
        return tuple(taken(found[state][2], flow.stack_effect(paths.states[state][0])[0], top)[1])

    return flows
