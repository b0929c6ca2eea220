"""A state given back to the emulator (``llassembly.machine.emulator``, ``...machine.state``)
that a run could not have left: a snapshot altered before it is given back, or a
``MachineState`` built by hand. Each is refused with what is wrong, before anything runs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llassembly import parse_program
from llassembly.analysis.dataflow import NO_SOURCES
from llassembly.analysis.policies import never_from
from llassembly.errors import UsageError
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.state import MachineState, Shadow


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


PLAN = (
    "section .data\nseen dd 0\nsection .text\n"
    'MOV [seen], 1\nPUSH "a"\nCALL lookup\nPOP EBX\nPUSH "b"\nCALL lookup\nPOP ECX'
)


def paused(parallel: bool = False) -> tuple[Program, dict[str, Any]]:
    """The plan, and its snapshot at its first tool call (both calls issued, when parallel)."""
    program = parse_program(PLAN)
    emulator = Emulator(program, [lookup], parallel_tools=parallel)
    if parallel:
        assert len(emulator.advance_batch()) == 2
    else:
        assert emulator.advance() is not None
    return program, emulator.snapshot()


def refused(program: Program, snapshot: dict[str, Any] | MachineState, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Emulator(program, [lookup], state=snapshot)


def test_the_unaltered_snapshots_are_taken_back() -> None:
    for parallel in (False, True):
        program, snapshot = paused(parallel)
        assert Emulator(program, [lookup], state=snapshot).run().registers["EBX"] == "A"


def test_a_hand_built_state_holding_a_value_no_register_holds_is_refused() -> None:
    program = parse_program(PLAN)
    state = MachineState(mem={"seen": [0]})
    state.regs[1] = 2**70
    refused(program, state, "the state holds a value that is not a 64-bit int, finite float or")


def test_a_pending_call_that_is_not_a_tool_call_is_refused() -> None:
    program, snapshot = paused()
    snapshot["pending"]["index"] = 0  # MOV [seen], 1
    refused(program, snapshot, "the state's pending call is not a tool CALL of this program")


def test_memory_that_is_not_the_programs_data_is_refused() -> None:
    program, snapshot = paused()
    assert snapshot["memory"] == {"seen": [1]}
    for memory in ({"seen": [1, 2]}, {"other": [1]}):
        altered = {**snapshot, "memory": memory}
        refused(program, altered, "the state's memory does not match this program's data labels")


def test_an_outstanding_call_that_is_not_a_tool_call_is_refused() -> None:
    program, snapshot = paused(parallel=True)
    snapshot["outstanding"][1]["index"] = 0
    refused(program, snapshot, "the state's outstanding call is not a tool CALL of this program")


def test_a_fault_that_is_not_an_error_record_is_refused() -> None:
    program, snapshot = paused()
    refused(program, {**snapshot, "fault": {"type": 3}}, "the state's fault is not an error record")


def test_an_unknown_register_name_is_refused() -> None:
    program, snapshot = paused()
    altered = {**snapshot, "registers": {"EZX": 1}}
    refused(program, altered, "snapshot names an unknown register 'EZX'")


def test_provenance_of_memory_that_is_not_a_cell_is_refused() -> None:
    program, snapshot = paused()
    for entry in (["seen", -1, []], ["seen", 0], [3, 0, []]):
        altered = {**snapshot, "provenance": {"memory": [entry]}}
        refused(program, altered, "not an emulator snapshot: provenance of memory")


def test_an_earlier_snapshots_hole_that_is_not_on_the_stack_is_refused() -> None:
    """The earlier form of an outstanding call: its results were ``null`` holes on the stack
    from ``at``; a hole past the stack, or over a value, is no hole."""
    program, snapshot = paused(parallel=True)
    earlier = copy.deepcopy(snapshot)
    earlier["stack"] = [None, "not a hole"]
    for call, at in zip(earlier["outstanding"], (0, 1), strict=True):
        call.update(at=at, results=1)
    refused(program, earlier, "not an emulator snapshot: a hole is not where it should be")
    earlier["stack"] = [None]
    refused(program, earlier, "not an emulator snapshot: a hole is not where it should be")


def test_call_at_an_instruction_that_is_not_a_tool_call_is_refused() -> None:
    emulator = Emulator(parse_program(PLAN), [lookup])
    with pytest.raises(UsageError, match=r"no tool CALL at instruction 0 \(bad snapshot\?\)"):
        emulator.call_at(0, ["a"], 1)
    assert emulator.call_at(2, ["a"], 1).args == {"key": "a"}


def test_a_hand_built_state_without_memory_starts_with_the_programs_data() -> None:
    program = parse_program(PLAN)
    state = MachineState(pc=1)  # after MOV [seen], 1: built before the plan had memory
    emulator = Emulator(program, [lookup], state=state)
    assert emulator.state.mem == {"seen": [0]}
    assert emulator.run().registers["ECX"] == "B"


def test_a_hand_built_state_whose_provenance_does_not_fit_its_stack_is_refused() -> None:
    program = parse_program(PLAN)
    policy = never_from("lookup", "key", ["lookup"])
    state = MachineState(pc=3, stack=["a"], provenance=Shadow(stack=[]))
    with pytest.raises(UsageError, match="the state's provenance does not fit its stack"):
        Emulator(program, [lookup], state=state, dataflow=[policy])
    fitting = MachineState(pc=3, stack=["a"], provenance=Shadow(stack=[NO_SOURCES]))
    resumed = Emulator(program, [lookup], state=fitting, dataflow=[policy])
    assert resumed.run().registers == {"EBX": "a", "ECX": "B"}  # at POP EBX: "a" was on the stack
