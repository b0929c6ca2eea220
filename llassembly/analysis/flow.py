"""Path analysis for the verifier: what every reachable path through a plan may do.

The analysis walks abstract states ``(pc, return stack)`` from the entry point. Each state keeps
facts that only move one way, so the walk always ends:

* the least data-stack depth any path brings there (``POP`` or a tool ``CALL`` on a short
  stack);
* which instructions may have set the flags last: a ``CMP`` of strings written in the program,
  or :data:`UNSET` when on some path nothing has set them yet;
* which registers and which top stack slots hold, on some path, a value that is certainly a
  string: a string literal, string data, or the result of a tool declared ``-> str``. Values
  of unknown type (other tool results) are never taken for strings.

It is bounded: nested subroutines are followed :data:`MAX_CALL_DEPTH` calls deep, at most
:data:`MAX_STATES` states are kept and :data:`MAX_STEPS` states visited. A bound that is hit is
part of the result (:attr:`Findings.too_deep`, :attr:`Findings.overflow`) and the verifier
refuses the plan: a path the analysis did not follow is never taken for a fine one.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from llassembly.analysis.layout import Layout
from llassembly.language.instructions import (
    OPCODE_INFO,
    stack_effect,
)
from llassembly.language.opcodes import (
    EAX_INDEX,
    ECX_INDEX,
    EDX_INDEX,
    Opcode,
)
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Program,
    Reg,
    ToolShape,
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
    unwritten: int = 0  # bit i: variable i may not have been written yet on some path

    def merge(self, other: _Facts) -> _Facts:
        return _Facts(
            min(self.depth, other.depth),
            self.setters | other.setters,
            self.regs | other.regs,
            self.stack | other.stack,
            self.unwritten | other.unwritten,
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


def _write(regs: int, operand: Operand, is_string: bool) -> int:
    """``regs`` after writing ``operand`` (R0 and non-registers change nothing)."""
    if not isinstance(operand, Reg) or operand.index == 0:
        return regs
    bit = 1 << operand.index
    return regs | bit if is_string else regs & ~bit


class _Explorer:
    def __init__(
        self,
        program: Program,
        target: Mapping[int, int],
        tools: Mapping[int, ToolShape],
        layout: Layout | None = None,
        eax_calls: frozenset[int] = frozenset(),
    ) -> None:
        self.instructions = program.instructions
        self.data = program.data
        self.target = target
        self.tools = tools
        self.eax_calls = eax_calls
        variables = sorted(layout.variables) if layout is not None else []
        self.variable_bit = {name: 1 << i for i, name in enumerate(variables)}
        self.all_variables = (1 << len(variables)) - 1
        self.results = {pc: _results(tool) for pc, tool in tools.items()}
        self.string_cmps = {
            pc
            for pc, ins in enumerate(self.instructions)
            if ins.op in (Opcode.CMP, Opcode.TEST)
            and any(self.literal_string(o) for o in ins.operands)
        }
        self.facts: dict[_State, _Facts] = {}
        self.queue: list[_State] = []  # a heap: lowest instruction first
        self.queued: set[_State] = set()
        self.found = Findings()

    def literal_string(self, operand: Operand) -> bool:
        """Whether the operand is a string written in the program (a literal or string data)."""
        if isinstance(operand, Imm):
            return isinstance(operand.value, str)
        if isinstance(operand, Name):
            return isinstance(self.data.get(operand.name.lower()), str)
        return False

    def holds_string(self, operand: Operand, regs: int) -> bool:
        if isinstance(operand, Reg):
            return bool(regs >> operand.index & 1)
        return self.literal_string(operand)

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
        start = _Facts(0, frozenset((UNSET,)), 0, 0, self.all_variables)
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

    def reads(self, pc: int, ins: Instruction, facts: _Facts) -> int:
        """Check what ``ins`` reads; return the variables it leaves written."""
        info = OPCODE_INFO[ins.op]
        shape = info.accepts(len(ins.operands)) or info.operands
        unwritten = facts.unwritten
        clears = ins.op in (Opcode.XOR, Opcode.TEST) and _same_register(ins)
        for position, (kind, operand) in enumerate(zip(shape, ins.operands, strict=False)):
            reads_it = kind != "reg" or info.reads_dst or ins.op.value.startswith("CMOV")
            bit = self.variable(operand)
            if reads_it and bit and unwritten & bit:
                self.found.unwritten_reads.add((pc, position))
            if isinstance(operand, Mem):
                for reg in operand.registers:
                    if facts.regs >> reg.index & 1:
                        self.found.string_math.add((pc, position))
            numeric = info.numeric and reads_it and not clears and kind != "label"
            if numeric and self.holds_string(operand, facts.regs):
                self.found.string_math.add((pc, position))
            if kind == "reg" and bit and not reads_it:
                unwritten &= ~bit
        if ins.op is Opcode.LOOP and facts.regs >> ECX_INDEX & 1:
            self.found.string_math.add((pc, -1))  # -1: the ECX it counts down
        return unwritten

    def written(self, ins: Instruction, regs: int, stack_top: bool) -> int:
        """``regs`` (string bits) after ``ins`` writes its destination."""
        op, operands = ins.op, ins.operands
        if op in (Opcode.MUL, Opcode.DIV) and len(operands) == 1:
            return regs & ~(1 << EAX_INDEX) & ~(1 << EDX_INDEX)
        if op is Opcode.LOOP:
            return regs & ~(1 << ECX_INDEX)
        info = OPCODE_INFO[op]
        if not operands or info.operands[0] != "reg" or op is Opcode.PUSH:
            return regs
        dst = operands[0]
        if op is Opcode.MOV:
            return _write(regs, dst, self.holds_string(operands[1], regs))
        if op is Opcode.POP:
            return _write(regs, dst, stack_top)
        if op is Opcode.XCHG:
            first, second = self.holds_string(dst, regs), self.holds_string(operands[1], regs)
            return _write(_write(regs, dst, second), operands[1], first)
        if op.value.startswith("CMOV"):
            either = self.holds_string(dst, regs) or self.holds_string(operands[1], regs)
            return _write(regs, dst, either)
        return _write(regs, dst, False)

    def step(self, pc: int, returns: tuple[int, ...], facts: _Facts) -> None:
        ins = self.instructions[pc]
        op = ins.op
        info = OPCODE_INFO[op]
        depth, setters, regs, stack, _ = facts
        unwritten = self.reads(pc, ins, facts)
        if info.condition:
            self.test_flags(pc, setters)
            if not info.jump:  # SETcc, CMOVcc: a path goes on with flags it could test
                setters = _NO_SETTER if info.ordered else setters - {UNSET}
        taken, put = stack_effect(info, self.tools.get(pc))
        if op is Opcode.PUSH:
            depth += put
            stack = (stack << 1 | self.holds_string(ins.operands[0], regs)) & _STACK_BITS
        elif op is Opcode.POP:
            if depth < taken:
                self.found.empty_pops.add(pc)
            depth = max(depth - taken, 0)
            regs, stack = self.written(ins, regs, bool(stack & 1)), stack >> 1
        elif op in (Opcode.CMP, Opcode.TEST):
            setters = frozenset((pc,)) if pc in self.string_cmps else _NO_SETTER
        elif op is Opcode.CALL:
            if pc not in self.tools:
                self.call(pc, returns, _Facts(depth, setters, regs, stack, unwritten))
                return
            need = taken
            if depth < need:
                self.found.short_calls[pc] = min(depth, self.found.short_calls.get(pc, depth))
            count, bits = self.results[pc]
            if pc in self.eax_calls:  # the one result goes to EAX (see llassembly._layout)
                depth = max(depth - need, 0)
                stack = stack >> need
                regs = _write(regs, Reg(EAX_INDEX, "EAX"), bool(bits & 1))
            else:
                depth = max(depth - need, 0) + count
                stack = ((stack >> need) << count | bits) & _STACK_BITS
        elif op is Opcode.RET:
            if returns:
                back = returns[-1]
                self.reach(back, returns[:-1], facts._replace(unwritten=unwritten), back - 1)
            return
        elif op is Opcode.HLT:
            return
        else:
            if info.sets_flags:
                setters = _NO_SETTER
            regs = self.written(ins, regs, False)
        after = _Facts(depth, setters, regs, stack, unwritten)
        if info.jump:
            self.jump(pc, returns, after)
            return
        self.reach(pc + 1, returns, after, pc)

    def test_flags(self, pc: int, setters: frozenset[int]) -> None:
        """Record what an instruction testing the flags may find: none set, or strings."""
        info = OPCODE_INFO[self.instructions[pc].op]
        if UNSET in setters:
            self.found.unset_jumps.add(pc)
        strings = setters - {UNSET}
        if info.ordered and strings:
            self.found.string_jumps.setdefault(pc, set()).update(strings)

    def jump(self, pc: int, returns: tuple[int, ...], facts: _Facts) -> None:
        info = OPCODE_INFO[self.instructions[pc].op]
        if info.conditional:
            if info.condition:
                # A path that goes on past the jump had flags it could test.
                strings = facts.setters - {UNSET}
                facts = facts._replace(setters=_NO_SETTER if info.ordered else strings)
            self.reach(pc + 1, returns, facts, pc)
        self.reach(self.target[pc], returns, facts, pc)

    def call(self, pc: int, returns: tuple[int, ...], facts: _Facts) -> None:
        if len(returns) >= MAX_CALL_DEPTH:
            self.found.too_deep.add(pc)
            return
        self.reach(self.target[pc], (*returns, pc + 1), facts, pc)


def _same_register(ins: Instruction) -> bool:
    operands = ins.operands
    return len(operands) == 2 and isinstance(operands[0], Reg) and operands[0] == operands[1]


def explore(
    program: Program,
    target: Mapping[int, int],
    tools: Mapping[int, ToolShape],
    layout: Layout | None = None,
    eax_calls: frozenset[int] = frozenset(),
) -> Findings:
    """Walk every path of ``program`` from its entry point, within the bounds.

    Args:
        program: A program whose structure is sound (every jump and CALL target resolved).
        target: Jump, ``LOOP`` or ``CALL label`` instruction index to the index it goes to.
        tools: Tool ``CALL`` instruction index to the tool.
        layout: Its memory (for the variables that must be written before they are read).
        eax_calls: Tool ``CALL``s whose result goes to ``EAX`` instead of the stack.

    Returns:
        The :class:`Findings`.
    """
    return _Explorer(program, target, tools, layout, eax_calls).run(program.entry)


def components(entry: int, succ: Mapping[int, tuple[int, ...]]) -> list[list[int]]:
    """Return the strongly connected components reachable from ``entry`` (iterative Tarjan)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    result: list[list[int]] = []
    work: list[tuple[int, int]] = [(entry, 0)]
    while work:
        node, child = work.pop()
        if child == 0:
            index[node] = low[node] = len(index)
            stack.append(node)
            on_stack.add(node)
        children = succ[node]
        if child < len(children):
            work.append((node, child + 1))
            nxt = children[child]
            if nxt not in index:
                work.append((nxt, 0))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
            continue
        if low[node] == index[node]:
            component: list[int] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            result.append(component)
        if work:
            parent = work[-1][0]
            low[parent] = min(low[parent], low[node])
    return result
