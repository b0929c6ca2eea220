"""Edges of reading and writing places (``llassembly.machine.access``): text that is not the
JSON it looks like, a path through a value that has no parts, writes and addresses a plan
computes at run time."""

from __future__ import annotations

import re

import pytest

from llassembly import parse_program
from llassembly.errors import AsmRuntimeError
from llassembly.machine.emulator import Emulator


def run(plan: str, tools: list[object] | None = None) -> dict[str, object]:
    return Emulator(parse_program(plan), tools or ()).run().registers


@pytest.mark.parametrize("text", [" x", "[abc"], ids=["blank-then-text", "broken-json"])
def test_text_that_only_starts_like_json_has_no_parts(text: str) -> None:
    plan = f'MOV EAX, "{text}"\nMOV EBX, EAX.a'
    with pytest.raises(
        AsmRuntimeError,
        match=rf"line 2: EAX\.a: EAX holds '{re.escape(text)}', not the JSON text of an object or "
        "a list",
    ):
        run(plan)


def test_json_nested_too_deeply_to_read_stops_the_plan_at_the_read() -> None:
    def deep() -> str:
        """A list nested 100,000 deep."""
        return "[" * 100_000 + "]" * 100_000

    emulator = Emulator(parse_program("CALL deep\nMOV EBX, EAX[0]"), [deep])
    with pytest.raises(
        AsmRuntimeError, match=r"line 2: the JSON text is nested too deeply to read"
    ):
        emulator.run()
    assert "EBX" not in emulator.snapshot()["registers"]  # nothing written


def test_a_write_that_nests_json_too_deeply_to_write_stops_the_plan_at_its_line() -> None:
    """Text built by templates may nest deeper than JSON can be written again: a write of a
    part that would nest it one level deeper stops at its line (the library's error, not
    Python's ``RecursionError``), as reading too deep a text does."""
    wrap = "[" * 100 + "{R1}" + "]" * 100
    plan = (
        f'MOV R1, 0\nMOV ECX, 9\ngrow:\nMOV R1, "{wrap}"\nLOOP grow\nMOV ECX, 150\n'
        'deeper:\nMOV R3, "{}"\nMOV R3.x, R1\nMOV R1, R3\nLOOP deeper'
    )
    with pytest.raises(AsmRuntimeError, match=r"line 9: .*nested too deeply"):
        Emulator(parse_program(plan), [], max_instructions_to_exec=10_000).run()


def test_a_json_number_too_large_for_a_float_is_refused_when_read() -> None:
    with pytest.raises(AsmRuntimeError, match=r"line 2: EAX\.a is a number too large to hold"):
        run('MOV EAX, "{\\"a\\": 1e999}"\nMOV EBX, EAX.a')


@pytest.mark.parametrize(
    ("leaf", "kind"),
    [("true", "true or false"), ('\\"hi\\"', "the text 'hi'"), ("null", r"null \(NONE\)")],
)
def test_a_path_through_a_value_with_no_parts_says_what_the_value_is(leaf: str, kind: str) -> None:
    plan = f'MOV EAX, "{{\\"a\\": {leaf}}}"\nMOV EBX, EAX.a.b'
    with pytest.raises(
        AsmRuntimeError,
        match=rf"line 2: EAX\.a is {kind}, not an object or a list: it has no \.b",
    ):
        run(plan)


def test_a_write_through_a_register_into_read_only_data_is_refused_at_run_time() -> None:
    plan = (
        "section .rodata\nro dd 5\nsection .data\nrw dd 1\nsection .text\n"
        "LEA EAX, [ro]\nMOV [EAX], 1"
    )
    emulator = Emulator(parse_program(plan))
    with pytest.raises(
        AsmRuntimeError, match=r"line 7: \[EAX\] is in read-only data \('ro'\); write to \.data"
    ):
        emulator.run()
    assert emulator.state.mem == {"rw": [1]}  # the only writable data, unchanged


@pytest.mark.parametrize(
    ("plan", "line", "shown"),
    [
        ("MOV EBX, 9223372036854775807\nLEA EAX, [EBX + 8]", 2, r"\[EBX \+ 8\]"),
        (
            "section .data\nrw dd 1\nsection .text\n"
            "MOV EBX, 9223372036854775807\nLEA EAX, [rw + EBX]",
            5,
            r"\[rw \+ EBX\]",
        ),
    ],
)
def test_an_address_past_the_64_bit_range_is_refused(plan: str, line: int, shown: str) -> None:
    with pytest.raises(
        AsmRuntimeError, match=rf"line {line}: the address {shown} is out of the 64-bit range"
    ):
        run(plan)
