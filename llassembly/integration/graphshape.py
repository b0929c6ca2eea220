"""Where the nodes of a plan graph start and where each can go: the graph's shape.

Nodes route themselves with ``Command(goto=...)``; this shape only lists, for building and
drawing, the destinations each node may reach and the text it is drawn with. Every walk is
bounded, so building a graph stays linear in the plan's size whatever its shape.
"""

from __future__ import annotations

import functools
from typing import Literal

from llassembly.analysis.cfg import ControlFlow, control_flow
from llassembly.machine.emulator import CompiledProgram

__all__ = ["PlanShape"]

_MAX_DESTINATIONS = 64  # most drawn edges out of one node
_MAX_WALK = 512  # most instructions walked to find where one block node can go
_TAKEN, _NOT_TAKEN = "taken", "not taken"


class PlanShape:
    """The node starts and labelled edges of one program at one granularity (memoised)."""

    def __init__(
        self, compiled: CompiledProgram, granularity: Literal["block", "instruction", "program"]
    ) -> None:
        self.compiled = compiled
        self.granularity = granularity
        self._calls_from: dict[int, set[int] | None] = {}

    @functools.cached_property
    def _flow(self) -> ControlFlow:
        """The control-flow graph the program was compiled from (built when it was not kept)."""
        return self.compiled.flow or control_flow(self.compiled.program, self.compiled.externs)

    def node_starts(self) -> list[int]:
        program = self.compiled.program
        count = len(program.instructions)
        if self.granularity == "instruction":
            return list(range(count))
        starts = {program.entry}
        starts.update(i + 1 for i in self._flow.tools)
        return sorted(s for s in starts if s < count)

    def _edges(self, pc: int) -> list[tuple[str, int | None]]:
        """Control-flow successors of one instruction, labelled; ``None`` means the end.

        A failure also ends the graph, so every node can reach the end.
        """
        flow = self._flow
        kind = flow.effects[pc].flow
        if kind == "return":
            return [("", s) for s in dict.fromkeys([*self._return_sites, None])]
        out = [index if index < flow.end else None for index in flow.successors[pc]]
        if kind == "branch":
            return [(_TAKEN, out[0]), (_NOT_TAKEN, out[1])]
        return [("", out[0] if out else None)]

    @functools.cached_property
    def _return_sites(self) -> list[int | None]:
        """Where a ``RET`` may go: the instruction after each ``CALL label`` (computed once)."""
        flow = self._flow
        return [site if site < flow.end else None for site in flow.return_sites]

    def successors(self, pc: int) -> list[tuple[str, int | None]] | None:
        """Labelled successor nodes of the node starting at ``pc`` (always includes the end),
        or ``None`` when there are more than the drawing bounds allow."""
        if self.granularity == "instruction":
            edges = self._edges(pc)
            return edges if len(edges) <= _MAX_DESTINATIONS else None
        calls = self._reachable_calls(pc)
        if calls is None:
            return None
        count = len(self.compiled.program.instructions)
        found = dict.fromkeys(i + 1 for i in sorted(calls) if i + 1 < count)
        return [("", target) for target in found] + [("", None)]

    def describe(self, pc: int) -> str:
        program = self.compiled.program
        ins = program.instructions[pc]
        if self.granularity == "instruction":
            return f"L{ins.line} {ins}"
        calls = self._reachable_calls(pc)
        if calls is None:
            return f"from L{ins.line} to one of many tool calls"
        ends = " | ".join(
            f"L{program.instructions[i].line} {program.instructions[i]}" for i in sorted(calls)
        )
        return f"from L{ins.line}" + (f" to {ends}" if ends else " to the end")

    def _reachable_calls(self, pc: int) -> set[int] | None:
        """Tool CALLs reachable from ``pc`` through pure instructions (memoised per node), or
        ``None`` when the walk exceeds its bounds (the drawing then shows fewer edges)."""
        if pc in self._calls_from:
            return self._calls_from[pc]
        seen: set[int] = set()
        calls: set[int] | None = set()
        todo = [pc]
        while todo and calls is not None:
            index = todo.pop()
            if index in seen:
                continue
            seen.add(index)
            if len(seen) > _MAX_WALK or len(calls) > _MAX_DESTINATIONS:
                calls = None
                break
            if index in self._flow.tools:
                calls.add(index)
                continue
            todo.extend(t for _, t in self._edges(index) if t is not None)
        self._calls_from[pc] = calls
        return calls
