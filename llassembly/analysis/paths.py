"""The paths of a plan: its states ``(instruction, return stack)`` and what they bound.

The summary (:mod:`llassembly.analysis.summary`) counts on this graph: every way through the
code from the entry point, both ways at each conditional jump, into each subroutine and back
to the instruction after the ``CALL`` that entered it (values are not followed here, so "a
path" is a way through the code whatever the values). Built from the control-flow graph
(:mod:`llassembly.analysis.cfg`), bounded by :data:`~llassembly.analysis.flow.MAX_STATES`
states and :data:`~llassembly.analysis.flow.MAX_CALL_DEPTH` nested calls; control flow it
cannot follow within them leaves it incomplete (:attr:`Paths.complete`).

Every count is linear in the number of states (one pass, or one per tool):

* :meth:`Paths.longest`: the most weight on any path (``None`` when a loop has weight);
* :meth:`Paths.fewest`: the least weight on a path that ends the plan;
* :meth:`Paths.always`: the call sites every path that ends the plan goes through.
"""

from __future__ import annotations

import functools
import heapq
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from llassembly.analysis.cfg import ControlFlow, components
from llassembly.analysis.flow import MAX_CALL_DEPTH, MAX_STATES

__all__ = ["END", "Paths", "fixpoint", "paths_of"]

END: Final = -1
"""In a state's successors: the plan ends there (``HLT``, a top-level ``RET``, the last
instruction)."""

_State = tuple[int, tuple[int, ...]]


@dataclass
class Paths:
    """The reachable states of a program and their successors (see :func:`paths_of`).

    Attributes:
        flow: The control-flow graph they were built from.
        states: ``(instruction, return stack)`` per state number; state 0 is the entry.
        succ: Successor state numbers per state (:data:`END` for the end of the plan).
        complete: Every path was followed (no bound was hit, no target left unresolved).
    """

    flow: ControlFlow
    states: list[_State] = field(default_factory=list)
    succ: list[tuple[int, ...]] = field(default_factory=list)
    complete: bool = True

    @functools.cached_property
    def order(self) -> list[list[int]]:
        """The strongly connected components of the state graph, sinks first."""
        if not self.states:
            return []
        graph = [tuple(t for t in out if t != END) for out in self.succ]
        return components(0, graph)

    @functools.cached_property
    def component_of(self) -> list[int]:
        """The component (an index into :attr:`order`) of each state."""
        found = [0] * len(self.states)
        for number, members in enumerate(self.order):
            for member in members:
                found[member] = number
        return found

    @functools.cached_property
    def looped(self) -> frozenset[int]:
        """The states inside a loop (a component with a cycle)."""
        return frozenset(
            m
            for members in self.order
            for m in members
            if len(members) > 1 or members[0] in self.succ[members[0]]
        )

    @functools.cached_property
    def ends(self) -> bool:
        """Some path reaches the end of the plan."""
        return bool(self.states) and self.fewest([0] * len(self.states)) is not None

    def longest(self, weight: Sequence[int]) -> int | None:
        """Most weight on any path from the entry; ``None`` when a weighted state is in a
        loop (or the graph is incomplete)."""
        if not self.states:
            return 0
        if not self.complete:
            return None
        order, comp_of, succ = self.order, self.component_of, self.succ
        best: list[int | None] = [0] * len(order)
        for number, members in enumerate(order):  # sinks first
            cyclic = len(members) > 1 or members[0] in succ[members[0]]
            own = sum(weight[m] for m in members)
            if cyclic and own:
                best[number] = None
                continue
            after: int | None = 0
            for member in members:
                for nxt in succ[member]:
                    if nxt == END or comp_of[nxt] == number:
                        continue
                    value = best[comp_of[nxt]]
                    after = None if value is None or after is None else max(after, value)
            best[number] = None if after is None else own + after
        return best[comp_of[0]]

    def fewest(self, weight: Sequence[int]) -> int | None:
        """Least weight on a path from the entry to the end (0-1 breadth first), or ``None``
        when no path ends the plan."""
        if not self.states:
            return None
        succ = self.succ
        dist = {0: weight[0]}
        queue = deque([0])
        done: set[int] = set()
        best: int | None = None
        while queue:
            node = queue.popleft()
            if node in done:
                continue
            done.add(node)
            for nxt in succ[node]:
                if nxt == END:
                    best = dist[node] if best is None else min(best, dist[node])
                    continue
                cost = dist[node] + weight[nxt]
                if cost < dist.get(nxt, cost + 1):
                    dist[nxt] = cost
                    (queue.appendleft if weight[nxt] == 0 else queue.append)(nxt)
        return best

    def always(self, sites: Iterable[int]) -> frozenset[int]:
        """The instructions of ``sites`` that every path ending the plan runs.

        A must-analysis over the states: the sites on every path to a state are those on every
        path to each state before it, plus its own; the greatest fixed point, found by a
        worklist, is exact (the set of paths is not approximated).
        """
        bit_of = {pc: 1 << i for i, pc in enumerate(dict.fromkeys(sites))}
        if not bit_of or not self.states:
            return frozenset()
        everything = (1 << len(bit_of)) - 1
        own = [bit_of.get(pc, 0) for pc, _ in self.states]
        preds: list[list[int]] = [[] for _ in self.states]
        for number, out in enumerate(self.succ):
            for nxt in out:
                if nxt != END:
                    preds[nxt].append(number)
        must = [everything] * len(self.states)
        must[0] = own[0]
        queue = deque(range(1, len(self.states)))
        queued = [True] * len(self.states)
        queued[0] = False
        while queue:
            number = queue.popleft()
            queued[number] = False
            value = everything
            for pred in preds[number]:
                value &= must[pred]
            value |= own[number]
            if value != must[number]:
                must[number] = value
                for nxt in self.succ[number]:
                    if nxt != END and not queued[nxt]:
                        queued[nxt] = True
                        queue.append(nxt)
        at_end = everything
        for number, out in enumerate(self.succ):
            if END in out:
                at_end &= must[number]
        return frozenset(pc for pc, bit in bit_of.items() if at_end & bit)


def paths_of(flow: ControlFlow) -> Paths:
    """Number every reachable state of ``flow``'s program, breadth first from the entry."""
    paths = Paths(flow)
    program = flow.program
    if not 0 <= program.entry < flow.end:
        return paths
    index: dict[_State, int] = {}

    def number(key: _State) -> int | None:
        found = index.get(key)
        if found is None:
            if len(paths.states) >= MAX_STATES:
                paths.complete = False
                return None
            found = index[key] = len(paths.states)
            paths.states.append(key)
            paths.succ.append(())
            queue.append(found)
        return found

    queue: deque[int] = deque()
    number((program.entry, ()))
    while queue:
        state = queue.popleft()
        pc, returns = paths.states[state]
        targets: list[int] = []
        for nxt in _next(paths, pc, returns):
            if nxt is not None and nxt[0] >= flow.end:  # past the last instruction
                if nxt[1]:
                    continue  # inside a subroutine: the verifier refuses it
                nxt = None
            if nxt is None:
                targets.append(END)
                continue
            found = number(nxt)
            if found is not None:
                targets.append(found)
        paths.succ[state] = tuple(dict.fromkeys(targets))
    return paths


def _next(paths: Paths, pc: int, returns: tuple[int, ...]) -> list[_State | None]:
    """The states after ``(pc, returns)``; ``None`` for the end of the plan."""
    flow = paths.flow
    kind = flow.effects[pc].flow
    if kind == "halt":
        return [None]
    if kind == "return":
        return [(returns[-1], returns[:-1]) if returns else None]
    if kind == "call" and pc not in flow.tools:
        if pc not in flow.targets or len(returns) >= MAX_CALL_DEPTH:
            paths.complete = False  # an unknown name, or nested deeper than followed
            return []
        return [(flow.targets[pc], (*returns, pc + 1))]
    if kind in ("jump", "branch") and pc not in flow.targets:
        paths.complete = False  # a jump to no label: where it goes is not known
        return []
    return [(target, returns) for target in flow.successors[pc]]


_F = TypeVar("_F")


def fixpoint(
    paths: Paths,
    start: _F,
    transfer: Callable[[int, _F], _F],
    merge: Callable[[_F, _F], _F],
    limit: int,
) -> dict[int, _F] | None:
    """Facts on entry to each state of ``paths``, from ``start`` at the first: each state's
    facts go through ``transfer`` (given the state's instruction index) to its successors,
    ``merge``d where paths meet, until nothing changes; states are taken in program order.
    ``None`` when that takes more than ``limit`` steps (the facts are not final then)."""
    facts: dict[int, _F] = {0: start}
    queue, queued, steps = [(paths.states[0][0], 0)], {0}, 0
    while queue:
        steps += 1
        if steps > limit:
            return None
        _, number = heapq.heappop(queue)
        queued.discard(number)
        out = transfer(paths.states[number][0], facts[number])
        for nxt in paths.succ[number]:
            if nxt == END:
                continue
            old = facts.get(nxt)
            merged = out if old is None else merge(old, out)
            if merged != old:
                facts[nxt] = merged
                if nxt not in queued:
                    queued.add(nxt)
                    heapq.heappush(queue, (paths.states[nxt][0], nxt))
    return facts
