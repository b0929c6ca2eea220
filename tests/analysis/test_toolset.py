"""``check``, ``verify`` and ``summarize`` take tools as the rest of the API does: a list of
LangChain tools, functions or externs, or a mapping of name to tool; anything else is a
``UsageError`` saying what tools must be, never an ``AttributeError`` from deep inside."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from llassembly import check, externs_from, parse, summarize, verify
from llassembly.analysis import summary as analysis_summary
from llassembly.analysis import verifier as analysis_verifier
from llassembly.errors import PlanRejected, UsageError
from llassembly.language.program import Program


def ping(x: int) -> int:
    """Answer x."""
    return x


@tool
def pong(x: int) -> int:
    """Answer x."""
    return x


PLAN = "PUSH 1\nCALL ping\nPOP R1\nPUSH R1\nCALL pong\nPOP R2"
BAD = "PUSH 1\nCALL ping\nCALL pong\nPOP R1\nPOP R2\nPOP R3"  # a POP too many


def program(text: str) -> Program:
    parsed = parse(text)
    assert isinstance(parsed, Program)
    return parsed


EXTERNS = externs_from([ping, pong])
EVERY_WAY: dict[str, Any] = {
    "a list of a function and a LangChain tool": [ping, pong],
    "a tuple of externs": tuple(EXTERNS.values()),
    "a mapping of externs": EXTERNS,
    "a mapping of a function and a tool": {"ping": ping, "pong": pong},
}


@pytest.mark.parametrize("way", sorted(EVERY_WAY))
def test_tools_given_any_way_check_and_summarise_alike(way: str) -> None:
    tools = EVERY_WAY[way]
    assert check(program(PLAN), tools) == ()
    verify(program(PLAN), tools)
    with pytest.raises(PlanRejected, match="POP on an empty stack"):
        verify(program(BAD), tools)
    assert check(program(PLAN), (t for t in [ping, pong])) == ()  # any iterable, read once
    summary = summarize(program(PLAN), tools)
    assert [(u.name, u.min_calls, u.arguments[0].constant) for u in summary.tools] == [
        ("ping", 1, True),
        ("pong", 1, False),
    ]


def test_a_mapping_names_each_tool_by_its_key() -> None:
    assert check(program("PUSH 1\nCALL answer\nPOP R1"), {"answer": ping}) == ()
    summary = summarize(program("PUSH 1\nCALL answer\nPOP R1"), {"answer": ping})
    assert [u.name for u in summary.tools] == ["answer"]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (5, "tools must be a list of tools .* or a mapping of tool name to tool, not int"),
        ("ping", "tools must be a list of tools .* not str"),
        ([5], "5 is neither a LangChain tool nor a callable"),
        ({"ping": 5}, "5 is neither a LangChain tool nor a callable"),
        ({1: ping}, "keyed by tool name, not 1"),
        ([ping, ping], "two tools are named 'ping'"),
    ],
)
def test_tools_given_another_way_are_a_usage_error(tools: Any, message: str) -> None:
    for entry in (check, verify, summarize):
        with pytest.raises(UsageError, match=message):
            entry(program(PLAN), tools)


def test_the_analysis_itself_takes_a_list_of_externs_and_says_what_it_cannot_read() -> None:
    """Below the machine, functions cannot be made externs: the analysis' own functions take
    externs (as a list or by name) and refuse functions with a hint, not an AttributeError."""
    externs = list(EXTERNS.values())
    assert analysis_verifier.check(program(PLAN), externs) == ()
    assert analysis_summary.summarize(program(PLAN), externs).tool("ping") is not None
    for entry in (analysis_verifier.check, analysis_summary.summarize):
        with pytest.raises(UsageError, match=r"give externs .* or call llassembly\.check"):
            entry(program(PLAN), [ping, pong])  # type: ignore[list-item]


def test_a_plain_answer_given_where_a_program_is_expected_says_so_and_how_to_narrow() -> None:
    """``parse()`` returns a :class:`PlainAnswer` for a reply with no instruction; the entry
    points that need a program say so plainly (not an ``AttributeError``)."""
    from llassembly import Emulator, parse

    answer = parse("It is sunny.")
    for name, entry in (
        ("check", lambda: check(answer, [ping])),  # type: ignore[arg-type]
        ("verify", lambda: verify(answer, [ping])),  # type: ignore[arg-type]
        ("summarize", lambda: summarize(answer, [ping])),  # type: ignore[arg-type]
        ("Emulator", lambda: Emulator(answer, [ping])),  # type: ignore[arg-type]
    ):
        with pytest.raises(UsageError, match=rf"{name}\(\) takes a Program.*parse_program"):
            entry()
