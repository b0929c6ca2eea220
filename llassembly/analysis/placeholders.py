"""Checks of the placeholders of a ``SAY`` text (the parser made each one an operand)."""

from __future__ import annotations

from collections.abc import Mapping

from llassembly.analysis.layout import Layout
from llassembly.language.program import Instruction, Name, Program, ToolShape, find_tool

__all__ = ["placeholder_problems"]


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
