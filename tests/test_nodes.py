"""Tests for llassembly.nodes: ``ToolsPlannerNode`` / ``AToolsPlannerNode`` in a ``StateGraph``.

Every model reply here is written by hand (``ScriptedChatModel``); none is a recording of a
real model. Tools record their calls (see ``conftest.Toolbox``).
"""

from __future__ import annotations

import gc
import inspect
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    BAD_PLAN,
    FLAKY_PLAN,
    LOOP_PLAN,
    WEATHER_PLAN,
    Ctx,
    Harness,
    Toolbox,
    added,
    asm,
    meta,
    planned_calls,
)
from fakes import ScriptedChatModel
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from llassembly.errors import RepairsExhausted, ToolExecutionError, UsageError
from llassembly.nodes import AToolsPlannerNode, ToolsPlannerNode

# LangChain's own ToolNode emits this warning too when a dataclass context reaches a tool.
UPSTREAM_CONTEXT_WARNING = "ignore:Pydantic serializer warnings:UserWarning"


@pytest.fixture(params=[False, True], ids=["ToolsPlannerNode-invoke", "AToolsPlannerNode-ainvoke"])
def harness(request: pytest.FixtureRequest) -> Harness:
    return Harness("node", asynchronous=request.param)


# -- 1. public API ------------------------------------------------------------------------------


@pytest.mark.parametrize("node_type", [ToolsPlannerNode, AToolsPlannerNode])
def test_node_keeps_the_documented_signature(node_type: type[ToolsPlannerNode]) -> None:
    params = list(inspect.signature(node_type).parameters.values())
    head = [(p.name, p.default) for p in params[:5]]
    empty = inspect.Parameter.empty
    assert head == [
        ("model", empty),
        ("tools", empty),
        ("max_instructions_to_exec", 1000),
        ("infer_tools_messages", True),
        ("prompt_path", None),
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[5:])


def test_node_accepts_the_documented_options_positionally(box: Toolbox) -> None:
    node = ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools, 50, False, None)
    assert node.options.max_instructions_to_exec == 50
    assert node.options.infer_tools_messages is False


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("granularity", "fast", "granularity"),
        ("on_tool_error", "ignore", "on_tool_error"),
        ("max_repairs", -1, "max_repairs"),
        ("max_tool_calls", 0, "max_tool_calls"),
        ("prompt_path", "/no/such/template.md", "prompt_path"),
    ],
)
def test_node_rejects_invalid_options(box: Toolbox, option: str, value: Any, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools, **{option: value})


def test_node_rejects_a_state_without_messages(box: Toolbox) -> None:
    node = ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools)
    with pytest.raises(UsageError, match="messages"):
        node({"history": []}, {})


def test_node_runs_outside_a_graph(box: Toolbox) -> None:
    node = ToolsPlannerNode(ScriptedChatModel(replies=[WEATHER_PLAN]), box.sync_tools)
    update = node({"messages": [HumanMessage("Warm?")]}, {})
    assert box.names() == ["get_temperature", "notify"]
    assert meta(update["messages"][-1])["status"] == "finished"


# -- 2. the prompt --------------------------------------------------------------------------------


async def test_model_gets_the_planner_prompt_with_state_system_messages_as_context(
    harness: Harness, box: Toolbox
) -> None:
    """The hand-written reply is a valid plan; we check what the model was sent."""
    messages = [SystemMessage("You control the weather station."), HumanMessage("Warm?")]
    await harness.run([WEATHER_PLAN], box.sync_tools, messages)
    sent = harness.model.calls[0]
    assert [type(m) for m in sent] == [SystemMessage, HumanMessage]
    prompt = sent[0].text
    assert prompt.startswith("You control the weather station.")
    assert "# How you act: write one program" in prompt
    for tool in box.sync_tools:
        assert f"## {tool.name}\n{tool.name}(" in prompt
    assert harness.model.bound_tools == []


async def test_prompt_path_replaces_the_built_in_template(
    harness: Harness, box: Toolbox, tmp_path: Path
) -> None:
    template = tmp_path / "prompt.md"
    template.write_text("CUSTOM PLANNER.\nContext: {context}\nTools:\n{extern_functions}\n")
    messages = [SystemMessage("Be brief."), HumanMessage("Warm?")]
    await harness.run([WEATHER_PLAN], box.sync_tools, messages, prompt_path=template)
    prompt = harness.model.calls[0][0].text
    assert prompt.startswith("CUSTOM PLANNER.\nContext: Be brief.\nTools:\n## get_temperature")
    assert "# How you act" not in prompt


# -- 3. the messages contract -------------------------------------------------------------------


async def test_each_executed_call_adds_one_tool_call_message_and_its_result(
    harness: Harness, box: Toolbox
) -> None:
    out = await harness.run([WEATHER_PLAN], box.sync_tools)
    new = added(out)
    assert new[0].text == WEATHER_PLAN
    assert [type(m) for m in new] == [
        AIMessage, AIMessage, ToolMessage, AIMessage, ToolMessage, AIMessage,
    ]  # fmt: skip
    assert planned_calls(new) == [
        ("get_temperature", {"city": "Paris"}),
        ("notify", {"message": "warm"}),
    ]
    for request, answer, line in [(new[1], new[2], 4), (new[3], new[4], 9)]:
        assert isinstance(request, AIMessage) and isinstance(answer, ToolMessage)
        (call,) = request.tool_calls
        assert answer.tool_call_id == call["id"] and answer.name == call["name"]
        assert meta(request)["line"] == line
        assert meta(request)["source"] == f"CALL {call['name']}"
        assert meta(answer) == meta(request)
    final = new[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    record = meta(final)
    assert (record["status"], record["model_calls"], record["repairs"]) == ("finished", 1, 0)
    assert (record["tool_calls"], record["instructions"]) == (2, 8)
    assert len(harness.model.calls) == 1


async def test_tool_call_ids_are_unique_and_short(harness: Harness, box: Toolbox) -> None:
    plan = asm("MOV R1, 0\nloop:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 5\nJL loop")
    out = await harness.run([plan], box.sync_tools)
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 5 and len(set(ids)) == 5
    assert all(isinstance(i, str) and 0 < len(i) < 24 for i in ids)


async def test_without_infer_tools_messages_only_the_plan_and_final_message_are_kept(
    harness: Harness, box: Toolbox
) -> None:
    out = await harness.run([WEATHER_PLAN], box.sync_tools, infer_tools_messages=False)
    new = added(out)
    assert [type(m) for m in new] == [AIMessage, AIMessage]
    assert new[0].text == WEATHER_PLAN and meta(new[1])["tool_calls"] == 2
    assert box.names() == ["get_temperature", "notify"]


# -- 4. ToolRuntime injection -------------------------------------------------------------------


@pytest.mark.filterwarnings(UPSTREAM_CONTEXT_WARNING)
async def test_runtime_tools_see_context_state_store_and_their_call_id(
    harness: Harness, box: Toolbox
) -> None:
    store = InMemoryStore()
    store.put(("users",), "me", {"name": "Ann"})
    out = await harness.run(
        [asm("CALL whoami\nPOP R1")],
        box.sync_tools,
        context=Ctx(user="ann"),
        context_schema=Ctx,
        store=store,
    )
    (seen,) = box.seen
    assert seen["context"] == Ctx(user="ann")
    assert seen["store"] == {"name": "Ann"}
    assert seen["messages"] == ["Do the task."]
    (call,) = [c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert seen["tool_call_id"] == call["id"]
    assert meta(out["messages"][-1])["registers"]["R1"] == "ann"


async def test_tuple_result_pops_in_order_and_pydantic_argument_arrives_validated(
    harness: Harness, box: Toolbox
) -> None:
    plan = asm('CALL position\nPOP R1\nPOP R2\nPUSH \'{"x": 5, "y": 6}\'\nCALL go\nPOP R3')
    out = await harness.run([plan], box.sync_tools)
    assert box.log == [("position", {}), ("go", {"to": {"x": 5, "y": 6}})]
    assert meta(out["messages"][-1])["registers"] == {"R1": 3, "R2": 4, "R3": "at 5,6"}


@pytest.mark.filterwarnings(UPSTREAM_CONTEXT_WARNING)
async def test_async_node_runs_async_tools_with_their_runtime(box: Toolbox) -> None:
    harness = Harness("node", asynchronous=True)
    plan = asm("PUSH 21\nCALL adouble\nPOP R1\nCALL awhoami\nPOP R2")
    out = await harness.run([plan], box.async_tools, context=Ctx(user="bo"), context_schema=Ctx)
    assert box.names() == ["adouble", "awhoami"]
    assert meta(out["messages"][-1])["registers"] == {"R1": 42, "R2": "bo"}
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert box.seen[0]["tool_call_id"] == ids[1]


# -- 5. repair and plain answers ------------------------------------------------------------------


async def test_a_rejected_plan_is_repaired_and_only_the_valid_one_runs(
    harness: Harness, box: Toolbox
) -> None:
    """Both replies are hand-written: the first has three problems, the second is valid."""
    out = await harness.run([BAD_PLAN, WEATHER_PLAN], box.sync_tools)
    assert box.names() == ["get_temperature", "notify"]
    record = meta(out["messages"][-1])
    assert (record["model_calls"], record["repairs"]) == (2, 1)
    request = harness.model.calls[1][-1]
    assert isinstance(request, HumanMessage)
    for needle in ("teleport", "FROB", "nowhere", "line 4", "line 5", "line 6"):
        assert needle in request.text
    # The valid plan is kept in the messages; the rejected one is not.
    assert [m.text for m in added(out) if m.text == BAD_PLAN] == []


async def test_exhausted_repairs_raise_under_raise_and_no_tool_runs(
    harness: Harness, box: Toolbox
) -> None:
    """Both hand-written replies call a tool that does not exist."""
    with pytest.raises(RepairsExhausted) as caught:
        await harness.run(
            [BAD_PLAN, BAD_PLAN], box.sync_tools, max_repairs=1, on_tool_error="raise"
        )
    assert caught.value.attempts == 2
    assert any("teleport" in d.message for d in caught.value.diagnostics)
    assert box.log == []


async def test_exhausted_repairs_end_the_turn_with_a_message_under_stop(
    harness: Harness, box: Toolbox
) -> None:
    """Both hand-written replies call a tool that does not exist."""
    out = await harness.run([BAD_PLAN, BAD_PLAN], box.sync_tools, max_repairs=1)
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert "No plan could run: the model wrote no valid plan in 2 attempts" in final.text
    record = meta(final)
    assert (record["status"], record["model_calls"], record["repairs"]) == ("stopped", 2, 1)
    assert record["error"]["type"] == "RepairsExhausted"
    assert box.log == []


async def test_a_plain_text_reply_ends_the_turn_without_tool_calls(
    harness: Harness, box: Toolbox
) -> None:
    out = await harness.run(["It is sunny; no tools needed."], box.sync_tools)
    new = added(out)
    assert box.log == []
    assert new[0].text == "It is sunny; no tools needed."
    assert not any(isinstance(m, ToolMessage) for m in new)
    assert all(not m.tool_calls for m in new if isinstance(m, AIMessage))


# -- 6. failures and budgets ----------------------------------------------------------------------


async def test_stop_on_tool_error_reports_the_tool_line_and_error_and_keeps_the_calls(
    harness: Harness,
) -> None:
    box = Toolbox(fail_on={3})
    out = await harness.run([FLAKY_PLAN], box.sync_tools)
    final = out["messages"][-1]
    assert "flaky" in final.text and "line 6" in final.text
    assert "flaky broke on call 3" in final.text
    assert box.log == [("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3})]
    assert planned_calls(out["messages"]) == [("flaky", {"x": n}) for n in (1, 2, 3)]
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["success", "success", "error"]


async def test_raise_on_tool_error_propagates_after_the_completed_calls_ran_once(
    harness: Harness,
) -> None:
    box = Toolbox(fail_on={3})
    with pytest.raises(ToolExecutionError, match="flaky broke on call 3") as caught:
        await harness.run([FLAKY_PLAN], box.sync_tools, on_tool_error="raise")
    assert isinstance(caught.value.original, ValueError)
    assert box.names() == ["flaky", "flaky", "flaky"]
    messages = caught.value.messages  # type: ignore[attr-defined]
    assert planned_calls(messages) == [("flaky", {"x": n}) for n in (1, 2, 3)]
    assert [m.text for m in messages if isinstance(m, ToolMessage)][:2] == ["10", "20"]


async def test_replan_asks_again_with_the_results_and_does_not_repeat_completed_calls(
    harness: Harness,
) -> None:
    """Both replies are hand-written; the second finishes the work."""
    box = Toolbox(fail_on={3})
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    messages = [SystemMessage("Count things."), HumanMessage("Go.")]
    out = await harness.run([FLAKY_PLAN, second], box.sync_tools, messages, on_tool_error="replan")
    assert box.names() == ["flaky", "flaky", "flaky", "increment"]
    asked = harness.model.calls[1]
    assert asked[0].text.startswith("Count things.")
    assert [type(m) for m in asked].count(SystemMessage) == 1
    shown = "\n".join(m.text for m in asked)
    assert 'flaky({"x": 1}) -> 10' in shown and 'flaky({"x": 2}) -> 20' in shown
    assert not any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in asked)
    assert "flaky broke on call 3" in asked[-1].text and "line 6" in asked[-1].text
    record = meta(out["messages"][-1])
    assert (record["status"], record["model_calls"], record["replans"]) == ("finished", 2, 1)
    assert planned_calls(added(out, 2)) == [
        ("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3}), ("increment", {"x": 30}),
    ]  # fmt: skip


async def test_replan_stops_with_a_message_when_max_replans_is_spent(harness: Harness) -> None:
    """Every hand-written plan calls `flaky`, which fails every time."""
    box = Toolbox(fail_on={1, 2, 3})
    plan = asm("PUSH 7\nCALL flaky\nPOP R1")
    out = await harness.run(
        [plan, plan, plan], box.sync_tools, on_tool_error="replan", max_replans=2
    )
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and meta(final)["replans"] == 2
    assert "flaky broke on call 3" in final.text
    assert len(harness.model.calls) == 3
    assert box.names() == ["flaky"] * 3


@pytest.mark.parametrize(
    ("plan", "option", "limit"),
    [
        (LOOP_PLAN, "max_instructions_to_exec", 20),
        (LOOP_PLAN, "max_tool_calls", 3),
        (asm("again:\nPUSH 1\nPUSH 2\nCALL increment\nJMP again"), "max_stack_depth", 5),
    ],
)
async def test_budgets_end_the_turn_naming_the_budget_and_its_number(
    harness: Harness, box: Toolbox, plan: str, option: str, limit: int
) -> None:
    out = await harness.run([plan], box.sync_tools, **{option: limit})
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert f"{option} budget exceeded: limit {limit}" in final.text
    assert meta(final)["error"]["limit"] == limit
    if option == "max_tool_calls":
        assert box.names() == ["increment"] * limit


async def test_a_long_loop_within_the_budget_is_not_cut_by_the_recursion_limit(
    harness: Harness, box: Toolbox
) -> None:
    plan = asm("MOV R1, 0\nloop:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 150\nJL loop")
    out = await harness.run([plan], box.sync_tools, max_tool_calls=200)
    assert len(box.log) == 150
    assert meta(out["messages"][-1])["registers"] == {"R1": 150}


# -- 7. tool middleware and checkpoints -----------------------------------------------------------


async def test_tool_retry_middleware_retries_a_flaky_tool_inside_a_plan(harness: Harness) -> None:
    box = Toolbox(fail_on={1, 2})
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False, on_failure="error")
    out = await harness.run(
        [asm("PUSH 4\nCALL flaky\nPOP R1")], box.sync_tools, tool_middleware=[retry]
    )
    assert box.log == [("flaky", {"x": 4})] * 3
    assert meta(out["messages"][-1])["registers"] == {"R1": 40}
    assert [m.text for m in out["messages"] if isinstance(m, ToolMessage)] == ["40"]


async def test_two_turns_on_one_thread_keep_history_and_use_fresh_ids(
    harness: Harness, box: Toolbox
) -> None:
    plan = asm("PUSH 1\nCALL increment\nPOP R1")
    harness.build([plan, plan], box.sync_tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await harness.invoke({"messages": [HumanMessage("once")]}, config=config)
    out = await harness.invoke({"messages": [HumanMessage("again")]}, config=config)
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert "once" in [m.text for m in harness.model.calls[1]]
    assert box.names() == ["increment", "increment"]


async def test_replan_shows_the_results_so_far_even_without_infer_tools_messages(
    harness: Harness,
) -> None:
    """Both replies are hand-written. The kept messages stay minimal, but the model that is
    asked to replan must still see what the completed calls returned."""
    box = Toolbox(fail_on={3})
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    out = await harness.run(
        [FLAKY_PLAN, second], box.sync_tools, on_tool_error="replan", infer_tools_messages=False
    )
    shown = "\n".join(m.text for m in harness.model.calls[1])
    assert 'flaky({"x": 1}) -> 10' in shown and 'flaky({"x": 2}) -> 20' in shown
    assert [type(m) for m in added(out)] == [AIMessage, AIMessage, AIMessage]
    assert box.names() == ["flaky", "flaky", "flaky", "increment"]


def test_fresh_tools_reusing_freed_memory_run_their_own_functions() -> None:
    """Tools made, used and dropped over and over (as per-request tool lists are) must never
    run a dropped tool's function, even when Python reuses an address."""
    plan = asm("PUSH 1\nCALL increment\nPOP R1\nPUSH 2\nCALL flaky\nPOP R2")
    for round_number in range(40):
        box = Toolbox()
        node = ToolsPlannerNode(ScriptedChatModel(replies=[plan]), box.sync_tools)
        update = node({"messages": [HumanMessage(f"round {round_number}")]}, {})
        assert box.log == [("increment", {"x": 1}), ("flaky", {"x": 2})]
        assert meta(update["messages"][-1])["registers"] == {"R1": 2, "R2": 20}
        del box, node, update
        gc.collect()
