"""Edges of the instructions' steps (``llassembly.machine.steps``): numbers at the ends of the
64-bit range, text that ``NUM`` cannot hold."""

from __future__ import annotations

import pytest

from llassembly import parse_program
from llassembly.errors import AsmRuntimeError
from llassembly.language.limits import INT_MAX, INT_MIN
from llassembly.machine.emulator import Emulator


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
