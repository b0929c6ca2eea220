"""The instruction table says what each instruction reads and writes, and the machine agrees.

The summary and the verifier trust :func:`~llassembly.language.program.effects`: a
register it does not list as read must not change what the instruction does, and one it does
not list as written must not change. Here every operand form of every opcode is run by the
machine's own step on random states (a fixed seed), twice: once as drawn, once with everything
the table says it does not read drawn again. What the table says it writes must come out the
same, and nothing else may change.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from llassembly.analysis.cfg import control_flow, layout_of
from llassembly.errors import AsmRuntimeError
from llassembly.language.instructions import OPCODE_INFO, Opcode, register_index
from llassembly.language.parser import parse
from llassembly.language.program import NONE, Effects, Program, effects
from llassembly.machine.access import Context
from llassembly.machine.state import ORDERED, UNORDERED, UNSET, MachineState
from llassembly.machine.steps import compile_step

TRIALS = 40  # random instructions and states per operand form
_DATA = "\nl: HLT\nsection .data\nx dd 5\nrow dd 1, 2, 3\n"
_REGS = ["R1", "R2", "EAX", "ECX", "EDX"]
# Paths into the JSON a register holds (read and written), a text with placeholders, [EDX]
# (text: its first character; a number: an address), NONE.
_STRUCTURED = ["R1.x", "R2[0]", "EAX.l[ESI]", '"t{R2}"', '"{R1.x:02}"', "[EDX]", "NONE"]
_OPERANDS: dict[str, list[str]] = {
    "reg": [*_REGS, *_REGS, "[x]", "[row + ESI*4]", "R1.x", "R2[1]", "EAX.l[ESI]"],
    "value": [
        *_REGS,
        *_REGS,
        *_STRUCTURED,
        *["-3", "0", "2", "7", "2.5", '"s"', "[x]", "[row + ESI*4]", "x"],
    ],
    "label": ["l"],
    "target": ["l"],
    "mem": ["[row + ESI*4]", "[x + R1]"],
    "count": ["1", "2"],
}
_ESI = register_index("ESI") or 0
_USED = [register_index(name) or 0 for name in (*_REGS, "EBX")]
_VALUES: list[Any] = [*range(-4, 10), 0, 1, 2, 1.5, -0.0, "", "s", "\ufdd0", NONE]
_VALUES += ['{"x": 3, "l": [1, 2, "s"]}', "[5, 6]", "[]"] * 3  # JSON to read paths of
_FORMS = [
    (op, number)
    for op in sorted(OPCODE_INFO, key=lambda o: o.name)
    for number in range(len(OPCODE_INFO[op].shapes))
]


def _instruction(rng: random.Random, op: Opcode, number: int) -> str:
    if op is Opcode.SAY:
        return 'SAY "n={R1} m={EAX}"'
    kinds = OPCODE_INFO[op].shapes[number].kinds
    return f"{op.name} " + ", ".join(rng.choice(_OPERANDS[kind]) for kind in kinds)


def _state(rng: random.Random, program: Program) -> MachineState:
    state = MachineState(mem=layout_of(program, {}).initial_memory())
    for reg in _USED:
        state.regs[reg] = rng.choice(_VALUES)
    state.regs[_ESI] = rng.randrange(3)  # an index into row
    state.zf, state.lt = rng.random() < 0.5, rng.random() < 0.5
    state.flag_mode = rng.choice([UNSET, ORDERED, UNORDERED])
    state.stack = [rng.choice(_VALUES) for _ in range(rng.randrange(4))]
    return state


def _redraw_unread(rng: random.Random, state: MachineState, fx: Effects) -> MachineState:
    other = copy.deepcopy(state)
    for reg in (*_USED, _ESI):
        if reg not in fx.registers_read:
            other.regs[reg] = rng.randrange(3) if reg == _ESI else rng.choice(_VALUES)
    if not fx.info.condition:
        other.zf, other.lt = rng.random() < 0.5, rng.random() < 0.5
        other.flag_mode = rng.choice([UNSET, ORDERED, UNORDERED])
    return other


def _run(step: Any, state: MachineState) -> tuple[str, Any]:
    try:
        return "went to", step(state, 0)
    except AsmRuntimeError as exc:
        return "failed", exc.detail


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


@pytest.mark.parametrize(("op", "number"), _FORMS, ids=[f"{op.name}-{n}" for op, n in _FORMS])
def test_each_instruction_reads_and_writes_what_the_table_says(op: Opcode, number: int) -> None:
    rng = random.Random(f"{op.name}-{number}")
    ran = 0
    for _ in range(TRIALS):
        text = _instruction(rng, op, number)
        program = parse(text + _DATA)
        assert isinstance(program, Program)
        fx = effects(program.instructions[0])
        flow = control_flow(program, {})
        ctx = Context(program, flow.end, 1000, layout_of(program, {}))
        step = compile_step(program.instructions[0], ctx)
        first = _state(rng, program)
        other = _redraw_unread(rng, first, fx)
        before = copy.deepcopy(first)
        outcome = _run(step, first)
        assert outcome == _run(step, other), (
            f"{text}: depends on what the table says it does not read"
        )
        if outcome[0] == "failed":
            continue
        ran += 1
        changed = {r for r, value in enumerate(first.regs) if not _same(value, before.regs[r])}
        assert changed <= fx.registers_written, f"{text} wrote {changed}"
        for reg in fx.registers_written:
            assert _same(first.regs[reg], other.regs[reg]), text
        flags = (first.zf, first.lt, first.flag_mode)
        if fx.flags_written:
            assert flags == (other.zf, other.lt, other.flag_mode), text
        else:
            assert flags == (before.zf, before.lt, before.flag_mode), f"{text} set the flags"
        kept = len(before.stack) - fx.info.pops
        assert len(first.stack) == kept + fx.info.pushes, text
        assert first.stack[:kept] == before.stack[:kept], text
        if not fx.writes_memory:
            assert first.mem == before.mem, f"{text} wrote memory"
    assert ran, f"no {op.name} ran without failing: the test tries nothing"


@pytest.mark.parametrize("outcome", ["result", "failure"])
@pytest.mark.parametrize("test", ["JC l", "POP R1\nSETNC R2", "MOV R3, EAX\nJNC l"])
def test_a_tool_call_writes_what_its_effects_in_the_graph_say(outcome: str, test: str) -> None:
    """A tool ``CALL``'s effects come from the control-flow graph (the EAX convention, a call
    the plan tests): the machine writes those registers and flags, and nothing else."""
    from llassembly.machine.emulator import Emulator, Failed
    from llassembly.machine.externs import externs_from

    def reading(x: int) -> int:
        return x + 1

    program = parse(f"MOV EAX, 5\nCMP 1, 2\nPUSH 3\nCALL reading\n{test}\nl: HLT")
    assert isinstance(program, Program)
    emu = Emulator(program, externs_from([reading]))
    call = emu.advance()
    assert call is not None
    before = copy.deepcopy(emu.state)
    emu.complete(4 if outcome == "result" else Failed(RuntimeError("down")))
    fx = emu.compiled.flow.effects[call.index]  # type: ignore[union-attr]
    after = emu.state
    changed = {r for r, value in enumerate(after.regs) if not _same(value, before.regs[r])}
    assert changed <= fx.registers_written and fx.flags_written
    assert (after.zf, after.lt, after.flag_mode) == (False, outcome == "failure", ORDERED)
