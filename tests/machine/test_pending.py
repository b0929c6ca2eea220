"""Pending results (``parallel_tools``): a ``POP`` of an outstanding call's result binds a pending
value, the machine runs on until an instruction reads one, and the run means what it means
sequentially.

The read rule (``llassembly.machine.pending``) is checked instruction by instruction here; the
property that overlapped and sequential runs agree on random plans is
``tests/properties/test_overlap_property.py``.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from langchain_core.tools import tool

from llassembly.analysis.cfg import control_flow, layout_of
from llassembly.errors import AsmRuntimeError, ToolCallBudgetExceeded, UsageError
from llassembly.language.instructions import OPCODE_INFO, register_index
from llassembly.language.parser import parse
from llassembly.language.program import Effects, Mem, Name, Program, Reg, effects
from llassembly.machine.access import Context
from llassembly.machine.emulator import Emulator
from llassembly.machine.state import ORDERED, MachineState, Pending
from llassembly.machine.steps import compile_step


def double(x: int) -> int:
    return 2 * x


def pair(x: int) -> tuple[int, int]:
    return x, x + 1


def shout(text: str) -> str:
    return text.upper()


def log(x: int) -> int:
    return x


TOOLS = [double, pair, shout, log]
DATA = "\nsection .data\nbuf dq 0, 0, 0, 0\nitems dq 3, 5, 7, 9\n"


def engine(source: str, marked: Any = ("double", "pair", "shout"), **options: Any) -> Emulator:
    program = parse(source)
    assert isinstance(program, Program)
    return Emulator(program, TOOLS, parallel_tools=list(marked) if marked else False, **options)


def batches(emu: Emulator) -> list[list[str]]:
    """Run to the end batch by batch; each batch as ``tool(args)`` strings."""
    found: list[list[str]] = []
    batch = emu.advance_batch()
    while batch:
        found.append([f"{c.tool}({','.join(map(str, c.args.values()))})" for c in batch])
        emu.complete_batch([emu.compiled.externs[c.tool].call(c.args) for c in batch])
        batch = emu.advance_batch()
    return found


def sequential_twin(emu_source: str) -> Emulator:
    twin = engine(emu_source, marked=())
    twin.run()
    return twin


# -- the plans models write --------------------------------------------------------------------

FIVE = "".join(f"PUSH {n}\nCALL double\nPOP R{n}\n" for n in range(1, 6))
LOOP = (
    "MOV ECX, 0\nnext:\nPUSH [items + ECX*8]\nCALL double\nPOP [buf + ECX*8]\n"
    'INC ECX\nCMP ECX, 4\nJL next\nSAY "{[buf]} {[buf + 8]} {[buf + 16]} {[buf + 24]}"' + DATA
)


def test_five_push_call_pop_calls_are_one_batch() -> None:
    emu = engine(FIVE)
    assert batches(emu) == [[f"double({n})" for n in range(1, 6)]]
    assert emu.result().registers == sequential_twin(FIVE).result().registers
    assert emu.result().registers == {f"R{n}": 2 * n for n in range(1, 6)}


def test_a_loop_storing_each_result_in_memory_overlaps_every_call() -> None:
    emu = engine(LOOP)
    assert batches(emu) == [["double(3)", "double(5)", "double(7)", "double(9)"]]
    twin = sequential_twin(LOOP)
    assert emu.snapshot() == twin.snapshot()
    assert emu.result().answer == "6 10 14 18"


def test_the_say_that_reads_the_results_is_where_the_machine_waits() -> None:
    emu = engine(LOOP)
    emu.advance_batch()
    assert emu.program.instructions[emu.state.pc].op.name == "SAY"
    assert emu.state.mem["buf"] == [Pending(1, 0), Pending(2, 0), Pending(3, 0), Pending(4, 0)]
    assert emu.state.answer == []


# -- the read rule, instruction by instruction --------------------------------------------------

# After "PUSH 1 / CALL double / POP R1" (R1 pending; R2 holds JSON, R3 an index, flags set),
# does this instruction read R1 (the machine stops before it) or only move it?
_PRELUDE = "MOV R2, '{\"x\": 1}'\nMOV R3, 1\nCMP R3, R3\nPUSH 1\nCALL double\nPOP R1\n"
_AT = 6  # the index of the instruction under test
READS = {
    "ADD R1, 1": True,
    "ADD R3, R1": True,
    "CMP R1, 3": True,
    "TEST R1, R1": True,
    "SAY R1": True,
    'SAY "got {R1}"': True,
    'PUSH "n={R1}"': True,
    'MOV R4, "{R1}!"': True,
    "MOV R2.x, R1": True,  # a part written: the whole text is built with the value
    "MOV R4, R2[R1]": True,  # a key (R1.x: a field of a number, refused before the run)
    "SUBSTR R4, R2, R1": True,  # (LEN of a number, R1 here, is refused before the run)
    "NUM R4, R1": True,
    "LEA R4, [buf + R1*8]": True,
    "MOV R4, [buf + R1*8]": True,  # an address
    "MOV [buf + R1*8], 1": True,
    "CVTSI2SD XMM0, R1": True,
    "MOV R4, R1": False,
    "PUSH R1": False,
    "MOV [buf + 8], R1": False,
    "MOV [buf + R3*8], R1": False,
    "MOV keep, R1": False,  # a variable
    "XCHG R1, R4": False,
    "XCHG R1, [buf]": False,
    "CMOVE R4, R1": False,
    "MOV R1, 5": False,  # overwritten: the pending value is dropped
    "XOR R1, R1": False,  # clears, reads nothing
    "SETE R1": False,
    "INC R3": False,
    "JMP after": False,
}


@pytest.mark.parametrize("instruction", sorted(READS))
def test_what_an_instruction_reads_and_what_it_only_moves(instruction: str) -> None:
    source = f"{_PRELUDE}{instruction}\nafter:\nNOP" + DATA
    emu = engine(source)
    assert [c.tool for c in emu.advance_batch()] == ["double"]
    stopped = emu.state.pc == _AT
    assert stopped == READS[instruction], f"{instruction}: stopped={stopped}"
    emu.complete_batch([2])
    twin = engine(source, marked=())
    assert _ending(emu, emu.advance_batch) == _ending(twin, twin.run)  # (LEN of 2 fails)


def _ending(emu: Emulator, run: Any) -> tuple[Any, ...]:
    """How a run ends: its error (if any) and its state."""
    try:
        run()
    except AsmRuntimeError as exc:
        return str(exc), emu.snapshot()
    return "finished", emu.snapshot()


def test_an_implicit_read_waits_mul_src_reads_eax_and_loop_reads_ecx() -> None:
    for body in ("POP EAX\nMUL R3", "POP ECX\nagain:\nLOOP again"):
        source = f"MOV R3, 2\nPUSH 3\nCALL double\n{body}"
        emu = engine(source)
        emu.advance_batch()
        assert emu.state.pc == 4, body  # before MUL / LOOP
        emu.complete_batch([6])
        emu.advance_batch()
        assert emu.snapshot() == sequential_twin(source).snapshot(), body


def test_a_pop_into_a_path_reads_the_result() -> None:
    source = "MOV R2, '{}'\nPUSH 3\nCALL double\nPOP R2.got\nPUSH 4\nCALL double\nPOP R5"
    emu = engine(source)
    assert batches(emu) == [["double(3)"], ["double(4)"]]
    assert emu.result().registers["R2"] == '{"got":6}'


def test_a_ret_returns_from_a_subroutine_past_pending_values_but_waits_at_the_end() -> None:
    source = (
        "CALL get\nCALL get\nMOV EAX, R1\nRET\nget:\nPUSH R9\nCALL double\nPOP R1\nINC R9\nRET\n"
    )
    emu = engine(source)
    assert [c.args["x"] for c in emu.advance_batch()] == [0, 1]
    assert emu.state.pc == 3  # the top-level RET: the plan's return value is read
    emu.complete_batch([0, 2])
    emu.advance_batch()
    assert emu.result().returned == 2 == sequential_twin(source).result().returned


def test_a_call_needing_a_pending_value_and_an_unmarked_call_each_wait() -> None:
    source = "PUSH 1\nCALL double\nPOP R1\nPUSH R1\nCALL double\nPOP R2\nPUSH 9\nCALL log\nPOP R3"
    assert batches(engine(source)) == [["double(1)"], ["double(2)"], ["log(9)"]]
    source = "PUSH 1\nCALL double\nPOP R1\nPUSH 9\nCALL log\nPOP R3\nPUSH 2\nCALL double\nPOP R2"
    assert batches(engine(source)) == [["double(1)"], ["log(9)"], ["double(2)"]]


def test_an_overwritten_pending_value_is_dropped_and_its_call_still_recorded() -> None:
    source = "PUSH 1\nCALL double\nPOP R1\nMOV R1, 7\nPUSH 2\nCALL double\nPOP R2"
    emu = engine(source)
    out = emu.run()
    assert [(r.call.args["x"], r.result) for r in out.calls] == [(1, 2), (2, 4)]
    assert out.registers == {"R1": 7, "R2": 4}


def test_copies_of_one_pending_value_are_all_filled() -> None:
    source = "PUSH 4\nCALL pair\nPOP R1\nMOV R2, R1\nPUSH R1\nPOP [buf]\nPOP R3" + DATA
    emu = engine(source)
    emu.advance_batch()
    assert emu.state.regs[1:4] == [Pending(1, 0), Pending(1, 0), Pending(1, 1)]
    emu.complete_batch([(4, 5)])
    emu.advance_batch()
    assert emu.state.regs[1:4] == [4, 4, 5] and emu.state.mem["buf"][0] == 4


# -- errors and budgets where the sequential run has them --------------------------------------


def test_an_instruction_failing_ahead_fails_after_the_results_at_its_own_line() -> None:
    source = "PUSH 1\nCALL double\nPOP R1\nMOV R4, 9\nMOV R5, [buf + R4*8]\nADD R1, 1" + DATA
    emu = engine(source)
    emu.advance_batch()  # ran ahead to the bad address: no error yet
    emu.complete_batch([2])
    with pytest.raises(AsmRuntimeError) as caught:
        emu.advance_batch()
    twin = engine(source, marked=())
    with pytest.raises(AsmRuntimeError) as expected:
        twin.run()
    assert caught.value.line == expected.value.line == 5
    assert str(caught.value) == str(expected.value)
    assert emu.snapshot() == twin.snapshot()


def test_the_tool_call_budget_stops_a_loop_where_the_sequential_run_stops() -> None:
    parallel, sequential = engine(LOOP, max_tool_calls=3), engine(LOOP, (), max_tool_calls=3)
    with pytest.raises(ToolCallBudgetExceeded) as caught:
        parallel.run()
    with pytest.raises(ToolCallBudgetExceeded) as expected:
        sequential.run()
    assert str(caught.value) == str(expected.value)
    assert parallel.snapshot() == sequential.snapshot()
    assert parallel.state.mem["buf"] == [6, 10, 14, 0]


# -- snapshots mid-flight ----------------------------------------------------------------------


def test_a_snapshot_with_pending_values_everywhere_is_json_and_resumes_anywhere() -> None:
    source = "PUSH 4\nCALL pair\nPOP R1\nPOP [buf + 8]\nPUSH 5\nCALL double\nMOV R2, R1" + DATA
    emu = engine(source)
    first = emu.advance_batch()
    snap = emu.snapshot()
    assert json.loads(json.dumps(snap)) == snap
    assert snap["registers"] == {"R1": {"call": 1, "result": 0}, "R2": {"call": 1, "result": 0}}
    assert snap["memory"]["buf"][1] == {"call": 1, "result": 1}
    assert snap["stack"] == [{"call": 2, "result": 0}]
    fresh = engine(source, state=json.loads(json.dumps(snap)))
    assert fresh.advance_batch() == first
    fresh.complete_batch([(4, 5)])  # a prefix of the batch
    fresh = engine(source, state=json.loads(json.dumps(fresh.snapshot())))
    assert [c.number for c in fresh.advance_batch()] == [2]
    fresh.complete_batch([10])
    assert fresh.advance_batch() == []
    assert fresh.snapshot() == sequential_twin(source).snapshot()


def test_a_snapshot_of_the_earlier_form_holes_on_the_stack_resumes() -> None:
    source = "PUSH 4\nCALL pair\nPUSH 5\nCALL double\nPOP R1\nPOP R2\nPOP R3"
    earlier = {
        "pc": 4,
        "registers": {},
        "stack": [None, None, None],
        "return_stack": [],
        "flags": {"zf": False, "lt": False, "mode": "unset"},
        "executed": 4,
        "tool_calls": 2,
        "halted": False,
        "pending": None,
        "outstanding": [
            {"index": 1, "values": [4], "number": 1, "at": 0, "results": 2},
            {"index": 3, "values": [5], "number": 2, "at": 2, "results": 1},
        ],
    }
    emu = engine(source, state=earlier)
    assert [c.number for c in emu.advance_batch()] == [1, 2]
    emu.complete_batch([(4, 5), 10])
    emu.advance_batch()
    assert emu.result().registers == {"R1": 10, "R2": 4, "R3": 5}


def test_a_snapshot_whose_pending_values_belong_to_no_call_is_refused() -> None:
    emu = engine(FIVE)
    emu.advance_batch()
    snap = emu.snapshot()
    with pytest.raises(UsageError):
        engine(FIVE, state={**snap, "registers": {"R1": {"call": 9, "result": 0}}})
    with pytest.raises(UsageError):
        engine(FIVE, state={**snap, "registers": {"R1": {"call": 1, "result": 1}}})
    with pytest.raises(UsageError):
        engine(FIVE, state={**snap, "outstanding": []})  # values pending on nothing
    with pytest.raises(UsageError):
        engine(FIVE, state={**snap, "registers": {"R1": {"call": 1}}})


# -- the fact the rule rests on: a step never looks at a value it only copies ----------------

_PLACES = ["R1", "R2", "EAX", "[x]", "[row + ESI*4]", "x"]
_ESI = register_index("ESI") or 0
STACK = Effects.STACK
# The labels are written by instructions that never run, so they live in the machine state.
_COPY_DATA = "\nHLT\nMOV [x], 0\nMOV [row], 0\nsection .data\nx dq 1\nrow dd 1, 2, 3\n"
_FORMS = [
    (op, number)
    for op in sorted(OPCODE_INFO, key=lambda o: o.name)
    for number in range(len(OPCODE_INFO[op].shapes))
]


def _at(st: MachineState, operand: Any) -> list[Any]:
    """The list and index of a plain place (a register, a cell, a one-cell label)."""
    if isinstance(operand, Reg):
        return [st.regs, operand.index]
    if isinstance(operand, Name):
        return [st.mem[operand.name.lower()], 0]
    assert isinstance(operand, Mem) and operand.label is not None
    return [st.mem[operand.label.lower()], st.regs[_ESI] if operand.index else 0]


def _value(st: MachineState, place: Any) -> Any:
    if place == STACK:
        return st.stack[-1]
    cells, index = _at(st, place)
    return cells[index]


def test_every_copy_the_table_names_moves_a_pending_value_without_reading_it() -> None:
    rng = random.Random(26)
    checked = 0
    for op, number in _FORMS:
        kinds = OPCODE_INFO[op].shapes[number].kinds
        if not kinds or any(kind not in ("reg", "value") for kind in kinds):
            continue
        for _ in range(8):
            text = f"{op.name} " + ", ".join(rng.choice(_PLACES) for _ in kinds)
            program = parse(text + _COPY_DATA)
            assert isinstance(program, Program)
            ins = program.instructions[0]
            fx = effects(ins)
            if not fx.copies:
                break  # the opcode copies nothing: not this test's
            flow = control_flow(program, {})
            layout = layout_of(program, {})
            step = compile_step(ins, Context(program, flow.end, 100, layout))
            st = MachineState(mem=layout.initial_memory(), flag_mode=ORDERED)
            st.zf, st.lt = rng.random() < 0.5, rng.random() < 0.5
            st.regs[_ESI] = 1  # an index into row
            st.stack = [Pending(99, 0)]
            for _w, r in fx.copies:
                if r != STACK:
                    cells, index = _at(st, ins.operands[r])
                    cells[index] = Pending(50 + r, 0)
            sources = [_value(st, STACK if r == STACK else ins.operands[r]) for _w, r in fx.copies]
            step(st, 0)  # must not fail: it only copies values that are pending
            for w, _r in fx.copies:
                after = _value(st, STACK if w == STACK else ins.operands[w])
                assert type(after) is Pending and after in sources, text
            checked += 1
    assert checked >= 20


# -- read-only tools by annotation -------------------------------------------------------------


def test_read_only_marks_the_tools_annotated_read_only() -> None:
    @tool
    def lookup(x: int) -> int:
        """Look up."""
        return x

    @tool
    def wire(x: int) -> int:
        """Send money."""
        return x

    lookup.metadata = {"readOnlyHint": True}
    wire.metadata = {"readOnlyHint": False, "destructiveHint": True}
    source = "PUSH 1\nCALL lookup\nPOP R1\nPUSH 2\nCALL lookup\nPOP R2\nPUSH 3\nCALL wire\nPOP R3"
    program = parse(source)
    assert isinstance(program, Program)
    emu = Emulator(program, [lookup, wire], parallel_tools="read_only")
    assert emu.marked == frozenset({1, 4})
    assert [len(b) for b in batches(emu)] == [2, 1]
    with pytest.raises(UsageError):
        Emulator(program, [lookup, wire], parallel_tools="readonly")
