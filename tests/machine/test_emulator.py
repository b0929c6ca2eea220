"""The emulator, instruction by instruction, against ``docs/language.md``."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.errors import GraphInterrupt
from pydantic import BaseModel, Field

import llassembly.machine.emulator as emulator_module
from llassembly.errors import (
    AsmRuntimeError,
    InstructionBudgetExceeded,
    PlanRejected,
    StackDepthExceeded,
    ToolArgumentError,
    ToolCallBudgetExceeded,
    ToolExecutionError,
    UsageError,
    WallClockExceeded,
)
from llassembly.language.instructions import Opcode
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from
from llassembly.machine.state import MachineState, RunResult, ToolCall
from llassembly.machine.steps import CompiledProgram, compile_program

# --- helpers ---------------------------------------------------------------------------------


def program(source: str) -> Program:
    parsed = parse(source)
    assert isinstance(parsed, Program), parsed
    return parsed


def emulator(source: str, tools: Any = (), **limits: Any) -> Emulator:
    return Emulator(program(source), tools, **limits)


def run(source: str, tools: Any = (), **limits: Any) -> RunResult:
    return emulator(source, tools, **limits).run()


def regs(source: str, tools: Any = (), **limits: Any) -> dict[str, Any]:
    return run(source, tools, **limits).registers


def flags(source: str) -> tuple[bool, bool, str]:
    emu = emulator(source, [echo])
    emu.run()
    snap = emu.snapshot()["flags"]
    return snap["zf"], snap["lt"], snap["mode"]


# --- tools -----------------------------------------------------------------------------------


def echo(value):  # type: ignore[no-untyped-def]  # no annotation: the check cannot tell its kind
    return value


LOG: list[tuple[str, dict[str, Any]]] = []


def make_one_step(x: int, y: int) -> int:
    """Return 10*x + y so the argument order is visible."""
    LOG.append(("make_one_step", {"x": x, "y": y}))
    return 10 * x + y


def split(n: int) -> tuple[int, int]:
    """Return (tens, units)."""
    return n // 10, n % 10


def record(message: str, value: int) -> None:
    """Return nothing."""
    LOG.append(("record", {"message": message, "value": value}))


def city() -> str:
    return "Paris"


def inc(x: int) -> int:
    return x + 1


def boom(x: int) -> int:
    raise ValueError(f"boom {x}")


def interrupt() -> int:
    raise GraphInterrupt(())


class Point(BaseModel):
    x: int
    y: int


def norm1(p: Point) -> int:
    return abs(p.x) + abs(p.y)


def wrong_arity() -> tuple[int, int]:
    return (1, 2, 3)  # type: ignore[return-value]


TOOLS = [make_one_step, split, record, city, inc, boom, interrupt, norm1, wrong_arity]


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    LOG.clear()


# --- MOV, PUSH, POP, registers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("operand", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        ("0x1F", 31),
        ("3.5", 3.5),
        ("-0.25", -0.25),
        ("1e3", 1000.0),
        ('"Paris"', "Paris"),
        ("'MiXeD case'", "MiXeD case"),
        (r'"a\tb\n"', "a\tb\n"),
    ],
)
def test_mov_immediate(operand: str, value: Any) -> None:
    result = regs(f"MOV R1, {operand}")
    assert result == {"R1": value}
    assert type(result["R1"]) is type(value)


def test_mov_register_to_register() -> None:
    assert regs("MOV R2, 'x'\nMOV R1, R2") == {"R1": "x", "R2": "x"}


def test_mov_data_labels_string_number_json_equ() -> None:
    source = """
section .rodata
    greeting db "Hello, World", 0
    limit dd 10
    ratio: dq 0.5
    point db {"x": 1, "y": 2}
    size equ 3
section .text
    MOV R1, greeting
    MOV R2, limit
    MOV R3, ratio
    MOV R4, point
    MOV R5, size
"""
    assert regs(source) == {
        "R1": "Hello, World",
        "R2": 10,
        "R3": 0.5,
        "R4": '{"x":1,"y":2}',
        "R5": 3,
    }


def test_all_registers_start_at_zero_and_r100_and_x86_names_work() -> None:
    assert regs("MOV R100, 1\nMOV EBP, 2\nMOV R3, R99") == {"R100": 1, "EBP": 2}


def test_push_pop_is_last_in_first_out() -> None:
    assert regs("PUSH 1\nPUSH 'two'\nPUSH 3.0\nPOP R1\nPOP R2\nPOP R3") == {
        "R1": 3.0,
        "R2": "two",
        "R3": 1,
    }


def test_push_register_and_data_label() -> None:
    source = "section .data\nname db 'Oslo', 0\nsection .text\nMOV R1, 5\nPUSH R1\nPUSH name"
    assert run(source).stack == [5, "Oslo"]


def test_r0_reads_zero_after_a_write() -> None:
    assert regs("MOV R0, 5\nMOV R1, R0\nADD R0, 7\nMOV R2, R0") == {}


def test_pop_r0_discards_the_value() -> None:
    result = run("PUSH 1\nPUSH 2\nPOP R0\nPOP R1\nMOV R2, R0")
    assert result.registers == {"R1": 1}
    assert result.stack == []


def test_r0_is_not_in_the_snapshot() -> None:
    emu = emulator("MOV R0, 5")
    emu.run()
    assert "R0" not in emu.snapshot()["registers"]


@pytest.mark.parametrize(("e", "r"), [("EAX", "RAX"), ("EBX", "RBX"), ("ebp", "rbp")])
def test_exx_and_rxx_are_the_same_register(e: str, r: str) -> None:
    result = regs(f"MOV {e}, 7\nADD {r}, 1\nMOV R1, {e}")
    assert result["R1"] == 8
    assert result[e.upper()] == 8


def test_register_names_are_case_insensitive() -> None:
    assert regs("mov r1, 2\nmov eax, r1") == {"R1": 2, "EAX": 2}


# --- arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("MOV R1, 7\nADD R1, 5", 12),
        ("MOV R1, 7\nSUB R1, 10", -3),
        ("MOV R1, 7\nMUL R1, 6", 42),
        ("MOV R1, 7\nIMUL R1, -2", -14),
        ("MOV R1, 7\nINC R1", 8),
        ("MOV R1, 7\nDEC R1", 6),
        ("MOV R1, 2\nMOV R2, 3\nADD R1, R2", 5),
    ],
)
def test_int_arithmetic_gives_int(source: str, expected: int) -> None:
    value = regs(source)["R1"]
    assert value == expected
    assert type(value) is int


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("MOV R1, 7\nADD R1, 0.5", 7.5),
        ("MOV R1, 1.5\nADD R1, 2", 3.5),
        ("MOV R1, 1.5\nSUB R1, 2", -0.5),
        ("MOV R1, 2\nMUL R1, 1.25", 2.5),
        ("MOV R1, 2.0\nMUL R1, 3", 6.0),
        ("MOV R1, 0.5\nINC R1", 1.5),
        ("MOV R1, 0.5\nDEC R1", -0.5),
    ],
)
def test_arithmetic_with_a_float_gives_float(source: str, expected: float) -> None:
    value = regs(source)["R1"]
    assert value == expected
    assert type(value) is float


@pytest.mark.parametrize(
    "source",
    [
        "MOV R1, 'a'\nADD R1, 1",
        "MOV R1, 1\nADD R1, 'a'",
        "MOV R1, 'a'\nSUB R1, 'b'",
        "MOV R1, 'a'\nMUL R1, 2",
        "MOV R1, 'a'\nINC R1",
        "MOV R1, 'a'\nDEC R1",
    ],
)
def test_arithmetic_on_a_string_in_the_program_is_rejected_before_the_run(source: str) -> None:
    with pytest.raises(PlanRejected, match="needs numbers") as info:
        run(source)
    assert {d.line for d in info.value.diagnostics} == {2}


def test_arithmetic_on_a_string_from_a_tool_returning_str_is_rejected_before_the_run() -> None:
    with pytest.raises(PlanRejected, match="needs numbers") as info:
        run("CALL city\nPOP R1\nINC R1", TOOLS)
    assert [d.line for d in info.value.diagnostics] == [3]


def untyped_city():  # type: ignore[no-untyped-def]  # no annotation: the verifier cannot tell
    return "Paris"


@pytest.mark.parametrize("op", ["ADD R1, 1", "MUL R1, 2", "INC R1", "DEC R1"])
def test_arithmetic_on_a_string_of_unknown_type_is_a_runtime_error_with_the_line(op: str) -> None:
    with pytest.raises(AsmRuntimeError, match="needs numbers") as info:
        run(f"CALL untyped_city\nPOP R1\n{op}", [untyped_city])
    assert info.value.line == 3
    assert info.value.source == op
    assert "line 3" in str(info.value)


@pytest.mark.parametrize(
    "source",
    [
        "MOV R1, 9223372036854775807\nINC R1",
        "MOV R1, -9223372036854775808\nDEC R1",
        "MOV R1, 4294967296\nMUL R1, 4294967296",
        "MOV R1, 9223372036854775807\nADD R1, R1",
        "MOV R1, -9223372036854775807\nSUB R1, 10",
    ],
)
def test_int_overflow_past_64_bits_is_an_error(source: str) -> None:
    with pytest.raises(AsmRuntimeError, match="overflowed") as info:
        run(source)
    assert info.value.line == 2


def test_largest_64_bit_int_is_fine() -> None:
    assert regs("MOV R1, 9223372036854775806\nINC R1") == {"R1": 2**63 - 1}


def test_float_overflow_to_infinity_is_an_error() -> None:
    with pytest.raises(AsmRuntimeError, match="non-finite"):
        run("MOV R1, 1e308\nMUL R1, 10")


def _huge() -> int:
    """A tool result beyond 64 bits: refused where it arrives, before any arithmetic."""
    return 2**20000 - 1


def test_a_huge_int_result_is_refused_at_its_call_not_in_later_arithmetic() -> None:
    with pytest.raises(AsmRuntimeError, match="integer of 20000 bits outside") as info:
        Emulator(parse("CALL _huge\nPOP R1\nMUL R1, 1.5"), [_huge]).run()
    assert info.value.line == 1


# --- flags -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "zf", "lt", "mode"),
    [
        ("1", "2", False, True, "ordered"),
        ("2", "2", True, False, "ordered"),
        ("3", "2", False, False, "ordered"),
        ("1.5", "2.5", False, True, "ordered"),
        ("2.5", "2.5", True, False, "ordered"),
        ("1", "1.0", True, False, "ordered"),
        ("1.0", "1", True, False, "ordered"),
        ("1", "1.5", False, True, "ordered"),
        ("-5", "-3", False, True, "ordered"),
        ("-3", "-5", False, False, "ordered"),
        ("-1", "0", False, True, "ordered"),
        ("'abc'", "'abc'", True, False, "ordered"),
        ("'abc'", "'ABC'", False, False, "ordered"),  # by code point: "B" < "b"
        ("'a'", "'b'", False, True, "ordered"),
        ("'2024-03-05'", "'2024-11-01'", False, True, "ordered"),  # ISO dates sort as text
        ("'10:30'", "'9:15'", False, True, "ordered"),  # text, not time: write 09:15
        ("NONE", "''", True, False, "ordered"),
        ("NONE", "'a'", False, True, "ordered"),
        ("'1'", "1", False, False, "unordered"),
        ("1", "'1'", False, False, "unordered"),
        ("0", "''", False, False, "unordered"),
    ],
)
def test_cmp_flags(a: str, b: str, zf: bool, lt: bool, mode: str) -> None:
    assert flags(f"PUSH {a}\nCALL echo\nPOP R1\nMOV R2, {b}\nCMP R1, R2") == (zf, lt, mode)


@pytest.mark.parametrize(
    ("source", "zf", "lt"),
    [
        ("MOV R1, 1\nDEC R1", True, False),
        ("MOV R1, 0\nDEC R1", False, True),
        ("MOV R1, 0\nINC R1", False, False),
        ("MOV R1, 2\nSUB R1, 2.0", True, False),
        ("MOV R1, 2\nMUL R1, 0", True, False),
        ("MOV R1, -2\nADD R1, 1", False, True),
    ],
)
def test_arithmetic_sets_flags_from_the_result(source: str, zf: bool, lt: bool) -> None:
    assert flags(source) == (zf, lt, "ordered")


def test_mov_push_pop_do_not_touch_flags() -> None:
    assert flags("CMP 1, 2\nMOV R1, 5\nPUSH 1\nPOP R2") == (False, True, "ordered")


def test_cmp_accepts_immediates_on_both_sides() -> None:
    assert flags("CMP 3, 3") == (True, False, "ordered")


# --- jumps -----------------------------------------------------------------------------------

# (mnemonic, a, b, taken) for every conditional jump and alias.
_JUMPS: list[tuple[str, str, str, bool]] = []
for _names, _rule in (
    (("JE", "JZ"), lambda a, b: a == b),
    (("JNE", "JNZ"), lambda a, b: a != b),
    (("JL", "JLT", "JB"), lambda a, b: a < b),
    (("JLE", "JBE"), lambda a, b: a <= b),
    (("JG", "JGT", "JA"), lambda a, b: a > b),
    (("JGE", "JAE"), lambda a, b: a >= b),
):
    for _mnemonic in _names:
        for _a, _b in ((1, 2), (2, 2), (3, 2), (-1, 0.5), (1, 1.0)):
            _JUMPS.append((_mnemonic, str(_a), str(_b), _rule(_a, _b)))


@pytest.mark.parametrize(("mnemonic", "a", "b", "taken"), _JUMPS)
def test_conditional_jumps(mnemonic: str, a: str, b: str, taken: bool) -> None:
    source = f"MOV R1, {a}\nCMP R1, {b}\n{mnemonic} yes\nMOV R2, 1\nHLT\nyes: MOV R2, 2"
    assert regs(source)["R2"] == (2 if taken else 1)


@pytest.mark.parametrize(
    ("mnemonic", "a", "b", "taken"),
    [
        ("JE", "'x'", "'x'", True),
        ("JZ", "'x'", "'X'", False),
        ("JNE", "'x'", "'X'", True),
        ("JNZ", "'x'", "'x'", False),
        ("JE", "'1'", "1", False),
        ("JNE", "1", "'1'", True),
    ],
)
def test_equality_jumps_work_after_a_string_compare(
    mnemonic: str, a: str, b: str, taken: bool
) -> None:
    source = (
        f"PUSH {a}\nCALL echo\nPOP R1\nCMP R1, {b}\n{mnemonic} yes\nMOV R2, 1\nHLT\nyes: MOV R2, 2"
    )
    assert regs(source, [echo])["R2"] == (2 if taken else 1)


@pytest.mark.parametrize(
    "mnemonic", ["JL", "JLT", "JB", "JLE", "JBE", "JG", "JGT", "JA", "JGE", "JAE"]
)
def test_ordered_jump_after_a_string_compare_from_a_tool_is_a_runtime_error(
    mnemonic: str,
) -> None:
    def anything():  # type: ignore[no-untyped-def]  # no return type: the check cannot tell
        return "Paris"

    source = f"CALL anything\nPOP R1\nCMP R1, R2\n{mnemonic} done\nNOP\ndone: HLT"
    emu = emulator(source, [*TOOLS, anything])  # the verifier cannot see the string: it passes
    with pytest.raises(AsmRuntimeError, match="ordered compare") as info:
        emu.run()
    assert info.value.line == 4


def test_a_str_result_compared_with_a_number_is_rejected_before_the_run() -> None:
    with pytest.raises(PlanRejected) as info:
        emulator("CALL city\nPOP R1\nCMP R1, 5\nJL done\nNOP\ndone: HLT", TOOLS)
    assert [d.line for d in info.value.diagnostics] == [3]
    assert "CMP compares R1, which is text, with 5, a number: text is never equal to a number" in (
        info.value.diagnostics[0].message
    )


def test_strings_are_ordered_and_a_number_and_a_string_are_not() -> None:
    assert regs("CMP 'apple', 'pear'\nJL done\nMOV R1, 1\ndone: HLT") == {}
    assert regs("CMPI 'Pear', 'apple'\nSETG R2\nCMOVL R3, R2") == {"R2": 1}
    with pytest.raises(AsmRuntimeError, match="compared a number with text"):
        run("PUSH 5\nCALL echo\nPOP R1\nCMP R1, 'x'\nJL done\ndone: HLT", [echo])


@pytest.mark.parametrize("mnemonic", ["JE", "JNZ", "JL", "JGE"])
def test_conditional_jump_before_any_flags_is_rejected_before_the_run(mnemonic: str) -> None:
    with pytest.raises(PlanRejected, match="tests the flags") as info:
        run(f"MOV R1, 1\n{mnemonic} done\nNOP\ndone: HLT")
    assert [d.line for d in info.value.diagnostics] == [2]


def test_jmp_skips_code() -> None:
    assert regs("JMP over\nMOV R1, 1\nover: MOV R2, 2") == {"R2": 2}


def test_dec_jnz_loop() -> None:
    result = run("MOV ECX, 5\nloop: ADD R1, 2\nDEC ECX\nJNZ loop")
    assert result.registers == {"R1": 10}
    assert result.instructions_executed == 1 + 5 * 3


def test_counting_loop_with_jl() -> None:
    assert regs("MOV R1, 0\nloop: INC R1\nCMP R1, 10\nJL loop") == {"R1": 10}


def test_jump_to_a_label_at_the_very_end_ends_the_program() -> None:
    result = run("JMP end\nMOV R1, 1\nend:")
    assert result.registers == {}
    assert result.instructions_executed == 1


def test_labels_are_case_insensitive() -> None:
    assert regs("JMP Over\nMOV R1, 1\nOVER: MOV R2, 2") == {"R2": 2}


# --- subroutines and the end -----------------------------------------------------------------


def test_call_label_and_ret() -> None:
    source = "MOV R1, 1\nCALL double\nCALL double\nHLT\ndouble: ADD R1, R1\nRET"
    assert regs(source) == {"R1": 4}


def test_nested_subroutines_return_in_order() -> None:
    source = """
    CALL outer
    MOV R3, 3
    HLT
outer:
    MOV R1, 1
    CALL inner
    ADD R1, 10
    RET
inner:
    MOV R2, 2
    ADD R1, 100
    RET
"""
    assert regs(source) == {"R1": 111, "R2": 2, "R3": 3}


def test_top_level_ret_ends_the_program() -> None:
    result = run("MOV R1, 1\nRET\nMOV R1, 2")
    assert result.registers == {"R1": 1}
    assert result.instructions_executed == 2


def test_hlt_ends_the_program() -> None:
    result = run("MOV R1, 1\nHLT\nMOV R1, 2")
    assert result.registers == {"R1": 1}
    assert result.instructions_executed == 2


def test_halt_alias() -> None:
    assert regs("MOV R1, 1\nHALT\nMOV R1, 2") == {"R1": 1}


def test_falling_off_the_end_ends_the_program() -> None:
    emu = emulator("MOV R1, 1\nNOP")
    result = emu.run()
    assert emu.finished
    assert result.instructions_executed == 2
    assert emu.snapshot()["pc"] == 2


def test_global_sets_the_entry_point() -> None:
    source = "global _start\nhelper: MOV R1, 1\nRET\n_start: MOV R2, 2\nCALL helper"
    assert regs(source) == {"R1": 1, "R2": 2}


def test_stack_is_left_in_the_result() -> None:
    assert run("PUSH 1\nPUSH 'a'").stack == [1, "a"]


# --- tools -----------------------------------------------------------------------------------


def test_first_pushed_is_the_first_parameter() -> None:
    result = run("PUSH 5\nPUSH 7\nCALL make_one_step\nPOP R1", TOOLS)
    assert result.registers == {"R1": 57}
    assert LOG == [("make_one_step", {"x": 5, "y": 7})]
    assert result.calls[0].call.args == {"x": 5, "y": 7}
    assert result.calls[0].result == 57


def test_tuple_result_pops_in_order() -> None:
    result = run("PUSH 42\nCALL split\nPOP R1\nPOP R2", TOOLS)
    assert result.registers == {"R1": 4, "R2": 2}


def test_none_result_pushes_nothing() -> None:
    result = run("PUSH 'hot'\nPUSH 30\nCALL record", TOOLS)
    assert result.stack == []
    assert LOG == [("record", {"message": "hot", "value": 30})]


def test_tool_string_result_keeps_case() -> None:
    assert regs("CALL city\nPOP R1", TOOLS) == {"R1": "Paris"}


def test_call_with_parentheses_and_case_insensitive_tool_name() -> None:
    assert regs("CALL CITY()\nPOP R1", TOOLS) == {"R1": "Paris"}


def test_arguments_are_converted_to_declared_types() -> None:
    result = run("PUSH '5'\nPUSH 7.0\nCALL make_one_step\nPOP R1", TOOLS)
    assert result.registers == {"R1": 57}
    assert LOG == [("make_one_step", {"x": 5, "y": 7})]


def test_pydantic_argument_from_json_text() -> None:
    source = 'section .data\np db {"x": 3, "y": -4}\nsection .text\nPUSH p\nCALL norm1\nPOP R1'
    assert regs(source, TOOLS) == {"R1": 7}
    assert regs('PUSH \'{"x": 1, "y": 2}\'\nCALL norm1\nPOP R1', TOOLS) == {"R1": 3}


def test_conversion_failure_names_tool_argument_and_line() -> None:
    # A text built as the plan runs: the check before the run does not know it (a literal
    # the tool refuses is rejected before the run, see test_structured.py, and so is a text
    # no filling of its placeholders makes a number: "{R1}bc", see test_literal_arguments.py).
    emu = emulator("MOV R1, 'a'\nPUSH '{R1}1'\nPUSH 1\nCALL make_one_step", TOOLS)
    with pytest.raises(ToolArgumentError) as info:
        emu.run()
    err = info.value
    assert (err.tool, err.argument, err.line) == ("make_one_step", "x", 4)
    assert "make_one_step" in str(err) and "'x'" in str(err) and "line 4" in str(err)
    assert LOG == []
    assert emu.state.stack == ["a1", 1]  # a bad value leaves the stack as it was


def test_bad_json_for_a_model_is_a_tool_argument_error() -> None:
    with pytest.raises(ToolArgumentError) as info:
        run("MOV R1, 1\nPUSH '{\"x\": {R1}}'\nCALL norm1", TOOLS)
    assert (info.value.tool, info.value.argument, info.value.line) == ("norm1", "p", 3)


def test_tool_returning_the_wrong_number_of_values_names_the_line() -> None:
    with pytest.raises(AsmRuntimeError, match="2 values") as info:
        run("NOP\nCALL wrong_arity", TOOLS)
    assert info.value.line == 2


def test_tool_raising_is_wrapped_with_cause_and_line() -> None:
    with pytest.raises(ToolExecutionError) as info:
        run("PUSH 3\nCALL boom", TOOLS)
    err = info.value
    assert isinstance(err.__cause__, ValueError)
    assert err.original is err.__cause__
    assert (err.tool, err.line, err.source) == ("boom", 2, "CALL boom")
    assert "boom 3" in str(err)


def test_graph_interrupt_from_a_tool_passes_through_unwrapped() -> None:
    with pytest.raises(GraphInterrupt):
        run("CALL interrupt", TOOLS)


async def test_graph_interrupt_passes_through_arun() -> None:
    with pytest.raises(GraphInterrupt):
        await emulator("CALL interrupt", TOOLS).arun()


async def test_tool_raising_in_arun_is_wrapped() -> None:
    with pytest.raises(ToolExecutionError) as info:
        await emulator("PUSH 1\nCALL boom", TOOLS).arun()
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.line == 2


def test_custom_call_function_in_run() -> None:
    seen: list[ToolCall] = []

    def call(request: ToolCall) -> Any:
        seen.append(request)
        return 100

    result = emulator("PUSH 1\nCALL inc\nPOP R1\nCALL city\nPOP R2", TOOLS).run(call)
    assert result.registers == {"R1": 100, "R2": 100}
    assert [(c.tool, c.number, c.line) for c in seen] == [("inc", 1, 2), ("city", 2, 4)]


# --- calls the plan tests: JC / JNC right after the CALL ----------------------------------------


def weather(city: str) -> float:
    """Today's temperature in a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return 21.5


def pair(city: str) -> tuple[int, int]:
    """Two numbers, or a broken result for Atlantis."""
    return (1, 2, 3) if city == "Atlantis" else (1, 2)  # type: ignore[return-value]


NO_CITY = "tool 'weather' raised ValueError: no such city"
TESTED = 'PUSH "{city}"\nCALL weather\n{test}\nPOP R1\nHLT\nfailed: POP R2'


@pytest.mark.parametrize(
    ("city", "test", "registers"),
    [
        ("Atlantis", "JC failed", {"R2": None, "EAX": NO_CITY}),
        ("Oslo", "JC failed", {"R1": 21.5, "EAX": None}),
        ("Atlantis", "JNC ok\nJMP failed\nok:", {"R2": None, "EAX": NO_CITY}),
        ("Atlantis", "SETC R9\nJMP failed", {"R2": None, "R9": 1, "EAX": NO_CITY}),
        ("Oslo", "SETC R9", {"R1": 21.5, "EAX": None}),  # R9 = 0
        (
            "Atlantis",
            "MOV R5, 7\nMOV R6, 8\nCMOVC R5, R6\nJMP failed",
            {"R2": None, "R5": 8, "R6": 8, "EAX": NO_CITY},
        ),
    ],
)
def test_a_failed_call_the_plan_tests_sets_the_carry_and_goes_on(
    city: str, test: str, registers: dict[str, Any]
) -> None:
    """The results are NONE and EAX holds the error's text (NONE when the call did not fail)."""
    assert regs(TESTED.format(city=city, test=test), [weather]) == registers


def test_a_tested_call_read_in_eax_gives_its_result_or_its_error_there() -> None:
    plan = 'PUSH "{city}"\nCALL weather\nMOV R1, EAX\nJNC ok\nMOV R2, 1\nok: HLT'
    assert regs(plan.format(city="Oslo"), [weather]) == {"R1": 21.5, "EAX": 21.5}
    assert regs(plan.format(city="Atlantis"), [weather]) == {"R1": NO_CITY, "R2": 1, "EAX": NO_CITY}


@pytest.mark.parametrize(
    "test",
    [
        "JL failed",  # JB and JL read the same flag, but only the carry's names test a call
        "POP R1\nCMP R1, 0\nJC failed",  # another instruction set the flags first
        "JMP there\nthere: JC failed",  # not in the straight-line code after the CALL
    ],
)
def test_a_call_the_plan_does_not_test_stops_the_plan_when_it_fails(test: str) -> None:
    plan = f'CMP 1, 2\nPUSH "Atlantis"\nCALL weather\n{test}\nHLT\nfailed: HLT'
    with pytest.raises(ToolExecutionError, match="no such city"):
        run(plan, [weather])


def test_a_result_the_tool_cannot_give_is_a_failure_the_plan_may_test() -> None:
    plan = 'PUSH "Atlantis"\nCALL pair\nJC failed\nHLT\nfailed: POP R1\nPOP R2'
    got = regs(plan, [pair])
    assert (got["R1"], got["R2"]) == (None, None)
    assert "is annotated to return 2 values but returned 3 values" in got["EAX"]


def test_complete_batch_takes_a_failure_the_plan_tests_and_raises_any_other() -> None:
    from llassembly.machine.emulator import Failed

    tested = emulator(TESTED.format(city="x", test="JC failed"), [weather])
    tested.advance()
    assert tested.tests_failure()
    snapshot = json.loads(json.dumps(tested.snapshot()))  # resumed anywhere
    again = emulator(TESTED.format(city="x", test="JC failed"), [weather], state=snapshot)
    again.complete_batch([Failed(RuntimeError("down"))])
    assert again.advance() is None
    assert again.result().registers["EAX"] == "tool 'weather' raised RuntimeError: down"
    untested = emulator('PUSH "x"\nCALL weather\nPOP R1', [weather])
    untested.advance()
    assert not untested.tests_failure()
    with pytest.raises(ToolExecutionError, match="raised RuntimeError: down"):
        untested.complete_batch([Failed(RuntimeError("down"))])


def pay(amount: Annotated[float, Field(gt=0)]) -> str:
    """Pay an amount."""
    PAID.append(amount)
    return "paid"


PAID: list[float] = []


@pytest.mark.parametrize("parallel", [False, True])
def test_a_tested_call_whose_computed_argument_the_schema_refuses_fails_as_the_call(
    parallel: bool,
) -> None:
    """An argument refused when the call is made (a value computed by the plan, outside the
    tool's declared constraints) is that call's failure: a plan that tests the call goes on
    (its results NONE, EAX saying why), the tool not called, as for any other failure; a plan
    that does not test it stops there."""
    PAID.clear()
    plan = (
        "CALL weather_here\nPOP R1\nMOV R2, 5\nSUB R2, 10\nPUSH R2\nCALL pay\n{test}\nPOP R3\nHLT\n"
        "failed: POP R4"
    )
    tested = plan.format(test="JC failed")
    result = emulator(tested, [weather_here, pay], parallel_tools=parallel).run()
    assert PAID == [] and result.tool_calls == 1
    assert result.registers["R4"] is None and "greater than 0" in result.registers["EAX"]
    assert "argument 'amount'" in result.registers["EAX"]
    with pytest.raises(ToolArgumentError, match="greater than 0"):
        emulator(plan.format(test="NOP"), [weather_here, pay], parallel_tools=parallel).run()
    assert PAID == []


def weather_here() -> float:
    """Today's temperature here."""
    return 3.5


def test_a_tested_call_completes_before_the_plan_runs_ahead_of_it() -> None:
    plan = (
        'PUSH "Oslo"\nCALL weather\nPOP R1\nPUSH "Atlantis"\nCALL weather\nJC failed\n'
        "POP R2\nHLT\nfailed: HLT"
    )
    emu = emulator(plan, [weather], parallel_tools=True)
    assert [c.args["city"] for c in emu.advance_batch()] == ["Oslo", "Atlantis"]
    assert emu.run().registers == {"R1": 21.5, "EAX": NO_CITY}


def test_the_checks_follow_what_a_tested_call_leaves() -> None:
    with pytest.raises(
        PlanRejected, match="INC needs numbers, but on some path EAX holds a string"
    ):
        emulator('MOV EAX, 0\nPUSH "x"\nCALL weather\nJC failed\nfailed: INC EAX', [weather])
    summary = llassembly_summarize(TESTED.format(city="Atlantis", test="JC failed"), [weather])
    assert "weather  1 call" in summary


def llassembly_summarize(source: str, tools: Any) -> str:
    from llassembly.analysis.summary import summarize

    return summarize(program(source), externs_from(tools)).render()


# --- budgets ---------------------------------------------------------------------------------

_LOOP = "MOV R1, 0\nloop: INC R1\nCMP R1, 10\nJL loop"  # 1 + 10*3 = 31 instructions


def test_exactly_max_instructions_may_run() -> None:
    assert run(_LOOP, max_instructions_to_exec=31).instructions_executed == 31


def test_one_instruction_too_many_raises_with_limit_reached_and_line() -> None:
    with pytest.raises(InstructionBudgetExceeded) as info:
        run(_LOOP, max_instructions_to_exec=30)
    err = info.value
    assert (err.limit, err.reached, err.line, err.source) == (30, 31, 4, "JL loop")
    assert err.budget == "max_instructions_to_exec"


def test_default_instruction_budget_is_1000() -> None:
    with pytest.raises(InstructionBudgetExceeded) as info:
        run("loop: INC R1\nCMP R1, 100000\nJL loop")
    assert (info.value.limit, info.value.reached) == (1000, 1001)


def test_tool_call_budget() -> None:
    source = "loop: PUSH R1\nCALL inc\nPOP R1\nCMP R1, 10\nJL loop"
    assert regs(source, TOOLS, max_tool_calls=10) == {"R1": 10}
    with pytest.raises(ToolCallBudgetExceeded) as info:
        run(source, TOOLS, max_tool_calls=9)
    err = info.value
    assert (err.limit, err.reached, err.line, err.source) == (9, 10, 2, "CALL inc")


def test_stack_depth_push_loop() -> None:
    source = "loop: PUSH 1\nINC R1\nCMP R1, 1000\nJL loop"
    with pytest.raises(StackDepthExceeded) as info:
        run(source, max_stack_depth=8)
    err = info.value
    assert (err.limit, err.reached, err.line, err.source) == (8, 9, 1, "PUSH 1")


def test_stack_depth_exactly_at_the_limit_is_fine() -> None:
    assert len(run("PUSH 1\nPUSH 2\nPUSH 3", max_stack_depth=3).stack) == 3


def test_stack_depth_deeply_nested_subroutines() -> None:
    """One value and 16 nested CALLs (the verifier follows 16): the 16th CALL goes over."""
    subs = [f"s{k}: CALL s{k + 1}\nRET" for k in range(1, 16)]
    source = "\n".join(["PUSH 1", "CALL s1", "HLT", *subs, "s16: RET"])
    with pytest.raises(StackDepthExceeded) as info:
        run(source, max_stack_depth=16)
    err = info.value
    assert (err.limit, err.reached, err.line) == (16, 17, 2 + 2 * 15)


def test_stack_depth_counts_data_and_return_stack_together() -> None:
    source = "PUSH 1\nPUSH 2\nCALL f\nHLT\nf: PUSH 3\nRET"
    with pytest.raises(StackDepthExceeded) as info:
        run(source, max_stack_depth=3)
    assert (info.value.reached, info.value.line) == (4, 5)


def test_tool_results_count_towards_stack_depth() -> None:
    with pytest.raises(StackDepthExceeded) as info:
        run("PUSH 1\nPUSH 42\nCALL split", TOOLS, max_stack_depth=2)
    assert (info.value.limit, info.value.reached, info.value.line) == (2, 3, 3)


def test_stack_limit_of_a_compiled_program_follows_the_emulator() -> None:
    compiled = compile_program(
        program("PUSH 1\nPUSH 2\nPUSH 3"), externs_from([]), max_stack_depth=256
    )
    with pytest.raises(StackDepthExceeded):
        Emulator(compiled, max_stack_depth=2).run()
    assert len(Emulator(compiled).run().stack) == 3


def test_compiled_program_is_reusable() -> None:
    compiled = compile_program(program(_LOOP), externs_from([]), max_stack_depth=256)
    assert isinstance(compiled, CompiledProgram)
    assert Emulator(compiled).run().registers == Emulator(compiled).run().registers == {"R1": 10}


class Clock:
    """The emulator's clock, advanced by hand: ``max_seconds`` tested without real time."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(emulator_module, "time", fake)
    return fake


def slow_tool(clock: Clock) -> Any:
    def slow(x: int) -> int:
        clock.now += 0.05  # the call takes 50 ms
        return x

    return slow


def test_wall_clock_budget(clock: Clock) -> None:
    source = "loop: PUSH R1\nCALL slow\nPOP R1\nINC R1\nCMP R1, 100\nJL loop"
    with pytest.raises(WallClockExceeded) as info:
        run(source, [slow_tool(clock)], max_seconds=0.12)
    err = info.value
    assert err.limit == 0.12
    assert err.reached > 0.12
    assert err.reached == 0.15  # found after the third 50 ms call
    assert err.line == 2
    assert err.budget == "max_seconds"


def test_wall_clock_is_checked_in_pure_loops_too(clock: Clock) -> None:
    source = "PUSH 0\nCALL slow\nPOP R0\nloop: INC R1\nCMP R1, 100000\nJL loop"
    with pytest.raises(WallClockExceeded) as info:
        run(source, [slow_tool(clock)], max_seconds=0.01, max_instructions_to_exec=1_000_000)
    assert info.value.line in (4, 5, 6)


@pytest.mark.parametrize(
    "limits",
    [
        {"max_instructions_to_exec": 0},
        {"max_instructions_to_exec": -1},
        {"max_instructions_to_exec": 1.5},
        {"max_tool_calls": 0},
        {"max_tool_calls": True},
        {"max_stack_depth": 0},
        {"max_stack_depth": "10"},
        {"max_seconds": 0},
        {"max_seconds": -1.0},
        {"max_seconds": float("nan")},
        {"max_seconds": "1"},
    ],
)
def test_bad_limits_are_usage_errors(limits: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match=next(iter(limits))):
        emulator("NOP", **limits)


def test_complete_without_a_pending_call_is_a_usage_error() -> None:
    emu = emulator("NOP")
    with pytest.raises(UsageError, match="no pending"):
        emu.complete(1)


def test_bad_snapshot_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="snapshot"):
        emulator("NOP", state={"pc": 0})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pc": -1}, "pc is '-1'"),
        ({"pc": float("inf")}, "pc is 'inf'"),
        ({"pc": 1.0}, "pc is '1.0'"),
        ({"pc": 99}, "outside"),
        ({"executed": -3}, "executed is '-3'"),
        ({"tool_calls": float("nan")}, "tool_calls is 'nan'"),
        ({"return_stack": [7]}, "outside"),
        ({"stack": [{"x": 1}]}, "not a 64-bit int"),
        ({"stack": [float("nan")]}, "finite float"),
        ({"stack": [2**64]}, "not a 64-bit int"),
        ({"registers": {"R1": [1]}}, "not a 64-bit int"),
        ({"pending": {"index": 0, "values": []}}, "pending call"),
    ],
)
def test_snapshot_that_does_not_fit_the_program_is_a_usage_error(
    change: dict[str, Any], message: str
) -> None:
    snap = emulator("NOP\nNOP").snapshot() | change
    with pytest.raises(UsageError, match=message):
        emulator("NOP\nNOP", state=snap)


# --- stepping API ----------------------------------------------------------------------------

_PLAN = """
    MOV R1, 0
loop:
    PUSH R1
    PUSH 3
    CALL make_one_step
    POP R2
    ADD R3, R2
    PUSH R2
    CALL split
    POP R4
    POP R5
    INC R1
    CMP R1, 4
    JL loop
    PUSH 'done'
    PUSH R3
    CALL record
"""


def _answer(call: ToolCall) -> Any:
    return {"make_one_step": make_one_step, "split": split, "record": record}[call.tool](
        **call.args
    )


def test_advance_and_complete_match_run() -> None:
    expected = run(_PLAN, TOOLS)
    emu = emulator(_PLAN, TOOLS)
    numbers = []
    while (call := emu.advance()) is not None:
        numbers.append(call.number)
        emu.complete(_answer(call))
    assert emu.finished
    assert emu.result().registers == expected.registers
    assert emu.result().instructions_executed == expected.instructions_executed
    assert numbers == list(range(1, 10))


@pytest.mark.parametrize("stop_after", [0, 1, 4, 8])
def test_snapshot_through_json_continues_identically(stop_after: int) -> None:
    expected = run(_PLAN, TOOLS)
    emu = emulator(_PLAN, TOOLS)
    for _ in range(stop_after):
        call = emu.advance()
        assert call is not None
        emu.complete(_answer(call))
    snap = json.loads(json.dumps(emu.snapshot()))
    resumed = Emulator(program(_PLAN), TOOLS, state=snap)
    result = resumed.run()
    assert result.registers == expected.registers
    assert result.stack == expected.stack
    assert result.instructions_executed == expected.instructions_executed
    assert result.tool_calls == expected.tool_calls
    uninterrupted = emulator(_PLAN, TOOLS)
    uninterrupted.run()
    assert resumed.snapshot() == uninterrupted.snapshot()


def test_pending_call_survives_a_snapshot() -> None:
    expected = run(_PLAN, TOOLS)
    emu = emulator(_PLAN, TOOLS)
    first = emu.advance()
    emu.complete(_answer(first))  # type: ignore[arg-type]
    pending = emu.advance()
    assert pending is not None
    snap = json.loads(json.dumps(emu.snapshot()))
    assert snap["pending"] is not None
    resumed = Emulator(program(_PLAN), TOOLS, state=snap)
    again = resumed.advance()
    assert again == pending  # same tool, args, index, line and number
    resumed.complete(_answer(again))
    result = resumed.run()
    assert result.registers == expected.registers
    assert result.instructions_executed == expected.instructions_executed


def test_advance_returns_the_pending_call_again() -> None:
    emu = emulator("PUSH 1\nCALL inc\nPOP R1", TOOLS)
    first = emu.advance()
    assert emu.advance() == first
    emu.complete(2)
    assert emu.advance() is None
    assert emu.result().registers == {"R1": 2}


def test_machine_state_round_trip() -> None:
    source = "MOV R1, 'x'\nMOV EAX, 2.5\nPUSH 3\nCALL f\nHLT\nf: CMP 1, 2\nCALL inc\nRET"
    emu = emulator(source, TOOLS)
    call = emu.advance()
    assert call is not None
    snap = emu.snapshot()
    assert MachineState.restore(json.loads(json.dumps(snap))).snapshot() == snap
    assert snap["registers"] == {"R1": "x", "EAX": 2.5}
    assert snap["return_stack"] == [4]
    assert snap["flags"] == {"zf": False, "lt": True, "mode": "ordered"}


def test_single_stepping_with_max_steps_one() -> None:
    source = "MOV R1, 2\nloop: DEC R1\nJNZ loop\nPUSH 4\nCALL inc\nPOP R2"
    emu = emulator(source, TOOLS)
    pcs = []
    while True:
        pcs.append(emu.state.pc)
        call = emu.advance(max_steps=1)
        if call is not None:
            emu.complete(inc(**call.args))
        elif emu.finished:
            break
    assert pcs == [0, 1, 2, 1, 2, 3, 4, 5]  # the step past the end also finishes
    assert emu.result().registers == {"R2": 5}
    assert emu.result().instructions_executed == 8


def test_max_steps_pauses_without_finishing() -> None:
    emu = emulator(_LOOP)
    assert emu.advance(max_steps=10) is None
    assert not emu.finished
    assert emu.state.executed == 10
    assert emu.advance() is None
    assert emu.finished
    assert emu.state.executed == 31


def test_max_steps_does_not_lift_the_instruction_budget() -> None:
    emu = emulator(_LOOP, max_instructions_to_exec=5)
    assert emu.advance(max_steps=5) is None
    with pytest.raises(InstructionBudgetExceeded):
        emu.advance(max_steps=5)


def test_calls_generator() -> None:
    gen = emulator("PUSH 4\nCALL inc\nPOP R1\nPUSH R1\nCALL inc\nPOP R2", TOOLS).calls()
    call = next(gen)
    assert (call.tool, call.args, call.number) == ("inc", {"x": 4}, 1)
    call = gen.send(inc(**call.args))
    assert (call.tool, call.args, call.number) == ("inc", {"x": 5}, 2)
    with pytest.raises(StopIteration) as stop:
        gen.send(inc(**call.args))
    assert stop.value.value.registers == {"R1": 5, "R2": 6}


def test_finished_emulator_advances_to_none() -> None:
    emu = emulator("NOP")
    emu.run()
    assert emu.advance() is None
    assert emu.run().instructions_executed == 1


async def ainc(x: int) -> int:
    await asyncio.sleep(0)
    return x + 1


async def test_arun_with_async_tools() -> None:
    result = await emulator("PUSH 1\nCALL ainc\nCALL ainc\nPOP R1", [ainc]).arun()
    assert result.registers == {"R1": 3}
    assert [r.result for r in result.calls] == [2, 3]


async def test_arun_with_sync_tools() -> None:
    assert (await emulator(_PLAN, TOOLS).arun()).registers == run(_PLAN, TOOLS).registers


def test_async_tool_in_sync_run_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="async"):
        run("PUSH 1\nCALL ainc", [ainc])


def test_every_opcode_is_covered_by_this_file_or_test_x86() -> None:
    here = Path(__file__)
    text = here.read_text(encoding="utf-8") + "".join(
        here.with_name(name).read_text("utf-8")
        for name in ("test_x86.py", "test_answers.py", "test_structured.py")
    )
    assert [op for op in Opcode if op.name not in text] == []


def test_snapshot_keeps_empty_string_and_negative_registers() -> None:
    """Only zero registers are left out of a snapshot; "" and negatives survive a round trip."""
    state = MachineState()
    state.regs[3], state.regs[5], state.regs[6] = "", "x", -2
    snap = json.loads(json.dumps(state.snapshot()))
    assert snap["registers"] == {"R3": "", "R5": "x", "R6": -2}
    assert MachineState.restore(snap).regs[:7] == [0, 0, 0, "", 0, "x", -2]


def test_snapshot_keeps_float_zeros_as_floats() -> None:
    """Only the integer 0 (what a restored register starts as) is left out: a register holding
    0.0 or -0.0 comes back as that float, so arithmetic after a restore (7 + 0.0 = 7.0, then
    / 2 = 3.5) goes as it would have without one."""
    state = MachineState()
    state.regs[1], state.regs[2], state.regs[3] = 0.0, -0.0, 5 - 5
    snap = json.loads(json.dumps(state.snapshot()))
    assert snap["registers"] == {"R1": 0.0, "R2": -0.0}
    regs = MachineState.restore(snap).regs
    assert [type(v) for v in regs[1:4]] == [float, float, int]
    assert math.copysign(1, regs[2]) == -1


@pytest.mark.parametrize(
    ("source", "written"),
    [
        ("MOV R1, 0.5\nDIV R1", {"R1", "EAX", "EDX"}),  # EAX and EDX, never named
        ("MOV R1, 2.5\nMUL R1", {"R1", "EAX"}),  # EAX, never named
        ("L1: LOOP L1", {"ECX"}),  # ECX, never named
        ("MOV R7, 'x'\nMOV xmm0, 1.5", {"R7", "xmm0"}),
    ],
)
def test_an_emulator_snapshot_reads_the_registers_written_without_being_named(
    source: str, written: set[str]
) -> None:
    """An emulator's snapshot reads only the registers its program may write: those an
    instruction names, and EAX, ECX and EDX, which some write unnamed. Each of those ends up
    in the snapshot, which equals the one that looks at every register."""
    emu = Emulator(parse(source), [], max_instructions_to_exec=50)
    assert emu.advance(max_steps=5) is None
    snap = emu.snapshot()
    assert snap == emu.state.snapshot()
    assert {name.lower() for name in snap["registers"]} == {name.lower() for name in written}


def test_an_emulator_snapshot_keeps_registers_its_given_state_holds() -> None:
    """A state given to an emulator may hold registers its program never names: they stay in
    every snapshot, as they would in the state's own."""
    state = MachineState()
    state.regs[9] = "kept"
    emu = Emulator(parse("MOV R1, 2"), [], state=state)
    emu.advance()
    assert emu.snapshot()["registers"] == {"R1": 2, "R9": "kept"}
    restored = Emulator(parse("MOV R1, 2"), [], state=emu.snapshot())
    assert restored.snapshot() == emu.snapshot()


def test_a_compiled_program_runs_on_its_own_stack_limit_unless_given_another() -> None:
    """Without ``max_stack_depth`` a :class:`CompiledProgram` keeps the limit it was compiled
    with (it is not compiled again for the default); a parsed program gets the default."""

    def ping(x: int) -> int:
        return x

    program, externs = parse("PUSH 1\nCALL ping\nPOP R1"), externs_from([ping])
    compiled = compile_program(program, externs, max_stack_depth=16)
    kept = Emulator(compiled)
    assert kept.compiled is compiled and kept.max_stack_depth == 16
    other = Emulator(compiled, max_stack_depth=32)
    assert other.compiled is not compiled and other.compiled.max_stack_depth == 32
    assert Emulator(program, [ping]).max_stack_depth == 256
