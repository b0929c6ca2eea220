"""The machine is bounded whatever the plan and the tools: a row read whole is built once per
content and never past its limit, tool results that cannot be held stop the plan with the
library's own error, and every register that holds a value is reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from llassembly import parse_program
from llassembly.errors import AsmRuntimeError, InstructionBudgetExceeded
from llassembly.language.limits import MAX_DATA_TEXT_CHARS, MAX_ROW_TEXT_PER_RUN
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import short_repr, to_value

# -- rows read whole ---------------------------------------------------------------------------


@pytest.fixture
def dumped_lists(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The lengths of the lists ``json.dumps`` is asked to write (wherever it is called)."""
    seen: list[int] = []
    real = json.dumps

    def counting(obj: Any, *args: Any, **kwargs: Any) -> str:
        if isinstance(obj, list):
            seen.append(len(obj))
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", counting)
    yield seen


def test_an_unchanged_row_read_in_a_loop_is_written_as_json_once(dumped_lists: list[int]) -> None:
    """Each bare read built the row's JSON again: 48 s and 1.8 GB for a large row."""
    plan = "section .data\ntable times 4000 dd 7\nsection .text\nMOV [table], 6\n"
    plan += "MOV ECX, 300\nagain: MOV R1, table\nPUSH R1\nPOP R2\nLOOP again"
    result = Emulator(parse_program(plan), max_instructions_to_exec=2000).run()
    assert result.registers["R2"] == "[6," + ",".join(["7"] * 3999) + "]"
    assert dumped_lists.count(4000) <= 2  # the parser's text and the first read; was 301


def test_a_row_read_whole_follows_every_write() -> None:
    """The kept text is given only while the row holds the very same values: ``0`` and
    ``0.0`` are equal but read differently."""
    plan = (
        "section .data\nrow dd 0, 1, 2\nsection .text\n"
        "MOV R1, row\nMOV [row], 0.0\nMOV R2, row\nMOV [row + 8], 'x'\nMOV R3, row\n"
        "MOV [row], 0\nMOV [row + 8], 2\nMOV R4, row"
    )
    registers = Emulator(parse_program(plan)).run().registers
    assert [registers[r] for r in ("R1", "R2", "R3", "R4")] == [
        "[0,1,2]",
        "[0.0,1,2]",
        '[0.0,1,"x"]',
        "[0,1,2]",
    ]


def test_a_row_that_grows_by_reading_itself_stops_at_the_limit_with_its_line() -> None:
    """Writing a row's text into the row and reading it again doubled it each round (30
    rounds: gigabytes); it now stops at the read that would pass the limit."""
    plan = (
        "section .data\nrow dd 1, 'cd'\nsection .text\n"
        "MOV ECX, 24\nagain: MOV R1, row\nMOV [row], R1\nLOOP again"
    )
    emulator = Emulator(parse_program(plan), max_instructions_to_exec=300)
    limit = MAX_DATA_TEXT_CHARS
    with pytest.raises(AsmRuntimeError, match=rf"line 5: reading 'row' whole .* {limit}"):
        emulator.run()
    assert emulator.state.executed < 100
    assert all(len(cell) <= MAX_DATA_TEXT_CHARS for cell in emulator.state.mem["row"])


def test_the_text_rows_read_whole_build_in_a_run_is_bounded(dumped_lists: list[int]) -> None:
    """A loop that changes a large row and reads it whole each round: each read is new text
    (about 240 KB here), so the run stops once reads have built MAX_ROW_TEXT_PER_RUN."""
    plan = (
        f"section .data\nrow times 4000 dd text\ntext db '{'x' * 58}'\nsection .text\n"
        "MOV ECX, 100000\nagain: MOV [row], ECX\nMOV R1, row\nLOOP again"
    )
    emulator = Emulator(parse_program(plan), max_instructions_to_exec=10**6)
    dumped_lists.clear()
    with pytest.raises(
        AsmRuntimeError,
        match=r"line 7: reading and building structured text has passed .* each changed row read "
        "whole is written again",
    ):
        emulator.run()
    text = len(emulator.state.regs[1])  # type: ignore[arg-type]
    assert MAX_ROW_TEXT_PER_RUN // text <= len(dumped_lists) <= MAX_ROW_TEXT_PER_RUN // text + 1


def test_a_large_row_of_numbers_reads_whole_within_the_limit() -> None:
    plan = "section .data\nbig times 4096 dd -9223372036854775808\nsection .text\nMOV R1, big"
    value = Emulator(parse_program(plan)).run().registers["R1"]
    assert isinstance(value, str) and json.loads(value) == [-(2**63)] * 4096


def test_a_row_holding_a_long_tool_result_many_times_is_refused_before_it_is_built(
    dumped_lists: list[int],
) -> None:
    def page() -> str:
        return "p" * 100_000

    plan = (
        "section .bss\nrow resd 8\nsection .text\nCALL page\nPOP R1\nMOV ESI, 0\n"
        "fill: MOV [row + ESI*4], R1\nINC ESI\nCMP ESI, 8\nJL fill\nMOV R2, row"
    )
    emulator = Emulator(parse_program(plan), [page])
    dumped_lists.clear()  # the parser wrote the row's first text, "[0,0,0,0,0,0,0,0]"
    with pytest.raises(AsmRuntimeError, match="line 11: reading 'row' whole"):
        emulator.run()
    assert dumped_lists == []  # refused from the lengths, before any JSON was written


# -- tool results ------------------------------------------------------------------------------


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


class _Unprintable:
    """An object whose ``str`` and ``repr`` raise (a broken third-party type)."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    def __repr__(self) -> str:
        raise KeyError("no repr either")


@pytest.mark.parametrize(
    "result",
    [
        _nested(5000),
        _nested(100_000),
        {"a": _nested(3000)},
        _Unprintable(),
        [_Unprintable()],
        _nested(3000, _Unprintable()),
    ],
    ids=["list 5000", "list 100000", "dict", "object", "list of objects", "deep objects"],
)
def test_a_result_that_cannot_be_held_stops_the_plan_at_its_call(result: Any) -> None:
    def fetch() -> Any:
        return result

    emulator = Emulator(parse_program("NOP\nCALL fetch\nPOP R1"), [fetch])
    with pytest.raises(AsmRuntimeError, match=r"line 2: tool 'fetch': the tool returned") as err:
        emulator.run()
    assert len(str(err.value)) < 400
    assert emulator.snapshot()["stack"] == []


def test_the_safe_repr_never_raises() -> None:
    assert short_repr(_nested(50_000)) == "a list nested too deeply to show"
    assert short_repr(_Unprintable()) == "a _Unprintable that cannot be shown"
    assert short_repr([1, 2]) == "[1, 2]"


def test_a_result_whose_conversion_raises_keeps_its_cause() -> None:
    with pytest.raises(ValueError, match=r"cannot be read .*no text") as err:
        to_value(_Bad())
    assert isinstance(err.value.__cause__, RuntimeError)


class _Bad(int):
    """An int whose conversion to an int raises."""

    def __int__(self) -> int:
        raise RuntimeError("no text")


# -- registers ---------------------------------------------------------------------------------


def test_every_register_holding_a_value_is_in_the_result_as_in_a_snapshot() -> None:
    """``0.0``, ``-0.0`` and ``""`` are values; only the integer ``0`` is no value."""
    plan = "MOV R1, 0.0\nMOV R2, -0.0\nMOV R3, ''\nMOV R4, 5\nSUB R4, 5\nMOV xmm0, 0.0\nMOV R5, 1"
    emulator = Emulator(parse_program(plan))
    registers = emulator.run().registers
    assert registers == {"R1": 0.0, "R2": -0.0, "R3": "", "R5": 1, "XMM0": 0.0}
    assert str(registers["R2"]) == "-0.0"
    assert registers == emulator.snapshot()["registers"]


def test_the_instruction_budget_still_stops_a_row_reading_loop() -> None:
    plan = "section .data\nrow dd 1, 2\nsection .text\nMOV ECX, 0\nagain: MOV R1, row\nLOOP again"
    with pytest.raises(InstructionBudgetExceeded, match="line 6"):
        Emulator(parse_program(plan), max_instructions_to_exec=500).run()


def test_a_result_longer_than_a_run_may_read_says_so_not_to_read_it_once() -> None:
    """A structured result longer than the run's reading budget cannot be read even once: the
    error says so and what to do (ask the tool for less), not "read the parts you need once",
    which the plan already did."""

    def export() -> dict[str, int]:
        """Every counter."""
        return {f"key{i:07d}": i for i in range(MAX_ROW_TEXT_PER_RUN // 16)}

    with pytest.raises(AsmRuntimeError, match="more than a run may read") as caught:
        Emulator(parse_program("CALL export\nPOP R1\nLEN R2, R1"), [export]).run()
    assert "ask the tool for less" in str(caught.value) and "once" not in str(caught.value)
