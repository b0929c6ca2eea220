"""Arguments written in the plan that a tool refuses are rejected before any tool runs.

``docs/language.md``, *Checks before the run*: a value written in the plan (a number, a text in
quotes, ``NONE``, a read-only data label), moved through registers, variables and the stack,
that reaches a tool's parameter which does not take it is a problem at the ``CALL``, naming the
argument and the line the value is written on. The tool is asked (``Extern.refuses``): the
machine's own conversion, then the LangChain tool's own ``args_schema`` field, so the check
refuses exactly what the run would refuse, and values it cannot know stay the run's to check.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from llassembly import check, externs_from
from llassembly.errors import PlanRejected, ToolArgumentError, ToolExecutionError
from llassembly.language.parser import parse
from llassembly.language.program import NONE, Program
from llassembly.machine.emulator import Emulator

CALLS: list[str] = []


def note(text: str) -> str:
    """Write a note (the first call of the plans below)."""
    CALLS.append(text)
    return "noted"


def book(room: str, nights: int, rate: float = 1.0) -> str:
    """Book a room."""
    CALLS.append(f"book {room} {nights} {rate}")
    return "booked"


def program(source: str) -> Program:
    parsed = parse(source)
    assert isinstance(parsed, Program)
    return parsed


def rejected(source: str, tools: list[Any]) -> list[str]:
    CALLS.clear()
    with pytest.raises(PlanRejected) as info:
        Emulator(program(source), externs_from(tools)).run()
    assert CALLS == []  # nothing ran, not even the note before the CALL
    return [f"{d.line}:{d.column}: {d.message}" for d in info.value.diagnostics]


BEFORE = 'PUSH "start"\nCALL note\nPOP R0\n'  # lines 1-3: a call that would run first


@pytest.mark.parametrize(
    ("pushes", "expected"),
    [
        (
            "PUSH NONE\nPUSH 2\nPUSH NONE",
            "CALL book: argument 'room': NONE (no value) was pushed, but the tool has no "
            "default for it and takes str; push a value; the value is written on line 4",
        ),
        (
            'PUSH "Ocean"\nPUSH "abc"\nPUSH NONE',
            "CALL book: argument 'nights': expected int, got 'abc' (could not convert string "
            "to float: 'abc'); the value is written on line 5",
        ),
        (
            'PUSH "Ocean"\nPUSH 1.5\nPUSH NONE',
            "CALL book: argument 'nights': expected int, got 1.5 (not a whole number); the "
            "value is written on line 5",
        ),
        (
            'PUSH "Ocean"\nPUSH 2\nPUSH "cheap"',
            "CALL book: argument 'rate': expected float, got 'cheap' (could not convert "
            "string to float: 'cheap'); the value is written on line 6",
        ),
    ],
)
def test_a_literal_the_tool_refuses_is_rejected_at_the_call(pushes: str, expected: str) -> None:
    found = rejected(BEFORE + pushes + "\nCALL book", [note, book])
    assert found == [f"7:6: {expected}"]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ('MOV R3, "abc"\nPUSH "Ocean"\nPUSH R3\nPUSH NONE\nCALL book', 1),  # a register
        ('MOV n, 1.5\nPUSH "Ocean"\nPUSH n\nPUSH NONE\nCALL book', 1),  # a variable
        ('PUSH "abc"\nPOP R4\nPUSH "Ocean"\nPUSH R4\nPUSH NONE\nCALL book', 1),  # the stack
        ('PUSH "Ocean"\nPUSH 2.5\nMOV EAX, 0\nPUSH NONE\nCALL book', 2),  # below other code
        ('n db "abc"\nPUSH "Ocean"\nPUSH n\nPUSH NONE\nCALL book', 1),  # a read-only label
        ("MOV R1, NONE\nPUSH R1\nPUSH 2\nPUSH NONE\nCALL book", 1),  # NONE, moved
    ],
)
def test_a_literal_moved_before_the_call_is_followed_to_where_it_is_written(
    source: str, line: int
) -> None:
    (found,) = rejected(source, [book])
    call = source.count("\n") + 1  # the CALL is the last line
    assert found.startswith(f"{call}:6: CALL book: argument ")
    assert found.endswith(f"the value is written on line {line}")


def text_of(number: int) -> str:
    """A text the check cannot know."""
    return "abc" if number else "3"


def test_values_the_check_cannot_know_are_left_to_the_run() -> None:
    plan = 'PUSH 1\nCALL text_of\nPOP R1\nPUSH "Ocean"\nPUSH R1\nPUSH NONE\nCALL book'
    tools = externs_from([text_of, book])
    assert check(program(plan), tools) == ()
    with pytest.raises(ToolArgumentError, match="argument 'nights'"):
        Emulator(program(plan), tools).run()


def test_different_literals_meeting_are_left_to_the_run() -> None:
    plan = (
        'PUSH 1\nCALL text_of\nPOP R1\nMOV R2, "3"\nCMP R1, "abc"\nJNE go\nMOV R2, "x"\n'
        'go:\nPUSH "Ocean"\nPUSH R2\nPUSH NONE\nCALL book'
    )
    assert check(program(plan), externs_from([text_of, book])) == ()


def test_none_for_a_parameter_with_a_default_stays_allowed() -> None:
    plan = 'PUSH "Ocean"\nPUSH "3"\nPUSH NONE\nCALL book'
    assert check(program(plan), externs_from([book])) == ()


# -- the check refuses exactly what the run refuses ----------------------------------------------


class Guest(BaseModel):
    name: str
    age: int


@tool
def register(
    count: Annotated[int, Field(ge=0, le=10)],
    code: Annotated[str, Field(max_length=3)],
    level: Literal["low", "high"],
    guest: Guest,
    tags: list[int],
    flag: bool,
) -> str:
    """Register a guest."""
    return "ok"


_VALUES: list[int | float | str] = [
    0, 1, -1, 11, 2**63 - 1, 1.0, 1.5, -0.0, 1e300,
    "", "3", " 3 ", "3.0", "1e3", "abc", "low", "high", "LOW", "true", "0", "yes", "ab", "abcd",
    NONE, "[1, 2]", '["x"]', "[]", '{"name": "Ann", "age": 3}', '{"name": "Ann"}', "{}",
    "null", "nan",
]  # fmt: skip


def same(value: Any) -> Any:
    """Give the value back (its result is of a type the check does not know)."""
    return value


def _written(value: int | float | str) -> str:
    return "NONE" if value == NONE else json.dumps(value)


def _run_refuses(position: int, value: int | float | str) -> bool:
    """Whether a run with ``value`` for the parameter at ``position`` fails at the CALL (the
    other arguments are fine). The value comes back from a tool, so the check does not know
    it and the run alone decides."""
    good: list[int | float | str] = [1, "ab", "low", '{"name": "Ann", "age": 3}', "[1]", 1]
    pushes = [f"PUSH {_written(a)}" for a in good]
    pushes[position] = "PUSH R9"
    plan = f"PUSH {_written(value)}\nCALL same\nPOP R9\n" + "\n".join(pushes)
    parsed = program(plan + "\nCALL register\nPOP R1")
    tools = externs_from([same, register])
    assert check(parsed, tools) == ()
    try:
        Emulator(parsed, tools).run()
    except (ToolArgumentError, ToolExecutionError):
        return True
    return False


@pytest.mark.parametrize("position", range(6))
def test_the_check_refuses_a_literal_exactly_when_the_run_would(position: int) -> None:
    ext = externs_from([register])["register"]
    for value in _VALUES:
        asked = ext.refuses(position, value) is not None
        assert asked == _run_refuses(position, value), (ext.params[position].name, value)


# -- a text built with placeholders --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('"a {R1}"', "its text around the placeholders holds 'a', which no number holds"),
        ('"{R1} nights"', "its text around the placeholders holds 'n', which no number holds"),
        ('"{R1}/{R1}"', "its text around the placeholders holds '/', which no number holds"),
    ],
)
def test_a_text_with_placeholders_no_number_can_read_as_is_rejected_for_a_number(
    text: str, reason: str
) -> None:
    """``PUSH "a {R1}"`` for an ``int``: whatever R1 holds, the text is no number."""
    plan = f'PUSH 1\nCALL text_of\nPOP R1\nPUSH "Ocean"\nPUSH {text}\nPUSH NONE\nCALL book'
    (found,) = rejected(plan, [text_of, book])
    assert found == (
        f"7:6: CALL book: argument 'nights': expected int, got {text} ({reason}); "
        "the value is written on line 5"
    )


@pytest.mark.parametrize(
    "text", ['"{R1}"', '"-{R1}"', '" {R1}.5 "', '"1e{R1}"', '"{R1}_000"', '"{R1:.2f}"']
)
def test_a_text_with_placeholders_that_may_read_as_a_number_is_left_to_the_run(text: str) -> None:
    plan = f'PUSH 0\nCALL text_of\nPOP R1\nPUSH "Ocean"\nPUSH {text}\nPUSH NONE\nCALL book'
    assert check(program(plan), externs_from([text_of, book])) == ()


def test_a_text_with_placeholders_moved_to_a_register_is_followed() -> None:
    plan = 'PUSH 1\nCALL text_of\nPOP R1\nMOV R2, "a {R1}"\nPUSH "Ocean"\nPUSH R2\n'
    plan += "PUSH NONE\nCALL book"
    (found,) = rejected(plan, [text_of, book])
    assert found.startswith("8:6: CALL book: argument 'nights': expected int, got \"a {R1}\"")
    assert found.endswith("the value is written on line 4")


@pytest.mark.parametrize("text", ['"l{R1}"', '"x{R1}"', '"mid {R1}"', '"HIGH{R1}"'])
def test_a_text_with_placeholders_for_a_literal_is_left_to_the_run(text: str) -> None:
    """A validator may read the text before the choices do (a ``BeforeValidator`` that lowers
    it, an enum's ``_missing_``), so no spelling is refused before the run."""
    ext = externs_from([register])["register"]
    template = program(f"PUSH {text}").instructions[0].operands[0]
    assert ext.refuses(2, template) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("position", [0, 1, 3, 4, 5])
def test_a_text_with_placeholders_is_left_to_the_run_for_other_kinds(position: int) -> None:
    """A bool, a text with a length, JSON, or a constrained number from digits: the check
    refuses only what no filling of the placeholders can make fit."""
    ext = externs_from([register])["register"]
    template = program('PUSH "{R1}9"').instructions[0].operands[0]
    assert ext.refuses(position, template) is None  # type: ignore[arg-type]


_PIECE = st.text(alphabet="0123456789 +-._eEalowhigTRUEx/\u0663", max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    position=st.integers(0, 5),
    pieces=st.lists(_PIECE, min_size=2, max_size=3),
    fills=st.lists(st.text(alphabet="0123456789 -.eElowhigtrux", max_size=5), min_size=4),
)
def test_a_text_with_placeholders_is_refused_only_when_every_text_it_may_become_is(
    position: int, pieces: list[str], fills: list[str]
) -> None:
    """Sound: each text the template may become (its placeholders filled with any text) is
    refused too, as the run refuses it (``refuses`` on a value is exact: see above)."""
    ext = externs_from([register])["register"]
    text = "{R1}".join(p.replace("{", "").replace("}", "") for p in pieces)
    template = program(f"PUSH {json.dumps(text)}").instructions[0].operands[0]
    if ext.refuses(position, template) is None:  # type: ignore[arg-type]
        return
    for fill, other in zip(fills, reversed(fills), strict=True):
        made = template.pieces[0] + fill + template.pieces[1]
        made += "".join(other + piece for piece in template.pieces[2:])
        assert ext.refuses(position, made) is not None, made


class _Payee(BaseModel):
    name: str
    iban: str


class _Order(BaseModel):
    payee: _Payee
    amount: str
    day_of_month: int = Field(ge=1, le=28)
    reference: str | None = None


@tool
def create_order(order: _Order) -> str:
    """Create a standing order."""
    return "ok"


def test_a_record_refused_for_one_field_names_the_field_and_its_limit() -> None:
    """The refusal a model reads (clipped for the repair request) keeps what it must fix: the
    field's path and pydantic's reason, not only the start of the value it wrote."""
    from llassembly.errors import Diagnostic

    order = {
        "payee": {"name": "Landlord Ltd", "iban": "DE55LAND0000111122223333"},
        "amount": "900.00",
        "reference": "rent for the flat on the third floor",
        "day_of_month": 31,
    }
    plan = parse(f"PUSH '{json.dumps(order)}'\nCALL create_order")
    [problem] = check(plan, [create_order])
    shown = Diagnostic(4, 10, problem.message, "CALL create_order").render()
    assert "day_of_month: Input should be less than or equal to 28" in shown
    order["payee"] = {"name": "Landlord Ltd"}
    [problem] = check(parse(f"PUSH '{json.dumps(order)}'\nCALL create_order"), [create_order])
    assert "payee.iban: Field required" in problem.message
