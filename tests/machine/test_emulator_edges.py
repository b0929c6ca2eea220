"""Edges of the emulator's run (``llassembly.machine.emulator``): a tested call that fails
under ``arun`` and with data-flow policies, a state at a ``CALL`` with too few values, an
instruction that fails while a call issued ahead is outstanding."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from llassembly import parse_program
from llassembly.analysis.policies import never_from
from llassembly.errors import AsmRuntimeError
from llassembly.machine.emulator import Emulator, adrive
from llassembly.machine.state import MachineState


def boom(city: str) -> int:
    """Fail for every city."""
    raise ValueError(f"no such city: {city}")


def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


TESTED = 'PUSH "Oslo"\nCALL boom\nJC bad\nHLT\nbad: MOV R1, EAX\nPUSH "x"\nCALL lookup\nPOP R2'
ERROR = "tool 'boom' raised ValueError: no such city: Oslo"


def test_arun_throws_a_tested_calls_failure_into_the_plan_which_goes_on() -> None:
    result = asyncio.run(Emulator(parse_program(TESTED), [boom, lookup]).arun())
    assert result.registers == {"R1": ERROR, "R2": "X", "EAX": ERROR}


def test_a_tested_calls_flags_and_eax_derive_from_its_tool() -> None:
    policy = never_from("lookup", "key", ["boom"])
    emulator = Emulator(parse_program(TESTED), [boom, lookup], dataflow=[policy])
    assert emulator.run().registers["R2"] == "X"  # "x" is the plan's own: the policy allows it
    provenance = emulator.snapshot()["provenance"]
    assert provenance["flags"] == ["boom"]
    assert provenance["registers"] == {"EAX": ["boom"], "R1": ["boom"], "R2": ["lookup"]}


def test_a_state_at_a_call_without_its_values_fails_at_the_call() -> None:
    """A state given back at a ``CALL`` whose values are not on the stack (no run leaves one)."""
    plan = 'PUSH "a"\nCALL lookup\nPOP EBX'
    emulator = Emulator(parse_program(plan), [lookup], state=MachineState(pc=1))
    with pytest.raises(
        AsmRuntimeError, match=r"line 2: CALL lookup needs 1 values on the stack, found 0"
    ):
        emulator.run()
    assert emulator.state.tool_calls == 0


def test_an_address_that_fails_while_a_call_is_outstanding_fails_once_the_call_is_done() -> None:
    """Issued ahead, the call is outstanding when ``ADD ECX, [row + EBX]`` comes: its address
    is not at a cell, so it does not wait for the call; it fails, as run in order, after it."""
    plan = (
        "section .data\nrow dd 1, 2\nsection .text\n"
        'MOV [row], 3\nMOV EBX, 5\nPUSH "a"\nCALL lookup\nADD ECX, [row + EBX]\nPOP EDX'
    )
    emulator = Emulator(parse_program(plan), [lookup], parallel_tools=True)
    assert [call.args for call in emulator.advance_batch()] == [{"key": "a"}]
    fault = emulator.snapshot()["fault"]
    assert (fault["type"], fault["line"]) == ("AsmRuntimeError", 8)
    emulator.complete_batch(["A"])
    with pytest.raises(AsmRuntimeError, match=r"line 8: \[row \+ EBX\] is at byte 5 of 'row'"):
        emulator.advance_batch()
    assert emulator.state.stack == ["A"]  # the call completed; the failing ADD wrote nothing


def test_adrive_throws_a_failed_request_into_the_body_which_may_ask_again() -> None:
    """What a query's attempts do (an error reply, then asked once more): the body catches
    the failure and makes a new request, which is awaited as the first was."""
    asked: list[str] = []

    def body() -> Generator[str, Any, str]:
        try:
            yield "first"
        except RuntimeError as exc:
            answer = yield f"again after {exc}"
            return f"got {answer}"
        return "not reached"

    async def execute(request: str) -> str:
        asked.append(request)
        if request == "first":
            raise RuntimeError("down")
        return request.upper()

    assert asyncio.run(adrive(body(), execute)) == "got AGAIN AFTER DOWN"
    assert asked == ["first", "again after down"]


BATCH = 'PUSH "a"\nCALL wait\nPOP R1\nPUSH "b"\nCALL wait\nPOP R2\nPUSH "c"\nCALL wait\nPOP R3'


def test_arun_runs_a_batch_of_plain_functions_at_once_off_the_event_loop() -> None:
    """A plain (sync) function is run on a thread under ``arun``, as LangChain runs a sync
    tool under ``ainvoke``: a batch's calls overlap (each waits for the other two here, which
    calls run one by one on the event loop never do) and the loop stays free meanwhile."""
    import threading

    together = threading.Barrier(3, timeout=5)
    on_loop: list[bool] = []

    def wait(key: str) -> str:
        """Wait for the other calls of the batch."""
        on_loop.append(threading.current_thread() is threading.main_thread())
        together.wait()
        return key.upper()

    emulator = Emulator(parse_program(BATCH), [wait], parallel_tools=True)
    result = asyncio.run(emulator.arun())
    assert [result.registers[r] for r in ("R1", "R2", "R3")] == ["A", "B", "C"]
    assert on_loop == [False] * 3


def test_an_interrupt_in_an_async_batch_is_raised_once_the_other_calls_have_ended() -> None:
    """As LangGraph waits for a step's other tasks when one interrupts (and as the threaded
    batch does): no call of the batch is left running after the run has returned."""
    from langgraph.errors import GraphInterrupt

    ended: list[str] = []

    async def wait(key: str) -> str:
        """Ask a person about "a"; look the others up."""
        if key == "a":
            raise GraphInterrupt(())
        await asyncio.sleep(0.05)
        ended.append(key)
        return key

    emulator = Emulator(parse_program(BATCH), [wait], parallel_tools=True)
    with pytest.raises(GraphInterrupt):
        asyncio.run(emulator.arun())
    assert sorted(ended) == ["b", "c"]


def test_parallel_tools_naming_a_tool_there_is_not_is_refused() -> None:
    """As the planner's option is: a misspelt name would run every call one by one without
    a word (the Emulator, and so a plan's own emulator)."""
    from llassembly.errors import UsageError

    def get_temperature(city: str) -> float:
        """Today's temperature."""
        return 20.0

    source = 'PUSH "Oslo"\nCALL get_temperature\nPOP R1'
    with pytest.raises(UsageError, match=r"names the tool 'get_temprature'.*'get_temperature'"):
        Emulator(parse_program(source), [get_temperature], parallel_tools=["get_temprature"])
    emulator = Emulator(parse_program(source), [get_temperature], parallel_tools=[])
    assert emulator.run().registers == {"R1": 20.0}


def test_run_refuses_an_async_call_function_and_arun_takes_a_sync_one() -> None:
    """``run(call)`` with a coroutine function used to give the plan ``'<coroutine object>'``
    as every result (the tool never run); ``arun(call)`` with a plain function failed each
    call as the tool's (``object int can't be used in 'await' expression``)."""
    from llassembly.errors import UsageError

    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    source = "PUSH 4\nCALL double\nPOP R1"

    async def acall(request: Any) -> int:
        return double(**request.args)

    with pytest.raises(UsageError, match="arun"):
        Emulator(parse_program(source), [double]).run(acall)
    result = asyncio.run(Emulator(parse_program(source), [double]).arun(lambda r: double(**r.args)))
    assert result.registers == {"R1": 8}


def test_an_error_a_tool_returns_is_its_value_under_arun_too() -> None:
    """A tool may return an exception object (a log tool that gives back what it logged):
    the batch's outcomes are told apart from what was raised on either run."""

    def note(text: str) -> Any:
        """Log a text; gives back the error it logged."""
        return ValueError(text)

    plan = 'PUSH "boom"\nCALL note\nPOP R1\nSAY "logged: {R1}"'
    assert Emulator(parse_program(plan), [note]).run().answer == "logged: boom"
    assert asyncio.run(Emulator(parse_program(plan), [note]).arun()).answer == "logged: boom"


def test_run_refuses_a_call_function_that_gives_an_awaitable() -> None:
    """Not only an ``async def``: a lambda returning a coroutine, an object whose ``__call__``
    is async. The plan used to read '<coroutine object ...>' as the tool's result."""
    from llassembly.errors import ToolExecutionError

    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    async def adouble(request: Any) -> int:
        return double(**request.args)

    source = "PUSH 4\nCALL double\nPOP R1"
    with pytest.raises(ToolExecutionError, match="arun"):
        Emulator(parse_program(source), [double]).run(lambda r: adouble(r))

    class Lazy:  # a tool's own value that happens to be awaitable is its value
        def __await__(self) -> Any:
            yield
            return 1

    def fetch() -> Any:
        """A lazy result."""
        return Lazy()

    result = Emulator(parse_program("CALL fetch\nPOP R1"), [fetch]).run()
    assert result.registers["R1"].startswith("<")
