"""The plan's own answer: ``SAY`` with placeholders, rendered values, static checks, state."""

from __future__ import annotations

import json

import pytest

from llassembly.errors import (
    AsmRuntimeError,
    AsmSyntaxError,
    PlanRejected,
)
from llassembly.language.instructions import Opcode
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.state import MachineState


def get_temperature(city: str) -> float:
    """Temperature in °C."""
    return {"Paris": 19.5, "Oslo": 7.0, "Cairo": 31.25}[city]


def city_id(city: str) -> int:
    """A city's number."""
    return {"Paris": 1, "Oslo": 2, "Cairo": 3}[city]


TOOLS = [get_temperature, city_id]

WARMEST = """
section .data
paris db "Paris"
oslo db "Oslo"
cairo db "Cairo"
cities dd paris, oslo, cairo
answer db "The warmest is {best} at {xmm1} °C (city number {EAX}).", 0
section .text
    MOV ECX, 0
    MOV best, ""
    MOVSD xmm1, -100.0
next:
    PUSH [cities + ECX*4]
    CALL get_temperature
    POP xmm0
    COMISD xmm0, xmm1
    JLE skip
    MOVSD xmm1, xmm0
    MOV best, [cities + ECX*4]
skip:
    INC ECX
    CMP ECX, 3
    JL next
    PUSH best
    CALL city_id
    SAY answer
"""


def run(source: str) -> Emulator:
    program = parse(source)
    assert isinstance(program, Program)
    emulator = Emulator(program, TOOLS)
    emulator.run()
    return emulator


def test_say_fills_registers_variables_and_eax_from_a_data_template() -> None:
    emulator = run(WARMEST)
    assert emulator.result().answer == "The warmest is Cairo at 31.25 °C (city number 3)."
    assert emulator.snapshot()["answer"] == [emulator.result().answer]


@pytest.mark.parametrize(
    ("setup", "shown"),
    [
        ("MOV R1, 42", "42"),
        ("MOV R1, -7", "-7"),
        ("MOV R1, 19.5", "19.5"),
        ("MOV R1, 31.0", "31"),
        ("MOV R1, 0.1\nADDSD R1, 0.2", "0.3"),
        ("MOV R1, 1e20", "1e+20"),
        ('MOV R1, "Oslo"', "Oslo"),
        ("MOV R1, '{\"a\": 1}'", '{"a": 1}'),
    ],
)
def test_values_are_rendered_as_people_read_them(setup: str, shown: str) -> None:
    assert run(f'{setup}\nSAY "[{{R1}}]"').result().answer == f"[{shown}]"


def test_several_says_are_lines_in_program_order_and_a_loop_can_say() -> None:
    source = 'MOV ECX, 3\nagain:\nSAY "{ECX} left"\nLOOP again\nSAY "done"\nSAY ECX'
    assert run(source).result().answer == "3 left\n2 left\n1 left\ndone\n0"


def test_memory_placeholders_and_json_braces() -> None:
    source = """
section .data
temps dq 1.5, 2.5
section .text
MOV ESI, 1
SAY '{"first": {[temps]}, "second": {[temps + ESI*8]}, "none": {}}'
"""
    answer = run(source).result().answer
    assert json.loads(answer) == {"first": 1.5, "second": 2.5, "none": {}}


@pytest.mark.parametrize("said", ["{[EBX].name}", "{[row].name}", "{[row + 0].tags[1]}"])
def test_a_placeholder_reads_a_path_on_a_memory_cell(said: str) -> None:
    """A path may be read wherever a value is, a placeholder of any text among them
    (``[EBX].name``: field ``name`` of the JSON in ``EBX``; ``[row].name``: of the cell)."""
    source = f"""
section .data
row dq '{{"name": "Ann", "tags": ["a", "b"]}}'
section .text
MOV EBX, [row]
MOV R1, [EBX].name
PUSH "{said}"
POP R2
SAY "{said} {{R2}}"
"""
    assert run(source).result().answer in ("Ann Ann", "b b")


def test_a_plan_that_says_nothing_has_no_answer() -> None:
    emulator = run("MOV R1, 1")
    assert emulator.result().answer == ""
    assert "answer" not in emulator.snapshot()


@pytest.mark.parametrize(
    ("source", "column", "words"),
    [
        ('SAY "Hot: {R2} and {nowhere}"', 20, "{nowhere} in the answer text names no register"),
        ('SAY "{get_temperature}"', 6, "names a tool"),
        ('L1:\nSAY "{L1}"', 6, "names a code label"),
        ('section .data\nmsg db "at {spot}"\nsection .text\nSAY msg', 5, "{spot}"),
        ('SAY "{[nothing]}"', 6, "names no data label 'nothing'"),
        ('SAY "{later}"\nMOV later, 1', 6, "later is read here before it is written"),
    ],
)
def test_a_placeholder_naming_nothing_is_refused_before_anything_runs(
    source: str, column: int, words: str
) -> None:
    program = parse(source)
    assert isinstance(program, Program)
    with pytest.raises(PlanRejected) as caught:
        Emulator(program, TOOLS)
    problem = next(d for d in caught.value.diagnostics if words in d.message)
    assert problem.line == source.count("\n", 0, source.index("SAY")) + 1
    assert problem.column == column


def test_say_takes_one_operand_and_a_placeholder_must_read_as_one() -> None:
    with pytest.raises(AsmSyntaxError, match="SAY takes one operand"):
        parse('SAY "a", R1')
    with pytest.raises(AsmSyntaxError, match=r"cannot read \{\[x \+ \+\]\} in the answer"):
        parse('SAY "{[x + +]}"')


def test_a_template_the_plan_also_writes_is_refused() -> None:
    program = parse('section .data\nmsg db "v {R1}"\nsection .text\nMOV msg, "x"\nSAY msg')
    assert isinstance(program, Program)
    with pytest.raises(PlanRejected, match="also writes msg"):
        Emulator(program, TOOLS)


def test_the_answer_is_bounded() -> None:
    source = f'MOV ECX, 400\nagain:\nSAY "{"x" * 60}"\nLOOP again'
    with pytest.raises(AsmRuntimeError, match="answer would grow past"):
        run(source)


def test_the_answer_survives_snapshot_and_restore_mid_plan() -> None:
    source = 'SAY "before {R1}"\nPUSH "Oslo"\nCALL get_temperature\nPOP R1\nSAY "after {R1}"'
    program = parse(source)
    assert isinstance(program, Program)
    first = Emulator(program, TOOLS)
    call = first.advance()
    assert call is not None and call.tool == "get_temperature"
    saved = json.loads(json.dumps(first.snapshot()))
    assert saved["answer"] == ["before 0"]
    second = Emulator(program, TOOLS, state=saved)
    second.complete(7.0)
    assert second.advance() is None
    assert second.result().answer == "before 0\nafter 7"
    assert MachineState.restore(second.snapshot()).answer == ["before 0", "after 7"]
    with pytest.raises(Exception, match="answer is not a list of strings"):
        MachineState.restore({**saved, "answer": [1]})


def test_listing_shows_say_as_written() -> None:
    program = parse('SAY "It is {R1} degrees"')
    assert isinstance(program, Program)
    assert program.instructions[0].op is Opcode.SAY
    assert program.listing().strip() == 'SAY "It is {R1} degrees"'
