"""Numbers stay within the language's range: 64-bit integers and finite floats."""

from __future__ import annotations

import pytest

from llassembly import AsmRuntimeError, AsmSyntaxError, Emulator, ToolArgumentError, parse


@pytest.mark.parametrize("literal", ["0x" + "f" * 40, "9" * 30, "1e999", "-1e999"])
def test_out_of_range_literal_is_a_syntax_error_at_its_column(literal: str) -> None:
    with pytest.raises(AsmSyntaxError, match="out of range") as caught:
        parse(f"MOV R1, {literal}")
    assert (caught.value.line, caught.value.column) == (1, 9)


def test_largest_64_bit_literals_are_accepted() -> None:
    program = parse("MOV R1, 0x7fffffffffffffff\nMOV R2, -9223372036854775807")
    result = Emulator(program).run()
    assert result.registers == {"R1": 2**63 - 1, "R2": -(2**63) + 1}


def test_tool_returning_nan_stops_the_plan_with_the_tool_and_line() -> None:
    def sensor() -> float:
        return float("nan")

    with pytest.raises(AsmRuntimeError, match=r"sensor.*non-finite") as caught:
        Emulator(parse("CALL sensor\nPOP R1"), [sensor]).run()
    assert caught.value.line == 1


def test_huge_integer_from_a_tool_into_a_string_parameter_is_reported_not_crashed() -> None:
    def big() -> int:
        return 2**20000

    def shout(text: str) -> str:
        return text.upper()

    with pytest.raises(ToolArgumentError, match="an integer of 20001 bits") as caught:
        Emulator(parse("CALL big\nCALL shout"), [big, shout]).run()
    assert (caught.value.tool, caught.value.argument, caught.value.line) == ("shout", "text", 2)
