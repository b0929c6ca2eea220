"""Types before the run: the shapes of tool results followed through a plan, and the paths and
compares no value of those shapes can satisfy.

Where a tool's return annotation gives the shape of its result (:mod:`llassembly.analysis.
shapes`: a ``TypedDict``, a pydantic model, a dataclass, ``list[...]``, ``str``), the shape is
followed over every path of the plan (:mod:`llassembly.analysis.paths`), through ``POP``,
``MOV``, the EAX convention, variables and paths read (``MOV R2, R1.items[0]``). The verifier
then refuses, before any tool runs:

* a path no value of its shape has: an unknown field (the message lists the fields that
  exist), a field of a list or an element of an object, a part of a number or a text;
* arithmetic on a value that is text on every run (a ``str`` field, a ``Decimal`` field,
  which pydantic writes as text: ``NUM`` reads the number first);
* a compare of a value that is text on every run with a number, or the reverse (they are
  never equal and have no order);
* an argument written in the plan (a literal, ``NONE`` or a read-only data label, carried as
  :attr:`Shape.literal <llassembly.analysis.shapes.Shape.literal>` through registers, variables
  and the stack) that the tool refuses: the tool is asked (its ``refuses(position, value)``,
  :meth:`llassembly.machine.externs.Extern.refuses`), so the check refuses what the run would.

A value whose shape is not known (``-> dict``, ``-> Any``, a cell of memory, different things
on different paths) is checked only as the plan runs. A union (``Contact | None``, or what
paths that meet bring) is refused only when no shape in it fits. The walk is bounded by
:data:`MAX_TYPE_STEPS`; past it, nothing more is refused here (the run still checks).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from llassembly.analysis.cfg import ControlFlow
from llassembly.analysis.layout import Layout
from llassembly.analysis.paths import fixpoint, paths_of
from llassembly.analysis.shapes import (
    INT,
    NUMBER,
    TEXT,
    Shape,
    child,
    describe,
    is_number,
    is_text,
    join,
    shape_of,
)
from llassembly.language.instructions import EAX_INDEX, OPCODE_INFO
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
)

__all__ = ["MAX_TYPE_STEPS", "TypeProblem", "type_problems"]

MAX_TYPE_STEPS: Final = 100_000
"""Most state visits the shapes are followed for."""
_STACK_KEPT: Final = 64
_Facts = tuple[tuple[Shape | None, ...], tuple[Shape | None, ...], tuple[Shape | None, ...]]
"""Per tracked register, per variable, and the stack (top last): the shape, or ``None``."""


@dataclass(frozen=True, slots=True)
class TypeProblem:
    """A path or compare that no value of its shape satisfies, at an operand of a line."""

    pc: int
    position: int
    message: str


def _joined(a: tuple[Shape | None, ...], b: tuple[Shape | None, ...]) -> tuple[Shape | None, ...]:
    return a if a is b else tuple(join(x, y) for x, y in zip(a, b, strict=True))


def _merge(old: _Facts, new: _Facts) -> _Facts:
    keep = min(len(old[2]), len(new[2]))
    return (
        _joined(old[0], new[0]),
        _joined(old[1], new[1]),
        _joined(old[2][len(old[2]) - keep :], new[2][len(new[2]) - keep :]),
    )


def _result_shapes(tool: ToolShape) -> tuple[Shape | None, ...]:
    types = tuple(getattr(tool, "result_types", ()) or ())
    count = max(tool.n_results, 0)
    shapes = [_known(shape_of(t)) for t in types[:count]]
    return tuple(shapes + [None] * (count - len(shapes)))


def _known(shape: Shape) -> Shape | None:
    return None if shape.kind == "any" else shape


def _written(value: Value, line: int) -> Shape | None:
    """The shape of a value written in the plan on ``line``, carrying the value itself (JSON
    text written in the plan is not followed: its paths are checked as the plan runs)."""
    if type(value) is str:
        if value == NONE:
            return Shape("none", literal=(value, line))
        if value.lstrip()[:1] in ("[", "{"):
            return Shape("any", literal=(value, line))
        return Shape("text", literal=(value, line))
    return Shape("int" if type(value) is int else "float", literal=(value, line))


class _Types:
    def __init__(
        self, flow: ControlFlow, layout: Layout, answers: Mapping[int, Shape] | None = None
    ) -> None:
        self.flow = flow
        self.layout = layout
        self.program = flow.program
        written = {reg for fx in flow.effects for reg in fx.registers_written}
        if flow.eax:
            written.add(EAX_INDEX)
        self.slot = {reg: i for i, reg in enumerate(sorted(written))}
        self.var = {name: i for i, name in enumerate(sorted(layout.variables))}
        self.results = {pc: _result_shapes(tool) for pc, tool in flow.tools.items()}
        self.results.update({pc: (shape,) for pc, shape in (answers or {}).items()})
        self.found: dict[tuple[int, int, int], str] = {}  # (pc, operand, argument)
        self.reporting = False  # problems are told from the facts at the fixed point only

    # -- what an operand holds ----------------------------------------------------------------

    def shape(self, operand: Operand, facts: _Facts, pc: int, position: int) -> Shape | None:
        """The shape ``operand`` reads as, reporting a path no value of its base has."""
        regs, variables, _ = facts
        if isinstance(operand, Reg):
            slot = self.slot.get(operand.index)
            return INT if slot is None else regs[slot]
        if isinstance(operand, Imm):
            return _written(operand.value, self.program.instructions[pc].line if pc >= 0 else 0)
        if isinstance(operand, Template):
            for fill in operand.fills:
                self.shape(fill, facts, pc, position)
            return TEXT
        if isinstance(operand, Name):
            key = operand.name.lower()
            if key in self.var:
                return variables[self.var[key]]
            data = self.program.data.get(key)
            if data is None or key in self.layout.live:
                return None
            cells = self.program.memory.get(key)
            return _written(data, cells.line if cells is not None else 0)
        if isinstance(operand, Path):
            return self.walk(operand, facts, pc, position, len(operand.steps))
        return None  # a memory cell

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

    # -- one instruction -------------------------------------------------------------------------

    def transfer(self, pc: int, facts: _Facts) -> _Facts:
        regs, variables, stack = facts
        flow = self.flow
        if pc in flow.tools:
            taken, _ = flow.stack_effect(pc)
            if self.reporting:
                self.check_arguments(pc, flow.tools[pc], stack[max(len(stack) - taken, 0) :])
            stack = stack[: max(len(stack) - taken, 0)]
            shapes = self.results[pc]
            if pc in flow.eax:
                regs, variables, _ = self.put(facts, Reg(EAX_INDEX, "EAX"), shapes[0])
                return regs, variables, stack
            return regs, variables, (*stack, *reversed(shapes))[-_STACK_KEPT:]
        fx = flow.effects[pc]
        ins = self.program.instructions[pc]
        read = {p: self.shape(ins.operands[p], facts, pc, p) for p in fx.reads}
        for position in fx.writes:  # a path written: what it goes through must be there
            operand = ins.operands[position]
            if isinstance(operand, Path) and position not in fx.reads:
                self.written_path(operand, facts, pc, position)
        self.check(pc, ins, fx, read)
        produced = OPCODE_INFO[ins.op].produces
        out = facts
        top = stack[-1] if stack else None
        for position in fx.writes:
            sources = [read.get(r) for w, r in fx.moves if w == position]
            if sources:
                value = sources[0]
                for other in sources[1:]:
                    value = join(value, other)
            elif fx.pops:
                value = top
            else:
                value = NUMBER if produced == "number" else TEXT if produced == "text" else None
            out = self.put(out, ins.operands[position], value, read.get(position))
        regs, variables, stack = out
        for reg in fx.implicit_writes:
            slot = self.slot.get(reg)
            if slot is not None:
                regs = (*regs[:slot], NUMBER, *regs[slot + 1 :])
        stack = stack[: max(len(stack) - fx.pops, 0)]
        if fx.pushes:
            stack = (*stack, *(read.get(p) for p in fx.reads))[-_STACK_KEPT:]
        return regs, variables, stack

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

    def put(
        self, facts: _Facts, operand: Operand, value: Shape | None, old: Shape | None = None
    ) -> _Facts:
        regs, variables, stack = facts
        if isinstance(operand, Path):  # the base holds a changed structure
            base = operand.base
            before = self.shape(base, facts, -1, -1) if not isinstance(base, Mem) else None
            kept = before if before is not None and before.kind in ("object", "list") else None
            return self.put(facts, base, kept)
        if isinstance(operand, Reg):
            slot = self.slot.get(operand.index)
            if slot is not None:
                regs = (*regs[:slot], value, *regs[slot + 1 :])
        elif isinstance(operand, Name) and operand.name.lower() in self.var:
            slot = self.var[operand.name.lower()]
            variables = (*variables[:slot], value, *variables[slot + 1 :])
        return regs, variables, stack

    def check(
        self, pc: int, ins: Instruction, fx: Effects, read: Mapping[int, Shape | None]
    ) -> None:
        """Arithmetic on text, and a compare of text with a number."""
        info = OPCODE_INFO[ins.op]
        if not self.reporting:
            return
        if fx.numeric:
            for position, shape in read.items():
                if is_text(shape):
                    operand = ins.operands[position]
                    self.found.setdefault((pc, position, 0), _needs_number(ins, operand, shape))
            return
        if not info.compares or len(ins.operands) != 2:
            return
        (a, b), (sa, sb) = ins.operands, (read.get(0), read.get(1))
        for text, number, at in ((a, b, 0), (b, a, 1)):
            shape, other = (sa, sb) if at == 0 else (sb, sa)
            if is_text(shape) and is_number(other):
                message = _text_with_number(ins, text, shape, number)
                self.found.setdefault((pc, at, 0), message)
                return

    def check_arguments(self, pc: int, tool: ToolShape, given: tuple[Shape | None, ...]) -> None:
        """Each argument written in the plan (a literal, however it got to the stack) that
        the tool refuses on every run; ``given`` are the top of the stack, last parameter
        last (fewer when the bottom ones are not known)."""
        refuses = getattr(tool, "refuses", None)
        if refuses is None:
            return
        first = len(tool.params) - len(given)
        for number, shape in enumerate(given, start=first):
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

    # -- the walk ---------------------------------------------------------------------------------

    def run(self) -> dict[tuple[int, int, int], str]:
        paths = paths_of(self.flow)
        if not paths.states:
            return {}
        start: _Facts = ((INT,) * len(self.slot), (INT,) * len(self.var), ())
        facts = fixpoint(paths, start, self.transfer, _merge, MAX_TYPE_STEPS)
        if facts is None:  # out of steps: the facts are not final, so nothing is told
            return {}
        self.reporting = True
        for number, known in facts.items():
            self.transfer(paths.states[number][0], known)
        return self.found


def _literals(shape: Shape | None) -> list[tuple[Value, int]]:
    """The values ``shape`` may be, each with the line it is written on, when every one of
    them is written in the plan (``NONE`` included); else ``[]``."""
    if shape is None:
        return []
    found: list[tuple[Value, int]] = []
    for option in shape.options if shape.kind == "union" else (shape,):
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


def _mnemonic(ins: Instruction) -> str:
    words = ins.text.split(maxsplit=1)
    return words[0].upper() if words else ins.op.value


def _needs_number(ins: Instruction, operand: Operand, shape: Shape | None) -> str:
    what = describe(shape)
    hint = "a decimal is text as the tool writes it" if "decimal" in what else "it is text"
    return (
        f"{_mnemonic(ins)} needs numbers, but {operand} is {what} ({hint}); read the number "
        f"in it first: NUM R9, {operand}, then {_mnemonic(ins)} with R9"
    )


def _text_with_number(ins: Instruction, text: Operand, shape: Shape | None, number: Operand) -> str:
    return (
        f"{_mnemonic(ins)} compares {text}, which is {describe(shape)}, with {number}, a "
        "number: text is never equal to a number and has no order; compare it with text "
        f'({_mnemonic(ins)} {text}, "..."), or read the number in it first (NUM R9, {text})'
    )


def type_problems(
    flow: ControlFlow,
    layout: Layout,
    skip: frozenset[tuple[int, int]] = frozenset(),
    answers: Mapping[int, Shape] | None = None,
) -> Iterator[TypeProblem]:
    """Every path and compare the shapes of the tools' results refuse (see the module doc),
    by instruction; ``skip``: ``(instruction, operand position)`` already reported;
    ``answers``: the shape of each query's answer, by its ``CALL`` (see
    :func:`~llassembly.analysis.queries.query_sites`)."""
    tools = flow.tools.values()
    given = [_result_shapes(t) for t in tools]
    given += [(shape,) for shape in (answers or {}).values()]
    structured = any(
        shape is not None and not is_number(shape) for shapes in given for shape in shapes
    )
    asked = any(t.params and getattr(t, "refuses", None) is not None for t in tools)
    if not structured and not asked:
        return
    for (pc, position, _), message in sorted(_Types(flow, layout, answers).run().items()):
        if (pc, position) not in skip:
            yield TypeProblem(pc, position, message)
