"""``llassembly.plan`` / ``aplan``: a verified plan from a model now, run or stepped later.

Every model reply here is written by hand (``ScriptedChatModel``), not recorded from a model.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import asm
from fakes import ScriptedChatModel
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import (
    Emulator,
    PlainAnswer,
    Plan,
    Program,
    RepairsExhausted,
    ToolsPlannerNode,
    UsageError,
    aplan,
    build_system_prompt,
    externs_from,
    parse,
    plan,
)
from llassembly.analysis.policies import max_calls
from llassembly.errors import ToolCallBudgetExceeded

TEMPERATURES = {"Paris": 21, "Oslo": 4, "Cairo": 33}


def get_temperature(city: str) -> int:
    """Today's temperature in a city, in degrees Celsius."""
    return TEMPERATURES[city]


def notify(city: str) -> None:
    """Tell the user a city is warm."""


TOOLS = [get_temperature, notify]

# For each city: read its temperature, notify when above 20. Calls: 3 reads, 2 notifications.
WARM_CITIES = asm(
    """
section .data
cities dd paris, oslo, cairo
paris  db "Paris", 0
oslo   db "Oslo", 0
cairo  db "Cairo", 0
section .text
    MOV ESI, 0
next:
    PUSH [cities + ESI*4]
    CALL get_temperature
    POP R1
    CMP R1, 20
    JLE cold
    PUSH [cities + ESI*4]
    CALL notify
cold:
    INC ESI
    CMP ESI, 3
    JL next
    SAY "done"
"""
)
UNKNOWN_TOOL = asm("PUSH 1\nCALL get_humidity\nPOP R1")


def shown(calls: list[list[BaseMessage]]) -> list[list[tuple[str, str]]]:
    return [[(m.type, m.text) for m in request] for request in calls]


def test_plan_verifies_and_compiles_the_reply_without_running_it() -> None:
    model = ScriptedChatModel(replies=[WARM_CITIES])
    found = plan(model, TOOLS, "Notify me of the warm cities.")
    assert isinstance(found, Plan)
    assert found.is_program and found.model_calls == 1 and found.repairs == 0
    assert found.text == WARM_CITIES
    assert isinstance(found.program, Program) and found.parsed is found.program
    assert found.compiled is not None and set(found.externs) == {"get_temperature", "notify"}
    [request] = model.calls
    assert [m.type for m in request] == ["system", "human"]
    assert request[1].text == "Notify me of the warm cities."
    assert request[0].text == build_system_prompt(externs_from(TOOLS), "")


def test_system_messages_become_the_prompts_context() -> None:
    model = ScriptedChatModel(replies=[WARM_CITIES])
    plan(model, TOOLS, [SystemMessage("You report the weather."), HumanMessage("Warm ones?")])
    system, question = model.calls[0]
    assert system.text == build_system_prompt(externs_from(TOOLS), "You report the weather.")
    assert question.text == "Warm ones?"


def test_a_game_loop_steps_the_plan_one_call_at_a_time() -> None:
    found = plan(ScriptedChatModel(replies=[WARM_CITIES]), TOOLS, "Warm cities?")
    emulator = found.emulator()
    made: list[tuple[str, dict[str, Any]]] = []
    while (call := emulator.advance()) is not None:  # one call per frame
        made.append((call.tool, call.args))
        emulator.complete(found.externs[call.tool].call(call.args))
    assert made == [
        ("get_temperature", {"city": "Paris"}),
        ("notify", {"city": "Paris"}),
        ("get_temperature", {"city": "Oslo"}),
        ("get_temperature", {"city": "Cairo"}),
        ("notify", {"city": "Cairo"}),
    ]
    result = emulator.result()
    assert emulator.finished and result.answer == "done" and result.tool_calls == 5
    assert found.emulator().run().tool_calls == 5  # each emulator starts at the beginning


def test_the_plans_budgets_apply_to_its_machines_unless_overridden() -> None:
    found = plan(ScriptedChatModel(replies=[WARM_CITIES]), TOOLS, "Warm?", max_tool_calls=2)
    assert found.max_tool_calls == 2
    with pytest.raises(ToolCallBudgetExceeded):
        found.emulator().run()
    assert found.emulator(max_tool_calls=5).run().tool_calls == 5
    with pytest.raises(UsageError, match="max_tool_calls must be a positive integer"):
        found.emulator(max_tool_calls=0)


def test_a_snapshot_of_a_stepped_plan_resumes_on_a_new_machine() -> None:
    found = plan(ScriptedChatModel(replies=[WARM_CITIES]), TOOLS, "Warm?")
    first = found.emulator()
    call = first.advance()
    assert call is not None
    saved = first.snapshot()  # plain data: store it with the game's save
    later = found.emulator(state=saved)
    assert later.advance() == call
    later.complete(21)
    assert later.run().tool_calls == 5


def test_an_invalid_reply_is_repaired_like_the_planner_nodes_do() -> None:
    replies = [UNKNOWN_TOOL, WARM_CITIES]
    model = ScriptedChatModel(replies=replies)
    found = plan(model, TOOLS, "Warm cities?")
    assert found.model_calls == 2 and found.repairs == 1 and found.text == WARM_CITIES
    repair = model.calls[1][-1]
    assert isinstance(repair, HumanMessage) and "get_humidity" in repair.text

    # The nodes send the model exactly the same requests for the same conversation.
    node_model = ScriptedChatModel(replies=replies)
    graph = StateGraph(MessagesState)
    graph.add_node("planner", ToolsPlannerNode(node_model, tools=TOOLS))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    graph.compile().invoke({"messages": [HumanMessage("Warm cities?")]})
    assert shown(node_model.calls) == shown(model.calls)


def test_a_policy_problem_is_repaired_too() -> None:
    once = asm('PUSH "Paris"\nCALL notify')
    model = ScriptedChatModel(replies=[WARM_CITIES, once])
    found = plan(model, TOOLS, "Warm?", plan_policy=[max_calls({"notify": 1})])
    assert found.model_calls == 2 and found.text == once
    assert "notify" in model.calls[1][-1].text


def test_exhausted_repairs_raise_with_the_last_problems() -> None:
    model = ScriptedChatModel(replies=[UNKNOWN_TOOL, UNKNOWN_TOOL])
    with pytest.raises(RepairsExhausted) as caught:
        plan(model, TOOLS, "Warm cities?", max_repairs=1)
    assert caught.value.attempts == 2 and len(model.calls) == 2
    assert "get_humidity" in str(caught.value)


def test_an_answer_in_words_is_a_plan_without_a_program() -> None:
    found = plan(ScriptedChatModel(replies=["It is warm in Cairo."]), TOOLS, "Warm?")
    assert not found.is_program and found.program is None and found.compiled is None
    assert found.parsed == PlainAnswer("It is warm in Cairo.")
    for use in (found.emulator, found.summary, found.graph):
        with pytest.raises(UsageError, match="answered in words"):
            use()


def test_summary_and_graph_describe_the_verified_plan() -> None:
    found = plan(ScriptedChatModel(replies=[WARM_CITIES]), TOOLS, "Warm?", max_tool_calls=7)
    summary = found.summary()
    assert summary.tool_call_budget == 7 and summary.max_tool_calls is None  # in a loop
    assert {use.name for use in summary.tools} == {"get_temperature", "notify"}
    assert "CALL get_temperature" in found.graph("instruction").draw_mermaid()


def test_tools_with_a_runtime_get_it_from_the_caller() -> None:
    @tool
    def whoami(runtime: ToolRuntime[str]) -> str:
        """The name of the unit asking."""
        return str(runtime.context)

    found = plan(ScriptedChatModel(replies=[asm("CALL whoami\nPOP R1")]), [whoami], "Who?")
    emulator = found.emulator()
    call = emulator.advance()
    assert call is not None and call.args == {}
    runtime = ToolRuntime(
        state={},
        context="unit 7",
        config={},
        stream_writer=lambda _: None,
        tool_call_id="call-1",
        store=None,
    )
    emulator.complete(found.externs[call.tool].call({**call.args, "runtime": runtime}))
    assert emulator.run().registers == {"R1": "unit 7"}


def test_bad_requests_and_options_are_usage_errors() -> None:
    model = ScriptedChatModel(replies=[])
    with pytest.raises(UsageError, match="nothing to plan"):
        plan(model, TOOLS, [SystemMessage("Only context.")])
    with pytest.raises(UsageError, match="max_repairs"):
        plan(model, TOOLS, "Warm?", max_repairs=-1)
    assert model.calls == []


def test_a_plan_can_be_kept_as_text_and_loaded_again() -> None:
    found = plan(ScriptedChatModel(replies=[WARM_CITIES]), TOOLS, "Warm?")
    program = parse(found.text)
    assert isinstance(program, Program)
    assert Emulator(program, TOOLS).run().tool_calls == 5


async def test_aplan_awaits_the_model_and_repairs_too() -> None:
    model = ScriptedChatModel(replies=[UNKNOWN_TOOL, WARM_CITIES])
    found = await aplan(model, TOOLS, "Warm cities?")
    assert found.model_calls == 2 and found.is_program
    result = await found.emulator().arun()
    assert result.tool_calls == 5 and result.answer == "done"
    with pytest.raises(RepairsExhausted):
        await aplan(ScriptedChatModel(replies=[UNKNOWN_TOOL]), TOOLS, "Warm?", max_repairs=0)


class OnlyOneNotify:
    """A plan policy object with ``__eq__`` and so no hash: ``plan`` keeps no planner for it."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OnlyOneNotify)

    def __call__(self, summary: Any, program: Any) -> list[str]:
        return max_calls({"notify": 1})(summary, program)


def test_an_unhashable_policy_gets_a_planner_of_its_own_and_is_applied() -> None:
    once = asm('PUSH "Paris"\nCALL notify')
    model = ScriptedChatModel(replies=[WARM_CITIES, once])
    found = plan(model, TOOLS, "Warm?", plan_policy=[OnlyOneNotify()])
    assert found.model_calls == 2 and found.text == once
    assert "notify" in model.calls[1][-1].text
