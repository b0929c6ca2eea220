"""The agent path: inside ``create_agent``, a plan's calls behave like the agent's own calls.

Each test uses the plain pattern ``create_agent(model, tools=[...],
middleware=[ToolsPlannerMiddleware(), ...])`` next to LangChain's own middleware, with tools
that record every call, and checks that nothing ran that should not have. Every model reply
is written by hand (``ScriptedChatModel``); none is a recording of a real model.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, NotRequired, Optional

import pytest
from conftest import TESTS, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain.tools import InjectedToolCallId, ToolRuntime, tool
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from llassembly import ToolsPlannerMiddleware
from llassembly.errors import (
    ToolExecutionError,
)
from llassembly.language.program import NONE  # a None result reads as "no value"

THREAD = {"configurable": {"thread_id": "t1"}}


class Recorder:
    """Tools that append ``(name, args)`` to ``log`` when they really run."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.fail_on: set[int] = set()

    def names(self) -> list[str]:
        return [name for name, _ in self.log]

    def tools(self) -> list[Any]:
        log = self.log
        recorder = self

        @tool
        def set_heater(level: int) -> str:
            """Switch the heater to a level (0 is off)."""
            log.append(("set_heater", level))
            return f"heater at {level}"

        @tool
        def ping(x: int) -> int:
            """Answer x + 1."""
            log.append(("ping", x))
            return x + 1

        @tool
        def flaky(x: int) -> int:
            """Return x * 10; fails on some calls."""
            log.append(("flaky", x))
            if len([n for n, _ in log if n == "flaky"]) in recorder.fail_on:
                raise ValueError("flaky is down")
            return x * 10

        @tool
        def wire_money(amount: int) -> str:
            """Send money."""
            log.append(("wire_money", amount))
            return "sent"

        return [set_heater, ping, flaky, wire_money]


def agent(replies: list[Any], tools: list[Any], *middleware: Any, **kwargs: Any) -> Any:
    model = ScriptedChatModel(replies=replies)
    built = create_agent(
        model,
        tools=tools,
        middleware=[ToolsPlannerMiddleware(**kwargs.pop("planner", {})), *middleware],
        **kwargs,
    )
    built.scripted = model  # type: ignore[attr-defined]
    return built


async def call(app: Any, payload: Any, config: Any = None, *, asynchronous: bool) -> Any:
    """``app.invoke`` or ``await app.ainvoke`` with the same arguments."""
    if asynchronous:
        return await app.ainvoke(payload, config)
    return app.invoke(payload, config)


ASYNC = pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])


def unanswered(messages: list[BaseMessage]) -> list[str]:
    """Tool-call ids in ``messages`` that no ``ToolMessage`` answers."""
    asked = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [i for i in asked if i not in answered]


HEATER_PLAN = asm(
    "PUSH 1\nCALL ping\nPOP R1\nPUSH 3\nCALL set_heater\nPOP R2\nPUSH R1\nCALL ping\nPOP R3"
)


def asked_about(paused: dict[str, Any], mode: str) -> str:
    """The tool a paused run asks a person about (both approval modes)."""
    value = paused["__interrupt__"][0].value
    name: str = value["action_requests"][0]["name"] if mode == "batched" else value["name"]
    return name


def decide(decision: dict[str, Any], mode: str) -> Command[Any]:
    """Answer an approval request in the shape each mode expects."""
    return Command(resume={"decisions": [decision]} if mode == "batched" else decision)


# -- human approval -------------------------------------------------------------------------------


@ASYNC
@pytest.mark.parametrize("mode", ["batched", "per_call"])
async def test_human_approval_gates_a_plan_call_and_approve_runs_it_once(
    mode: str, asynchronous: bool
) -> None:
    rec = Recorder()
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={"set_heater": True},
        interrupt_mode=mode,  # type: ignore[arg-type]
    )
    app = agent([HEATER_PLAN], rec.tools(), hitl, checkpointer=InMemorySaver())

    ask = {"messages": [HumanMessage("Warm up.")]}
    paused = await call(app, ask, THREAD, asynchronous=asynchronous)
    assert asked_about(paused, mode) == "set_heater"
    assert rec.log == [("ping", 1)]  # the heater has not been switched on

    out = await call(app, decide({"type": "approve"}, mode), THREAD, asynchronous=asynchronous)
    assert rec.log == [("ping", 1), ("set_heater", 3), ("ping", 2)]
    assert meta(out["messages"][-1])["registers"] == {"R1": 2, "R2": "heater at 3", "R3": 3}
    assert len(app.scripted.calls) == 1
    assert unanswered(out["messages"]) == []


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_human_edit_changes_the_arguments_the_tool_gets(mode: str) -> None:
    rec = Recorder()
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={"set_heater": True},
        interrupt_mode=mode,  # type: ignore[arg-type]
    )
    app = agent([HEATER_PLAN], rec.tools(), hitl, checkpointer=InMemorySaver())
    app.invoke({"messages": [HumanMessage("Warm up.")]}, THREAD)

    edit = {"type": "edit", "edited_action": {"name": "set_heater", "args": {"level": 1}}}
    out = app.invoke(decide(edit, mode), THREAD)
    assert rec.log == [("ping", 1), ("set_heater", 1), ("ping", 2)]
    assert meta(out["messages"][-1])["registers"]["R2"] == "heater at 1"


@ASYNC
@pytest.mark.parametrize("mode", ["batched", "per_call"])
async def test_human_reject_does_not_run_the_call_and_the_plan_stops(
    mode: str, asynchronous: bool
) -> None:
    rec = Recorder()
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={"set_heater": True},
        interrupt_mode=mode,  # type: ignore[arg-type]
    )
    app = agent([HEATER_PLAN], rec.tools(), hitl, checkpointer=InMemorySaver())
    await call(app, {"messages": [HumanMessage("Warm up.")]}, THREAD, asynchronous=asynchronous)

    reject = {"type": "reject", "message": "too warm already"}
    out = await call(app, decide(reject, mode), THREAD, asynchronous=asynchronous)
    assert rec.log == [("ping", 1)]  # neither the heater nor the calls after it ran
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped"
    assert "too warm already" in final.text and meta(final)["error"]["line"] == 7
    # a person's decision reads as a decision, not as the tool raising
    assert "the call of set_heater was not run" in final.text and "raised" not in final.text
    assert "a decision, not an error" in final.text
    assert meta(final)["error"]["type"] == "CallNotRun"
    assert "1 tool call had completed before it" in final.text
    assert unanswered(out["messages"]) == []


def test_human_reject_under_replan_asks_the_model_for_a_new_plan() -> None:
    rec = Recorder()
    hitl = HumanInTheLoopMiddleware(interrupt_on={"set_heater": True})
    second = asm("PUSH 10\nCALL ping\nPOP R1")
    app = agent(
        [HEATER_PLAN, second],
        rec.tools(),
        hitl,
        checkpointer=InMemorySaver(),
        planner={"on_tool_error": "replan"},
    )
    app.invoke({"messages": [HumanMessage("Warm up.")]}, THREAD)
    reject = {"type": "reject", "message": "no heating today"}
    out = app.invoke(Command(resume={"decisions": [reject]}), THREAD)
    assert rec.log == [("ping", 1), ("ping", 10)]
    assert "no heating today" in app.scripted.calls[1][-1].text
    record = meta(out["messages"][-1])
    assert (record["status"], record["replans"], record["model_calls"]) == ("finished", 1, 2)


# -- limits and retries ---------------------------------------------------------------------------


@ASYNC
async def test_tool_call_limit_middleware_counts_plan_calls(asynchronous: bool) -> None:
    rec = Recorder()
    limit = ToolCallLimitMiddleware(tool_name="ping", run_limit=3)
    plan = asm("MOV R1, 0\nagain:\nPUSH R1\nCALL ping\nPOP R1\nCMP R1, 5\nJL again")
    app = agent([plan], rec.tools(), limit)
    out = await call(app, {"messages": [HumanMessage("ping")]}, asynchronous=asynchronous)
    assert rec.names() == ["ping"] * 3
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and "ping" in final.text
    assert unanswered(out["messages"]) == []


@ASYNC
async def test_tool_retry_middleware_of_the_agent_retries_a_plan_call(asynchronous: bool) -> None:
    rec = Recorder()
    rec.fail_on = {1, 2}
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    plan = asm("PUSH 4\nCALL flaky\nPOP R1")
    app = agent([plan], rec.tools(), retry)
    out = await call(app, {"messages": [HumanMessage("go")]}, asynchronous=asynchronous)
    assert rec.log == [("flaky", 4)] * 3
    assert meta(out["messages"][-1])["registers"] == {"R1": 40}


def test_a_raising_tool_stops_the_plan_with_its_line_and_keeps_completed_calls() -> None:
    rec = Recorder()
    rec.fail_on = {2}
    plan = asm("PUSH 1\nCALL flaky\nPOP R1\nPUSH 2\nCALL flaky\nPOP R2\nPUSH 3\nCALL ping")
    out = agent([plan], rec.tools()).invoke({"messages": [HumanMessage("go")]})
    assert rec.log == [("flaky", 1), ("flaky", 2)]
    final = out["messages"][-1]
    error = meta(final)["error"]
    assert "the tool flaky failed" in final.text and "flaky is down" not in final.text
    assert error["line"] == 7 and "flaky is down" in error["message"]
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["success", "error"]
    assert results[1].response_metadata["llassembly"]["line"] == 7


def test_raise_rebuilds_the_tool_error_after_the_state_is_saved() -> None:
    rec = Recorder()
    rec.fail_on = {1}
    app = agent(
        [asm("PUSH 1\nCALL flaky")],
        rec.tools(),
        checkpointer=InMemorySaver(),
        planner={"on_tool_error": "raise"},
    )
    with pytest.raises(ToolExecutionError, match="flaky is down") as caught:
        app.invoke({"messages": [HumanMessage("go")]}, THREAD)
    assert caught.value.tool == "flaky" and caught.value.line == 4
    saved = app.get_state(THREAD).values["messages"]
    assert meta(saved[-1])["status"] == "stopped" and unanswered(saved) == []


def test_model_call_limit_middleware_counts_only_real_model_calls() -> None:
    """A 5-call plan is one model call: a run limit of 1 does not cut it short, and the
    counters say 1 (the repair case says 2)."""
    rec = Recorder()
    plan = asm("MOV R1, 0\nagain:\nPUSH R1\nCALL ping\nPOP R1\nCMP R1, 5\nJL again")
    limit = ModelCallLimitMiddleware(run_limit=1, thread_limit=10)
    app = agent([plan], rec.tools(), limit, checkpointer=InMemorySaver())
    out = app.invoke({"messages": [HumanMessage("ping")]}, THREAD)
    assert rec.names() == ["ping"] * 5
    assert meta(out["messages"][-1])["status"] == "finished"
    assert app.get_state(THREAD).values["thread_model_call_count"] == 1

    repaired = agent(
        ["```asm\nFROB R1\n```", plan],
        Recorder().tools(),
        ModelCallLimitMiddleware(thread_limit=10),
        checkpointer=InMemorySaver(),
    )
    repaired.invoke({"messages": [HumanMessage("ping")]}, THREAD)
    assert repaired.get_state(THREAD).values["thread_model_call_count"] == 2


# -- state, Command, runtime ----------------------------------------------------------------------


class ModeState(AgentState[Any]):
    mode: NotRequired[str]


def test_command_update_from_a_tool_changes_the_state_and_runtime_state_is_current() -> None:
    seen: list[tuple[str, int]] = []

    @tool
    def set_mode(mode: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Switch the thermostat mode."""
        message = ToolMessage(f"mode is {mode}", tool_call_id=tool_call_id)
        return Command(update={"mode": mode, "messages": [message]})

    @tool
    def read_mode(runtime: ToolRuntime) -> str:
        """The mode the thermostat is in."""
        state = runtime.state
        seen.append((state.get("mode", "unset"), len(state["messages"])))
        return str(state.get("mode", "unset"))

    plan = asm('CALL read_mode\nPOP R1\nPUSH "eco"\nCALL set_mode\nPOP R2\nCALL read_mode\nPOP R3')
    model = ScriptedChatModel(replies=[plan])
    app = create_agent(
        model, tools=[set_mode, read_mode], middleware=[ToolsPlannerMiddleware()],
        state_schema=ModeState,
    )  # fmt: skip
    out = app.invoke({"messages": [HumanMessage("Eco mode, please.")]})
    assert out["mode"] == "eco"
    registers = meta(out["messages"][-1])["registers"]
    assert registers == {"R1": "unset", "R2": "mode is eco", "R3": "eco"}
    # The second read sees the state after the earlier calls' messages were added.
    assert seen[0][0] == "unset" and seen[1][0] == "eco" and seen[1][1] > seen[0][1]


# -- streaming ------------------------------------------------------------------------------------


PING_THREE = asm("MOV R1, 0\nagain:\nPUSH R1\nCALL ping\nPOP R1\nCMP R1, 3\nJL again")


def test_stream_updates_deliver_each_call_while_the_plan_runs() -> None:
    rec = Recorder()
    app = agent([PING_THREE], rec.tools())
    seen_when: list[int] = []
    for update in app.stream({"messages": [HumanMessage("go")]}, stream_mode="updates"):
        for node in update:
            if node == "tools":
                seen_when.append(len(rec.log))
    # Each ToolMessage arrived before the next call ran.
    assert seen_when == [1, 2, 3]


async def test_stream_messages_delivers_calls_and_results_one_by_one() -> None:
    rec = Recorder()
    app = agent([PING_THREE], rec.tools())
    order: list[tuple[str, int]] = []
    async for message, _ in app.astream({"messages": [HumanMessage("go")]}, stream_mode="messages"):
        kind = "call" if isinstance(message, AIMessage) and message.tool_calls else message.type
        order.append((kind, len(rec.log)))
    calls_and_results = [entry for entry in order if entry[0] in ("call", "tool")]
    assert calls_and_results == [
        ("call", 0), ("tool", 1), ("call", 1), ("tool", 2), ("call", 2), ("tool", 3),
    ]  # fmt: skip


# -- one instance, many agents --------------------------------------------------------------------


def _same_named_tools(tag: str, log: list[str]) -> Any:
    @tool
    async def lookup(x: int) -> str:
        """Look x up."""
        await asyncio.sleep(0.01)
        log.append(f"{tag} {x}")
        return f"{tag}:{x}"

    return lookup


async def test_one_instance_serves_two_agents_whose_tools_share_a_name() -> None:
    log: list[str] = []
    shared = ToolsPlannerMiddleware()
    plan = asm("PUSH 1\nCALL lookup\nPOP R1\nPUSH 2\nCALL lookup\nPOP R2")
    first = create_agent(
        ScriptedChatModel(replies=[plan]), tools=[_same_named_tools("A", log)], middleware=[shared]
    )
    second = create_agent(
        ScriptedChatModel(replies=[plan]), tools=[_same_named_tools("B", log)], middleware=[shared]
    )
    a, b = await asyncio.gather(
        first.ainvoke({"messages": [HumanMessage("a")]}),
        second.ainvoke({"messages": [HumanMessage("b")]}),
    )
    assert sorted(log) == ["A 1", "A 2", "B 1", "B 2"]
    assert meta(a["messages"][-1])["registers"] == {"R1": "A:1", "R2": "A:2"}
    assert meta(b["messages"][-1])["registers"] == {"R1": "B:1", "R2": "B:2"}


def test_an_interrupted_plan_resumes_with_its_own_agents_tools_after_another_agent_ran() -> None:
    log: list[str] = []

    def tools(tag: str) -> list[Any]:
        @tool
        def lookup(x: int) -> str:
            """Look x up (asks first on agent A)."""
            if tag == "A" and x == 2:
                from langgraph.types import interrupt

                interrupt("may I?")
            log.append(f"{tag} {x}")
            return f"{tag}:{x}"

        return [lookup]

    shared = ToolsPlannerMiddleware()
    plan = asm("PUSH 1\nCALL lookup\nPOP R1\nPUSH 2\nCALL lookup\nPOP R2")
    saver = InMemorySaver()
    first = create_agent(
        ScriptedChatModel(replies=[plan]), tools=tools("A"), middleware=[shared], checkpointer=saver
    )
    second = create_agent(ScriptedChatModel(replies=[plan]), tools=tools("B"), middleware=[shared])
    first.invoke({"messages": [HumanMessage("a")]}, THREAD)
    second.invoke({"messages": [HumanMessage("b")]})
    out = first.invoke(Command(resume="yes"), THREAD)
    assert log == ["A 1", "B 1", "B 2", "A 2"]
    assert meta(out["messages"][-1])["registers"] == {"R1": "A:1", "R2": "A:2"}


# -- native tool calls in a planner reply ---------------------------------------------------------


def _native(*amounts: int, text: str = "") -> AIMessage:
    return AIMessage(
        content=text,
        tool_calls=[
            {"name": "wire_money", "args": {"amount": a}, "id": f"native{a}", "type": "tool_call"}
            for a in amounts
        ],
    )


def test_native_tool_calls_alone_are_never_run_and_the_model_is_asked_for_a_program() -> None:
    rec = Recorder()
    plan = asm("PUSH 5\nCALL wire_money\nPOP R1\nPUSH 6\nCALL wire_money\nPOP R2")
    app = agent([_native(100, 200), plan], rec.tools(), planner={"max_tool_calls": 1})
    out = app.invoke({"messages": [HumanMessage("pay")]})
    assert rec.log == [("wire_money", 5)]  # only the verified plan, within max_tool_calls
    assert "called tools directly (wire_money)" in app.scripted.calls[1][-1].text
    assert "max_tool_calls budget exceeded" in out["messages"][-1].text
    assert unanswered(out["messages"]) == []


def test_native_tool_calls_beside_a_program_are_dropped_and_the_program_runs() -> None:
    rec = Recorder()
    both = _native(999, text=asm("PUSH 5\nCALL wire_money\nPOP R1"))
    out = agent([both], rec.tools()).invoke({"messages": [HumanMessage("pay")]})
    assert rec.log == [("wire_money", 5)]
    assert unanswered(out["messages"]) == []
    plan_message = out["messages"][1]
    assert plan_message.tool_calls == []
    assert plan_message.response_metadata["llassembly_dropped_tool_calls"] == ["wire_money"]


@pytest.mark.parametrize(
    "block",
    [
        {"type": "tool_use", "id": "native999", "name": "wire_money", "input": {"amount": 999}},
        {"type": "tool_call", "id": "native999", "name": "wire_money", "args": {"amount": 999}},
        {  # OpenAI's Responses API
            "type": "function_call",
            "call_id": "native999",
            "id": "fc_1",
            "name": "wire_money",
            "arguments": '{"amount": 999}',
        },
    ],
    ids=["anthropic", "standard", "responses"],
)
def test_a_dropped_native_call_leaves_no_call_block_in_the_plan(block: dict[str, Any]) -> None:
    """A provider that writes a native call in the content too (its block) keeps no trace of
    it in the plan's message: later requests, which offer no tools, would carry a call no
    result answers (providers refuse that)."""
    rec = Recorder()
    both = _native(999, text=asm("PUSH 5\nCALL wire_money\nPOP R1"))
    both.content = [{"type": "text", "text": both.content}, block]
    out = agent([both], rec.tools()).invoke({"messages": [HumanMessage("pay")]})
    assert rec.log == [("wire_money", 5)]
    plan_message = out["messages"][1]
    assert [b["type"] for b in plan_message.content] == ["text"]
    assert plan_message.response_metadata["llassembly_dropped_tool_calls"] == ["wire_money"]


def test_native_tool_calls_that_never_become_a_program_run_nothing() -> None:
    rec = Recorder()
    app = agent([_native(1), _native(2)], rec.tools(), planner={"max_repairs": 1})
    out = app.invoke({"messages": [HumanMessage("pay")]})
    assert rec.log == []
    assert meta(out["messages"][-1])["status"] == "refused"
    assert "called tools directly" in str(meta(out["messages"][-1])["error"]["message"])
    assert unanswered(out["messages"]) == []


# -- what the planner model is shown --------------------------------------------------------------


def test_planner_requests_never_hold_tool_call_blocks() -> None:
    """An earlier ReAct turn and an earlier plan's calls are shown to the model as text."""
    rec = Recorder()
    earlier = [
        HumanMessage("ping 1"),
        _native(7),
        ToolMessage("sent", tool_call_id="native7", name="wire_money"),
        AIMessage("Done."),
    ]
    app = agent([PING_THREE, asm("PUSH 9\nCALL ping")], rec.tools(), checkpointer=InMemorySaver())
    app.invoke({"messages": [*earlier, HumanMessage("ping thrice")]}, THREAD)
    app.invoke({"messages": [HumanMessage("and once more")]}, THREAD)
    assert len(app.scripted.calls) == 2
    for request in app.scripted.calls:
        assert not any(isinstance(m, ToolMessage) for m in request)
        assert not any(isinstance(m, AIMessage) and m.tool_calls for m in request)
    shown = "\n".join(m.text for m in app.scripted.calls[1])
    assert "1. wire_money: succeeded" in shown and "line 6: ping: succeeded" in shown
    assert "sent" not in shown and '{"x": 2}' not in shown  # by their structure, not content
    for request in app.scripted.calls:  # and never in the user's role
        assert not any(isinstance(m, HumanMessage) and "succeeded" in m.text for m in request)


def test_without_infer_tools_messages_the_turn_ends_with_the_plan_and_final_message() -> None:
    rec = Recorder()
    app = agent([PING_THREE], rec.tools(), planner={"infer_tools_messages": False})
    out = app.invoke({"messages": [HumanMessage("go")]})
    assert rec.names() == ["ping"] * 3
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage, AIMessage]
    assert "```asm" in out["messages"][1].text


# -- a tool result that cannot be read as its declared type ---------------------------------------


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_result_that_is_not_its_declared_type_reaches_the_plan_as_the_tool_returned_it(
    execution: str,
) -> None:
    """The plan gets the tool's own return value on both paths, whatever its annotation
    says: text stays text (it is never re-read from the message)."""

    @tool
    def humidity() -> int:
        """Relative humidity in percent."""
        return "very humid"  # type: ignore[return-value]

    model = ScriptedChatModel(replies=[asm('CALL humidity\nPOP R1\nSAY "{R1}"')])
    planner = ToolsPlannerMiddleware(execution=execution)
    app = create_agent(model, tools=[humidity], middleware=[planner])
    final = app.invoke({"messages": [HumanMessage("how humid?")]})["messages"][-1]
    assert meta(final)["status"] == "finished" and final.text == "very humid"
    assert meta(final)["registers"] == {"R1": "very humid"}


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_one_value_tuple_result_reaches_the_plan_as_its_value(execution: str) -> None:
    """``-> tuple[int]`` pushes its one value on the agent's paths too (the tool's message
    holds the JSON array ``[5]``)."""

    @tool
    def next_ticket() -> tuple[int]:
        """The next ticket number."""
        return (5,)

    model = ScriptedChatModel(replies=[asm('CALL next_ticket\nPOP R1\nADD R1, 1\nSAY "{R1}"')])
    planner = ToolsPlannerMiddleware(execution=execution)
    app = create_agent(model, tools=[next_ticket], middleware=[planner])
    final = app.invoke({"messages": [HumanMessage("next?")]})["messages"][-1]
    assert meta(final)["status"] == "finished" and final.text == "6"


def test_a_one_value_tuple_result_is_read_from_its_text_too() -> None:
    """A message the tool path did not tag (a middleware's, a person's) holds the JSON array
    ``[5]``: the plan reads its one value from it, as from the tool's own value."""
    from llassembly.errors import AsmRuntimeError
    from llassembly.integration.calls import decode_text
    from llassembly.machine.externs import externs_from
    from llassembly.machine.state import ToolCall

    def next_ticket() -> tuple[int]:
        """The next ticket number."""
        return (5,)

    extern = externs_from([next_ticket])["next_ticket"]
    pending = ToolCall("next_ticket", {}, 1, 3, "CALL next_ticket", 1)
    assert extern.to_values(decode_text(extern, "[5]", pending)) == (5,)
    with pytest.raises(AsmRuntimeError, match=r"declared to return 1 value \(a JSON array\)"):
        decode_text(extern, "5", pending)


# -- resuming in another process ------------------------------------------------------------------


@pytest.mark.slow
def test_an_interrupt_resumes_in_a_new_process_with_no_tools_argument(tmp_path: Path) -> None:
    """Two real processes share one SQLite file. The first runs a plan until a tool calls
    ``interrupt()``; the second resumes with only the thread id, a model with no replies and
    the plain pattern (no ``tools=`` for the middleware)."""
    script = Path(__file__).with_name("agent_process.py")
    db, calls = tmp_path / "state.sqlite", tmp_path / "calls.log"

    def run(role: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(script), role, str(db), str(calls)],
            env={**os.environ, "PYTHONPATH": str(TESTS)},  # fakes, beside the folders
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    first = run("start")
    assert first["interrupted"] and first["model_calls"] == 1
    assert calls.read_text().split() == ["step1", "step2", "ask"]
    second = run("resume")
    assert second["model_calls"] == 0 and second["status"] == "finished"
    # ask_permission runs again on resume (LangGraph re-runs the interrupted node); nothing else.
    assert calls.read_text().split() == ["step1", "step2", "ask", "ask", "step3"]
    assert second["unanswered"] == []


# -- found in review: the plan's lifetime, result decoding, failures after a replan ----------------


def test_a_tool_command_adding_other_messages_does_not_drop_the_running_plan() -> None:
    """A Command that adds a message after its ToolMessage used to look like a new turn: the
    plan was dropped and a new one written, charging the card twice."""
    log: list[tuple[str, Any]] = []

    @tool
    def charge(amount: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Charge the card."""
        log.append(("charge", amount))
        receipt = HumanMessage(f"[receipt for {amount}]")
        return Command(update={"messages": [ToolMessage("ok", tool_call_id=tool_call_id), receipt]})

    @tool
    def notify(text: str) -> str:
        """Tell the user."""
        log.append(("notify", text))
        return "sent"

    plan = asm('PUSH 10\nCALL charge\nPOP R1\nPUSH "charged"\nCALL notify')
    model = ScriptedChatModel(replies=[plan, plan])
    app = create_agent(model, tools=[charge, notify], middleware=[ToolsPlannerMiddleware()])
    out = app.invoke({"messages": [HumanMessage("pay 10")]})
    assert log == [("charge", 10), ("notify", "charged")]
    assert len(model.calls) == 1
    assert meta(out["messages"][-1])["status"] == "finished"


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_failure_raised_once_is_not_raised_again_in_a_later_run(execution: str) -> None:
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class Gate(AgentMiddleware):  # type: ignore[type-arg]
        """Ends a run before the model when the user says 'blocked'."""

        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            if "blocked" in state["messages"][-1].text:
                return {"messages": [AIMessage("Refused.")], "jump_to": "end"}
            return None

    rec = Recorder()
    rec.fail_on = {1}
    app = agent(
        [asm("PUSH 1\nCALL flaky")],
        rec.tools(),
        Gate(),
        checkpointer=InMemorySaver(),
        planner={"on_tool_error": "raise", "execution": execution},
    )
    with pytest.raises(ToolExecutionError):
        app.invoke({"messages": [HumanMessage("go")]}, THREAD)
    out = app.invoke({"messages": [HumanMessage("this one is blocked")]}, THREAD)
    assert out["messages"][-1].text == "Refused."


def test_a_plan_cut_off_by_a_return_direct_tool_is_let_go_at_the_next_turn() -> None:
    """A return_direct tool ends the agent's run, as for any call; the rest of the plan does
    not run then, and the next user turn gets a new plan instead of the stale one."""
    log: list[str] = []

    @tool(return_direct=True)
    def lookup(x: int) -> str:
        """Look x up and answer the user with it."""
        log.append(f"lookup {x}")
        return f"found {x}"

    @tool
    def ping(x: int) -> int:
        """Answer x + 1."""
        log.append(f"ping {x}")
        return x + 1

    model = ScriptedChatModel(
        replies=[asm("PUSH 1\nCALL lookup\nPUSH 2\nCALL ping"), asm("PUSH 5\nCALL ping\nPOP R1")]
    )
    app = create_agent(
        model,
        tools=[lookup, ping],
        middleware=[ToolsPlannerMiddleware()],
        checkpointer=InMemorySaver(),
    )
    first = app.invoke({"messages": [HumanMessage("look 1 up")]}, THREAD)
    assert log == ["lookup 1"] and first["messages"][-1].text == "found 1"
    second = app.invoke({"messages": [HumanMessage("now ping 5")]}, THREAD)
    assert log == ["lookup 1", "ping 5"] and len(model.calls) == 2
    assert meta(second["messages"][-1])["registers"] == {"R1": 6}
    assert unanswered(second["messages"]) == []


@pytest.mark.parametrize("limit", ["tool call limit", "before_model jump"])
def test_a_plan_cut_off_by_a_limit_that_ends_the_run_is_let_go_at_the_next_turn(
    limit: str,
) -> None:
    """A middleware that ends the run mid-plan (``ToolCallLimitMiddleware`` with
    ``exit_behavior="end"`` answers the plan's call itself; a ``before_model`` hook jumps to
    the end with a message): the next user turn gets a new plan, and nothing of the old one
    runs again."""
    from langchain.agents.middleware import AgentMiddleware, hook_config

    class CutAtSecondStep(AgentMiddleware):  # type: ignore[type-arg]
        visits = 0

        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            self.visits += 1
            if self.visits == 2:
                return {"messages": [AIMessage("Time is up.")], "jump_to": "end"}
            return None

    rec = Recorder()
    stopper: Any = (
        ToolCallLimitMiddleware(tool_name="ping", run_limit=1, exit_behavior="end")
        if limit == "tool call limit"
        else CutAtSecondStep()
    )
    first_plan = asm("PUSH 1\nCALL ping\nPOP R1\nPUSH 2\nCALL ping\nPOP R2\nPUSH 3\nCALL ping")
    second_plan = asm("PUSH 4\nCALL set_heater\nPOP R1")
    app = agent([first_plan, second_plan], rec.tools(), stopper, checkpointer=InMemorySaver())
    app.invoke({"messages": [HumanMessage("ping thrice")]}, THREAD)
    ran_first = list(rec.log)
    assert ran_first and len(ran_first) < 3 and all(name == "ping" for name in rec.names())
    second = app.invoke({"messages": [HumanMessage("heater to 4")]}, THREAD)
    assert rec.log == [*ran_first, ("set_heater", 4)]
    assert len(app.scripted.calls) == 2
    assert meta(second["messages"][-1])["status"] == "finished"


def test_an_ai_message_a_tool_adds_beside_its_result_does_not_end_the_plan() -> None:
    """A tool's ``Command`` may add an ``AIMessage`` (a hand-off note) after its result: it
    belongs to the call, so the plan goes on; it is tagged with the call's id."""
    log: list[str] = []

    @tool
    def hand_off(x: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Hand the case over."""
        log.append(f"hand_off {x}")
        note = AIMessage("(the case was handed over)")
        return Command(update={"messages": [ToolMessage("7", tool_call_id=tool_call_id), note]})

    @tool
    def ping(x: int) -> int:
        """Answer x + 1."""
        log.append(f"ping {x}")
        return x + 1

    plan = asm("PUSH 1\nCALL hand_off\nPOP R1\nPUSH R1\nCALL ping\nPOP R2")
    model = ScriptedChatModel(replies=[plan, plan])
    app = create_agent(model, tools=[hand_off, ping], middleware=[ToolsPlannerMiddleware()])
    out = app.invoke({"messages": [HumanMessage("go")]})
    assert log == ["hand_off 1", "ping 7"] and len(model.calls) == 1
    assert meta(out["messages"][-1])["registers"] == {"R1": "7", "R2": 8}
    note = next(m for m in out["messages"] if m.text == "(the case was handed over)")
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.text == "7")
    assert note.response_metadata["llassembly_added_by_call"] == result.tool_call_id
    assert result.response_metadata["llassembly"]["source"] == "CALL hand_off"


@pytest.mark.parametrize("first", ["hand_off", "ping"])
def test_an_ai_message_a_tool_adds_in_a_batch_hides_no_other_calls_answer(first: str) -> None:
    """In a batch (``parallel_tools``) the note one call adds after its result belongs to the
    batch's run: every call of it is answered, whatever the calls' order."""
    log: list[str] = []

    @tool
    def hand_off(tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Hand the case over."""
        log.append("hand_off")
        note = AIMessage("(the case was handed over)")
        return Command(update={"messages": [ToolMessage("7", tool_call_id=tool_call_id), note]})

    @tool
    def ping() -> int:
        """Answer 1."""
        log.append("ping")
        return 1

    second = "ping" if first == "hand_off" else "hand_off"
    plan = asm(f'CALL {first}\nPOP R1\nCALL {second}\nPOP R2\nSAY "{{R1}} {{R2}}"')
    model = ScriptedChatModel(replies=[plan, asm('SAY "second plan"')])
    planner = ToolsPlannerMiddleware(parallel_tools=True)
    app = create_agent(model, tools=[hand_off, ping], middleware=[planner])
    out = app.invoke({"messages": [HumanMessage("go")]})
    assert sorted(log) == ["hand_off", "ping"] and len(model.calls) == 1
    assert out["messages"][-1].text == ("7 1" if first == "hand_off" else "1 7")


def test_a_plan_whose_tools_are_no_longer_offered_stops_instead_of_escaping() -> None:
    """A tool selector listed before the planner may offer other tools at a later step."""
    from langchain.agents.middleware import AgentMiddleware

    class DropNotifyAfterPlanning(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            if any(isinstance(m, ToolMessage) for m in request.messages):
                request = request.override(tools=[t for t in request.tools if t.name != "ping"])
            return handler(request)

    rec = Recorder()
    plan = asm("PUSH 1\nCALL ping\nPOP R1\nPUSH 2\nCALL set_heater")
    app = agent([plan], rec.tools())
    app = create_agent(
        ScriptedChatModel(replies=[plan]),
        tools=rec.tools(),
        middleware=[DropNotifyAfterPlanning(), ToolsPlannerMiddleware()],
    )
    out = app.invoke({"messages": [HumanMessage("go")]})
    final = out["messages"][-1]
    assert rec.log == [("ping", 1)]
    assert meta(final)["status"] == "stopped"
    assert "no longer fits the tools" in meta(final)["error"]["detail"]


@pytest.mark.parametrize("granularity", ["block", "instruction", "program"])
def test_on_the_graph_path_a_plan_whose_tools_are_no_longer_offered_stops_too(
    granularity: str,
) -> None:
    """As above, where the step that runs the plan graph is offered fewer tools than the step
    that accepted the plan: nothing runs, and the turn stops as on the agent path."""
    from langchain.agents.middleware import AgentMiddleware

    class DropPingAfterPlanning(AgentMiddleware):  # type: ignore[type-arg]
        visits = 0

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            self.visits += 1
            if self.visits > 1:
                request = request.override(tools=[t for t in request.tools if t.name != "ping"])
            return handler(request)

    rec = Recorder()
    plan = asm("PUSH 1\nCALL ping\nPOP R1\nPUSH 2\nCALL set_heater")
    app = create_agent(
        ScriptedChatModel(replies=[plan]),
        tools=rec.tools(),
        middleware=[
            DropPingAfterPlanning(),
            ToolsPlannerMiddleware(execution="graph", granularity=granularity),
        ],
    )
    out = app.invoke({"messages": [HumanMessage("go")]})
    error = meta(out["messages"][-1])["error"]
    assert rec.log == []
    assert (meta(out["messages"][-1])["status"], error["line"]) == ("stopped", 4)
    assert error["detail"].startswith("the plan no longer fits the tools the agent offers now: ")


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_results_reach_the_plan_as_the_tool_returned_them_on_both_paths(execution: str) -> None:

    @tool
    def find(key: str) -> Optional[int]:  # noqa: UP045
        """The id of a key, if any."""
        return None

    @tool
    def ratio() -> float:
        """A ratio that happens to be whole."""
        return 3  # type: ignore[return-value]

    @tool
    def page() -> Any:
        """An attacker-controlled page: deeply nested brackets."""
        return "[" * 100_000 + "]" * 100_000

    plan = asm('PUSH "k"\nCALL find\nPOP R1\nCALL ratio\nPOP R2\nCALL page\nPOP R3')
    out = agent([plan], [find, ratio, page], planner={"execution": execution}).invoke(
        {"messages": [HumanMessage("go")]}
    )
    registers = meta(out["messages"][-1])["registers"]
    assert registers["R1"] == NONE and registers["R2"] == 3 and type(registers["R2"]) is int
    assert registers["R3"].startswith("[[[")


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_replan_answered_in_words_still_reports_the_failure(execution: str) -> None:
    rec = Recorder()
    rec.fail_on = {1}
    app = agent(
        [asm("PUSH 1\nCALL flaky"), "I cannot do that: the service is down."],
        rec.tools(),
        planner={"on_tool_error": "replan", "execution": execution},
    )
    out = app.invoke({"messages": [HumanMessage("go")]})
    assert meta(out["messages"][-1])["status"] == "stopped"
    assert any(m.text == "I cannot do that: the service is down." for m in out["messages"])


@pytest.mark.slow
def test_one_instance_serving_agents_built_per_request_keeps_bounded_caches() -> None:
    planner = ToolsPlannerMiddleware()
    for i in range(400):

        @tool
        def ping(x: int) -> int:
            """Answer x + 1."""
            return x + 1

        app = create_agent(
            ScriptedChatModel(replies=[asm("PUSH 1\nCALL ping\nPOP R1")]),
            tools=[ping],
            middleware=[planner],
        )
        app.invoke({"messages": [HumanMessage(f"ping {i}")]})
    assert len(planner.planner._externs) <= 256


@pytest.mark.parametrize(
    "text", ["0", "-0", "42", "-17", "007", "1_000", " 5 ", "+3", "3.0", "1e3", "٣", "2" * 30, "-"]
)
def test_a_number_result_is_read_exactly_as_json_reads_it(text: str) -> None:
    """Integers skip the JSON decoder; whatever the text, the plan gets what ``json.loads``
    gives, and text JSON refuses is refused."""
    from llassembly.errors import AsmRuntimeError
    from llassembly.integration.calls import decode_text
    from llassembly.machine.externs import externs_from
    from llassembly.machine.state import ToolCall

    def count() -> int:
        """A count."""
        return 0

    extern = externs_from([count])["count"]
    pending = ToolCall("count", {}, 1, 3, "CALL count", 1)
    answer = ToolMessage(content=text, tool_call_id="c1")
    try:
        expected: Any = json.loads(text.strip())
    except ValueError:
        with pytest.raises(AsmRuntimeError, match="line 3"):
            decode_text(extern, answer.text, pending)
    else:
        got = decode_text(extern, answer.text, pending)
        assert got == expected and type(got) is type(expected)


def test_a_subclass_hook_that_is_no_plain_function_still_runs_bound() -> None:
    """A subclass may define its hook as a classmethod or a callable object: the instance's
    hook runs it as a bound method would."""
    from llassembly import ToolsPlannerMiddleware

    class Callable_:
        def __call__(self, request: Any, handler: Any) -> Any:
            return ("callable", request)

    class ByClass(ToolsPlannerMiddleware):
        @classmethod
        def wrap_tool_call(cls, request: Any, handler: Any) -> Any:  # type: ignore[override]
            return (cls, request)

    class ByObject(ToolsPlannerMiddleware):
        wrap_tool_call = Callable_()  # type: ignore[assignment]

    assert ByClass().wrap_tool_call("r", None) == (ByClass, "r")
    assert ByObject().wrap_tool_call("r", None) == ("callable", "r")


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_float_zero_result_stays_a_float_to_the_end_of_the_plan(execution: str) -> None:
    """A tool's 0.0 stays a float in its register through every step: each step restores
    the machine from its snapshot; 0.0 + 7 is then 7.0, and / 2 is 3.5 (an integer 0 would
    give 3)."""

    @tool
    def half(x: int) -> float:
        """x / 2."""
        return x / 2

    plan = asm(
        'PUSH 0\nCALL half\nPOP R1\nPUSH 1\nCALL half\nPOP R2\nADD R1, 7\nDIV R1, 2\nSAY "{R1}"'
    )
    app = agent([plan], [half], planner={"execution": execution})
    out = app.invoke({"messages": [HumanMessage("go")]})
    assert out["messages"][-1].text == "3.5"


async def test_with_langsmith_bookkeeping_inline_an_async_plan_runs_and_pauses_as_before() -> None:
    """The README shows async users how to run LangSmith's per-hook bookkeeping inline
    (``langsmith.set_runtime_overrides``) instead of on a worker thread. With it, ``ainvoke``
    gives the same calls, results and messages, and a person's approval still pauses the
    plan and resumes it once."""
    import langsmith

    inlined: list[str] = []

    async def inline(default: Any, ctx: Any, func: Any, /, *args: Any, **kwargs: Any) -> Any:
        inlined.append(getattr(func, "__name__", ""))
        return ctx.run(func, *args, **kwargs)

    async def run() -> tuple[list[tuple[str, Any]], list[BaseMessage]]:
        rec = Recorder()
        hitl = HumanInTheLoopMiddleware(interrupt_on={"set_heater": True})
        app = agent([HEATER_PLAN], rec.tools(), hitl, checkpointer=InMemorySaver())
        paused = await app.ainvoke({"messages": [HumanMessage("Warm up.")]}, THREAD)
        assert asked_about(paused, "batched") == "set_heater" and rec.log == [("ping", 1)]
        out = await app.ainvoke(decide({"type": "approve"}, "batched"), THREAD)
        return rec.log, out["messages"]

    def shape(messages: list[BaseMessage]) -> list[Any]:
        return [(type(m).__name__, m.text, m.response_metadata.get("llassembly")) for m in messages]

    log, messages = await run()
    langsmith.set_runtime_overrides(aio_to_thread=inline)
    try:
        inline_log, inline_messages = await run()
    finally:
        langsmith.set_runtime_overrides()
    assert inlined, "LangSmith did not use the override"
    assert inline_log == log == [("ping", 1), ("set_heater", 3), ("ping", 2)]
    assert shape(inline_messages) == shape(messages)
    assert unanswered(inline_messages) == []


class Rewriting(AgentMiddleware[Any, Any]):
    """A tool middleware that replaces each result's text (a redaction)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        message = handler(request)
        return message.model_copy(update={"content": self.text})


@pytest.mark.parametrize(("text", "registers"), [("41", {"R1": 41}), ("[redacted]", None)])
def test_a_result_a_middleware_rewrote_is_read_from_its_text_by_the_declared_type(
    text: str, registers: dict[str, Any] | None
) -> None:
    """The agent sees the rewritten text, so the plan reads it: as an ``int`` when it is one,
    else the plan stops on a result that cannot be read as the tool's declared type."""

    @tool
    def count() -> int:
        """A count."""
        return 7

    app = agent([asm("CALL count\nPOP R1")], [count], Rewriting(text))
    final = app.invoke({"messages": [HumanMessage("count")]})["messages"][-1]
    record = meta(final)
    if registers is not None:
        assert (record["status"], record["registers"]) == ("finished", registers)
    else:
        assert record["status"] == "stopped"
        assert record["error"]["type"] == "AsmRuntimeError"
        assert record["error"]["detail"] == (
            "tool 'count' is declared to return int, but its result '[redacted]' cannot be "
            "read as one"
        )


@pytest.mark.parametrize(
    ("returns", "text", "expected"),
    [
        (int, "[1]", None),  # JSON, but no number
        (int, '"3"', None),
        (int, "1e999", None),  # JSON reads it as infinity
        (float, "NaN", None),
        (None, '"hi"', '"hi"'),  # undeclared: text that happens to be a JSON string stays text
        (None, "[1, 2]", [1, 2]),
        (None, "Infinity", None),
        (None, "1e999", None),
    ],
)
def test_a_result_text_is_refused_when_it_reads_as_no_value_of_its_type(
    returns: Any, text: str, expected: Any
) -> None:
    from llassembly.errors import AsmRuntimeError
    from llassembly.integration.calls import decode_text
    from llassembly.machine.externs import externs_from
    from llassembly.machine.state import ToolCall

    def measure():  # type: ignore[no-untyped-def]
        """A measure."""

    if returns is not None:
        measure.__annotations__["return"] = returns
    extern = externs_from([measure])["measure"]
    pending = ToolCall("measure", {}, 1, 3, "CALL measure", 1)
    if expected is None:
        with pytest.raises(AsmRuntimeError, match=r"^line 3: tool 'measure' is declared"):
            decode_text(extern, text, pending)
    else:
        got = decode_text(extern, text, pending)
        assert got == expected and type(got) is type(expected)


def test_two_runs_answered_by_one_cached_reply_give_their_calls_distinct_ids() -> None:
    """A call's id is the key of its effect (docs/durability.md): two runs of one request
    whose plan comes from LangChain's model cache (the same reply, its id too) are two
    shipments, so their calls' ids differ; the prefix is long enough not to repeat by chance."""
    from langchain_core.caches import InMemoryCache

    seen: list[str] = []

    @tool
    def ship(crate: int, runtime: ToolRuntime) -> int:
        """Ship one crate."""
        seen.append(str(runtime.tool_call_id))
        return crate

    plan = asm('PUSH 7\nCALL ship\nPOP R1\nSAY "shipped"')
    model = ScriptedChatModel(replies=[plan, plan], cache=InMemoryCache())
    app = create_agent(model, tools=[ship], middleware=[ToolsPlannerMiddleware()])
    for _ in range(2):
        app.invoke({"messages": [HumanMessage("ship crate 7")]})
    assert len(model.calls) == 1  # the second plan came from the cache
    assert len(seen) == 2 and seen[0] != seen[1]
    assert len(seen[0].split("_")[0]) >= len("asm") + 16  # (64 bits: no repeat by chance)
