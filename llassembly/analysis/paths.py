"""The paths of a plan as states, and the one engine every analysis walks them with.

A state is ``(instruction, return stack)``: a way through the code from the entry point, both
ways at each conditional jump, into each subroutine and back, whatever the values.
:func:`paths_of` builds them once per control-flow graph, bounded by :data:`MAX_CALL_DEPTH`
and :data:`MAX_STATES`; what it could not follow leaves them incomplete (the verifier refuses
such a plan, the summary's maxima are unbounded). :func:`fixpoint` is the one worklist the
verifier, the types, the constants and the data flows run on, each keeping the top
:data:`MAX_FOLLOWED_STACK` values of the data stack alike (:func:`pushed`, :func:`taken`,
:func:`joined_stacks`); :meth:`Paths.longest`, :meth:`Paths.fewest`, :meth:`Paths.always` and
:attr:`Paths.endless` are the summary's counts, linear in the number of states.
"""

from __future__ import annotations

import functools
import heapq
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from llassembly.analysis.cfg import ControlFlow, components, cyclic
from llassembly.language.instructions import CONDITIONS
from llassembly.language.limits import MAX_CALL_DEPTH, MAX_FOLLOWED_STACK, MAX_STATES, MAX_STEPS
from llassembly.language.program import Imm, one_place

END: Final = -1
"""A successor that is the end of the plan (``HLT``, a top-level ``RET``, the last instruction)."""

State = tuple[int, tuple[int, ...]]
"""An instruction and the return stack it runs with (the instruction after each ``CALL
label`` that has not returned yet, innermost last)."""
_F = TypeVar("_F")
_V = TypeVar("_V")


def outermost(state: State) -> int:
    """The instruction to blame for a path too large to follow at ``state``: the outermost
    ``CALL`` that led there, else the state's own instruction."""
    pc, returns = state
    return returns[0] - 1 if returns else pc


@dataclass(eq=False)
class Paths:
    """The reachable states of a program and their successors (see :func:`paths_of`).

    Attributes:
        flow: The control-flow graph they were built from.
        states: ``(instruction, return stack)`` per state number; state 0 is the entry.
        succ: Successor state numbers per state (:data:`END` for the end of the plan).
        too_deep: ``CALL label`` instructions that would nest past :data:`MAX_CALL_DEPTH`.
        off_end: Instruction after which a subroutine runs past the end of the program (for a
            return to the end, the ``CALL`` it returns from), to the ``CALL`` that entered that
            subroutine (no path goes on from there).
        overflow: Where :data:`MAX_STATES` ran out: the outermost ``CALL`` of the path being
            followed, else its instruction (``None`` if it did not).
        unresolved: A jump or ``CALL`` names no label (the verifier refuses it): where it goes
            is not known.
    """

    flow: ControlFlow
    states: list[State] = field(default_factory=list)
    succ: list[tuple[int, ...]] = field(default_factory=list)
    too_deep: set[int] = field(default_factory=set)
    off_end: dict[int, int] = field(default_factory=dict)
    overflow: int | None = None
    unresolved: bool = False

    @property
    def complete(self) -> bool:
        """Every path was followed (no bound was hit, no target left unresolved)."""
        return not (self.too_deep or self.unresolved or self.overflow is not None)

    @functools.cached_property
    def _components(self) -> tuple[list[list[int]], dict[int, int]]:
        return _components(self.succ)

    @functools.cached_property
    def looped(self) -> frozenset[int]:
        """The states inside a loop (a component with a cycle)."""
        order, succ = self._components[0], self.succ
        return frozenset(m for members in order if cyclic(members, succ) for m in members)

    @functools.cached_property
    def endless(self) -> tuple[tuple[int, ...], ...]:
        """The loops no run leaves (by :meth:`taken`), each as its instructions in order: cyclic
        components with no successor outside (nor the end of the plan), whatever they call.
        Only a budget or a failing call stops a run that enters one. Empty when the paths are
        incomplete (a state cut off by a bound has no successors, yet is not a loop)."""
        if not (self.complete and self.states):
            return ()
        succ = self.taken()
        order, comp_of = _components(succ)
        found = (
            tuple(sorted({self.states[m][0] for m in members}))
            for number, members in enumerate(order)
            if cyclic(members, succ)
            and all(nxt != END and comp_of[nxt] == number for m in members for nxt in succ[m])
        )
        return tuple(dict.fromkeys(found))

    def taken(self) -> list[tuple[int, ...]]:
        """:attr:`succ` but the ways no run takes, the flags followed as the ``(ZF, LT)`` pairs
        they may be: after ``CMP R1, R1`` (or ``CMP 1, 1``) ``JE`` always jumps, and after
        ``JE top`` not taken, ``JNE top`` does."""
        flow, every = self.flow, frozenset((z, lt) for z in (False, True) for lt in (False, True))
        facts, queue = {0: every}, [0]
        succ: list[tuple[int, ...]] = [()] * len(self.states)
        while queue:
            state = queue.pop()
            pc, flags = self.states[state][0], facts[state]
            ins, info = flow.program.instructions[pc], flow.effects[pc].info
            if flow.effects[pc].flags_written or pc in flow.tools:
                first, second = (*ins.operands, None, None)[:2]
                same = (isinstance(first, Imm) and first == second) or one_place(first, second)
                flags = (
                    frozenset({(True, False)}) if same and info.same_register == "equal" else every
                )
            target = flow.targets.get(pc, pc + 1)  # a jump on a condition: its two ways
            test = CONDITIONS.get(info.condition) if pc + 1 != target < flow.end else None
            out = []
            for nxt in self.succ[state]:
                jumps = nxt != END and self.states[nxt][0] == target
                kept = flags if test is None else frozenset(f for f in flags if test(*f) == jumps)
                if kept:
                    out.append(nxt)
                if kept and nxt != END and not kept <= facts.get(nxt, frozenset()):
                    facts[nxt] = facts.get(nxt, frozenset()) | kept
                    queue.append(nxt)
            succ[state] = tuple(out)
        return succ

    @functools.cached_property
    def ends(self) -> bool:
        """Some path reaches the end of the plan (every state is reached from the entry); with
        no state (the entry is past the last instruction) the run ends at once."""
        return not self.states or any(END in out for out in self.succ)

    def longest(self, weight: Sequence[int]) -> int | None:
        """Most weight on any path from the entry; ``None`` when a weighted state is in a
        loop (or the graph is incomplete)."""
        if not self.states:
            return 0
        if not self.complete:
            return None
        (order, comp_of), succ = self._components, self.succ
        best: list[int | None] = []
        for number, members in enumerate(order):  # sinks first: those it goes on to are known
            own = sum(weight[m] for m in members)
            later = {comp_of[n] for m in members for n in succ[m] if n != END} - {number}
            after = [best[c] for c in later]
            unbounded = (own and cyclic(members, succ)) or None in after
            best.append(None if unbounded else own + max([a or 0 for a in after], default=0))
        return best[comp_of[0]]

    def fewest(self, weight: Sequence[int]) -> int | None:
        """Least weight on a path from the entry to the end (Dijkstra's), or ``None`` when no
        path ends the plan."""
        if not self.states:
            return 0  # the run ends at once (:attr:`ends`)
        best, queue = {0: weight[0]}, [(weight[0], 0)]
        while queue:
            dist, node = heapq.heappop(queue)
            for nxt in self.succ[node]:
                if nxt == END:  # nodes are taken nearest first: no end is nearer
                    return dist
                if (cost := dist + weight[nxt]) < best.get(nxt, cost + 1):
                    best[nxt] = cost
                    heapq.heappush(queue, (cost, nxt))
        return None

    def always(self, sites: Iterable[int]) -> frozenset[int]:
        """The instructions of ``sites`` that every path ending the plan runs, by a must-analysis
        over the states: the sites on every path to a state are those on every path to each
        state before it, plus its own; the greatest fixed point is exact (the set of paths is
        not approximated). Past :data:`MAX_STEPS` visits none is claimed."""
        bit_of = {pc: 1 << i for i, pc in enumerate(dict.fromkeys(sites))}
        if not bit_of or not self.states:
            return frozenset()

        def transfer(pc: int, bits: int) -> int:
            return bits | bit_of.get(pc, 0)

        facts, stopped = fixpoint(self, 0, transfer, operator.and_, MAX_STEPS)
        if stopped is not None:
            return frozenset()
        at_end = -1
        for number, out in enumerate(self.succ):
            if END in out and number in facts:
                at_end &= transfer(self.states[number][0], facts[number])
        return frozenset(pc for pc, bit in bit_of.items() if at_end & bit)


@functools.lru_cache(maxsize=16)  # as the graphs (a planner checks and summarises one plan)
def paths_of(flow: ControlFlow) -> Paths:
    """Number every reachable state of ``flow``'s program, breadth first from the entry (built
    once per graph: the verifier, the summary and the query sites of one plan share them)."""
    paths = Paths(flow)
    program = flow.program
    if not 0 <= program.entry < flow.end:
        return paths
    index: dict[State, int] = {}

    def number(key: State) -> int | None:
        found = index.get(key)
        if found is None:
            if len(paths.states) >= MAX_STATES:
                if paths.overflow is None:
                    paths.overflow = outermost(key)
                return None
            found = index[key] = len(paths.states)
            paths.states.append(key)
        return found

    number((program.entry, ()))
    for pc, returns in paths.states:  # grows as states are numbered (their successors too)
        targets: list[int] = []
        for nxt in _next(paths, pc, returns):
            if nxt is not None and nxt[0] >= flow.end:  # past the last instruction
                if nxt[1]:  # inside a subroutine, without its RET (a RET: its CALL's fault)
                    origin = nxt[0] - 1 if flow.effects[pc].info.flow == "return" else pc
                    paths.off_end.setdefault(origin, nxt[1][-1] - 1)
                    continue
                nxt = None
            found = END if nxt is None else number(nxt)
            if found is not None:
                targets.append(found)
        paths.succ.append(tuple(dict.fromkeys(targets)))
    return paths


def _next(paths: Paths, pc: int, returns: tuple[int, ...]) -> list[State | None]:
    """The states after ``(pc, returns)``; ``None`` for the end of the plan."""
    flow = paths.flow
    kind = flow.effects[pc].info.flow
    if kind == "halt":
        return [None]
    if kind == "return":
        return [(returns[-1], returns[:-1]) if returns else None]
    if kind == "call" and pc not in flow.tools:
        if pc not in flow.targets:
            paths.unresolved = True  # an unknown name
            return []
        if len(returns) >= MAX_CALL_DEPTH:
            paths.too_deep.add(pc)
            return []
        return [(flow.targets[pc], (*returns, pc + 1))]
    if kind in ("jump", "branch") and pc not in flow.targets:
        paths.unresolved = True  # a jump to no label: where it goes is not known
        return []
    return [(target, returns) for target in flow.successors[pc]]


def fixpoint(
    paths: Paths,
    start: _F,
    transfer: Callable[[int, _F], _F | None],
    merge: Callable[[_F, _F], _F],
    limit: int,
    goes: Callable[[int, _F], int | None] | None = None,
    edge: Callable[[int, int, _F], _F] | None = None,
) -> tuple[dict[int, _F], int | None]:
    """Facts on entry to each state of ``paths``, from ``start`` at the first: each state's facts
    go through ``transfer`` (given the state's instruction index) to its successors, ``merge``d
    where paths meet, until nothing changes; states are taken in program order, so a loop's
    body settles before what follows it. ``transfer`` returns ``None`` when the instruction
    fails on every run that brings these facts (no path goes on); ``goes`` gives the one
    instruction a branch goes to when the facts decide it (``None``: every successor); ``edge``
    what the facts a branch sends become on the way to each instruction it goes to.

    Returns:
        The facts (none when there is no state) and ``None``; or, when that takes more than
        ``limit`` visits, the facts so far (not final) and the state that was to be visited next.
    """
    if not paths.states:
        return {}, None
    facts: dict[int, _F] = {0: start}
    queue, queued = [(paths.states[0][0], 0)], {0}
    for _ in range(limit):
        if not queue:
            return facts, None
        pc, number = heapq.heappop(queue)
        queued.discard(number)
        out = transfer(pc, facts[number])
        if out is None:
            continue
        only = goes(pc, facts[number]) if goes is not None else None
        for nxt in paths.succ[number]:
            if nxt == END or (only is not None and paths.states[nxt][0] != only):
                continue
            sent = out if edge is None else edge(pc, paths.states[nxt][0], out)
            old = facts.get(nxt)
            merged = sent if old is None else merge(old, sent)
            if merged != old:
                facts[nxt] = merged
                if nxt not in queued:
                    queued.add(nxt)
                    heapq.heappush(queue, (paths.states[nxt][0], nxt))
    return facts, queue[0][1] if queue else None


# -- the data stack as the analyses keep it --------------------------------------------------------


def pushed(stack: tuple[_V, ...], values: Iterable[_V]) -> tuple[_V, ...]:
    """``stack`` (top last) with ``values`` pushed, keeping the top :data:`MAX_FOLLOWED_STACK`."""
    return (*stack, *values)[-MAX_FOLLOWED_STACK:]


def taken(stack: tuple[_V, ...], count: int, anything: _V) -> tuple[tuple[_V, ...], list[_V]]:
    """``stack`` with its top ``count`` values taken off, and those values, first pushed first
    (``anything`` for each one below what is known)."""
    kept = len(stack) - count
    values = list(stack[max(kept, 0) :])
    return stack[: max(kept, 0)], [anything] * (count - len(values)) + values


def joined_stacks(
    a: tuple[_V, ...], b: tuple[_V, ...], join: Callable[[_V, _V], _V]
) -> tuple[_V, ...]:
    """What is known of a stack that is ``a`` on some paths and ``b`` on the others: the top
    values both know of, each joined (below them, anything)."""
    if a is b:
        return a
    keep = min(len(a), len(b))
    return tuple(map(join, a[len(a) - keep :], b[len(b) - keep :]))


def _components(succ: Sequence[tuple[int, ...]]) -> tuple[list[list[int]], dict[int, int]]:
    """The strongly connected components of a state graph from state 0, sinks first, and the
    component (an index into them) of each state."""
    order = components(0, [tuple(t for t in out if t != END) for out in succ]) if succ else []
    return order, {member: number for number, members in enumerate(order) for member in members}
