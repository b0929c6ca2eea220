"""The sources of the values a machine holds, kept beside them as plain data.

A :class:`Shadow` is the provenance half of a :class:`~llassembly.machine.state.MachineState`
(its ``provenance``): for each register, stack slot, memory cell and the flags, the tools
whose results the value there derives from (see :mod:`llassembly.analysis.dataflow`). Only
values that derive from some result are kept (an empty set is the default everywhere), so a
plan that reads no result keeps nothing. The machine keeps one only when data-flow policies
are checked (:mod:`llassembly.machine.provenance`); its snapshot is part of the machine's, so
a plan resumed in another process is checked as the first process would have checked it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llassembly.analysis.dataflow import NO_SOURCES, Sources, result_sources
from llassembly.analysis.queries import query_sources
from llassembly.errors import UsageError
from llassembly.language.instructions import EAX_INDEX, register_index, register_name

__all__ = ["Shadow"]


def _names(value: Any, what: str) -> Sources:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise UsageError(f"not an emulator snapshot: the provenance of {what} is not tool names")
    return frozenset(value)


@dataclass(slots=True)
class Shadow:
    """The sources of each value of a machine state (an empty set where none is written).

    Attributes:
        regs: Register index to the sources of its value.
        stack: The sources of each value on the data stack, in the same order (the stack and
            this list always have the same length).
        mem: ``(label, cell index)`` to the sources of the cell's value.
        flags: The sources of the values the flags were set from.
        query: The sources of a query's answer while the query is made (what it read, and
            the model's mark: :func:`~llassembly.analysis.queries.query_sources`), until its
            results are given; empty when no query is in flight.
    """

    regs: dict[int, Sources] = field(default_factory=dict)
    stack: list[Sources] = field(default_factory=list)
    mem: dict[tuple[str, int], Sources] = field(default_factory=dict)
    flags: Sources = NO_SOURCES
    query: Sources = NO_SOURCES

    @classmethod
    def fresh(cls, depth: int) -> Shadow:
        """The shadow of a state whose values derive from no result (``depth`` on its stack)."""
        return cls(stack=[NO_SOURCES] * depth)

    def asked(self, read: Sequence[Sources]) -> None:
        """A query was made with arguments of these sources: its answer derives from them,
        and a model produced it (kept in :attr:`query` until :meth:`results`)."""
        self.query = query_sources(NO_SOURCES.union(*read))

    def results(self, tool: str, count: int, to_eax: bool) -> None:
        """A call of ``tool`` gave ``count`` results: on the stack, or the one in ``EAX``; a
        query's derive from what it read (see :meth:`asked`)."""
        sources, self.query = self.query or result_sources(tool), NO_SOURCES
        if to_eax:
            self.regs[EAX_INDEX] = sources
        else:
            self.stack.extend([sources] * count)

    def register(self, index: int, sources: Sources) -> None:
        if sources:
            self.regs[index] = sources
        else:
            self.regs.pop(index, None)

    def cell(self, key: str, index: int, sources: Sources) -> None:
        if sources:
            self.mem[key, index] = sources
        else:
            self.mem.pop((key, index), None)

    def snapshot(self) -> dict[str, Any]:
        """The sources as plain data; ``{}`` when no value derives from a result.

        Keys (each only when it holds something): ``registers`` (name to tool names),
        ``stack`` (one list of tool names per stack value, bottom first), ``memory`` (a list of
        ``[label, cell, tool names]``), ``flags`` and ``query``.
        """
        snap: dict[str, Any] = {}
        if self.regs:
            snap["registers"] = {register_name(i): sorted(s) for i, s in self.regs.items()}
        if any(self.stack):
            snap["stack"] = [sorted(s) for s in self.stack]
        if self.mem:
            snap["memory"] = [[key, i, sorted(s)] for (key, i), s in sorted(self.mem.items())]
        if self.flags:
            snap["flags"] = sorted(self.flags)
        if self.query:
            snap["query"] = sorted(self.query)
        return snap

    @classmethod
    def restore(cls, data: Mapping[str, Any], depth: int) -> Shadow:
        """Rebuild a shadow from :meth:`snapshot` output, for a stack ``depth`` values deep.

        Raises:
            UsageError: The data is not a snapshot's provenance, or does not fit the stack.
        """
        if not isinstance(data, Mapping):
            raise UsageError("not an emulator snapshot: its provenance is not a mapping")
        regs: dict[int, Sources] = {}
        for name, tools in dict(data.get("registers") or {}).items():
            index = register_index(str(name))
            if index is None or index == 0:
                raise UsageError(f"not an emulator snapshot: provenance of register {name!r}")
            regs[index] = _names(tools, str(name))
        stack = [_names(tools, "the stack") for tools in data.get("stack") or [[]] * depth]
        if len(stack) != depth:
            raise UsageError("not an emulator snapshot: its provenance does not fit its stack")
        mem: dict[tuple[str, int], Sources] = {}
        for entry in data.get("memory") or ():
            if not (isinstance(entry, list | tuple) and len(entry) == 3):
                raise UsageError("not an emulator snapshot: provenance of memory")
            key, index, tools = entry
            if not isinstance(key, str) or type(index) is not int or index < 0:
                raise UsageError("not an emulator snapshot: provenance of memory")
            mem[key, index] = _names(tools, f"{key}[{index}]")
        flags = _names(data.get("flags") or [], "the flags")
        query = _names(data.get("query") or [], "a query's answer")
        regs = {i: s for i, s in regs.items() if s}
        return cls(regs=regs, stack=stack, mem=mem, flags=flags, query=query)
