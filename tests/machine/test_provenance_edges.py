"""Edges of keeping provenance (``llassembly.machine.provenance``): a write the step itself
refuses, and a step compiled with data-flow policies run on a state that keeps none."""

from __future__ import annotations

import pytest

from llassembly import parse_program
from llassembly.analysis.policies import never_from
from llassembly.errors import AsmRuntimeError, UsageError
from llassembly.machine.emulator import Emulator
from llassembly.machine.state import MachineState
from llassembly.machine.steps import compile_program


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


POLICY = never_from("lookup", "key", ["lookup"])
MISALIGNED = "section .data\nrow dd 1, 2\nsection .text\nMOV EBX, 5\nMOV [row + EBX], 1"


def test_a_write_to_an_address_not_at_a_cell_fails_as_without_policies() -> None:
    message = r"line 5: \[row \+ EBX\] is at byte 5 of 'row', not at a cell"
    for dataflow in ([], [POLICY]):
        emulator = Emulator(parse_program(MISALIGNED), [lookup], dataflow=dataflow)
        with pytest.raises(AsmRuntimeError, match=message):
            emulator.run()
        assert emulator.state.mem == {"row": [1, 2]}


def test_a_step_kept_with_provenance_refuses_a_state_without_it() -> None:
    compiled = compile_program(
        parse_program(MISALIGNED), [lookup], max_stack_depth=64, dataflow=[POLICY]
    )
    step = compiled.steps[0]  # MOV EBX, 5
    assert step is not None
    state = MachineState(mem={"row": [1, 2]})
    with pytest.raises(
        UsageError, match="a program compiled with data-flow policies runs with provenance"
    ):
        step(state, 0)
    assert state.regs == MachineState().regs  # nothing written
