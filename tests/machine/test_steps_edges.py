"""Edges of the instructions' steps (``llassembly.machine.steps``): numbers at the ends of the
64-bit range, text that ``NUM`` cannot hold."""

from __future__ import annotations

from typing import Any

import pytest

from llassembly import parse_program, summarize, verify
from llassembly.analysis.cfg import ControlFlow, Layout
from llassembly.analysis.constants import FAILS, Outcome, Run
from llassembly.errors import AsmRuntimeError, PlanRejected
from llassembly.language.instructions import register_index
from llassembly.language.limits import INT_MAX, INT_MIN
from llassembly.machine.emulator import Emulator
from llassembly.machine.state import ORDERED
from llassembly.machine.steps import StepSemantics, compile_program


def registers(plan: str) -> dict[str, object]:
    return Emulator(parse_program(plan)).run().registers


def test_num_refuses_digits_outside_the_64_bit_range() -> None:
    plan = 'MOV EAX, "99999999999999999999"\nNUM EBX, EAX'
    with pytest.raises(AsmRuntimeError, match=r"line 2: NUM: '9+' is outside the 64-bit range"):
        registers(plan)


def test_num_refuses_a_float_too_large_to_hold() -> None:
    with pytest.raises(AsmRuntimeError, match=r"line 2: NUM: '1e999' is too large"):
        registers('MOV EAX, "1e999"\nNUM EBX, EAX')


def test_num_reads_the_ends_of_the_64_bit_range() -> None:
    plan = f'MOV EAX, "{INT_MIN}"\nNUM EBX, EAX\nMOV ECX, "{INT_MAX}"\nNUM EDX, ECX'
    found = registers(plan)
    assert (found["EBX"], found["EDX"]) == (INT_MIN, INT_MAX)


def test_loop_counts_down_to_the_least_64_bit_integer() -> None:
    """``ECX`` one above the least integer: ``LOOP`` leaves the least, a number a register
    holds (it was refused as an overflow)."""
    plan = f"MOV ECX, {INT_MIN + 1}\nLOOP done\ndone: NOP"
    assert registers(plan)["ECX"] == INT_MIN


def test_loop_past_the_least_64_bit_integer_fails_and_leaves_ecx_as_it_was() -> None:
    program = parse_program(f"MOV ECX, {INT_MIN}\nagain: LOOP again")
    emulator = Emulator(program)
    with pytest.raises(AsmRuntimeError, match=r"line 2: LOOP overflowed the 64-bit integer range"):
        emulator.run()
    snapshot = emulator.snapshot()
    assert snapshot["registers"]["ECX"] == INT_MIN
    Emulator(program, state=snapshot)  # a state a run leaves is one it takes back


# -- the steps as the summary's semantics --------------------------------------------------------


def restart(service: str) -> bool:
    """Restart a service."""
    return True


class Recorded(StepSemantics):
    """The machine's semantics, keeping what each instruction run alone gave."""

    def __init__(self) -> None:
        self.outcomes: dict[int, object] = {}

    def runner(self, flow: ControlFlow, layout: Layout) -> Run:
        run = super().runner(flow, layout)

        def recorded(*asked: Any) -> Any:
            self.outcomes[asked[0]] = outcome = run(*asked)
            return outcome

        return recorded


def outcomes(plan: str) -> dict[int, object]:
    semantics = Recorded()
    summarize(parse_program(plan), [restart], semantics=semantics)
    return semantics.outcomes


def test_an_instruction_that_fails_on_its_known_values_fails_in_the_summary() -> None:
    found = outcomes(f'MOV EAX, {INT_MAX}\nADD EAX, 1\nPUSH "a"\nCALL restart')
    assert found[1] is FAILS


@pytest.mark.parametrize(
    ("plan", "pc", "outcome"),
    [
        ('MOV EBX, 1\nLEA EAX, EBX\nPUSH "a"\nCALL restart', 1, FAILS),  # the LEA's own error
        ('MOV EAX, 1\nCMP EAX, 1\nJE EAX\nPUSH "a"\nCALL restart', 2, None),  # no step: cannot tell
        (
            'section .rodata\nro dd 5\nsection .text\nPUSH 1\nPOP ro\nPUSH "a"\nCALL restart',
            1,
            None,  # a destination no step writes: cannot tell
        ),
    ],
    ids=["lea-of-a-register", "branch-to-a-register", "pop-into-read-only-data"],
)
def test_the_summary_of_a_plan_that_does_not_verify_runs_what_it_can(
    plan: str, pc: int, outcome: object
) -> None:
    """The steps expect a verified plan; the summary of one that is not still returns."""
    program = parse_program(plan)
    with pytest.raises(PlanRejected):
        verify(program, [restart])
    assert outcomes(plan)[pc] is outcome


def test_a_register_the_step_says_it_writes_but_did_not_is_not_an_outcome() -> None:
    """``CMOVE`` not taken leaves ``ECX``; asked without ``ECX``'s value (the summary gives
    every register read, so only a caller of the runner does this), there is no outcome."""
    plan = "MOV EBX, 1\nCMP EBX, 2\nCMOVE ECX, EBX\nPUSH ECX\nCALL restart"
    compiled = compile_program(parse_program(plan), [restart], max_stack_depth=64)
    run = StepSemantics().runner(compiled.flow, compiled.layout)
    ebx, ecx = register_index("EBX"), register_index("ECX")
    assert run(2, {ebx: 1}, (False, False, ORDERED), []) is None
    taken = run(2, {ebx: 1}, (True, False, ORDERED), [])
    assert isinstance(taken, Outcome) and taken.registers == {ecx: 1}
    assert run(2, {ebx: 1, ecx: 7}, (False, False, ORDERED), ()) == Outcome({ecx: 7}, None, (), 3)


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (  # the cell the register addressed before the swap
            "section .bss\ncells resq 50\nsection .text\nMOV ESI, 42\n"
            "XCHG ESI, [cells + ESI*8]\nMOV R1, [cells + 42*8]\nMOV R2, [cells]",
            {"ESI": 0, "R1": 42, "R2": 0},
        ),
        (  # the same, the memory operand first
            "section .bss\ncells resq 50\nsection .text\nMOV ESI, 42\n"
            "XCHG [cells + ESI*8], ESI\nMOV R1, [cells + 42*8]\nMOV R2, [cells]",
            {"ESI": 0, "R1": 42, "R2": 0},
        ),
        (  # a path keyed by the register swapped
            "MOV R2, '[5, 0, 7]'\nMOV ESI, 2\nXCHG ESI, R2[ESI]",
            {"ESI": 7, "R2": "[5,0,2]"},
        ),
    ],
    ids=["register-first", "memory-first", "path"],
)
def test_xchg_finds_both_places_before_it_writes_either(
    plan: str, expected: dict[str, object]
) -> None:
    """As x86 does: ``XCHG ESI, [cells + ESI*8]`` swaps ESI with the cell ESI addressed
    before the swap, whichever operand comes first."""
    found = registers(plan)
    assert {name: found.get(name, 0) for name in expected} == expected


def test_a_returned_value_is_held_to_the_answer_s_length_as_say_is() -> None:
    """A plan that says nothing answers with the value its ``RET`` returns, so that value is
    held to the length ``SAY`` lines are (16,000 characters), at the ``RET``."""
    grow = 'MOV R1, "x"\nMOV ECX, 15\nagain:\nMOV R1, "{R1}{R1}"\nLOOP again\n'
    with pytest.raises(AsmRuntimeError, match=r"line 7: the value returned, the answer, has over"):
        Emulator(parse_program(grow + "MOV EAX, R1\nRET")).run()
    short = Emulator(parse_program('MOV R1, "x"\nMOV EAX, R1\nRET')).run()
    assert short.returned == "x"
