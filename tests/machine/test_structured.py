"""Structured values, text and the x86 return value, against ``docs/language.md``.

Paths read and write parts of JSON text (*Structured values*), text with placeholders is filled
in anywhere (*Text*), ``NONE`` leaves an optional argument out, the verifier follows the shapes
of tool results (*Types before the run*), and a top-level ``RET`` records the value of ``EAX``
or ``XMM0`` (*The x86 return value*). Everything here runs on the machine alone; the same plans
through ``create_agent`` are in ``test_real_apis.py``.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
from typing import Any

import pytest
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    computed_field,
    field_serializer,
    model_serializer,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict  # (pydantic reads it on Python 3.11)

from llassembly import build_system_prompt
from llassembly.analysis.summary import summarize
from llassembly.errors import AsmRuntimeError, AsmSyntaxError, PlanRejected, ToolArgumentError
from llassembly.language.parser import parse
from llassembly.language.program import NONE, Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from
from llassembly.machine.state import MachineState, final_answer_of

PAGE = '{"items": [{"id": 7, "title": "Lamp", "price": 19.5, "tags": ["a", "b"]}, {"id": 8, "title": "Desk", "price": 120, "tags": []}], "next_cursor": null, "total": 2, "on": true, "my-key": "k"}'  # noqa: E501


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


def said(source: str, tools: Any = ()) -> str:
    return machine(source, tools).result().answer


def failure(source: str, tools: Any = ()) -> AsmRuntimeError:
    with pytest.raises(AsmRuntimeError) as info:
        machine(source, tools)
    return info.value


def rejected(source: str, tools: Any = ()) -> list[str]:
    with pytest.raises(PlanRejected) as info:
        Emulator(program(source), tools)
    return [f"{d.line}: {d.message}" for d in info.value.diagnostics]


WITH_PAGE = f"MOV R1, '{PAGE}'\n"


# -- reading paths ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("R1.items[0].id", 7),
        ("R1.items[1].title", "Desk"),
        ("R1.items[-1].price", 120),
        ("R1.items[0].price", 19.5),
        ("R1.items[0].tags[1]", "b"),
        ("R1.items[1].tags", "[]"),
        ("R1.items[1]", '{"id":8,"title":"Desk","price":120,"tags":[]}'),
        ("R1.next_cursor", NONE),
        ("R1.on", 1),
        ('R1["my-key"]', "k"),
        ("R1['total']", 2),
        ("[R1].total", 2),
    ],
)
def test_a_path_reads_a_part_of_the_json_text(path: str, value: Any) -> None:
    got = regs(WITH_PAGE + f"MOV R2, {path}")["R2"]
    assert got == value and type(got) is type(value)


def test_keys_may_come_from_registers_and_variables() -> None:
    got = regs(WITH_PAGE + 'MOV ESI, 1\nMOV key, "title"\nMOV R2, R1.items[ESI][key]')
    assert got["R2"] == "Desk"


def test_x86_field_forms_read_a_field_of_the_json_in_a_register() -> None:
    source = WITH_PAGE + "MOV EBX, R1.items[0]\nMOV EAX, [EBX + title]\nMOV ECX, [EBX].price"
    got = regs(source)
    assert (got["EAX"], got["ECX"]) == ("Lamp", 19.5)


def test_a_data_label_named_in_brackets_is_still_memory() -> None:
    source = "section .data\ntitle dd 5, 6\nsection .text\nMOV EBX, 4\nMOV EAX, [EBX + title]"
    assert regs(source)["EAX"] == 6


def test_a_long_integer_reads_as_its_digits() -> None:
    assert regs("MOV R1, '{\"id\": 123456789012345678901234567890}'\nMOV R2, R1.id")["R2"] == (
        "123456789012345678901234567890"
    )


def test_a_path_in_a_placeholder_and_a_walk_over_a_list() -> None:
    source = WITH_PAGE + (
        "LEN R6, R1.items\nMOV ESI, 0\nnext:\nCMP ESI, R6\nJGE done\n"
        'SAY "{R1.items[ESI].title}: {R1.items[ESI].price:.2f}"\nINC ESI\nJMP next\ndone: HLT'
    )
    assert said(source) == "Lamp: 19.50\nDesk: 120.00"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("R1.items[2]", "R1.items[2] is past the end of R1.items: it has 2 elements (0..1)"),
        ("R1.items[0].titel", "R1.items[0] has no field 'titel'; its fields: id, title, price"),
        ("R1.total.x", "R1.total is the number 2, not an object or a list: it has no .x"),
        ("R1.next_cursor.x", "R1.next_cursor is null (NONE), not an object or a list"),
        ("R1.items.id", "R1.items is a list: its elements are found by a whole number"),
        ("R1[0]", "R1 is an object: [0] needs a field name; its fields: items, next_cursor"),
        ("R2.x", "R2.x: R2 holds 'plain', not the JSON text of an object or a list"),
    ],
)
def test_a_missing_part_stops_the_plan_naming_the_line_and_the_path(
    path: str, message: str
) -> None:
    error = failure(WITH_PAGE + f'MOV R2, "plain"\nMOV R3, {path}')
    assert message in error.detail and error.line == 3


def test_a_computed_index_past_the_end_shows_its_value() -> None:
    error = failure(WITH_PAGE + "MOV ESI, 5\nMOV R3, R1.items[ESI].id")
    assert "R1.items[ESI=5][5] is past the end" not in error.detail
    assert "past the end of R1.items[ESI=5]" not in error.detail
    assert "R1.items[5] is past the end of R1.items: it has 2 elements" in error.detail


# -- writing paths ------------------------------------------------------------------------------


def test_writing_a_path_builds_the_new_text_of_the_whole() -> None:
    source = (
        "MOV R1, '{}'\nMOV R1.name, \"Ann\"\nMOV R1.tags, '[]'\nMOV R1.tags[0], \"vip\"\n"
        'LEN R2, R1.tags\nMOV R1.tags[R2], "new"\nMOV R1.note, NONE\nINC R1.visits\n'
    )
    with pytest.raises(AsmRuntimeError, match="has no field 'visits'"):
        machine(source)
    got = regs(source.replace("INC R1.visits\n", "MOV R1.visits, 1\nINC R1.visits\n"))
    assert got["R1"] == '{"name":"Ann","tags":["vip","new"],"note":null,"visits":2}'


def test_a_record_read_from_one_structure_is_written_into_another_as_a_structure() -> None:
    source = WITH_PAGE + "MOV R2, '{}'\nMOV R2.first, R1.items[0]\nMOV R3, R2.first.tags[0]"
    assert regs(source)["R3"] == "a"


def test_writing_past_the_end_of_a_list_is_refused() -> None:
    error = failure("MOV R1, '[1]'\nMOV R1[3], 2")
    assert "R1[3] is past the end of R1: it has 1 element (0..0)" in error.detail


def test_a_variable_holding_json_is_written_in_place() -> None:
    got = regs('MOV contact, \'{"phone": "1"}\'\nMOV contact.phone, "2"\nMOV R1, contact')
    assert got["R1"] == '{"phone":"2"}'


# -- LEN, HAS and the text instructions ---------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("LEN R2, R1.items", 2),
        ("LEN R2, R1.items[1].tags", 0),
        ("LEN R2, R1", 5),
        ('LEN R2, "héllo"', 5),
        ("LEN R2, NONE", 0),
        ('HAS R2, R1, "total"', 1),
        ('HAS R2, R1, "next_cursor"', 0),  # null counts as not there
        ('HAS R2, R1, "nope"', 0),
        ("HAS R2, R1.items, 1", 1),
        ("HAS R2, R1.items, 2", 0),
        ("MOV ESI, 1.0\nHAS R2, R1.items, ESI", 1),  # as R1.items[ESI] reads it
        ("HAS R2, R1.items, 0.5", 0),
        ('HAS R2, "text", "x"', 0),
        ("KEYS R2, R1", '["items","next_cursor","total","on","my-key"]'),
        ("KEYS R2, R1.items[0]\nMOV R2, R2[-1]", "tags"),
        ("KEYS R2, '{}'", "[]"),
        ('FIND R2, "Spotify AB", "AB"', 8),
        ('FIND R2, "Spotify AB", "ab"', -1),
        ("FIND R2, R1.items[0].title, 'a'", 1),
        ('SUBSTR R2, "2024-03-15", 0, 7', "2024-03"),
        ('SUBSTR R2, "report.pdf", -4', ".pdf"),
        ('SUBSTR R2, "abc", 1, 99', "bc"),
        ('LOWER R2, "Spotify AB"', "spotify ab"),
        ('UPPER R2, "Spotify AB"', "SPOTIFY AB"),
        ('NUM R2, "12.50"', 12.5),
        ('NUM R2, " 42 "', 42),
        ('NUM R2, "1,234.5"', 1234.5),
        ("NUM R2, 7", 7),
        ("MOV R2, 2.5\nROUNDSD R2, R2, 0", 2.0),
        ("MOV R2, 2.5\nROUNDSD R2, R2, 2", 3.0),
        ("MOV R2, -2.5\nROUNDSD R2, R2, 1", -3.0),
        ("MOV R2, -2.7\nROUNDSS R2, R2, 3", -2.0),
        ("MOV R2, 3.5\nROUNDSD R2, R2", 4.0),
        ("MOV R2, 2.5\nROUNDSD R2, R2, 12", 2.0),  # bit 2: the current (nearest) mode
    ],
)
def test_structure_and_text_instructions(source: str, value: Any) -> None:
    got = regs(WITH_PAGE + source).get("R2", 0)  # a register holding the integer 0 is not shown
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # (a value the check cannot know: a literal number or NONE is refused before the run)
        ("LEN R2, R1.total", "LEN needs a list, an object or text, got the number 2"),
        ('HAS R2, R1.total, "x"', "HAS needs an object or a list, got the number 2"),
        ('NUM R2, "12 EUR"', "NUM cannot read '12 EUR' as a number"),
        ('SUBSTR R2, "abc", 1.5', "SUBSTR needs a whole number for the start, got 1.5"),
        ('SUBSTR R2, "abc", 0, -1', "SUBSTR takes a count of characters, 0 or more, not -1"),
        ("MOV R3, R1.items[0].title\nROUNDSD R2, R3", "ROUNDSD needs a number, got 'Lamp'"),
        ("ROUNDSD R2, 1.5, 16", "ROUNDSD: the rounding mode is 0 to 15, not 16"),
        ("KEYS R2, R1.items", "KEYS needs an object, got a list: its elements are found by index"),
        ('KEYS R2, "text"', "KEYS needs an object, got 'text'"),
        ("KEYS R2, R1.next_cursor", "KEYS needs an object, got NONE"),
    ],
)
def test_text_instructions_refuse_what_they_cannot_read(source: str, message: str) -> None:
    assert message in failure(WITH_PAGE + source).detail


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [('"Spotify AB"', '"SPOTIFY ab"', True), ('"a"', '"b"', False), ("3", "3.0", True)],
)
def test_cmpi_compares_ignoring_case(a: str, b: str, equal: bool) -> None:
    emu = machine(f"CMPI {a}, {b}")
    assert emu.state.zf is equal


@pytest.mark.parametrize(
    "pair",
    ["EAX, EAX", "EAX, RAX", "RAX, AL", "AX, EAX", "v, v", "R1.name, R1.name", "[t], [t]"],
    ids=lambda p: p,
)
def test_one_register_by_any_of_its_names_is_one_register_twice(pair: str) -> None:
    """``XOR r, r`` gives 0 and ``TEST r, r`` tests the value itself, text too, whichever names
    of ``r`` are written (``EAX``, ``RAX``, ``AX`` and ``AL`` are one register), and so for
    one variable, cell or path twice; before the run and at run time alike."""
    setup = 'section .data\nt dq "Oslo"\nsection .text\nMOV EAX, "Oslo"\nMOV v, "Oslo"\n'
    setup += 'MOV R1, \'{"name": "Oslo"}\'\n'
    target = pair.split(",")[0]
    said = f'TEST {pair}\nSETNE R2\nXOR {pair}\nSETE R3\nSAY "{{R2}} {{R3}} {{{target}}}"'
    assert machine(setup + said).result().answer == "1 1 0"


def test_none_equals_empty_text_and_is_empty() -> None:
    emu = machine('MOV R1, NONE\nCMP R1, ""\nSETE R2\nTEST R1, R1\nSETE R3\nLEN R4, R1')
    got = emu.result().registers
    assert (got["R2"], got["R3"], got.get("R4", 0)) == (1, 1, 0)
    assert said('MOV R1, NULL\nSAY "[{R1}]"') == "[]"


def test_keys_walks_an_object_of_names_to_values() -> None:
    def ratings(city: str) -> dict[str, float]:
        """Each hotel's rating, by hotel name."""
        return {"Ritz": 4.5, "Savoy": 4.8, "Inn": 3.9}

    plan = """
    PUSH "London"
    CALL ratings
    POP R1
    KEYS R2, R1           ; the hotel names
    LEN R3, R2
    MOV ESI, 0
    MOV R9, ""            ; the best so far
    MOV xmm1, 0.0
next:
    CMP ESI, R3
    JGE done
    MOV R4, R2[ESI]       ; a name
    CMP R1[R4], xmm1
    JLE skip
    MOV xmm1, R1[R4]
    MOV R9, R4
skip:
    INC ESI
    JMP next
done:
    SAY "{R9} ({xmm1})"
"""
    assert said(plan, [ratings]) == "Savoy (4.8)"
    refused = rejected(plan.replace("MOV R4, R2[ESI]", "MOV R4, R2.name"), [ratings])
    assert refused == [
        "13: R2.name: R2 (list[text]) is a list, not an object: it has no field 'name'; take an "
        "element with a number ([0], [ESI]) first"
    ]


# -- NONE is no text: nothing from outside becomes it ----------------------------------------------

RESERVED = "\ufdd0"  # the character NONE was once held as: any text may hold it


class Deleted:
    """``delete_files(pattern="*")``: what each call deleted."""

    def __init__(self) -> None:
        self.patterns: list[str] = []

    def delete_files(self, pattern: str = "*") -> int:
        """Delete the files matching the pattern (all of them by default)."""
        self.patterns.append(pattern)
        return 1


def deleted_with(plan: str, *tools: Any) -> list[str]:
    files = Deleted()
    Emulator(program(plan), [files.delete_files, *tools]).run()
    return files.patterns


def test_a_tool_result_that_is_the_reserved_character_is_text_never_none() -> None:
    def read_pattern() -> str:
        return RESERVED

    plan = "CALL read_pattern\nPOP R1\nPUSH R1\nCALL delete_files\nPOP R0"
    assert deleted_with(plan, read_pattern) == [RESERVED]


def test_a_json_string_read_by_path_is_text_never_none() -> None:
    def rule() -> dict[str, Any]:
        return {"pattern": RESERVED, "escaped": "x"}

    def raw() -> str:
        return '{"pattern": "\\ufdd0"}'  # the JSON escape of the character

    plan = "CALL {tool}\nPOP R1\nPUSH R1.pattern\nCALL delete_files\nPOP R0"
    assert deleted_with(plan.format(tool="rule"), rule) == [RESERVED]
    assert deleted_with(plan.format(tool="raw"), raw) == [RESERVED]


@pytest.mark.parametrize(
    "plan",
    [
        f'PUSH "{RESERVED}"\nCALL delete_files\nPOP R0',
        f'p db "{RESERVED}"\nPUSH p\nCALL delete_files\nPOP R0',
        'MOV R1, \'{"p": "\\\\ufdd0"}\'\nPUSH R1.p\nCALL delete_files\nPOP R0',
        f'MOV R1, "a{RESERVED}"\nSUBSTR R2, R1, 1\nPUSH R2\nCALL delete_files\nPOP R0',
    ],
)
def test_text_written_in_the_plan_is_text_never_none(plan: str) -> None:
    assert deleted_with(plan) == [RESERVED]


def test_a_querys_text_answer_is_text_never_none() -> None:
    from llassembly.integration.query import QUERY_EXTERN, Reply, settle

    files = Deleted()
    tools = {**externs_from([files.delete_files]), "query_text": QUERY_EXTERN}
    plan = 'PUSH "t"\nPUSH "q"\nPUSH "text"\nCALL query_text\nPOP R1\nPUSH R1\nCALL delete_files'
    answer = Reply(text='{"value": "\\ufdd0"}')

    def call(request: Any) -> Any:
        if request.tool == "query_text":
            return settle(request, answer, [])
        return files.delete_files(**request.args)

    Emulator(program(plan + "\nPOP R0"), tools).run(call)
    assert files.patterns == [RESERVED]


def test_a_null_or_none_result_is_none_and_leaves_the_argument_out() -> None:
    def nothing() -> str | None:
        return None

    def rule() -> dict[str, Any]:
        return {"pattern": None}

    assert deleted_with("CALL nothing\nPOP R1\nPUSH R1\nCALL delete_files\nPOP R0", nothing) == [
        "*"
    ]
    assert deleted_with("CALL rule\nPOP R1\nPUSH R1.pattern\nCALL delete_files\nPOP R0", rule) == [
        "*"
    ]


def test_a_snapshot_keeps_none_and_the_reserved_character_apart() -> None:
    emu = machine(f'MOV R1, NONE\nMOV R2, "{RESERVED}"')
    again = Emulator(emu.program, [], state=json.loads(json.dumps(emu.snapshot())))
    assert again.state.regs[1] is NONE and again.state.regs[2] == RESERVED


def test_the_summary_says_an_argument_that_may_be_none_may_be_left_out() -> None:
    files = Deleted()

    def rule() -> dict[str, Any]:
        return {"pattern": None}

    tools = externs_from([files.delete_files, rule])
    plan = program("CALL rule\nPOP R1\nPUSH R1.pattern\nCALL delete_files\nPOP R0")
    shown = summarize(plan, tools).render()
    assert "delete_files(pattern=<computed, or left out: the tool's default>)" in shown
    fixed = program('PUSH "*.tmp"\nCALL delete_files\nPOP R0')
    assert 'delete_files(pattern="*.tmp")' in summarize(fixed, tools).render()


# -- CALL tool, N: the last arguments left to the tool's defaults ---------------------------------


def find_items(query: str, cursor: str | None = None, limit: int = 10) -> list[str]:
    """Find items; ``cursor`` and ``limit`` have defaults."""
    return [f"{query}/{cursor}/{limit}"]


def test_call_with_a_count_takes_that_many_arguments_and_leaves_the_rest_out() -> None:
    got = regs(
        'PUSH "keep"\nPUSH "lamp"\nCALL find_items, 1\nPOP R1\n'
        'PUSH "desk"\nPUSH "p2"\nCALL find_items, 2\nPOP R2\nPOP R3',
        [find_items],
    )
    assert (got["R1"], got["R2"], got["R3"]) == ('["lamp/None/10"]', '["desk/p2/10"]', "keep")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "CALL find_items, 0",
            "CALL find_items, 0: the count is how many arguments were pushed, a whole",
        ),
        (
            "CALL find_items, 4",
            "number from 1 to 3: find_items takes query, cursor, limit, and the last",
        ),
        ("CALL find_items, R1", "ones may be left out (cursor, limit) to take the tool's defaults"),
        ("CALL find_items, 1.0", "CALL find_items, 1.0: the count is how many"),
        ("CALL sub, 1", "CALL sub, 1: a subroutine takes no count of arguments"),
    ],
)
def test_a_count_the_tool_does_not_allow_is_refused(call: str, message: str) -> None:
    (problem,) = rejected(f'PUSH "lamp"\n{call}\nHLT\nsub: RET', [find_items])
    assert message in problem


def test_a_short_stack_is_told_how_to_leave_arguments_out_and_nothing_else() -> None:
    assert rejected('PUSH "lamp"\nCALL find_items\nPOP R1', [find_items]) == [
        "2: CALL find_items takes 3 values from the stack (query, cursor, limit) but on some path "
        "only 1 is there; PUSH the arguments, first parameter first, before the CALL (to leave "
        "the last ones to the tool's defaults, push the first N, at least 1, and write CALL "
        "find_items, N)"
    ]


def test_the_summary_shows_the_arguments_left_out() -> None:
    plan = program('PUSH "lamp"\nCALL find_items, 1\nPOP R1')
    assert (
        'find_items(query="lamp", cursor=NONE (left out: the tool\'s default), limit=NONE (left '
        "out: the tool's default))"
    ) in summarize(plan, externs_from([find_items])).render()


# -- text with placeholders ---------------------------------------------------------------------


def test_any_quoted_text_fills_its_placeholders() -> None:
    got = regs(
        WITH_PAGE + 'MOV R2, "Re: {R1.items[0].title} ({R1.total:02})"\nPUSH "{R2}!"\nPOP R3'
    )
    assert (got["R2"], got["R3"]) == ("Re: Lamp (02)", "Re: Lamp (02)!")


def test_json_and_escaped_braces_stay_as_written() -> None:
    got = regs('MOV R2, \'{"a": {"b": 1}}\'\nMOV R3, "{{R1}} {{x: 1}} {} {3} [a-z]{2,5}"')
    assert (got["R2"], got["R3"]) == ('{"a": {"b": 1}}', "{R1} {x: 1} {} {3} [a-z]{2,5}")


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ('{ "a": [1, {"b": null}], "c": {} }', '{ "a": [1, {"b": null}], "c": {} }'),
        ('[{"id": 7}, {"id": 8}]', '[{"id": 7}, {"id": 8}]'),
        ("{} { }", "{} { }"),
        (r"\\d{3}-\\d{2,4}", r"\d{3}-\d{2,4}"),
        (r'{\n  "a": 1\n}', '{\n  "a": 1\n}'),
    ],
)
def test_json_and_braces_no_placeholder_would_use_reach_a_tool_as_written(
    written: str, value: str
) -> None:
    assert machine(f"PUSH '{written}'\nCALL echo", [echo]).result().stack == [value]


_AS_WRITTEN = "so it would be passed on as written; write "


def echo(text: str) -> str:
    """Give the text back."""
    return text


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("<{R1:x}>", 8, "('x' is no format; formats: {R1:.2f} (2 decimals)"),
        (
            "{ R1 }",
            7,
            "(no spaces inside the braces), " + _AS_WRITTEN + "{R1}",
        ),
        ("{R1 }", 7, "(no spaces inside the braces)"),
        ("{R1:>100}", 7, "('>100' is no format"),
        (
            "{R1!r}",
            7,
            "(there are no conversions (!r)), " + _AS_WRITTEN + "{R1}",
        ),
        (
            "Total: {:.2f}",
            14,
            "(it names no value), " + _AS_WRITTEN + "{R1:.2f}",
        ),
        ("{x: 1}", 7, "or {{x: 1}} for the braces as text"),
        ("{R2.name } and {R3}", 7, "write {R2.name} for a value, or {{R2.name }} for the braces"),
    ],
)
def test_braces_meant_as_a_placeholder_that_do_not_read_as_one_are_refused(
    text: str, column: int, words: str
) -> None:
    with pytest.raises(AsmSyntaxError) as info:
        parse(f'PUSH "{text}"\nCALL echo')  # refused by the parser: no tool can run
    (problem,) = info.value.diagnostics
    assert (problem.line, problem.column) == (1, column)
    assert "in the text is no placeholder" in problem.message
    assert words in problem.message


def test_a_near_miss_in_say_or_in_a_data_label_is_refused_too() -> None:
    with pytest.raises(AsmSyntaxError, match=r"\{R1 \} in the answer text is no placeholder"):
        parse('SAY "Total: {R1 }"')
    with pytest.raises(AsmSyntaxError, match=r"\{ R1 \} in the answer text is no placeholder"):
        parse('msg db "Total: { R1 }"\nSAY msg')
    found = rejected('msg db "Total: {R1!r}"\nPUSH msg\nPOP R2')
    assert found[0].startswith("2: msg holds text with placeholders")


@pytest.mark.parametrize(
    "plan",
    [
        'SAY "{{R1}} {{x: 1}}"',
        'MOV R2, "{{R1}} {{x: 1}}"\nSAY R2',
        'section .rodata\nmsg db "{{R1}} {{x: 1}}"\nsection .text\nSAY msg',
    ],
    ids=["SAY", "MOV", "data label"],
)
def test_doubled_braces_are_one_brace_in_said_text_too(plan: str) -> None:
    """Also where the text holds no placeholder to fill (docs/language.md, *Text*)."""
    assert Emulator(parse(plan), []).run().answer == "{R1} {x: 1}"


def test_doubled_braces_keep_a_near_miss_as_text() -> None:
    assert regs('MOV R3, "{{ R1 }} {{R1!r}} {{x: 1}}"')["R3"] == "{ R1 } {R1!r} {x: 1}"


@pytest.mark.parametrize(
    ("spec", "value", "shown"),
    [
        (".2f", "2712.5", "2712.50"),
        (",.2f", "2712.5", "2,712.50"),
        (",", "1234567", "1,234,567"),
        ("02", "5", "05"),
        ("02", '"5"', "05"),  # text holding a number: that number (a Decimal field's)
        ("02", '"ab"', "ab"),
        ("d", "7.6", "8"),
        (".0%", "0.25", "25%"),
        (">5", '"ab"', "   ab"),
        (".3", '"abcdef"', "abc"),
    ],
)
def test_placeholder_formats(spec: str, value: str, shown: str) -> None:
    assert said(f'MOV R1, {value}\nSAY "{{R1:{spec}}}"') == shown


def test_a_number_format_on_text_stops_the_plan() -> None:
    error = failure('MOV R1, "abc"\nSAY "{R1:.2f}"')
    assert "{R1:.2f}: the format .2f is for numbers, and this is text ('abc')" in error.detail


def test_a_placeholder_naming_nothing_outside_say_is_refused_at_its_column() -> None:
    with pytest.raises(PlanRejected) as info:
        Emulator(program('PUSH "Hello {nobody}"\nPOP R1'), [])
    (problem,) = info.value.diagnostics
    assert (problem.line, problem.column) == (1, 13)
    assert problem.message.startswith("{nobody} in the text names no register, data label or")
    assert problem.message.endswith("write {{nobody}} to keep the braces as text")


def test_a_data_label_with_placeholders_is_filled_only_by_say() -> None:
    found = rejected('subject db "Invoice {R1}"\nPUSH subject\nPOP R2\nSAY subject')
    assert found == [
        "2: subject holds text with placeholders ({...}), and only SAY fills them in from a data "
        'label; write the text in the instruction instead (PUSH "... {R1} ..."), where '
        "placeholders are filled in"
    ]


def test_a_placeholder_that_cannot_be_read_is_a_syntax_error() -> None:
    with pytest.raises(AsmSyntaxError, match="cannot read"):
        parse('PUSH "x {R1.a[1.5]}"')


# -- NONE for optional arguments ----------------------------------------------------------------


def update_contact(contact_id: int, phone: str | None = None, email: str = "keep") -> str:
    """Update a contact."""
    return f"{contact_id}:{phone}:{email}"


def lookup(key: str, page: int | None) -> str:
    """No default, but takes None."""
    return f"{key}:{page}"


def strict(key: str) -> str:
    """No default."""
    return key


def test_none_leaves_an_argument_out_so_the_default_applies() -> None:
    emu = machine("PUSH 3\nPUSH NONE\nPUSH NONE\nCALL update_contact\nPOP R1", [update_contact])
    assert emu.result().registers["R1"] == "3:None:keep"
    call = emu.history[0].call
    assert call.args == {"contact_id": 3}


def test_none_passes_none_to_a_parameter_that_takes_it() -> None:
    assert regs('PUSH "k"\nPUSH NONE\nCALL lookup\nPOP R1', [lookup])["R1"] == "k:None"


def test_none_for_a_parameter_without_default_is_refused_naming_it() -> None:
    with pytest.raises(ToolArgumentError) as info:
        machine("MOV R2, '{\"k\": null}'\nPUSH R2.k\nCALL strict\nPOP R1", [strict])
    assert "tool 'strict', argument 'key': NONE (no value) was pushed, but the tool has no " in (
        str(info.value)
    )
    assert info.value.line == 3


def test_the_summary_says_an_argument_is_left_out() -> None:
    from llassembly import summarize

    summary = summarize(
        program('PUSH 3\nPUSH NONE\nPUSH "x"\nCALL update_contact'), [update_contact]
    )
    (site,) = summary.tools[0].sites
    shown = [argument.shown() for argument in site.arguments]
    assert shown == ["contact_id=3", "phone=NONE (left out: the tool's default)", 'email="x"']


def test_a_none_result_reads_as_none() -> None:
    def maybe() -> int | None:
        """Nothing."""
        return None

    got = regs("CALL maybe\nPOP R1\nCMP R1, NONE\nSETE R2", [maybe])
    assert (got["R1"], got["R2"]) == (NONE, 1)


# -- the x86 return value -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "returned"),
    [
        ("MOV EAX, 42\nRET", 42),
        ("MOV xmm0, 2.5\nRET", 2.5),
        ("MOV xmm0, 2.5\nCVTSD2SI EAX, xmm0\nRET", 2),  # written last: EAX
        ("MOV EAX, 3\nMOV xmm0, 1.5\nRET", 1.5),
        ("MOV EAX, 3\nMOV xmm0, 1.5\nJMP done\ndone: RET", 1.5),  # not in the block: a float
        ("MOV EAX, 3\nJMP done\ndone: RET", 3),
        ('MOV EAX, "Oslo"\nRET', "Oslo"),
        ("MOV EAX, 7\nXOR EAX, EAX\nRET", None),  # C's return 0
        ("MOV EAX, 7\nHLT", None),  # HLT returns nothing
        ("MOV EAX, 7", None),  # nor does running past the end
        ("CALL sub\nHLT\nsub: MOV EAX, 5\nRET", None),  # a subroutine's RET
    ],
)
def test_a_top_level_ret_records_the_return_value(source: str, returned: Any) -> None:
    emu = machine(source)
    assert emu.state.returned == returned and emu.result().returned == returned
    snapshot = emu.snapshot()
    assert snapshot.get("returned") == returned
    assert MachineState.restore(snapshot).returned == returned


def test_the_answer_is_what_was_said_else_the_return_value() -> None:
    assert final_answer_of(machine("MOV xmm0, 2.25\nRET").snapshot()) == "2.25"
    assert final_answer_of(machine('SAY "hi"\nMOV EAX, 5\nRET').snapshot()) == "hi"
    assert final_answer_of(machine("MOV EAX, 0\nRET").snapshot()) is None
    assert final_answer_of(None) is None


def test_empty_string_test_the_c_way() -> None:
    source = 'MOV ESI, ""\nCMP BYTE [ESI], 0\nSETE R1\nMOV ESI, "x"\nMOVZX EAX, BYTE [ESI]\n'
    source += "MOV EDI, NONE\nCMP byte ptr [EDI], 0\nSETE R2"
    got = regs(source)
    assert (got["R1"], got["EAX"], got["R2"]) == (1, ord("x"), 1)


def test_an_address_in_the_register_still_reads_its_cell() -> None:
    source = "section .data\nrow dd 4, 5\nsection .text\nLEA ESI, [row]\nMOV EAX, [ESI]"
    assert regs(source)["EAX"] == 4


# -- types before the run -----------------------------------------------------------------------


class Item(BaseModel):
    id: int
    title: str
    price: decimal.Decimal


class Page(TypedDict):
    items: list[Item]
    next_cursor: str | None


@dataclasses.dataclass
class Event:
    id: int
    title: str
    attendees: list[str]


def search(query: str, cursor: str | None = None) -> Page:
    """Search."""
    return {
        "items": [Item(id=1, title="Lamp", price=decimal.Decimal("19.50"))],
        "next_cursor": None,
    }


def events(day: str) -> list[Event]:
    """Events of a day."""
    return [Event(1, "Standup", ["ann@x.com"])]


def raw(query: str) -> dict[str, Any]:
    """Unknown shape."""
    return {"anything": 1}


TYPED = [search, events, raw]
SEARCH = 'PUSH "lamp"\nPUSH NONE\nCALL search\nPOP R1\n'


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            SEARCH + "MOV R2, R1.itemz",
            "5: R1.itemz: R1 (Page) has no field 'itemz'; its fields: items, next_cursor",
        ),
        (
            SEARCH + "MOV R2, R1.items[0].titel",
            "5: R1.items[0].titel: R1.items[0] (Item) has no field 'titel'; its fields: id, "
            "title, price",
        ),
        (
            SEARCH + "MOV R2, R1.items.id",
            "5: R1.items.id: R1.items (list[Item]) is a list, not an object: it has no field "
            "'id'; take an element with a number ([0], [ESI]) first",
        ),
        (
            SEARCH + "MOV R2, R1.items[0].id.x",
            "5: R1.items[0].id.x: R1.items[0].id (int) is a number, not an object or a list: it "
            "has no field 'x'",
        ),
        (
            SEARCH + "ADD R2, R1.items[0].price",
            "5: ADD needs numbers, but R1.items[0].price is decimal text (a decimal is text as the "
            "tool writes it); read the number in it first: NUM R9, R1.items[0].price, then ADD "
            "with R9",
        ),
        (
            SEARCH + "CMP R1.next_cursor, 0\nJE done\ndone: HLT",
            "5: CMP compares R1.next_cursor, which is text | NONE, with 0, a number: text is never "
            'equal to a number and has no order; compare it with text (CMP R1.next_cursor, "..."),'
            " or read the number in it first (NUM R9, R1.next_cursor)",
        ),
        (
            SEARCH + "MOV R2, R1[0]",
            "5: R1[0]: R1 (Page) is an object: [0] needs a field name; its fields: items, "
            "next_cursor",
        ),
        (
            SEARCH + "MOV R2, R1.items[0].id[0]",
            "5: R1.items[0].id[0]: R1.items[0].id (int) is a number, not an object or a list: it "
            "has no element [0]",
        ),
        (
            'PUSH "mon"\nCALL events\nMOV R1, EAX\nMOV R2, R1[0].attendee',
            "4: R1[0].attendee: R1[0] (Event) has no field 'attendee'; its fields: id, title, "
            "attendees",
        ),
        (
            'PUSH "mon"\nCALL events\nPOP day\nMOV ESI, 0\nMOV R2, day[ESI].titles',
            "5: day[ESI].titles: day[ESI] (Event) has no field 'titles'; its fields: id, title, "
            "attendees",
        ),
    ],
)
def test_a_path_or_compare_the_result_types_refuse_is_rejected_before_the_run(
    source: str, message: str
) -> None:
    assert rejected(source, TYPED) == [message]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            SEARCH + "LEN R2, R1.items[0].id",
            "5: LEN needs a list, an object or text, but R1.items[0].id is int on every run here",
        ),
        (
            SEARCH + 'HAS R2, R1.items[0].id, "x"',
            "5: HAS needs an object or a list, but R1.items[0].id is int on every run here",
        ),
        (
            SEARCH + "KEYS R2, R1.items",
            "5: KEYS needs an object, but R1.items is list[Item] on every run here",
        ),
        (
            SEARCH + "NUM R2, R1.items[0]",
            "5: NUM needs a number or a text holding one, but R1.items[0] is Item on every run "
            "here",
        ),
        ("LEN R2, 5", "1: LEN needs a list, an object or text, not 5"),
        ("KEYS R2, NONE", "1: KEYS needs an object, not NONE"),
    ],
)
def test_a_structure_instruction_on_a_value_it_can_never_read_is_rejected_before_the_run(
    source: str, message: str
) -> None:
    """``LEN``/``HAS`` of a number, ``KEYS`` of a list, a number or NONE, ``NUM`` of a record
    or a list: an error on every run (docs/language.md), so refused before any tool runs."""
    assert rejected(source, TYPED) == [message]


@pytest.mark.parametrize(
    "source",
    [
        SEARCH + "MOV R2, R1.items[0].title\nNUM R3, R1.items[0].price\nADD R3, 1",
        SEARCH + "CMP R1.next_cursor, NONE\nJE done\nMOV R1.extra, 1\ndone: HLT",
        'PUSH "q"\nCALL raw\nPOP R1\nMOV R2, R1.whatever.at[3]',  # dict: checked as it runs
        "MOV R1, '{\"a\": 1}'\nMOV R2, R1.b",  # JSON the plan writes: checked as it runs
        SEARCH + "MOV R9, '[]'\nLEN R8, R9\nMOV R9[R8], R1.items[0]\nMOV R2, R9[0].title",
        # what a structure instruction reads on some run (a text may hold JSON; NONE is empty)
        SEARCH + 'LEN R2, R1.items\nKEYS R3, R1\nHAS R4, R1, "items"\nLEN R5, R1.next_cursor\n'
        "KEYS R6, R1.next_cursor\nNUM R7, R1.items[0].price\nNUM R8, R1.items[0].id",
    ],
)
def test_what_a_shape_allows_or_cannot_know_passes_the_check(source: str) -> None:
    Emulator(program(source), TYPED)  # no PlanRejected


def test_shapes_are_judged_where_every_path_has_brought_its_own() -> None:
    """A register that is NONE before a loop and a record after a round of it is a union at
    the compare: judged on what every path brings, not on the first path the walk follows."""
    source = SEARCH + (
        "MOV R9, NONE\nMOV ESI, 0\nitem:\nCMP ESI, 1\nJGE done\nCMP R9, NONE\nJE take\n"
        "NUM R8, R9.price\nJMP skip\ntake: MOV R9, R1.items[ESI]\nskip: INC ESI\nJMP item\n"
        "done: HLT"
    )
    Emulator(program(source), TYPED)  # no PlanRejected
    found = rejected(source.replace("R9.price", "R9.cost"), TYPED)
    assert found == [
        "12: R9.cost: R9 (NONE | Item) has no field 'cost'; its fields: id, title, price"
    ]


def test_a_union_is_refused_only_when_no_shape_in_it_fits() -> None:
    def find(key: str) -> Item | Event | None:
        """One or the other."""
        return None

    ok = 'PUSH "k"\nCALL find\nPOP R1\nMOV R2, R1.attendees\nMOV R3, R1.price'
    Emulator(program(ok), [find])
    found = rejected('PUSH "k"\nCALL find\nPOP R1\nMOV R2, R1.nothing', [find])
    assert found == [
        "4: R1.nothing: R1 (Item | Event | NONE) has no field 'nothing'; its fields: id, title, "
        "price"
    ]


def test_values_pushed_in_one_loop_and_popped_in_another_are_refused_saying_how_to_write_it() -> (
    None
):
    source = (
        "MOV ECX, 0\na: PUSH ECX\nINC ECX\nCMP ECX, 3\nJL a\nMOV ECX, 0\n"
        "b: POP R1\nADD R2, R1\nINC ECX\nCMP ECX, 3\nJL b\nHLT"
    )
    (message,) = rejected(source)
    assert message.startswith(
        "7: POP on an empty stack: on some path nothing is on the stack when this line runs (in "
        "the loop on lines 7-11). The check counts the values pushed, not the rounds of loops"
    )
    assert "MOV R9, '[]' before the first loop, then LEN R8, R9 and MOV R9[R8], value" in message
    rewritten = (
        "MOV R9, '[]'\nMOV ECX, 0\na: LEN R8, R9\nMOV R9[R8], ECX\nINC ECX\nCMP ECX, 3\nJL a\n"
        "MOV ESI, 0\nb: MOV R1, R9[ESI]\nADD R2, R1\nINC ESI\nCMP ESI, 3\nJL b\nHLT"
    )
    assert regs(rewritten)["R2"] == 3


def test_a_structure_built_too_large_stops_the_plan() -> None:
    start = 'MOV R1, \'{"x": "' + "x" * 1000 + "\"}'\n"
    source = start + "loop: MOV R1.a, R1\nMOV R1.b, R1\nINC R2\nCMP R2, 99\nJL loop"
    error = failure(source)
    assert "would grow past the 1048576 characters a plan may build" in error.detail


class User(BaseModel):
    model_config = ConfigDict(serialize_by_alias=True, populate_by_name=True)
    first_name: str = Field(alias="firstName")


class Line(BaseModel):
    model_config = ConfigDict(ser_json_timedelta="float")
    qty: int
    unit_price: float
    internal_note: str = Field(default="", exclude=True)
    price: float = 0.5
    waits: list[datetime.timedelta] = [datetime.timedelta(seconds=2)]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> float:
        return self.qty * self.unit_price

    @field_serializer("price")
    def _price(self, value: float) -> str:
        return f"{value:.2f}"


class Codes(RootModel[list[str]]):
    pass


def get_user() -> User:
    """The current user."""
    return User(firstName="Ann")


def get_line() -> Line:
    """An order line."""
    return Line(qty=2, unit_price=1.5)


def get_codes() -> Codes:
    """Codes."""
    return Codes(["a", "b"])


MODELS = [get_user, get_line, get_codes]
MODELS_PLAN = "CALL get_user\nPOP R1\nCALL get_line\nPOP R2\nCALL get_codes\nPOP R3\n"


def test_a_pydantic_result_has_the_shape_of_the_json_the_machine_holds() -> None:
    """The machine holds ``model_dump_json()``: keys by alias when the model serializes by
    alias, computed fields, no excluded field, a field as its serializer writes it, a duration
    as a number under ``ser_json_timedelta="float"``, a root model as its root."""
    reads = "MOV R4, R1.firstName\nMOV R5, R2.total\nADD R5, R2.waits[0]\nMOV R6, R3[1]\n"
    found = regs(MODELS_PLAN + reads + "MOV R7, R2.price", MODELS)
    assert [found[r] for r in ("R4", "R5", "R6", "R7")] == ["Ann", 5.0, "b", "0.50"]
    assert rejected(MODELS_PLAN + "MOV R4, R1.first_name\nMOV R5, R2.internal_note", MODELS) == [
        "7: R1.first_name: R1 (User) has no field 'first_name'; its fields: firstName",
        "8: R2.internal_note: R2 (Line) has no field 'internal_note'; its fields: qty, "
        "unit_price, price, waits, total",
    ]
    assert rejected(MODELS_PLAN + "ADD R4, R2.price", MODELS) == [
        "7: ADD needs numbers, but R2.price is text (it is text); read the number in it first: "
        "NUM R9, R2.price, then ADD with R9"
    ]
    prompt = build_system_prompt(MODELS)
    assert "User {firstName: str}" in prompt and "MOV R2, R1.firstName" in prompt
    assert "Line {qty: int, unit_price: float, price: str, waits: list[number], total: float}" in (
        prompt
    )
    assert "get_codes() -> list[str]" in prompt


class Stamp(BaseModel):
    at: datetime.date


class Log(BaseModel):
    model_config = ConfigDict(ser_json_temporal="seconds", extra="allow")
    day: datetime.date
    stamp: Stamp


def get_log() -> Log:
    """A log entry."""
    return Log.model_validate({"day": "2024-05-01", "stamp": {"at": "2024-05-01"}, "note": "hi"})


def test_a_models_config_shapes_its_own_fields_and_keeps_its_extra_ones() -> None:
    """``ser_json_temporal`` writes the model's own dates as numbers, not those of a model it
    holds (written by its own config); ``extra="allow"`` keeps fields it does not declare."""
    plan = 'CALL get_log\nPOP R1\nADD R2, R1.day\nMOV R3, R1.note\nCMP R1.stamp.at, "2024-01-01"'
    found = regs(plan + "\nJL early\nMOV R4, 1\nearly:", [get_log])
    assert (found["R2"], found["R3"], found["R4"]) == (1714521600, "hi", 1)


class Moment(TypedDict):
    at: datetime.date


@dataclasses.dataclass
class Span:
    at: datetime.date


class Timeline(BaseModel):
    model_config = ConfigDict(ser_json_temporal="seconds")
    moment: Moment
    span: Span


@pydantic_dataclass(config=ConfigDict(serialize_by_alias=True))
class Pair:
    n: int = Field(serialization_alias="N")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def twice(self) -> int:
        return self.n * 2


@pydantic_dataclass
class Count:
    n: int

    @model_serializer
    def _number(self) -> int:
        return self.n


def get_timeline() -> Timeline:
    """A timeline."""
    return Timeline.model_validate({"moment": {"at": "2024-05-01"}, "span": {"at": "2024-05-01"}})


def get_pair() -> Pair:
    """A pair."""
    return Pair(n=2)


def get_count() -> Count:
    """A count."""
    return Count(n=4)


def test_a_models_config_writes_the_typed_dicts_and_dataclasses_it_holds() -> None:
    """Only a pydantic model it holds is written by a config of its own."""
    plan = "CALL get_timeline\nPOP R1\nMOV R2, R1.moment.at\nADD R2, R1.span.at"
    assert regs(plan, [get_timeline])["R2"] == 2 * 1714521600


def test_a_pydantic_dataclass_has_the_shape_pydantic_writes() -> None:
    """Its aliases, computed fields and serializers, as a model's."""
    plan = (
        "CALL get_pair\nPOP R1\nMOV R2, R1.N\nADD R2, R1.twice\nCALL get_count\nPOP R3\nADD R3, 1"
    )
    found = regs(plan, [get_pair, get_count])
    assert (found["R2"], found["R3"]) == (6, 5)


class Score(RootModel[int]):
    pass


def get_score() -> Score:
    """A score."""
    return Score(5)


def test_a_root_model_of_a_number_is_held_as_its_root() -> None:
    """As the check reads it: ``ADD`` works (it was held as the JSON text ``'5'``)."""
    assert regs("CALL get_score\nPOP R1\nADD R1, 1", [get_score])["R1"] == 6
