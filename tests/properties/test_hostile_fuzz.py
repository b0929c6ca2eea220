"""Property tests with hostile input: large and deeply nested programs, replies built from
every shape the parser's bounds are for (spaces in brackets, huge numbers, deep brackets, many
labels, data cells and placeholders, long strings, unicode, rows that read themselves), and
tool results that no well-behaved tool returns (huge integers, NaN, deep JSON and models,
objects whose ``str`` raises, objects that are not data).

Whatever comes in, only the library's own errors come out and each names its line, every run
stays within its budgets and builds nothing past its limits, its state stays plain data a
checkpointer can store, and a plan the verifier accepted never fails at run time with a fault
the verifier is documented to catch. Sizes stay near 100 KB to keep the run short; the 1 MB
worst cases are measured by ``benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import math
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel
from random_plans import EXTERNS, LIMITS, MAX_STACK, instructions, programs

from llassembly.errors import ExecutionError, LLAssemblyError, PlanError
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.language.limits import MAX_DATA_TEXT_CHARS
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from
from llassembly.machine.steps import compile_program

SETTINGS = settings(
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
_SERDE = JsonPlusSerializer()

# Run-time faults the verifier is documented to catch before the run ("Checks before the run").
_STATIC_FAULTS = (
    "POP on an empty stack",
    "values on the stack, found",
    "before any CMP or arithmetic set the flags",
)


class _Opaque:
    """Not data: no JSON, a repr only."""

    def __repr__(self) -> str:
        return "<opaque>"


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


class _Unprintable:
    """Not data, and its ``str`` and ``repr`` raise (a broken third-party type)."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __repr__(self) -> str:
        raise KeyError("no repr")


class _Node(BaseModel):
    child: Any = None


class _Colour(enum.Enum):
    RED = "red"
    DEEP = "deep"


def _deep_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def _deep_model(depth: int) -> Any:
    value = _Node()
    for _ in range(depth):
        value = _Node(child=value)
    return value


hostile_results = st.one_of(
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**400, 2**20000, -(10**5000)]),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308 * 10]),
    st.integers(100, 5000).map(_deep),
    st.integers(100, 5000).map(_deep_dict),
    st.integers(10, 1500).map(_deep_model),
    st.sampled_from([{"a": math.nan}, [1, math.inf], {"big": 2**64}, {1, 2}, b"bytes"]),
    st.sampled_from([_Colour.RED, datetime.date(2024, 2, 29), [], {"type": "text"}, {(1, 2): 3}]),
    st.builds(_Opaque),
    st.builds(_Unprintable),
    st.builds(lambda: [_Unprintable()]),
    st.sampled_from([None, True, (), (1,), (1, 2, 3), "x" * 100_000, "é漢🙂" * 50_000]),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)


def _names_a_line(error: LLAssemblyError) -> None:
    """The library's errors on hostile input point at the plan: a plan error at each of its
    problems, an execution error at the instruction that failed."""
    if isinstance(error, PlanError):
        assert error.diagnostics and all(d.line >= 1 for d in error.diagnostics), error
        assert "line " in str(error), error
    else:
        assert isinstance(error, ExecutionError), repr(error)
        assert error.line >= 1 and f"line {error.line}" in str(error), error


def _oracle_tools(result: Any) -> list[Any]:
    """Tools of every declared return shape that all return ``result``."""

    def as_int() -> int:
        return result  # type: ignore[no-any-return]

    def as_float() -> float:
        return result  # type: ignore[no-any-return]

    def as_str() -> str:
        return result  # type: ignore[no-any-return]

    def as_pair() -> tuple[int, int]:
        return result  # type: ignore[no-any-return]

    def as_dict() -> dict[str, Any]:
        return result  # type: ignore[no-any-return]

    def untyped():  # type: ignore[no-untyped-def]
        return result

    def takes_float(x: float) -> float:
        return x

    def takes_list(items: list[Any]) -> int:
        return len(items)

    return [as_int, as_float, as_str, as_pair, as_dict, untyped, takes_float, takes_list]


_ORACLES = ["as_int", "as_float", "as_str", "as_pair", "as_dict", "untyped"]


@SETTINGS
@given(hostile_results, st.sampled_from(_ORACLES), st.sampled_from(["takes_float", "takes_list"]))
def test_hostile_tool_results_end_in_library_errors_with_storable_state(
    result: Any, oracle: str, consumer: str
) -> None:
    plan = f"CALL {oracle}\nPOP R1\nPUSH R1\nCALL {consumer}\nPOP R2"
    tools = _oracle_tools(result)
    emulator = Emulator(parse(plan), tools, **LIMITS)
    try:
        emulator.run()
    except LLAssemblyError as error:  # only the library's errors may come out
        _names_a_line(error)
        assert len(str(error)) < 2000
    snapshot = emulator.snapshot()
    restored = _SERDE.loads_typed(_SERDE.dumps_typed(snapshot))
    Emulator(emulator.compiled, **LIMITS, state=restored)  # the stored state restores


@st.composite
def large_programs(draw: st.DrawFn) -> str:
    """Hundreds of random instructions, repeated blocks, subroutines and deep nesting."""
    block = draw(st.lists(instructions, min_size=1, max_size=12))
    repeat = draw(st.integers(1, 150))
    body = block * repeat
    if draw(st.booleans()):
        depth = draw(st.integers(1, 40))  # subroutines calling each other, deeper than usual
        subs = [f"s{i}: CALL s{i + 1}\nRET" for i in range(depth)] + [f"s{depth}: RET"]
        body = ["CALL s0", *body, "HLT", *subs]
    if draw(st.booleans()):
        body.insert(0, 'PUSH "' + "[" * draw(st.integers(1000, 20000)) + '"')
    return "\n".join(body)


@SETTINGS
@given(st.one_of(large_programs(), programs()))
def test_large_and_nested_programs_are_checked_and_run_within_budgets(source: str) -> None:
    turn = Planner(PlannerOptions(execution="agent", max_stack_depth=MAX_STACK))
    try:
        parsed = turn.check(source, EXTERNS)
    except LLAssemblyError:
        return  # refused before the run: fine
    if not isinstance(parsed, Program):
        return
    emulator = Emulator(turn.compiled(source, EXTERNS), **LIMITS)
    try:
        emulator.run()
    except LLAssemblyError as error:
        assert not any(fault in str(error) for fault in _STATIC_FAULTS), (
            f"the verifier accepted a plan that then failed with: {error}"
        )
    state = emulator.state
    assert state.executed <= LIMITS["max_instructions_to_exec"]
    assert state.tool_calls <= LIMITS["max_tool_calls"]
    assert len(state.stack) + len(state.calls) <= MAX_STACK


@SETTINGS
@given(programs())
def test_an_accepted_plan_never_fails_with_a_fault_the_verifier_catches(source: str) -> None:
    try:
        parsed = parse(source)
        if not isinstance(parsed, Program):
            return
        compiled = compile_program(
            parsed, externs_from(list(EXTERNS.values())), max_stack_depth=MAX_STACK
        )
    except LLAssemblyError:
        return
    try:
        Emulator(compiled, **LIMITS).run()
    except LLAssemblyError as error:
        assert not any(fault in str(error) for fault in _STATIC_FAULTS), (
            f"the verifier accepted a plan that then failed with: {error}"
        )


@st.composite
def hostile_memory(draw: st.DrawFn) -> str:
    """Data and memory operands at sizes no plan needs: huge ``times``/``resX`` counts, many
    rows, thousands of memory operands, deeply bracketed or unclosed junk."""
    count = draw(st.sampled_from([1, 4096, 4097, 65536, 65537, 10**9, 10**30]))
    rows = draw(st.integers(1, 300))
    word = draw(st.sampled_from(["resd", "resq", "resb", "times {} dd 1, 2", "times {} db 0"]))
    data = [
        f"d{i} " + (word.format(count) if "{}" in word else f"{word} {count}") for i in range(rows)
    ]
    operand = draw(
        st.sampled_from(
            [
                "[d0 + ESI*4 + 8]",
                "dword [d0]",
                "[ESI]",
                "[d0 + " + " + ".join(["4"] * 500) + "]",
                "[" * draw(st.integers(1, 20000)) + "d0" + "]" * draw(st.integers(0, 20000)),
                "QWORD PTR " * 200 + "[d0]",
                "[d0 + EAX*4 + ESI + ECX]",
            ]
        )
    )
    uses = min(draw(st.integers(1, 3000)), 500_000 // len(operand))  # replies up to about 1 MB
    code = [f"MOV EAX, {operand}", "INC dword [d0]"] * max(uses, 1)
    return "\n".join(["section .bss", *data, "section .text", *code])


@settings(SETTINGS, max_examples=25)
@given(hostile_memory())
def test_hostile_memory_is_handled_in_bounded_time_and_memory(source: str) -> None:
    """Memory is measured; time is bounded by the run's instruction budget (counted here) and
    the parser's linear work (the worst times of parse + verify on hostile replies up to 1 MB
    are measured by benchmarks/bench_hostile.py)."""
    tracemalloc.start()  # the parser is where data would be built: its memory is measured
    try:
        parsed = parse(source)
    except LLAssemblyError:
        parsed = None  # refused: fine, as long as it is the library's error
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 100 * 2**20
    if isinstance(parsed, Program):
        with contextlib.suppress(LLAssemblyError):
            emulator = Emulator(parsed, [], **LIMITS)
            try:
                emulator.run()
            finally:
                assert emulator.state.executed <= LIMITS["max_instructions_to_exec"]


# -- hostile plan text: every shape the bounds are for ----------------------------------------

_UNICODE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40
)


@st.composite
def hostile_piece(draw: st.DrawFn) -> str:
    """One hostile piece of a reply, up to about 100 KB (the 1 MB sizes are measured by
    benchmarks/bench_hostile.py)."""
    k = draw(st.integers(1, 25_000))
    small = draw(st.integers(1, 600))
    kind = draw(st.integers(0, 13))
    if kind == 0:  # spaces inside [...]
        return f"MOV R1, [t{' ' * k}+{' ' * k}ESI*4]"
    if kind == 1:  # huge numbers of every form
        digits = draw(
            st.sampled_from(["0x" + "f" * k, "1" * k + ".5", "1e" + "9" * k, "-" + "9" * k])
        )
        return f"PUSH {digits}"
    if kind == 2:  # deep brackets
        return "MOV R1, " + "[" * k + "t" + "]" * draw(st.integers(0, k))
    if kind == 3:  # many labels, on one line or on many
        return "a: " * k + "NOP" if draw(st.booleans()) else "".join(f"l{i}:\n" for i in range(k))
    if kind == 4:  # many data cells, or text repeated past its limit
        word = draw(st.sampled_from(["dd 1, ", "times 65536 db 'ab', ", "times 9 equ 1, "]))
        return f"section .data\nd{k} {word}" + "1, " * min(k, 9000) + "1\nsection .text"
    if kind == 5:  # many placeholders, in one SAY or in many
        text = draw(st.sampled_from(["{R1}", "{t}", "{[t + ESI*4]}", "{nowhere}", "{[x\\t+ +]}"]))
        if draw(st.booleans()):
            return f'SAY "{text * small}"'
        return "\n".join([f'SAY "{text * 200}"'] * (small // 20 + 1))
    if kind == 6:  # long strings with escapes, and unicode
        unit = draw(_UNICODE).replace("\\", "/").replace('"', "'").replace("\n", " ")
        return 'PUSH "' + (unit + '\\"\\\\') * (k // len(unit) + 1) + '"\nPOP R2'
    if kind == 7:  # a row naming a long string many times
        return (
            f"section .rodata\ns db '{'x' * k}'\nrow times {small} dd s\nsection .text\nMOV R3, row"
        )
    if kind == 8:  # a writable row that reads and rewrites itself
        loop = "MOV ECX, 60\nagain: MOV R1, row\nMOV [row], R1\nLOOP again"
        return "section .data\nrow dd 1, 'ab'\nsection .text\n" + loop
    if kind == 9:  # think blocks, prose and unicode around code
        return f"<think>{draw(_UNICODE) * small}</think>\n{draw(_UNICODE)}\n"
    if kind == 10:  # many short lines
        return "NOP\n" * k
    if kind == 11:  # a long answer in a loop
        return "MOV ECX, 200\nsay: SAY 'round {ECX} of the loop'\nLOOP say"
    if kind == 12:  # calls and their results
        return "CALL name\nPOP R1\nPUSH R1\nCALL echo\nPOP R2\nPUSH 4\nCALL echo\nPOP R4"
    return "t dd 1, 2, 3\nMOV ESI, 1\nMOV R5, [t + ESI*4]\nMOV R6, t"


@st.composite
def hostile_replies(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(hostile_piece(), min_size=1, max_size=4))
    body = "\n".join(pieces)
    return f"Plan:\n```asm\n{body}\n```" if draw(st.booleans()) else body


@settings(SETTINGS, max_examples=60)
@given(hostile_replies())
def test_hostile_replies_are_refused_or_run_with_only_the_librarys_errors(source: str) -> None:
    """Parse, check, compile and run: every error is the library's own and names its line;
    the parser's memory stays bounded and the run stays within its budgets."""
    tracemalloc.start()
    try:
        parsed = parse(source)
    except LLAssemblyError as error:
        _names_a_line(error)
        return
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 100 * 2**20
    if not isinstance(parsed, Program):
        return
    assert all(
        len(v) <= max(MAX_DATA_TEXT_CHARS, len(source))
        for v in parsed.data.values()
        if isinstance(v, str)
    )
    emulator: Emulator | None = None
    try:
        compiled = compile_program(parsed, EXTERNS, max_stack_depth=MAX_STACK)
        emulator = Emulator(compiled, **LIMITS)
        emulator.run()
    except LLAssemblyError as error:
        _names_a_line(error)
    if emulator is not None:
        # Nothing the plan built is longer than the limit (its own literals aside).
        state, longest = emulator.state, max(MAX_DATA_TEXT_CHARS, len(source))
        held = [*state.regs, *state.stack, *(c for cells in state.mem.values() for c in cells)]
        assert all(len(v) <= longest for v in held if isinstance(v, str))
        assert state.executed <= LIMITS["max_instructions_to_exec"]
        assert sum(len(line) + 1 for line in state.answer) <= 16_001
