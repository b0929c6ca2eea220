"""Plan summary: what a plan may do, worked out from its control flow before any tool runs.

A plan is written before anything runs, so its effects can be bounded in advance. For every
tool a plan can call, :func:`summarize` gives:

* the fewest calls any path that reaches the end of the plan makes, and the most any path can
  make (``None``: unbounded, the call sits in a loop whose trip count is not known; the run's
  ``max_tool_calls`` budget still stops it);
* each argument that is the same constant on every path reaching the call, with its value
  (the rest are *computed*: they depend on tool results or on the path taken);
* whether a call sits inside a loop, and whether some path ends the plan without making it;
* the worst-case number of instructions and tool calls, against the budgets.

The walk is the verifier's: abstract states ``(instruction, return stack)`` from the entry
point, both ways at each conditional jump, into each subroutine and back (register values are
not followed, so "a path" is a way through the code whatever the values). Instructions it does
not model are treated generically: they go on to the next line and may change any register.
Control flow it cannot follow within its limits makes every maximum unbounded
(:attr:`PlanSummary.complete` is then false).

Example:
    >>> from llassembly.externs import externs_from
    >>> from llassembly.parser import parse
    >>> def ping(x: int) -> int:
    ...     return x + 1
    >>> summary = summarize(parse("PUSH 1\\nCALL ping\\nPOP R1"), externs_from([ping]))
    >>> use = summary.tool("ping")
    >>> (use.min_calls, use.max_calls, use.arguments[0].value)
    (1, 1, 1)
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Final

from llassembly.analysis.flow import (
    MAX_CALL_DEPTH,
    MAX_STATES,
    components,
)
from llassembly.analysis.layout import layout_of
from llassembly.language.instructions import OPCODE_INFO
from llassembly.language.limits import DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_TOOL_CALLS
from llassembly.language.opcodes import (
    EAX_INDEX,
    REGISTER_COUNT,
    Opcode,
)
from llassembly.language.program import (
    Imm,
    Name,
    Operand,
    Program,
    Reg,
    ToolShape,
    Value,
    find_tool,
)

__all__ = ["Argument", "CallSite", "PlanSummary", "ToolUse", "summarize"]

MAX_VALUE_STEPS: Final = 200_000
"""Most state visits the constant analysis makes; past it every argument is *computed*."""
_STACK_KEPT: Final = 64  # top stack slots whose values are followed
_END: Final = -1  # the plan ends (HLT, a top-level RET, past the last instruction)


class _Computed:
    """A value the analysis does not know (a tool result, or different on different paths)."""

    def __repr__(self) -> str:
        return "COMPUTED"


_COMPUTED: Final = _Computed()
_Abstract = Value | _Computed
# Written without a guess of their meaning: register writers the analysis models exactly.
_ARITHMETIC: Final = frozenset({Opcode.ADD, Opcode.SUB, Opcode.MUL, Opcode.INC, Opcode.DEC})
_NO_EFFECT: Final = frozenset({Opcode.CMP, Opcode.NOP, Opcode.SAY})
_EAX: Final = Reg(EAX_INDEX, "EAX")


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of a tool call, by parameter.

    Attributes:
        name: The parameter's name.
        constant: The argument is the same constant on every path reaching the call.
        value: That constant (``None`` when the argument is computed).
    """

    name: str
    constant: bool
    value: Value | None = None

    def shown(self) -> str:
        """``name="value"`` or ``name=<computed>``."""
        if not self.constant:
            return f"{self.name}=<computed>"
        return f"{self.name}={json.dumps(self.value, ensure_ascii=False)}"


@dataclass(frozen=True, slots=True)
class CallSite:
    """One ``CALL tool`` line that some path reaches.

    Attributes:
        line: Line of the ``CALL`` in the plan text.
        source: The instruction as written.
        arguments: The arguments it passes, one per parameter in order.
        in_loop: The call sits inside a loop (it may run any number of times).
        conditional: Some path ends the plan without running this line.
    """

    line: int
    source: str
    arguments: tuple[Argument, ...]
    in_loop: bool
    conditional: bool


@dataclass(frozen=True, slots=True)
class ToolUse:
    """What a plan may do with one tool.

    Attributes:
        name: The tool's name.
        min_calls: Fewest calls on any path that reaches the end of the plan (a run that
            stops early, because a tool failed or a budget ran out, may make fewer).
        max_calls: Most calls on any path, or ``None`` when a call sits in a loop.
        in_loop: Some call of the tool sits inside a loop.
        conditional: Some path ends the plan without calling the tool.
        arguments: Per parameter, the argument when it is the same constant at every call
            site on every path, else computed.
        sites: Every ``CALL`` of the tool some path reaches, in line order.
    """

    name: str
    min_calls: int
    max_calls: int | None
    in_loop: bool
    conditional: bool
    arguments: tuple[Argument, ...]
    sites: tuple[CallSite, ...]


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """What a plan may do, known before any tool runs (see :func:`summarize`).

    Attributes:
        tools: One entry per tool some path calls, in order of first call line.
        min_tool_calls: Fewest tool calls on a path that reaches the end of the plan.
        max_tool_calls: Most tool calls on any path (``None``: unbounded).
        max_instructions: Most instructions on any path (``None``: unbounded).
        instruction_budget: The ``max_instructions_to_exec`` budget the run will have.
        tool_call_budget: The ``max_tool_calls`` budget the run will have.
        ends: Some path reaches the end of the plan (otherwise only a budget stops it).
        complete: The analysis followed every path; when false every maximum is ``None``.
    """

    tools: tuple[ToolUse, ...]
    min_tool_calls: int
    max_tool_calls: int | None
    max_instructions: int | None
    instruction_budget: int
    tool_call_budget: int
    ends: bool
    complete: bool

    def tool(self, name: str) -> ToolUse | None:
        """The use of tool ``name``, or ``None`` when no path calls it."""
        return next((use for use in self.tools if use.name == name), None)

    @property
    def within_budgets(self) -> bool:
        """Every path ends within the instruction and tool-call budgets."""
        return (
            self.max_instructions is not None
            and self.max_instructions <= self.instruction_budget
            and self.max_tool_calls is not None
            and self.max_tool_calls <= self.tool_call_budget
        )

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-serialisable plain data (``None`` stands for unbounded)."""
        data: dict[str, Any] = _plain(self)
        data.pop("instruction_budget")
        data.pop("tool_call_budget")
        data["budgets"] = {
            "max_instructions_to_exec": self.instruction_budget,
            "max_tool_calls": self.tool_call_budget,
        }
        data["within_budgets"] = self.within_budgets
        return data

    def render(self) -> str:
        """The summary as text for a person deciding whether the plan may run."""
        out = ["What this plan can do:"] if self.tools else ["This plan calls no tool."]
        width = max((len(use.name) for use in self.tools), default=0)
        for use in self.tools:
            notes = _notes(use.in_loop, use.conditional)
            out.append(f"  {use.name:<{width}}  {_calls(use.min_calls, use.max_calls)}{notes}")
            for site in use.sites:
                args = ", ".join(a.shown() for a in site.arguments)
                site_notes = _notes(site.in_loop, site.conditional)
                out.append(f"      line {site.line}: {use.name}({args}){site_notes}")
        total = _calls(self.min_tool_calls, self.max_tool_calls)
        out.append(f"Tool calls in all: {total} (budget {self.tool_call_budget})")
        if self.max_instructions is None:
            instructions = "unbounded"
        else:
            instructions = f"at most {self.max_instructions}"
        out.append(f"Instructions: {instructions} (budget {self.instruction_budget})")
        if not self.ends:
            out.append("No path reaches the end of the plan: only a budget stops it.")
        elif self.max_instructions is None or self.max_tool_calls is None:
            out.append("A loop has no bound known before the run: the budgets stop it.")
        elif not self.within_budgets:
            out.append("Some paths can go over a budget: the run stops there.")
        if not self.complete:
            out.append("The analysis could not follow every path; maxima are unbounded.")
        return "\n".join(out)


def _plain(value: Any) -> Any:
    """Dataclasses to dicts and tuples to lists, all the way down."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _calls(low: int, high: int | None) -> str:
    if high == low:
        return f"{low} call{'s' if low != 1 else ''}"
    top = "unbounded" if high is None else str(high)
    return f"{low} to {top} calls"


def _notes(in_loop: bool, conditional: bool) -> str:
    notes = [n for n, on in (("in a loop", in_loop), ("conditional", conditional)) if on]
    return f"  ({', '.join(notes)})" if notes else ""


# -- the walk -------------------------------------------------------------------------------------

_State = tuple[int, tuple[int, ...]]
_Facts = tuple[tuple[_Abstract, ...], tuple[_Abstract, ...]]  # registers, stack (top last)


def _join(a: _Abstract, b: _Abstract) -> _Abstract:
    if a is b or (type(a) is type(b) and a == b):
        return a
    return _COMPUTED


def _merge(old: _Facts, new: _Facts) -> _Facts:
    regs = tuple(_join(x, y) for x, y in zip(old[0], new[0], strict=True))
    keep = min(len(old[1]), len(new[1]))
    top_old = old[1][len(old[1]) - keep :]
    top_new = new[1][len(new[1]) - keep :]
    return regs, tuple(_join(x, y) for x, y in zip(top_old, top_new, strict=True))


class _Walk:
    def __init__(self, program: Program, tools: Mapping[str, ToolShape]) -> None:
        self.program = program
        self.instructions = program.instructions
        self.complete = True
        self.target: dict[int, int] = {}
        self.tool_at: dict[int, ToolShape] = {}
        for pc, ins in enumerate(self.instructions):
            self.resolve(pc, ins.op, ins.operands, tools)
        # Data a plan may write (and variables) changes as it runs: never a constant.
        self.written = layout_of(program, tools).live
        self.index: dict[_State, int] = {}
        self.states: list[_State] = []
        self.succ: list[tuple[int, ...]] = []

    def resolve(
        self, pc: int, op: Opcode, operands: tuple[Operand, ...], tools: Mapping[str, ToolShape]
    ) -> None:
        info = OPCODE_INFO.get(op)
        names = [o.name for o in operands if isinstance(o, Name)]
        if op is Opcode.CALL:
            tool = find_tool(names[0], tools) if names else None
            if tool is not None:
                self.tool_at[pc] = tool
            elif names and names[0].lower() in self.program.labels:
                self.target[pc] = self.program.labels[names[0].lower()]
            else:
                self.complete = False
        elif info is not None and info.jump:
            label = next((n.lower() for n in names if n.lower() in self.program.labels), None)
            if label is None:
                self.complete = False
            else:
                self.target[pc] = self.program.labels[label]

    def next_states(self, pc: int, returns: tuple[int, ...]) -> list[_State]:
        ins = self.instructions[pc]
        op, info = ins.op, OPCODE_INFO.get(ins.op)
        if op is Opcode.HLT:
            out: list[_State] = []
        elif op is Opcode.RET:
            out = [(returns[-1], returns[:-1])] if returns else []
        elif op is Opcode.CALL and pc in self.target:
            if len(returns) >= MAX_CALL_DEPTH:
                self.complete = False
                return []
            out = [(self.target[pc], (*returns, pc + 1))]
        elif info is not None and info.jump and pc in self.target:
            out = [(self.target[pc], returns)]
            if info.conditional:
                out.append((pc + 1, returns))
        else:
            out = [(pc + 1, returns)]
        return out

    def build(self) -> None:
        """Number every reachable state; ``_END`` is the plan's normal end."""
        entry = self.program.entry
        if not 0 <= entry < len(self.instructions):
            return
        self.add((entry, ()))
        queue = deque([0])
        while queue:
            number = queue.popleft()
            pc, returns = self.states[number]
            targets: list[int] = []
            for nxt_pc, nxt_returns in self.next_states(pc, returns):
                if nxt_pc >= len(self.instructions):
                    if not nxt_returns:
                        targets.append(_END)
                    continue  # a subroutine running off the end: the verifier refuses it
                key = (nxt_pc, nxt_returns)
                if key not in self.index:
                    if len(self.states) >= MAX_STATES:
                        self.complete = False
                        continue
                    self.add(key)
                    queue.append(self.index[key])
                targets.append(self.index[key])
            op = self.instructions[pc].op
            if op is Opcode.HLT or (op is Opcode.RET and not returns):
                targets.append(_END)
            self.succ[number] = tuple(dict.fromkeys(targets))

    def add(self, key: _State) -> None:
        self.index[key] = len(self.states)
        self.states.append(key)
        self.succ.append(())

    # -- constants --------------------------------------------------------------------------

    def value(self, operand: Operand, regs: tuple[_Abstract, ...]) -> _Abstract:
        if isinstance(operand, Reg):
            return regs[operand.index] if operand.index else 0
        if isinstance(operand, Imm):
            return operand.value
        if isinstance(operand, Name):
            key = operand.name.lower()
            if key in self.written:
                return _COMPUTED
            return self.program.data.get(key, _COMPUTED)
        return _COMPUTED  # an operand kind the analysis does not model

    def transfer(self, pc: int, facts: _Facts) -> _Facts:
        ins = self.instructions[pc]
        op, operands = ins.op, ins.operands
        regs, stack = facts
        if op is Opcode.MOV and len(operands) == 2:
            regs = _write(regs, operands[0], self.value(operands[1], regs))
        elif op is Opcode.PUSH and operands:
            stack = (*stack, self.value(operands[0], regs))[-_STACK_KEPT:]
        elif op is Opcode.POP and operands:
            top = stack[-1] if stack else _COMPUTED
            regs, stack = _write(regs, operands[0], top), stack[:-1]
        elif op in _ARITHMETIC and operands:
            regs = _write(regs, operands[0], _COMPUTED)
        elif op is Opcode.CALL and pc in self.tool_at:
            tool = self.tool_at[pc]
            stack = stack[: max(len(stack) - len(tool.params), 0)]
            stack = (*stack, *([_COMPUTED] * max(tool.n_results, 0)))[-_STACK_KEPT:]
            regs = _write(regs, _EAX, _COMPUTED)  # the result may be read in EAX (_layout)
        elif op is Opcode.CALL or op in _NO_EFFECT or op in (Opcode.RET, Opcode.HLT):
            pass
        elif (info := OPCODE_INFO.get(op)) is None or not info.jump:
            regs = (_COMPUTED,) * REGISTER_COUNT  # not modelled: it may write any register
        return regs, stack

    def constants(self) -> dict[int, _Facts] | None:
        """Facts on entry to each state, or ``None`` when the analysis ran out of steps."""
        if not self.states:
            return {}
        start: _Facts = ((0,) * REGISTER_COUNT, ())
        facts: dict[int, _Facts] = {0: start}
        queue = [(self.states[0][0], 0)]
        queued = {0}
        steps = 0
        while queue:
            steps += 1
            if steps > MAX_VALUE_STEPS:
                return None
            _, number = heapq.heappop(queue)
            queued.discard(number)
            out = self.transfer(self.states[number][0], facts[number])
            for nxt in self.succ[number]:
                if nxt == _END:
                    continue
                old = facts.get(nxt)
                merged = out if old is None else _merge(old, out)
                if merged != old:
                    facts[nxt] = merged
                    if nxt not in queued:
                        queued.add(nxt)
                        heapq.heappush(queue, (self.states[nxt][0], nxt))
        return facts


def _write(
    regs: tuple[_Abstract, ...], operand: Operand, value: _Abstract
) -> tuple[_Abstract, ...]:
    if not isinstance(operand, Reg) or operand.index == 0:
        return regs
    changed = list(regs)
    changed[operand.index] = value
    return tuple(changed)


# -- counting over the state graph ----------------------------------------------------------------


def _longest(
    order: list[list[int]], comp_of: list[int], succ: list[tuple[int, ...]], weight: list[int]
) -> int | None:
    """Most weight on any path from state 0; ``None`` when a weighted state is in a loop."""
    best: dict[int, int | None] = {}
    for number, members in enumerate(order):  # sinks first
        cyclic = len(members) > 1 or members[0] in succ[members[0]]
        own = sum(weight[m] for m in members)
        if cyclic and own:
            best[number] = None
            continue
        after: int | None = 0
        for member in members:
            for nxt in succ[member]:
                if nxt == _END or comp_of[nxt] == number:
                    continue
                value = best[comp_of[nxt]]
                after = None if value is None or after is None else max(after, value)
        best[number] = None if after is None else own + after
    return best[comp_of[0]]


def _fewest(succ: list[tuple[int, ...]], weight: list[int], avoid: set[int]) -> int | None:
    """Least weight on a path from state 0 to the end (0-1 BFS), avoiding ``avoid``."""
    if 0 in avoid:
        return None
    dist = {0: weight[0]}
    queue = deque([0])
    done: set[int] = set()
    while queue:
        node = queue.popleft()
        if node in done:
            continue
        done.add(node)
        for nxt in succ[node]:
            if nxt == _END:
                continue
            if nxt in avoid:
                continue
            cost = dist[node] + weight[nxt]
            if cost < dist.get(nxt, cost + 1):
                dist[nxt] = cost
                (queue.appendleft if weight[nxt] == 0 else queue.append)(nxt)
    ends = [dist[n] for n in dist if _END in succ[n]]
    return min(ends) if ends else None


def summarize(
    program: Program,
    tools: Mapping[str, ToolShape],
    *,
    max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
) -> PlanSummary:
    """Work out what ``program`` may do, without running anything.

    Meant for a plan that verifies (:func:`llassembly.verify`); on any other it still returns,
    with every maximum unbounded where its control flow cannot be followed.

    Args:
        program: The parsed plan.
        tools: The tools the plan may call, by name.
        max_instructions_to_exec: The instruction budget the run will have.
        max_tool_calls: The tool-call budget the run will have.

    Returns:
        The :class:`PlanSummary`.
    """
    walk = _Walk(program, tools)
    walk.build()
    states, succ = walk.states, walk.succ
    graph = {n: tuple(t for t in succ[n] if t != _END) for n in range(len(states))}
    order = components(0, graph) if states else []
    comp_of = [0] * len(states)
    for number, members in enumerate(order):
        for member in members:
            comp_of[member] = number
    looped = {m for members in order for m in members if len(members) > 1 or m in graph[members[0]]}
    facts = walk.constants()

    def count(weight: list[int]) -> tuple[int, int | None]:
        if not states:
            return 0, 0
        high = _longest(order, comp_of, succ, weight) if walk.complete else None
        return _fewest(succ, weight, set()) or 0, high

    by_site: dict[int, list[int]] = {}
    for number, (pc, _) in enumerate(states):
        if pc in walk.tool_at:
            by_site.setdefault(pc, []).append(number)
    ends = bool(states) and _fewest(succ, [0] * len(states), set()) is not None
    uses: dict[str, list[int]] = {}
    for pc in sorted(by_site):
        uses.setdefault(walk.tool_at[pc].name, []).append(pc)

    def site_of(pc: int) -> CallSite:
        tool, numbers = walk.tool_at[pc], by_site[pc]
        conditional = ends and _fewest(succ, [0] * len(states), set(numbers)) is not None
        ins = program.instructions[pc]
        return CallSite(
            ins.line,
            ins.text,
            _arguments(tool, numbers, facts),
            any(n in looped for n in numbers),
            conditional,
        )

    tool_uses: list[ToolUse] = []
    for name, pcs in sorted(uses.items(), key=lambda item: item[1][0]):
        sites = tuple(site_of(pc) for pc in pcs)
        chosen = {n for pc in pcs for n in by_site[pc]}
        low, high = count([1 if n in chosen else 0 for n in range(len(states))])
        tool_uses.append(
            ToolUse(
                name,
                low if ends else 0,
                high,
                any(site.in_loop for site in sites),
                ends and low == 0,
                _common(sites),
                sites,
            )
        )
    calling = [1 if pc in walk.tool_at else 0 for pc, _ in states]
    low_calls, high_calls = count(calling)
    _, high_instructions = count([1] * len(states))
    return PlanSummary(
        tools=tuple(tool_uses),
        min_tool_calls=low_calls if ends else 0,
        max_tool_calls=high_calls,
        max_instructions=high_instructions,
        instruction_budget=max_instructions_to_exec,
        tool_call_budget=max_tool_calls,
        ends=ends,
        complete=walk.complete,
    )


def _arguments(
    tool: ToolShape, numbers: list[int], facts: dict[int, _Facts] | None
) -> tuple[Argument, ...]:
    params = list(tool.params)
    names = [str(getattr(p, "name", f"arg{i + 1}")) for i, p in enumerate(params)]
    values: list[_Abstract] = [_COMPUTED] * len(params)
    if facts is not None and len(params):
        seen: list[_Abstract] | None = None
        for number in numbers:
            stack = facts[number][1] if number in facts else ()
            top = list(stack[-len(params) :]) if len(stack) >= len(params) else []
            here = top or [_COMPUTED] * len(params)
            seen = here if seen is None else [_join(a, b) for a, b in zip(seen, here, strict=True)]
        values = seen or values
    return tuple(
        Argument(name, False) if isinstance(v, _Computed) else Argument(name, True, v)
        for name, v in zip(names, values, strict=True)
    )


def _common(sites: tuple[CallSite, ...]) -> tuple[Argument, ...]:
    """Per parameter, the argument when every site passes the same constant."""
    first = sites[0].arguments
    out = []
    for i, arg in enumerate(first):
        same = all(
            s.arguments[i].constant
            and type(s.arguments[i].value) is type(arg.value)
            and s.arguments[i].value == arg.value
            for s in sites
        )
        out.append(arg if arg.constant and same else Argument(arg.name, False))
    return tuple(out)
