"""Path analysis for the verifier: what every reachable path through a plan may do.

The analysis walks abstract states ``(pc, return stack)`` from the entry point over the
control-flow graph (:mod:`llassembly.analysis.cfg`), reading what each instruction does from
the instruction table (:func:`~llassembly.language.instructions.effects`). Each state keeps
facts that only move one way, so the walk always ends:

* the least data-stack depth any path brings there (``POP`` or a tool ``CALL`` on a short
  stack);
* which instructions may have set the flags last: a ``CMP`` of strings written in the program,
  or :data:`UNSET` when on some path nothing has set them yet;
* which registers, memory cells and top stack slots hold, on some path, a value that is
  certainly a string: a string literal, string data, or the result of a tool declared
  ``-> str``. Values of unknown type (other tool results, a cell written through a computed
  address) are never taken for strings;
* which variables may not have been written yet.

It is bounded: nested subroutines are followed :data:`MAX_CALL_DEPTH` calls deep, at most
:data:`MAX_STATES` states are kept and :data:`MAX_STEPS` states visited. A bound that is hit is
part of the result (:attr:`Findings.too_deep`, :attr:`Findings.overflow`) and the verifier
refuses the plan: a path the analysis did not follow is never taken for a fine one.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import NamedTuple

from llassembly.analysis.cfg import ControlFlow, components
from llassembly.analysis.layout import Layout
from llassembly.language.instructions import EAX_INDEX, OPCODE_INFO
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
    ToolShape,
    nested,
)

__all__ = [
    "MAX_CALL_DEPTH",
    "MAX_STATES",
    "MAX_STEPS",
    "UNSET",
    "Findings",
    "components",
    "explore",
]

MAX_CALL_DEPTH = 16
"""Subroutine nesting the analysis follows; a plan that nests deeper is refused."""
MAX_STATES = 20_000
"""Most abstract states the analysis keeps; a plan that needs more is refused."""
MAX_STEPS = 5 * MAX_STATES
"""Most state visits; a plan that needs more is refused."""
UNSET = -1
"""In a set of flag setters: on some path no flag-setting instruction has run yet."""
_STACK_BITS = (1 << 64) - 1  # string facts are kept for the top 64 stack slots

_State = tuple[int, tuple[int, ...]]
_NO_SETTER: frozenset[int] = frozenset()


class _Facts(NamedTuple):
    depth: int  # least data-stack depth
    setters: frozenset[int]  # string CMPs (and UNSET) that may have set the flags last
    regs: int  # bit i: register i holds a string on some path
    stack: int  # bit i: the value i slots below the top is a string on some path
    unwritten: int  # bit i: variable i may not have been written yet on some path
    cells: int  # bit i: memory cell i (numbered label by label) holds a string on some path

    def merge(self, other: _Facts) -> _Facts:
        return _Facts(
            min(self.depth, other.depth),
            self.setters | other.setters,
            self.regs | other.regs,
            self.stack | other.stack,
            self.unwritten | other.unwritten,
            self.cells | other.cells,
        )


@dataclass
class Findings:
    """What the analysis found, by instruction index.

    Attributes:
        empty_pops: ``POP`` reached with an empty stack on some path.
        short_calls: Tool ``CALL`` to the fewest values found on the stack when it runs.
        string_jumps: Ordered jump to the string ``CMP`` instructions that may set its flags.
        unset_jumps: Conditional jumps reached with no flags set on some path.
        string_math: ``(instruction, operand position)`` of arithmetic on a string.
        string_addresses: ``(instruction, operand position)`` of a memory operand whose
            address has a register holding a string.
        string_registers: ``(instruction, register)`` of arithmetic on a string in a register
            it uses without naming it (``ECX`` of ``LOOP``, ``EAX`` of ``MUL src``).
        off_end: Instruction after which a subroutine runs past the end of the program, to the
            ``CALL`` that entered that subroutine.
        too_deep: ``CALL label`` instructions that would nest past :data:`MAX_CALL_DEPTH`.
        overflow: Where the state or step budget ran out (``None`` if it did not).
        unwritten_reads: ``(instruction, operand position)`` reading a variable that, on some
            path, has not been written yet.
    """

    empty_pops: set[int] = field(default_factory=set)
    short_calls: dict[int, int] = field(default_factory=dict)
    string_jumps: dict[int, set[int]] = field(default_factory=dict)
    unset_jumps: set[int] = field(default_factory=set)
    string_math: set[tuple[int, int]] = field(default_factory=set)
    string_addresses: set[tuple[int, int]] = field(default_factory=set)
    string_registers: set[tuple[int, int]] = field(default_factory=set)
    off_end: dict[int, int] = field(default_factory=dict)
    too_deep: set[int] = field(default_factory=set)
    overflow: int | None = None
    unwritten_reads: set[tuple[int, int]] = field(default_factory=set)


def _results(tool: ToolShape) -> tuple[int, int]:
    """How many values a tool pushes and which of them are strings (bit 0: the top one)."""
    count = max(tool.n_results, 0)
    types = tuple(getattr(tool, "result_types", ()) or ())
    bits = sum(1 << i for i, kind in enumerate(types[:count]) if kind is str)
    return count, bits


class _Memory:
    """Memory cells numbered label by label, for the string facts of :class:`_Facts`."""

    def __init__(self, layout: Layout | None) -> None:
        self.first: dict[str, int] = {}  # label -> number of its first cell
        self.layout = layout
        self.initial = 0  # the cells that start as strings
        self.writable = 0  # the cells of writable labels
        if layout is None:
            return
        number = 0
        for key in layout.order:
            self.first[key] = number
            for offset, cell in enumerate(layout.labels[key].cells):
                if isinstance(cell, str):
                    self.initial |= 1 << (number + offset)
            number += len(layout.labels[key].cells)
        self.writable = sum(self.span(k) for k in self.first if layout.labels[k].writable)

    def span(self, key: str) -> int:
        """The bits of every cell of a label."""
        assert self.layout is not None  # only called for labels of the layout
        return ((1 << len(self.layout.labels[key].cells)) - 1) << self.first[key]

    def cell(self, operand: Operand) -> tuple[int, bool]:
        """``(bits, exact)``: the cells ``operand`` names (a data label or variable, or a
        memory operand), and whether it names exactly one cell known before the run. ``(0,
        False)`` for an operand that names no memory."""
        if self.layout is None:
            return 0, False
        if isinstance(operand, Name):
            key = operand.name.lower()
            if key not in self.first:
                return 0, False
            return self.span(key), len(self.layout.labels[key].cells) == 1
        if not isinstance(operand, Mem):
            return 0, False
        if operand.label is None:
            return self.writable, False
        key = operand.label.lower()
        if key not in self.first:
            return 0, False
        label = self.layout.labels[key]
        index, rest = divmod(operand.disp, label.size)
        if operand.registers or rest or not 0 <= index < len(label.cells):
            return self.span(key), False
        return 1 << (self.first[key] + index), True


class _Explorer:
    def __init__(self, flow: ControlFlow, layout: Layout | None = None) -> None:
        program = flow.program
        self.flow = flow
        self.instructions = program.instructions
        self.data = program.data
        self.memory = _Memory(layout)
        variables = sorted(layout.variables) if layout is not None else []
        self.variable_bit = {name: 1 << i for i, name in enumerate(variables)}
        self.all_variables = (1 << len(variables)) - 1
        self.results = {pc: _results(tool) for pc, tool in flow.tools.items()}
        self.string_cmps = {
            pc
            for pc, ins in enumerate(self.instructions)
            if OPCODE_INFO[ins.op].compares and any(self.literal_string(o) for o in ins.operands)
        }
        self.facts: dict[_State, _Facts] = {}
        self.queue: list[_State] = []  # a heap: lowest instruction first
        self.queued: set[_State] = set()
        self.found = Findings()

    def literal_string(self, operand: Operand) -> bool:
        """Whether the operand is a string written in the program (a literal or string data)."""
        if isinstance(operand, Template):
            return True
        if isinstance(operand, Imm):
            return isinstance(operand.value, str)
        if isinstance(operand, Name):
            return isinstance(self.data.get(operand.name.lower()), str)
        return False

    def holds_string(self, operand: Operand, facts: _Facts) -> bool:
        """Whether ``operand`` holds a string for certain on some path."""
        if isinstance(operand, Reg):
            return bool(facts.regs >> operand.index & 1)
        if isinstance(operand, Path):  # a part of a structure: not known before the run
            return False
        bits, one = self.memory.cell(operand)
        if one:  # one cell: what the paths wrote there
            return bool(facts.cells & bits)
        if isinstance(operand, Mem):  # a computed address: not known before the run
            return False
        return self.literal_string(operand)  # a whole row reads as JSON text, a constant as is

    def write(self, operand: Operand, is_string: bool, regs: int, cells: int) -> tuple[int, int]:
        """``(regs, cells)`` after writing a value (a string or not) to ``operand``."""
        if isinstance(operand, Path):  # the base now holds the JSON text of the whole
            return self.write(operand.base, True, regs, cells)
        if isinstance(operand, Reg):
            if operand.index == 0:  # R0 stays 0
                return regs, cells
            bit = 1 << operand.index
            return (regs | bit if is_string else regs & ~bit), cells
        bits, one = self.memory.cell(operand)
        if one:
            return regs, (cells | bits if is_string else cells & ~bits)
        # A computed address: some cell of these may now hold another value. A string stays
        # certain only where a string is written.
        return regs, (cells if is_string else cells & ~bits)

    def overflowed(self, pc: int, returns: tuple[int, ...]) -> None:
        """Record where a budget ran out: the outermost CALL on the path, else ``pc``."""
        if self.found.overflow is None:
            self.found.overflow = returns[0] - 1 if returns else pc

    def reach(self, pc: int, returns: tuple[int, ...], facts: _Facts, origin: int) -> None:
        """Merge ``facts`` into state ``(pc, returns)``, reached from instruction ``origin``."""
        if pc >= len(self.instructions):  # past the last instruction: the program ends
            if returns:  # ... inside a subroutine, without its RET
                self.found.off_end.setdefault(origin, returns[-1] - 1)
            return
        key = (pc, returns)
        old = self.facts.get(key)
        if old is None:
            if len(self.facts) >= MAX_STATES:
                self.overflowed(pc, returns)
                return
            self.facts[key] = facts
        else:
            merged = old.merge(facts)
            if merged == old:
                return
            self.facts[key] = merged
        if key not in self.queued:
            self.queued.add(key)
            heapq.heappush(self.queue, key)

    def run(self, entry: int) -> Findings:
        if not 0 <= entry < len(self.instructions):
            return self.found
        start = _Facts(0, frozenset((UNSET,)), 0, 0, self.all_variables, self.memory.initial)
        self.reach(entry, (), start, entry)
        steps = 0
        while self.queue:
            if steps >= MAX_STEPS:
                self.overflowed(*self.queue[0])
                break
            steps += 1
            key = heapq.heappop(self.queue)
            self.queued.discard(key)
            self.step(key[0], key[1], self.facts[key])
        return self.found

    def variable(self, operand: Operand) -> int:
        """The bit of the variable an operand names (directly or as ``[name]``), or 0."""
        if isinstance(operand, Name):
            return self.variable_bit.get(operand.name.lower(), 0)
        if isinstance(operand, Mem) and operand.label is not None:
            return self.variable_bit.get(operand.label.lower(), 0)
        return 0

    def reads(self, pc: int, ins: Instruction, fx: Effects, facts: _Facts) -> int:
        """Check what ``ins`` reads; return the variables it leaves written."""
        operands = ins.operands
        unwritten = facts.unwritten
        for position in fx.reads:
            operand = operands[position]
            bit = self.variable(operand)
            if bit and unwritten & bit:
                self.found.unwritten_reads.add((pc, position))
            if fx.numeric and self.holds_string(operand, facts):
                self.found.string_math.add((pc, position))
        for position, operand in enumerate(operands):
            for part in nested(operand):  # a path's base and keys, a template's fills
                bit = self.variable(part)
                if bit and unwritten & bit:
                    self.found.unwritten_reads.add((pc, position))
            for mem in (operand, *nested(operand)):
                if not isinstance(mem, Mem) or (position in fx.reads and _text_address(mem)):
                    continue  # [ESI] read may be text: C's *s (see machine/access.py)
                if any(facts.regs >> reg.index & 1 for reg in mem.registers):
                    self.found.string_addresses.add((pc, position))
        for position in fx.writes:
            if position not in fx.reads:
                unwritten &= ~self.variable(operands[position])
        if fx.numeric:
            for reg in fx.implicit_reads:
                if facts.regs >> reg & 1:
                    self.found.string_registers.add((pc, reg))
        return unwritten

    def step(self, pc: int, returns: tuple[int, ...], facts: _Facts) -> None:
        ins = self.instructions[pc]
        fx = self.flow.effects[pc]
        depth, setters, regs, stack, _, cells = facts
        unwritten = self.reads(pc, ins, fx, facts)
        info = OPCODE_INFO[ins.op]
        if fx.flags_read:
            self.test_flags(pc, setters)
            if fx.flow == "next":  # SETcc, CMOVcc: a path goes on with flags it could test
                setters = _NO_SETTER if info.ordered else setters - {UNSET}
        if self.flow.subroutine_call(pc):
            self.call(pc, returns, _Facts(depth, setters, regs, stack, unwritten, cells))
            return
        if fx.flow == "return":
            if returns:
                back = returns[-1]
                self.reach(back, returns[:-1], facts._replace(unwritten=unwritten), back - 1)
            return
        if fx.flow == "halt":
            return
        taken, put = self.flow.stack_effect(pc)
        if depth < taken:
            if pc in self.flow.tools:
                self.found.short_calls[pc] = min(depth, self.found.short_calls.get(pc, depth))
            else:
                self.found.empty_pops.add(pc)
        depth = max(depth - taken, 0) + put
        if pc in self.flow.tools:
            count, bits = self.results[pc]
            if pc in self.flow.eax:  # the one result goes to EAX (see the cfg)
                stack >>= taken
                regs = regs | 1 << EAX_INDEX if bits & 1 else regs & ~(1 << EAX_INDEX)
            else:
                stack = ((stack >> taken) << count | bits) & _STACK_BITS
        else:
            regs, stack, cells = self.moved(ins, fx, facts, taken)
        if fx.flags_written:
            setters = frozenset((pc,)) if pc in self.string_cmps else _NO_SETTER
        after = _Facts(depth, setters, regs, stack, unwritten, cells)
        if fx.flow == "next":
            self.reach(pc + 1, returns, after, pc)
            return
        if info.condition:  # a path that goes on past the jump had flags it could test
            strings = after.setters - {UNSET}
            after = after._replace(setters=_NO_SETTER if info.ordered else strings)
        for target in self.flow.successors[pc]:
            self.reach(target, returns, after, pc)

    def moved(
        self, ins: Instruction, fx: Effects, facts: _Facts, taken: int
    ) -> tuple[int, int, int]:
        """``(regs, stack, cells)`` after ``ins`` writes: a copy carries its string, a value
        taken off the stack its slot's, anything computed is a number."""
        operands = ins.operands
        top = bool(facts.stack & 1)
        values = []
        for position in fx.writes:  # read everything before writing anything (XCHG)
            sources = [read for written, read in fx.moves if written == position]
            if sources:
                is_string = any(self.holds_string(operands[r], facts) for r in sources)
            else:
                is_string = top if taken else False
            values.append((operands[position], is_string))
        pushed = [self.holds_string(operands[p], facts) for p in fx.reads] if fx.pushes else []
        regs, stack, cells = facts.regs, facts.stack >> taken, facts.cells
        for operand, is_string in values:
            regs, cells = self.write(operand, is_string, regs, cells)
        for reg in fx.implicit_writes:  # MUL src, DIV src, LOOP: numbers
            regs &= ~(1 << reg)
        for is_string in pushed:
            stack = (stack << 1 | is_string) & _STACK_BITS
        return regs, stack, cells

    def test_flags(self, pc: int, setters: frozenset[int]) -> None:
        """Record what an instruction testing the flags may find: none set, or strings."""
        info = OPCODE_INFO[self.instructions[pc].op]
        if UNSET in setters:
            self.found.unset_jumps.add(pc)
        strings = setters - {UNSET}
        if info.ordered and strings:
            self.found.string_jumps.setdefault(pc, set()).update(strings)

    def call(self, pc: int, returns: tuple[int, ...], facts: _Facts) -> None:
        if len(returns) >= MAX_CALL_DEPTH:
            self.found.too_deep.add(pc)
            return
        self.reach(self.flow.targets[pc], (*returns, pc + 1), facts, pc)


def _text_address(mem: Mem) -> bool:
    """``[ESI]``: one register and nothing else; read, it may hold text (its first character)."""
    return mem.label is None and mem.index is None and not mem.disp and mem.base is not None


def explore(flow: ControlFlow, layout: Layout | None = None) -> Findings:
    """Walk every path of a program from its entry point, within the bounds.

    Args:
        flow: The control-flow graph of a program whose structure is sound (every jump and
            CALL target resolved).
        layout: Its memory (for the variables that must be written before they are read, and
            the cells that hold strings).

    Returns:
        The :class:`Findings`.
    """
    return _Explorer(flow, layout).run(flow.program.entry)
