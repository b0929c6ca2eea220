"""Compiling a verified program into step closures, one compiler per opcode.

A step takes the machine state and its own pc and returns the next pc. Every instruction is
compiled once, so the emulator's loop is a list index and a call. Which instruction is a tool call,
and where a result goes, comes from the control-flow graph (:mod:`llassembly.analysis.cfg`). Most
instructions compute a value from what they read (a :data:`Compute`; the text and structure ones:
*Structured values* and *Text* in ``docs/language.md``); ``_COMPILERS`` says which have steps of
their own.

The same steps are the plan summary's semantics (:class:`StepSemantics`, installed at import):
the summary runs an instruction whose inputs it knows by its own step, so a constant it shows
is the value the run computes.
"""

from __future__ import annotations

import math
import operator
import re
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, TypeAlias, cast

from llassembly.analysis.cfg import ControlFlow, Layout, control_flow, layout_of
from llassembly.analysis.constants import FAILS, Fails, Outcome, Run, install_semantics
from llassembly.analysis.policies import DataFlowPolicy
from llassembly.analysis.verifier import verify
from llassembly.errors import AsmRuntimeError, StackDepthExceeded, UsageError
from llassembly.language.instructions import (
    CONDITIONS,
    EAX_INDEX,
    ECX_INDEX,
    EDX_INDEX,
    OPCODE_INFO,
    XMM0_INDEX,
    Opcode,
    register_name,
)
from llassembly.language.limits import DEFAULT_MAX_STACK_DEPTH, INT_MAX, INT_MIN
from llassembly.language.program import (
    Instruction,
    Mem,
    Name,
    Operand,
    Program,
    Reg,
    Template,
    Value,
    effects,
    one_place,
)
from llassembly.language.templates import render, split_template, template_of
from llassembly.machine.access import (
    NOT_JSON,
    Context,
    address_of,
    fail,
    getter,
    place,
    setter,
    show,
    structure_of,
    value_of,
    whole_number,
)
from llassembly.machine.externs import Extern, ToolSpec, externs_of
from llassembly.machine.provenance import Guards, Step, guards_for, instrument
from llassembly.machine.state import ORDERED, UNORDERED, UNSET, MachineState

Compiler: TypeAlias = "Callable[[Instruction, Context], Step]"
Compute: TypeAlias = "Callable[..., Value]"
"""``compute(ins, state, *values read)``: what an instruction computes (what it writes, when it
writes an operand); it sets the flags itself."""


def _operands(ins: Instruction) -> tuple[Operand | None, tuple[Operand, ...]]:
    """The operand an instruction computing a value writes (``None``: only the flags; ``DIV
    src`` writes ``EAX``, its step the remainder in ``EDX``) and those it reads, as ``effects``
    says: the registers it uses without naming them first (``EAX`` of x86's ``MUL src``)."""
    fx, operands = effects(ins), ins.operands
    reads = tuple(Reg(i, register_name(i)) for i in fx.implicit_reads)
    writes = [operands[i] for i in fx.writes] or [
        Reg(i, register_name(i)) for i in fx.implicit_writes
    ]
    return (writes[0] if writes else None), reads + tuple(operands[i] for i in fx.reads)


def _computes(compute: Compute) -> Compiler:
    """The compiler of ``dst = compute(ins, state, *values read)`` (see :func:`_operands`):
    ``ADD dst, src`` reads ``dst`` and ``src``, ``LEN dst, src`` reads ``src``, ``INC dst``
    reads ``dst`` (the compute adds 1), ``CMP a, b`` reads both and writes only the flags."""

    def compile_computed(ins: Instruction, ctx: Context) -> Step:
        target, sources = _operands(ins)
        put = setter(target, ctx, ins) if target is not None else lambda st, value: None
        reads = [getter(operand, ctx, ins) for operand in sources]
        # Most read one or two values: kept to few calls (``put`` returns None: each step
        # returns ``pc + 1``).
        if len(reads) == 1:
            (first,) = reads
            return lambda st, pc: put(st, compute(ins, st, first(st))) or pc + 1
        if len(reads) == 2:
            first, second = reads
            return lambda st, pc: put(st, compute(ins, st, first(st), second(st))) or pc + 1
        return lambda st, pc: put(st, compute(ins, st, *[read(st) for read in reads])) or pc + 1

    return compile_computed


def _arithmetic(
    op: Callable[[Any, Any], Any], ins: Instruction, st: MachineState, a: Value, b: Value = 1
) -> Value:
    """``a op b`` (numbers only; ``INC dst``: ``b`` is 1) with the flags set from it: ``ADD``,
    ``SUB``, ``INC``, ``DEC`` and ``MUL``, the steps of every loop, so kept to few calls."""
    if type(a) is str or type(b) is str or a is None or b is None:
        _numbers(ins, a, b)
    result = op(a, b)
    if type(result) is not int or not INT_MIN <= result <= INT_MAX:
        _checked(ins, result)
    st.zf, st.lt, st.flag_mode = result == 0, result < 0, ORDERED
    return result  # type: ignore[no-any-return]


def _numbers(ins: Instruction, *values: Value) -> None:
    for value in values:
        if type(value) is str or value is None:
            shown = " and ".join(show(v) for v in values)
            words = f"{ins.mnemonic} needs numbers, and an operand holds text or NONE"
            raise fail(ins, f"{ins.mnemonic} needs numbers, got {shown}", words)


def _ints(ins: Instruction, *values: Value) -> None:
    if any(type(v) is not int for v in values):
        shown = " and ".join(show(v) for v in values)
        raise fail(
            ins,
            f"{ins.mnemonic} needs whole numbers, got {shown} (bit operations are defined on "
            "integers only)",
        )


def _flagged(st: MachineState, result: Value) -> Value:
    """``result`` (a number), the flags set from it (zero? negative?)."""
    st.zf, st.lt, st.flag_mode = result == 0, result < 0, ORDERED  # type: ignore[operator]
    return result


def _checked(ins: Instruction, result: int | float) -> int | float:
    """A result within the machine's numbers: a 64-bit integer or a finite float."""
    if type(result) is int:
        if not INT_MIN <= result <= INT_MAX:
            raise fail(ins, f"{ins.mnemonic} overflowed the 64-bit integer range", plain=True)
    elif not math.isfinite(result):
        raise fail(ins, f"{ins.mnemonic} gave a non-finite number ({result})")
    return result


# -- arithmetic, division, compares -----------------------------------------------------------


def _divide(ins: Instruction, a: Value, b: Value) -> tuple[int | float, int | float]:
    """Quotient and remainder as x86 ``IDIV`` gives them: truncated toward zero, the
    remainder with the sign of the dividend; with a float, the exact quotient and ``fmod``."""
    _numbers(ins, a, b)
    if b == 0:
        raise fail(ins, f"{ins.mnemonic}: division by zero", plain=True)
    if type(a) is int and type(b) is int:
        quotient = abs(a) // abs(b) * (-1 if (a < 0) != (b < 0) else 1)
        return _checked(ins, quotient), a - quotient * b
    return _checked(ins, a / b), math.fmod(a, b)  # type: ignore[operator,arg-type]


def _quotient(ins: Instruction, st: MachineState, a: Value, b: Value) -> Value:
    quotient, remainder = _divide(ins, a, b)
    if len(ins.operands) == 1:  # DIV src: EAX = EAX / src, EDX = the remainder
        st.regs[EDX_INDEX] = remainder
    return _flagged(st, quotient)


def _compare(ins: Instruction, st: MachineState, a: Value, b: Value) -> None:
    """``CMP``: two numbers are ordered as numbers; two texts (``NONE`` reads as ``""``) are
    equal exactly and ordered by code point, as ISO dates and times sort; a number and a text
    are never equal and have no order."""
    a_text, b_text = type(a) is str or a is None, type(b) is str or b is None
    if a_text and b_text:
        a, b = a or "", b or ""
    elif a_text or b_text:
        st.zf, st.lt, st.flag_mode = False, False, UNORDERED
        return
    st.zf, st.lt, st.flag_mode = a == b, a < b, ORDERED  # type: ignore[operator]


def _compare_folded(ins: Instruction, st: MachineState, a: Value, b: Value) -> None:
    """``CMPI``: ``CMP`` ignoring case (texts are equal when they are once case-folded)."""
    _compare(ins, st, *(v.casefold() if type(v) is str else v for v in (a, b)))


# -- bit logic and shifts ---------------------------------------------------------------------


def _bitwise(
    op: Callable[[int, int], int], ins: Instruction, st: MachineState, *values: Value
) -> Value:
    if not values:  # XOR r, r reads nothing (see effects): 0, whatever r held
        return _flagged(st, 0)
    _ints(ins, *values)
    return _flagged(st, op(*values))  # type: ignore[arg-type]


def _not(ins: Instruction, st: MachineState, value: Value) -> Value:
    _ints(ins, value)
    return ~value  # type: ignore[operator]  # NOT leaves the flags as they are, as on x86


def _neg(ins: Instruction, st: MachineState, value: Value) -> Value:
    _numbers(ins, value)
    return _flagged(st, _checked(ins, -value))  # type: ignore[operator]


def _test(ins: Instruction, st: MachineState, a: Value, b: Value) -> None:
    if one_place(*ins.operands):
        if type(a) is str or a is None:  # TEST r, r on text: is it empty (NONE is)?
            st.zf, st.lt, st.flag_mode = not a, False, UNORDERED
        else:  # TEST r, r on a number: zero? negative?
            _flagged(st, a)
        return
    _ints(ins, a, b)
    _flagged(st, a & b)  # type: ignore[operator]


def _shift(
    op: Callable[[int, int], int], ins: Instruction, st: MachineState, a: Value, count: Value = 1
) -> Value:
    _ints(ins, a)
    if type(count) is not int or not 0 <= count <= 63:
        raise fail(ins, f"{ins.mnemonic} shifts by 0 to 63 bits, not {show(count)}")
    return _flagged(st, _checked(ins, op(a, count)))  # type: ignore[arg-type]


def _shr(a: int, n: int) -> int:
    """Logical shift: the 64-bit pattern of ``a`` shifted in zeros (a negative ``a`` shifted by
    at least one bit becomes a large positive number, as on x86)."""
    return a >> n if a >= 0 or n == 0 else (a & 0xFFFF_FFFF_FFFF_FFFF) >> n


# -- floating point ---------------------------------------------------------------------------


def _sse(
    op: Callable[[float, float], float], ins: Instruction, st: MachineState, a: Value, b: Value
) -> Value:
    """SSE arithmetic: on floats, the flags left as they are (as on x86)."""
    _numbers(ins, a, b)
    try:
        return _checked(ins, op(float(a), float(b)))  # type: ignore[arg-type]
    except ZeroDivisionError:
        raise fail(ins, f"{ins.mnemonic}: division by zero", plain=True) from None


def _convert(
    op: Callable[[Any], Value], ins: Instruction, st: MachineState, source: Value
) -> Value:
    """``dst = op(src)``: conversions and square roots, the flags left as they are."""
    _numbers(ins, source)
    try:
        return _checked(ins, op(source))  # type: ignore[arg-type]
    except (OverflowError, ValueError):
        raise fail(ins, f"{ins.mnemonic} cannot convert {show(source)}") from None


_ROUNDING: tuple[Callable[[float], int], ...] = (round, math.floor, math.ceil, math.trunc)
"""By the rounding mode: to nearest (ties to even), down, up, toward zero."""


def _roundsd(ins: Instruction, st: MachineState, value: Value, mode: Value = 0) -> Value:
    mode = _whole(ins, mode, "the rounding mode")
    if type(value) is str or value is None:
        raise fail(ins, f"{ins.mnemonic} needs a number, got {show(value)}")
    if not 0 <= mode <= 15:
        raise fail(ins, f"{ins.mnemonic}: the rounding mode is 0 to 15, not {mode}")
    return float(_ROUNDING[0 if mode & 4 else mode & 3](float(value)))


# -- text and structures ----------------------------------------------------------------------
# None of them but CMPI sets the flags. Text operations read a number as the text a person
# reads (FIND R1, R2, 5 looks for the digit), and NONE as empty text (templates.render).


def _whole(ins: Instruction, value: Value, what: str) -> int:
    if (whole := whole_number(value)) is None:
        raise fail(ins, f"{ins.mnemonic} needs a whole number for {what}, got {show(value)}")
    return whole


def _len(ins: Instruction, st: MachineState, value: Value) -> Value:
    found = structure_of(st, value, ins)
    if found is not NOT_JSON:
        return len(found)
    if type(value) is str:
        return len(value)
    if value is None:
        return 0
    raise fail(ins, f"LEN needs a list, an object or text, got the number {show(value)}")


def _has(ins: Instruction, st: MachineState, value: Value, key: Value) -> Value:
    if value is None:
        return 0
    if type(value) is not str:
        raise fail(ins, f"HAS needs an object or a list, got the number {show(value)}")
    found = structure_of(st, value, ins)
    if isinstance(found, dict):
        return int(type(key) is str and found.get(key) is not None)
    if isinstance(found, list):
        index = whole_number(key)  # (as a path reads it: 1.0 is element 1)
        return int(
            index is not None and -len(found) <= index < len(found) and found[index] is not None
        )
    return 0


def _keys(ins: Instruction, st: MachineState, value: Value) -> Value:
    found = structure_of(st, value, ins)
    if isinstance(found, dict):
        return value_of(st, list(found), ins, f"KEYS {ins.operands[1]}")
    if isinstance(found, list):
        raise fail(ins, "KEYS needs an object, got a list: its elements are found by index")
    raise fail(ins, f"KEYS needs an object, got {show(value)}")


def _substr(
    ins: Instruction, st: MachineState, whole: Value, first: Value, *length: Value
) -> Value:
    text = render(whole)
    start = _whole(ins, first, "the start")
    if start < 0:
        start = max(len(text) + start, 0)
    if not length:
        return text[start:]
    count = _whole(ins, length[0], "the count")
    if count < 0:
        raise fail(ins, f"SUBSTR takes a count of characters, 0 or more, not {count}")
    return text[start : start + count]


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?\Z")  # 1,234.50


def _num(ins: Instruction, st: MachineState, value: Value) -> Value:
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


MAX_ANSWER_CHARS = 16_000
"""Longest answer a plan may build (all its ``SAY`` lines together)."""


def _compile_say(ins: Instruction, ctx: Context) -> Step:
    """``SAY``: render its text (placeholders filled) and add it as a line of the answer,
    within :data:`MAX_ANSWER_CHARS` (counted as lines are added, so a plan that says many
    lines costs linear time, not a sum over all lines each time)."""
    said, fills = ins.operands[0], cast("tuple[Any, ...]", ins.operands[1:])
    template = template_of(said, ctx.program.data)
    if template is not None and fills:  # its placeholders (the parser's) filled as a template's
        pieces, found = split_template(template)  # the text around the placeholders
        said = Template(template, tuple(pieces), fills, tuple(spec for _, spec, _ in found))
    read = getter(said, ctx, ins)

    def say(st: MachineState, pc: int) -> int:
        line = render(read(st))
        if st.answer_size() + len(line) > MAX_ANSWER_CHARS:
            raise fail(
                ins,
                f"the answer would grow past {MAX_ANSWER_CHARS} characters; say less (a summary, "
                "not every value)",
            )
        st.answer.append(line)
        return pc + 1

    return say


# -- moves, the stack, the flags tested, jumps and subroutines --------------------------------


def _compile_conditional(ins: Instruction, ctx: Context) -> Step:
    """A jump, ``SETcc`` or ``CMOVcc``: the flags are checked first (set, and set by a compare
    with an order, not of a number with text, when the condition asks for an order)."""
    info = OPCODE_INFO[ins.op]
    ordered, taken, name = info.ordered, CONDITIONS[info.condition], ins.mnemonic

    def holds(st: MachineState) -> bool:
        mode = st.flag_mode
        if mode != ORDERED and (ordered or mode == UNSET):
            if mode == UNSET:
                raise fail(ins, f"{name} before any CMP or arithmetic set the flags", plain=True)
            raise fail(
                ins,
                f"{name} needs an ordered compare, but the last CMP compared a number with text "
                "(or TEST tested a text), which have no order: only JE/JNE may follow",
            )
        return taken(st.zf, st.lt)

    if info.flow == "branch":  # Jcc
        target = _target(ins.operands[0], ctx)

        def jump(st: MachineState, pc: int) -> int:
            if st.flag_mode != ORDERED:  # (only then may the flags be refused: see holds)
                holds(st)
            return target if taken(st.zf, st.lt) else pc + 1

        return jump
    put = setter(ins.operands[0], ctx, ins)
    get = getter(ins.operands[1], ctx, ins) if info.moves else None

    def write(st: MachineState, pc: int) -> int:
        if get is None:  # SETcc: 1 or 0
            put(st, 1 if holds(st) else 0)
        elif holds(st):  # CMOVcc: the source, when the condition holds
            put(st, get(st))
        return pc + 1

    return write


def _target(operand: Operand, ctx: Context) -> int:
    if not isinstance(operand, Name):
        raise UsageError(f"jump target {operand} is not a label (was the program verified?)")
    return ctx.program.labels[operand.name.lower()]


def _room(st: MachineState, limit: int, ins: Instruction) -> None:
    """Refuse one more value on the stacks (data and return addresses) past ``limit``."""
    depth = len(st.stack) + len(st.calls)
    if depth >= limit:
        raise StackDepthExceeded(limit, depth + 1, line=ins.line, source=ins.text)


def _popped(ins: Instruction, st: MachineState) -> Value:
    """``POP dst``: the value on top of the stack, taken off it."""
    if not st.stack:
        raise fail(ins, "POP on an empty stack", plain=True)
    return st.stack.pop()


def _compile_own(ins: Instruction, ctx: Context) -> Step:
    """The steps that compute no value: ``JMP``, ``LOOP``, ``CALL`` of a subroutine (a tool
    ``CALL`` is the run loop's own), ``RET``, ``HLT``, ``NOP``, ``PUSH``, ``XCHG`` and ``LEA``."""
    end, limit, program, op = ctx.end, ctx.max_stack_depth, ctx.program, ins.op
    if op is Opcode.NOP:
        return lambda st, pc: pc + 1
    if op is Opcode.XCHG:
        first, second = ins.operands
        get_a, at_a = getter(first, ctx, ins), place(first, ctx, ins)
        get_b, at_b = getter(second, ctx, ins), place(second, ctx, ins)

        def xchg(st: MachineState, pc: int) -> int:
            a, b = get_a(st), get_b(st)
            put_a, put_b = at_a(st), at_b(st)  # (both places before either write)
            put_a(b)
            put_b(a)
            return pc + 1

        return xchg
    if op is Opcode.LEA:
        mem = ins.operands[1]
        if not isinstance(mem, Mem):
            raise fail(ins, "LEA needs a memory operand (was the program verified?)", plain=True)
        address, put = address_of(mem, ctx, ins), setter(ins.operands[0], ctx, ins)
        return lambda st, pc: put(st, address(st)) or pc + 1
    if op is Opcode.PUSH:
        get = getter(ins.operands[0], ctx, ins)

        def push(st: MachineState, pc: int) -> int:
            _room(st, limit, ins)
            st.stack.append(get(st))
            return pc + 1

        return push
    target = _target(ins.operands[0], ctx) if ins.operands else end
    if op is Opcode.JMP or op is Opcode.HLT:
        return lambda st, pc: target
    if op is Opcode.CALL:

        def call(st: MachineState, pc: int) -> int:
            _room(st, limit, ins)
            st.calls.append(pc + 1)
            return target

        return call
    if op is Opcode.RET:

        def ret(st: MachineState, pc: int) -> int:
            if st.calls:
                return st.calls.pop()
            st.returned = returned = _returned(st, program, pc)  # the x86 return value
            if not st.answer and returned is not None and len(render(returned)) > MAX_ANSWER_CHARS:
                raise fail(  # (it is the answer then: as long as SAY may make one)
                    ins, f"the value returned, the answer, has over {MAX_ANSWER_CHARS} characters"
                )
            return end

        return ret

    def loop(st: MachineState, pc: int) -> int:
        count = st.regs[ECX_INDEX]
        if type(count) is not int:
            raise fail(ins, f"LOOP counts down ECX, which holds {show(count)}, not a whole number")
        if count == INT_MIN:
            raise fail(ins, "LOOP overflowed the 64-bit integer range", plain=True)
        st.regs[ECX_INDEX] = count = count - 1
        return target if count != 0 else pc + 1

    return loop


def _returned(st: MachineState, program: Program, pc: int) -> Value | None:
    """The value a top-level ``RET`` at ``pc`` returns, by the x86 convention.

    The register, ``EAX`` or ``XMM0``, written last in the straight-line code up to this ``RET``
    (back to the nearest label, jump or call); when that code writes neither, ``XMM0`` if it holds a
    float, else ``EAX``. The integer ``0`` is C's ``return 0`` (done, nothing to report): ``None``.
    """
    starts, index, chosen = set(program.labels.values()), pc, None
    while chosen is None and index not in starts and index > 0:
        index -= 1
        fx = effects(program.instructions[index])
        if fx.info.flow != "next":
            break
        written = fx.registers_written
        chosen = next((r for r in (EAX_INDEX, XMM0_INDEX) if r in written), None)
    if chosen is None:
        chosen = XMM0_INDEX if type(st.regs[XMM0_INDEX]) is float else EAX_INDEX
    value = st.regs[chosen]
    return None if type(value) is int and value == 0 else value


_COMPILERS: dict[Opcode, Compiler] = {
    Opcode.MOV: _computes(lambda ins, st, value: value),
    Opcode.POP: _computes(_popped),
    Opcode.ADD: _computes(partial(_arithmetic, operator.add)),
    Opcode.SUB: _computes(partial(_arithmetic, operator.sub)),
    Opcode.MUL: _computes(partial(_arithmetic, operator.mul)),
    Opcode.INC: _computes(partial(_arithmetic, operator.add)),
    Opcode.DEC: _computes(partial(_arithmetic, operator.sub)),
    Opcode.CMP: _computes(_compare),
    Opcode.SAY: _compile_say,
    Opcode.DIV: _computes(_quotient),
    Opcode.MOD: _computes(lambda ins, st, a, b: _flagged(st, _divide(ins, a, b)[1])),
    Opcode.AND: _computes(partial(_bitwise, operator.and_)),
    Opcode.OR: _computes(partial(_bitwise, operator.or_)),
    Opcode.XOR: _computes(partial(_bitwise, operator.xor)),
    Opcode.NOT: _computes(_not),
    Opcode.NEG: _computes(_neg),
    Opcode.TEST: _computes(_test),
    Opcode.SHL: _computes(partial(_shift, operator.lshift)),
    Opcode.SHR: _computes(partial(_shift, _shr)),
    Opcode.SAR: _computes(partial(_shift, operator.rshift)),
    Opcode.CVTSI2SD: _computes(partial(_convert, float)),
    Opcode.CVTTSD2SI: _computes(partial(_convert, int)),
    Opcode.CVTSD2SI: _computes(partial(_convert, lambda v: round(float(v)))),
    Opcode.ADDSD: _computes(partial(_sse, operator.add)),
    Opcode.SUBSD: _computes(partial(_sse, operator.sub)),
    Opcode.MULSD: _computes(partial(_sse, operator.mul)),
    Opcode.DIVSD: _computes(partial(_sse, operator.truediv)),
    Opcode.SQRTSD: _computes(partial(_convert, math.sqrt)),
    Opcode.MINSD: _computes(partial(_sse, min)),
    Opcode.MAXSD: _computes(partial(_sse, max)),
    Opcode.ROUNDSD: _computes(_roundsd),
    Opcode.LEN: _computes(_len),
    Opcode.HAS: _computes(_has),
    Opcode.KEYS: _computes(_keys),
    Opcode.FIND: _computes(lambda ins, st, text, part: render(text).find(render(part))),
    Opcode.SUBSTR: _computes(_substr),
    Opcode.CMPI: _computes(_compare_folded),
    Opcode.LOWER: _computes(lambda ins, st, value: render(value).lower()),
    Opcode.UPPER: _computes(lambda ins, st, value: render(value).upper()),
    Opcode.NUM: _computes(_num),
    **{op: _compile_conditional for op, info in OPCODE_INFO.items() if info.condition},
    Opcode.PUSH: _compile_own,
    Opcode.XCHG: _compile_own,
    Opcode.LEA: _compile_own,
    Opcode.JMP: _compile_own,
    Opcode.LOOP: _compile_own,
    Opcode.CALL: _compile_own,
    Opcode.RET: _compile_own,
    Opcode.HLT: _compile_own,
    Opcode.NOP: _compile_own,
}


@dataclass(frozen=True, slots=True)
class CompiledProgram:
    """A verified program compiled for one set of tools and one stack limit; reusable.

    An :class:`Emulator` given a different ``max_stack_depth`` recompiles the steps (without
    verifying again), since the stack limit is baked into the ``PUSH`` and ``CALL`` steps.
    """

    program: Program
    steps: tuple[Step | None, ...]
    tools: tuple[Extern | None, ...]
    externs: Mapping[str, Extern]
    flow: ControlFlow
    """The control-flow graph the program was compiled from (tool calls, jump targets, the
    EAX convention, the calls the plan tests, loops): see :mod:`llassembly.analysis.cfg`."""
    layout: Layout
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH
    dataflow: Guards | None = None
    """The data-flow policies checked before each call (``None``: none; the steps then keep
    no provenance): see :mod:`llassembly.machine.provenance`."""
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What is worked out from the program once, on first use, for every run (see
    the emulator's read checks)."""


def compile_step(ins: Instruction, ctx: Context) -> Step:
    """The step of one instruction (a tool ``CALL`` has none: the run loop makes the call)."""
    return _COMPILERS[ins.op](ins, ctx)


def _compile_steps(
    program: Program,
    externs: Mapping[str, Extern],
    max_stack_depth: int,
    dataflow: Sequence[DataFlowPolicy] = (),
) -> CompiledProgram:
    flow = control_flow(program, externs)
    # The graph was built from these externs: its tools are externs.
    tools = [cast("Extern | None", flow.tools.get(pc)) for pc in range(len(program.instructions))]
    layout = layout_of(program, externs)
    ctx = Context(program, len(program.instructions), max_stack_depth, layout)
    guards = guards_for(flow, externs, dataflow) if dataflow else None
    # With data-flow policies, each step keeps the sources of what it writes.
    make = compile_step if guards is None else lambda i, c: instrument(compile_step(i, c), i, c)
    steps = [
        None if tool is not None else make(ins, ctx)
        for ins, tool in zip(program.instructions, tools, strict=True)
    ]
    found = (program, tuple(steps), tuple(tools), externs, flow, layout)
    return CompiledProgram(*found, max_stack_depth, guards)


def recompiled(
    compiled: CompiledProgram, max_stack_depth: int, dataflow: tuple[DataFlowPolicy, ...] = ()
) -> CompiledProgram:
    """``compiled`` for another stack limit or other data-flow policies (``()``: the ones it
    has), compiled again without verifying; itself when neither changes."""
    kept = compiled.dataflow.policies if compiled.dataflow is not None else ()
    if compiled.max_stack_depth == max_stack_depth and dataflow in ((), kept):
        return compiled
    return _compile_steps(compiled.program, compiled.externs, max_stack_depth, dataflow or kept)


def compile_program(
    program: Program,
    externs: ToolSpec,
    *,
    max_stack_depth: int,
    dataflow: Sequence[DataFlowPolicy] = (),
) -> CompiledProgram:
    """Verify ``program`` and compile it for the tools ``externs`` (a list or a mapping of tools, as
    every public function takes them: :data:`~llassembly.machine.externs.ToolSpec`), with the
    data-flow policies its calls are checked against (see :mod:`llassembly.machine.provenance`).

    Raises:
        PlanRejected: The program does not verify.
        UsageError: ``externs`` is no toolset (see :func:`~llassembly.machine.externs.externs_of`),
            or a data-flow policy names a tool or an argument they do not have.
    """
    by_name = externs_of(externs, param="externs")
    verify(program, by_name)
    return _compile_steps(program, by_name, max_stack_depth, tuple(dataflow))


# -- the same steps for the plan summary ------------------------------------------------------


# Put in a register an instruction says it writes: still there after it, it did not.
_NOT_WRITTEN: Any = object()


class StepSemantics:
    """The summary's semantics (:class:`llassembly.analysis.constants.Semantics`): one
    instruction run by its own compiled step on a scratch state holding the known values, so
    the constants a person approves are computed exactly as the run computes them."""

    initial_flags: Hashable = (False, False, UNSET)

    def runner(self, flow: ControlFlow, layout: Layout) -> Run:
        """Run instructions of ``flow``'s program alone (see
        :data:`~llassembly.analysis.constants.Run`): steps compiled on first use, no stack limit,
        a scratch memory that no step run here reads (the summary runs none that reads memory the
        plan writes)."""
        ctx = Context(flow.program, flow.end, sys.maxsize, layout)
        step_at = cache(lambda pc: compile_step(flow.program.instructions[pc], ctx))
        scratch = layout.initial_memory()
        parsed: dict[str, Any] = {}  # (the texts read, parsed once for every instruction)

        def run(
            pc: int, registers: Mapping[int, Value], flags: Hashable, taken: Sequence[Value]
        ) -> Outcome | Fails | None:
            fx = flow.effects[pc]
            # The compilers expect a verified plan; the summary of one that does not verify
            # still returns, so any error here but the step's own means "cannot tell".
            try:
                step = step_at(pc)
                st = MachineState(pc=pc, stack=list(taken), mem=scratch)
                st.parsed = parsed
                for reg in fx.registers_written:
                    st.regs[reg] = _NOT_WRITTEN
                for reg, value in registers.items():
                    st.regs[reg] = value
                if isinstance(flags, tuple):
                    st.zf, st.lt, st.flag_mode = flags
                next_pc = step(st, pc)
            except AsmRuntimeError:
                return FAILS  # it fails on these values, as the run would
            except Exception:  # an instruction the checks would refuse
                return None
            written = {reg: st.regs[reg] for reg in fx.registers_written}
            if any(value is _NOT_WRITTEN for value in written.values()):
                return None
            flags_after = (st.zf, st.lt, st.flag_mode) if fx.flags_written else None
            return Outcome(written, flags_after, tuple(st.stack), next_pc)

        return run


install_semantics(StepSemantics())
