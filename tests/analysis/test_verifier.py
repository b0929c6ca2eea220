"""Tests for the verifier: every check rejects its fault with the line, valid plans pass."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import get_args
from unittest import mock

import pytest
from fakes import NPC_PLAN
from hypothesis import given, settings
from hypothesis import strategies as st

import llassembly
from llassembly.analysis.shapes import Kind
from llassembly.analysis.summary import summarize
from llassembly.analysis.verifier import PathWalk, check, verify
from llassembly.errors import (
    AsmSyntaxError,
    PlanRejected,
)
from llassembly.language.instructions import OPCODE_INFO, Opcode, OperandKind
from llassembly.language.limits import MAX_CALL_DEPTH, MAX_PLAN_INSTRUCTIONS, MAX_STATES, MAX_STEPS
from llassembly.language.parser import parse
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Program,
    Reg,
)
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from


@dataclass(frozen=True)
class FakeTool:
    """A stand-in for the real tool adapter: just what ``ToolShape`` asks for."""

    name: str
    params: tuple[str, ...] = ()
    n_results: int = 1
    result_types: tuple[object, ...] = ()


def toolbox(*tools: FakeTool) -> dict[str, FakeTool]:
    return {tool.name: tool for tool in tools}


NPC_TOOLS = toolbox(
    FakeTool("get_current_position", (), 2),
    FakeTool("get_enemies_around", (), 1),
    FakeTool("has_sword", (), 1),
    FakeTool("pick_sword", (), 0),
    FakeTool("attack_enemy", ("enemy_id",), 0),
    FakeTool("make_one_step", ("x", "y"), 0),
    FakeTool("get_name", (), 1, (str,)),
    FakeTool("get_pair", (), 2, (int, str)),
)


@contextmanager
def counted_steps() -> Iterator[list[int]]:
    """Count the path analysis' state visits while the block runs (``[count]``): the
    verifier's work, measured without a clock. Each visit is one instruction in one calling
    context; the analysis stops at ``MAX_STEPS`` visits and ``MAX_STATES`` states."""
    count = [0]
    visit = PathWalk.transfer

    def counting(self: PathWalk, *args: object) -> object:
        count[0] += 1
        return visit(self, *args)  # type: ignore[arg-type]

    with mock.patch.object(PathWalk, "transfer", counting):
        yield count


def program_of(text: str) -> Program:
    result = parse(text)
    assert isinstance(result, Program)
    return result


def rejected(text: str, tools: dict[str, FakeTool] = NPC_TOOLS) -> str:
    """Verify ``text`` expecting a rejection; return the rendered error."""
    with pytest.raises(PlanRejected) as info:
        verify(program_of(text), tools)
    return str(info.value)


def accepted(text: str, tools: dict[str, FakeTool] = NPC_TOOLS) -> None:
    assert check(program_of(text), tools) == ()


# -- 1. unknown instructions ---------------------------------------------------------------


def test_unknown_instruction_is_rejected_with_its_line_and_the_valid_mnemonics() -> None:
    error = rejected("```asm\nMOV R1, 1\nMOVE R2, 3\nHLT\n```")
    assert "line 3, column 1: unknown instruction 'MOVE'" in error
    assert "did you mean MOV?" in error
    assert "PUSH, POP" in error


# -- 2. CALL targets -----------------------------------------------------------------------


def test_call_of_unknown_tool_is_rejected_listing_the_available_tools() -> None:
    error = rejected("PUSH 1\nCALL get_weather\nHLT", toolbox(FakeTool("b"), FakeTool("a")))
    assert "line 2, column 6: unknown tool 'get_weather'; available tools: a, b" in error


def test_call_of_unknown_tool_with_no_tools_says_there_are_none() -> None:
    assert "available tools: none" in rejected("CALL anything", {})


def test_call_of_a_name_that_is_both_a_tool_and_a_label_is_ambiguous() -> None:
    error = rejected("CALL has_sword\nHLT\nhas_sword:\nRET")
    assert "line 1" in error
    assert "ambiguous" in error
    assert "both a tool and a code label" in error


def test_tool_names_match_case_insensitively_when_unique() -> None:
    accepted("CALL Has_Sword\nPOP R1")


# -- 3. labels -----------------------------------------------------------------------------


def test_jump_to_undefined_label_is_rejected_with_its_line() -> None:
    error = rejected("start:\nINC R1\nJMP finish\nHLT")
    assert "line 3, column 5: jump to undefined label 'finish'; labels: start" in error


def test_label_defined_twice_is_rejected_at_the_second_definition() -> None:
    error = rejected("top:\nINC R1\ntop:\nHLT")
    assert "line 3, column 1: label 'top' is defined twice (first on line 1)" in error


def test_data_label_that_clashes_with_a_code_label_is_rejected() -> None:
    error = rejected('section .data\nname db "x"\nsection .text\nname:\nMOV R1, name\nHLT')
    assert "line 4" in error
    assert "both a code label and a data label" in error


def test_jump_to_a_label_at_the_very_end_is_accepted() -> None:
    accepted("CMP R1, 0\nJE done\nINC R1\ndone:")


# -- 4. operands ---------------------------------------------------------------------------


def test_wrong_operand_count_is_rejected_with_its_line() -> None:
    error = rejected("MOV R1, 1\nMOV R2\nHLT")
    assert "line 2, column 1: MOV takes 2 operands (a destination register and a value)" in error
    assert "but 1 was given" in error


def test_extra_operand_is_pointed_at() -> None:
    error = rejected("INC R1, R2")
    assert "line 1, column 9: INC takes 1 operand" in error


def test_destination_that_is_not_a_register_is_rejected() -> None:
    error = rejected("MOV 5, R1\nHLT")
    assert "line 1, column 5: the destination of MOV must be a register" in error


def test_unknown_name_used_as_a_value_is_rejected() -> None:
    error = rejected("MOV R1, R1\nPUSH target_x\nPOP R2")
    assert "line 2, column 6: unknown name 'target_x'" in error


def test_tool_used_as_a_value_is_rejected_with_a_hint_to_call_it() -> None:
    error = rejected("MOV R1, has_sword")
    assert "line 1" in error
    assert "'has_sword' is a tool, not a value; CALL it and POP its result" in error


def test_data_label_used_as_a_value_is_accepted() -> None:
    accepted('section .data\ncity db "Paris", 0\nsection .text\nPUSH city\nPOP R1\nHLT')


def test_jump_to_a_register_is_rejected() -> None:
    error = rejected("JMP R1")
    assert "line 1, column 5: JMP needs a label, not R1" in error


def test_call_of_a_number_is_rejected() -> None:
    assert "line 1, column 6: CALL needs a tool name or a label, not 5" in rejected("CALL 5")


# -- 5. stack depth ------------------------------------------------------------------------


def test_pop_on_empty_stack_is_rejected_with_its_line() -> None:
    error = rejected("MOV R1, 1\nPOP R2\nHLT")
    assert "line 2, column 1: POP on an empty stack" in error


def test_call_of_tool_with_too_few_values_on_the_stack_is_rejected() -> None:
    error = rejected("PUSH 5\nCALL make_one_step\nHLT")
    assert "line 2, column 1: CALL make_one_step takes 2 values from the stack (x, y)" in error
    assert "only 1 is there" in error


def test_call_missing_an_argument_on_one_path_only_is_rejected() -> None:
    plan = "CMP R1, 0\nJE skip\nPUSH 3\nskip:\nCALL attack_enemy\nHLT"
    error = rejected(plan)
    assert "line 5" in error
    assert "attack_enemy takes 1 value" in error
    assert "only 0 are there" in error


def test_pop_after_a_subroutine_that_pushes_is_accepted() -> None:
    accepted("CALL produce\nPOP R1\nHLT\nproduce:\nPUSH 42\nRET")


def test_pop_inside_a_subroutine_called_with_an_empty_stack_is_rejected() -> None:
    plan = "PUSH 1\nCALL take\nCALL take\nHLT\ntake:\nPOP R1\nRET"
    error = rejected(plan)
    assert "line 6, column 1: POP on an empty stack" in error
    assert error.count("POP on an empty stack") == 1


def test_each_faulty_instruction_is_reported_once() -> None:
    error = rejected("loop:\nPOP R1\nCALL has_sword\nJMP loop")
    assert error.count("POP on an empty stack") == 1


def test_recursion_is_refused_quickly_because_the_checker_cannot_follow_it() -> None:
    """A subroutine that calls itself has no fixed depth: the checker follows 16 nested calls,
    so it cannot tell whether the plan is fine and refuses it rather than waving it through."""
    plan = (
        "CALL down\nHLT\n"
        "down:\nCALL get_enemies_around\nPOP R1\nCMP R1, 0\nJE out\nCALL down\nout:\nRET"
    )
    with counted_steps() as steps:
        error = rejected(plan)
    # Each of the 8 instructions at most once per nesting level followed.
    assert steps[0] <= (MAX_CALL_DEPTH + 1) * 8
    assert "line 8, column 1: CALL down: subroutines nest deeper than 16 calls" in error
    assert "the checker cannot follow them" in error
    assert "loop" in error


def test_subroutines_nested_17_deep_are_refused_at_the_call_past_the_limit() -> None:
    """17 subroutines each POP once, with 16 values pushed: the 17th POP fails at run time,
    one level deeper than the checker follows. The plan must be refused, naming the limit."""
    lines = ["PUSH 0"] * 16 + ["CALL s1", "HLT"]
    for k in range(1, 18):
        lines += [f"s{k}:", "POP R1"] + ([f"CALL s{k + 1}"] if k < 17 else []) + ["RET"]
    error = rejected("\n".join(lines))
    call_s17 = 18 + 15 * 4 + 3  # the CALL s17 line inside s16
    assert f"line {call_s17}, column 1: CALL s17: subroutines nest deeper than 16 calls" in error


def test_subroutines_nested_16_deep_are_followed() -> None:
    lines = ["PUSH 0"] * 16 + ["CALL s1", "HLT"]
    for k in range(1, 17):
        lines += [f"s{k}:", "POP R1"] + ([f"CALL s{k + 1}"] if k < 16 else []) + ["RET"]
    accepted("\n".join(lines))


def _fan_out(sites: int, fan: int, levels: int, tail: str = "HLT") -> str:
    """``sites`` CALLs of s1; each of s1..s(levels-1) CALLs the next ``fan`` times."""
    lines = ["PUSH 1", "CALL attack_enemy", *["CALL s1"] * sites, tail, "HLT"]
    for k in range(1, levels + 1):
        lines.append(f"s{k}:")
        lines += [f"CALL s{k + 1}"] * fan if k < levels else ["NOP"]
        lines.append("RET")
    return "\n".join(lines)


def test_a_plan_with_too_many_paths_is_refused_quickly_naming_the_limit() -> None:
    """20 call sites of 4 nested subroutines, each calling the next 20 times: far more call
    contexts than the checker keeps. The POP after them fails at run time; it must not pass."""
    with counted_steps() as steps:
        error = rejected(_fan_out(20, 20, 4, tail="POP R1"))
    assert steps[0] <= MAX_STATES  # each state kept is visited once; then the check stops
    assert "the program has too many paths to check" in error
    assert "over 20000 states" in error


def test_a_plan_longer_than_the_size_limit_is_refused_before_any_path_is_followed() -> None:
    """More instructions than ``MAX_PLAN_INSTRUCTIONS`` (fewer than the states the path
    analysis keeps, so that limit is the size, not the states): one problem, at the first
    instruction past the limit, naming it; no path is walked."""
    plan = "PUSH 1\nCALL attack_enemy\n" + "NOP\n" * 20_000 + "POP R1"
    assert MAX_PLAN_INSTRUCTIONS < MAX_STATES
    with counted_steps() as steps:
        error = rejected(plan)
    assert steps[0] == 0
    assert (
        f"line {MAX_PLAN_INSTRUCTIONS + 1}, column 1: the plan has 20003 instructions; at most "
        f"{MAX_PLAN_INSTRUCTIONS} are accepted" in error
    )
    assert "1 problem" in error
    assert check(program_of(plan), NPC_TOOLS)[0].source == "NOP"


def test_many_branches_into_one_place_are_checked_quickly() -> None:
    """1,500 string compares jumping to one label, then a long tail: no repeated passes."""
    switch = "".join(f'CMP R1, "a{i}"\nJE target\n' for i in range(1500))
    plan = 'MOV R1, "a"\n' + switch + "target:\n" + "NOP\n" * 999 + "POP R1\ndone: HLT"  # 4,002
    with counted_steps() as steps:
        error = rejected(plan)
    assert steps[0] <= len(program_of(plan).instructions)  # one visit per instruction
    assert "line 4002, column 1: POP on an empty stack" in error
    assert "too many paths" not in error


def test_many_subroutine_calls_within_the_limits_are_followed() -> None:
    accepted(_fan_out(20, 4, 4))
    assert "line 23, column 1: POP on an empty stack" in rejected(_fan_out(20, 4, 4, "POP R1"))


def test_a_huge_program_of_subroutine_calls_is_checked_quickly() -> None:
    """75 KB of CALL lines are refused by their size at once; as many as the size limit
    allows, all calling one subroutine, are followed within the states kept."""
    sub = "HLT\nsub:\nPUSH 1\nCALL attack_enemy\nRET\n"
    plan = "```asm\n" + "CALL sub\n" * 8400 + sub + "```"
    assert len(plan) > 75_000
    with counted_steps() as steps:
        error = rejected(plan)
    assert steps[0] == 0
    assert f"at most {MAX_PLAN_INSTRUCTIONS} are accepted" in error
    with counted_steps() as steps:
        accepted("CALL sub\n" * (MAX_PLAN_INSTRUCTIONS - 6) + sub)
    assert 0 < steps[0] <= MAX_STATES


# -- 6. loops that never end ---------------------------------------------------------------


def test_loop_with_no_way_out_and_no_tool_call_is_rejected() -> None:
    error = rejected("MOV R1, 0\nloop:\nINC R1\nJMP loop")
    assert "line 3, column 1: this loop (lines 3-4) can never end" in error
    assert "no way out" in error


def test_loop_that_changes_nothing_is_rejected_with_its_lines() -> None:
    error = rejected("MOV R1, 1\nwait:\nCMP R1, 5\nJNE wait\nHLT")
    assert "line 3" in error
    assert "this loop (lines 3-4) can never end" in error
    assert "nothing in it changes a register or the stack and it calls no tool" in error


def test_self_loop_is_rejected() -> None:
    assert "this loop (line 1) can never end" in rejected("spin: JMP spin")


def test_loop_writing_only_r0_changes_nothing() -> None:
    error = rejected("top:\nINC R0\nCMP R1, 0\nJE top\nHLT")
    assert "nothing in it changes a register" in error


def test_loop_with_a_tool_call_and_a_way_out_is_accepted() -> None:
    accepted("wait:\nCALL has_sword\nPOP R1\nCMP R1, 0\nJE wait\nHLT")
    accepted("top:\nCALL has_sword\nPOP R1\nCMP R1, 0\nJE out\nCALL pick_sword\nJMP top\nout:")


def test_loop_with_no_way_out_is_rejected_even_when_it_calls_a_tool() -> None:
    """The tool's results cannot matter: nothing leaves the loop, so only a budget would stop
    it, after that many real calls."""
    error = rejected("forever:\nCALL pick_sword\nJMP forever")
    assert "line 2, column 1: this loop (lines 2-3) can never end: there is no way out" in error
    assert "it would CALL pick_sword again and again until a budget stops the plan" in error
    error = rejected("MOV R1, 1\ntop: PUSH R1\nCALL attack_enemy\nJMP top\nHLT")
    assert "line 2, column 6: this loop (lines 2-4) can never end" in error


def test_loop_through_a_subroutine_with_no_way_out_is_rejected() -> None:
    """Its only exit in the graph of code is into the subroutine, which always returns into
    it."""
    plan = "top:\nCALL send\nJMP top\nsend:\nPUSH 1\nCALL attack_enemy\nRET"
    error = rejected(plan)
    assert "line 2, column 1: this loop (lines 2-7) can never end: there is no way out" in error
    assert "CALL attack_enemy again and again" in error


def test_loop_whose_only_way_out_is_into_an_endless_loop_is_rejected_there() -> None:
    plan = "a:\nCALL has_sword\nPOP R1\nCMP R1, 0\nJE a\nb:\nCALL pick_sword\nJMP b"
    error = rejected(plan)
    assert "line 7, column 1: this loop (lines 7-8) can never end" in error
    assert "lines 2-5" not in error


def test_a_plan_with_a_loop_that_never_ends_is_refused_by_check_and_verify() -> None:
    """The public entry points, with plain functions as tools."""
    sent: list[int] = []

    def send(x: int) -> None:
        sent.append(x)

    plan = program_of("top:\nPUSH 1\nCALL send\nJMP top")
    (problem,) = llassembly.check(plan, [send])
    assert (problem.line, problem.column) == (2, 1) and "can never end" in problem.message
    with pytest.raises(PlanRejected, match="line 2, column 1: this loop"):
        llassembly.verify(plan, [send])
    assert sent == []


def test_counting_loop_with_dec_jnz_is_accepted() -> None:
    accepted("MOV R1, 3\nloop:\nPUSH R1\nCALL attack_enemy\nDEC R1\nJNZ loop\nHLT")
    accepted("MOV R1, 3\nloop: DEC R1\nJNZ loop")


def test_unreachable_loop_is_not_reported() -> None:
    accepted("HLT\nspin: JMP spin")


_TOP = "top:\nCALL has_sword\nPOP R1\n"


@pytest.mark.parametrize(
    ("tail", "lines"),
    [
        ('CMP R1, R1\nJE top\nJNE top\nSAY "x"', "2-5"),  # JE always jumps: JNE unreached
        ('CMP R1, 0\nJE top\nJNE top\nSAY "x"', "2-6"),  # one of the two always jumps
        ("CMP 1, 1\nJE top\nHLT", "2-5"),
        ("CMP 'a', 'a'\nJE top", "2-5"),  # the way out is the end of the plan
        ("CMPI R1, R1\nJGE top\nHLT", "2-5"),
        ("CMP R1, R1\nJLE top\nHLT", "2-5"),
        ("CMP R1, 5\nJL top\nJGE top\nHLT", "2-6"),
        ("CMP R1, 5\nJNE top\nJE top\nHLT", "2-6"),
    ],
)
def test_loop_whose_jumps_out_go_one_way_only_is_rejected(tail: str, lines: str) -> None:
    """A conditional jump whose flags are known on every run (after CMP of a value with
    itself, or right after a jump on the opposite condition) goes one way: a loop left only by
    its other way never ends, and a plan ran its tools until max_tool_calls."""
    error = rejected(_TOP + tail)
    assert (
        f"line 2, column 1: this loop (lines {lines}) can never end: there is no way out" in error
    )
    assert "no run takes its jumps out" in error
    assert "CALL has_sword again and again" in error


@pytest.mark.parametrize(
    "tail",
    [
        "CMP R1, R1\nJNE top\nHLT",  # never jumps back: runs once
        "CMP R1, R2\nJE top\nHLT",  # two registers: either way
        "CMP R1, 0\nJL top\nJG top\nHLT",  # equal falls through both
        "CMP R1, R1\nJL top\nJG top\nHLT",
        "CMP 1, 2\nJE top\nHLT",  # not known equal: either way, as far as the check knows
        "CMP R1, 0\nJE top\nINC R1\nJNE top\nHLT",  # INC sets the flags afresh
        "CMP R1, 0\nJE top\nCALL has_sword\nJNE top\nHLT",  # so does a tool's CALL
    ],
)
def test_loop_with_a_way_out_some_run_takes_is_accepted(tail: str) -> None:
    """Only a way no run can take is dropped: a plan some run can end is accepted."""
    accepted(_TOP + tail)


def test_an_entry_past_the_last_instruction_has_no_loop_to_report() -> None:
    """No state is reached: there is no flag to follow (this crashed the loop check)."""
    accepted("global done\nPUSH 1\nPOP R1\ndone:")


def test_a_jump_reached_with_different_flags_may_go_either_way() -> None:
    """``mid`` is reached from ``JE mid`` (equal) and after ``JE top`` (not equal): its JNE may
    fall through to the end, so the plan can end."""
    accepted(
        "CALL has_sword\nPOP R2\nCMP R2, 1\nJE mid\n"
        + _TOP
        + "CMP R1, 0\nJE top\nmid:\nJNE top\nHLT"
    )


# -- 7. ordered jumps after string compares -------------------------------------------------


@pytest.mark.parametrize(
    "plan",
    [
        'MOV R1, "abc"\nCMP R1, "abd"\nJL smaller\nHLT\nsmaller:\nHLT',
        'section .data\ncity db "Paris", 0\nsection .text\nMOV R1, "Rome"\nCMP R1, city\nJGE out\n'
        "out: HLT",
        'MOV R3, "y"\nCMP R2, 0\nJE numbers\nCMP R3, "x"\nJMP test\nnumbers:\nCMP R1, 5\ntest:\n'
        "JG out\nout: HLT",
        'MOV R1, "b"\nCMP R1, "a"\njb out\nout: HLT',
    ],
)
def test_ordered_jumps_after_a_string_compare_are_accepted(plan: str) -> None:
    """Texts have an order (by code point: ISO dates and times sort so)."""
    accepted(plan)


def test_a_compare_of_text_with_a_number_is_refused_where_the_types_are_known() -> None:
    def due(day: str) -> str:
        """When a day's report is due."""
        return day

    plan = program_of('PUSH "x"\nCALL due\nPOP R1\nCMP R1, 5\nJL out\nout: HLT')
    assert (
        "CMP compares R1, which is text, with 5, a number"
        in check(plan, externs_from([due]))[0].message
    )


def test_equality_jump_after_a_string_compare_is_accepted() -> None:
    accepted('MOV R1, "abd"\nCMP R1, "abc"\nJE out\nout: HLT')


def test_arithmetic_after_a_string_compare_makes_ordered_jumps_valid() -> None:
    accepted('MOV R1, "abd"\nCMP R1, "abc"\nDEC R2\nJL out\nout: HLT')


def test_ordered_jump_after_a_number_data_label_compare_is_accepted() -> None:
    accepted("section .data\nlimit dd 10\nsection .text\nCMP R1, limit\nJL out\nout: HLT")


# -- 8. conditional jumps with no flags set --------------------------------------------------


@pytest.mark.parametrize("mnemonic", ["JE", "JNZ", "JL", "JGE", "ja"])
def test_conditional_jump_before_any_flag_setting_instruction_is_rejected(mnemonic: str) -> None:
    error = rejected(f"MOV R1, 1\n{mnemonic} done\nNOP\ndone: HLT")
    assert f"line 2, column 1: {mnemonic.upper()} tests the flags, but on some path" in error
    assert "put a CMP before the jump" in error


def test_conditional_jump_with_no_flags_on_one_path_only_is_rejected() -> None:
    plan = "CALL has_sword\nPOP R1\nJMP test\nagain:\nCMP R1, 3\ntest:\nJL again\nHLT"
    error = rejected(plan)
    assert "line 7, column 1: JL tests the flags" in error


def test_a_tool_call_does_not_set_the_flags() -> None:
    error = rejected("CALL has_sword\nPOP R1\nJNZ armed\nCALL pick_sword\narmed: HLT")
    assert "line 3" in error and "tests the flags" in error


def test_flags_set_inside_a_subroutine_count_after_it_returns() -> None:
    accepted("CALL check\nJE yes\nHLT\ncheck:\nCALL has_sword\nPOP R1\nCMP R1, 0\nRET\nyes: HLT")


def test_an_unset_flags_jump_is_reported_once_not_at_every_jump_after_it() -> None:
    error = rejected("JE a\na: JNE b\nb: HLT")
    assert "line 1" in error and error.count("tests the flags") == 1


# -- 9. arithmetic on strings ----------------------------------------------------------------


@pytest.mark.parametrize("mnemonic", ["ADD", "SUB", "MUL", "IMUL"])
def test_arithmetic_with_a_string_literal_is_rejected(mnemonic: str) -> None:
    error = rejected(f'MOV R1, 1\n{mnemonic} R1, "x"\nHLT')
    column = len(mnemonic) + 6
    assert f'line 2, column {column}: {mnemonic} needs numbers, but "x" is a string' in error


def test_arithmetic_with_string_data_is_rejected() -> None:
    plan = 'section .data\nmsg db "hello", 0\nsection .text\nMOV R1, 1\nADD R1, msg\nHLT'
    error = rejected(plan)
    assert "line 5, column 9: ADD needs numbers, but 'msg' is string data" in error


def test_arithmetic_with_json_data_is_rejected() -> None:
    error = rejected('section .data\npoint db {"x": 1}\nsection .text\nSUB R1, point')
    assert "line 4" in error and "'point' is string data" in error


@pytest.mark.parametrize("mnemonic", ["INC", "DEC"])
def test_inc_or_dec_of_a_register_holding_a_string_is_rejected(mnemonic: str) -> None:
    error = rejected(f'MOV R1, "a"\n{mnemonic} R1')
    assert (
        f"line 2, column 5: {mnemonic} needs numbers, but on some path R1 holds a string" in error
    )


def test_a_register_holding_a_string_on_one_path_only_is_rejected() -> None:
    plan = 'MOV R1, 5\nCALL has_sword\nPOP R2\nCMP R2, 0\nJE go\nMOV R1, "five"\ngo:\nDEC R1\nHLT'
    error = rejected(plan)
    assert "line 8, column 5: DEC needs numbers, but on some path R1 holds a string" in error


def test_a_string_source_register_is_rejected_at_its_column() -> None:
    error = rejected('MOV R2, "a"\nMOV R1, 1\nADD R1, R2')
    assert "line 3, column 9: ADD needs numbers, but on some path R2 holds a string" in error


def test_a_string_moved_through_the_stack_is_followed() -> None:
    error = rejected('PUSH "a"\nPUSH 1\nPOP R1\nPOP R2\nINC R1\nINC R2')
    assert "line 6" in error and "R2 holds a string" in error
    assert "line 5" not in error


def test_a_string_from_a_tool_declared_to_return_str_is_followed() -> None:
    error = rejected("CALL get_name\nPOP R1\nINC R1")
    assert "line 3" in error and "R1 holds a string" in error
    error = rejected("CALL get_pair\nPOP R1\nPOP R2\nINC R1\nINC R2")
    assert "line 5" in error and "R2 holds a string" in error
    assert "line 4" not in error


def test_values_of_unknown_type_are_not_taken_for_strings() -> None:
    accepted("CALL get_enemies_around\nPOP R1\nINC R1\nHLT")
    accepted("CALL get_current_position\nPOP R1\nPOP R2\nADD R1, R2\nHLT")


def test_a_register_that_stops_holding_a_string_is_accepted() -> None:
    accepted('MOV R1, "a"\nMOV R1, 3\nINC R1')
    accepted('PUSH 4\nMOV R1, "a"\nPOP R1\nDEC R1')
    accepted('MOV R1, "a"\nMOV R0, R1\nINC R0\nADD R2, R0\nHLT')
    accepted("section .data\nlimit dd 10\nsection .text\nMOV R1, 1\nADD R1, limit\nHLT")


def test_a_register_used_without_being_named_is_checked_like_a_named_one() -> None:
    """``MUL src`` and ``DIV src`` work on EAX; with a string in EAX they fail at run time,
    so the verifier refuses them (the instruction table lists EAX among what they read)."""
    for op in ("MUL", "DIV", "IMUL", "IDIV"):
        error = rejected(f'MOV EAX, "x"\nMOV R1, 2\n{op} R1\nHLT')
        assert f"line 3, column 1: {op} R1 works on EAX without naming it, but on some " in error
        assert "EAX holds a string here" in error
    accepted('MOV EAX, "x"\nMOV R1, 2\nMUL R1, 3\nHLT')  # two operands: EAX is not read
    accepted('MOV EAX, "x"\nMOV EAX, 4\nMOV R1, 2\nMUL R1\nHLT')


def test_a_label_or_variable_holding_a_string_is_no_number() -> None:
    """A data label written with a string, a cell read by a fixed address, a variable: on some
    path each holds a string when the arithmetic reads it."""
    data = 'section .data\nlabel dd 5\nrow dd 1, "two", 3\nsection .text\n'
    error = rejected(data + 'MOV label, "s"\nMOV R1, 1\nADD R1, label\nHLT')
    assert "line 7, column 9: ADD needs numbers, but on some path label holds a string" in error
    error = rejected(data + "MOV R1, 1\nADD R1, [row + 4]\nHLT")
    assert "line 6, column 9: ADD needs numbers, but on some path [row + 4] holds a string" in error
    error = rejected(data + "MOV R2, [row + 4]\nSUB R1, R2\nHLT")
    assert "line 6, column 9: SUB needs numbers, but on some path R2 holds a string" in error
    error = rejected('MOV total, "none"\nINC total\nHLT')
    assert "line 2, column 5: INC needs numbers, but on some path total holds a string" in error


def test_memory_that_stops_holding_a_string_or_is_not_known_is_accepted() -> None:
    data = 'section .data\nlabel db "s"\nrow dd 1, "two", 3\nsection .text\n'
    accepted(data + "MOV label, 5\nMOV R1, 1\nADD R1, label\nHLT")
    accepted(data + "MOV R1, 1\nADD R1, [row]\nADD R1, [row + 8]\nHLT")
    accepted(data + "MOV ESI, 2\nMOV R1, 1\nADD R1, [row + ESI*4]\nHLT")  # not known
    accepted(data + "MOV [row + 4], 7\nMOV R1, 1\nADD R1, [row + 4]\nHLT")
    accepted('MOV R1, "a"\nMOV R2, 2\nXCHG R1, R2\nINC R1\nHLT')  # R1 holds the 2 now


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("CALL [rax]", "CALL needs a tool name or a label, not the memory operand [rax]"),
        ("JMP [x]", "JMP needs a label of the plan, not the memory operand [x]"),
        ("JE [x + 8]", "JE needs a label of the plan, not the memory operand [x + 8]"),
        ("LOOP [ECX]", "LOOP needs a label of the plan, not the memory operand [ECX]"),
    ],
)
def test_a_jump_or_call_through_memory_is_a_diagnostic_at_its_line(line: str, message: str) -> None:
    """There are no computed jumps: a memory operand where a label goes is refused at its
    column, on every path (the flow checks, which would need its target, are skipped)."""
    plan = f"section .data\nx dd 1, 2, 3\nsection .text\nCMP R1, 0\n{line}\nHLT"
    error = rejected(plan)
    column = len(line.split()[0]) + 2
    assert f"line 5, column {column}: {message}" in error
    with pytest.raises(PlanRejected, match="memory operand"):
        Emulator(program_of(plan), [])


# -- 10. the entry point and the end of the program ------------------------------------------


def test_global_naming_no_label_is_rejected_at_the_directive() -> None:
    error = rejected("section .text\nglobal nowhere\nstart:\nMOV R1, 1\nHLT")
    assert "line 2, column 8: global nowhere names no code label" in error
    assert "code labels: start" in error


def test_global_naming_a_data_label_is_rejected() -> None:
    error = rejected('section .data\nmain db "x"\nsection .text\nglobal main\nMOV R1, 1')
    assert "line 4, column 8: global main names a data label, not a code label" in error


def test_global_naming_a_code_label_in_another_case_is_accepted() -> None:
    accepted("global _START\nhelper:\nRET\n_start:\nCALL helper\nHLT")


def test_data_label_named_like_a_register_is_refused_before_verification() -> None:
    """``MOV R1, R5`` would read register R5, never the data: the parser refuses the name."""
    with pytest.raises(AsmSyntaxError) as info:
        parse('section .data\nR5 db "hello", 0\nsection .text\nMOV R1, R5\nHLT')
    assert "line 2, column 1: data label 'R5' has the name of a register" in str(info.value)


def test_subroutine_that_runs_past_the_end_of_the_program_is_rejected() -> None:
    error = rejected("CALL sub\nMOV R1, 1\nHLT\nsub:\nCALL pick_sword")
    assert "line 5, column 1: on some path the subroutine 'sub' (CALLed on line 1) runs" in error
    assert "end the subroutine with RET" in error


def test_subroutine_that_jumps_to_a_label_at_the_end_is_rejected() -> None:
    error = rejected("CALL sub\nHLT\nsub:\nCALL has_sword\nPOP R1\nCMP R1, 0\nJE done\nRET\ndone:")
    assert "line 7" in error and "'sub' (CALLed on line 1)" in error


def test_call_of_a_label_at_the_very_end_is_rejected() -> None:
    error = rejected("CALL done\nHLT\ndone:")
    assert "line 1" in error and "'done' (CALLed on line 1)" in error


def test_return_to_the_end_inside_an_outer_subroutine_is_rejected() -> None:
    error = rejected("CALL outer\nHLT\ninner:\nRET\nouter:\nCALL inner")
    assert "line 6" in error and "'outer' (CALLed on line 1)" in error


def test_top_level_code_may_run_past_the_end() -> None:
    accepted("CALL sub\nMOV R1, 1\nJMP fin\nsub:\nRET\nfin:")
    accepted("global _start\nhelper: MOV R1, 1\nRET\n_start: MOV R2, 2\nCALL helper")


# -- several faults, ordering, skipping ----------------------------------------------------


def test_several_faults_are_all_reported_sorted_by_line() -> None:
    plan = "```asm\nFOO R1\nMOV 3, R1\nCALL nope\nJMP nowhere\nPUSH mystery\n```"
    with pytest.raises(PlanRejected) as info:
        verify(program_of(plan), NPC_TOOLS)
    lines = [d.line for d in info.value.diagnostics]
    assert lines == [2, 3, 4, 5, 6]
    assert "5 problems" in str(info.value)


def test_stack_and_loop_faults_are_reported_together() -> None:
    error = rejected("POP R1\nJL x\nx:\nspin: JMP spin")
    assert "line 1" in error and "POP on an empty stack" in error
    assert "line 2" in error and "tests the flags" in error
    assert "line 4" in error and "can never end" in error


def test_flow_checks_are_skipped_when_a_jump_target_is_undefined() -> None:
    diagnostics = check(program_of("POP R1\nJMP nowhere"), NPC_TOOLS)
    assert [d.message.split(" ")[0] for d in diagnostics] == ["jump"]


def test_diagnostics_carry_the_source_line_for_the_caret() -> None:
    (diagnostic,) = check(program_of("  POP R1   ; take"), NPC_TOOLS)
    assert diagnostic.source == "  POP R1   ; take"
    assert diagnostic.column == 3


# -- valid programs -------------------------------------------------------------------------


def test_npc_plan_is_accepted() -> None:
    accepted(NPC_PLAN)


def test_top_level_ret_after_subroutine_calls_is_accepted() -> None:
    accepted("CALL helper\nCALL helper\nRET\nhelper:\nCALL pick_sword\nRET")


def test_entry_point_from_global_directive_is_used() -> None:
    accepted("global _start\nhelper:\nPOP R1\nRET\n_start:\nPUSH 1\nCALL helper\nHLT")


def test_verifying_a_sixty_instruction_plan_is_fast() -> None:
    program = program_of(NPC_PLAN)
    assert len(program.instructions) >= 40
    with counted_steps() as steps:
        check(program, NPC_TOOLS)
    # Loops and all, the analysis visits each instruction about once (the worst times of
    # parse + verify on hostile replies are measured by benchmarks/bench_hostile.py).
    assert steps[0] <= 2 * len(program.instructions)


# -- robustness -----------------------------------------------------------------------------

_NAMES = st.sampled_from(["loop", "end", "sub", "has_sword", "make_one_step", "city", "zzz"])
_OPERANDS: st.SearchStrategy[Operand] = st.one_of(
    st.builds(Reg, st.integers(0, 3), st.just("R1")),
    st.builds(Imm, st.one_of(st.integers(-2, 2), st.just("s"), st.just(1.5))),
    st.builds(Name, _NAMES),
    st.builds(  # memory: a known label, an unknown one, none; through a register or not
        Mem,
        st.sampled_from([None, "city", "zzz"]),
        st.one_of(st.none(), st.builds(Reg, st.integers(0, 3), st.just("R1"))),
        st.none(),
        st.just(1),
        st.sampled_from([0, 3, 8, -8]),
        st.just(0),
        st.just("[m]"),
    ),
)


_LABELS = ["loop", "end", "sub", "has_sword"]
_TARGETS = st.sampled_from(["loop", "end", "sub", "pick_sword", "make_one_step", "has_sword"])


def _well_formed(draw: st.DrawFn, kind: OperandKind) -> Operand:
    """An operand of the right kind, so the flow checks run too."""
    if kind == "reg":
        return Reg(draw(st.integers(0, 3)), "R1")
    if kind in ("label", "target") and draw(st.integers(0, 9)) == 0:
        return Mem(draw(st.sampled_from([None, "city"])), Reg(1, "R1"), text="[R1]")
    if kind == "label":
        return Name(draw(st.sampled_from(_LABELS[:3])))
    if kind == "target":
        return Name(draw(_TARGETS))
    return draw(_OPERANDS.filter(lambda o: not isinstance(o, Name)))


@st.composite
def _programs(draw: st.DrawFn, *, well_formed: bool) -> Program:
    count = draw(st.integers(0, 25))
    instructions = []
    for i in range(count):
        op = draw(st.sampled_from(list(Opcode)))
        if well_formed:
            operands = tuple(_well_formed(draw, kind) for kind in OPCODE_INFO[op].operands)
        else:
            operands = tuple(draw(st.lists(_OPERANDS, max_size=3)))
        instructions.append(Instruction(op, operands, line=i + 1, column=1, text=""))
    keys = _LABELS[:3] if well_formed else draw(st.lists(st.sampled_from(_LABELS), unique=True))
    labels = {key: draw(st.integers(0, count)) for key in keys}
    return Program(
        instructions=tuple(instructions),
        labels=labels,
        data={"city": "Paris"},
        entry=draw(st.integers(0, count)),
        label_lines={key: ((1, 1),) for key in labels},
        label_names={key: key for key in labels},
    )


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.one_of(_programs(well_formed=False), _programs(well_formed=True)))
def test_random_programs_never_crash_the_verifier(program: Program) -> None:
    """Nor the summary, which still returns for a plan that does not verify."""
    with counted_steps() as steps:
        diagnostics = check(program, NPC_TOOLS)
    assert steps[0] <= MAX_STEPS
    assert list(diagnostics) == sorted(diagnostics, key=lambda d: (d.line, d.column))
    summary = summarize(program, NPC_TOOLS)
    assert summary.complete or summary.max_tool_calls is None


def test_the_kinds_an_instruction_never_reads_are_kinds_of_shapes() -> None:
    """The instruction table names, in its own layer, the kinds the verifier's shapes have: a
    misspelt kind would refuse nothing."""
    never = {kind for info in OPCODE_INFO.values() for kind in info.never}
    assert never and never <= set(get_args(Kind))
    assert all(info.takes for info in OPCODE_INFO.values() if info.never)
