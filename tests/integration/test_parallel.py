"""Independent calls at once (``parallel_tools``): the machine runs ahead of marked calls, the
batch runs together, and the plan's meaning is exactly the sequential one.

Engine tests drive ``advance_batch``/``complete_batch`` by hand; agent tests use the plain
``create_agent(model, tools, middleware=[ToolsPlannerMiddleware(parallel_tools=...)])``
pattern with hand-written model replies (``ScriptedChatModel``).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

import pytest
from conftest import asm, meta, shape
from fakes import ScriptedChatModel
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ToolCallLimitMiddleware
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from random_plans import EXTERNS, LIMITS, MAX_STACK, programs

from llassembly import AToolsPlannerNode, ToolsPlannerMiddleware, ToolsPlannerNode
from llassembly.errors import (
    AsmRuntimeError,
    InstructionBudgetExceeded,
    LLAssemblyError,
    StackDepthExceeded,
    ToolCallBudgetExceeded,
    ToolExecutionError,
    UsageError,
)
from llassembly.integration.graph import PlanGraph, PlanRun
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator, Failed
from llassembly.machine.externs import externs_from
from llassembly.machine.state import Pending
from llassembly.machine.steps import compile_program

THREAD = {"configurable": {"thread_id": "p1"}}

# -- deterministic tools ---------------------------------------------------------------------------


def temp(city: str) -> float:
    return {"Paris": 19.5, "Oslo": 8.0, "Cairo": 31.0}.get(city, 0.0)


def split(x: int) -> tuple[int, int]:
    return x // 10, x % 10


def note(text: str) -> None:
    return None


def double(x: int) -> int:
    return 2 * x


def boom(x: int) -> int:
    raise RuntimeError("boom is down")


def engine(source: str, *, parallel: Any = True, **limits: Any) -> Emulator:
    program = parse(source)
    assert isinstance(program, Program)
    return Emulator(program, [temp, split, note, double, boom], parallel_tools=parallel, **limits)


def run_by_hand(emu: Emulator) -> list[list[str]]:
    """Run to the end batch by batch; return each batch as ``tool(args)`` strings."""
    batches: list[list[str]] = []
    batch = emu.advance_batch()
    while batch:
        batches.append([f"{c.tool}({','.join(map(str, c.args.values()))})" for c in batch])
        emu.complete_batch([emu.compiled.externs[c.tool].call(c.args) for c in batch])
        batch = emu.advance_batch()
    return batches


FAN_OUT = """
PUSH "Paris"
CALL temp
PUSH "Oslo"
CALL temp
PUSH "Cairo"
CALL temp
POP R3
POP R2
POP R1
MOVSD R4, R1
MAXSD R4, R2
MAXSD R4, R3
"""


# -- the engine ----------------------------------------------------------------------------------


def test_independent_calls_form_one_batch_and_results_land_in_program_order() -> None:
    emu = engine(FAN_OUT)
    batch = emu.advance_batch()
    assert [(c.tool, c.args, c.number) for c in batch] == [
        ("temp", {"city": "Paris"}, 1),
        ("temp", {"city": "Oslo"}, 2),
        ("temp", {"city": "Cairo"}, 3),
    ]
    # The POPs and the MOVSD move the pending results; MAXSD is the first to read one.
    assert emu.state.pc == 10
    assert emu.state.regs[1:5] == [Pending(1, 0), Pending(2, 0), Pending(3, 0), Pending(1, 0)]
    emu.complete_batch([19.5, 8.0, 31.0])
    assert emu.advance_batch() == []
    sequential = engine(FAN_OUT, parallel=False).run()
    assert (
        emu.result().registers
        == sequential.registers
        == {
            "R1": 19.5,
            "R2": 8.0,
            "R3": 31.0,
            "R4": 31.0,
        }
    )
    assert emu.result().instructions_executed == sequential.instructions_executed


def test_without_marks_each_batch_is_the_one_call_advance_returns() -> None:
    assert run_by_hand(engine(FAN_OUT, parallel=False)) == [
        ["temp(Paris)"],
        ["temp(Oslo)"],
        ["temp(Cairo)"],
    ]
    assert run_by_hand(engine(FAN_OUT, parallel=["double"])) == [
        ["temp(Paris)"],
        ["temp(Oslo)"],
        ["temp(Cairo)"],
    ]


def test_multi_result_tools_leave_pending_values_filled_in_their_order() -> None:
    source = "PUSH 42\nCALL split\nPUSH 97\nCALL split\nPOP R1\nPOP R2\nPOP R3\nPOP R4"
    emu = engine(source)
    batch = emu.advance_batch()
    assert [c.args for c in batch] == [{"x": 42}, {"x": 97}]
    snap = emu.snapshot()
    assert snap["stack"] == [] and snap["registers"] == {
        "R1": {"call": 2, "result": 0},
        "R2": {"call": 2, "result": 1},
        "R3": {"call": 1, "result": 0},
        "R4": {"call": 1, "result": 1},
    }
    emu.complete_batch([(4, 2), (9, 7)])
    assert emu.advance_batch() == []
    assert emu.result().registers == engine(source, parallel=False).run().registers
    assert emu.result().registers == {"R1": 9, "R2": 7, "R3": 4, "R4": 2}


def test_a_zero_result_tool_leaves_no_pending_value_and_pops_around_one_still_run() -> None:
    source = 'PUSH 5\nPUSH "a"\nCALL note\nPUSH 3\nCALL double\nPUSH 1\nPOP R1\nPOP R2\nPOP R3'
    emu = engine(source)
    assert [c.tool for c in emu.advance_batch()] == ["note", "double"]
    assert emu.state.stack == []
    # POP R1 took the 1 pushed above the pending result, POP R2 the result, POP R3 the 5.
    assert emu.state.regs[1:4] == [1, Pending(2, 0), 5]
    emu.complete_batch([None, 6])
    assert emu.advance_batch() == []
    assert emu.result().registers == engine(source, parallel=False).run().registers


def test_a_call_needing_an_outstanding_result_waits_for_it() -> None:
    source = "PUSH 1\nCALL double\nPUSH 10\nCALL double\nCALL double\nPOP R1\nPOP R2"
    assert run_by_hand(engine(source)) == [["double(1)", "double(10)"], ["double(20)"]]
    assert engine(source).run().registers == engine(source, parallel=False).run().registers


def test_the_eax_convention_call_leaves_its_pending_result_in_eax() -> None:
    source = "PUSH 1\nCALL double\nPUSH 2\nCALL double\nMOV R1, EAX\nPUSH 3\nCALL double\nPOP R2"
    emu = engine(source)
    assert 3 in emu.compiled.flow.eax  # the second CALL's result is read in EAX
    assert [c.args["x"] for c in emu.advance_batch()] == [1, 2, 3]
    assert emu.state.regs[1] == Pending(2, 0)  # MOV R1, EAX moved it
    emu = engine(source)
    assert run_by_hand(emu) == [["double(1)", "double(2)", "double(3)"]]
    assert emu.result().registers == engine(source, parallel=False).run().registers
    assert emu.result().registers["R1"] == 4


def test_an_unmarked_call_waits_for_every_outstanding_call() -> None:
    source = (
        'PUSH "Paris"\nCALL temp\nPUSH "Oslo"\nCALL temp\nPUSH "x"\nCALL note\n'
        'PUSH "Cairo"\nCALL temp\nPOP R1\nPOP R2\nPOP R3'
    )
    assert run_by_hand(engine(source, parallel=["temp"])) == [
        ["temp(Paris)", "temp(Oslo)"],
        ["note(x)"],
        ["temp(Cairo)"],
    ]
    emu = engine(source, parallel=["temp"])
    assert emu.run().registers == engine(source, parallel=False).run().registers


def test_an_instruction_failing_while_calls_run_fails_after_their_results_are_in() -> None:
    source = "PUSH 1\nCALL double\nMOV R1, 0\nMOV EAX, 10\nDIV EAX, R1\nPOP R2"
    emu = engine(source)
    assert [c.args for c in emu.advance_batch()] == [{"x": 1}]  # no error yet
    # The failure survives a snapshot taken mid-batch (the agent path checkpoints here).
    emu = engine(source, state=json.loads(json.dumps(emu.snapshot())))
    emu.complete_batch([2])
    with pytest.raises(AsmRuntimeError) as caught:
        emu.advance_batch()
    sequential = engine(source, parallel=False)
    with pytest.raises(AsmRuntimeError) as expected:
        sequential.run()
    assert str(caught.value) == str(expected.value) and caught.value.line == 5
    assert emu.snapshot() == sequential.snapshot()  # the result is on the stack, as sequentially


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ({"max_tool_calls": 2}, ToolCallBudgetExceeded),
        ({"max_instructions_to_exec": 4}, InstructionBudgetExceeded),
        ({"max_stack_depth": 2}, StackDepthExceeded),
    ],
)
def test_budgets_count_every_call_and_stop_where_the_sequential_run_stops(
    limits: dict[str, int], error: type[Exception]
) -> None:
    parallel, sequential = engine(FAN_OUT, **limits), engine(FAN_OUT, parallel=False, **limits)
    with pytest.raises(error) as caught:
        parallel.run()
    with pytest.raises(error) as expected:
        sequential.run()
    assert str(caught.value) == str(expected.value)
    assert parallel.snapshot() == sequential.snapshot()
    assert [r.result for r in parallel.history] == [r.result for r in sequential.history]


def test_a_raising_tool_keeps_the_results_before_it_and_raises_its_error() -> None:
    source = "PUSH 1\nCALL double\nPUSH 2\nCALL boom\nPUSH 3\nCALL double\nPOP R1\nPOP R2\nPOP R3"
    emu = engine(source)
    with pytest.raises(ToolExecutionError) as caught:
        emu.run()
    assert caught.value.tool == "boom" and caught.value.line == 4
    assert [(r.call.tool, r.result) for r in emu.history] == [("double", 2)]


def test_snapshot_mid_batch_resumes_in_a_fresh_machine() -> None:
    emu = engine(FAN_OUT)
    first = emu.advance_batch()
    snap = json.loads(json.dumps(emu.snapshot()))
    assert [o["number"] for o in snap["outstanding"]] == [1, 2, 3]
    fresh = engine(FAN_OUT, state=snap)
    again = fresh.advance_batch()
    assert again == first  # the same calls, numbers and arguments
    fresh.complete_batch([19.5])  # a prefix: the rest stays outstanding
    fresh = engine(FAN_OUT, state=json.loads(json.dumps(fresh.snapshot())))
    assert [c.number for c in fresh.advance_batch()] == [2, 3]
    fresh.complete_batch([8.0, 31.0])
    assert fresh.advance_batch() == []
    assert fresh.result().registers == engine(FAN_OUT, parallel=False).run().registers


def test_misuse_and_bad_snapshots_are_refused() -> None:
    emu = engine(FAN_OUT)
    emu.advance_batch()
    with pytest.raises(UsageError):
        emu.advance()
    with pytest.raises(UsageError):
        emu.complete(1.0)
    with pytest.raises(UsageError):
        emu.complete_batch([1.0, 2.0, 3.0, 4.0])
    snap = emu.snapshot()
    moved = {**snap, "stack": [1, [], []]}
    with pytest.raises(UsageError):
        engine(FAN_OUT, state=moved)
    with pytest.raises(UsageError):
        engine(FAN_OUT, parallel="temp")
    with pytest.raises(UsageError):
        ToolsPlannerMiddleware(parallel_tools=[1])  # type: ignore[list-item]


def test_run_and_arun_run_a_batch_at_once() -> None:
    """Three calls that each wait for the other two finish only if they run together."""
    barrier = threading.Barrier(3, timeout=10)

    def meet(x: int) -> int:
        barrier.wait()
        return x

    source = "PUSH 1\nCALL meet\nPUSH 2\nCALL meet\nPUSH 3\nCALL meet\nPOP R1\nPOP R2\nPOP R3"
    program = parse(source)
    assert isinstance(program, Program)
    out = Emulator(program, [meet], parallel_tools=True).run()
    assert out.registers == {"R1": 3, "R2": 2, "R3": 1}

    arrived: list[int] = []
    both = asyncio.Event()

    async def ameet(x: int) -> int:
        arrived.append(x)
        if len(arrived) == 3:
            both.set()
        await asyncio.wait_for(both.wait(), 10)
        return x

    aprogram = parse(source.replace("meet", "ameet"))
    assert isinstance(aprogram, Program)
    result = asyncio.run(Emulator(aprogram, [ameet], parallel_tools=True).arun())
    assert result.registers == {"R1": 3, "R2": 2, "R3": 1}


# -- the property: the same meaning with and without parallel_tools -------------------------------


def _result(result: Any) -> Any:
    """A call's result, comparable across runs: a failed call as its error's type and text
    (two raises of one error are two exception objects, and exceptions compare by identity)."""
    if isinstance(result, Failed):
        return ("failed", type(result.error).__name__, str(result.error))
    return result


def _outcome(emu: Emulator) -> Any:
    try:
        result = emu.run()
    except LLAssemblyError as exc:
        calls = [(r.call.tool, r.call.args, _result(r.result)) for r in emu.history]
        st = emu.state
        if isinstance(exc, ToolExecutionError) or st.pending is not None or st.outstanding:
            # A call failed (its tool raised or its result does not fit): the machine may
            # have run ahead of it, so only the error and the calls before it are the same.
            return ("call failed", type(exc).__name__, str(exc), calls)
        return (type(exc).__name__, str(exc), calls, emu.snapshot())
    calls = [(r.call.tool, r.call.args, r.call.number, _result(r.result)) for r in result.calls]
    return ("ok", result.registers, result.stack, emu.state.mem, calls, emu.snapshot())


@settings(
    deadline=None,
    max_examples=400,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    st.one_of(programs(), st.deferred(lambda: agent_programs())),
    st.sampled_from([True, ["add2", "pair", "name", "triple"], ["echo"]]),
)
@example(  # a failing call the plan tests, again and again, until the call budget stops it
    source="section .text\nL1:\nPUSH R0\nCALL fail\nJC L1", marked=True
)
@pytest.mark.slow
def test_random_programs_mean_the_same_with_and_without_parallel_tools(
    source: str, marked: Any
) -> None:
    try:
        parsed = parse(source)
        if not isinstance(parsed, Program):
            return
        compiled = compile_program(parsed, EXTERNS, max_stack_depth=MAX_STACK)
    except LLAssemblyError:
        return
    sequential = _outcome(Emulator(compiled, **LIMITS))
    parallel = _outcome(Emulator(compiled, **LIMITS, parallel_tools=marked))
    assert parallel == sequential


# -- through create_agent, on both paths -----------------------------------------------------------


def _pure_tools() -> tuple[list[Any], list[str]]:
    log: list[str] = []

    @tool
    def add2(a: int, b: int) -> int:
        """Add."""
        log.append(f"add2({a},{b})")
        return a + b

    @tool
    def pair(x: float) -> tuple[int, int]:
        """Two numbers."""
        log.append(f"pair({x})")
        return int(x) % 7, 2

    @tool
    def name() -> str:
        """A name."""
        log.append("name()")
        return "Paris"

    return [add2, pair, name], log


_AGENT_TOOLS = {"add2": 2, "pair": 1, "name": 0}


@st.composite
def agent_programs(draw: st.DrawFn) -> str:
    """Straight-line and branching plans over pure tools: fan-outs, arithmetic on results."""
    lines: list[str] = []
    depth = 0
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["call", "call", "call", "pop", "arith", "branch"]))
        if kind == "call":
            tool_name = draw(st.sampled_from(sorted(_AGENT_TOOLS)))
            for _ in range(_AGENT_TOOLS[tool_name]):
                lines.append(f"PUSH {draw(st.sampled_from(['R1', 'R2', '3', '-2', '7']))}")
            lines.append(f"CALL {tool_name}")
        elif kind == "pop":
            lines.append(f"POP {draw(st.sampled_from(['R1', 'R2', 'R3']))}")
        elif kind == "arith":
            lines.append(f"ADD R{draw(st.integers(1, 3))}, {draw(st.integers(-3, 3))}")
        else:
            depth += 1
            lines += [f"CMP R1, {draw(st.integers(-2, 8))}", f"JL skip{depth}", "INC R2"]
            lines.append(f"skip{depth}:")
    return "\n".join(lines)


def _through_agent(source: str, execution: str, parallel: Any) -> tuple[Any, ...]:
    tools, log = _pure_tools()
    app = create_agent(
        ScriptedChatModel(replies=[asm(source)]),
        tools=tools,
        middleware=[ToolsPlannerMiddleware(execution=execution, parallel_tools=parallel)],
    )
    out = app.invoke({"messages": [HumanMessage("go")]})
    final = meta(out["messages"][-1])
    answers = {
        m.tool_call_id.rsplit("_", 1)[1]: (m.name, m.text, m.status)
        for m in out["messages"]
        if isinstance(m, ToolMessage)
    }
    calls = Counter(
        (c["name"], json.dumps(c["args"], sort_keys=True))
        for m in out["messages"]
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    )
    kept = {k: final.get(k) for k in ("status", "registers", "tool_calls", "instructions")}
    return kept, answers, calls, Counter(log), out["messages"]


@pytest.mark.slow
@settings(deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(agent_programs())
def test_random_plans_through_create_agent_mean_the_same_with_parallel_tools(source: str) -> None:
    parsed = parse(source)
    try:
        assert isinstance(parsed, Program)
        compile_program(parsed, externs_from(_pure_tools()[0]), max_stack_depth=MAX_STACK)
    except LLAssemblyError:
        assume(False)  # the planner would ask the model to repair it
    reference = _through_agent(source, "agent", False)[:4]
    for execution in ("agent", "graph"):
        assert _through_agent(source, execution, True)[:4] == reference
    assert _through_agent(source, "graph", False)[:4] == reference


def test_both_paths_record_a_batch_as_one_message_with_its_calls_and_a_result_each() -> None:
    plan = "PUSH 1\nPUSH 2\nCALL add2\nPUSH 3\nPUSH 4\nCALL add2\nCALL name\nPOP R3\nPOP R2"
    agent_side = _through_agent(plan, "agent", True)[4]
    graph_side = _through_agent(plan, "graph", True)[4]
    assert shape(agent_side) == shape(graph_side)
    batch = [m for m in agent_side if isinstance(m, AIMessage) and m.tool_calls]
    assert [len(m.tool_calls) for m in batch] == [3]
    assert [c["args"] for c in batch[0].tool_calls] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {}]
    assert [m.text for m in agent_side if isinstance(m, ToolMessage)] == ["3", "7", "Paris"]


# -- the agent's own middleware sees every call of a batch ----------------------------------------

BANK_PLAN = asm(
    "PUSH 1\nCALL lookup\nPUSH 2\nCALL lookup\nPUSH 100\nCALL wire\nPOP R3\nPOP R2\nPOP R1\n"
    "ADD R1, R2"
)


def _bank(log: list[str]) -> list[Any]:
    @tool
    def lookup(account: int) -> int:
        """An account's balance."""
        log.append(f"lookup({account})")
        return account * 10

    @tool
    def wire(amount: int) -> str:
        """Send money."""
        log.append(f"wire({amount})")
        return "sent"

    return [lookup, wire]


def _bank_agent(log: list[str], *middleware: Any) -> Any:
    return create_agent(
        ScriptedChatModel(replies=[BANK_PLAN]),
        tools=_bank(log),
        middleware=[ToolsPlannerMiddleware(parallel_tools=True), *middleware],
        checkpointer=InMemorySaver(),
    )


def test_a_person_approving_one_call_of_a_batch_lets_the_whole_batch_run() -> None:
    log: list[str] = []
    app = _bank_agent(log, HumanInTheLoopMiddleware(interrupt_on={"wire": True}))
    paused = app.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    requests = paused["__interrupt__"][0].value["action_requests"]
    assert [r["name"] for r in requests] == ["wire"] and log == []
    out = app.invoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD)
    assert sorted(log) == ["lookup(1)", "lookup(2)", "wire(100)"]
    final = meta(out["messages"][-1])
    assert final["status"] == "finished"
    assert final["registers"] == {"R1": 30, "R2": 20, "R3": "sent"}


def test_a_person_rejecting_one_call_of_a_batch_keeps_the_others_results() -> None:
    log: list[str] = []
    app = _bank_agent(log, HumanInTheLoopMiddleware(interrupt_on={"wire": True}))
    app.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    reject = {"type": "reject", "message": "not today"}
    out = app.invoke(Command(resume={"decisions": [reject]}), THREAD)
    assert sorted(log) == ["lookup(1)", "lookup(2)"]  # the wire never ran
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped"
    assert "not today" in final.text and meta(final)["error"]["line"] == 8
    answered = {m.tool_call_id for m in out["messages"] if isinstance(m, ToolMessage)}
    asked = {c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    assert asked == answered


def test_tool_call_limit_middleware_counts_each_call_of_a_batch() -> None:
    log: list[str] = []
    app = _bank_agent(log, ToolCallLimitMiddleware(tool_name="lookup", thread_limit=2))
    out = app.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    assert meta(out["messages"][-1])["status"] == "finished"
    assert app.get_state(THREAD).values["thread_tool_call_count"]["lookup"] == 2

    log.clear()
    app = _bank_agent(log, ToolCallLimitMiddleware(tool_name="lookup", run_limit=1))
    out = app.invoke({"messages": [HumanMessage("pay")]}, THREAD)
    assert "lookup(1)" in log and "lookup(2)" not in log  # the second call of the batch is over
    refused = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert [m.name for m in refused] == ["lookup"]
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and meta(final)["error"]["line"] == 6


def test_the_batch_runs_at_once_in_the_agents_tool_node() -> None:
    barrier = threading.Barrier(2, timeout=10)

    @tool
    def meet(x: int) -> int:
        """Meet the other call."""
        barrier.wait()
        return x

    plan = asm("PUSH 1\nCALL meet\nPUSH 2\nCALL meet\nPOP R1\nPOP R2")
    for execution in ("agent", "graph"):
        app = create_agent(
            ScriptedChatModel(replies=[plan]),
            tools=[meet],
            middleware=[ToolsPlannerMiddleware(execution=execution, parallel_tools=["meet"])],
        )
        out = app.invoke({"messages": [HumanMessage("go")]})
        assert meta(out["messages"][-1])["registers"] == {"R1": 2, "R2": 1}


def test_externs_by_name_mark_only_those_tools() -> None:
    emu = Emulator(
        parse(FAN_OUT),  # type: ignore[arg-type]
        externs_from([temp]),
        parallel_tools=["temp"],
    )
    assert emu.marked == frozenset({1, 3, 5})


# -- the graph path: a task per call of a batch -----------------------------------------------


def _faulty_tools() -> list[Any]:
    @tool
    def add2(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError(f"broken is down ({x})")

    @tool
    def pair(x: int) -> tuple[int, int]:
        """Two numbers (but gives three)."""
        return (x, x, x)  # type: ignore[return-value]

    return [add2, broken, pair]


FAILING_BATCHES = {
    "a tool raises": "PUSH 1\nPUSH 2\nCALL add2\nPUSH 5\nCALL broken\nPUSH 3\nPUSH 4\nCALL add2"
    "\nPOP R3\nPOP R2\nPOP R1",
    "a result does not fit": "PUSH 1\nPUSH 2\nCALL add2\nPUSH 5\nCALL pair\nPUSH 3\nPUSH 4\n"
    "CALL add2\nPOP R3\nPOP R2\nPOP R1",
}


@pytest.mark.parametrize("case", sorted(FAILING_BATCHES))
def test_a_failing_call_of_a_batch_is_recorded_alike_on_every_path_and_granularity(
    case: str,
) -> None:
    def run(execution: str, granularity: str) -> list[Any]:
        app = create_agent(
            ScriptedChatModel(replies=[asm(FAILING_BATCHES[case])]),
            tools=_faulty_tools(),
            middleware=[
                ToolsPlannerMiddleware(
                    execution=execution,
                    granularity=granularity,
                    parallel_tools=True,
                    on_tool_error="stop",
                )
            ],
        )
        out = app.invoke({"messages": [HumanMessage("go")]})
        final = meta(out["messages"][-1])
        assert final["status"] == "stopped"
        return [*shape(out["messages"]), final["registers"], final["tool_calls"]]

    # Every path records a result that does not fit as the tool returned it (the failure in
    # its metadata); a tool that raised, as an error.
    reference = run("agent", "program")
    batch = [m for m in reference if isinstance(m, tuple) and m[0] == "ai" and m[2]]
    assert [len(m[2]) for m in batch] == [3]  # one AIMessage for the batch
    failed = "error" if case == "a tool raises" else "success"
    assert [m[3] for m in reference if isinstance(m, tuple) and m[0] == "tool"] == [
        "success",
        failed,
        "success",
    ]
    for granularity in ("block", "instruction", "program"):
        assert run("graph", granularity) == reference, granularity


async def test_an_async_batch_runs_at_once_as_a_task_per_call_in_the_node() -> None:
    arrived: list[int] = []
    everyone = asyncio.Event()

    @tool
    async def ameet(x: int) -> int:
        """Meet the other calls."""
        arrived.append(x)
        if len(arrived) == 3:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 10)
        return x

    plan = asm("PUSH 1\nCALL ameet\nPUSH 2\nCALL ameet\nPUSH 3\nCALL ameet\nPOP R1\nPOP R2\nPOP R3")
    for granularity in ("block", "instruction"):
        arrived.clear()
        everyone.clear()
        builder = StateGraph(MessagesState)
        node = AToolsPlannerNode(
            ScriptedChatModel(replies=[plan]), [ameet], granularity=granularity, parallel_tools=True
        )
        builder.add_node("planner", node)
        builder.add_edge(START, "planner")
        builder.add_edge("planner", END)
        out = await builder.compile().ainvoke({"messages": [HumanMessage("go")]})
        assert meta(out["messages"][-1])["registers"] == {"R1": 3, "R2": 2, "R3": 1}


def test_a_batchs_results_in_the_plan_graph_state_are_its_messages_and_emptied_once_taken() -> None:
    """Each call task writes its call's ``ToolMessage`` (checkpointable as any message);
    the join takes them and empties the channel."""
    program = parse(FAN_OUT)
    assert isinstance(program, Program)
    compiled = compile_program(program, externs_from([temp]), max_stack_depth=MAX_STACK)
    graph = PlanGraph(compiled, "block", parallel_tools=True)
    saver = InMemorySaver()
    app = graph.graph.copy(update={"checkpointer": saver})  # the same nodes, checkpointed

    def execute(call: Any, config: Any, asynchronous: bool) -> Any:
        return temp(**call.args)

    config = graph.config_for(PlanRun(execute), {"configurable": {"thread_id": "t"}})
    out = app.invoke(graph.initial_state(), config)
    assert out["machine"]["halted"] and not out.get("results")
    history = list(app.get_state_history({"configurable": {"thread_id": "t"}}))
    written = [s.values.get("results") for s in history if s.values.get("results")]
    assert [sorted(m.tool_call_id for m in w) for w in written] == [["asm_1", "asm_2", "asm_3"]]
    serde = JsonPlusSerializer()
    assert serde.loads_typed(serde.dumps_typed(written)) == written
    assert [m.text for m in sorted(written[0], key=lambda m: m.tool_call_id)] == [
        "19.5",
        "8.0",
        "31.0",
    ]


def test_a_batch_larger_than_langgraphs_default_pool_still_runs_at_once_in_the_node() -> None:
    """LangGraph runs a step's tasks on a pool of ``min(32, cpus + 4)`` threads unless the
    config says ``max_concurrency``; the plan graph sets it so a whole batch runs at once."""
    size = 12
    barrier = threading.Barrier(size, timeout=10)

    @tool
    def meet(x: int) -> int:
        """Meet the other calls."""
        barrier.wait()
        return x

    pushes = "".join(f"PUSH {n}\nCALL meet\n" for n in range(size))
    plan = asm(pushes + "".join(f"POP R{n % 8}\n" for n in range(size)))
    builder = StateGraph(MessagesState)
    node = ToolsPlannerNode(ScriptedChatModel(replies=[plan]), [meet], parallel_tools=True)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    out = builder.compile().invoke({"messages": [HumanMessage("go")]})
    assert meta(out["messages"][-1])["status"] == "finished"


@pytest.mark.parametrize("caller", [None, 3])
def test_the_tools_of_a_batch_get_the_callers_max_concurrency(caller: int | None) -> None:
    seen: list[Any] = []

    @tool
    def probe(x: int, runtime: ToolRuntime) -> int:
        """Record the config's max_concurrency."""
        seen.append(runtime.config.get("max_concurrency"))
        return x

    plan = asm("PUSH 1\nCALL probe\nPUSH 2\nCALL probe\nPOP R1\nPOP R2\nPUSH 3\nCALL probe")
    builder = StateGraph(MessagesState)
    node = ToolsPlannerNode(ScriptedChatModel(replies=[plan]), [probe], parallel_tools=True)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    config: RunnableConfig = {} if caller is None else {"max_concurrency": caller}
    out = builder.compile().invoke({"messages": [HumanMessage("go")]}, config)
    assert meta(out["messages"][-1])["status"] == "finished"
    assert seen == [caller] * 3


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_stopped_batchs_record_holds_no_pending_marker_as_a_register(execution: str) -> None:
    """Registers run ahead of a batch that then failed may still wait for a call's result; the
    turn's record shows the plan's own values only, never the snapshot's encoding of a value
    to come ({"call": n, "result": k}, which reads like a structured result)."""

    @tool
    def add2(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("broken is down")

    plan = (
        "PUSH 1\nPUSH 2\nCALL add2\nPUSH 5\nCALL broken\nPUSH 3\nPUSH 4\nCALL add2\n"
        'POP R3\nPOP R2\nPOP R1\nSAY "{R1} {R2} {R3}"'
    )
    planner = ToolsPlannerMiddleware(parallel_tools=True, execution=execution)  # type: ignore[arg-type]
    app = create_agent(
        ScriptedChatModel(replies=[asm(plan)]), tools=[add2, broken], middleware=[planner]
    )
    record = meta(app.invoke({"messages": [HumanMessage("go")]})["messages"][-1])
    assert record["status"] == "stopped" and record["error"]["tool"] == "broken"
    assert all(type(v) in (int, float, str) for v in record["registers"].values())
