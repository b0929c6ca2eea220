"""Verifier: reject a bad plan before any tool runs, listing every problem at once.

Three stages, as "Checks before the run" in ``docs/language.md`` lists them: the plan's size,
its structure, then (when the structure leaves the control flow well defined) its paths, over
the states of :mod:`llassembly.analysis.paths`: the stack, flags and variables of each path
and the types of values, in one walk (:class:`PathWalk`), and loops that never end. A plan
the paths cannot be followed for within their limits is refused, saying which limit: a path
the analysis did not follow is never taken for a fine one.

The types ("Types before the run" in ``docs/language.md``, which says what is refused): for
every register, variable, memory cell and stack slot, its **shape** on every run (from the
tools' annotations, :mod:`llassembly.analysis.shapes`, or the plan, carrying a value written in
the plan as :attr:`Shape.literal <llassembly.analysis.shapes.Shape.literal>` so the tool can be
asked whether it takes it) and whether it holds **text for certain on some path** (a string the
plan writes, or the result of a tool declared ``-> str``, no other). The walk is bounded by
:data:`~llassembly.language.limits.MAX_STEPS`.

Example:
    >>> from llassembly import parse
    >>> check(parse("POP R1\\nHLT"), {})[0].message
    'POP on an empty stack: on some path nothing is on the stack when this line runs'
"""

from __future__ import annotations

import difflib
import functools
import itertools
import operator
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import NamedTuple

from llassembly.analysis.cfg import ControlFlow, Layout, control_flow, layout_of
from llassembly.analysis.paths import fixpoint, joined_stacks, outermost, paths_of, pushed, taken
from llassembly.analysis.queries import query_sites
from llassembly.analysis.shapes import (
    ANSWER_TEXT,
    ANY,
    INT,
    NONE_SHAPE,
    NUMBER,
    STRUCTURES,
    TEXT,
    Kind,
    Shape,
    carries,
    child,
    describe,
    is_number,
    is_text,
    join,
    options_of,
    shape_of,
)
from llassembly.analysis.toolset import tool_shapes
from llassembly.errors import Diagnostic, PlanRejected, first_names
from llassembly.language import limits
from llassembly.language.instructions import (
    EAX_INDEX,
    MNEMONICS,
    OPCODE_INFO,
    Opcode,
    OperandKind,
    register_name,
)
from llassembly.language.program import (
    NONE,
    Effects,
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Path,
    Program,
    Reg,
    Template,
    ToolShape,
    Value,
    arguments_of,
    fewest_arguments,
    find_tool,
    nested,
    param_names,
)
from llassembly.language.templates import has_placeholders

_WRITTEN: dict[type, Kind] = {type(None): "none", str: "text", int: "int"}  # else a float
_EAX = Reg(EAX_INDEX, "EAX")
_PRODUCED = {"number": NUMBER, "text": TEXT, "texts": Shape("list", item=TEXT)}


_Place = tuple[Shape | None, bool]  # its shape, and whether it holds text for certain on some path
_UNKNOWN: _Place = (None, False)


def _join(a: _Place, b: _Place) -> _Place:
    return a if a == b else (join(a[0], b[0]), a[1] or b[1])


class _Facts(NamedTuple):
    regs: tuple[_Place, ...]  # per tracked register (ControlFlow.tracked)
    variables: tuple[Shape | None, ...]  # per variable (its text is its cell's)
    stack: tuple[_Place, ...]  # top last
    text_cells: int  # bit i: memory cell i (Layout.first_cell) holds text for certain, likewise
    depth: int  # least data-stack depth any path brings
    unset: bool  # on some path no flag-setting instruction has run yet
    unwritten: int  # bit i: variable i may not have been written yet on some path

    def merge(self, other: _Facts) -> _Facts:
        return _Facts(
            joined_stacks(self.regs, other.regs, _join),
            joined_stacks(self.variables, other.variables, join),
            joined_stacks(self.stack, other.stack, _join),
            self.text_cells | other.text_cells,
            min(self.depth, other.depth),
            self.unset or other.unset,
            self.unwritten | other.unwritten,
        )


def _results(tool: ToolShape) -> tuple[_Place, ...]:
    """A tool's results, first popped first (text for certain: declared ``str``)."""
    types = tuple(getattr(tool, "result_types", ()) or ())[: max(tool.n_results, 0)]
    found = [(_known(shape_of(t)), t is str) for t in types]
    return (*found, *[_UNKNOWN] * (tool.n_results - len(found)))


def _known(shape: Shape) -> Shape | None:
    return None if shape.kind == "any" else shape


def _written(value: Value, line: int) -> Shape | None:
    """The shape of a value written in the plan on ``line``, carrying the value itself (JSON
    text written in the plan is not followed: its paths are checked as the plan runs)."""
    kind = _WRITTEN.get(type(value), "float")
    json_text = type(value) is str and value.lstrip()[:1] in ("[", "{")
    return Shape("any" if json_text else kind, literal=(value, line))


class PathWalk:
    """One walk over the paths of a plan and what it finds (``answers``: the shape of each
    query's answer, by its ``CALL``; see :func:`~llassembly.analysis.queries.query_sites`).

    Attributes:
        found: The message for each operation the types refuse, by ``(instruction, operand
            position, argument)`` (position -1: a register the instruction uses without naming
            it); told from the facts at the fixed point only (:attr:`reporting`).
        empty_pops: ``POP`` reached with an empty stack on some path.
        short_calls: Tool ``CALL`` to the fewest values found on the stack when it runs.
        unset_jumps: Instructions testing the flags reached with no flags set on some path.
        unwritten_reads: The variable (the first one named) read by each ``(instruction, operand
            position)`` where, on some path, one it names has not been written yet (these four are
            recorded at every visit: the facts only grow, so a state's last visit finds everything).
    """

    def __init__(self, flow: ControlFlow, layout: Layout, answers: Mapping[int, Shape]) -> None:
        self.flow, self.layout, self.program = flow, layout, flow.program
        self.results = {pc: _results(tool) for pc, tool in flow.tools.items()}
        for pc, shape in answers.items():  # a query: one result
            self.results[pc] = ((shape, self.results[pc][0][1]),)
        self.var = {name: i for i, name in enumerate(sorted(layout.variables))}
        self.reachable = {self.var[name] for name in layout.live if name in self.var}  # by [reg]
        # a JC/JNC testing a call (nothing jumps in between): where it goes when the call
        # succeeded, EAX there (NONE, or the result by the EAX convention), and the places
        # holding EAX's value at the test (copied from it between)
        self.splits: dict[int, tuple[int, _Place, list[Operand], set[int]]] = {}
        marked, fx = {*flow.targets.values(), self.program.entry}, flow.effects
        for call, test in flow.tested.items():
            target = flow.targets.get(test, test + 1)  # (SETC, CMOVC: no branch)
            if target != test + 1 and marked.isdisjoint(range(call + 1, test + 1)):
                jnc = fx[test].info.condition == "ge"  # (the carry is LT: JNC is JGE)
                success = self.results[call][0] if call in flow.eax else (NONE_SHAPE, False)
                self.splits[test] = (target if jnc else test + 1, success, *self.copies(call, test))
        self.found: dict[tuple[int, int, int], str] = {}
        self.reporting = False
        self.empty_pops: set[int] = set()
        self.short_calls: dict[int, int] = {}
        self.unset_jumps: set[int] = set()
        self.unwritten_reads: dict[tuple[int, int], str] = {}

    def copies(self, call: int, test: int) -> tuple[list[Operand], set[int]]:
        """The registers, variables and one-cell labels holding EAX's value after the straight-line
        code between ``call`` and ``test``, and the stack slots (by depth from the top)."""

        def key(operand: Operand) -> int | str | None:
            if isinstance(operand, Reg) and operand.index in self.flow.tracked:
                return operand.index
            cells, one = self.layout.cells_of(operand)  # a variable, or one cell of a label
            return f"cell {cells[0]}" if one and isinstance(operand, Name | Mem) else None

        held: dict[int | str | None, Operand] = {EAX_INDEX: _EAX}
        stack: list[bool] = []  # what this code pushed, top last: whether a copy of EAX
        for pc in range(call + 1, test):  # (straight-line: cfg._tested)
            ins, fx = self.program.instructions[pc], self.flow.effects[pc]
            was = [
                (w, stack[-1:] == [True] if r < 0 else key(ins.operands[r]) in held)
                for w, r in fx.copies
            ]
            count, put = self.flow.stack_effect(pc)
            pushed = [copy for w, copy in was if w == Effects.STACK]
            stack = stack[: max(len(stack) - count, 0)] + [False] * (put - len(pushed)) + pushed
            for position in fx.writes:
                operand = ins.operands[position]
                whole = key(operand.base if isinstance(operand, Path) else operand)
                if whole is None:  # a cell found by its address: it may be a variable's
                    held = {k: v for k, v in held.items() if isinstance(k, int)}
                held.pop(whole, None)
                if (position, True) in was and whole is not None and not isinstance(operand, Path):
                    held[whole] = operand
            for reg in fx.implicit_writes:
                held.pop(reg, None)
        return [*held.values()], {len(stack) - 1 - i for i, copy in enumerate(stack) if copy}

    def start(self) -> _Facts:
        text_cells = sum(  # the cells that start as text
            1 << (first + offset)
            for key, first in self.layout.first_cell.items()
            for offset, cell in enumerate(self.layout.labels[key].cells)
            if isinstance(cell, str)
        )
        regs, variables = ((INT, False),) * len(self.flow.tracked), (INT,) * len(self.var)
        return _Facts(regs, variables, (), text_cells, 0, True, (1 << len(self.var)) - 1)

    # -- what an operand holds ----------------------------------------------------------------

    def register(self, facts: _Facts, index: int) -> _Place:
        slot = self.flow.tracked.get(index)  # the others hold 0
        return (INT, False) if slot is None else facts.regs[slot]

    def shape(self, operand: Operand, facts: _Facts, pc: int, position: int) -> Shape | None:
        """The shape ``operand`` reads as, reporting a path no value of its base has."""
        if isinstance(operand, Reg):
            return self.register(facts, operand.index)[0]
        if isinstance(operand, Imm):  # (pc -1: a path's base, never a literal)
            return _written(operand.value, self.program.instructions[pc].line)
        if isinstance(operand, Template):  # (a tool tells what it may become)
            fills = [self.shape(fill, facts, pc, position) for fill in operand.fills]
            if any(fill is not None and carries(fill, ANSWER_TEXT) for fill in fills):
                return ANSWER_TEXT  # (a model's text copied: its JSON is still no shape's)
            return Shape("text", literal=(operand, self.program.instructions[pc].line))
        if isinstance(operand, Name):
            key = operand.name.lower()
            if key in self.var:
                return facts.variables[self.var[key]]
            data = self.program.data.get(key)
            if data is None or key in self.layout.live:
                return None
            cells = self.program.memory.get(key)
            return _written(data, cells.line if cells is not None else 0)
        if isinstance(operand, Path):
            return self.walk(operand, facts, pc, position)
        return None  # a memory cell

    def text(self, operand: Operand, facts: _Facts) -> bool:
        """Whether ``operand`` holds text for certain on some path."""
        if isinstance(operand, Reg):
            return self.register(facts, operand.index)[1]
        if isinstance(operand, Path):  # a part of a structure: not known before the run
            return False
        cells, one = self.layout.cells_of(operand)
        if one:  # one cell: what the paths wrote there
            return bool(facts.text_cells >> cells[0] & 1)
        if isinstance(operand, Mem):  # a computed address: not known before the run
            return False
        if isinstance(operand, Name):  # data holding text (a whole row reads as JSON text)
            return isinstance(self.program.data.get(operand.name.lower()), str)
        return isinstance(operand, Template) or isinstance(operand.value, str)  # a literal

    def walk(
        self, path: Path, facts: _Facts, pc: int, position: int, written: bool = False
    ) -> Shape | None:
        """The shape ``path`` reads as (``None``: not known), telling the first step no value of
        its shape has; ``written``: the last step may also add itself (a field to an object or a
        map, an element by its index to a list, at its length to a fixed list)."""
        current = self.shape(path.base, facts, pc, position)
        for number, step in enumerate(path.steps):
            last = written and number == len(path.steps) - 1
            key = _key(step)
            grows = ("object", "map", "union", *(("list",) if isinstance(key, int) else ()))
            if current is None or (last and current.kind in grows):
                return None
            if last and (current.kind, key) == ("tuple", len(current.options)):  # added at its end
                return None
            part, problem = child(current, key)
            listed = key is None and current.kind in ("list", "tuple")  # a key that is text:
            if listed and is_text(self.shape(step, facts, pc, position)):
                problem = f"is a list: its elements are found by a whole number; {step} is text"
            if problem is not None:
                if self.reporting:
                    where = str(path.base) + "".join(_step_text(s) for s in path.steps[:number])
                    message = f"{path}: {where} ({describe(current)}) {problem}"
                    message += _POP_IT if current.kind == "none" and _is_eax(path.base) else ""
                    self.found.setdefault((pc, position, 0), message)
                return None
            current = _known(part)
        return current

    def variable(self, operand: Operand) -> int:
        """The bit of the variable an operand names (directly or as ``[name]``), or 0."""
        key = operand.name if isinstance(operand, Name) else getattr(operand, "label", None)
        index = self.var.get(key.lower()) if isinstance(key, str) else None
        return 0 if index is None else 1 << index

    # -- one instruction -------------------------------------------------------------------------

    def transfer(self, pc: int, facts: _Facts) -> _Facts:
        """The facts after the instruction at ``pc``: the stack depth, the flags and the
        variables written on each path (recording what they find), then the values."""
        flow = self.flow
        ins, fx = self.program.instructions[pc], flow.effects[pc]
        unset, unwritten = facts.unset, facts.unwritten
        for position, operand in enumerate(ins.operands):  # read, or a path's base and keys,
            read = (operand, *nested(operand)) if position in fx.reads else nested(operand)
            named = [part for part in read if self.variable(part)]  # a template's fills
            if any(self.variable(part) & unwritten for part in named):
                self.unwritten_reads[pc, position] = str(getattr(named[0], "label", named[0]))
        for position in set(fx.writes) - set(fx.reads):
            unwritten &= ~self.variable(ins.operands[position])
        if fx.info.condition and unset:
            self.unset_jumps.add(pc)
        unset = unset and not (fx.info.condition or fx.flags_written)  # a path going on had some
        count, put = flow.stack_effect(pc)
        if facts.depth < count:
            if pc in flow.tools:
                self.short_calls[pc] = min(facts.depth, self.short_calls.get(pc, facts.depth))
            else:
                self.empty_pops.add(pc)
        depth = max(facts.depth - count, 0) + put
        return self.values(pc, facts)._replace(depth=depth, unset=unset, unwritten=unwritten)

    def edge(self, pc: int, to: int, facts: _Facts) -> _Facts:
        """The facts a JC/JNC testing a call sends to ``to``: where it goes when the call
        succeeded, EAX and its copies as the call left them; elsewhere the error's text."""
        if pc not in self.splits:
            return facts
        ok, success, places, slots = self.splits[pc]
        place = success if to == ok else (TEXT, True)
        for operand in places:
            facts = self.put(facts, operand, place)
        at = len(facts.stack) - 1  # (slots by depth)
        return facts._replace(
            stack=tuple(place if at - i in slots else v for i, v in enumerate(facts.stack))
        )

    def values(self, pc: int, facts: _Facts) -> _Facts:
        """The shapes and text after the instruction at ``pc`` (telling the problems)."""
        flow, ins, fx = self.flow, self.program.instructions[pc], self.flow.effects[pc]
        if self.reporting:
            self.check_text(pc, ins, fx, facts)
        if pc in flow.tools:
            stack, given = taken(facts.stack, flow.stack_effect(pc)[0], _UNKNOWN)
            if self.reporting:
                self.check_arguments(pc, flow.tools[pc], [shape for shape, _ in given])
            results, facts = self.results[pc], facts._replace(stack=stack)
            if pc in flow.tested:  # failed: NONE for each result, the error's text in EAX
                results = tuple((join(shape, NONE_SHAPE), text) for shape, text in results)
                error = join(results[0][0], TEXT) if pc in flow.eax else join(NONE_SHAPE, TEXT)
                facts = self.put(facts, _EAX, (error, True))
            if pc in flow.eax:
                return facts if pc in flow.tested else self.put(facts, _EAX, results[0])
            return facts._replace(stack=pushed(stack, reversed(results)))
        read = {p: self.shape(ins.operands[p], facts, pc, p) for p in fx.reads}
        for position in fx.writes:  # a path written: what it goes through must be there
            operand = ins.operands[position]
            if isinstance(operand, Path) and position not in fx.reads:
                self.walk(operand, facts, pc, position, written=True)
        if self.reporting:
            self.check(pc, ins, fx, read)

        def copied(r: int) -> _Place:  # a value copied
            if r == Effects.STACK:
                return facts.stack[-1] if facts.stack else _UNKNOWN
            return read.get(r), self.text(ins.operands[r], facts)

        moved = [(w, copied(r)) for w, r in fx.copies]  # all read before any is written (XCHG)
        out = facts._replace(stack=taken(facts.stack, fx.info.pops, _UNKNOWN)[0])
        produced = (_PRODUCED.get(fx.info.produces), False)  # text from SUBSTR:
        for position in fx.writes:  # followed by its shape alone
            sources = [v for w, v in moved if w == position] or [produced]
            out = self.put(out, ins.operands[position], functools.reduce(_join, sources))
        for reg in fx.implicit_writes:  # MUL src, DIV src, LOOP: numbers
            out = self.put(out, Reg(reg, register_name(reg)), (NUMBER, False))
        return out._replace(stack=pushed(out.stack, [v for w, v in moved if w == Effects.STACK]))

    def put(self, facts: _Facts, operand: Operand, place: _Place) -> _Facts:
        """``facts`` after ``operand`` is written a value of ``place``'s shape and text."""
        value, text = place
        if isinstance(operand, Path):  # the base holds the JSON text of a changed structure
            before = self.shape(operand.base, facts, -1, -1)  # a memory cell's is not known
            return self.put(facts, operand.base, (_with_part(before, operand.steps, value), True))
        if isinstance(operand, Reg):
            slot = self.flow.tracked.get(operand.index)  # none for R0, which stays 0
            if slot is None:
                return facts
            return facts._replace(regs=(*facts.regs[:slot], place, *facts.regs[slot + 1 :]))
        slot = self.var.get(operand.name.lower()) if isinstance(operand, Name) else None
        if slot is not None:
            variables = (*facts.variables[:slot], value, *facts.variables[slot + 1 :])
            facts = facts._replace(variables=variables)
        elif isinstance(operand, Mem) and operand.label is None:  # through [reg]: a variable's
            found = (None if i in self.reachable else v for i, v in enumerate(facts.variables))
            facts = facts._replace(variables=tuple(found))  # cell too
        cells, one = self.layout.cells_of(operand)
        bits = ((1 << len(cells)) - 1) << cells.start if cells else 0
        if one:
            text_cells = facts.text_cells | bits if text else facts.text_cells & ~bits
        else:  # some cell of these may now hold another value: text stays certain only where
            text_cells = facts.text_cells if text else facts.text_cells & ~bits  # it is written
        return facts._replace(text_cells=text_cells)

    # -- what is refused ---------------------------------------------------------------------------

    def check_text(self, pc: int, ins: Instruction, fx: Effects, facts: _Facts) -> None:
        """Arithmetic on a value that holds text for certain on some path: an operand, a
        register of an address, a register used without being named."""
        operands = ins.operands
        for position in fx.reads:
            operand = operands[position]
            if not fx.numeric or not self.text(operand, facts):
                continue
            if isinstance(operand, Reg | Mem) or (
                isinstance(operand, Name) and operand.name.lower() in self.layout.live
            ):
                what = (
                    f"on some path {operand} holds a string here (from a string literal, string "
                    "data or a tool that returns str); keep text and numbers in different "
                    f"registers, or MOV a number into {operand} first"
                )
            elif isinstance(operand, Name):
                what = f"{operand.name!r} is string data; use a number or a number data label"
            else:
                what = f"{operand} is a string; use a number"
            self.found.setdefault((pc, position, 0), _needs_numbers(ins, what))
        for position, operand in enumerate(operands):
            for mem in (m for m in (operand, *nested(operand)) if isinstance(m, Mem)):
                if position in fx.reads and (mem.label, mem.index, mem.disp) == (None, None, 0):
                    continue  # [ESI] read may be text: C's *s, its first character (access.py)
                if any(self.register(facts, reg.index)[1] for reg in mem.registers):
                    what = (
                        f"on some path a register in the address {mem} holds a string; an "
                        "address is a number"
                    )
                    if mem.label is None and mem.base is not None:  # MOV ESI, table
                        what += f" (to point {mem.base} at data, LEA {mem.base}, [label])"
                    self.found.setdefault((pc, position, -1), _needs_numbers(ins, what))
        for reg in fx.implicit_reads if fx.numeric else ():
            if self.register(facts, reg)[1]:
                name, op = register_name(reg), ins.mnemonic
                if fx.info.flow == "branch":  # LOOP
                    message = (
                        f"{op} counts {name} down, but on some path {name} holds a string here; "
                        f"MOV the number of rounds into {name} first"
                    )
                else:
                    message = (
                        f"{op} {operands[0]} works on {name} without naming it, but on some path "
                        f"{name} holds a string here (from a string literal, string data or a "
                        f"tool that returns str); MOV a number into {name} first (arithmetic "
                        "works on numbers only)"
                    )
                self.found.setdefault((pc, -1, reg), message)

    def check(self, pc: int, ins: Instruction, fx: Effects, read: dict[int, Shape | None]) -> None:
        """Arithmetic on a value that is text on every run, and a compare of text with a number."""
        op = ins.mnemonic
        for position, shape in read.items() if fx.numeric else ():
            operand, what = ins.operands[position], describe(shape)
            if shape is not None and shape.kind == "none":  # (a union is never all NONE)
                fix = _POP_IT if _is_eax(operand) else f"; MOV a number into {operand} first"
                message = (  # a literal NONE, or a place holding NONE
                    f"{op} needs numbers, but NONE (no value) is not one"
                    if isinstance(operand, Imm)
                    else f"{op} needs numbers, but {operand} is NONE on every run here{fix}"
                )
            elif is_text(shape):
                hint = "a decimal is text as the tool writes it" if "decimal" in what else ""
                fix = f"read the number in it first: NUM R9, {operand}, then {op} with R9"
                if any(o.kind in STRUCTURES for o in options_of(shape or ANY)):
                    hint = "an object or a list is held as its JSON text"
                    fix = f"take a number out of it with a path ({operand}.field, {operand}[0])"
                message = (
                    f"{op} needs numbers, but {operand} is {what} ({hint or 'it is text'}); {fix}"
                )
            else:
                continue
            self.found.setdefault((pc, position, 0), message)
        never, shape = fx.info.never, read.get(1)
        if never and shape is not None and all(o.kind in never for o in options_of(shape)):
            value, takes = ins.operands[1], fx.info.takes  # (LEN of a number, KEYS of a list...)
            self.found.setdefault(
                (pc, 1, 0),
                f"{op} needs {takes}, not {value}"
                if isinstance(value, Imm)
                else f"{op} needs {takes}, but {value} is {describe(shape)} on every run here",
            )
        if fx.numeric or not fx.info.compares or len(ins.operands) != 2:
            return
        (a, b), (sa, sb) = ins.operands, (read.get(0), read.get(1))
        for text, number, shape, other, at in ((a, b, sa, sb, 0), (b, a, sb, sa, 1)):
            if is_text(shape) and is_number(other):
                fix = f'compare it with text ({op} {text}, "..."), or read the number in it first'
                fix += f" (NUM R9, {text})"
                if any(o.kind in STRUCTURES for o in options_of(shape or ANY)):
                    fix = f"take a number out of it with a path ({text}.field, {text}[0])"
                self.found.setdefault(
                    (pc, at, 0),
                    f"{op} compares {text}, which is {describe(shape)}, with {number}, a number: "
                    f"text is never equal to a number and has no order; {fix}",
                )
                return

    def check_arguments(self, pc: int, tool: ToolShape, given: list[Shape | None]) -> None:
        """Each argument written in the plan (a literal, however it got to the stack) that the tool
        refuses on every run; ``given``: the arguments in parameter order (``None``: not known)."""
        refuses = getattr(tool, "refuses", None)
        if refuses is None:
            return
        for number, shape in enumerate(given):
            # checked when every value it may be is written in the plan (NONE included)
            options = options_of(shape) if shape is not None else ()
            written = [o.literal or (NONE, 0) for o in options if o.literal or o.kind == "none"]
            if not written or len(written) < len(options):
                continue
            reasons = [refuses(number, value) for value, _ in written]
            if any(reason is None for reason in reasons):
                continue
            lines = sorted({line for _, line in written if line})
            where = f"; the value is written on line {', '.join(map(str, lines))}" if lines else ""
            self.found.setdefault((pc, 0, number), f"CALL {tool.name}: {reasons[0]}{where}")


def _key(step: Imm | Reg | Name) -> str | int | None:
    """The key a path's step names (``None``: not known before the run)."""
    return None if not isinstance(step, Imm) or isinstance(step.value, float) else step.value


def _with_part(
    shape: Shape | None, steps: tuple[Imm | Reg | Name, ...], value: Shape | None
) -> Shape | None:
    """``shape`` after its part at ``steps`` is written a value of shape ``value`` (the run
    sets or adds a field, or an element; ``None``: not known)."""
    if not steps or shape is None:
        return value if not steps else None
    key, rest = _key(steps[0]), steps[1:]
    if shape.kind == "object" and isinstance(key, str):
        fields = dict(shape.fields) | {key: _with_part(shape.field(key), rest, value) or ANY}
        return replace(shape, fields=tuple(fields.items()))
    if shape.kind in ("list", "map") and isinstance(key, str) == (shape.kind == "map"):
        return replace(shape, item=join(shape.item, _with_part(shape.item, rest, value)))
    return None


def _step_text(step: Imm | Reg | Name) -> str:
    if isinstance(step, Imm) and isinstance(step.value, str):
        return f".{step.value}" if step.value.isidentifier() else f'["{step.value}"]'
    return f"[{step}]"


_POP_IT = (
    "; when a CALL tested with JC or JNC succeeds, EAX holds NONE and its results are on the "
    "stack: POP them"
)


def _is_eax(operand: Operand) -> bool:
    return isinstance(operand, Reg) and operand.index == EAX_INDEX


def _needs_numbers(ins: Instruction, what: str) -> str:
    return f"{ins.mnemonic} needs numbers, but {what} (arithmetic works on numbers only)"


# -- the checks --------------------------------------------------------------------------------

_KIND_WORDS: dict[OperandKind, str] = {
    "reg": "a destination register",
    "value": "a value",
    "label": "a label",
    "target": "a tool name or a label",
    "mem": "a memory operand [...]",
    "count": "a number of arguments",
}
_OPCODE_LIST = ", ".join(op.name for op in Opcode)


@functools.lru_cache(maxsize=256)  # one suggestion per distinct word (a hostile plan repeats)
def _did_you_mean(word: str) -> str:
    close = difflib.get_close_matches(word, MNEMONICS, n=3)
    close.sort(key=lambda m: m[0] != word[0])  # MOVE: MOV rather than CMOVE
    return f"did you mean {close[0]}? " if close else ""


def _names(names: list[str]) -> str:
    return first_names(names) or "none"


def _column(ins: Instruction, position: int) -> int:
    """The column of operand ``position`` (of the instruction itself for -1)."""
    columns = ins.operand_columns
    return columns[position] if 0 <= position < len(columns) else ins.column


class _Checker:
    """One verification: the program, the tools and what has been found so far."""

    def __init__(self, program: Program, tools: Mapping[str, ToolShape]) -> None:
        self.program = program
        self.tools = tools
        self.found: list[Diagnostic] = []
        self.not_kept = 0  # problems found beyond MAX_DIAGNOSTICS
        self.structural = False  # a fault that makes the control flow meaningless
        self.flow = control_flow(program, tools)
        self.layout = layout_of(program, tools)

    def report(self, line: int, column: int, message: str, *, structural: bool = False) -> None:
        self.structural = self.structural or structural
        if len(self.found) >= limits.MAX_DIAGNOSTICS:  # a hostile plan: count the rest, keep none
            self.not_kept += 1
            return
        self.found.append(Diagnostic(line, column, message, self.program.source_of(line)))

    def report_at(self, pc: int, message: str, position: int = -1) -> None:
        """:meth:`report` at operand ``position`` of instruction ``pc`` (-1: the instruction)."""
        ins = self.program.instructions[pc]
        self.report(ins.line, _column(ins, position), message)

    # -- structure --------------------------------------------------------------------------

    def check_unknown(self) -> None:
        for unknown in self.program.unknown:
            message = ""  # past MAX_DIAGNOSTICS counted, not listed: no suggestion needed
            if len(self.found) < limits.MAX_DIAGNOSTICS:
                message = (
                    f"unknown instruction {unknown.mnemonic!r}; "
                    f"{_did_you_mean(unknown.mnemonic.upper())}the instructions are {_OPCODE_LIST}"
                )
            self.report(unknown.line, unknown.column, message, structural=True)

    def check_labels(self) -> None:
        program = self.program
        for key, sites in program.label_lines.items():  # each label defined at least once
            name = program.label_names.get(key, key)
            (first_line, first_column), *again = sites
            for line, group in itertools.groupby(again, operator.itemgetter(0)):  # one per line
                columns = [column for _, column in group]
                again_here = (
                    f"again ({len(columns)} times on this line)" if len(columns) > 1 else "twice"
                )
                message = (
                    f"label {name!r} is defined {again_here} (first on line {first_line}); "
                    "rename one"
                )
                self.report(line, columns[0], message, structural=True)
            if key in program.data:
                message = f"{name!r} is both a code label and a data label; rename one of them"
                self.report(first_line, first_column, message)

    def check_operands(self) -> None:
        for index, ins in enumerate(self.program.instructions):
            info = OPCODE_INFO[ins.op]
            given = ins.operands
            form = info.shape(len(given))
            if form is None:
                kinds = " or ".join(
                    "(" + (" and ".join(_KIND_WORDS[k] for k in other.kinds) or "nothing") + ")"
                    for other in info.shapes
                )
                column = _column(ins, len(info.operands))  # the first operand too many
                numbers = sorted({len(other.kinds) for other in info.shapes})
                takes = " or ".join(str(n) for n in numbers)
                message = (
                    f"{ins.mnemonic} takes {takes} operand{'' if numbers == [1] else 's'} "
                    f"{kinds} but {len(given)} {'was' if len(given) == 1 else 'were'} given"
                )
                self.report(ins.line, column, message, structural=True)
                continue
            for position, (kind, operand) in enumerate(zip(form.kinds, given, strict=True)):
                column = _column(ins, position)
                if info.variadic and position:  # a placeholder of SAY's text
                    self.check_placeholder(index, ins, position, column)
                else:
                    self.check_operand(index, ins, kind, operand, column)
            if info.divides and self.literal_zero(given[-1]):
                message = (
                    f"{ins.mnemonic} divides by {given[-1]}, which is 0: division by zero; "
                    "divide by a number that is not 0 (CMP it with 0 and jump around first)"
                )
                self.report(ins.line, _column(ins, len(given) - 1), message)

    def check_operand(
        self, index: int, ins: Instruction, kind: OperandKind, operand: Operand, column: int
    ) -> None:
        line, op = ins.line, ins.mnemonic
        if isinstance(operand, Path | Template):
            self.check_compound(index, ins, kind, operand, column)
        elif kind == "value" and ins.op is not Opcode.SAY and self.template(ins, operand, column):
            return
        elif kind in ("label", "target"):  # a label, or (CALL) a tool or a label
            if isinstance(operand, Mem):
                where = "a label of the plan" if kind == "label" else _KIND_WORDS[kind]
                message = (
                    f"{op} needs {where}, not the memory operand {operand}: a plan cannot jump "
                    "or CALL through an address; compare the value and jump to labels instead"
                )
            elif not isinstance(operand, Name):
                message = f"{op} needs {_KIND_WORDS[kind]}, not {operand}"
            elif kind == "label" and operand.name.lower() not in self.program.labels:
                labels = _names(list(self.program.label_names.values()))
                message = f"jump to undefined label {operand.name!r}; labels: {labels}"
            elif index in self.flow.ambiguous:  # (a CALL: jumps to known labels are in targets)
                message = (
                    f"CALL {operand.name} is ambiguous: {operand.name!r} is both a tool and a "
                    "code label; rename the label"
                )
            elif index not in self.flow.tools and index not in self.flow.targets:
                tools = _names(sorted(self.tools))
                message = f"unknown tool {operand.name!r}; available tools: {tools}"
            else:
                return
            self.report(line, column, message, structural=True)
        elif isinstance(operand, Mem):
            self.check_memory(ins, kind, operand, column)
        elif kind == "mem":
            message = f"{op} needs a memory operand like [name + ESI*4], not {operand}"
            self.report(line, column, message)
        elif kind == "reg" and not isinstance(operand, Reg):
            self.check_destination(ins, operand, column)
        elif kind == "value" and isinstance(operand, Name) and (named := self.no_value(operand)):
            message = {
                "label": f"{operand.name!r} is a code label, not a value",
                "tool": f"{operand.name!r} is a tool, not a value; CALL it and POP its result",
                "nothing": (
                    f"unknown name {operand.name!r}: it is not a register, a number, "
                    "a string, a data label or a variable (a name written by MOV or POP "
                    "before it is read)"
                ),
            }[named]
            self.report(line, column, message)
        elif kind == "count":
            self.check_count(index, ins, operand, column)

    def template(self, ins: Instruction, operand: Operand, column: int, say: bool = False) -> bool:
        """Report a read (by name, as memory or as a placeholder; ``say``: in SAY) of a data label
        the plan does not write whose text has placeholders, which only ``SAY label`` fills in."""
        key = (operand.label or "") if isinstance(operand, Mem) else getattr(operand, "name", "")
        text = None if key.lower() in self.layout.live else self.program.data.get(key.lower())
        if not isinstance(text, str) or not has_placeholders(text):
            return False  # (a label the plan writes: what it holds then is the run's to know)
        message = f"{operand} holds text with placeholders ({{...}}), and only SAY fills them in "
        message += (
            f"from a data label; write SAY {key} (the label alone) to fill them in"
            if say
            else "from a data label; write the text in the instruction instead "
            '(PUSH "... {R1} ..."), where placeholders are filled in'
        )
        self.report(ins.line, column, message)
        return True

    def no_value(self, name: Name) -> str:
        """What a name read as a value names when it is no data label or variable: ``"label"``,
        ``"tool"`` or ``"nothing"``; ``""`` when it is one."""
        key = name.name.lower()
        if key in self.program.data or key in self.layout.variables:
            return ""
        if key in self.program.labels:
            return "label"
        return "tool" if find_tool(name.name, self.tools) is not None else "nothing"

    def literal_zero(self, operand: Operand) -> bool:
        """Whether an operand is the number 0 written in the program (a literal, a constant or a
        cell of read-only data at a fixed address)."""
        if isinstance(operand, Imm):
            return operand.value == 0  # text is never 0
        if isinstance(operand, Name):
            label = self.program.memory.get(operand.name.lower())
            writable = label is not None and label.writable
            return not writable and self.program.data.get(operand.name.lower()) == 0
        cells, one = self.layout.cells_of(operand)  # [zero + 8]: one cell, at a fixed offset
        if isinstance(operand, Mem) and operand.label and one:
            key = operand.label.lower()
            label, first = self.layout.labels[key], self.layout.first_cell[key]
            return not label.writable and label.cells[cells[0] - first] == 0
        return False

    def check_compound(
        self, index: int, ins: Instruction, kind: OperandKind, operand: Path | Template, column: int
    ) -> None:
        """A template (each placeholder is a value read) or a path (``R1.items[0].id``: its
        base and keys are read; written, its base is written too)."""
        if isinstance(operand, Template):
            at = operand.columns or (column,) * len(operand.fills)
            for fill, where in zip(operand.fills, at, strict=True):
                if isinstance(fill, Name) and self.no_value(fill) == "nothing":
                    message = (
                        f"{{{fill}}} in the text names no register, data label or variable; a "
                        "placeholder names a register ({R1}), a data label or variable ({best}), "
                        "memory ({[table + ESI*4]}) or a path ({R1.items[0].id}); write {{"
                        f"{fill}}}}} to keep the braces as text"
                    )
                    self.report(ins.line, where, message)
                else:
                    self.check_operand(index, ins, "value", fill, where)
            return
        if kind != "value" and kind != "reg":
            message = f"{ins.mnemonic} needs {_KIND_WORDS[kind]}, not the path {operand}"
            self.report(ins.line, column, message, structural=kind != "mem")
            return
        if not isinstance(operand.base, Reg):  # read, or written (kind "reg")
            self.check_operand(index, ins, kind, operand.base, column)
        for step in (step for step in operand.steps if not isinstance(step, Imm)):
            self.check_operand(index, ins, "value", step, column)

    def check_placeholder(self, index: int, ins: Instruction, position: int, column: int) -> None:
        """A ``{...}`` placeholder of a ``SAY`` text (the parser made it an operand)."""
        first, operand = ins.operands[0], ins.operands[position]
        if isinstance(first, Name) and first.name.lower() in self.layout.live and position == 1:
            message = (
                f"SAY {first} fills in placeholders, but the plan also writes {first}; keep the "
                "answer text in its own data label and the values elsewhere"
            )
            self.report(ins.line, _column(ins, 0), message)
        if not isinstance(operand, Name):
            self.check_operand(index, ins, "value", operand, column)
        elif named := self.no_value(operand):
            what = {
                "label": "a code label, not a value",
                "tool": "a tool, not a value (CALL it and POP its result first)",
                "nothing": "no register, data label or variable",
            }[named]
            message = (
                f"{{{operand.name}}} in the answer text names {what}; a placeholder names a "
                "register ({R1}, {EAX}, {xmm0}), a data label or variable ({best}) or memory "
                "({[table + ESI*4]})"
            )
            self.report(ins.line, column, message)
        else:
            self.template(ins, operand, column, say=True)

    def check_destination(self, ins: Instruction, operand: Operand, column: int) -> None:
        """A destination that is no register: a variable, or a one-cell writable label."""
        op, key = ins.mnemonic, operand.name.lower() if isinstance(operand, Name) else ""
        label = self.layout.labels.get(key)
        if label is None:
            message = (
                f"the destination of {op} must be a register (R1..R100, EAX..EBP, xmm0..xmm15), "
                f"a memory operand ([name]) or a variable, not {operand}"
            )
        elif not label.writable:
            message = (
                f"{op} writes {operand}, which is read-only data (section .rodata or equ); "
                "keep values that change in section .data or in a register"
            )
        elif len(label.cells) != 1:
            message = (
                f"{operand} has {len(label.cells)} cells; write one of them: "
                f"[{operand} + i*{label.size}] (cell i is at byte i*{label.size})"
            )
        else:
            return
        self.report(ins.line, column, message)

    def check_memory(self, ins: Instruction, kind: OperandKind, mem: Mem, column: int) -> None:
        """A memory operand: a known data label, in bounds and at a cell where it is known."""
        if mem.label is None:
            return
        if kind == "value":
            self.template(ins, mem, column, say=ins.op is Opcode.SAY)
        key = mem.label.lower()
        label = self.layout.labels.get(key)
        if label is None:
            if key in self.program.data:
                message = (
                    f"{mem.label} is a constant (equ), not memory; write {mem.label} without "
                    "brackets"
                )
            else:
                known = _names([k for k in self.layout.labels if k not in self.layout.variables])
                message = f"{mem} names no data label {mem.label!r}; data labels: {known}"
            self.report(ins.line, column, message)
            return
        if kind == "reg" and not label.writable:
            message = (
                f"{ins.mnemonic} writes {mem}, which is read-only data (section .rodata); "
                "put data that changes in section .data"
            )
            self.report(ins.line, column, message)
        if kind == "mem":  # LEA computes the address only: any offset is fine
            return
        size, cells = label.size, len(label.cells)
        scales = [1 if reg is mem.base else mem.scale for reg in mem.registers]
        if all(scale % size == 0 for scale in scales) and mem.disp % size:
            message = (
                f"{mem} is at byte {mem.disp} (plus whole cells) of {mem.label}, not at a cell: "
                f"its cells are {size} bytes apart, so the offset must be a multiple of {size}"
            )
        elif not mem.registers and not 0 <= mem.disp // size < cells:
            message = (
                f"{mem} reads cell {mem.disp // size} of {mem.label}, which has {cells} "
                f"(cells 0..{cells - 1}, at bytes 0..{(cells - 1) * size})"
            )
        else:
            return
        self.report(ins.line, column, message)

    def check_memory_size(self) -> None:
        cells = sum(len(label.cells) for label in self.layout.labels.values())
        if cells > limits.MAX_MEMORY_CELLS:
            line = max(label.line for label in self.layout.labels.values())
            message = (
                f"the data takes {cells} cells, more than the {limits.MAX_MEMORY_CELLS} a plan may "
                "have; keep large data in tools and fetch what the plan needs"
            )
            self.report(line, 1, message)

    def check_count(self, index: int, ins: Instruction, operand: Operand, column: int) -> None:
        """``CALL tool, N``: ``N`` arguments pushed, the tool's required ones at least."""
        tool = self.flow.tools.get(index)
        if index in self.flow.targets:
            message = f"CALL {ins.operands[0]}, {operand}: a subroutine takes no count of arguments"
        elif tool is None:
            return  # the unknown tool is reported
        elif isinstance(operand, Imm) and arguments_of(tool, ins.operands) == operand.value:
            return
        else:
            names, least = param_names(tool), fewest_arguments(tool)
            shown = ", ".join(names) or "none"
            message = (
                f"CALL {tool.name}, {operand}: the count is how many arguments were pushed, a "
                f"whole number from {least} to {len(names)}: {tool.name} takes {shown}, and the "
                f"last ones may be left out ({', '.join(names[least:])}) to take the tool's "
                "defaults"
                if least < len(names)
                else f"CALL {tool.name}, {operand}: {tool.name} needs all its arguments "
                f"({shown}): push them and write CALL {tool.name}"
            )
        self.report(ins.line, column, message, structural=True)

    # -- entry -------------------------------------------------------------------------------

    def check_entry(self) -> None:
        program, name = self.program, self.program.entry_name
        if name is None or name.lower() in program.labels:
            return
        what = "a data label, not a code label" if name.lower() in program.data else "no code label"
        labels = _names(list(program.label_names.values()))
        message = (
            f"global {name} names {what}, so the plan has no entry point; put the label "
            f"{name}: on the instruction to start from, or remove this line (code labels: {labels})"
        )
        self.report(*program.entry_site, message)

    # -- paths ------------------------------------------------------------------------------

    def check_paths(self) -> None:
        """Walk the paths (see the module doc) and report what they may do wrong, written for
        the model that will fix the plan, and every mix of the EAX convention."""
        flow, instructions = self.flow, self.program.instructions
        paths, queries = paths_of(flow), query_sites(flow, self.layout)
        answers = {pc: s for pc, s in queries.items() if isinstance(s, Shape)}
        walk = PathWalk(flow, self.layout, answers)
        facts, stopped = fixpoint(
            paths, walk.start(), walk.transfer, _Facts.merge, limits.MAX_STEPS, edge=walk.edge
        )
        if stopped is not None:  # the facts are not final, so no type problem is told
            what = f"{limits.MAX_STEPS} steps through code and subroutine calls"
            self.too_many(outermost(paths.states[stopped]), what)
        else:  # the types told from the facts at the fixed point
            walk.reporting = True
            for number, known in facts.items():
                walk.values(paths.states[number][0], known)
        for call, reader, pop in flow.mixed:
            message = (
                f"this POP would take a value from the stack, but the result of CALL "
                f"{flow.tools[call].name} (line {instructions[call].line}) is read in EAX on line "
                f"{instructions[reader].line}, so it is not on the stack: use one way, either "
                "POP the result right after the CALL (POP EAX), or read it in EAX and do not POP"
            )
            self.report_at(pop, message)
        for (pc, position), shown in sorted(walk.unwritten_reads.items()):
            message = (
                f"{shown} is read here before it is written on some path; a variable (a name "
                f"that is no register or data label) must be set first, e.g. MOV {shown}, 0, or "
                f"declare it in section .data ({shown} dd 0)"
            )
            self.report_at(pc, message, position)
        empty = "POP on an empty stack: on some path nothing is on the stack when this line runs"
        for pc in walk.empty_pops:
            self.report_at(pc, empty + _in_loop(flow, pc))
        for pc, have in walk.short_calls.items():
            tool = flow.tools[pc]
            params = ", ".join(param_names(tool))
            count, least = flow.stack_effect(pc)[0], fewest_arguments(tool)
            message = (
                f"CALL {tool.name} takes {count} value{'' if count == 1 else 's'} from the stack "
                f"({params}) but on some path only {have} {'is' if have == 1 else 'are'} there; "
                "PUSH the arguments, first parameter first, before the CALL"
            )
            if least < count:
                message += (
                    f" (to leave the last ones to the tool's defaults, push the first N, at least "
                    f"{least}, and write CALL {tool.name}, N)"
                )
            self.report_at(pc, message + _in_loop(flow, pc))
        for pc in walk.unset_jumps:
            fix = (
                "put a CMP before the jump (for example CMP R1, 0), or use JMP to always jump"
                if flow.effects[pc].info.flow != "next"
                else "put a CMP before it (for example CMP R1, 0)"
            )
            message = (
                f"{instructions[pc].mnemonic} tests the flags, but on some path no CMP, TEST "
                "or arithmetic (ADD, SUB, MUL, INC, DEC...) has run before it, so there is "
                f"nothing to test; {fix}"
            )
            self.report_at(pc, message)
        for pc, call in paths.off_end.items():  # a subroutine running past the end
            label = instructions[call].operands[0]
            message = (
                f"on some path the subroutine '{label}' (CALLed on line {instructions[call].line}) "
                "runs past the end of the program here without RET, which would stop the whole "
                "plan; end the subroutine with RET (or HLT to stop the plan on purpose)"
            )
            self.report_at(pc, message)
        for pc in paths.too_deep:
            label = instructions[pc].operands[0]
            message = (
                f"CALL {label}: subroutines nest deeper than {limits.MAX_CALL_DEPTH} calls here; "
                "the checker cannot follow them, so the plan is refused (a subroutine that calls "
                "itself nests without end); repeat work with a loop (CMP and a conditional jump "
                f"back) and nest CALLs at most {limits.MAX_CALL_DEPTH} deep"
            )
            self.report_at(pc, message)
        if paths.overflow is not None:
            what = f"{limits.MAX_STATES} states of code and subroutine calls"
            self.too_many(paths.overflow, what)
        for pc, site in queries.items():  # a query's answer shape, known before the run
            if isinstance(site, str):
                self.report_at(pc, site, 0)
        for (pc, position, _), message in sorted(walk.found.items()):
            if pc not in walk.short_calls:  # else its arguments are not where the check looks
                self.report_at(pc, message, position)

    def too_many(self, pc: int, what: str) -> None:
        """The plan has more paths than the analysis follows: ``what`` ran out at ``pc``."""
        fix = (
            "CALL subroutines from fewer places (one CALL in a loop, not many CALL lines) or "
            "nest them less"
            if self.flow.subroutine_call(pc)
            else "write a shorter plan with fewer branches (repeat work with a loop)"
        )
        message = (
            f"the program has too many paths to check (over {what}; the check stopped here), "
            f"so it is refused; {fix}"
        )
        self.report_at(pc, message)

    def check_loops(self) -> None:
        """Every loop that can never end: one no path leaves, whatever it calls (only a budget
        would stop it), or one with no tool call where nothing changes a register, memory or
        the stack (see :attr:`Paths.endless` and :attr:`ControlFlow.loops`)."""
        flow, endless = self.flow, dict.fromkeys(paths_of(self.flow).endless)
        for loop in {**endless, **dict.fromkeys(flow.loops)}:  # (a loop of both: told as endless)
            tools = sorted({flow.tools[pc].name for pc in loop if pc in flow.tools})
            members = set(loop)  # (a long loop: membership in a tuple would be quadratic)
            exits = any(t not in members for pc in loop for t in flow.flat[pc])
            if loop in endless:
                known = " (no run takes its jumps out: the flags they test are known)" * exits
                why = f"there is no way out of it{known}" + (
                    f": it would CALL {', '.join(tools)} again and again until a budget stops the "
                    "plan; give the loop an exit (CMP and a conditional jump out of it)"
                    if tools
                    else " and it calls no tool"
                )
            elif not tools and not exits:
                why = "there is no way out of it and it calls no tool"
            elif not tools and not any(flow.effects[pc].changes_state for pc in loop):
                why = "nothing in it changes a register or the stack and it calls no tool"
            else:
                continue
            self.report_at(loop[0], f"this loop ({_span(self.program, loop)}) can never end: {why}")


def _in_loop(flow: ControlFlow, pc: int) -> str:
    """Why values pushed by an earlier loop do not count in this one, and what to write."""
    loop = next((loop for loop in flow.loops if pc in loop), None)
    if loop is None:
        return ""
    return (
        f" (in the loop on {_span(flow.program, loop)}). The check counts the values pushed, "
        "not the rounds of loops, so values another loop PUSHed are not known to be there "
        "for each round of this one, even when both loops run as many rounds: POP each value "
        "in the loop that PUSHes it, or keep the values in a list: MOV R9, '[]' before the "
        "first loop, then LEN R8, R9 and MOV R9[R8], value to add one; in the second loop "
        "MOV R2, R9[ESI] reads element ESI"
    )


def _span(program: Program, component: tuple[int, ...]) -> str:
    """Render the lines of a loop (its instructions in order): ``lines 3-5`` or ``lines 3-5, 9``."""
    parts = []
    for _, run in itertools.groupby(enumerate(component), lambda at: at[1] - at[0]):  # a run of
        pcs = [pc for _, pc in run]  # instructions one after another
        first, last = program.instructions[pcs[0]].line, program.instructions[pcs[-1]].line
        parts.append(str(first) if first == last else f"{first}-{last}")
    return ("line " if len(component) == 1 else "lines ") + ", ".join(parts)


def check(
    program: Program, tools: Mapping[str, ToolShape] | Iterable[ToolShape]
) -> tuple[Diagnostic, ...]:
    """Return every problem of ``program``, sorted by line and column (empty when it is fine).

    Args:
        program: The parsed plan.
        tools: The tools the plan may CALL, by name or as a list (externs, or anything with a name,
            params and n_results; ``llassembly.check`` also takes functions and LangChain tools).

    Returns:
        One :class:`~llassembly.errors.Diagnostic` per problem.

    Raises:
        UsageError: ``tools`` is neither a mapping nor a list of tools.
    """
    by_name = tool_shapes(tools)
    count = len(program.instructions)
    # refused at once, at the first instruction past the limit
    if count > limits.MAX_PLAN_INSTRUCTIONS:
        first = program.instructions[limits.MAX_PLAN_INSTRUCTIONS]  # (a repair asks for less)
        message = (
            f"the plan has {count} instructions; at most {limits.MAX_PLAN_INSTRUCTIONS} are "
            "accepted: repeat work with a loop or a subroutine instead of writing it out"
        )
        return (Diagnostic(first.line, first.column, message, program.source_of(first.line)),)
    checker = _Checker(program, by_name)
    checker.check_unknown()
    checker.check_labels()
    checker.check_operands()
    checker.check_entry()
    checker.check_memory_size()
    if not checker.structural:
        checker.check_paths()
        checker.check_loops()
    unique = sorted(dict.fromkeys(checker.found), key=lambda d: (d.line, d.column))
    if checker.not_kept:
        last = unique[-1]
        more = f"... and {checker.not_kept} more problems, not listed; fix the ones above first"
        unique.append(Diagnostic(last.line, last.column, more))
    return tuple(unique)


def verify(program: Program, tools: Mapping[str, ToolShape] | Iterable[ToolShape]) -> None:
    """Check the parsed plan ``program`` with ``tools`` (as :func:`check` takes them) and raise
    if anything is wrong.

    Raises:
        PlanRejected: The plan has problems; ``diagnostics`` lists all of them.
        UsageError: ``tools`` is neither a mapping nor a list of tools.
    """
    diagnostics = check(program, tools)
    if diagnostics:
        raise PlanRejected(diagnostics)
