"""The plan's own answer at run time: ``SAY`` adds a line, placeholders filled in.

The templates and their placeholders are read by the parser (see
:mod:`llassembly.language.templates`); here each ``SAY`` is compiled into a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from llassembly.language.program import Instruction
from llassembly.language.templates import PLACEHOLDER, render, template_of
from llassembly.machine.access import Context, fail, getter

if TYPE_CHECKING:
    from collections.abc import Callable

    from llassembly.machine.state import MachineState

__all__ = ["MAX_ANSWER_CHARS", "answer_of", "compile_say"]

Step: TypeAlias = "Callable[[MachineState, int], int]"

MAX_ANSWER_CHARS = 16_000
"""Longest answer a plan may build (all its ``SAY`` lines together)."""


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
    """Add a line to the answer, within :data:`MAX_ANSWER_CHARS` (counted as lines are added,
    so a plan that says many lines costs linear time, not a sum over all lines each time)."""
    used = st.answer_size()
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
