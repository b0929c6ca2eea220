"""The machine's state as plain data, and its JSON-ready snapshot (see
:mod:`llassembly.machine.emulator`): the state itself, the records of the calls it makes
(:class:`ToolCall`, :class:`CallRecord`, :class:`RunResult`), its flag modes and the
:class:`Pending` value an outstanding call's result is until it comes; beside the values, with
data-flow policies, their :class:`Shadow`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from typing import Any

from llassembly.analysis.dataflow import NO_SOURCES, Sources, result_sources
from llassembly.errors import UsageError
from llassembly.language.instructions import (
    EAX_INDEX,
    REGISTER_COUNT,
    register_index,
    register_name,
)
from llassembly.language.limits import INT_MAX, is_int64
from llassembly.language.program import Value
from llassembly.language.templates import render


def _names(value: Any, what: str) -> Sources:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise UsageError(f"not an emulator snapshot: the provenance of {what} is not tool names")
    return frozenset(value)


@dataclass(slots=True)
class Shadow:
    """The sources of each value of a machine state: the tools whose results it derives from
    (see :mod:`llassembly.analysis.dataflow`), kept when data-flow policies are checked
    (:mod:`llassembly.machine.provenance` keeps them up to date). Only values that derive from
    some result are kept (an empty set is the default everywhere), so a plan that reads no
    result keeps nothing; they are part of the machine's snapshot, so a plan resumed in another
    process is checked as the first process would have checked it.

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

    def results(self, tool: str, count: int, to_eax: bool, *, tested: bool = False) -> None:
        """A call of ``tool`` gave ``count`` results: on the stack, or the one in ``EAX``; a
        query's derive from what it read (see :attr:`query`). A call the plan tests also
        sets the flags and ``EAX`` (whether it failed, its error)."""
        sources, self.query = self.query or result_sources(tool), NO_SOURCES
        if to_eax or tested:
            self.regs[EAX_INDEX] = sources
        if tested:
            self.flags = sources
        if not to_eax:
            self.stack.extend([sources] * count)

    def put(self, where: int | tuple[str, int], sources: Sources) -> None:
        """Keep ``sources`` as those of a register (its index) or a memory cell (``(label,
        cell index)``); an empty set is kept by keeping nothing."""
        held: dict[Any, Sources] = self.regs if isinstance(where, int) else self.mem
        if sources:
            held[where] = sources
        else:
            held.pop(where, None)

    def snapshot(self) -> dict[str, Any]:
        """The sources as plain data; ``{}`` when no value derives from a result.

        Keys (each only when it holds something): ``registers`` (name to tool names),
        ``stack`` (one list of tool names per stack value, bottom first), ``memory`` (a list of
        ``[label, cell, tool names]``), ``flags`` and ``query``.
        """
        snap = {
            "registers": {register_name(i): sorted(s) for i, s in self.regs.items()},
            "stack": [sorted(s) for s in self.stack] if any(self.stack) else [],
            "memory": [[key, i, sorted(s)] for (key, i), s in sorted(self.mem.items())],
            "flags": sorted(self.flags),
            "query": sorted(self.query),
        }
        return {key: value for key, value in snap.items() if value}

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
            if sources := _names(tools, str(name)):
                regs[index] = sources
        stack = [_names(tools, "the stack") for tools in data.get("stack") or [[]] * depth]
        if len(stack) != depth:
            raise UsageError("not an emulator snapshot: its provenance does not fit its stack")
        mem: dict[tuple[str, int], Sources] = {}
        for entry in data.get("memory") or ():
            fits = isinstance(entry, list | tuple) and len(entry) == 3
            key, index, tools = entry if fits else (None, None, None)
            if not isinstance(key, str) or type(index) is not int or index < 0:
                raise UsageError("not an emulator snapshot: provenance of memory")
            mem[key, index] = _names(tools, f"{key}[{index}]")
        flags = _names(data.get("flags") or [], "the flags")
        return cls(regs, stack, mem, flags, _names(data.get("query") or [], "a query's answer"))


UNSET, ORDERED, UNORDERED = 0, 1, 2
"""The flag modes: no comparison yet, numbers compared, strings compared."""

_FLAG_MODE_NAMES = ("unset", "ordered", "unordered")
_NAMES = tuple(register_name(i) for i in range(REGISTER_COUNT))
_EMPTY: tuple[Any, ...] = (None, [], {})  # what a snapshot leaves out
# Whether a register value is anything but the integer 0 (CPython keeps one 0 object; an
# equal int that is another object is merely saved when it need not be).
_NOT_ZERO: Callable[[Value], bool] = partial(operator.is_not, 0)


@dataclass(frozen=True, slots=True)
class Pending:
    """A result that has not come yet: value ``result`` (0 for the first) of the plan's call
    number ``call``, issued ahead of the machine (``parallel_tools``).

    It sits where the value would be (a register, the stack, a memory cell) and moves like a
    value; an instruction that would read it waits for the call instead (see
    :mod:`llassembly.machine.emulator`). When the call completes, every place holding it gets
    the value. Tested with ``type(v) is Pending``; a snapshot writes it as
    ``{"call": call, "result": result}``.
    """

    call: int
    result: int


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the plan wants made.

    Attributes:
        tool: The tool's name.
        args: Keyword arguments, converted to the tool's declared types.
        index: Index of the ``CALL`` instruction.
        line: Its line in the model's reply.
        source: Its text.
        number: 1 for the plan's first tool call, 2 for the second...
    """

    tool: str
    args: dict[str, Any]
    index: int
    line: int
    source: str
    number: int


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A tool call that was made and what it returned."""

    call: ToolCall
    result: Any


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a finished run leaves: the registers holding anything but the integer 0 (``0.0``,
    ``-0.0`` and ``""`` are values and are kept, as in a snapshot), the stack, the calls made,
    counters, the plan's answer (its ``SAY`` lines joined by newlines; ``""`` when it said
    none) and the value its top-level ``RET`` returned (see :attr:`MachineState.returned`)."""

    registers: dict[str, Value]
    stack: list[Value]
    calls: list[CallRecord]
    instructions_executed: int
    tool_calls: int
    answer: str = ""
    returned: Value | None = None


@dataclass(slots=True)
class MachineState:
    """Everything the machine knows; plain data.

    Attributes:
        pc: Index of the next instruction (``len(instructions)`` when finished).
        regs: Register slots (see :func:`~llassembly.language.instructions.register_index`).
        stack: The data stack, top last.
        calls: The return stack of ``CALL label``, top last.
        zf: Equal / zero flag.
        lt: Less-than flag.
        flag_mode: 0 unset, 1 ordered (numbers), 2 unordered (strings).
        executed: Instructions executed so far.
        tool_calls: Tool calls made so far.
        halted: The program has ended.
        pending: ``(instruction index, popped values)`` of a tool call awaiting its result.
        mem: The writable memory: data label (lower-cased) to its cells.
        outstanding: Calls issued ahead (``parallel_tools``), in program order:
            ``(instruction index, popped values, call number)``; until one completes, its
            results are :class:`Pending` values in registers, on the stack or in memory.
        fault: An instruction's error found while calls were outstanding (plain data),
            raised once they complete.
        answer: The lines the plan has said so far (``SAY``), in order.
        returned: The value a top-level ``RET`` returned (``EAX`` or ``XMM0``, see *The x86
            return value* in ``docs/language.md``), or ``None``.
        provenance: The sources of every value, kept beside them when data-flow policies are
            checked (see :mod:`llassembly.machine.provenance`); ``None`` otherwise.
    """

    pc: int = 0
    regs: list[Value] = field(default_factory=lambda: [0] * REGISTER_COUNT)
    stack: list[Value] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    zf: bool = False
    lt: bool = False
    flag_mode: int = UNSET
    executed: int = 0
    tool_calls: int = 0
    halted: bool = False
    pending: tuple[int, list[Value]] | None = None
    mem: dict[str, list[Value]] = field(default_factory=dict)
    outstanding: list[tuple[int, list[Value], int]] = field(default_factory=list)
    fault: dict[str, Any] | None = None
    answer: list[str] = field(default_factory=list)
    returned: Value | None = None
    provenance: Shadow | None = None  # shadow state: the sources of the values above
    # How much of ``answer`` is counted: lines, and their characters with a newline each.
    # Derived (never in a snapshot), caught up with the list whenever it is read.
    _answer_counted: tuple[int, int] = field(default=(0, 0), init=False, repr=False, compare=False)
    text_built: int = field(default=0, init=False, repr=False, compare=False)
    """Characters of text built by reading writable rows whole in this process (a work bound,
    see :data:`~llassembly.language.limits.MAX_ROW_TEXT_PER_RUN`); never in a snapshot."""
    row_texts: dict[str, tuple[list[Value], str]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """The last text each writable row read whole gave, with the cells it was built from (kept
    for this run only, so it is at most what :attr:`text_built` counts); never in a snapshot."""
    parsed: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The last JSON texts read by path, parsed (see :mod:`llassembly.machine.access`);
    never in a snapshot."""

    def answer_size(self) -> int:
        """The characters of :attr:`answer` with one newline per line.

        Linear in the lines added since the last call (a replaced or shortened list is
        counted again), so ``SAY`` stays linear in the length of the answer.
        """
        answer = self.answer
        lines, size = self._answer_counted if self._answer_counted[0] <= len(answer) else (0, 0)
        if lines < len(answer):
            size += sum(len(line) + 1 for line in answer[lines:])
            self._answer_counted = (len(answer), size)
        return size

    def places(self) -> list[list[Any]]:
        """Every place a value (or a :class:`Pending` one) lives: registers, stack, memory."""
        return [self.regs, self.stack, *self.mem.values()]

    def values(self) -> list[Any]:
        """Every value the state holds (pending ones aside), the popped values of the calls
        it waits on included."""
        held = [v for place in self.places() for v in place if type(v) is not Pending]
        held += self.pending[1] if self.pending else ()
        held += [v for o in self.outstanding for v in o[1]]
        return held if self.returned is None else [*held, self.returned]

    def slots(self) -> list[tuple[int, list[Value], int]]:
        """``(index, values, number)`` of each call the machine waits on, in program order:
        the outstanding batch, then the pending call (the plain data a call is rebuilt from)."""
        slots = [(index, list(values), number) for index, values, number in self.outstanding]
        if self.pending is not None:
            slots.append((self.pending[0], list(self.pending[1]), self.tool_calls))
        return slots

    def fill(self, call: int, values: Sequence[Value]) -> None:
        """Put call number ``call``'s ``values`` wherever its pending values are."""
        for place in self.places():
            for i, v in enumerate(place):
                if type(v) is Pending and v.call == call:
                    place[i] = values[v.result]

    def holding(self) -> list[int]:
        """The indexes of the registers holding anything but the integer 0."""
        regs = self.regs
        return list(compress(range(len(regs)), map(_NOT_ZERO, regs)))

    def snapshot(self, registers: Sequence[int] | None = None) -> dict[str, Any]:
        """Return the state as a JSON- and msgpack-serialisable dict.

        Args:
            registers: The indexes of the only registers that may hold anything but the
                integer 0, in order (an emulator knows them from its program); ``None``
                looks at every register. Either way the snapshot is the same.
        """
        # Every register but those holding the integer 0 (what a restored register starts
        # as): an untouched register holds the very object 0. Other zeros (0.0, -0.0, False,
        # "") are values of their own and are kept, so a restored machine runs exactly as
        # the saved one would have. R0 is never saved.
        regs, pending = self.regs, self.pending
        indexes = self.holding() if registers is None else registers
        snap: dict[str, Any] = {
            "pc": self.pc,
            "registers": {_NAMES[i]: regs[i] for i in indexes if i and _NOT_ZERO(regs[i])},
            "stack": list(self.stack),
            "return_stack": list(self.calls),
            "flags": {"zf": self.zf, "lt": self.lt, "mode": _FLAG_MODE_NAMES[self.flag_mode]},
            "executed": self.executed,
            "tool_calls": self.tool_calls,
            "halted": self.halted,
            "pending": pending and {"index": pending[0], "values": list(pending[1])},
        }
        # The rest only when it holds something (older snapshots stay as they were): memory,
        # an answer said, a value returned, calls outstanding mid-batch (see machine.emulator),
        # a fault, the sources of values that derive from a result.
        optional = {
            "memory": {key: list(cells) for key, cells in self.mem.items()},
            "answer": list(self.answer),
            "returned": self.returned,
            "outstanding": [
                {"index": i, "values": list(v), "number": n} for i, v, n in self.outstanding
            ],
            "fault": self.fault and dict(self.fault),
            "provenance": self.provenance and self.provenance.snapshot(),
        }
        snap.update((key, value) for key, value in optional.items() if value not in _EMPTY)
        if self.outstanding:  # Pending values written as {"call": n, "result": k}
            snap["registers"] = {k: _written(v) for k, v in snap["registers"].items()}
            snap["stack"] = [_written(v) for v in snap["stack"]]
            if "memory" in snap:
                snap["memory"] = {k: [_written(v) for v in c] for k, c in snap["memory"].items()}
        return snap

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> MachineState:
        """Rebuild a state from :meth:`snapshot` output.

        Raises:
            UsageError: The dict is not a snapshot.
        """
        try:
            regs: list[Value] = [0] * REGISTER_COUNT
            for name, value in data["registers"].items():
                index = register_index(name)
                if index is None:
                    raise UsageError(f"snapshot names an unknown register {name!r}")
                regs[index] = value
            stack, pending, flags = list(data["stack"]), data["pending"], data["flags"]
            memory = {str(k): list(v) for k, v in (data.get("memory") or {}).items()}
            answer = list(data.get("answer") or ())
            if not all(type(line) is str for line in answer):
                raise UsageError("the snapshot's answer is not a list of strings")
            held = cls(regs=regs, stack=stack, mem=memory, answer=answer)
            _restore_outstanding(data, held)
            if pending is not None:
                held.pending = (_count(pending["index"], "pending index"), list(pending["values"]))
            held.returned = data.get("returned")
            if not all(map(is_value, held.values())):
                raise UsageError(
                    "the snapshot holds a value that is not a 64-bit int, finite float or string"
                )
            held.pc = _count(data["pc"], "pc")
            held.calls = [_count(x, "return address") for x in data["return_stack"]]
            held.zf, held.lt = bool(flags["zf"]), bool(flags["lt"])
            held.flag_mode = _FLAG_MODE_NAMES.index(flags["mode"])
            held.executed = _count(data["executed"], "executed")
            held.tool_calls = _count(data["tool_calls"], "tool_calls")
            held.halted = bool(data["halted"])
            fault, sources = data.get("fault"), data.get("provenance")
            held.fault = dict(fault) if isinstance(fault, Mapping) else None
            held.provenance = None if sources is None else Shadow.restore(sources, len(stack))
            return held
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise UsageError(f"not an emulator snapshot: {exc!r}"[:300]) from exc


def _count(value: Any, what: str) -> int:
    """A counter or index read from a snapshot: a non-negative int (not a bool, float, NaN)."""
    if type(value) is not int or not 0 <= value <= INT_MAX:
        raise UsageError(f"not an emulator snapshot: {what} is {str(value)[:40]!r}")
    return value


def is_value(value: Any) -> bool:
    """Whether ``value`` may live in a register or on the stack (``None`` is ``NONE``)."""
    if type(value) is float:
        return math.isfinite(value)
    return type(value) is str or value is None or is_int64(value)


# -- mid-batch snapshots (see machine.emulator): outstanding calls and their Pending values ------


def _written(value: Any) -> Any:
    return {"call": value.call, "result": value.result} if type(value) is Pending else value


def _read(value: Any) -> Any:
    """A snapshot's ``{"call": n, "result": k}`` as :class:`Pending` (anything else as it is;
    a value that is neither is refused by the caller)."""
    if type(value) is dict and value.keys() == {"call", "result"}:
        return Pending(_count(value["call"], "call number"), _count(value["result"], "result"))
    return value


def _restore_outstanding(data: Mapping[str, Any], st: MachineState) -> None:
    """The outstanding calls of a snapshot, into ``st``; their results, in place, become
    :class:`Pending` (an earlier release wrote them as ``null`` on the stack from ``at``)."""
    stack: list[Any] = st.stack
    for o in data.get("outstanding") or ():
        number = _count(o["number"], "call number")
        st.outstanding.append((_count(o["index"], "outstanding index"), list(o["values"]), number))
        if "at" in o:  # the earlier form: holes on the stack only, the first result on top
            at, n = _count(o["at"], "hole position"), _count(o["results"], "results")
            if at + n > len(stack) or not all(v is None for v in stack[at : at + n]):
                raise UsageError("not an emulator snapshot: a hole is not where it should be")
            stack[at : at + n] = [Pending(number, k) for k in reversed(range(n))]
    for place in st.places() if st.outstanding else ():
        place[:] = map(_read, place)


def final_answer_of(machine: Mapping[str, Any] | None) -> str | None:
    """The answer a finished plan gives, from its snapshot: what it said (its ``SAY`` lines
    joined), else the value its top-level ``RET`` returned in ``EAX`` or ``XMM0`` (its
    ``"returned"`` entry, written as ``SAY`` writes a value), else ``None``."""
    machine = machine or {}
    if machine.get("answer"):
        return "\n".join(str(line) for line in machine["answer"])
    returned = machine.get("returned")
    return None if returned is None else render(returned)
