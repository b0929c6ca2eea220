"""Step compilers for text: the text and structure instructions (``LEN``, ``HAS``, ``KEYS``,
``FIND``, ``SUBSTR``, ``CMPI``, ``LOWER``, ``UPPER``, ``NUM``, x86's ``ROUNDSD``) and ``SAY`` (see
*Structured values* and *Text* in ``docs/language.md``).

None of them but ``CMPI`` sets the flags. Text operations read a number as the text a person
reads (``FIND R1, R2, 5`` looks for the digit), and ``NONE`` as empty text. ``SAY`` adds a line to
the plan's answer, its placeholders filled in (the parser reads the templates:
:mod:`llassembly.language.templates`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from llassembly.language.instructions import EAX_INDEX, XMM0_INDEX, Opcode
from llassembly.language.limits import INT_MAX, INT_MIN
from llassembly.language.program import Instruction, Program, Value, effects
from llassembly.language.templates import render, split_template, template_of
from llassembly.machine.access import (
    NOT_JSON,
    Context,
    fail,
    filled,
    getter,
    setter,
    show,
    structure_of,
    value_of,
)
from llassembly.machine.state import ORDERED, UNORDERED, MachineState

Step: TypeAlias = "Callable[[MachineState, int], int]"
_Compute: TypeAlias = "Callable[[MachineState, list[Value]], Value]"


def text_flags(st: MachineState, a: Value, b: Value) -> None:
    """The flags of a compare where a value is text or ``NONE``: two texts (``NONE`` reads as
    ``""``) are equal exactly and ordered by code point, as ISO dates and times sort; a number
    and a text are never equal and have no order."""
    if (type(a) is str or a is None) and (type(b) is str or b is None):
        x, y = a or "", b or ""
        st.zf, st.lt, st.flag_mode = x == y, x < y, ORDERED
    else:
        st.zf, st.lt, st.flag_mode = False, False, UNORDERED


def _text(value: Value) -> str:
    """A value read as text: text as it is (``NONE`` empty), a number as a person reads it."""
    return render(value)


def _whole(ins: Instruction, value: Value, what: str) -> int:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise fail(ins, f"{ins.mnemonic} needs a whole number for {what}, got {show(value)}")


def _produce(compute: _Compute) -> Callable[[Instruction, Context], Step]:
    """``dst = compute(state, the other operands' values)``; the flags are left as they are."""

    def compile_produce(ins: Instruction, ctx: Context) -> Step:
        put = setter(ins.operands[0], ctx, ins)
        reads = [getter(operand, ctx, ins) for operand in ins.operands[1:]]

        def step(st: MachineState, pc: int) -> int:
            put(st, compute(st, [read(st) for read in reads]))
            return pc + 1

        return step

    return compile_produce


def _with_ins(make: Callable[[Instruction], _Compute]) -> Callable[[Instruction, Context], Step]:
    """:func:`_produce` for a computation that names its instruction in its errors."""

    def compile_it(ins: Instruction, ctx: Context) -> Step:
        return _produce(make(ins))(ins, ctx)

    return compile_it


def _len(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        (value,) = values
        found = structure_of(st, value, ins)
        if found is not NOT_JSON:
            return len(found)
        if type(value) is str:
            return len(value)
        if value is None:
            return 0
        raise fail(ins, f"LEN needs a list, an object or text, got the number {show(value)}")

    return compute


def _has(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        value, key = values
        if value is None:
            return 0
        if type(value) is not str:
            raise fail(ins, f"HAS needs an object or a list, got the number {show(value)}")
        found = structure_of(st, value, ins)
        if isinstance(found, dict):
            return int(type(key) is str and found.get(key) is not None)
        if isinstance(found, list):
            index = key if type(key) is int else None
            inside = index is not None and -len(found) <= index < len(found)
            return int(inside and found[index] is not None)  # type: ignore[index]
        return 0

    return compute


def _keys(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        (value,) = values
        found = structure_of(st, value, ins)
        if isinstance(found, dict):
            return value_of(st, list(found), ins, f"KEYS {ins.operands[1]}")
        if isinstance(found, list):
            raise fail(ins, "KEYS needs an object, got a list: its elements are found by index")
        raise fail(ins, f"KEYS needs an object, got {show(value)}")

    return compute


def _find(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        text, part = values
        return _text(text).find(_text(part))

    return compute


def _substr(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        text = _text(values[0])
        start = _whole(ins, values[1], "the start")
        if start < 0:
            start = max(len(text) + start, 0)
        if len(values) == 2:
            return text[start:]
        count = _whole(ins, values[2], "the count")
        if count < 0:
            raise fail(ins, f"SUBSTR takes a count of characters, 0 or more, not {count}")
        return text[start : start + count]

    return compute


def _case(convert: Callable[[str], str]) -> Callable[[Instruction], _Compute]:
    def make(ins: Instruction) -> _Compute:
        return lambda st, values: convert(_text(values[0]))

    return make


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?\Z")  # 1,234.50


def _num(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        (value,) = values
        if type(value) is int or type(value) is float:
            return value
        text = value.strip() if type(value) is str else ""  # NONE: no number
        if _GROUPED.match(text):
            text = text.replace(",", "")
        if not _NUMBER.match(text) or len(text) > 400:
            raise fail(ins, f"NUM cannot read {show(value)} as a number")
        if re.fullmatch(r"[+-]?\d+", text):
            number = int(text)
            if not INT_MIN <= number <= INT_MAX:
                raise fail(ins, f"NUM: {show(value)} is outside the 64-bit range")
            return number
        result = float(text)
        if not math.isfinite(result):
            raise fail(ins, f"NUM: {show(value)} is too large")
        return result

    return compute


_ROUNDING: dict[int, Callable[[float], float]] = {
    0: lambda v: float(round(v)),  # to nearest, ties to even
    1: lambda v: float(math.floor(v)),
    2: lambda v: float(math.ceil(v)),
    3: lambda v: float(math.trunc(v)),
}


def _roundsd(ins: Instruction) -> _Compute:
    def compute(st: MachineState, values: list[Value]) -> Value:
        value = values[0]
        mode = _whole(ins, values[1], "the rounding mode") if len(values) > 1 else 0
        if type(value) is str or value is None:
            raise fail(ins, f"{ins.mnemonic} needs a number, got {show(value)}")
        if not 0 <= mode <= 15:
            raise fail(ins, f"{ins.mnemonic}: the rounding mode is 0 to 15, not {mode}")
        return _ROUNDING[0 if mode & 4 else mode & 3](float(value))

    return compute


def _compile_cmpi(ins: Instruction, ctx: Context) -> Step:
    """``CMP`` ignoring case: texts are equal when they are once case-folded."""
    get_a, get_b = getter(ins.operands[0], ctx, ins), getter(ins.operands[1], ctx, ins)

    def step(st: MachineState, pc: int) -> int:
        a, b = get_a(st), get_b(st)
        if type(a) is str or type(b) is str or a is None or b is None:
            text_flags(st, *(v.casefold() if type(v) is str else v for v in (a, b)))
        else:
            st.zf, st.lt, st.flag_mode = a == b, a < b, ORDERED  # type: ignore[operator]
        return pc + 1

    return step


TEXT_COMPILERS: dict[Opcode, Callable[[Instruction, Context], Step]] = {
    Opcode.LEN: _with_ins(_len),
    Opcode.HAS: _with_ins(_has),
    Opcode.KEYS: _with_ins(_keys),
    Opcode.FIND: _with_ins(_find),
    Opcode.SUBSTR: _with_ins(_substr),
    Opcode.CMPI: _compile_cmpi,
    Opcode.LOWER: _with_ins(_case(str.lower)),
    Opcode.UPPER: _with_ins(_case(str.upper)),
    Opcode.NUM: _with_ins(_num),
    Opcode.ROUNDSD: _with_ins(_roundsd),
}
"""Compilers of the structured-value and text instructions, merged into ``machine/steps.py``'s
table."""


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
