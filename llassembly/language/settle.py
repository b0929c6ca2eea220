"""What an instruction's operands mean, once every label of the plan is known.

The parser reads each operand alone (:mod:`llassembly.language.operands`); some of them mean
something else in their place or next to the plan's labels:

* the placeholders of a ``SAY`` text become more operands of the ``SAY``, and a string
  operand of any other instruction with placeholders becomes a
  :class:`~llassembly.language.program.Template` (:mod:`llassembly.language.templates`);
* ``loop.start``, ``github.search`` read as paths are a label or a tool name where a jump or
  ``CALL`` takes one, or where the whole dotted name is a label;
* ``[EBX + name]`` with no data label ``name`` is the field ``name`` of the JSON text in
  ``EBX`` (C's ``EBX->name``);
* ``NONE`` and ``NULL``, where no label has that name, are the value "no value".
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from llassembly.language.instructions import OPCODE_INFO
from llassembly.language.opcodes import Opcode
from llassembly.language.program import (
    NONE,
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Path,
    Template,
    Value,
)
from llassembly.language.scan import LineError
from llassembly.language.templates import template_operand, with_placeholders

__all__ = ["placeholders", "settle", "settled"]

_NO_VALUE_WORDS = frozenset({"none", "null"})


def settle(
    ins: Instruction, data: Mapping[str, Value], names: Set[str], line: str
) -> tuple[Instruction, list[LineError]]:
    """``ins`` with its operands settled (see the module doc), and the problems found in its
    texts; ``names`` are the plan's data and code labels, lower-cased."""
    if ins.op is Opcode.SAY:
        filled, problems = with_placeholders(ins, data, line)
        fills = tuple(settled(o, "value", names) for o in filled.operands[1:])
        operands: tuple[Operand, ...] = (*filled.operands[:1], *fills)
        columns = filled.operand_columns
    else:
        info = OPCODE_INFO[ins.op]
        kinds = info.accepts(len(ins.operands)) or info.operands
        found: list[Operand] = []
        problems = []
        for at, operand in enumerate(ins.operands):
            kind = kinds[at] if at < len(kinds) else "value"
            column = ins.operand_columns[at] if at < len(ins.operand_columns) else ins.column
            if kind == "value":
                operand, wrong = template_operand(operand, column, line)
                problems += wrong
            found.append(settled(operand, kind, names))
        operands, columns = tuple(found), ins.operand_columns
    if operands == ins.operands and columns == ins.operand_columns:
        return ins, problems
    return Instruction(ins.op, operands, ins.line, ins.column, ins.text, columns), problems


def placeholders(ins: Instruction) -> int:
    """How many placeholders the texts of ``ins`` hold."""
    if ins.op is Opcode.SAY:
        return len(ins.operands) - 1
    return sum(len(o.fills) for o in ins.operands if isinstance(o, Template))


def settled(operand: Operand, kind: str, names: Set[str]) -> Operand:
    """What one operand of kind ``kind`` means (see the module doc)."""
    dotted = isinstance(operand, Path) and isinstance(operand.base, Name)
    dotted = dotted and "[" not in str(operand)
    if dotted and (kind not in ("value", "reg") or str(operand).lower() in names):
        return Name(str(operand))
    if isinstance(operand, Mem) and operand.label is not None and kind != "mem":
        field = operand.label
        plain = operand.index is None and operand.disp == 0 and operand.base is not None
        if plain and field.lower() not in names and "." not in field:
            assert operand.base is not None
            return Path(operand.base, (Imm(field),), operand.text)
    word = operand.name.lower() if isinstance(operand, Name) and kind == "value" else ""
    if word in _NO_VALUE_WORDS and word not in names:
        return Imm(NONE)
    if isinstance(operand, Template):
        fills = tuple(settled(fill, "value", names) for fill in operand.fills)
        parts = (operand.text, operand.pieces, fills, operand.specs, operand.columns)
        return Template(*parts)  # type: ignore[arg-type]
    return operand
