"""Every verifier check stops a broken plan before any tool runs.

Each program below calls a tool *before* its fault, so if anything executed, the recording tool
would have a call. The emulator verifies when it is built; nothing may have run when it refuses.
"""

from __future__ import annotations

import pytest

from llassembly import Emulator, PlanRejected, parse
from llassembly.program import Program

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
        'PUSH 1\nCALL log\nCMP R1, "abc"\nJL less\nless:\nHLT',
        4,
        "string",
        id="ordered-jump-after-string-compare",
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
