"""The verifier's rarer reports: each pinned by its line, column and message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, TypedDict

import pytest
from pydantic import BaseModel

from llassembly.analysis.verifier import check
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.externs import externs_from


@dataclass(frozen=True)
class FakeTool:
    name: str
    params: tuple[str, ...] = ()
    n_results: int = 1


TOOLS = {"get": FakeTool("get")}
ENDLESS = "\ntop:\nNOP\nJMP top"  # reached, no exit: a path-level problem
LOOP = "this loop (lines {}-{}) can never end: there is no way out of it and it calls no tool"


def problems(text: str) -> list[tuple[int, int, str]]:
    program = parse(text)
    assert isinstance(program, Program)
    return [(d.line, d.column, d.message) for d in check(program, TOOLS)]


def test_past_a_thousand_problems_the_rest_are_counted_not_listed() -> None:
    found = problems("CALL nope\n" * 1002 + "HLT")
    assert len(found) == 1001
    assert found[0] == (1, 6, "unknown tool 'nope'; available tools: get")
    assert found[999] == (1000, 6, "unknown tool 'nope'; available tools: get")
    assert found[1000] == (1000, 6, "... and 2 more problems, not listed; fix the ones above first")


def test_a_path_where_a_label_is_needed_is_structural_and_stops_the_path_checks() -> None:
    """``JMP R1.next``: where the jump goes is not known, so the paths are not walked (the
    endless loop after it is not reported)."""
    assert problems("MOV R1, 1\nJMP R1.next" + ENDLESS) == [
        (2, 5, "JMP needs a label, not the path R1.next")
    ]


def test_a_path_where_memory_is_needed_is_reported_and_the_paths_still_checked() -> None:
    assert problems("MOV R1, 1\nLEA R2, R1.x" + ENDLESS) == [
        (2, 9, "LEA needs a memory operand [...], not the path R1.x"),
        (4, 1, LOOP.format(4, 5)),
    ]


def test_a_count_after_an_unknown_tool_adds_no_second_report() -> None:
    assert problems("PUSH 1\nCALL nope, 1\nHLT") == [
        (2, 6, "unknown tool 'nope'; available tools: get")
    ]


def test_a_loop_with_no_exit_is_reported_when_the_paths_cannot_be_followed() -> None:
    """A subroutine that calls itself leaves the paths incomplete (no endless loop is found
    on them); the loop the graph shows with no exit is still reported."""
    found = problems("CALL f" + ENDLESS + "\nf:\nCALL f\nRET")
    assert found[0] == (3, 1, LOOP.format(3, 4))
    assert found[1][:2] == (6, 1)
    assert found[1][2].startswith("CALL f: subroutines nest deeper than 16 calls here")
    assert len(found) == 2


def test_messages_write_none_and_a_text_with_placeholders_as_the_plan_does() -> None:
    assert problems('MOV R1, 1\nJMP "a {R1}"\nHLT') == [(2, 5, 'JMP needs a label, not "a {R1}"')]
    assert problems("LEA R1, NONE") == [
        (1, 9, "LEA needs a memory operand like [name + ESI*4], not NONE")
    ]


@pytest.mark.parametrize(
    ("plan", "problem"),
    [
        ('MOV R1, 5\nMOV R2, R1.x\nSAY "{R2}"', "it has no field 'x'"),
        ("MOV R1, 5\nINC R1.x", "it has no field 'x'"),
        ("MOV R1, 2.5\nMOV R2, R1[0]", "it has no element [0]"),
        ('MOV R1, 5\nMOV R2, "v={R1.x}"', "it has no field 'x'"),  # in a text's placeholder
    ],
)
def test_a_path_on_a_number_the_plan_wrote_is_refused_whatever_the_tools(
    plan: str, problem: str
) -> None:
    """The run would fail at that line; with no tool (or only tools of numbers) the check
    before the run says so too, as it does beside a tool of structured results."""
    for tools in ({}, TOOLS):  # none, or one whose result has no declared shape
        program = parse(plan)
        assert isinstance(program, Program)
        found = check(program, tools)
        assert [d.line for d in found] == [2], (plan, tools)
        assert "is a number, not an object or a list: " + problem in found[0].message


def test_a_compare_of_text_the_plan_wrote_with_a_number_is_refused_whatever_the_tools() -> None:
    """The run stops at the ordered jump on every run; the check says so before it, with no
    tool or beside tools of numbers only, as it does beside a tool of text (finding 1)."""

    def count_open() -> int:
        """How many tickets are open."""
        return 12

    compare = (
        "CMP compares R2, which is text, with R1, a number: text is never equal to a number and "
        'has no order; compare it with text (CMP R2, "..."), or read the number in it first '
        "(NUM R9, R2)"
    )
    plan = parse('CALL count_open\nPOP R1\nMOV R2, "10"\nCMP R1, R2\nJG out\nout: HLT')
    assert isinstance(plan, Program)
    assert [(d.line, d.column, d.message) for d in check(plan, externs_from([count_open]))] == [
        (4, 9, compare)
    ]
    assert problems('MOV R1, "abc"\nCMP R1, 5\nJL x\nx: HLT') == [
        (
            2,
            5,
            "CMP compares R1, which is text, with 5, a number: text is never equal to a number "
            'and has no order; compare it with text (CMP R1, "..."), or read the number in it '
            "first (NUM R9, R1)",
        )
    ]


def test_a_data_label_with_placeholders_read_as_memory_or_a_placeholder_is_refused() -> None:
    """Only ``SAY label`` fills the label's text in; read as ``[label]`` (at any address in it),
    or as a placeholder of a text (in ``SAY`` too), the template would go out unfilled."""
    head = 'section .rodata\nsubject db "Invoice {R1} is due", 0\nsection .text\nMOV R1, 7\n'
    other = (
        "holds text with placeholders ({...}), and only SAY fills them in from a data label; "
        'write the text in the instruction instead (PUSH "... {R1} ..."), where placeholders '
        "are filled in"
    )
    say = (
        "holds text with placeholders ({...}), and only SAY fills them in from a data label; "
        "write SAY subject (the label alone) to fill them in"
    )
    assert problems(head + "PUSH [subject]\nCALL get") == [(5, 6, "[subject] " + other)]
    assert problems(head + "MOV R2, [subject + ESI]") == [(5, 9, "[subject + ESI] " + other)]
    assert problems(head + 'MOV R2, "re: {[subject]}"') == [(5, 14, "[subject] " + other)]
    assert problems(head + "SAY [subject]") == [(5, 5, "[subject] " + say)]
    assert problems(head + 'SAY "{subject}"') == [(5, 6, "subject " + say)]
    assert problems(head + 'SAY "Re: {[subject]}"') == [(5, 10, "[subject] " + say)]
    assert problems(head + "SAY subject") == []
    writes = 'section .data\nsubject db "Invoice {R1}", 0\nsection .text\nMOV [subject], "x"\n'
    assert problems(writes + "PUSH [subject]\nCALL get") == []  # the plan wrote it: the run's
    for read in ('SAY "got {subject}"', "MOV R2, subject", 'MOV R2, "re: {[subject]}"'):
        assert problems(writes + read) == []  # so it is by name or as a placeholder
        assert problems(writes.replace("[subject]", "subject") + read) == []


class Item(BaseModel):
    id: int
    title: str


def get_item(item_id: int) -> Item:
    """An item."""
    return Item(id=item_id, title="lamp")


def after_get_item(plan: str) -> list[tuple[int, int, str]]:
    program = parse("PUSH 1\nCALL get_item\n" + plan)
    assert isinstance(program, Program)
    return [(d.line, d.column, d.message) for d in check(program, externs_from([get_item]))]


POP_IT = (
    "; when a CALL tested with JC or JNC succeeds, EAX holds NONE and its results are on the "
    "stack: POP them"
)


def test_eax_after_a_tested_call_that_succeeded_is_none() -> None:
    """``CALL f`` / ``JC failed``: where the call succeeded, its result is on the stack and EAX
    holds NONE, so a path or arithmetic on EAX there fails on every run (finding 5)."""
    path = "EAX.title: EAX (NONE) is always NONE (null), not an object or a list: it has no "
    path += "field 'title'" + POP_IT
    failed = '\nHLT\nfailed:\nSAY "no item: {EAX}"'
    assert after_get_item("JC failed\nMOV R1, EAX.title" + failed) == [(4, 9, path)]
    assert after_get_item('JNC ok\nSAY "{EAX}"\nHLT\nok:\nMOV R1, EAX.title') == [(7, 9, path)]
    add = "ADD needs numbers, but EAX is NONE on every run here" + POP_IT
    assert after_get_item("JC failed\nADD EAX, 1" + failed) == [(4, 5, add)]
    assert after_get_item("JC failed\nPOP R1\nMOV R2, R1.title" + failed) == []
    assert (
        after_get_item("JC failed\nPOP R1\nMOV R2, EAX" + failed.replace("{EAX}", "{EAX.x}")) == []
    )
    # EAX written again before the test, or the test reached from elsewhere: no split
    assert after_get_item("POP EAX\nJC failed\nMOV R1, EAX.title" + failed) == []
    assert after_get_item("again:\nJC failed\nMOV R1, EAX.title\nJMP again" + failed) == []
    assert problems("MOV R1, NONE\nINC R1") == [
        (2, 5, "INC needs numbers, but R1 is NONE on every run here; MOV a number into R1 first")
    ]
    assert problems("ADD R1, NONE") == [(1, 9, "ADD needs numbers, but NONE (no value) is not one")]


class Order(TypedDict):
    id: int
    status: str
    lines: list[Item]


def get_order(order_id: int) -> Order:
    """An order."""
    return {"id": order_id, "status": "7", "lines": [Item(id=1, title="lamp")]}


def order_problems(plan: str) -> list[tuple[int, int, str]]:
    program = parse("PUSH 42\nCALL get_order\nPOP R1\n" + plan)
    assert isinstance(program, Program)
    return [(d.line, d.column, d.message) for d in check(program, externs_from([get_order]))]


def test_a_path_the_plan_wrote_into_a_record_is_there_with_the_value_written() -> None:
    """Writing ``R1.total`` adds the field, writing ``R1.status`` changes its value: read back
    after the write, each is what was written (finding 2: both were refused by the tool's
    declared shape)."""
    assert order_problems('MOV R1.total, 7.5\nSAY "total {R1.total}"') == []
    assert order_problems("MOV R1.status, 1\nMOV R2, R1.status\nINC R2") == []
    assert order_problems('MOV R1.lines[0].note, "x"\nMOV R2, R1.lines[0].note') == []
    assert order_problems('MOV R1.id, "x"\nADD R2, R1.id') == [
        (
            5,
            9,
            "ADD needs numbers, but R1.id is text (it is text); read the number in it first: "
            "NUM R9, R1.id, then ADD with R9",
        )
    ]
    assert order_problems("MOV R1.total, 1\nMOV R2, R1.totl") == [
        (
            5,
            9,
            "R1.totl: R1 (Order) has no field 'totl'; its fields: id, status, lines, total",
        )
    ]


class Tagged(BaseModel):
    id: int
    title: str
    tags: list[str]


def find_items(query: str) -> list[Tagged]:
    """Items matching a query."""
    return [Tagged(id=1, title="lamp", tags=["home"])]


def found_problems(plan: str) -> list[tuple[int, int, str]]:
    program = parse('PUSH "lamp"\nCALL find_items\nPOP R1\n' + plan)
    assert isinstance(program, Program)
    return [(d.line, d.column, d.message) for d in check(program, externs_from([find_items]))]


@pytest.mark.parametrize(
    ("plan", "problem"),
    [
        (
            "MOV R2, R1[0]\nADD R2, 1",
            (
                5,
                5,
                "ADD needs numbers, but R2 is Tagged (an object or a list is held as its JSON "
                "text); take a number out of it with a path (R2.field, R2[0])",
            ),
        ),
        (
            "MOV R2, R1[0].tags\nINC R2",
            (
                5,
                5,
                "INC needs numbers, but R2 is list[text] (an object or a list is held as its "
                "JSON text); take a number out of it with a path (R2.field, R2[0])",
            ),
        ),
        (
            "CMP R1[0], 1\nJL a\na: HLT",
            (
                4,
                5,
                "CMP compares R1[0], which is Tagged, with 1, a number: text is never equal "
                "to a number and has no order; take a number out of it with a path (R1[0].field, "
                "R1[0][0])",
            ),
        ),
        (
            'MOV ESI, "a"\nMOV R2, R1[ESI]',
            (
                5,
                9,
                "R1[ESI]: R1 (list[Tagged]) is a list: its elements are found by a whole "
                "number; ESI is text",
            ),
        ),
    ],
)
def test_what_a_record_or_a_list_cannot_be_used_for_is_refused(
    plan: str, problem: tuple[int, int, str]
) -> None:
    """Records and lists are JSON text: these fail on every run (finding 8)."""
    assert found_problems(plan) == [problem]


def test_what_a_record_or_a_list_can_be_used_for_passes() -> None:
    plan = (
        'LEN R2, R1\nLEN R3, R1[0].title\nHAS R4, R1[0], "id"\nKEYS R5, R1[0]\n'
        "MOV ESI, 0\nMOV R6, R1[ESI].id\nADD R6, 1\nCMP R1[0].id, 1\nJE a\na: HLT"
    )
    assert found_problems(plan) == []


def test_a_division_by_a_read_only_cell_holding_zero_is_refused() -> None:
    """``[zero]`` reads the one cell of read-only data holding 0, as ``zero`` does (finding 4);
    a cell of .data may change, and a computed address is the run's."""
    data = "section .rodata\nzero dd 0\nrow dd 4, 0\nsection .data\nz dd 0\nsection .text\n"
    refused = "DIV divides by {}, which is 0: division by zero; divide by a number that is not 0 "
    refused += "(CMP it with 0 and jump around first)"
    assert problems(data + "MOV R1, 5\nDIV R1, [zero]") == [(8, 9, refused.format("[zero]"))]
    assert problems(data + "MOV R1, 5\nDIV R1, [row + 4]") == [(8, 9, refused.format("[row + 4]"))]
    assert problems(data + "MOV R1, 5\nDIV R1, [row]\nDIV R1, [z]\nDIV R1, [row + ESI]") == []
    assert problems(data + "MOV R1, 5\nDIV R1, [zero - 4]") == [
        (8, 9, "[zero - 4] reads cell -1 of zero, which has 1 (cells 0..0, at bytes 0..0)")
    ]


def one() -> int:
    """A number."""
    return 5


def after_one(plan: str) -> list[tuple[int, int, str]]:
    program = parse("CALL one\n" + plan + '\nHLT\nbad:\nSAY "bad {EAX}"')
    assert isinstance(program, Program)
    return [(d.line, d.column, d.message) for d in check(program, externs_from([one]))]


def test_a_copy_of_eax_made_before_the_test_of_a_call_holds_what_eax_holds_after_it() -> None:
    """``CALL one`` / ``MOV R1, EAX`` / ``JC bad``: where the call succeeded, every place copied
    from EAX between the CALL and the JC holds the result, as EAX does; where it failed, the
    error's text (finding F5: R1 was "text on some path" after the success)."""
    assert after_one("MOV R1, EAX\nJC bad\nADD R1, 1") == []
    assert after_one("MOV R1, EAX\nJNC ok\nHLT\nok:\nADD R1, 1") == []
    copies = "MOV R1, EAX\nMOV R2, R1\nMOV x, R2\nPUSH EAX\nXCHG R3, R2\nJC bad\n"
    assert after_one(copies + "ADD R1, 1\nADD x, 1\nADD R3, 1\nPOP R4\nADD R4, 1") == []
    text = "ADD needs numbers, but on some path {0} holds a string here (from a string literal, "
    text += "string data or a tool that returns str); keep text and numbers in different "
    text += "registers, or MOV a number into {0} first (arithmetic works on numbers only)"
    # written again before the test: what was written; and on the failure side: the error
    assert after_one('MOV R1, EAX\nMOV R2, R1\nMOV R1, "x"\nJC bad\nADD R2, 1\nADD R1, 1') == [
        (7, 5, text.format("R1"))
    ]
    assert after_one('MOV R1, EAX\nJNC ok\nADD R1, 1\nHLT\nok:\nSAY "{R1}"') == [
        (4, 5, text.format("R1"))
    ]


def test_the_success_side_of_a_tested_call_holds_where_paths_meet_after_it() -> None:
    """The split is made on the JC/JNC's edges, so a default set on the failure side meets the
    success side's result (it used to be lost where the two met); EAX written again between
    the CALL and the test, or a label nothing jumps to, no longer turns it off for the copies."""
    assert after_one("MOV R1, EAX\nJNC ok\nMOV R1, 0\nok:\nADD R1, 1") == []
    assert after_one("MOV R1, EAX\nJC no\nj:\nADD R1, 1\nHLT\nno:\nMOV R1, 0\nJMP j") == []
    assert after_one("XCHG EAX, R5\nJC bad\nADD R5, 1") == []
    assert after_one("MOV R1, EAX\nMOV EAX, 0\nJC bad\nADD R1, 1\nADD EAX, 1") == []
    assert after_one("MOV R1, EAX\ncheck:\nJC bad\nADD R1, 1") == []
    # a copy into a one-cell label of the plan's data, by name or as memory, as into a variable
    for copy in ("MOV v, EAX", "MOV [v], EAX"):
        plan = f"{copy}\nJC bad\nMOV R1, v\nADD R1, 1\nHLT\nsection .data\nv dd 0"
        assert after_one(plan) == []
    # a jump into the code between the CALL and the test: the facts there are not the call's
    assert after_one('MOV R1, EAX\nc:\nJC no\nADD R1, 1\nHLT\nno:\nMOV R1, "x"\nJMP c') != []


class Point(NamedTuple):
    x: int
    y: int


def point() -> Point:
    """A point."""
    return Point(1, 2)


def after_point(plan: str) -> list[tuple[int, int, str]]:
    program = parse("CALL point\nPOP R1\n" + plan)
    assert isinstance(program, Program)
    return [(d.line, d.column, d.message) for d in check(program, externs_from([point]))]


def test_an_element_written_at_a_fixed_lists_length_is_added_as_to_any_list() -> None:
    """A NamedTuple is held as a JSON array: ``MOV R1[2], 5`` adds an element, as for a list
    (finding F8: refused as "has 2 elements"); past the end, or through it, the run fails."""
    assert after_point("MOV R1[2], 5\nMOV R2, R1[2]\nADD R2, 1") == []
    assert after_point("MOV R1[1], 7\nMOV R1[-2], 7") == []
    assert after_point("MOV R1[3], 5") == [(3, 5, "R1[3]: R1 (Point) has 2 elements, not [3]")]
    assert after_point("MOV R1[2].x, 5") == [(3, 5, "R1[2].x: R1 (Point) has 2 elements, not [2]")]


@pytest.mark.parametrize(
    "plan",
    [
        'MOV v, 0\nLEA ESI, [v]\nMOV [ESI], "hello"\nLEN R2, v\nSAY "{R2}"',
        "MOV v, '[1]'\nLEA ESI, [v]\nMOV [ESI], '{\"a\": 1}'\nKEYS R2, v\nSAY \"{R2}\"",
        'MOV v, "x"\nLEA ESI, [v]\nMOV [ESI], 4\nINC v\nSAY "{v}"',
    ],
)
def test_a_variable_written_through_its_address_holds_what_was_written(plan: str) -> None:
    """A write through an address (``[ESI]`` after ``LEA ESI, [v]``) may be the variable's:
    what the variable held before is no longer known, so nothing it held is refused."""
    assert problems(plan) == []


def test_a_message_that_lists_names_clips_each_one() -> None:
    """A list of the labels (or fields) a plan may have meant shows each name clipped: twenty
    25,000-character label names, listed in each of a thousand problems, held half a
    gigabyte of messages."""
    labels = "".join(f"{chr(97 + i)}{'x' * 25_000} dd 1\n" for i in range(20))
    source = "section .data\n" + labels + "section .text\n" + "MOV R1, [nothing]\n" * 50
    problems = check(parse(source), externs_from([]))
    assert len(problems) == 50
    assert all("names no data label" in p.message and len(p.message) < 2000 for p in problems)
