"""The plan's own answer at run time: ``SAY`` adds a line, placeholders filled in.

The templates and their placeholders are read by the parser (see
:mod:`llassembly.language.templates`); here each ``SAY`` is compiled into a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from llassembly.language.instructions import EAX_INDEX, XMM0_INDEX
from llassembly.language.program import Instruction, Program, Value, effects
from llassembly.language.templates import render, split_template, template_of
from llassembly.machine.access import Context, fail, getter
from llassembly.machine.structured import filled

if TYPE_CHECKING:
    from collections.abc import Callable

    from llassembly.machine.state import MachineState

__all__ = ["MAX_ANSWER_CHARS", "answer_of", "compile_say", "final_answer_of", "returned_value"]

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
    pieces, found = split_template(template)  # the text around the placeholders
    specs = [spec for _, spec, _ in found]
    shown = [str(operand) for operand in ins.operands[1:]]

    def say(st: MachineState, pc: int) -> int:
        _add(st, filled(st, [fill(st) for fill in fills], pieces, specs, shown, ins), ins)
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


def returned_value(st: MachineState, program: Program, pc: int) -> Value | None:
    """The value a top-level ``RET`` at ``pc`` returns, by the x86 convention.

    The register, ``EAX`` or ``XMM0``, written last in the straight-line code that ends with
    this ``RET`` (back to the nearest label, jump or call); when that code writes neither,
    ``XMM0`` if it holds a float, else ``EAX``. The integer ``0`` is C's ``return 0`` (done,
    nothing to report): ``None``.
    """
    starts = set(program.labels.values())
    chosen = None
    index = pc
    while index not in starts and index > 0:
        index -= 1
        fx = effects(program.instructions[index])
        if fx.flow != "next":
            break
        if EAX_INDEX in fx.registers_written:
            chosen = EAX_INDEX
        elif XMM0_INDEX in fx.registers_written:
            chosen = XMM0_INDEX
        if chosen is not None:
            break
    if chosen is None:
        chosen = XMM0_INDEX if type(st.regs[XMM0_INDEX]) is float else EAX_INDEX
    value = st.regs[chosen]
    return None if type(value) is int and value == 0 else value


def final_answer_of(machine: Mapping[str, Any] | None) -> str | None:
    """The answer a finished plan gives, from its snapshot: what it said (``SAY``, see
    :func:`answer_of`), else the value its top-level ``RET`` returned in ``EAX`` or ``XMM0``
    (its ``"returned"`` entry, written as ``SAY`` writes a value), else ``None``."""
    said = answer_of(machine)
    if said is not None:
        return said
    returned = (machine or {}).get("returned")
    return None if returned is None else render(returned)
