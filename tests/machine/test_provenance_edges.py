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


def test_a_value_swapped_into_a_cell_its_register_addressed_keeps_its_sources() -> None:
    """``XCHG ESI, [cells + ESI*8]`` puts a tool's result in the cell ESI addressed before
    the swap, and its sources with it: reading that cell into the guarded argument is
    refused, as with ``MOV``."""

    def amount() -> int:
        """An amount an email asks for."""
        return 3

    plan = (
        "section .bss\ncells resq 10\nsection .text\nCALL amount\nPOP ESI\n"
        "XCHG ESI, [cells + ESI*8]\nPUSH [cells + 3*8]\nCALL lookup\nPOP R1"
    )
    guard = never_from("lookup", "key", ["amount"])
    emulator = Emulator(parse_program(plan), [lookup, amount], dataflow=[guard])
    with pytest.raises(Exception, match="amount"):
        emulator.run()
    assert emulator.state.mem["cells"][:4] == [0, 0, 0, 3]  # (where the result went)
