"""The text of a plan's answer: ``SAY`` templates, their placeholders, and how values read.

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

from llassembly.language.limits import MAX_SAY_PLACEHOLDERS
from llassembly.language.program import Imm, Instruction, Name, Operand, Value
from llassembly.language.scan import LineError, clip, read_operand, string_columns

__all__ = ["PLACEHOLDER", "render", "template_of", "with_placeholders"]

PLACEHOLDER = re.compile(r"\{(\[[^\[\]{}\"'\n]*\]|[A-Za-z_.$@?][\w.$@?]*)\}")
"""``{NAME}`` or ``{[memory]}``: a register, data label, variable or memory cell."""


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
    (its column in the line), so the parser reports every one. A text with more than
    :data:`MAX_SAY_PLACEHOLDERS` placeholders is refused at the first one past the limit.
    Linear in the length of the text and of the line.
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
    matches = []
    for match in PLACEHOLDER.finditer(template):
        matches.append(match)
        if len(matches) > MAX_SAY_PLACEHOLDERS:
            break
    # Point at each placeholder itself when the text is written on this line.
    columns = None
    if isinstance(ins.operands[0], Imm):
        columns = string_columns(source_line, base - 1, [m.start() for m in matches])
    if columns is None:
        columns = [base] * len(matches)
    if len(matches) > MAX_SAY_PLACEHOLDERS:
        problem = LineError(
            columns[-1],
            f"this answer text holds more than the {MAX_SAY_PLACEHOLDERS} placeholders one "
            "SAY may have",
            "fewer placeholders: SAY once per item in a loop, or say a summary",
        )
        return ins, [problem]
    operands: list[Operand] = [ins.operands[0]]
    problems: list[LineError] = []
    for match, column in zip(matches, columns, strict=True):
        try:
            operands.append(read_operand(match.group(1), column - 1))
        except LineError as exc:
            message = f"cannot read {clip(match.group(0))} in the answer: {exc.message}"
            problems.append(LineError(column, message, exc.expected))
    if problems:
        return ins, problems
    return (
        Instruction(ins.op, tuple(operands), ins.line, ins.column, ins.text, (base, *columns)),
        [],
    )
