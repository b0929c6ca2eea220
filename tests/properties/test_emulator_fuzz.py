"""Property tests: whatever the plan, the emulator ends or raises one of the library's errors,
and never goes over its budgets. Plans use every instruction (x86 spellings and operand forms
included), memory operands over writable and read-only data, variables, calls that leave their
last arguments out (``CALL tool, N``) and calls whose failure the plan tests (``JC``)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from random_plans import (
    EXTERNS,
    LIMITS,
    MAX_INSTRUCTIONS,
    MAX_TOOL_CALLS,
    SETTINGS,
    check_budgets,
    compiled_or_none,
    instructions,
    programs,
    run_within_budgets,
)

from llassembly.errors import (
    LLAssemblyError,
    ToolExecutionError,
)
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator, Failed
from llassembly.machine.state import RunResult


@SETTINGS
@given(programs())
def test_random_programs_finish_or_raise_library_errors_within_budgets(source: str) -> None:
    compiled = compiled_or_none(source)
    if compiled is None:
        return
    outcome = run_within_budgets(Emulator(compiled, **LIMITS))
    if isinstance(outcome, RunResult):
        assert outcome.instructions_executed <= MAX_INSTRUCTIONS
        assert len(outcome.calls) == outcome.tool_calls <= MAX_TOOL_CALLS


def _summary(outcome: RunResult | LLAssemblyError, emu: Emulator) -> Any:
    memory = json.loads(json.dumps(emu.state.mem))
    if isinstance(outcome, RunResult):
        return ("ok", outcome.registers, outcome.stack, outcome.instructions_executed, memory)
    return (type(outcome).__name__, getattr(outcome, "line", None), memory)


@settings(SETTINGS, max_examples=300)
@given(programs(), st.integers(1, 7))
def test_stepping_through_snapshots_matches_an_uninterrupted_run(source: str, every: int) -> None:
    """Single-step, and every few steps move to a fresh emulator through a JSON snapshot: the
    outcome and the memory are the same as one uninterrupted run, and the budgets hold after
    every step."""
    compiled = compiled_or_none(source)
    if compiled is None:
        return
    whole = Emulator(compiled, **LIMITS)
    expected = _summary(run_within_budgets(whole), whole)

    emu = Emulator(compiled, **LIMITS)
    outcome: RunResult | LLAssemblyError | None = None
    steps = 0
    while outcome is None:
        try:
            call = emu.advance(max_steps=1)
            if call is not None:
                try:
                    result = EXTERNS[call.tool].call(call.args)
                except Exception as exc:
                    if not emu.tests_failure():
                        raise ToolExecutionError(call.tool, exc, line=call.line) from exc
                    result = Failed(exc)
                emu.complete(result)
            elif emu.finished:
                outcome = emu.result()
        except LLAssemblyError as exc:
            outcome = exc
        check_budgets(emu)
        steps += 1
        if steps % every == 0:
            snap = json.loads(json.dumps(emu.snapshot()))
            emu = Emulator(compiled, **LIMITS, state=snap)
        assert steps <= 2 * MAX_INSTRUCTIONS + 2 * MAX_TOOL_CALLS + 2
    assert _summary(outcome, emu) == expected


@settings(SETTINGS, max_examples=300)
@given(programs())
def test_a_snapshot_reads_every_register_the_program_writes(source: str) -> None:
    """An emulator's snapshot reads only the registers its program may write (and those it was
    given): after every step it equals the snapshot that looks at every register."""
    compiled = compiled_or_none(source)
    if compiled is None:
        return
    emu = Emulator(compiled, **LIMITS)
    for _ in range(2 * MAX_INSTRUCTIONS + 2):
        assert emu.snapshot() == emu.state.snapshot()
        try:
            call = emu.advance(max_steps=1)
            if call is not None:
                emu.complete(EXTERNS[call.tool].call(call.args))
            elif emu.finished:
                break
        except Exception:  # a failed step leaves the state where it failed: compare that
            break
    assert emu.snapshot() == emu.state.snapshot()


# --- arbitrary text --------------------------------------------------------------------------

_code_lines = st.one_of(
    instructions,
    st.sampled_from(
        [
            "loop:",
            "L0:",
            "L1: INC R1",
            "JMP L0",
            "CMP R1, 3",
            "JL L0",
            "section .data",
            "section .text",
            "x db 'a', 10, 0",
            "y dd 99999999999999999999999999",
            "global L1",
            "extern add2",
            "```asm",
            "```",
            "<think>",
            "</think>",
            "Here is the plan:",
            "MOV [R1], 2",
            "MOV dword [counts + ESI*4], 2",
            "buf resd 100000",
            "t times 5000 dd 1",
            "LEA ESI, [table + 8]",
            "MOV EAX, [ESI]",
            "DIV ECX",
            "PUSH ESP",
            "CALL add2()",
            "RET",
        ]
    ),
    st.text(max_size=20),
)


@SETTINGS
@given(st.one_of(st.text(max_size=200), st.lists(_code_lines, max_size=14).map("\n".join)))
def test_arbitrary_text_only_raises_library_errors(text: str) -> None:
    try:
        parsed = parse(text)
        if not isinstance(parsed, Program):
            return
        emu = Emulator(parsed, EXTERNS, **LIMITS)
    except LLAssemblyError:
        return
    run_within_budgets(emu)
