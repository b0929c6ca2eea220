"""The control-flow graph and the memory layout of a program with its tools: built once, asked
by every stage (see "Facts in one place" in ``docs/architecture.md``).

:func:`control_flow` works out, from each instruction's
:func:`~llassembly.language.program.effects`, which ``CALL`` calls which tool, where each jump
goes, **the EAX convention** (a tool's one result read in ``EAX`` before anything POPs it goes
to ``EAX``: :attr:`ControlFlow.eax`) and **the calls the plan tests** with ``JC``/``JNC``
(:attr:`ControlFlow.tested`: a failure sets the carry and the plan goes on), and writes both
into the effects it keeps; then the loops. :func:`layout_of` places every data label's row of
cells at an address of its own, and makes a name that ``MOV`` or ``POP`` writes and nothing
else defines a *variable* (see "Data and memory" and "Variables" in ``docs/language.md``).

Example:
    >>> from llassembly.language.parser import parse
    >>> from types import SimpleNamespace
    >>> poll = SimpleNamespace(name="poll", params=(), n_results=1)
    >>> program = parse("CALL poll\\nTEST EAX, EAX\\nJZ done\\ndone: HLT")
    >>> flow = control_flow(program, {"poll": poll})
    >>> (dict(flow.tools), flow.eax, flow.successors[2])
    ({0: namespace(name='poll', params=(), n_results=1)}, frozenset({0}), (3, 3))
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

from llassembly.language.instructions import EAX_INDEX, successors, tests_carry
from llassembly.language.program import (
    Effects,
    Instruction,
    Mem,
    MemoryLabel,
    Name,
    Operand,
    Program,
    Reg,
    ToolShape,
    Value,
    arguments_of,
    effects,
    find_tool,
    place_of,
)

_CACHED = 16  # programs whose graph is kept (a planner checks, compiles and summarises one)


@dataclass(frozen=True, eq=False)
class ControlFlow:
    """The control flow of one program with one set of tools (see :func:`control_flow`), by
    instruction index; ``len(program.instructions)`` stands for the end of the program (running
    past the last instruction).

    Attributes:
        program: The program.
        effects: What each instruction reads and writes.
        tools: Tool ``CALL`` index to its tool.
        targets: Jump, ``LOOP`` and ``CALL label`` index to the index of its label.
        ambiguous: ``CALL``s of a name that is both a tool and a code label (the verifier
            refuses them; the tool is taken here, as the machine would).
        eax: Tool ``CALL``s whose one result goes to ``EAX`` rather than the stack.
        tested: Tool ``CALL``s whose failure the plan tests, each with the instruction that
            tests it (``JC``/``JNC`` next): a failure sets the carry and the plan goes on.
        mixed: ``(CALL, reader, POP)``: the result of an ``eax`` call is read in ``EAX`` at
            ``reader`` and then ``POP`` would take it off the stack too (the verifier refuses).
        successors: Per instruction, where control goes next (:func:`~llassembly.language.
            instructions.successors`; an unresolved jump nowhere).
        return_sites: Where a ``RET`` may go: the instruction after each ``CALL label``.
    """

    program: Program
    effects: tuple[Effects, ...]
    tools: Mapping[int, ToolShape]
    targets: Mapping[int, int]
    ambiguous: frozenset[int]
    eax: frozenset[int]
    tested: Mapping[int, int]
    mixed: tuple[tuple[int, int, int], ...]
    successors: tuple[tuple[int, ...], ...]
    return_sites: tuple[int, ...]

    @property
    def end(self) -> int:
        """The index that stands for the end of the program."""
        return len(self.effects)

    def stack_effect(self, pc: int) -> tuple[int, int]:
        """``(values taken, values put)`` on the data stack by the instruction at ``pc``: a tool
        ``CALL`` takes the tool's parameters (``CALL tool, N``: the first ``N``, see
        :func:`~llassembly.language.program.arguments_of`) and puts its results, none when they
        go to ``EAX``; every other instruction as its :class:`Effects` say."""
        fx, tool = self.effects[pc], self.tools.get(pc)
        if tool is None:
            return fx.info.pops, fx.info.pushes
        taken = arguments_of(tool, self.program.instructions[pc].operands)
        return taken, 0 if pc in self.eax else max(tool.n_results, 0)

    def subroutine_call(self, pc: int) -> bool:
        """Whether the instruction at ``pc`` is a ``CALL`` of a code label."""
        return self.effects[pc].info.flow == "call" and pc in self.targets

    @functools.cached_property
    def tracked(self) -> dict[int, int]:
        """The registers the analyses follow, each to its slot: those the program writes (a
        tool's result or error in ``EAX`` too); every other register holds 0 on every run."""
        written = {reg for fx in self.effects for reg in fx.registers_written}
        return {reg: slot for slot, reg in enumerate(sorted(written))}

    @functools.cached_property
    def flat(self) -> tuple[tuple[int, ...], ...]:
        """Successors as if every subroutine returned: a ``CALL label`` goes to its label and to
        the next instruction; ``RET``, ``HLT`` and the end (last entry) go nowhere. The graph the
        verifier finds endless loops in: a cycle of it with no edge out really cannot be left (a
        ``RET`` or ``HLT`` is never inside one)."""
        out = [
            (*succ, pc + 1) if self.subroutine_call(pc) else succ
            for pc, succ in enumerate(self.successors)
        ]
        return (*out, ())

    @functools.cached_property
    def loops(self) -> tuple[tuple[int, ...], ...]:
        """The loops of :attr:`flat` reachable from the entry: its :func:`cyclic` strongly
        connected components."""
        entry, flat = self.program.entry, self.flat
        if not 0 <= entry < self.end:
            return ()
        return tuple(tuple(sorted(c)) for c in components(entry, flat) if cyclic(c, flat))


def control_flow(program: Program, tools: Mapping[str, ToolShape]) -> ControlFlow:
    """The control-flow graph of ``program`` with ``tools``: the same program object with the
    same tools mapping (holding the same tools) gives the same graph, so the verifier, the
    compiler and the summary of one plan build it once."""
    # The same tools, not merely equal ones; the entry keeps them (and the program) alive, so
    # their ids stay theirs while it is kept.
    items = tuple(tools.items())
    key = (id(program), tuple((name, id(tool)) for name, tool in items))
    with _LOCK:
        hit = _GRAPHS.get(key)
    if hit is not None:
        return hit[2]
    built = _build(program, tools)
    with _LOCK:
        _GRAPHS[key] = (program, items, built)
        while len(_GRAPHS) > _CACHED:
            _GRAPHS.pop(next(iter(_GRAPHS)))
    return built


_LOCK = threading.Lock()
_GRAPHS: dict[tuple[object, ...], tuple[Program, tuple[tuple[str, object], ...], ControlFlow]] = {}


def _build(program: Program, tools: Mapping[str, ToolShape]) -> ControlFlow:
    instructions = program.instructions
    found = tuple(effects(ins) for ins in instructions)
    tool_at: dict[int, ToolShape] = {}
    targets: dict[int, int] = {}
    ambiguous: set[int] = set()
    for pc, (ins, fx) in enumerate(zip(instructions, found, strict=True)):
        operand = ins.operands[0] if ins.operands else None
        if fx.info.flow in ("next", "return", "halt") or not isinstance(operand, Name):
            continue  # a jump to no label: the verifier refuses it, and it goes nowhere here
        label = program.labels.get(operand.name.lower())
        tool = find_tool(operand.name, tools) if fx.info.flow == "call" else None
        if tool is not None:
            tool_at[pc] = tool
            if label is not None:
                ambiguous.add(pc)
        elif label is not None:
            targets[pc] = label
    succ = tuple(
        tuple(t for t in successors(fx.info, pc, targets.get(pc)) if t is not None)
        for pc, fx in enumerate(found)
    )
    eax, mixed = _eax_convention(program, found, tool_at)
    tested = {pc: t for pc in tool_at if (t := _test_of(program.instructions, found, pc))}
    changed = list(found)  # EAX: the result or the error; the flags: did it fail
    for pc in eax | tested.keys():
        changed[pc] = replace(
            found[pc],
            registers_written=found[pc].registers_written | {EAX_INDEX},
            implicit_writes=(EAX_INDEX,),
            flags_written=pc in tested,
        )
    return ControlFlow(
        program=program,
        effects=tuple(changed),
        tools=tool_at,
        targets=targets,
        ambiguous=frozenset(ambiguous),
        eax=eax,
        tested=tested,
        mixed=mixed,
        successors=succ,
        return_sites=tuple(pc + 1 for pc in targets if changed[pc].info.flow == "call"),
    )


# -- the EAX convention ------------------------------------------------------------------------


def _eax_convention(
    program: Program, found: tuple[Effects, ...], tool_at: Mapping[int, ToolShape]
) -> tuple[frozenset[int], tuple[tuple[int, int, int], ...]]:
    """Where the result of each one-result tool ``CALL`` goes, static, from the straight-line
    code after it: to ``EAX`` when ``EAX`` is read before any ``POP``, ``PUSH``, ``CALL``, jump
    or write of ``EAX``; else pushed, as always. A ``POP`` after such a read, before any
    ``PUSH`` or ``CALL``, mixes the two ways and is reported, unless it restores a register
    saved just below the call's arguments (``PUSH ECX``, the arguments, ``CALL``, ``POP ECX``)."""
    eax: set[int] = set()
    mixed: list[tuple[int, int, int]] = []
    for pc, tool in tool_at.items():  # in program order
        reader = _first_eax_read(found, pc) if tool.n_results == 1 else None
        if reader is not None:
            eax.add(pc)
            arguments = arguments_of(tool, program.instructions[pc].operands)
            pop = _pop_after(program, found, reader, _saved_below(program, found, pc)[arguments:])
            if pop is not None:
                mixed.append((pc, reader, pop))
    return frozenset(eax), tuple(mixed)


def _test_of(instructions: Sequence[Instruction], found: tuple[Effects, ...], pc: int) -> int:
    """The first instruction after the tool ``CALL`` at ``pc`` that uses the flags, in the
    straight-line code before any other that sets them, if it tests the carry (``JC``...);
    else 0 (never an instruction after a ``CALL``)."""
    for index in _straight_after(found, pc):
        fx = found[index]
        if fx.info.condition or fx.flags_written or fx.info.flow != "next":
            carry = bool(fx.info.condition) and tests_carry(instructions[index].mnemonic)
            return index if carry else 0
    return 0


def _straight_after(found: tuple[Effects, ...], pc: int) -> Iterator[int]:
    """Indexes of the straight-line code after ``pc``, up to (and with) a jump or the end."""
    for index in range(pc + 1, len(found)):
        yield index
        if found[index].info.flow != "next":
            return


def _first_eax_read(found: tuple[Effects, ...], pc: int) -> int | None:
    for index in _straight_after(found, pc):
        fx = found[index]
        reads = EAX_INDEX in fx.registers_read  # a PUSH of EAX there is a read
        if fx.info.pops or fx.info.flow in ("call", "return", "halt"):
            return None
        if reads or fx.info.pushes or EAX_INDEX in fx.registers_written or fx.info.flow != "next":
            return index if reads else None
    return None


def _saved_below(program: Program, found: tuple[Effects, ...], pc: int) -> list[Operand]:
    """The values ``PUSH``ed in the straight-line code before the ``CALL`` at ``pc``, top
    first: its arguments, then registers saved around the call (``PUSH ECX`` ... ``POP ECX``)."""
    instructions = program.instructions
    targets = set(program.labels.values())
    pushed: list[Operand] = []
    for index in range(pc - 1, -1, -1):
        fx = found[index]
        if fx.info.pushes and instructions[index].operands:
            pushed.append(instructions[index].operands[0])
        elif fx.info.pops or fx.info.flow != "next":
            break
        if index in targets:
            break
    return pushed


def _pop_after(
    program: Program, found: tuple[Effects, ...], reader: int, saved: list[Operand]
) -> int | None:
    """The first ``POP`` after ``reader`` that would take the result (not one restoring a
    value saved below the call's arguments, as x86 code does around a call), or ``None``."""
    if found[reader].info.pushes:
        return None
    for index in _straight_after(found, reader):
        fx, operands = found[index], program.instructions[index].operands
        if fx.info.pops and saved and operands and _place_key(operands[0]) == _place_key(saved[0]):
            saved.pop(0)
        elif fx.info.pops:
            return index
        elif fx.info.pushes or fx.info.flow in ("call", "return", "halt"):
            return None
    return None


def _place_key(operand: Operand) -> int | str:
    return operand.index if isinstance(operand, Reg) else str(operand).lower()


# -- loops -------------------------------------------------------------------------------------


def components(
    entry: int, succ: Mapping[int, tuple[int, ...]] | Sequence[tuple[int, ...]]
) -> list[list[int]]:
    """The strongly connected components reachable from ``entry``, sinks first (iterative
    Tarjan); ``succ[node]`` lists a node's successors."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}  # of the nodes on the stack (in the order of their index)
    stack: list[int] = []
    result: list[list[int]] = []
    work: list[tuple[int, Iterator[int]]] = []

    def enter(node: int) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        work.append((node, iter(succ[node])))

    enter(entry)
    while work:
        node, children = work[-1]
        for nxt in children:
            if nxt not in index:
                enter(nxt)
                break
            if nxt in low:
                low[node] = min(low[node], index[nxt])
        else:
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[int] = []
                while not component or component[-1] != node:
                    component.append(stack.pop())
                    del low[component[-1]]
                result.append(component)
    return result


def cyclic(component: list[int], succ: Sequence[tuple[int, ...]]) -> bool:
    """Whether a :func:`components` component has a cycle (more nodes than one, or a self-loop)."""
    return len(component) > 1 or component[0] in succ[component[0]]


# -- memory -------------------------------------------------------------------------------------

SPAN = 1 << 20
"""Bytes between the addresses of two data labels (a label holds at most 32 KiB)."""
_VARIABLE_SIZE = 8  # a variable is one qword cell


@dataclass(frozen=True)
class Layout:
    """Where each data label and variable lives.

    Attributes:
        labels: Lower-cased name to its cells (variables included).
        order: The names in address order.
        variables: Lower-cased names of variables (undeclared names written by MOV/POP).
        live: Writable labels the plan may write (kept in the machine state; the rest are read
            from the program, so a plan that never writes memory has none in its snapshots).
    """

    labels: Mapping[str, MemoryLabel]
    order: tuple[str, ...]
    variables: frozenset[str]
    live: frozenset[str] = frozenset()

    def base(self, key: str) -> int:
        """The address of a label's first cell."""
        return SPAN * (self.order.index(key) + 1)

    def locate(self, address: int) -> tuple[str, int] | None:
        """The label an address falls in and the byte offset in it, or ``None``."""
        slot, offset = divmod(address, SPAN)
        return (self.order[slot - 1], offset) if 1 <= slot <= len(self.order) else None

    def initial_memory(self) -> dict[str, list[Value]]:
        """The writable cells as a run starts (read-only labels are read from the program)."""
        return {key: list(self.labels[key].cells) for key in self.order if key in self.live}

    # -- cells as the analyses number them -------------------------------------------------

    @functools.cached_property
    def first_cell(self) -> dict[str, int]:
        """Each label's first cell, numbered over every label for the analyses before the run:
        the live labels first, so a write through ``[reg]`` may change ``range(live_cells)``."""
        order = sorted(self.order, key=lambda k: k not in self.live)
        sizes = [len(self.labels[key].cells) for key in order]
        return dict(zip(order, accumulate(sizes, initial=0), strict=False))  # one more: the end

    @functools.cached_property
    def live_cells(self) -> int:
        """How many cells the live labels have."""
        return sum(len(self.labels[key].cells) for key in self.live)

    def cells_of(self, operand: Operand) -> tuple[range, bool]:
        """The cells (see :attr:`first_cell`) ``operand`` names, and whether it names exactly one
        known before the run: a data label or variable names all its cells, a memory operand its
        cell at a fixed offset, else every cell of its label (through ``[reg]``: every live
        cell, as a write there may change any); any other operand names none."""
        key = operand.name.lower() if isinstance(operand, Name) else ""
        if isinstance(operand, Mem):
            if operand.label is None:
                return range(self.live_cells), False
            key = operand.label.lower()
        first = self.first_cell.get(key)
        if first is None:
            return range(0), False
        label = self.labels[key]
        cells = range(first, first + len(label.cells))
        if not isinstance(operand, Mem):
            return cells, len(cells) == 1
        index, rest = divmod(operand.disp, label.size)
        if operand.registers or rest or not 0 <= index < len(cells):
            return cells, False
        return cells[index : index + 1], True


def layout_of(program: Program, tools: Mapping[str, ToolShape]) -> Layout:
    """The memory layout of ``program`` with ``tools`` (variables depend on tool names)."""
    labels: dict[str, MemoryLabel] = dict(program.memory)
    variables: list[str] = []
    written: set[str] = set()  # "": through [reg], any writable label
    for ins in program.instructions:  # a variable: a name copied into (MOV, POP), undeclared
        fx = effects(ins)
        if (
            0 not in fx.reads
            and any(w == 0 for w, _ in fx.copies)
            and isinstance(dst := ins.operands[0], Name)
            and (key := dst.name.lower()) not in program.data
            and key not in program.labels
            and key not in variables
            and find_tool(dst.name, tools) is None
        ):
            variables.append(key)
            labels[key] = MemoryLabel((0,), _VARIABLE_SIZE, True, ins.line)
        for position in fx.writes:
            place = place_of(ins.operands[position])
            if isinstance(place, Mem | Name):
                written.add(str(place.label or "" if isinstance(place, Mem) else place).lower())
    written |= set(labels) if "" in written else set()
    live = frozenset(k for k in written if k in labels and labels[k].writable)
    return Layout(labels, tuple(labels), frozenset(variables), live)
