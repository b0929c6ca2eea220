"""Text with placeholders: ``SAY`` answers and string operands, and how values read in them.

``SAY "The warmest is {R2} at {R3:.1f} °C"`` (or ``SAY answer`` with ``answer db "..."``) adds
one line to the answer the turn ends with; ``PUSH "Invoice {R1} for {R2.name}"`` pushes the
text filled in. A placeholder names what to put there: a register (``{EAX}``, ``{R2}``,
``{xmm0}``), a data label or variable (``{best_city}``), memory (``{[table + ESI*4]}``) or a part
of a structured value (``{R1.items[0].title}``), with an optional format after a colon
(``{R1:.2f}``, ``{R1:,}``, ``{R1:02}``; see :func:`render`). The parser turns each placeholder
of a ``SAY`` into one more operand of the instruction (:func:`with_placeholders`), and a string
operand of any other instruction into a :class:`~llassembly.language.program.Template`
(:func:`template_operand`), so the verifier and the path analysis check them like any operand:
a placeholder that names nothing is refused before the plan runs.

Braces around anything else (``{"a": 1}``, ``{}``, ``{3}``, ``{a: 1}``) are plain text, so JSON
needs no escaping; ``{{R1}}`` is the text ``{R1}``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from llassembly.language.limits import MAX_SAY_PLACEHOLDERS
from llassembly.language.program import (
    NONE,
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Path,
    Reg,
    Template,
    Value,
)
from llassembly.language.scan import LineError, clip, read_operand, string_columns

__all__ = [
    "PLACEHOLDER",
    "render",
    "split_template",
    "template_of",
    "template_operand",
    "with_placeholders",
]

_REF = (
    r"(?:\[[^\[\]{}\"'\n]*\]|[A-Za-z_.$@?][\w.$@?]*)"  # [memory] or a name (R1, best, ...)
    r"(?:\[[^\[\]{}\n]*\][\w.$@?]*)*"  # path steps: [0], ["key"], then .name
)
_SPEC = r"[<>^]?0?\d{0,2}[,_]?(?:\.\d{1,2})?[dfeg%s]?"
PLACEHOLDER = re.compile(
    rf"\{{\{{(?P<escaped>{_REF}(?::{_SPEC})?)\}}\}}|\{{(?P<ref>{_REF})(?::(?P<spec>{_SPEC}))?\}}"
)
"""``{NAME}``, ``{[memory]}`` or ``{R1.path[0]}``, with an optional ``:format``; ``{{...}}`` is
the text ``{...}``."""


def split_template(text: str) -> tuple[list[str], list[tuple[str, str, int]]]:
    """The pieces of ``text`` around its placeholders, and each placeholder as ``(what it
    names, its format, its index in text)``; escaped ``{{...}}`` are folded into the pieces.
    Stops after :data:`MAX_SAY_PLACEHOLDERS` + 1 placeholders."""
    pieces: list[str] = []
    found: list[tuple[str, str, int]] = []
    current: list[str] = []
    last = 0
    for match in PLACEHOLDER.finditer(text):
        current.append(text[last : match.start()])
        last = match.end()
        escaped = match.group("escaped")
        if escaped is not None:
            current.append("{" + escaped + "}")
            continue
        pieces.append("".join(current))
        current = []
        found.append((match.group("ref"), match.group("spec") or "", match.start()))
        if len(found) > MAX_SAY_PLACEHOLDERS:
            break
    current.append(text[last:])
    pieces.append("".join(current))
    return pieces, found


def render(value: Value, spec: str = "") -> str:
    """A value as a person reads it: ints as ints, floats without binary noise, strings as
    they are (``NONE`` as nothing); with a format (``spec``), as Python's ``format`` writes it:
    ``.2f`` fixed decimals, ``,`` thousands separators, ``02`` zero padding to a width, ``d``
    a whole number (a float rounded), ``%`` a percentage; text takes a width and ``.N`` (its
    first N characters).

    Raises:
        ValueError: A number format for text (``{R1:.2f}`` on ``"abc"``).

    Example:
        >>> render(19.5), render(0.1 + 0.2), render(31.0), render(7), render("Oslo")
        ('19.5', '0.3', '31', '7', 'Oslo')
        >>> render(2712.5, ",.2f"), render(13, "02"), render(0.25, ".0%"), render(7.6, "d")
        ('2,712.50', '13', '25%', '8')
    """
    if spec:
        return _formatted(value, spec)
    if type(value) is str:
        return "" if value == NONE else value
    if type(value) is float:
        if not math.isfinite(value):  # pragma: no cover - the machine holds finite floats
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


def _formatted(value: Value, spec: str) -> str:
    kind = spec[-1] if spec[-1] in "dfeg%s" else ""
    if type(value) is str:
        if kind not in ("", "s") or "," in spec or "_" in spec:
            raise ValueError(f"the format {spec} is for numbers, and this is text")
        text = "" if value == NONE else value
        return format(text, spec.replace("0", "", 1) if spec[:1] == "0" else spec)
    if kind == "s":
        raise ValueError(f"the format {spec} is for text, and this is a number")
    if kind == "d" and type(value) is float:
        value = int(format(value, ".0f"))
    if kind == "" and "." in spec and type(value) is int:
        spec += "f"  # {R1:.2} on a whole number: two decimals, as on a float
    return format(value, spec)


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
    written = source_line if isinstance(ins.operands[0], Imm) else None
    read = _read_fills(template, base, written, "the answer text")
    if isinstance(read, list):
        return ins, read
    fills, _pieces, _specs, columns = read
    return (
        Instruction(
            ins.op, (ins.operands[0], *fills), ins.line, ins.column, ins.text, (base, *columns)
        ),
        [],
    )


def template_operand(
    operand: Operand, column: int, source_line: str
) -> tuple[Operand, list[LineError]]:
    """A string operand with placeholders as a :class:`Template` (any other operand as it is),
    and the problems found; ``column`` is the operand's 1-based column in ``source_line``."""
    if not isinstance(operand, Imm) or type(operand.value) is not str or "{" not in operand.value:
        return operand, []
    read = _read_fills(operand.value, column, source_line, "the text")
    if isinstance(read, list):
        return operand, read
    fills, pieces, specs, columns = read
    if not fills and len(pieces) == 1 and pieces[0] == operand.value:
        return operand, []
    if not fills:  # only escaped braces: {{R1}} is the text {R1}
        return Imm(pieces[0]), []
    return Template(operand.value, tuple(pieces), fills, specs, tuple(columns)), []


_Fill = Reg | Name | Mem | Path


def _read_fills(
    template: str, base: int, source_line: str | None, where: str
) -> tuple[tuple[_Fill, ...], list[str], tuple[str, ...], list[int]] | list[LineError]:
    """The operands a text's placeholders read, the pieces around them, their formats and
    columns; or the problems found (linear in the text and line)."""
    pieces, found = split_template(template)
    # Point at each placeholder itself when the text is written on this line.
    columns = None
    if source_line is not None:
        columns = string_columns(source_line, base - 1, [at for _, _, at in found])
    if columns is None:
        columns = [base] * len(found)
    if len(found) > MAX_SAY_PLACEHOLDERS:
        problem = LineError(
            columns[-1],
            f"{where} holds more than the {MAX_SAY_PLACEHOLDERS} placeholders one SAY may "
            "have (and one text)",
            "fewer placeholders: SAY once per item in a loop, or say a summary",
        )
        return [problem]
    fills: list[_Fill] = []
    problems: list[LineError] = []
    for (ref, spec, _), column in zip(found, columns, strict=True):
        shown = "{" + ref + (":" + spec if spec else "") + "}"
        try:
            operand = read_operand(ref, column - 1)
        except LineError as exc:
            message = f"cannot read {clip(shown)} in {where.removesuffix(' text')}: {exc.message}"
            problems.append(LineError(column, message, exc.expected))
            continue
        if not isinstance(operand, Reg | Name | Mem | Path):  # pragma: no cover - by the pattern
            problems.append(LineError(column, f"{clip(shown)} names no value", "a register"))
            continue
        fills.append(operand)
    if problems:
        return problems
    return tuple(fills), pieces, tuple(spec for _, spec, _ in found), columns
