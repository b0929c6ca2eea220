"""The parser is bounded: linear in the reply, and the data and answer texts of a plan cannot
make it build more than their limits allow (see ``docs/language.md``).

Time is measured by ``benchmarks/bench_hostile.py``; here the worst shapes run in a child
process with a generous limit (the quadratic versions took minutes at these sizes), and the
rest is asserted through sizes and errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from llassembly import parse_program
from llassembly.errors import AsmSyntaxError, EmptyReply, LLAssemblyError
from llassembly.language.instructions import Opcode
from llassembly.language.limits import (
    MAX_DATA_TEXT_CHARS,
    MAX_PLAN_PLACEHOLDERS,
    MAX_REPLY_LINES,
    MAX_SAY_PLACEHOLDERS,
)
from llassembly.language.parser import parse, string_columns
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator

# -- linear time -----------------------------------------------------------------------------

# Each reply is about 256 KB. The bracket shapes took 3.6 s at 16 KB and grew with the square
# of the size (about 15 minutes here); linear, each parses in milliseconds.
_SPACES, _ESCAPED, _LABELS = " " * 250_000, 'ab\\"c' * 50_000, "a: " * 80_000
_HOSTILE_LINES = {
    "spaces between two names in brackets": f"MOV R1, [x{_SPACES}y]",
    "spaces between a name and a number in brackets": f"MOV R1, [x{_SPACES}4]",
    "spaces after a sign in brackets": f"MOV R1, [x +{_SPACES}]",
    "spaces in a size-worded memory operand": f"MOV R1, dword [x{_SPACES}y]",
    "spaces in a SAY placeholder": f'SAY "{{[x{_SPACES}y]}}"',
    "spaces in a data row": f"x dd 1,{_SPACES}2",
    "spaces before an unclosed string": f'PUSH {_SPACES}"abc',
    "a long string with escapes": f'PUSH "{_ESCAPED}"',
    "a long unterminated string with escapes": f'PUSH "{_ESCAPED}',
    "a comment after a long string": f'PUSH "{_ESCAPED}" ; done',
    "a long run of labels": f"{_LABELS}NOP",
}


def test_hostile_lines_parse_in_linear_time() -> None:
    """Every shape, in one child process that must finish within a generous bound."""
    code = textwrap.dedent(
        """
        import json, sys
        from llassembly import parse
        from llassembly.errors import LLAssemblyError
        for text in json.loads(sys.stdin.read()).values():
            try:
                parse(text)
            except LLAssemblyError:
                pass
        print("done")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(_HOSTILE_LINES),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"


def test_a_reply_of_more_lines_than_any_plan_needs_is_refused_before_it_is_read() -> None:
    """Each line costs work in every stage: 1 MB of short lines (250,000 of them) took 3 to 5 s
    to parse and as long to check; no plan needs more than MAX_REPLY_LINES lines."""
    with pytest.raises(AsmSyntaxError) as caught:
        parse("NOP\n" * MAX_REPLY_LINES + "HLT")
    assert (caught.value.line, caught.value.column) == (MAX_REPLY_LINES + 1, 1)
    assert f"more than {MAX_REPLY_LINES} lines" in str(caught.value)
    assert "HLT" in str(caught.value)  # the line named is quoted
    assert len(parse_program("NOP\n" * (MAX_REPLY_LINES - 1) + "HLT").instructions) == (
        MAX_REPLY_LINES
    )


def test_a_memory_operand_with_spaces_reads_as_before() -> None:
    program = parse_program("x dd 1, 2, 3\nMOV R1, [ x   +   ESI * 4   -   4 ]")
    memory = program.instructions[0].operands[1]
    assert (memory.label, memory.index.name, memory.scale, memory.disp) == (  # type: ignore[union-attr]
        "x",
        "ESI",
        4,
        -4,
    )


@pytest.mark.parametrize("operand", ["[x + ESI*1.5]", "[x + 2.5]", "[x + 1.0*ESI]"])
def test_a_scale_or_offset_that_is_no_whole_number_is_refused(operand: str) -> None:
    """``ESI*1.5`` used to read as ``ESI*1``: the address silently changed."""
    with pytest.raises(AsmSyntaxError, match=r"line 2, column 9: .* is not a whole number"):
        parse(f"x dd 1, 2, 3\nMOV R1, {operand}")


# -- data that would build more than it says ---------------------------------------------------


def test_times_cannot_repeat_an_equ_constant() -> None:
    """``x times 65536 equ 1, 1, ...`` built 6.5 million values (23 s, 135 MB) before."""
    with pytest.raises(AsmSyntaxError, match=r"line 1, .*times cannot repeat an equ"):
        parse("x times 65536 equ " + "1, " * 100 + "1\nMOV R1, x")


def test_a_string_repeated_past_the_limit_is_refused_before_it_is_built() -> None:
    """``times 4096 db "<20 KB>"`` built one 82 MB string before."""
    reply = "section .rodata\nx times 4096 db '" + "a" * 20_000 + "'\nsection .text\nMOV R1, x"
    with pytest.raises(AsmSyntaxError, match=rf"line 2, .*longer than the {MAX_DATA_TEXT_CHARS}"):
        parse(reply)


def test_a_row_naming_a_long_string_many_times_is_refused() -> None:
    """A row of 4000 names of a 20 KB string read as 80 MB of JSON, built at parse time."""
    reply = (
        "section .rodata\ns db '" + "a" * 20_000 + "'\nx times 4000 dd s\nsection .text\nMOV R1, x"
    )
    with pytest.raises(AsmSyntaxError, match=r"line 3, .*this row read whole .* longer than"):
        parse(reply)


def test_values_past_the_cell_budget_are_refused_before_they_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row of 300,000 values was read whole (1.5 s at 1 MB) before its cells were counted."""
    from llassembly.language import parser

    read: list[str] = []
    real = parser.read_operand

    def counting(token: str, column: int) -> object:
        read.append(token)
        return real(token, column)

    monkeypatch.setattr(parser, "read_operand", counting)
    for row in ("x dd ", "x times 2 dd ", "x equ "):
        with pytest.raises(AsmSyntaxError, match=r"line 1, .*more than the 4096 cells"):
            parse(row + "1, " * 300_000 + "1\nNOP")
    assert read == []
    assert parse_program("x times 2 dd " + "1, " * 2047 + "1\nNOP").memory["x"].cells == (1,) * 4096


def test_data_written_out_at_any_length_is_kept() -> None:
    """The limit is on what the data builds, not on what the plan writes out itself."""
    text = "b" * (MAX_DATA_TEXT_CHARS + 10)
    program = parse_program(f'section .rodata\nx db "{text}", 10, 0\nsection .text\nMOV R1, x')
    assert program.data["x"] == text + "\n"
    small = parse_program("x times 3 db 'ab'\ny times 4 dd 7\nMOV R1, x")
    assert (small.data["x"], small.data["y"]) == ("ababab", "[7,7,7,7]")


@pytest.mark.parametrize("count", ["abc", "1.5", "-3", "0", "70000"])
def test_a_count_that_is_no_whole_number_in_range_says_so(count: str) -> None:
    for line in (f"x times {count} dd 1", f"x resd {count}"):
        with pytest.raises(AsmSyntaxError, match=rf"needs a count of 1 to 65536, not {count}"):
            parse(line + "\nNOP")


# -- answers ---------------------------------------------------------------------------------


def test_a_say_with_too_many_placeholders_is_refused_at_the_first_one_past_the_limit() -> None:
    """250,000 placeholders took 11 s to parse, check and run; now the text is refused."""
    text = "{R1} " * (MAX_SAY_PLACEHOLDERS + 1)
    with pytest.raises(AsmSyntaxError) as caught:
        parse(f'NOP\nSAY "{text}"')
    error = caught.value
    assert error.line == 2
    assert error.column == len('SAY "') + 5 * MAX_SAY_PLACEHOLDERS + 1  # at the 257th
    assert f"more than the {MAX_SAY_PLACEHOLDERS} placeholders one SAY may have" in str(error)
    fine = parse_program(f'SAY "{"{R1} " * MAX_SAY_PLACEHOLDERS}"')
    assert len(fine.instructions[0].operands) == MAX_SAY_PLACEHOLDERS + 1


def test_the_placeholders_of_a_whole_plan_are_bounded() -> None:
    per_say = MAX_SAY_PLACEHOLDERS
    says = MAX_PLAN_PLACEHOLDERS // per_say + 1
    lines = ["NOP"] + [f'SAY "{"{R1}" * per_say}"'] * says
    with pytest.raises(AsmSyntaxError) as caught:
        parse("\n".join(lines))
    assert caught.value.line == says + 1  # the SAY that goes past the limit
    assert f"more than the {MAX_PLAN_PLACEHOLDERS} placeholders a plan may have" in str(
        caught.value
    )


def test_a_data_label_text_said_by_many_says_counts_for_each() -> None:
    reply = 'msg db "' + "{R1}" * 200 + '"\n' + "SAY msg\n" * (MAX_PLAN_PLACEHOLDERS // 200 + 1)
    with pytest.raises(AsmSyntaxError, match="placeholders a plan may have"):
        parse(reply)


def test_a_placeholder_written_with_an_escape_is_pointed_at_exactly() -> None:
    """The column search used to fail on a placeholder holding an escape (and then rescan
    the rest of the line for every later placeholder): it pointed at the string instead."""
    line = 'SAY "a\\"b {[x\\t+ +]} c"'
    with pytest.raises(AsmSyntaxError) as caught:
        parse(line)
    assert caught.value.column == line.index("{[") + 1


def test_string_columns_account_for_escapes() -> None:
    line = 'SAY "a\\tb\\qc{R1}"'  # \t is one character of the value, \q is kept as two
    value = "a\tb\\qc{R1}"
    columns = string_columns(line, 4, [0, 1, 2, value.index("{")])
    assert columns == [6, 7, 9, line.index("{") + 1]
    assert string_columns(line, 0, [0]) is None  # no string there


def test_a_long_answer_text_runs_in_linear_work() -> None:
    """A loop that says many lines: the answer's size is kept as lines are added, not summed
    over every earlier line on each SAY."""
    from llassembly.machine.state import MachineState

    looked: list[int] = []

    class CountingLines(list[str]):
        """Counts the lines read back (iteration and slices)."""

        def __iter__(self):  # type: ignore[no-untyped-def]
            for line in super().__iter__():
                looked.append(1)
                yield line

        def __getitem__(self, index):  # type: ignore[no-untyped-def]
            got = super().__getitem__(index)
            looked.extend([1] * (len(got) if isinstance(index, slice) else 1))
            return got

    program = parse_program("MOV ECX, 600\nagain: SAY 'x'\nLOOP again")
    state = MachineState(answer=CountingLines())
    emulator = Emulator(program, max_instructions_to_exec=5000, state=state)
    result = emulator.run()
    assert result.answer == "\n".join(["x"] * 600)
    assert len(looked) <= 3 * 600  # summing every earlier line on each SAY read 180,000


# -- parse_program -----------------------------------------------------------------------------


def test_parse_program_gives_a_program_or_a_library_error() -> None:
    program = parse_program("Sure:\n```asm\nPUSH 1\nPOP R1\n```")
    assert isinstance(program, Program) and len(program.instructions) == 2
    with pytest.raises(AsmSyntaxError, match=r"line 1, column 1: the reply holds no instruction"):
        parse_program("It is sunny in Paris.")
    assert isinstance(parse("It is sunny in Paris."), PlainAnswer)
    with pytest.raises(EmptyReply):
        parse_program("  ")
    with pytest.raises(LLAssemblyError):
        parse_program("PUSH [x + +]")


def test_parse_program_needs_no_narrowing_under_mypy_strict(tmp_path: Path) -> None:
    """A user's code type-checks with ``parse_program``; with ``parse`` it needs the
    ``isinstance`` the docstring shows (mypy reports the missing one)."""
    snippet = tmp_path / "user_code.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from llassembly import PlainAnswer, parse, parse_program

            def direct(text: str) -> int:
                return len(parse_program(text).instructions)

            def narrowed(text: str) -> int:
                reply = parse(text)
                if isinstance(reply, PlainAnswer):
                    return 0
                return len(reply.instructions)

            def forgotten(text: str) -> int:
                return len(parse(text).instructions)
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        cwd=ROOT,  # the project's settings and cache
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr
    assert "user_code.py:14:" in errors[0] and '"PlainAnswer"' in errors[0]


def test_every_say_operand_is_a_placeholder_of_its_text() -> None:
    program = parse_program('SAY "{R1} and {[t + ESI*4]} and {3}"\nt dd 1, 2')
    say = program.instructions[0]
    assert say.op is Opcode.SAY
    assert [str(o) for o in say.operands[1:]] == ["R1", "[t + ESI*4]"]


def test_a_repeated_string_is_one_cell_of_the_memory_budget() -> None:
    """``sep times 5000 db "-"`` builds one string, one cell, as the language says: it counts
    as one against the 4096 cells (its length is held to the text limit instead)."""
    program = parse_program(
        'section .rodata\nsep times 5000 db "-"\nbar times 3000 db "="\nsection .text\nMOV R1, sep'
    )
    assert program.data["sep"] == "-" * 5000 and program.data["bar"] == "=" * 3000
    assert len(program.memory["sep"].cells) == 1
    with pytest.raises(AsmSyntaxError, match="this string"):
        parse('x times 65536 db "", "", "", "", ""\nNOP')  # (more parts than the text holds)


def test_strings_repeated_over_many_rows_build_no_more_than_the_plan_may() -> None:
    """Each repeated string is one cell, so the rows' sum of what ``times`` builds has a
    budget of its own: a short reply of many such rows is refused before they are built."""
    rows = "".join(f's{i} times 65536 db "a"\n' for i in range(400))
    with pytest.raises(AsmSyntaxError, match="the strings times repeats would be longer"):
        parse(rows + "NOP")
