"""Property tests with hostile input: large and deeply nested programs, and tool results that
no well-behaved tool returns (huge integers, NaN, deep JSON, objects that are not data).

Whatever comes in, only the library's own errors come out, every run stays within its budgets,
its state stays plain data a checkpointer can store, and a plan the verifier accepted never
fails at run time with a fault the verifier is documented to catch.
"""

from __future__ import annotations

import contextlib
import math
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from test_emulator_fuzz import EXTERNS, LIMITS, MAX_STACK, instructions, programs

from llassembly.errors import LLAssemblyError
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import (
    Emulator,
    compile_program,
)
from llassembly.machine.externs import externs_from

_SETTINGS = settings(
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


hostile_results = st.one_of(
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**400, 2**20000, -(10**5000)]),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308 * 10]),
    st.integers(100, 5000).map(_deep),
    st.sampled_from([{"a": math.nan}, [1, math.inf], {"big": 2**64}, {1, 2}, b"bytes"]),
    st.builds(_Opaque),
    st.sampled_from([None, True, (), (1,), (1, 2, 3), "x" * 100_000]),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)


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


@_SETTINGS
@given(hostile_results, st.sampled_from(_ORACLES), st.sampled_from(["takes_float", "takes_list"]))
def test_hostile_tool_results_end_in_library_errors_with_storable_state(
    result: Any, oracle: str, consumer: str
) -> None:
    plan = f"CALL {oracle}\nPOP R1\nPUSH R1\nCALL {consumer}\nPOP R2"
    tools = _oracle_tools(result)
    emulator = Emulator(parse(plan), tools, **LIMITS)
    with contextlib.suppress(LLAssemblyError):  # only the library's errors may come out
        emulator.run()
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


@_SETTINGS
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


@_SETTINGS
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


@settings(_SETTINGS, max_examples=25)
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
