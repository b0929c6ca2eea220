"""The limits tables of ``docs/language.md`` (*Limits on what a plan may hold*, and *Limits of the
analysis* of the checks before the run) against ``llassembly/language/limits.py`` and against
what each limit does: every ``MAX_`` constant is in a table with its value, and a plan just past
each limit that refuses is refused with the error the table names, at the line it names."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from llassembly import parse_program
from llassembly.errors import (
    AsmRuntimeError,
    AsmSyntaxError,
    ExecutionError,
    PlanRejected,
    ToolArgumentError,
)
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.integration.query import QUERY_EXTERN
from llassembly.language import limits
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from, verify
from llassembly.machine.steps import compile_program

LANGUAGE = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")


def _table() -> dict[str, tuple[str, str]]:
    """``name -> (value, refused with)`` from the doc's limits tables."""
    rows = re.findall(r"^\| `(MAX_\w+)` \| ([\d,]+) \| [^|]+ \| ([^|]+) \|$", LANGUAGE, re.M)
    return {name: (value, refused) for name, value, refused in rows}


def _refusing() -> set[str]:
    """The limits whose table row names the error a plan past them is refused with."""
    return {name for name, (_, refused) in _table().items() if re.search(r"`\w+`", refused)}


def _constants() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(limits).items()
        if name.startswith("MAX_") and isinstance(value, int)
    }


def test_every_limit_is_in_the_table_with_its_value() -> None:
    table = _table()
    assert set(table) == set(_constants())
    for name, value in _constants().items():
        assert table[name][0] == f"{value:,}", name


def echo(text: str) -> str:
    """Gives its text back."""
    return text


def _run(source: str) -> None:
    externs = externs_from([echo])
    program = parse_program(source)
    compiled = compile_program(program, externs, max_stack_depth=256)
    Emulator(compiled, max_instructions_to_exec=10**6).run(lambda call: call.args["text"])


def store(record: dict[str, Any]) -> str:
    """Stores a record."""
    return "stored"


def _call(source: str) -> None:
    Emulator(parse_program(source), [store], max_instructions_to_exec=10**6).run()


def _plan_of(source: str) -> None:
    Planner(PlannerOptions()).check(source, externs_from([echo]))


def _verify(source: str) -> None:
    verify(parse_program(source), [echo])


def _query(shape: str) -> None:
    """Verify a plan asking one query for an answer of ``shape``."""
    source = f"PUSH 'a text'\nPUSH 'What?'\nPUSH '{shape}'\nCALL query_text\nPOP R1"
    verify(parse_program(source), {**externs_from([echo]), "query_text": QUERY_EXTERN})


def _fan(levels: int, fan: int) -> str:
    """One CALL of s1, each of s1..s(levels-1) CALLing the next ``fan`` times: ``fan**levels``
    calling contexts, all under the CALL on line 1."""
    lines = ["CALL s1", "HLT"]
    for k in range(1, levels + 1):
        lines += [f"s{k}:", *([f"CALL s{k + 1}"] * fan if k < levels else ["NOP"]), "RET"]
    return "\n".join(lines)


# Pushes, then a loop that POPs one per round: the least stack depth at the loop's head goes
# down by one each round, and each round visits the loop again (60 instructions), so the walk
# runs out of steps (at instruction (MAX_STEPS - 2000) % 60 of the loop) before it settles.
_STEPS_LOOP = (
    "PUSH 1\n" * 2000 + "top:\nPOP R1\nCMP R1, 0\nJE out\n" + "NOP\n" * 56 + "JMP top\nout: HLT"
)

_BIG = "a" * 100_000
# A plan just past each limit, how it is read, and the line the error must name.
PAST: dict[str, tuple[Any, str, int]] = {
    "MAX_REPLY_LINES": (parse_program, "\n" * limits.MAX_REPLY_LINES + "MOV R1, 1", 32_769),
    "MAX_PLAN_INSTRUCTIONS": (
        _plan_of,
        "\n".join(["MOV R1, 1"] * (limits.MAX_PLAN_INSTRUCTIONS + 1)),
        limits.MAX_PLAN_INSTRUCTIONS + 1,
    ),
    "MAX_MEMORY_CELLS": (parse_program, "section .data\nx resd 5000\nsection .text\nNOP", 2),
    "MAX_SAY_PLACEHOLDERS": (parse_program, 'SAY "' + "{R1}" * 257 + '"', 1),
    "MAX_PLAN_PLACEHOLDERS": (
        parse_program,
        "\n".join('SAY "' + "{R1}" * 200 + '"' for _ in range(21)),
        21,
    ),
    "MAX_DATA_TEXT_CHARS": (
        parse_program,
        'section .rodata\nx times 4000 db "' + "a" * 100 + '"\nsection .text\nMOV R1, x',
        2,
    ),
    "MAX_BUILT_TEXT_CHARS": (
        _run,
        f'MOV R1, "{_BIG}"\n' + 'MOV R1, "{R1}{R1}"\n' * 4,
        5,
    ),
    "MAX_REPEAT": (parse_program, "x times 65537 dd 1\nNOP", 1),
    "MAX_ANSWER_FIELDS": (_query, json.dumps({f"f{i}": "text" for i in range(33)}), 4),
    "MAX_ANSWER_DEPTH": (_query, '[[[[["text"]]]]]', 4),
    "MAX_ANSWER_SHAPE_CHARS": (_query, " " * 4000 + "text", 4),
    "MAX_CALL_DEPTH": (
        _verify,
        "CALL s1\nHLT\n"
        + "".join(f"s{k}:\nCALL s{k + 1}\nRET\n" for k in range(1, 18))
        + "s18:\nRET",
        4 + 15 * 3,  # CALL s17, the 17th nested call
    ),
    "MAX_STATES": (_verify, _fan(5, 20), 1),
    "MAX_STEPS": (_verify, _STEPS_LOOP, 2002 + (limits.MAX_STEPS - 2000) % 60),
    "MAX_ARGUMENT_DEPTH": (
        _call,
        "MOV R1, 1\nMOV ECX, 101\nagain: MOV R1, '{\"a\": {R1}}'\nLOOP again\nPUSH R1\nCALL store",
        6,
    ),
    "MAX_ROW_TEXT_PER_RUN": (
        _run,
        "section .data\nrow times 4000 dd text\ntext db '" + "x" * 58 + "'\nsection .text\n"
        "MOV ECX, 0\nnext:\nMOV [row], ECX\nMOV R1, row\nINC ECX\nCMP ECX, 200\nJL next",
        8,
    ),
}

_ERRORS = {
    "AsmSyntaxError": AsmSyntaxError,
    "AsmRuntimeError": AsmRuntimeError,
    "ToolArgumentError": ToolArgumentError,
}


@pytest.mark.parametrize("name", sorted(PAST))
def test_a_plan_past_each_limit_is_refused_as_the_table_says(name: str) -> None:
    read, source, line = PAST[name]
    refused = _table()[name][1]
    named = re.findall(r"`(\w+)`", refused)
    expected: tuple[type[BaseException], ...] = tuple(
        {"PlanRejected": PlanRejected, **_ERRORS}[n] for n in named
    )
    with pytest.raises(expected) as caught:
        read(source)
    error = caught.value
    if isinstance(error, PlanRejected | AsmSyntaxError):
        assert error.diagnostics[0].line == line
    else:
        assert isinstance(error, ExecutionError)
        assert error.line == line
    assert f"{getattr(limits, name)}" in str(error) or name == "MAX_ROW_TEXT_PER_RUN"


def test_the_table_covers_every_limit_with_a_plan() -> None:
    assert set(PAST) == _refusing()
    assert {"MAX_CALL_DEPTH", "MAX_STATES", "MAX_STEPS", "MAX_PLAN_INSTRUCTIONS"} <= _refusing()


def test_the_instruction_limit_is_the_same_for_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner, ``llassembly.check``/``verify``, ``Emulator`` and ``llassembly check``
    refuse a plan past ``MAX_PLAN_INSTRUCTIONS`` with the same problem: the CLI reports what
    the planner would refuse, rather than "OK"."""
    import io
    import json

    from llassembly import check, verify
    from llassembly.cli import main

    source = "\n".join(["MOV R1, 1"] * (limits.MAX_PLAN_INSTRUCTIONS + 1))
    with pytest.raises(PlanRejected) as planner:
        _plan_of(source)
    (problem,) = planner.value.diagnostics
    assert f"at most {limits.MAX_PLAN_INSTRUCTIONS} are accepted" in problem.message
    assert check(parse_program(source), [echo]) == (problem,)
    for refuse in (
        lambda: verify(parse_program(source), [echo]),
        lambda: Emulator(parse_program(source), [echo]),
    ):
        with pytest.raises(PlanRejected) as caught:
            refuse()
        assert caught.value.diagnostics == (problem,)

    (tmp_path / "limit_tools.py").write_text("def echo(text: str) -> str:\n    return text\n")
    (tmp_path / "plan.asm").write_text(source, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert main(["check", "plan.asm", "--tools", "limit_tools:echo", "--json"], out=out) == 1
    data = json.loads(out.getvalue())
    assert data["status"] == "rejected"
    assert data["problems"] == [
        {
            "line": problem.line,
            "column": problem.column,
            "message": problem.message,
            "source": problem.source,
        }
    ]
    text = io.StringIO()
    assert main(["check", "plan.asm", "--tools", "limit_tools:echo"], out=text) == 1
    assert "OK" not in text.getvalue() and "4096 are accepted" in text.getvalue()
