"""The plan's own answer: ``SAY`` and its text templates.

``SAY "The warmest is {R2} at {R3} °C"`` (or ``SAY answer`` with ``answer db "..."``) adds one
line to the answer the turn ends with. A placeholder names what to put there: a register
(``{EAX}``, ``{R2}``, ``{xmm0}``), a data label or variable (``{best_city}``) or memory
(``{[table + ESI*4]}``). The parser turns each placeholder into one more operand of the
``SAY`` instruction (:func:`with_placeholders`), so the verifier and the path analysis check
them like any operand: a placeholder that names nothing is refused before the plan runs.

Braces around anything else (``{"a": 1}``, ``{}``, ``{3}``) are plain text, so JSON answers
need no escaping.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from ._access import Context, fail, getter
from ._scan import LineError, read_operand
from .program import Imm, Instruction, Name, Operand, Program, ToolShape, Value, find_tool

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._layout import Layout
    from ._state import MachineState

__all__ = [
    "MAX_ANSWER_CHARS",
    "PLACEHOLDER",
    "answer_of",
    "compile_say",
    "placeholder_problems",
    "render",
    "template_of",
    "with_placeholders",
]

Step: TypeAlias = "Callable[[MachineState, int], int]"

PLACEHOLDER = re.compile(r"\{(\[[^\[\]{}\"'\n]*\]|[A-Za-z_.$@?][\w.$@?]*)\}")
"""``{NAME}`` or ``{[memory]}``: a register, data label, variable or memory cell."""
MAX_ANSWER_CHARS = 16_000
"""Longest answer a plan may build (all its ``SAY`` lines together)."""


def render(value: Value) -> str:
    """A value as a person reads it: ints as ints, floats without binary noise, strings as
    they are.

    Example:
        >>> render(19.5), render(0.1 + 0.2), render(31.0), render(7), render("Oslo")
        ('19.5', '0.3', '31', '7', 'Oslo')
    """
    if type(value) is str:
        return value
    if type(value) is float:
        if not math.isfinite(value):  # pragma: no cover - the machine holds finite floats
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


def template_of(operand: Operand, data: Mapping[str, Value]) -> str | None:
    """The text template ``SAY operand`` says: a string literal, or a data label holding a
    string; ``None`` for anything else (a register, a number: said as its value)."""
    if isinstance(operand, Imm):
        return operand.value if isinstance(operand.value, str) else None
    if isinstance(operand, Name):
        value = data.get(operand.name.lower())
        return value if isinstance(value, str) else None
    return None


def with_placeholders(
    ins: Instruction, data: Mapping[str, Value], source_line: str
) -> tuple[Instruction, list[LineError]]:
    """``SAY`` with one operand added per placeholder of its text, and the problems found.

    Raises nothing: a placeholder that cannot be read is returned as a :class:`LineError`
    (its column in the line), so the parser reports every one.
    """
    if len(ins.operands) != 1:
        column = ins.operand_columns[1] if len(ins.operand_columns) > 1 else ins.column
        problem = LineError(
            column,
            f"SAY takes one operand, {len(ins.operands)} were given",
            'text in quotes with placeholders (SAY "It is {R1} degrees"), or a data label '
            "holding such text",
        )
        return ins, [problem]
    template = template_of(ins.operands[0], data)
    if not template:
        return ins, []
    base = ins.operand_columns[0] if ins.operand_columns else ins.column
    inline = isinstance(ins.operands[0], Imm)
    operands: list[Operand] = [ins.operands[0]]
    columns: list[int] = [base]
    problems: list[LineError] = []
    search = base - 1
    for match in PLACEHOLDER.finditer(template):
        column = base
        if inline:  # point at the placeholder itself when it is written on this line
            found = source_line.find(match.group(0), search)
            if found >= 0:
                column, search = found + 1, found + len(match.group(0))
        try:
            operands.append(read_operand(match.group(1), column - 1))
        except LineError as exc:
            message = f"cannot read {match.group(0)} in the answer: {exc.message}"
            problems.append(LineError(column, message, exc.expected))
            continue
        columns.append(column)
    if problems:
        return ins, problems
    return (
        Instruction(ins.op, tuple(operands), ins.line, ins.column, ins.text, tuple(columns)),
        [],
    )


def placeholder_problems(
    ins: Instruction,
    position: int,
    program: Program,
    tools: Mapping[str, ToolShape],
    layout: Layout,
) -> list[tuple[int, str]]:
    """What is wrong with placeholder ``position`` of a ``SAY``: ``(operand position,
    message)`` pairs. A placeholder that is no name is checked as any value operand."""
    first, operand = ins.operands[0], ins.operands[position]
    found: list[tuple[int, str]] = []
    if isinstance(first, Name) and first.name.lower() in layout.live and position == 1:
        message = (
            f"SAY {first} fills in placeholders, but the plan also writes {first}; keep the "
            "answer text in its own data label and the values elsewhere"
        )
        found.append((0, message))
    if not isinstance(operand, Name):
        return found
    key = operand.name.lower()
    if key in program.data or key in layout.variables:
        return found
    if key in program.labels:
        what = "a code label, not a value"
    elif find_tool(operand.name, tools) is not None:
        what = "a tool, not a value (CALL it and POP its result first)"
    else:
        what = "no register, data label or variable"
    message = (
        f"{{{operand.name}}} in the answer text names {what}; a placeholder names a register "
        "({R1}, {EAX}, {xmm0}), a data label or variable ({best}) or memory "
        "({[table + ESI*4]})"
    )
    return [*found, (position, message)]


def compile_say(ins: Instruction, ctx: Context) -> Step:
    """``SAY``: render its text (placeholders filled) and add it as a line of the answer."""
    template = template_of(ins.operands[0], ctx.program.data)
    fills = [getter(operand, ctx, ins) for operand in ins.operands[1:]]
    if template is None or not fills:
        whole = getter(ins.operands[0], ctx, ins)

        def say_value(st: MachineState, pc: int) -> int:
            _add(st, render(whole(st)), ins)
            return pc + 1

        return say_value
    pieces = PLACEHOLDER.split(template)[::2]  # the text around the placeholders

    def say(st: MachineState, pc: int) -> int:
        parts = [pieces[0]]
        for fill, after in zip(fills, pieces[1:], strict=True):
            parts += [render(fill(st)), after]
        _add(st, "".join(parts), ins)
        return pc + 1

    return say


def _add(st: MachineState, line: str, ins: Instruction) -> None:
    used = sum(len(x) + 1 for x in st.answer)
    if used + len(line) > MAX_ANSWER_CHARS:
        raise fail(
            ins,
            f"the answer would grow past {MAX_ANSWER_CHARS} characters; say less (a summary, "
            "not every value)",
        )
    st.answer.append(line)


def answer_of(machine: Mapping[str, Any] | None) -> str | None:
    """The answer a machine snapshot holds (its ``SAY`` lines joined), or ``None``."""
    lines = (machine or {}).get("answer")
    if not lines:
        return None
    return "\n".join(str(line) for line in lines)
