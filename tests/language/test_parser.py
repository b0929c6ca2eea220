"""Tests for the parser: every dialect real models write parses and runs; bad text is reported.

Each dialect test parses a reply and then runs it on the emulator with plain typed Python
functions as tools, so the test pins what the program *does*, not only how it was read.
"""

from __future__ import annotations

import pytest

from llassembly.errors import (
    AsmSyntaxError,
    EmptyReply,
)
from llassembly.language.instructions import Opcode
from llassembly.language.parser import parse
from llassembly.language.program import (
    NONE,
    Imm,
    Name,
    PlainAnswer,
    Program,
    Reg,
)
from llassembly.machine.emulator import Emulator
from llassembly.machine.state import RunResult

# ---------------------------------------------------------------------------------------------
# Tools and helpers


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def position() -> tuple[int, int]:
    """Return (x, y)."""
    return (3, 4)


TOOLS = [add, shout, position]


def program_of(reply: str) -> Program:
    parsed = parse(reply)
    assert isinstance(parsed, Program), parsed
    return parsed


def run(reply: str) -> RunResult:
    return Emulator(program_of(reply), TOOLS).run()


def syntax_error(reply: str) -> AsmSyntaxError:
    with pytest.raises(AsmSyntaxError) as info:
        parse(reply)
    return info.value


def called(result: RunResult) -> list[tuple[str, dict[str, object]]]:
    return [(record.call.tool, record.call.args) for record in result.calls]


# ---------------------------------------------------------------------------------------------
# Fences


@pytest.mark.parametrize("tag", ["asm", "nasm", "assembly", "x86asm", "", "ASM"])
def test_backtick_fence_with_any_language_tag_runs(tag: str) -> None:
    reply = f"```{tag}\nPUSH 2\nPUSH 3\nCALL add\nPOP R1\n```"
    result = run(reply)
    assert result.registers == {"R1": 5}
    assert called(result) == [("add", {"a": 2, "b": 3})]


def test_tilde_fence_runs() -> None:
    assert run("~~~\nMOV R1, 7\n~~~").registers == {"R1": 7}


def test_several_fenced_blocks_are_read_in_order() -> None:
    reply = (
        "First set up:\n```asm\nMOV R1, 1\n```\nThen add:\n```asm\nADD R1, 10\nMOV R2, R1\n```\n"
    )
    program = program_of(reply)
    assert [i.line for i in program.instructions] == [3, 7, 8]
    assert run(reply).registers == {"R1": 11, "R2": 11}


def test_python_fence_next_to_an_asm_fence_is_ignored() -> None:
    reply = "```python\nx = add(1, 2)\nprint(x)\n```\n```asm\nMOV R1, 3\n```"
    assert run(reply).registers == {"R1": 3}


def test_prose_before_and_after_a_fence_is_ignored() -> None:
    reply = (
        "Sure! Here is the plan: MOV the numbers, then CALL add.\n"
        "\n"
        "```nasm\n"
        "PUSH 40\n"
        "PUSH 2\n"
        "CALL add\n"
        "POP EAX\n"
        "```\n"
        "This pushes 40 and 2, calls add and pops the answer.\n"
        "MOV R9, 9 would be wrong here.\n"
    )
    result = run(reply)
    assert result.registers == {"EAX": 42}


def test_prose_before_and_after_unfenced_code_is_ignored() -> None:
    reply = (
        "Here is my plan.\n"
        "I will add the numbers.\n"
        "PUSH 1\n"
        "PUSH 2\n"
        "CALL add\n"
        "POP R1\n"
        "That's it, hope it helps!\n"
    )
    program = program_of(reply)
    assert [i.line for i in program.instructions] == [3, 4, 5, 6]
    assert run(reply).registers == {"R1": 3}


def test_fence_with_crlf_line_endings_runs_and_keeps_line_numbers() -> None:
    reply = "Plan:\r\n```asm\r\nMOV R1, 1\r\nINC R1\r\n```\r\n"
    program = program_of(reply)
    assert [i.line for i in program.instructions] == [3, 4]
    assert [i.text for i in program.instructions] == ["MOV R1, 1", "INC R1"]
    assert run(reply).registers == {"R1": 2}


def test_lone_carriage_returns_split_lines() -> None:
    assert run("MOV R1, 1\rMOV R2, 2").registers == {"R1": 1, "R2": 2}


# ---------------------------------------------------------------------------------------------
# <think> blocks


def test_think_block_with_fake_code_is_ignored() -> None:
    reply = "<think>\nMaybe:\n```asm\nMOV R1, 99\n```\nMOV R2, 99\n</think>\n```asm\nMOV R1, 1\n```"
    program = program_of(reply)
    assert [i.line for i in program.instructions] == [9]
    assert run(reply).registers == {"R1": 1}


def test_think_block_on_one_line_with_code_after_it() -> None:
    reply = "<think>MOV R1, 99</think>MOV R1, 1\nINC R1"
    program = program_of(reply)
    assert program.instructions[0].column == len("<think>MOV R1, 99</think>") + 1
    assert run(reply).registers == {"R1": 2}


def test_lone_closing_think_drops_everything_before_it() -> None:
    reply = "I think MOV R1, 99 is right\nMOV R1, 99\n</think>\nMOV R1, 1\nHLT"
    program = program_of(reply)
    assert [i.line for i in program.instructions] == [4, 5]
    assert run(reply).registers == {"R1": 1}


def test_unclosed_think_hides_the_rest() -> None:
    assert isinstance(parse("MOV R1, 1\n<think>\nMOV R2, 2"), Program)
    assert run("MOV R1, 1\n<think>\nMOV R2, 2").registers == {"R1": 1}


# ---------------------------------------------------------------------------------------------
# Layout: case, labels, comments, tabs


def test_lower_and_mixed_case_opcodes_and_registers() -> None:
    reply = "mov r1, 5\nMov Eax, 2\nadd R1, eax\nsUb r1, 1"
    assert run(reply).registers == {"R1": 6, "EAX": 2}


def test_label_and_instruction_on_one_line() -> None:
    reply = "```asm\n    MOV R1, 0\nloop: INC R1\n    CMP R1, 3\n    JL loop\n```"
    program = program_of(reply)
    assert program.labels == {"loop": 1}
    assert program.instructions[1].column == len("loop: ") + 1
    assert run(reply).registers == {"R1": 3}


def test_labels_are_case_insensitive_and_dot_labels_work() -> None:
    reply = "MOV R1, 0\n.Top:\nINC R1\nCMP R1, 2\nJNE .top\nJMP END\nMOV R1, 99\nend:"
    assert run(reply).registers == {"R1": 2}


@pytest.mark.parametrize("comment", ["; note", "# note", "// note", ";", '#x, [R1], "open'])
def test_comments_run_to_the_end_of_the_line(comment: str) -> None:
    reply = f"{comment}\nMOV R1, 4 {comment}\nADD R1, 1{comment}"
    assert run(reply).registers == {"R1": 5}


def test_comment_characters_inside_strings_are_kept() -> None:
    reply = "MOV R1, \"a;b#c//d\" ; real comment\nMOV R2, 'x;y'\nPUSH R1\nCALL shout\nPOP R3"
    result = run(reply)
    assert result.registers == {"R1": "a;b#c//d", "R2": "x;y", "R3": "A;B#C//D"}


def test_string_escapes() -> None:
    program = program_of(r'MOV R1, "say \"hi\"\n\tdone\\"')
    assert program.instructions[0].operands[1] == Imm('say "hi"\n\tdone\\')


def test_tabs_are_whitespace() -> None:
    reply = "\tMOV\tR1,\t2\nloop:\tDEC\tR1\n\tJNZ\tloop"
    program = program_of(reply)
    assert program.instructions[0].column == 2
    assert run(reply).registers == {}


# ---------------------------------------------------------------------------------------------
# Registers


def test_eax_style_registers_and_rax_aliases_are_the_same_registers() -> None:
    reply = (
        "MOV RAX, 1\nMOV ebx, 2\nADD EAX, RBX\nMOV rcx, eax\n"
        "MOV RDX, 4\nMOV RSI, 5\nMOV RDI, 6\nMOV RBP, 7"
    )
    result = run(reply)
    assert result.registers == {
        "EAX": 3,
        "EBX": 2,
        "ECX": 3,
        "EDX": 4,
        "ESI": 5,
        "EDI": 6,
        "EBP": 7,
    }


def test_r0_is_a_throw_away_register() -> None:
    reply = "MOV R0, 5\nMOV R1, R0\nPUSH 9\nPOP R0\nINC R0\nMOV R2, R0\nADD R2, 1"
    result = run(reply)
    assert result.registers == {"R2": 1}
    assert result.stack == []


def test_r100_is_a_register() -> None:
    assert run("MOV R100, 1").registers == {"R100": 1}


# ---------------------------------------------------------------------------------------------
# Data section


@pytest.mark.parametrize(
    ("open_data", "open_text"),
    [
        ("section .rodata", "section .text"),
        ("section .data", "section .text"),
        ("SECTION .DATA", ".text"),
        ("segment .data", "segment .text"),
        (".data", ".text"),
    ],
)
def test_data_section_spellings(open_data: str, open_text: str) -> None:
    reply = f'{open_data}\ngreeting db "Hello, World", 0\n{open_text}\nMOV R1, greeting'
    program = program_of(reply)
    assert program.data == {"greeting": "Hello, World"}
    assert run(reply).registers == {"R1": "Hello, World"}


def test_data_string_keeps_case_and_newline_codes() -> None:
    reply = (
        'section .data\nmsg db "MiXeD Text", 10, "Two", 13, 10, 0\nsection .text\nPUSH msg\nPOP R1'
    )
    assert run(reply).registers == {"R1": "MiXeD Text\nTwo\r\n"}


def test_data_name_with_colon() -> None:
    reply = (
        'section .data\nname: db "Ada"\nratio:   dq 0.5\nsection .text\nMOV R1, name\nMOV R2, ratio'
    )
    assert run(reply).registers == {"R1": "Ada", "R2": 0.5}


def test_data_label_lookup_is_case_insensitive_and_value_case_is_kept() -> None:
    reply = 'section .rodata\nCity db "Paris"\nsection .text\nMOV R1, city'
    assert run(reply).registers == {"R1": "Paris"}


def test_data_numbers() -> None:
    reply = (
        "section .data\n"
        "a dd 10\n"
        "b dq -7\n"
        "c dw 0x1F\n"
        "d dq 2.5\n"
        "e db -0.25\n"
        "f dd 1e3\n"
        "section .text\n"
        "MOV R1, a\nMOV R2, b\nMOV R3, c\nMOV R4, d\nMOV R5, e\nMOV R6, f\nADD R1, R3"
    )
    program = program_of(reply)
    assert program.data == {"a": 10, "b": -7, "c": 31, "d": 2.5, "e": -0.25, "f": 1000.0}
    assert run(reply).registers == {
        "R1": 41,
        "R2": -7,
        "R3": 31,
        "R4": 2.5,
        "R5": -0.25,
        "R6": 1000.0,
    }


def test_json_data_is_stored_as_compact_json_text() -> None:
    reply = (
        "section .data\n"
        'point db {"x": 1, "y": [2, 3]}\n'
        'names db ["Ann", "Bob"]\n'
        "section .text\n"
        "MOV R1, point\nMOV R2, names"
    )
    program = program_of(reply)
    assert program.data == {"point": '{"x":1,"y":[2,3]}', "names": '["Ann","Bob"]'}
    assert run(reply).registers == {"R1": '{"x":1,"y":[2,3]}', "R2": '["Ann","Bob"]'}


def test_equ_defines_a_constant() -> None:
    reply = "size equ 3\nLIMIT EQU 10\nMOV R1, size\nADD R1, limit"
    assert run(reply).registers == {"R1": 13}


def test_data_after_code_is_read_too() -> None:
    reply = "MOV R1, answer\nHLT\nsection .data\nanswer dd 42"
    assert run(reply).registers == {"R1": 42}


# ---------------------------------------------------------------------------------------------
# Directives, operands, aliases


def test_global_start_sets_the_entry_point() -> None:
    reply = (
        "section .text\n"
        "global _start\n"
        "extern add\n"
        "helper:\n"
        "    MOV R2, 99\n"
        "    RET\n"
        "_start:\n"
        "    MOV R1, 1\n"
        "    HLT\n"
    )
    program = program_of(reply)
    assert program.entry == 2
    assert run(reply).registers == {"R1": 1}


def test_global_naming_a_non_label_keeps_the_first_instruction() -> None:
    assert program_of("global main\nMOV R1, 1").entry == 0


def test_global_records_the_entry_name_and_where_it_is_written() -> None:
    program = program_of("section .text\n  global _start, other\n_start: MOV R1, 1")
    assert (program.entry_name, program.entry_site) == ("_start", (2, 10))
    program = program_of("MOV R1, 1")
    assert (program.entry_name, program.entry_site) == (None, (0, 0))


def test_call_with_parentheses() -> None:
    reply = "PUSH 1\nPUSH 2\nCALL add()\nCALL position()\nPOP R1\nPOP R2\nPOP R3"
    program = program_of(reply)
    assert program.instructions[2].operands == (Name("add"),)
    result = run(reply)
    assert result.registers == {"R1": 3, "R2": 4, "R3": 3}
    assert called(result) == [("add", {"a": 1, "b": 2}), ("position", {})]


def test_call_of_a_subroutine_label() -> None:
    reply = "CALL double\nHLT\ndouble:\nMOV R1, 2\nMUL R1, 2\nRET"
    assert run(reply).registers == {"R1": 4}


def test_space_separated_operands() -> None:
    reply = 'MOV R1 0\nloop:\nADD R1 2\nCMP R1 6\nJL loop\nMOV R2 "a b"'
    program = program_of(reply)
    assert program.instructions[2].operands == (Reg(1, "R1"), Imm(6))
    assert run(reply).registers == {"R1": 6, "R2": "a b"}


@pytest.mark.parametrize(
    ("operand", "value"),
    [
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        ("0x1F", 31),
        ("0XfF", 255),
        ("-0x10", -16),
        ("3.5", 3.5),
        ("-0.25", -0.25),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("2.5E-1", 0.25),
        ('"Paris"', "Paris"),
        ("'Paris'", "Paris"),
        ('""', ""),
    ],
)
def test_immediate_operands(operand: str, value: object) -> None:
    program = program_of(f"MOV R1, {operand}")
    assert program.instructions[0].operands[1] == Imm(value)  # type: ignore[arg-type]
    assert run(f"MOV R1, {operand}\nMOV R2, 1").registers.get("R1", 0) == value


@pytest.mark.parametrize(
    ("jump", "a", "b", "taken"),
    [
        ("JZ", 1, 1, True),
        ("JZ", 1, 2, False),
        ("JNZ", 1, 2, True),
        ("JLT", 1, 2, True),
        ("JB", 1, 2, True),
        ("JB", 2, 1, False),
        ("JBE", 2, 2, True),
        ("JGT", 3, 2, True),
        ("JA", 3, 2, True),
        ("JA", 2, 2, False),
        ("JAE", 2, 2, True),
        ("JAE", 1, 2, False),
    ],
)
def test_jump_aliases(jump: str, a: int, b: int, taken: bool) -> None:
    reply = f"CMP {a}, {b}\n{jump} yes\nMOV R1, 1\nHALT\nyes:\nMOV R1, 2"
    assert run(reply).registers == {"R1": 2 if taken else 1}


def test_imul_and_halt_aliases() -> None:
    program = program_of("MOV R1, 6\nIMUL R1, 7\nHALT\nMOV R1, 0")
    assert [i.op for i in program.instructions] == [Opcode.MOV, Opcode.MUL, Opcode.HLT, Opcode.MOV]
    assert run("MOV R1, 6\nIMUL R1, 7\nHALT\nMOV R1, 0").registers == {"R1": 42}


def test_instruction_records_line_column_text_and_operand_columns() -> None:
    program = program_of("Plan:\n```asm\n  start:  mov  r1 ,  'x' ; set\n```")
    ins = program.instructions[0]
    assert (ins.line, ins.column, ins.text) == (3, 11, "mov  r1 ,  'x'")
    assert ins.operand_columns == (16, 22)
    assert program.label_lines == {"start": ((3, 3),)}
    assert program.label_names == {"start": "start"}


# ---------------------------------------------------------------------------------------------
# Plain answers


@pytest.mark.parametrize(
    "reply",
    [
        "The capital of France is Paris.",
        "Push it. Call me later, then pop round.",
        "Here is a Python version:\n```python\ndef add(a, b):\n    return a + b\n```\nEnjoy!",
        "<think>MOV R1, 1</think>\nThe answer is 3.",
        "Steps:\n1. Move 1 into R1.\n2. Add 2.",
    ],
)
def test_reply_without_instructions_is_a_plain_answer(reply: str) -> None:
    assert isinstance(parse(reply), PlainAnswer)


@pytest.mark.parametrize("reply", ["", "   \n\n  ", "<think>\nMOV R1, 1\nCALL add\n</think>"])
def test_an_empty_or_thinking_only_reply_is_not_an_answer(reply: str) -> None:
    with pytest.raises(EmptyReply, match="the model returned nothing"):
        parse(reply)


def test_think_tags_inside_code_comments_are_comment_text() -> None:
    opening = parse("```asm\nPUSH 1\nCALL pay ; see <think> notes\nPUSH 2\nCALL refund\n```")
    closing = parse("```asm\nPUSH 1\nCALL pay ; </think> here\nPUSH 2\nCALL refund\n```")
    for program in (opening, closing):
        assert isinstance(program, Program)
        assert [str(i) for i in program.instructions] == [
            "PUSH 1", "CALL pay", "PUSH 2", "CALL refund",
        ]  # fmt: skip


def test_tool_names_with_dashes_and_dots_are_call_operands() -> None:
    program = parse("CALL get-weather\nCALL github.search")
    assert isinstance(program, Program)
    assert [i.operands[0] for i in program.instructions] == [
        Name("get-weather"),
        Name("github.search"),
    ]


def test_plain_answer_text_has_no_thinking() -> None:
    answer = parse("<think>hmm, MOV R1, 1?</think>\nParis.")
    assert answer == PlainAnswer("Paris.")


# ---------------------------------------------------------------------------------------------
# Syntax errors


def test_unterminated_string() -> None:
    exc = syntax_error('MOV R1, "Paris')
    assert (exc.line, exc.column) == (1, 9)
    assert exc.expected == 'a closing "'


def test_a_memory_operand_that_cannot_be_read_is_a_syntax_error_with_a_reason() -> None:
    exc = syntax_error("MOV R1, [R2 * R3]")
    assert (exc.line, exc.column) == (1, 9)
    assert "memory operand" in exc.expected
    assert "only a register may be scaled" in exc.diagnostics[0].message


@pytest.mark.parametrize("name", ["ESP", "rsp", "Sp"])
def test_stack_pointer_is_rejected(name: str) -> None:
    exc = syntax_error(f"MOV R1, {name}")
    assert (exc.line, exc.column) == (1, 9)
    assert "PUSH and POP" in exc.expected
    assert "stack pointer" in exc.diagnostics[0].message


def test_double_comma() -> None:
    exc = syntax_error("ADD R1,, 2")
    assert (exc.line, exc.column) == (1, 8)
    assert exc.expected == "an operand"


def test_leading_comma() -> None:
    exc = syntax_error("ADD , R1, 2")
    assert (exc.line, exc.column) == (1, 5)


def test_trailing_comma() -> None:
    exc = syntax_error("ADD R1, 2,")
    assert (exc.line, exc.column) == (1, 10)
    assert exc.expected == "an operand after ','"


@pytest.mark.parametrize("token", ["2x", "R1)", "a+b", "(R1)", "1..2"])
def test_bad_operand_token(token: str) -> None:
    exc = syntax_error(f"MOV R1, {token}")
    assert (exc.line, exc.column) == (1, 9)
    assert exc.expected == "a register, number, string or name"


def test_invalid_json_data() -> None:
    exc = syntax_error('section .data\npoint db {"x": }\nsection .text\nMOV R1, point')
    assert (exc.line, exc.column) == (2, 10)
    assert exc.expected == "valid JSON"
    assert "invalid JSON" in exc.diagnostics[0].message


def test_data_without_a_value() -> None:
    exc = syntax_error("section .data\nempty db\nsection .text\nMOV R1, empty")
    assert exc.line == 2
    assert exc.expected == "a string, number or JSON"


def test_data_holding_a_register_is_rejected() -> None:
    exc = syntax_error("x dd R1\nMOV R1, x")
    assert exc.line == 1
    assert exc.expected == "a literal value"


@pytest.mark.parametrize(
    ("line", "name"), [('R5 db "hello", 0', "R5"), ("eax: dd 3", "eax"), ("rbx equ 3", "rbx")]
)
def test_data_label_named_like_a_register_is_a_syntax_error(line: str, name: str) -> None:
    """``MOV R1, R5`` would read the register R5, never this data."""
    exc = syntax_error(f"section .data\n{line}\nsection .text\nMOV R1, {name}")
    assert (exc.line, exc.column) == (2, 1)
    message = exc.diagnostics[0].message
    assert f"data label {name!r} has the name of a register" in message
    assert "rename" in message


@pytest.mark.parametrize(
    ("line", "name", "meaning"),
    [
        ("none:", "none", "the value NONE"),
        ("Null: NOP", "Null", "the value NONE"),
        ("eax:", "eax", "a register"),
        ("R7:", "R7", "a register"),
        ("al:", "al", "a register"),
        ("xmm3:", "xmm3", "a register"),
        ("rsp:", "rsp", "a register"),
    ],
)
def test_a_label_named_like_a_reserved_word_is_refused_asking_to_rename_it(
    line: str, name: str, meaning: str
) -> None:
    """Labels match in any case, so a label ``none`` would make ``PUSH NONE`` read the label
    (11 of 97 model-written plans did this) and ``eax:`` could never be jumped to."""
    exc = syntax_error(f"CMP R1, 0\nJE done\nPUSH NONE\nPOP R2\n  {line}\ndone: HLT")
    (problem,) = exc.diagnostics
    assert (problem.line, problem.column) == (5, 3)
    assert problem.message.startswith(f"label {name!r} has the name of {meaning}: ")
    assert f"rename the label (e.g. {name}_label)" in problem.message


@pytest.mark.parametrize(
    ("line", "name", "meaning"),
    [
        ("none dd 5", "none", "the value NONE"),
        ("NULL: db 'x'", "NULL", "the value NONE"),
        ("loop: dd 3", "loop", "an instruction"),
        ("Imul: equ 3", "Imul", "an instruction"),
        ("loop dd 5", "loop", "an instruction"),
        ("len dd 0", "len", "an instruction"),
        ("mov dd 5", "mov", "an instruction"),
        ("push db 'x', 0", "push", "an instruction"),
        ("say db 'hi',0", "say", "an instruction"),
        ("MOV equ 3", "MOV", "an instruction"),
        ("Loop times 3 dd 0", "Loop", "an instruction"),
        ("jmp resb 4", "jmp", "an instruction"),
    ],
)
def test_a_data_label_named_like_a_reserved_word_is_refused_asking_to_rename_it(
    line: str, name: str, meaning: str
) -> None:
    """``MOV R1, NULL`` read the data ``null`` instead of the value NONE; a data label named
    like an instruction reads as that instruction when written without its colon."""
    exc = syntax_error(f"section .data\n{line}\nsection .text\nMOV R1, NULL")
    (problem,) = exc.diagnostics
    assert (problem.line, problem.column) == (2, 1)
    assert problem.message.startswith(f"data label {name!r} has the name of {meaning}: ")
    assert f"rename the data label (e.g. {name}_data)" in problem.message


@pytest.mark.parametrize("line", ["MOV equ 3", "loop dd 5", "len dd 0"])
def test_data_named_like_an_instruction_is_refused_outside_a_data_section(line: str) -> None:
    """Without its colon, ``loop dd 5`` read as ``LOOP dd, 5``: its problems ("LOOP takes 1
    operand", "unknown name 'loop'") hid the name, the one thing to change."""
    name = line.split()[0]
    exc = syntax_error(f'{line}\nMOV R1, {name}\nSAY "{{R1}}"')
    (problem,) = exc.diagnostics
    assert (problem.line, problem.column) == (1, 1)
    assert f"rename the data label (e.g. {name}_data)" in problem.message


@pytest.mark.parametrize(
    ("line", "operands"),
    [
        ("MOV string, 5", (Name("string"), Imm(5))),
        ("MOV db, 5", (Name("db"), Imm(5))),
        ("PUSH times", (Name("times"),)),
        ("MOV dd[0], 5", None),
    ],
)
def test_an_instruction_whose_operand_is_a_data_word_stays_an_instruction(
    line: str, operands: tuple[object, ...] | None
) -> None:
    """Only a value after the data word, with no comma, makes a mnemonic's line data."""
    (ins,) = [i for i in program_of(f"{line}\nHLT").instructions if i.line == 1]
    assert ins.op.name == line.split()[0]
    if operands is not None:
        assert ins.operands == operands


@pytest.mark.parametrize(
    ("line", "column"),
    [
        ("MOV none, 3", 5),
        ("POP NULL", 5),
        ("pop Null", 5),
        ("XCHG R1, none", 10),
        ("ADD NONE, 1", 5),
        ("SETE null", 6),
        ("MOV none.x, 1", 5),
    ],
)
def test_none_as_a_destination_is_refused_asking_to_rename_it(line: str, column: int) -> None:
    """``MOV none, 3`` made a variable no operand can read (``none`` reads the value NONE):
    the value was lost without a word."""
    exc = syntax_error(f'PUSH 4\nMOV R1, 2\n{line}\nSAY "{{R1}}"')
    (problem,) = exc.diagnostics
    assert (problem.line, problem.column) == (3, column)
    name = line.split()[-1 if line.startswith("XCHG") else 1].rstrip(",").split(".")[0]
    assert problem.message.startswith(f"variable {name!r} has the name of the value NONE: ")
    assert f"rename the variable (e.g. {name}_variable)" in problem.message


def test_none_reads_as_no_value_and_code_labels_may_have_an_instructions_name() -> None:
    """A mnemonic is only ever a line's first word, so a code label of its name (``loop:``,
    ``sub:``) is never read as the instruction: it stays a label."""
    program = program_of("loop: PUSH NONE\nPOP R1\nCALL sub\nHLT\nsub: RET")
    assert program.instructions[0].operands == (Imm(NONE),)
    assert set(program.labels) == {"loop", "sub"}


def test_data_label_defined_twice() -> None:
    exc = syntax_error('a db "x"\na db "y"\nMOV R1, a')
    assert exc.line == 2
    assert "defined twice" in exc.diagnostics[0].message


def test_too_long_number_is_a_syntax_error() -> None:
    exc = syntax_error("MOV R1, " + "9" * 5000)
    assert (exc.line, exc.column) == (1, 9)


def test_all_errors_are_listed_in_one_exception() -> None:
    reply = (
        "```asm\n"
        'MOV R1, "open\n'
        "MOV R2, [R1 R1]\n"
        "PUSH ESP\n"
        "ADD R1,, 2\n"
        "ADD R1, 2,\n"
        "MOV R3, 2x\n"
        "MOV R4, 1\n"
        "```"
    )
    exc = syntax_error(reply)
    assert [(d.line, d.column) for d in exc.diagnostics] == [
        (2, 9),
        (3, 9),
        (4, 6),
        (5, 8),
        (6, 10),
        (7, 9),
    ]
    assert (exc.line, exc.column, exc.expected) == (2, 9, 'a closing "')
    assert exc.diagnostics[2].source == "PUSH ESP"
    assert "6 syntax errors" in str(exc)
    assert "    PUSH ESP\n         ^" in str(exc)


def test_line_numbers_refer_to_the_reply_after_prose_and_a_fence() -> None:
    reply = "Let me think.\nHere is the plan.\nIt adds.\n```asm\nMOV R1, 1\nADD R1, [R9\n```"
    exc = syntax_error(reply)
    assert (exc.line, exc.column) == (6, 9)
    assert exc.diagnostics[0].source == "ADD R1, [R9"


def test_line_numbers_count_think_lines_and_crlf() -> None:
    reply = "<think>\na\nb\n</think>\r\nOK:\r\n```\r\nMOV R1, ESP\r\n```"
    exc = syntax_error(reply)
    assert (exc.line, exc.column) == (7, 9)


def test_broken_lower_case_line_in_an_asm_fence_is_an_error_not_a_plain_answer() -> None:
    exc = syntax_error("```asm\nmov r1, [r2\n```")
    assert (exc.line, exc.column) == (2, 9)
    exc = syntax_error('```\nmov r1, "abc\n```')
    assert (exc.line, exc.column) == (2, 9)


def test_prose_between_code_lines_is_an_error() -> None:
    exc = syntax_error("MOV R1, 1\nthen we: add it up!\nMOV R2, 2")
    assert exc.line == 2


# ---------------------------------------------------------------------------------------------
# Unknown mnemonics


def test_unknown_mnemonic_in_a_fence_is_recorded_not_a_syntax_error() -> None:
    program = program_of("```asm\nMOV R1, 1\nCPUID R2, R1\nRDTSC R1 R1\n```")
    assert [(u.mnemonic, u.line, u.column, u.text) for u in program.unknown] == [
        ("CPUID", 3, 1, "CPUID R2, R1"),
        ("RDTSC", 4, 1, "RDTSC R1 R1"),
    ]
    assert [i.op for i in program.instructions] == [Opcode.MOV]


def test_asm_fence_with_only_unknown_mnemonics_is_a_program() -> None:
    program = program_of("```asm\nFOO R1\n```")
    assert [u.mnemonic for u in program.unknown] == ["FOO"]
    assert program.instructions == ()


def test_mnemonic_glued_to_its_operand_is_not_an_instruction() -> None:
    assert isinstance(parse("CALL-center staff will help."), PlainAnswer)
    exc = syntax_error("```asm\nMOV R1, 1\nMOV-1\n```")
    assert (exc.line, exc.column) == (3, 1)
    assert exc.expected == "an instruction, a label or a directive"


def test_misspelt_instruction_next_to_unfenced_code_is_kept_and_reported() -> None:
    """A typo on the last line must not silently shorten the plan."""
    from llassembly import PlanRejected, verify

    program = parse("MOV R1, 1\nPUSHH R1\n\nThat is all.")
    assert isinstance(program, Program)
    assert [u.mnemonic for u in program.unknown] == ["PUSHH"]
    with pytest.raises(PlanRejected, match="line 2"):
        verify(program, {})


@pytest.mark.parametrize(
    ("reply", "line"),
    [
        ('MOV R1, 1\nreport-1: SAY "It is {R1}"', 2),
        ("start-1: MOV R1, 'Oslo'\nSAY \"It is {R1}\"", 1),
        ("1st: MOV R1, 1\nSAY R1\n\nThat is all.", 1),
    ],
)
def test_an_instruction_after_a_label_that_cannot_be_read_next_to_unfenced_code_is_reported(
    reply: str, line: int
) -> None:
    """``label: INSTRUCTION`` with a label the language cannot read is code, not prose: on the
    first or last line of unfenced code too, it is a syntax error, never a shorter plan."""
    with pytest.raises(AsmSyntaxError, match=rf"line {line}, column 1: cannot read"):
        parse(reply)


def test_short_upper_case_prose_is_still_a_plain_answer() -> None:
    assert isinstance(parse("OK"), PlainAnswer)


def test_a_placeholder_that_reads_as_a_number_names_no_value() -> None:
    """``{.5}`` matches the placeholder pattern but reads as a number, not a register or a
    name: the parser points at it rather than saying the text ``{.5}``."""
    exc = syntax_error('SAY "x {.5}"')
    assert (exc.line, exc.column) == (1, 8)
    assert "{.5} names no value" in str(exc)
