"""The parser's rarer refusals and readings: each pinned by its message and column."""

from __future__ import annotations

import pytest

from llassembly.errors import AsmSyntaxError
from llassembly.language.parser import parse
from llassembly.language.program import Mem, Program, Reg


def syntax_error(reply: str) -> AsmSyntaxError:
    with pytest.raises(AsmSyntaxError) as info:
        parse(reply)
    return info.value


def test_two_memory_operands_without_a_comma_stay_two_operands() -> None:
    """Only a size word (``dword [x]``) joins the bracket after it: ``[x] [y]`` is two
    operands (the verifier then counts them), not one."""
    program = parse("MOV R1, [x] [y]")
    assert isinstance(program, Program)
    operands = program.instructions[0].operands
    assert operands[0] == Reg(1, "R1")
    assert [(m.label, m.text) for m in operands[1:] if isinstance(m, Mem)] == [
        ("x", "[x]"),
        ("y", "[y]"),
    ]


@pytest.mark.parametrize(
    ("line", "column", "message"),
    [
        ("MOV R1, [EBX].a..b", 16, "cannot read '[EBX].a..b' as a path"),
        ("MOV R1, [EBX].a!b", 16, "cannot read '[EBX].a!b' as a path"),
        ("MOV R1, []", 9, "empty memory operand []"),
        ("MOV R1, [x**4]", 9, "cannot read 'x**4' in [x**4]"),
        ("MOV R1, [x + ESI*3]", 9, "'ESI*3': a register in an address is added, times 1, 2, 4"),
        ("MOV R1, [x - ESI]", 9, "'ESI': a register in an address is added, times 1, 2, 4 or 8"),
        ("MOV R1, [ESI+EDI+EBX]", 9, "[ESI+EDI+EBX]: at most two registers"),
    ],
)
def test_an_unreadable_memory_operand_or_path_is_pointed_at(
    line: str, column: int, message: str
) -> None:
    exc = syntax_error(line)
    assert (exc.line, exc.column) == (1, column)
    assert message in str(exc)


def test_a_scaled_key_after_a_label_points_at_the_address_form() -> None:
    """MASM's ``table[ESI*4]`` is no path key; the message spells the address to write."""
    exc = syntax_error("MOV R1, x[ESI*4]")
    assert (exc.line, exc.column) == (1, 10)
    assert "x[ESI*4]: [ESI*4] is no key; for a cell of a data label write [x + ESI*4]" in str(exc)


def test_a_misspelt_instruction_right_before_unfenced_code_is_kept() -> None:
    """As after the code (``test_misspelt_instruction_next_to_unfenced_code_is_kept...``): a
    typo on the first line must not silently shorten the plan either; prose above stays out."""
    program = parse("Here is the plan:\nPUSHH R1\nMOV R1, 1\nHLT")
    assert isinstance(program, Program)
    assert [(u.mnemonic, u.line) for u in program.unknown] == [("PUSHH", 2)]
    assert [i.line for i in program.instructions] == [3, 4]


@pytest.mark.parametrize(
    ("value", "shown"), [("1.5", "1.5"), ("-1", "-1"), ("0x110000", "1114112")]
)
def test_a_string_row_takes_only_character_codes(value: str, shown: str) -> None:
    exc = syntax_error(f'section .data\nmsg db "a", {value}\nsection .text\nHLT')
    assert (exc.line, exc.column) == (2, 7)
    assert f"cannot append {shown} to a string" in str(exc)
    assert exc.expected == "a character code"


def test_a_repeated_row_past_the_text_limit_is_refused_before_it_is_built() -> None:
    """2000 copies of ``1, "<200 chars>"`` fit the cell budget (4000 cells) but the row read
    whole would be 400 KB of JSON."""
    reply = "section .data\nx times 2000 dd 1, '" + "a" * 200 + "'\nsection .text\nMOV R1, x"
    exc = syntax_error(reply)
    assert (exc.line, exc.column) == (2, 17)
    assert "this row read whole (the JSON list of its cells) would be longer than" in str(exc)


@pytest.mark.parametrize("rest", ["5", "5 zz 0", "5 dd"])
def test_a_times_line_without_a_data_word_and_value_is_refused(rest: str) -> None:
    exc = syntax_error(f"section .data\nx times {rest}\nsection .text\nHLT")
    assert (exc.line, exc.column) == (2, 8)
    assert "cannot read this times line" in str(exc)
    assert exc.expected == "times COUNT dd VALUE"


def test_the_listing_writes_none_templates_and_escapes_as_the_plan_would() -> None:
    """``Program.listing`` writes each operand so that it reads back the same: ``NONE`` as
    ``NONE`` (not ``None``), a text with placeholders in quotes, quotes and backslashes
    escaped."""
    program = parse('MOV R1, NONE\nPUSH "a {R1}"\nMOV R2, "say \\"hi\\" \\\\ bye"\nPUSH 2.5')
    assert isinstance(program, Program)
    listing = program.listing()
    assert listing.splitlines() == [
        "    MOV R1, NONE",
        '    PUSH "a {R1}"',
        '    MOV R2, "say \\"hi\\" \\\\ bye"',
        "    PUSH 2.5",
    ]
    again = parse(listing)
    assert isinstance(again, Program)
    assert again.listing() == listing
    # the same operands (the template's differ only in their columns: the listing is indented)
    for at in (0, 2, 3):
        assert again.instructions[at].operands == program.instructions[at].operands


@pytest.mark.parametrize(
    ("reply", "where"),
    [('MOV R1, "a {R1..} b"\nSAY R1', "the text"), ('SAY "a {R1..} b"', "the answer text")],
)
def test_an_unreadable_placeholder_names_the_text_it_is_in(reply: str, where: str) -> None:
    """The message says which text holds the placeholder: a text operand's, or SAY's."""
    assert f"cannot read {{R1..}} in {where}: cannot read 'R1..' as a path" in str(
        syntax_error(reply)
    )
