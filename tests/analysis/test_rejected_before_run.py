"""Every verifier check stops a broken plan before any tool runs.

Each program below calls a tool *before* its fault, so if anything executed, the recording tool
would have a call. The emulator verifies when it is built; nothing may have run when it refuses.
"""

from __future__ import annotations

import pytest

from llassembly import Emulator, PlanRejected, parse
from llassembly.errors import AsmSyntaxError
from llassembly.language.program import Program

CALLS: list[tuple[str, tuple[object, ...]]] = []


def log(value: int) -> None:
    """Record a value (the side effect that must not happen)."""
    CALLS.append(("log", (value,)))


def add(a: int, b: int) -> int:
    """Add two numbers."""
    CALLS.append(("add", (a, b)))
    return a + b


FAULTS = [
    pytest.param(
        "PUSH 1\nCALL log\nFROB R1, 2", 3, "unknown instruction", id="unknown-instruction"
    ),
    pytest.param("PUSH 1\nCALL log\nCALL launch_missiles", 3, "unknown tool", id="unknown-tool"),
    pytest.param("PUSH 1\nCALL log\nJMP nowhere", 3, "nowhere", id="undefined-label"),
    pytest.param("PUSH 1\nCALL log\nMOV R1", 3, "operand", id="operand-count"),
    pytest.param(
        "PUSH 1\nCALL log\nCMP R1, 0\nJE skip\nPUSH 2\nskip:\nPUSH 3\nCALL add",
        8,
        "add",
        id="call-with-too-few-values-on-some-path",
    ),
    pytest.param(
        "PUSH 1\nCALL log\nCMP R1, 0\nJE skip\nPUSH 2\nskip:\nPOP R2",
        7,
        "empty",
        id="pop-underflow-on-some-path",
    ),
    pytest.param("PUSH 1\nCALL log\nspin:\nNOP\nJMP spin", 4, "loop", id="loop-that-never-ends"),
    pytest.param(
        "PUSH 1\nCALL log\ntop:\nPUSH 2\nCALL log\nJMP top",
        4,
        "can never end: there is no way out",
        id="loop-around-a-tool-call-that-never-ends",
    ),
    pytest.param(
        "PUSH 1\nCALL log\ntop:\nCALL twice\nJMP top\ntwice:\nPUSH 2\nCALL log\nRET",
        4,
        "can never end: there is no way out",
        id="loop-through-a-subroutine-that-never-ends",
    ),
    pytest.param(
        'PUSH 1\nCALL log\nCMP "abc", 1\nJL less\nless:\nHLT',
        3,
        "text is never equal to a number",
        id="compare-of-text-with-a-number",
    ),
    pytest.param("PUSH 1\nCALL log\nJE done\nNOP\ndone: HLT", 3, "flags", id="jump-with-no-flags"),
    pytest.param(
        "PUSH 1\nCALL log\nJMP check\nagain:\nINC R1\nCMP R1, 3\ncheck:\nJL again\nHLT",
        8,
        "flags",
        id="jump-with-no-flags-on-some-path",
    ),
    pytest.param(
        'PUSH 1\nCALL log\nADD R1, "x"', 3, "string", id="arithmetic-with-a-string-literal"
    ),
    pytest.param(
        'section .data\nmsg db "hi", 0\nsection .text\nPUSH 1\nCALL log\nMUL R1, msg',
        6,
        "string",
        id="arithmetic-with-string-data",
    ),
    pytest.param(
        'PUSH 1\nCALL log\nMOV R1, "x"\nINC R1', 4, "string", id="inc-of-a-string-register"
    ),
    pytest.param(
        'PUSH 1\nCALL log\nPUSH "x"\nPOP R2\nDEC R2', 5, "string", id="dec-of-a-popped-string"
    ),
    pytest.param(
        "global nowhere\nPUSH 1\nCALL log\nHLT", 1, "nowhere", id="global-naming-no-label"
    ),
    pytest.param(
        "PUSH 1\nCALL log\nCALL sub\nPUSH 2\nCALL log\nHLT\nsub:\nPUSH 3\nCALL log",
        9,
        "without ret",
        id="subroutine-running-past-the-end",
    ),
    pytest.param(
        "\n".join(
            ["PUSH 1", "CALL log", *["PUSH 0"] * 16, "CALL s1", "HLT"]
            + [
                line
                for k in range(1, 18)
                for line in (f"s{k}:", "POP R1", *([f"CALL s{k + 1}"] if k < 17 else []), "RET")
            ]
        ),
        83,
        "nest deeper than 16",
        id="subroutines-nested-deeper-than-the-checker-follows",
    ),
    pytest.param(
        "\n".join(
            ["PUSH 1", "CALL log", *["CALL s1"] * 20, "POP R1", "HLT"]
            + [
                line
                for k in range(1, 5)
                for line in (f"s{k}:", *([f"CALL s{k + 1}"] * 20 if k < 4 else ["NOP"]), "RET")
            ]
        ),
        3,
        "too many paths",
        id="too-many-paths-to-check",
    ),
]


@pytest.mark.parametrize(("source", "line", "words"), FAULTS)
def test_broken_plan_is_rejected_before_any_tool_runs(source: str, line: int, words: str) -> None:
    CALLS.clear()
    program = parse(source)
    assert isinstance(program, Program)
    with pytest.raises(PlanRejected) as caught:
        Emulator(program, [log, add]).run()
    message = str(caught.value)
    assert f"line {line}" in message
    assert words in message.lower()
    assert CALLS == []


def test_all_problems_are_reported_in_one_rejection() -> None:
    CALLS.clear()
    program = parse("PUSH 1\nCALL log\nFROB R1\nCALL launch_missiles\nMOV R1")
    assert isinstance(program, Program)
    with pytest.raises(PlanRejected) as caught:
        Emulator(program, [log, add]).run()
    lines = sorted(d.line for d in caught.value.diagnostics)
    assert lines == [3, 4, 5]
    assert CALLS == []


def test_a_data_label_named_like_a_register_is_refused_before_any_tool_runs() -> None:
    """``MOV R1, R5`` reads register R5, never the data ``R5``: the parser refuses the plan."""
    CALLS.clear()
    with pytest.raises(AsmSyntaxError) as caught:
        Emulator(parse('section .data\nR5 db "hello", 0\nsection .text\nPUSH 1\nCALL log'), [log])
    assert "line 2" in str(caught.value)
    assert "register" in str(caught.value)
    assert CALLS == []


def test_a_rejection_of_many_problems_lists_twenty_and_counts_the_rest() -> None:
    CALLS.clear()
    program = parse("\n".join(f"CALL launch{n}" for n in range(1, 24)))
    assert isinstance(program, Program)
    with pytest.raises(PlanRejected) as caught:
        Emulator(program, [log, add]).run()
    assert len(caught.value.diagnostics) == 23  # every problem is kept
    message = str(caught.value)
    assert "line 20, column 6: unknown tool 'launch20'" in message
    assert "launch21" not in message
    assert message.endswith("\n... and 3 more problems like these")
    assert CALLS == []
