"""Types before the run: what kind of value each place holds on each path, and the operations no
such value allows ("Types before the run" and "Checks before the run" in ``docs/language.md``).

Two facts are followed for every register, variable, memory cell and stack slot over the paths
(:mod:`llassembly.analysis.paths`): its **shape** on every run, where the tools' annotations
(:mod:`llassembly.analysis.shapes`) or the plan give one, carrying a value written in the plan as
:attr:`Shape.literal <llassembly.analysis.shapes.Shape.literal>` so the tool can be asked
whether it takes it; and whether it holds, **on some path, text for certain** (a string the
plan writes, or the result of a tool declared ``-> str``; other results are never taken for
text). A value whose shape is not known is checked as the plan runs; a union is refused only
when no shape in it fits. The same walk follows, for the verifier, the least stack depth, the
flags set and the variables written on each path; it is bounded by
:data:`~llassembly.language.limits.MAX_STEPS`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

from llassembly.analysis.cfg import ControlFlow, Layout
from llassembly.analysis.paths import fixpoint, joined_stacks, paths_of, pushed, taken
from llassembly.analysis.shapes import (
    INT,
    NONE_SHAPE,
    NUMBER,
    TEXT,
    Kind,
    Shape,
    child,
    describe,
    is_number,
    is_text,
    join,
    options_of,
    shape_of,
)
from llassembly.language.instructions import EAX_INDEX, OPCODE_INFO, register_name
from llassembly.language.limits import MAX_STEPS
from llassembly.language.program import (
    NONE,
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
    Value,
    nested,
)

_WRITTEN: dict[type, Kind] = {type(None): "none", str: "text", int: "int"}  # else a float
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


def _text_address(mem: Mem) -> bool:
    """``[ESI]``: one register and nothing else; read, it may hold text (its first character)."""
    return mem.label is None and mem.index is None and not mem.disp and mem.base is not None


class PathWalk:
    """One walk over the paths of a plan (see :func:`walk_paths`) and what it finds.

    Attributes:
        problems: ``(instruction, operand position, message)`` for each operation the types
            refuse (position -1: a register the instruction uses without naming it).
        stopped: The state the walk stopped at after ``MAX_STEPS`` visits, else ``None``.
        empty_pops: ``POP`` reached with an empty stack on some path.
        short_calls: Tool ``CALL`` to the fewest values found on the stack when it runs.
        unset_jumps: Instructions testing the flags reached with no flags set on some path.
        unwritten_reads: The variable (the first one named) read by each ``(instruction,
            operand position)`` where, on some path, one it names has not been written yet
            (these four are recorded at every visit: the facts only grow, so a state's last
            visit finds everything).
    """

    def __init__(
        self, flow: ControlFlow, layout: Layout, answers: Mapping[int, Shape] | None = None
    ) -> None:
        self.flow = flow
        self.layout = layout
        self.program = flow.program
        self.slot = flow.tracked
        self.var = {name: i for i, name in enumerate(sorted(layout.variables))}
        self.results = {pc: _results(tool) for pc, tool in flow.tools.items()}
        for pc, shape in (answers or {}).items():  # a query: one result
            self.results[pc] = ((shape, self.results[pc][0][1]),)
        # Shapes are followed when some result has one that is not a number, or some tool is
        # asked about the arguments written in the plan; else text for certain is all there is.
        given = [s for places in self.results.values() for s, _ in places if s is not None]
        asked = any(t.params and getattr(t, "refuses", None) for t in flow.tools.values())
        self.shaped = asked or any(not is_number(shape) for shape in given)
        self.found: dict[tuple[int, int, int], str] = {}  # (pc, operand, argument)
        self.reporting = False  # problems are told from the facts at the fixed point only
        self.problems: list[tuple[int, int, str]] = []
        self.stopped: int | None = None
        self.empty_pops: set[int] = set()
        self.short_calls: dict[int, int] = {}
        self.unset_jumps: set[int] = set()
        self.unwritten_reads: dict[tuple[int, int], str] = {}

    def start(self) -> _Facts:
        text_cells = sum(  # the cells that start as text
            1 << (first + offset)
            for key, first in self.layout.first_cell.items()
            for offset, cell in enumerate(self.layout.labels[key].cells)
            if isinstance(cell, str)
        )
        regs, variables = ((INT, False),) * len(self.slot), (INT,) * len(self.var)
        return _Facts(regs, variables, (), text_cells, 0, True, (1 << len(self.var)) - 1)

    # -- what an operand holds ----------------------------------------------------------------

    def register(self, facts: _Facts, index: int) -> _Place:
        slot = self.slot.get(index)  # the others hold 0
        return (INT, False) if slot is None else facts.regs[slot]

    def shape(self, operand: Operand, facts: _Facts, pc: int, position: int) -> Shape | None:
        """The shape ``operand`` reads as, reporting a path no value of its base has."""
        if not self.shaped:
            return None
        if isinstance(operand, Reg):
            return self.register(facts, operand.index)[0]
        if isinstance(operand, Imm):
            return _written(operand.value, self.program.instructions[pc].line if pc >= 0 else 0)
        if isinstance(operand, Template):
            for fill in operand.fills:
                self.shape(fill, facts, pc, position)
            return TEXT
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
            return self.walk(operand, facts, pc, position, len(operand.steps))
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

    def walk(self, path: Path, facts: _Facts, pc: int, position: int, steps: int) -> Shape | None:
        """The shape after the first ``steps`` steps of ``path`` (``None``: not known)."""
        current = self.shape(path.base, facts, pc, position)
        for number, step in enumerate(path.steps[:steps]):
            key: str | int | float | None = step.value if isinstance(step, Imm) else None
            if isinstance(key, float):
                key = int(key) if key.is_integer() else None
            if current is None:
                return None
            part, problem = child(current, key)
            if problem is not None:
                self.report(pc, position, path, number, current, problem)
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
        if fx.flags_read and unset:
            self.unset_jumps.add(pc)
        unset = unset and not (fx.flags_read or fx.flags_written)  # a path that goes on had some
        taken, put = flow.stack_effect(pc)
        if facts.depth < taken:
            if pc in flow.tools:
                self.short_calls[pc] = min(facts.depth, self.short_calls.get(pc, facts.depth))
            else:
                self.empty_pops.add(pc)
        depth = max(facts.depth - taken, 0) + put
        return self.values(pc, facts)._replace(depth=depth, unset=unset, unwritten=unwritten)

    def values(self, pc: int, facts: _Facts) -> _Facts:
        """The shapes and text after the instruction at ``pc`` (telling the problems)."""
        flow = self.flow
        ins = self.program.instructions[pc]
        fx = flow.effects[pc]
        if self.reporting:
            self.check_text(pc, ins, fx, facts)
        if pc in flow.tools:
            stack, given = taken(facts.stack, flow.stack_effect(pc)[0], _UNKNOWN)
            if self.reporting:
                self.check_arguments(pc, flow.tools[pc], [shape for shape, _ in given])
            results, facts = self.results[pc], facts._replace(stack=stack)
            eax = Reg(EAX_INDEX, "EAX")
            if pc in flow.tested:  # failed: NONE for each result, the error's text in EAX
                results = tuple((join(shape, NONE_SHAPE), text) for shape, text in results)
                error = join(results[0][0], TEXT) if pc in flow.eax else join(NONE_SHAPE, TEXT)
                facts = self.put(facts, eax, (error, True))
            elif pc in flow.eax:
                facts = self.put(facts, eax, results[0])
            if pc in flow.eax:
                return facts
            return facts._replace(stack=pushed(stack, reversed(results)))
        read = {p: self.shape(ins.operands[p], facts, pc, p) for p in fx.reads}
        for position in fx.writes:  # a path written: what it goes through must be there
            operand = ins.operands[position]
            if isinstance(operand, Path) and position not in fx.reads:
                self.written_path(operand, facts, pc, position)
        if self.reporting:
            self.check(pc, ins, fx, read)

        def copied(r: int) -> _Place:  # a value copied
            if r == Effects.STACK:
                return facts.stack[-1] if facts.stack else _UNKNOWN
            return read.get(r), self.text(ins.operands[r], facts)

        moved = [(w, copied(r)) for w, r in fx.copies]  # all read before any is written (XCHG)
        out = facts._replace(stack=taken(facts.stack, fx.pops, _UNKNOWN)[0])
        produced = (_PRODUCED.get(OPCODE_INFO[ins.op].produces), False)  # text from SUBSTR:
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
            base = operand.base
            before = self.shape(base, facts, -1, -1) if not isinstance(base, Mem) else None
            kept = before if before is not None and before.kind in ("object", "list") else None
            return self.put(facts, base, (kept, True))
        if isinstance(operand, Reg):
            slot = self.slot.get(operand.index)  # none for R0, which stays 0
            if slot is None:
                return facts
            return facts._replace(regs=(*facts.regs[:slot], place, *facts.regs[slot + 1 :]))
        if isinstance(operand, Name) and operand.name.lower() in self.var:
            slot = self.var[operand.name.lower()]
            facts = facts._replace(
                variables=(*facts.variables[:slot], value, *facts.variables[slot + 1 :])
            )
        cells, one = self.layout.cells_of(operand)
        bits = ((1 << len(cells)) - 1) << cells.start if cells else 0
        if one:
            text_cells = facts.text_cells | bits if text else facts.text_cells & ~bits
        else:  # some cell of these may now hold another value: text stays certain only where
            text_cells = facts.text_cells if text else facts.text_cells & ~bits  # it is written
        return facts._replace(text_cells=text_cells)

    # -- what is refused ---------------------------------------------------------------------------

    def written_path(self, path: Path, facts: _Facts, pc: int, position: int) -> None:
        """A path written: the steps before the last must be there; the last may add a field
        to an object or an element at a list's end."""
        container = self.walk(path, facts, pc, position, len(path.steps) - 1)
        last = path.steps[-1]
        if container is not None and container.kind not in ("object", "map", "union"):
            key: str | int | float | None = last.value if isinstance(last, Imm) else None
            if isinstance(key, float):
                key = None
            _, problem = child(container, key)
            if problem is not None and not (container.kind == "list" and isinstance(key, int)):
                self.report(pc, position, path, len(path.steps) - 1, container, problem)

    def report(
        self, pc: int, position: int, path: Path, steps: int, shape: Shape, problem: str
    ) -> None:
        if not self.reporting:
            return
        where = str(path.base) + "".join(_step_text(s) for s in path.steps[:steps])
        message = f"{path}: {where} ({describe(shape)}) {problem}"
        self.found.setdefault((pc, position, 0), message)

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
            for mem in (operand, *nested(operand)):
                if not isinstance(mem, Mem) or (position in fx.reads and _text_address(mem)):
                    continue  # [ESI] read may be text: C's *s (see machine/access.py)
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
                if fx.flow == "branch":  # LOOP
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

    def check(
        self, pc: int, ins: Instruction, fx: Effects, read: Mapping[int, Shape | None]
    ) -> None:
        """Arithmetic on a value that is text on every run, and a compare of text with a
        number."""
        op = ins.mnemonic
        if fx.numeric:
            for position, shape in read.items():
                if is_text(shape):
                    operand, what = ins.operands[position], describe(shape)
                    hint = "a decimal is text as the tool writes it" if "decimal" in what else ""
                    self.found.setdefault(
                        (pc, position, 0),
                        f"{op} needs numbers, but {operand} is {what} ({hint or 'it is text'}); "
                        f"read the number in it first: NUM R9, {operand}, then {op} with R9",
                    )
            return
        if not OPCODE_INFO[ins.op].compares or len(ins.operands) != 2:
            return
        (a, b), (sa, sb) = ins.operands, (read.get(0), read.get(1))
        for text, number, shape, other, at in ((a, b, sa, sb, 0), (b, a, sb, sa, 1)):
            if is_text(shape) and is_number(other):
                self.found.setdefault(
                    (pc, at, 0),
                    f"{op} compares {text}, which is {describe(shape)}, with {number}, a number: "
                    "text is never equal to a number and has no order; compare it with text "
                    f'({op} {text}, "..."), or read the number in it first (NUM R9, {text})',
                )
                return

    def check_arguments(self, pc: int, tool: ToolShape, given: list[Shape | None]) -> None:
        """Each argument written in the plan (a literal, however it got to the stack) that
        the tool refuses on every run; ``given`` are the arguments, first parameter first
        (``None`` for those not known)."""
        refuses = getattr(tool, "refuses", None)
        if refuses is None:
            return
        for number, shape in enumerate(given):
            written = _literals(shape)
            if not written:
                continue
            reasons = [refuses(number, value) for value, _ in written]
            if any(reason is None for reason in reasons):
                continue
            lines = sorted({line for _, line in written if line})
            where = f"; the value is written on line {', '.join(map(str, lines))}" if lines else ""
            message = f"CALL {tool.name}: {reasons[0]}{where}"
            self.found.setdefault((pc, 0, number), message)


def _literals(shape: Shape | None) -> list[tuple[Value, int]]:
    """The values ``shape`` may be, each with the line it is written on, when every one of
    them is written in the plan (``NONE`` included); else ``[]``."""
    if shape is None:
        return []
    found: list[tuple[Value, int]] = []
    for option in options_of(shape):
        if option.literal is not None:
            found.append(option.literal)
        elif option.kind == "none":
            found.append((NONE, 0))
        else:
            return []
    return found


def _step_text(step: Imm | Reg | Name) -> str:
    if isinstance(step, Imm) and isinstance(step.value, str):
        return f".{step.value}" if step.value.isidentifier() else f'["{step.value}"]'
    return f"[{step}]"


def _needs_numbers(ins: Instruction, what: str) -> str:
    return f"{ins.mnemonic} needs numbers, but {what} (arithmetic works on numbers only)"


def walk_paths(
    flow: ControlFlow, layout: Layout, answers: Mapping[int, Shape] | None = None
) -> PathWalk:
    """Walk the paths of ``flow``'s program once (see :class:`PathWalk`); ``answers``: the
    shape of each query's answer, by its ``CALL`` (see
    :func:`~llassembly.analysis.queries.query_sites`). Past ``MAX_STEPS`` visits the walk
    stops (the plan is refused then) and tells no type problem."""
    walk = PathWalk(flow, layout, answers)
    paths = paths_of(flow)
    if not paths.states:
        return walk
    facts, walk.stopped = fixpoint(paths, walk.start(), walk.transfer, _Facts.merge, MAX_STEPS)
    if walk.stopped is None:  # else the facts are not final, so nothing is told
        walk.reporting = True
        for number, known in facts.items():
            walk.values(paths.states[number][0], known)
        walk.problems = [(pc, at, told) for (pc, at, _), told in sorted(walk.found.items())]
    return walk
