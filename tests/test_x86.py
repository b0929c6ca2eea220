"""The x86 habits: every instruction added for them, with the flags after each, memory, the
EAX convention for tool results, variables, and what the verifier refuses (docs/language.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from llassembly.emulator import Emulator
from llassembly.errors import AsmRuntimeError, PlanRejected, UsageError
from llassembly.parser import parse
from llassembly.program import Program


def program(source: str) -> Program:
    parsed = parse(source)
    assert isinstance(parsed, Program)
    return parsed


def machine(source: str, tools: Any = ()) -> Emulator:
    emu = Emulator(program(source), tools)
    emu.run()
    return emu


def regs(source: str, tools: Any = ()) -> dict[str, Any]:
    return machine(source, tools).result().registers


def flags(source: str) -> tuple[bool, bool, str]:
    state = machine(source).state
    return state.zf, state.lt, ("unset", "ordered", "unordered")[state.flag_mode]


def rejected(source: str, tools: Any = ()) -> str:
    with pytest.raises(PlanRejected) as info:
        Emulator(program(source), tools)
    return str(info.value)


def failure(source: str, tools: Any = ()) -> str:
    with pytest.raises(AsmRuntimeError) as info:
        machine(source, tools)
    return str(info.value)


# -- instructions, each with its result and flags ---------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected", "flag_state"),
    [
        # DIV / IDIV: truncated toward zero for integers, exact with a float; flags from it
        ("MOV EAX, 7\nDIV EAX, 2", {"EAX": 3}, (False, False, "ordered")),
        ("MOV EAX, -7\nIDIV EAX, 2", {"EAX": -3}, (False, True, "ordered")),
        ("MOV EAX, 7.0\nDIV EAX, 2", {"EAX": 3.5}, (False, False, "ordered")),
        ("MOV EAX, 1\nDIV EAX, 2", {}, (True, False, "ordered")),
        # DIV src: EAX / src into EAX, the remainder into EDX (sign of the dividend)
        (
            "MOV EAX, 17\nMOV ECX, 5\nDIV ECX",
            {"EAX": 3, "ECX": 5, "EDX": 2},
            (False, False, "ordered"),
        ),
        ("MOV EAX, -17\nCDQ\nIDIV 5", {"EAX": -3, "EDX": -2}, (False, True, "ordered")),
        # MOD: the remainder
        ("MOV R1, 17\nMOD R1, 5", {"R1": 2}, (False, False, "ordered")),
        ("MOV R1, -17\nMOD R1, 5", {"R1": -2}, (False, True, "ordered")),
        ("MOV R1, 5.5\nMOD R1, 2", {"R1": 1.5}, (False, False, "ordered")),
        # bit logic on integers
        ("MOV R1, 12\nAND R1, 10", {"R1": 8}, (False, False, "ordered")),
        ("MOV R1, 12\nOR R1, 3", {"R1": 15}, (False, False, "ordered")),
        ("MOV R1, 12\nXOR R1, 12", {}, (True, False, "ordered")),
        ('MOV R1, "text"\nXOR R1, R1', {}, (True, False, "ordered")),
        ("MOV R1, 2.5\nPXOR R1, R1", {}, (True, False, "ordered")),
        ("MOV R1, 5\nNOT R1", {"R1": -6}, (False, False, "unset")),
        ("MOV R1, 5\nNEG R1", {"R1": -5}, (False, True, "ordered")),
        ("MOV R1, -2.5\nNEG R1", {"R1": 2.5}, (False, False, "ordered")),
        # TEST: flags only
        ("MOV R1, 6\nTEST R1, 1", {"R1": 6}, (True, False, "ordered")),
        ("MOV R1, 0\nTEST R1, R1", {}, (True, False, "ordered")),
        ("MOV R1, -3\nTEST R1, R1", {"R1": -3}, (False, True, "ordered")),
        ('MOV R1, ""\nTEST R1, R1', {"R1": ""}, (True, False, "unordered")),
        ('MOV R1, "x"\nTEST R1, R1', {"R1": "x"}, (False, False, "unordered")),
        # shifts
        ("MOV R1, 3\nSHL R1, 4", {"R1": 48}, (False, False, "ordered")),
        ("MOV R1, 3\nSAL R1", {"R1": 6}, (False, False, "ordered")),
        ("MOV R1, 40\nSHR R1, 3", {"R1": 5}, (False, False, "ordered")),
        ("MOV R1, -40\nSAR R1, 3", {"R1": -5}, (False, True, "ordered")),
        ("MOV R1, -1\nSHR R1, 60", {"R1": 15}, (False, False, "ordered")),
        # LEA: address arithmetic on registers
        (
            "MOV EBX, 10\nMOV ECX, 3\nLEA EAX, [EBX + ECX*4 + 1]",
            {"EAX": 23, "EBX": 10, "ECX": 3},
            (False, False, "unset"),
        ),
        # XCHG
        ('MOV R1, 1\nMOV R2, "b"\nXCHG R1, R2', {"R1": "b", "R2": 1}, (False, False, "unset")),
        # SETcc (AL is EAX) and CMOVcc
        ("CMP 5, 3\nSETG AL", {"EAX": 1}, (False, False, "ordered")),
        ("CMP 5, 3\nSETL AL\nMOVZX EAX, AL", {}, (False, False, "ordered")),
        ("CMP 2, 2\nSETE R1", {"R1": 1}, (True, False, "ordered")),
        (
            "MOV R1, 1\nMOV R2, 9\nCMP 1, 2\nCMOVL R1, R2",
            {"R1": 9, "R2": 9},
            (False, True, "ordered"),
        ),
        (
            "MOV R1, 1\nMOV R2, 9\nCMP 3, 2\nCMOVL R1, R2",
            {"R1": 1, "R2": 9},
            (False, False, "ordered"),
        ),
        # floats by their SSE names, the flags left alone
        ("MOV xmm0, 1.5\nADDSS xmm0, 2", {"XMM0": 3.5}, (False, False, "unset")),
        ("MOV xmm0, 1\nSUBSD xmm0, 0.25", {"XMM0": 0.75}, (False, False, "unset")),
        ("MOVSS xmm1, 3\nMULSS xmm1, 0.5", {"XMM1": 1.5}, (False, False, "unset")),
        ("MOVSD xmm1, 3\nMULSD xmm1, 0.5", {"XMM1": 1.5}, (False, False, "unset")),
        ("MOVSD xmm1, 3\nDIVSD xmm1, 2", {"XMM1": 1.5}, (False, False, "unset")),
        ("MOV R1, 7\nCVTSI2SD xmm2, R1", {"R1": 7, "XMM2": 7.0}, (False, False, "unset")),
        ("MOV xmm2, -2.7\nCVTTSD2SI EAX, xmm2", {"EAX": -2, "XMM2": -2.7}, (False, False, "unset")),
        ("MOV xmm2, 2.5\nCVTSD2SI EAX, xmm2", {"EAX": 2, "XMM2": 2.5}, (False, False, "unset")),
        ("SQRTSD xmm3, 16", {"XMM3": 4.0}, (False, False, "unset")),
        ("MOV xmm0, 2\nMAXSD xmm0, 5\nMINSS xmm0, 4", {"XMM0": 4.0}, (False, False, "unset")),
        (
            "MOV xmm0, 2\nMAXSS xmm0, 1\nMINSD xmm0, 4\nADDSD xmm0, 1",
            {"XMM0": 3.0},
            (False, False, "unset"),
        ),
        ("MOV xmm0, 2.5\nCOMISD xmm0, 3.0", {"XMM0": 2.5}, (False, True, "ordered")),
        ("MOV RAX, 4\nADD RAX, 1", {"EAX": 5}, (False, False, "ordered")),
    ],
)
def test_instruction_result_and_flags(
    source: str, expected: dict[str, Any], flag_state: tuple[bool, bool, str]
) -> None:
    assert regs(source) == expected
    assert flags(source) == flag_state


@pytest.mark.parametrize(
    ("jump", "a", "b", "taken"),
    [
        ("JS", 1, 2, True),
        ("JS", 2, 1, False),
        ("JNS", 2, 2, True),
        ("JB", 1, 2, True),
        ("JBE", 2, 2, True),
        ("JA", 3, 2, True),
        ("JA", 2, 2, False),
        ("JAE", 2, 2, True),
        ("JC", 1, 2, True),
        ("JNC", 1, 2, False),
        ("JNGE", 1, 2, True),
        ("JNLE", 3, 2, True),
    ],
)
def test_jumps_on_this_machines_flags(jump: str, a: int, b: int, taken: bool) -> None:
    source = f"CMP {a}, {b}\n{jump} yes\nMOV R1, 1\nHLT\nyes:\nMOV R1, 2"
    assert regs(source) == {"R1": 2 if taken else 1}


@pytest.mark.parametrize(
    ("op", "a", "b", "true"),
    [
        ("E", 2, 2, True),
        ("NE", 2, 2, False),
        ("L", 1, 2, True),
        ("LE", 3, 2, False),
        ("G", 3, 2, True),
        ("GE", 1, 2, False),
    ],
)
def test_setcc_and_cmovcc_for_each_condition(op: str, a: int, b: int, true: bool) -> None:
    # SETE SETNE SETL SETLE SETG SETGE and CMOVE CMOVNE CMOVL CMOVLE CMOVG CMOVGE
    assert regs(f"CMP {a}, {b}\nSET{op} R1") == ({"R1": 1} if true else {})
    assert regs(f"MOV R2, 5\nCMP {a}, {b}\nCMOV{op} R1, R2") == (
        {"R1": 5, "R2": 5} if true else {"R2": 5}
    )


def test_loop_counts_ecx_down_to_zero() -> None:
    assert regs("MOV ECX, 4\nagain:\nADD R1, 10\nLOOP again") == {"R1": 40}


# -- run-time errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("MOV R2, 0\nMOV R1, 5\nDIV R1, R2", "division by zero"),
        ("MOV R2, 0\nMOV R1, 5\nMOD R1, R2", "division by zero"),
        ("MOV R1, 1.5\nAND R1, 1", "needs whole numbers"),
        ("MOV R1, 1\nSHL R1, 64", "shifts by 0 to 63 bits"),
        ("MOV R1, 4611686018427387904\nSHL R1, 2", "overflowed"),
        ("MOV R1, -9223372036854775807\nDEC R1\nNEG R1", "overflowed"),
        ("MOV ECX, 0.5\nl:\nLOOP l", "LOOP counts down ECX"),
        ("SQRTSD xmm0, -1", "cannot convert"),
        ("MOV R2, 0.5\nMOV R1, [table + R2]\nHLT\nsection .data\ntable dd 1", "whole number"),
    ],
)
def test_run_time_errors_name_the_line(source: str, message: str) -> None:
    assert message in failure(source)


# -- memory ------------------------------------------------------------------------------------

MEMORY_PLAN = """
section .data
counts dd 0, 0, 0
total dd 0
section .rodata
cities dd paris, oslo, cairo
paris db "Paris", 0
oslo db "Oslo", 0
cairo db "Cairo", 0
section .text
    xor esi, esi
next:
    mov eax, [cities + esi*4]
    mov [counts + esi*4], esi
    inc dword [total]
    inc esi
    cmp esi, 3
    jl next
    mov ebx, [total]
    mov ecx, [cities + 8]
"""


def test_memory_reads_and_writes_cells_by_byte_offset() -> None:
    emu = machine(MEMORY_PLAN)
    assert emu.result().registers == {"EAX": "Cairo", "EBX": 3, "ECX": "Cairo", "ESI": 3}
    assert emu.state.mem == {"counts": [0, 1, 2], "total": [3]}


def test_memory_is_in_the_snapshot_and_restored() -> None:
    emu = Emulator(program(MEMORY_PLAN))
    emu.advance(max_steps=6)
    snap = emu.snapshot()
    assert snap["memory"]["total"] == [1]
    again = Emulator(program(MEMORY_PLAN), state=snap)
    again.run()
    assert again.state.mem == {"counts": [0, 1, 2], "total": [3]}


def test_a_plan_without_memory_writes_has_no_memory_in_its_snapshot() -> None:
    emu = Emulator(program("MOV R1, [limit]\nHLT\nsection .data\nlimit dd 5"))
    emu.run()
    assert emu.result().registers == {"R1": 5}
    assert "memory" not in emu.snapshot()


def test_a_snapshot_with_the_wrong_memory_is_refused() -> None:
    snap = Emulator(program(MEMORY_PLAN)).snapshot()
    snap["memory"] = {"counts": [0]}
    with pytest.raises(UsageError, match="memory"):
        Emulator(program(MEMORY_PLAN), state=snap)


def test_lea_then_a_register_address_reads_the_same_cell() -> None:
    source = "LEA ESI, [route]\nMOV EAX, [ESI + 8]\nHLT\nsection .data\nroute dd 2, 8, 9"
    assert regs(source)["EAX"] == 9


def test_times_and_res_reserve_cells() -> None:
    source = (
        "MOV dword [buf + 12], 7\nMOV EAX, [buf + 12]\nMOV EBX, [grid + 4]\nHLT\n"
        "section .bss\nbuf resd 4\nsection .data\ngrid times 3 dd 5"
    )
    assert regs(source) == {"EAX": 7, "EBX": 5}


def test_run_time_bounds_and_alignment() -> None:
    base = "\nHLT\nsection .data\ntable dd 1, 2, 3"
    assert "reads cell 3 of 'table', which has 3" in failure(
        "MOV ESI, 3\nMOV EAX, [table + ESI*4]" + base
    )
    assert "not at a cell" in failure("MOV ESI, 1\nMOV EAX, [table + ESI]" + base)
    assert "outside every data label" in failure("MOV ESI, 5\nMOV EAX, [ESI]" + base)


def test_a_bare_writable_label_reads_its_current_value() -> None:
    assert regs("INC dword [n]\nMOV EAX, n\nHLT\nsection .data\nn dd 4") == {"EAX": 5}


# -- the EAX convention and variables ------------------------------------------------------------


def get_temperature(city: str) -> float:
    return {"Paris": 17.5, "Oslo": 3.0}[city]


def test_reading_eax_right_after_a_call_gets_the_result_without_growing_the_stack() -> None:
    source = 'PUSH "Paris"\nCALL get_temperature\nCMP EAX, 18\nJL cold\nMOV R1, 1\ncold:\nHLT'
    emu = machine(source, [get_temperature])
    assert emu.result().registers == {"EAX": 17.5}
    assert emu.result().stack == []


def test_a_polling_loop_reading_eax_keeps_the_stack_flat() -> None:
    calls = iter([0, 0, 0, 1])

    def poll(job: int) -> int:
        return next(calls)

    source = "again:\nPUSH 7\nCALL poll\nTEST EAX, EAX\nJZ again"
    emu = machine(source, [poll])
    assert emu.result().stack == [] and emu.result().tool_calls == 4


def test_pop_right_after_a_call_keeps_the_stack_convention() -> None:
    assert regs('PUSH "Oslo"\nCALL get_temperature\nPOP R1', [get_temperature]) == {"R1": 3.0}


def test_mixing_eax_and_pop_for_one_result_is_refused_with_a_message_about_pop() -> None:
    message = rejected(
        'PUSH 1\nPUSH "Paris"\nCALL get_temperature\nCMP EAX, 18\nPOP R1', [get_temperature]
    )
    assert "line 5" in message and "POP the result right after the CALL" in message


def test_a_register_saved_below_the_arguments_is_restored_not_mixed() -> None:
    # x86 code saves ECX around a call; POP ECX after reading EAX restores it
    source = (
        'MOV ECX, 2\nagain:\nPUSH ECX\nPUSH "Oslo"\nCALL get_temperature\n'
        "ADD R1, EAX\nPOP ECX\nLOOP again"
    )
    emu = machine(source, [get_temperature])
    assert emu.result().registers == {"EAX": 3.0, "R1": 6.0}
    assert emu.result().stack == []
    # a POP into another register still takes what the model thinks is the result
    message = rejected(
        'PUSH ECX\nPUSH "Paris"\nCALL get_temperature\nCMP EAX, 18\nPOP R1', [get_temperature]
    )
    assert "line 5" in message and "POP the result right after the CALL" in message


def test_an_undeclared_name_written_first_is_a_variable() -> None:
    source = "MOV result_id, 42\nADD result_id, 1\nPUSH result_id\nPOP R1"
    assert regs(source) == {"R1": 43}


def test_a_variable_read_before_it_is_written_is_refused() -> None:
    message = rejected("CMP R1, 0\nJE skip\nMOV best, 5\nskip:\nPUSH best\nPOP R2")
    assert "best is read here before it is written on some path" in message


# -- the verifier ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("MOV R1, 5\nDIV R1, 0", "division by zero"),
        ("MOV R1, 5\nMOD R1, zero\nHLT\nsection .rodata\nzero dd 0", "division by zero"),
        ("MOV [limit], 3\nHLT\nsection .rodata\nlimit dd 5", "read-only data"),
        ("MOV limit, 3\nHLT\nsection .rodata\nlimit dd 5", "read-only data"),
        ("MOV EAX, [table + 12]\nHLT\nsection .data\ntable dd 1, 2, 3", "reads cell 3 of table"),
        ("MOV EAX, [table + 2]\nHLT\nsection .data\ntable dd 1, 2, 3", "not at a cell"),
        ("MOV EAX, [nowhere]", "names no data label"),
        ('MOV R1, "a"\nSHL R1, 1', "needs numbers"),
        ('MOV R1, "a"\nNEG R1', "needs numbers"),
        ("SETE AL", "tests the flags"),
        ('CMP R1, "a"\nCMOVL R2, R1', "needs an ordered compare"),
        ("LEA EAX, EBX", "needs a memory operand"),
        ('MOV ECX, "x"\nl:\nLOOP l', "LOOP counts ECX down, but on some path ECX holds a string"),
        ('MOV R2, "a"\nMOV R1, [t + R2]\nHLT\nsection .data\nt dd 1', "in the address [t + R2]"),
        ("DIV", "takes 1 or 2 operands"),
        ("MOV EAX, [size]\nHLT\nsection .data\nsize equ 4", "constant (equ)"),
    ],
)
def test_the_verifier_refuses_before_the_run(source: str, message: str) -> None:
    assert message in rejected(source)


def test_too_much_memory_is_refused() -> None:
    assert "more than the 4096" in rejected("HLT\nsection .bss\nbig resq 5000")
