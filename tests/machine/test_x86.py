"""The x86 habits: every instruction added for them, with the flags after each, memory, the
EAX convention for tool results, variables, and what the verifier refuses (docs/language.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from llassembly.errors import (
    AsmRuntimeError,
    PlanRejected,
    UsageError,
)
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator


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
        # the flags each instruction leaves: set from the result, or left as they were
        ("MOV R1, 4\nSHR R1", {"R1": 2}, (False, False, "ordered")),
        ("MOV R1, -4\nSAR R1", {"R1": -2}, (False, True, "ordered")),
        ("MOV R1, -1\nSHR R1, 0", {"R1": -1}, (False, True, "ordered")),
        ("MOV EAX, 3\nIMUL 4", {"EAX": 12}, (False, False, "ordered")),
        ("MOV R2, -3\nIMUL R1, R2, 4", {"R1": -12, "R2": -3}, (False, True, "ordered")),
        ("MOV EAX, 6\nCDQ\nCQO\nCWD\nCDQE", {"EAX": 6}, (False, False, "unset")),
        ("CMP 1, 2\nMOV R1, 5", {"R1": 5}, (False, True, "ordered")),
        ("CMP 1, 2\nNOT R1", {"R1": -1}, (False, True, "ordered")),
        ("CMP 1, 2\nLEA R1, [R2 + 3]", {"R1": 3}, (False, True, "ordered")),
        ("CMP 1, 2\nMOV R1, 7\nXCHG R1, R2", {"R2": 7}, (False, True, "ordered")),
        ("MOV ECX, 2\nCMP 1, 2\nl:\nLOOP l", {}, (False, True, "ordered")),
        ("CMP 1, 2\nMOV xmm0, 1\nADDSD xmm0, 1", {"XMM0": 2.0}, (False, True, "ordered")),
        (
            "CMP 1, 2\nCVTSI2SS xmm0, 3\nSQRTSS xmm1, 4",
            {"XMM0": 3.0, "XMM1": 2.0},
            (False, True, "ordered"),
        ),
        ("MOVSS xmm0, 2\nUCOMISS xmm0, 2", {"XMM0": 2}, (True, False, "ordered")),
        ("MOVSD xmm0, 3\nUCOMISD xmm0, 2\nCOMISS xmm0, 9", {"XMM0": 3}, (False, True, "ordered")),
        (
            "MOV xmm0, 2.5\nXORPS xmm0, xmm0\nMOVAPS xmm1, 1\nXORPD xmm1, xmm1",
            {},
            (True, False, "ordered"),
        ),
        (
            "MOV R1, -3\nMOVZX EAX, R1\nMOVSX EBX, R1\nMOVSXD ECX, R1",
            {"R1": -3, "EAX": -3, "EBX": -3, "ECX": -3},
            (False, False, "unset"),
        ),
        (
            "MOVUPS xmm0, 1\nMOVUPD xmm1, 2\nMOVAPD xmm2, 3\nMOVQ RAX, xmm2\nMOVD EBX, xmm0",
            {"XMM0": 1, "XMM1": 2, "XMM2": 3, "EAX": 3, "EBX": 1},
            (False, False, "unset"),
        ),
        (
            "MOV AX, 3\nADD AL, 1\nMOV BL, AL\nMOV SIL, 1\nMOV DIL, 2\nMOV BPL, 3\nMOV DX, 4",
            {"EAX": 4, "EBX": 4, "ESI": 1, "EDI": 2, "EBP": 3, "EDX": 4},
            (False, False, "ordered"),
        ),
        (
            "MOV R1, 5\nMOV R1, byte [n]\nINC qword ptr [n]\nHLT\nsection .data\nn dd -1",
            {"R1": -1},
            (True, False, "ordered"),
        ),
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
        ("JZ", 2, 2, True),
        ("JNZ", 2, 2, False),
        ("JLT", 1, 2, True),
        ("JGT", 3, 2, True),
        ("JNAE", 1, 2, True),
        ("JNA", 2, 2, True),
        ("JNG", 3, 2, False),
        ("JNBE", 3, 2, True),
        ("JNB", 1, 2, False),
        ("JNL", 2, 2, True),
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


def test_loop_from_zero_counts_on_past_zero_until_the_budget() -> None:
    # ECX - 1 is tested, as on x86: starting at 0 it never reaches 0 again.
    from llassembly.errors import InstructionBudgetExceeded

    with pytest.raises(InstructionBudgetExceeded):
        machine("MOV ECX, 0\nl:\nLOOP l")


def test_there_is_no_sign_or_carry_flag_s_and_b_read_lt() -> None:
    # On x86 TEST clears CF, so JB would never jump; here JB reads LT, the sign of the value.
    taken = "\nMOV R2, 1\nHLT\nyes:\nMOV R2, 2"
    assert regs("MOV R1, -5\nTEST R1, R1\nJB yes" + taken)["R2"] == 2
    assert regs("MOV R1, -5\nTEST R1, R1\nJS yes" + taken)["R2"] == 2
    assert regs("MOV R1, 5\nTEST R1, R1\nJC yes" + taken)["R2"] == 1
    assert regs("MOV R1, -1\nAND R1, 3\nJNS yes" + taken)["R2"] == 2


def test_setcc_and_cmovcc_take_the_jump_spellings() -> None:
    assert regs("CMP 1, 2\nSETB AL\nSETNAE BL\nSETS CL\nSETZ DL") == {
        "EAX": 1,
        "EBX": 1,
        "ECX": 1,
    }
    assert regs("MOV R2, 4\nCMP 3, 2\nCMOVA R1, R2\nCMOVNZ R3, R2\nCMOVBE R4, R2") == {
        "R1": 4,
        "R2": 4,
        "R3": 4,
    }


def test_test_of_a_register_holding_a_string_tests_emptiness_only() -> None:
    assert regs('MOV R1, ""\nTEST R1, R1\nJZ empty\nMOV R2, 1\nempty:')["R1"] == ""
    assert "needs an ordered compare" in failure('MOV R1, "x"\nTEST R1, R1\nJL l\nl:')


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
        ("MOV R1, 5\nDIV R1, z\nHLT\nsection .data\nz dd 0", "division by zero"),
        ("MOV xmm1, 0\nMOV xmm0, 1\nDIVSD xmm0, xmm1", "division by zero"),
        ("MOV EAX, 1\nMOV R1, [EAX]", "points outside every data label"),
        ("LEA EAX, [t]\nMOV [EAX], 1\nHLT\nsection .rodata\nt dd 7", "read-only data"),
        ("MOV R1, 1\nMOV R2, 1\nSHL R1, R2\nSAR R1, -1", "shifts by 0 to 63 bits"),
        ("MOV R1, 1e300\nCVTTSD2SI R1, R1", "overflowed"),
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


def test_a_bare_row_reads_as_the_json_list_of_its_cells() -> None:
    source = (
        "MOV [t + 4], 9\nMOV R1, t\nMOV R2, cities\nHLT\nsection .data\nt dd 1, 2, 3\n"
        'section .rodata\ncities dd paris, oslo\nparis db "Paris", 0\noslo db "Oslo", 0'
    )
    assert regs(source) == {"R1": "[1,9,3]", "R2": '["Paris","Oslo"]'}


def test_cells_are_values_whatever_their_size_word_and_size() -> None:
    source = (
        "MOV R1, [t + 8]\nMOV R2, byte [t + 8]\nMOV R3, [w + 2]\nMOV R4, [s]\nMOV R5, [j]\n"
        "MOV R6, [t + 0x10]\nMOV R7, [t + 2*8]\nMOV R8, QWORD PTR [t]\nHLT\nsection .data\n"
        't dq 1.5, 2.5, 3.5\nw dw 1, 2\ns db "hello", 0\nj db {"a": 1}'
    )
    assert regs(source) == {
        "R1": 2.5,
        "R2": 2.5,
        "R3": 2,
        "R4": "hello",
        "R5": '{"a":1}',
        "R6": 3.5,
        "R7": 3.5,
        "R8": 1.5,
    }


def test_data_before_any_section_is_writable_and_variables_are_memory() -> None:
    emu = machine("x dd 1\nMOV [x], 5\nMOV best, 7\nMOV R1, [best]\nMOV R2, x")
    assert emu.result().registers == {"R1": 7, "R2": 5}
    assert emu.snapshot()["memory"] == {"x": [5], "best": [7]}


def test_addresses_sections_rows_and_size_words() -> None:
    # the first data label is at 1048576; SAR rounds toward minus infinity
    assert regs("LEA EAX, [t]\nMOV R1, -5\nSAR R1, 1\nHLT\nsection .data\nt dd 1") == {
        "EAX": 1048576,
        "R1": -3,
    }
    for section in (".rdata", ".const", ".rodata"):
        assert "read-only data" in rejected(f"MOV [t], 1\nHLT\nsection {section}\nt dd 1")
    assert regs("MOV R1, xmmword [t]\nMOV R2, tword ptr [t]\nHLT\nsection .data\nt dd 4") == {
        "R1": 4,
        "R2": 4,
    }
    from llassembly.errors import AsmSyntaxError

    with pytest.raises(AsmSyntaxError, match="no data label with a value"):
        parse("HLT\nsection .data\na dd b\nb dd c\nc dd 1")


def test_a_write_through_a_register_address_keeps_every_writable_label() -> None:
    source = "LEA ESI, [y]\nMOV [ESI], 5\nHLT\nsection .data\nx dd 1\ny dd 2\nz dd 3, 4"
    assert machine(source).snapshot()["memory"] == {"x": [1], "y": [5], "z": [3, 4]}


def test_xchg_and_cmov_work_with_memory() -> None:
    source = "MOV R1, 3\nXCHG R1, [t]\nCMP 1, 1\nCMOVE R2, [t]\nHLT\nsection .data\nt dd 8"
    emu = machine(source)
    assert emu.result().registers == {"R1": 8, "R2": 3}
    assert emu.state.mem == {"t": [3]}


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
        ("LEA EAX, EBX", "needs a memory operand"),
        ('MOV ECX, "x"\nl:\nLOOP l', "LOOP counts ECX down, but on some path ECX holds a string"),
        ('MOV R2, "a"\nMOV R1, [t + R2]\nHLT\nsection .data\nt dd 1', "in the address [t + R2]"),
        ("DIV", "takes 1 or 2 operands"),
        ("MOV EAX, [size]\nHLT\nsection .data\nsize equ 4", "constant (equ)"),
        ("MOV EAX, 5\nDIV 0", "division by zero"),
        ("MOV xmm0, 1\nDIVSS xmm0, 0.0", "division by zero"),
        ("MOV R1, 5\nIDIV R1, z\nHLT\nsection .data\nz equ 0", "division by zero"),
        ('MOV R1, 5\nTEST R1, "a"', "TEST needs numbers"),
        ('MOV R1, "a"\nAND R1, 1', "needs numbers"),
        ('CVTSI2SD xmm0, "x"', "needs numbers"),
        ("MOV [t + 4], 1\nHLT\nsection .rodata\nt dd 1, 2", "read-only data"),
        ("MOV t, 5\nHLT\nsection .data\nt dd 1, 2", "t has 2 cells; write one of them"),
        ("MOV R1, [t - 4]\nHLT\nsection .data\nt dd 1, 2", "reads cell -1 of t"),
        ('MOV R1, [s + 1]\nHLT\nsection .data\ns db "hello", 0', "reads cell 1 of s"),
        ("MOV R1, [best]", "names no data label"),
        ("INC counter", "the destination of INC must be a register"),
        ("CMOVE EAX, 1", "tests the flags"),
        ("XCHG R1", "takes 2 operands"),
        ("SHL", "takes 1 or 2 operands"),
        ("IMUL", "takes 1 or 2 or 3 operands"),
    ],
)
def test_the_verifier_refuses_before_the_run(source: str, message: str) -> None:
    assert message in rejected(source)


def test_too_much_memory_is_refused_while_parsing() -> None:
    # Counted before the cells are built: a short reply cannot make millions of them.
    from llassembly.errors import AsmSyntaxError

    for data in ("big resq 5000", "big times 4000 dd 1, 2", "a resd 4000\nb resd 97"):
        with pytest.raises(AsmSyntaxError, match="more than the 4096 cells"):
            parse("HLT\nsection .bss\n" + data)
    assert isinstance(parse("HLT\nsection .bss\nbig resq 4096"), Program)


def test_variables_count_against_the_memory_budget() -> None:
    assert "more than the 4096" in rejected("MOV extra, 1\nHLT\nsection .bss\nbig resq 4096")


def test_reads_of_eax_after_calls_of_other_shapes_keep_the_stack() -> None:
    # A write of EAX first, or a PUSH of EAX: the result is on the stack, or pushed from EAX.
    assert regs('PUSH "Oslo"\nCALL get_temperature\nMOV EAX, 1\nPOP R1', [get_temperature]) == {
        "EAX": 1,
        "R1": 3.0,
    }
    emu = machine('PUSH "Oslo"\nCALL get_temperature\nPUSH EAX\nPOP R1', [get_temperature])
    assert emu.result().registers == {"EAX": 3.0, "R1": 3.0}


def test_arithmetic_reaches_the_lowest_64_bit_integer_and_no_further() -> None:
    assert regs("MOV R1, -9223372036854775807\nDEC R1") == {"R1": -(2**63)}
    assert "overflowed" in failure("MOV R1, -9223372036854775807\nDEC R1\nDEC R1")


def test_an_ordered_jump_after_testing_a_string_names_cmp_or_test() -> None:
    message = failure('PUSH "x"\nPOP R1\nMOV R2, R1\nTEST R2, R2\nJL there\nthere:\nHLT')
    assert "or TEST tested a text), which have no order" in message
