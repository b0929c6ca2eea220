"""The planner's contract, run against every way of running it: ``ToolsPlannerMiddleware`` in
``create_agent`` on its agent path and on its graph path, and ``ToolsPlannerNode`` /
``AToolsPlannerNode`` in a ``StateGraph``, each with ``invoke`` and ``ainvoke``.

What only one of them does is tested in test_middleware.py / test_nodes.py. Every model reply
here is written by hand (``ScriptedChatModel``); none is a recording of a real model. Tools
record their calls (see ``conftest.Toolbox``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
    shape,
)
from fakes import ScriptedChatModel
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from llassembly.errors import (
    RepairsExhausted,
    ToolExecutionError,
    UsageError,
)
from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.nodes import ToolsPlannerNode
from llassembly.language.parser import parse
from llassembly.machine.emulator import Emulator

# LangChain's own ToolNode emits this warning too when a dataclass context reaches a tool.
UPSTREAM_CONTEXT_WARNING = "ignore:Pydantic serializer warnings:UserWarning"

HARNESSES = {
    "agent-invoke": ("agent", False, {"execution": "agent"}),
    "agent-ainvoke": ("agent", True, {"execution": "agent"}),
    "graph-invoke": ("agent", False, {"execution": "graph"}),
    "graph-ainvoke": ("agent", True, {"execution": "graph"}),
    "ToolsPlannerNode-invoke": ("node", False, {}),
    "AToolsPlannerNode-ainvoke": ("node", True, {}),
}


def make(name: str) -> Harness:
    kind, asynchronous, defaults = HARNESSES[name]
    return Harness(kind, asynchronous=asynchronous, defaults=dict(defaults))


@pytest.fixture(params=list(HARNESSES))
def harness(request: pytest.FixtureRequest) -> Harness:
    return make(request.param)


@pytest.fixture(params=[n for n, (_, asynchronous, _) in HARNESSES.items() if asynchronous])
def async_harness(request: pytest.FixtureRequest) -> Harness:
    return make(request.param)


def planner(kind: str, box: Toolbox, **options: Any) -> Any:
    """The middleware or the node, built with ``options`` and nothing else."""
    if kind == "agent":
        return ToolsPlannerMiddleware(**options)
    return ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools, **options)


# -- 1. options -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["agent", "node"])
@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("granularity", "fast", "granularity"),
        ("on_tool_error", "ignore", "on_tool_error"),
        ("max_repairs", -1, "max_repairs"),
        ("max_instructions_to_exec", 0, "max_instructions_to_exec"),
        ("max_tool_calls", 0, "max_tool_calls"),
        ("prompt_path", "/no/such/template.md", "prompt_path"),
    ],
)
def test_invalid_options_are_refused(
    kind: str, box: Toolbox, option: str, value: Any, match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        planner(kind, box, **{option: value})


# -- 2. the prompt --------------------------------------------------------------------------------


async def test_model_gets_the_planner_prompt_with_the_callers_system_messages_as_context(
    harness: Harness, box: Toolbox
) -> None:
    """The hand-written reply is a valid plan; we check what the model was sent."""
    messages = [SystemMessage("You control the weather station."), HumanMessage("Warm?")]
    await harness.run([WEATHER_PLAN], box.sync_tools, messages)
    sent = harness.model.calls[0]
    assert [type(m) for m in sent] == [SystemMessage, HumanMessage]
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    prompt = sent[0].text
    assert prompt.startswith("You control the weather station.")
    assert "# How you act: write one program" in prompt
    for tool in box.sync_tools:
        assert f"## {tool.name}\n{tool.name}(" in prompt
    assert "get_temperature(city: str) -> int" in prompt
    assert [m.text for m in sent[1:]] == ["Warm?"]
    assert all(not bound for bound in harness.model.bound_tools)
    if harness.kind == "node":
        assert harness.model.bound_tools == []


@pytest.mark.parametrize("as_text", [True, False], ids=["str", "Path"])
async def test_prompt_path_replaces_the_built_in_template(
    harness: Harness, box: Toolbox, tmp_path: Path, as_text: bool
) -> None:
    template = tmp_path / "prompt.md"
    template.write_text("CUSTOM PLANNER.\nContext: {context}\nTools:\n{extern_functions}\n")
    messages = [SystemMessage("Be brief."), HumanMessage("Warm?")]
    path = str(template) if as_text else template
    await harness.run([WEATHER_PLAN], box.sync_tools, messages, prompt_path=path)
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
    assert [type(m) for m in new] == [AIMessage, AIMessage, ToolMessage, AIMessage, ToolMessage,
                                      AIMessage]  # fmt: skip
    assert planned_calls(new) == [
        ("get_temperature", {"city": "Paris"}),
        ("notify", {"message": "warm"}),
    ]
    for request, answer, line, source in [
        (new[1], new[2], 4, "CALL get_temperature"),
        (new[3], new[4], 9, "CALL notify"),
    ]:
        assert isinstance(request, AIMessage) and isinstance(answer, ToolMessage)
        (call,) = request.tool_calls
        assert answer.tool_call_id == call["id"] and answer.name == call["name"]
        record = meta(request)
        assert (record["line"], record["source"]) == (line, source)
        assert record["source"] == f"CALL {call['name']}"
        assert isinstance(record["index"], int)
        assert meta(answer) == record
    assert [m.text for m in new if isinstance(m, ToolMessage)] == ["21", "null"]
    assert box.log == [("get_temperature", {"city": "Paris"}), ("notify", {"message": "warm"})]
    final = new[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    record = meta(final)
    assert (record["status"], record["model_calls"], record["repairs"]) == ("finished", 1, 0)
    assert (record["tool_calls"], record["instructions"]) == (2, 8)
    assert len(harness.model.calls) == 1


@pytest.mark.parametrize("infer", [True, False], ids=["messages", "no messages"])
@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
async def test_a_return_direct_tools_result_ends_the_run(
    harness: Harness, fails: bool, infer: bool
) -> None:
    """As ``create_agent`` ends its run after a ``return_direct`` tool: the rest of the plan
    does not run, the tool's result is the run's last message (the same messages on every
    path), and the next turn gets a new plan."""
    ran: list[int] = []

    def lookup(x: int) -> str:
        """Look x up and answer the user with it."""
        ran.append(x)
        if fails:
            raise ValueError(f"no {x}")
        return f"found {x}"

    plan = asm('PUSH 1\nCALL lookup\nPOP R1\nPUSH 2\nCALL lookup\nPOP R2\nSAY "{R1} {R2}"')
    replies = [plan, asm("PUSH 5\nCALL lookup\nPOP R1")]
    tools = [StructuredTool.from_function(lookup, return_direct=True)]
    limit = ModelCallLimitMiddleware(run_limit=9)  # (an after_model hook between the planner
    # and the agent's routing)
    harness.build(
        replies, tools, checkpointer=InMemorySaver(), infer_tools_messages=infer, middleware=[limit]
    )
    config = {"configurable": {"thread_id": "t"}}
    out = await harness.invoke({"messages": [HumanMessage("look 1 up")]}, config=config)
    [first, call, result] = added(out)
    assert first.text == plan and ran == [1]
    assert shape([call]) == [("ai", "", [("lookup", {"x": 1})])]
    assert isinstance(result, ToolMessage) and result.status == ("error" if fails else "success")
    assert ("no 1" if fails else "found 1") in result.text
    out = await harness.invoke({"messages": [HumanMessage("look 5 up")]}, config=config)
    assert ran == [1, 5] and len(harness.model.calls) == 2
    assert ("no 5" if fails else "found 5") in out["messages"][-1].text


async def test_a_batch_of_a_return_direct_call_and_another_runs_on(
    harness: Harness, box: Toolbox
) -> None:
    """``create_agent`` ends its run after a batch only when each of its calls is
    ``return_direct``: a plan's batch that mixes them runs on, on every path."""

    def lookup(x: int) -> str:
        """Look x up."""
        return f"found {x}"

    tools = [StructuredTool.from_function(lookup, return_direct=True), *box.sync_tools]
    plan = asm('PUSH 1\nCALL lookup\nPUSH 2\nCALL increment\nPOP R2\nPOP R1\nSAY "{R1} {R2}"')
    out = await harness.run([plan], tools, parallel_tools=True)
    assert [type(m) for m in added(out)] == [AIMessage, AIMessage, ToolMessage, ToolMessage,
                                             AIMessage]  # fmt: skip
    assert out["messages"][-1].text == "found 1 3" and len(harness.model.calls) == 1


async def test_turn_ends_with_a_plain_message_after_one_model_call(
    harness: Harness, box: Toolbox
) -> None:
    out = await harness.run([WEATHER_PLAN], box.sync_tools)
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert len(harness.model.calls) == 1
    record = meta(final)
    assert record["status"] == "finished"
    assert (record["model_calls"], record["repairs"], record["tool_calls"]) == (1, 0, 2)
    assert record["instructions"] == 8
    assert record["registers"] == {"R1": 21}


async def test_tool_call_ids_are_unique_and_short(harness: Harness, box: Toolbox) -> None:
    plan = asm("MOV R1, 0\nloop:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 5\nJL loop")
    out = await harness.run([plan], box.sync_tools)
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 5 and len(set(ids)) == 5
    assert all(isinstance(i, str) and 0 < len(i) < 24 for i in ids)


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


async def test_without_infer_tools_messages_only_the_plan_and_final_message_are_kept(
    harness: Harness, box: Toolbox
) -> None:
    out = await harness.run([WEATHER_PLAN], box.sync_tools, infer_tools_messages=False)
    new = added(out)
    assert [type(m) for m in new] == [AIMessage, AIMessage]
    assert new[0].text == WEATHER_PLAN
    assert meta(new[1])["tool_calls"] == 2
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
    assert "Do the task." in seen["messages"]
    if harness.kind == "node":  # the node's tools see the graph state the node was given
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
async def test_async_tools_run_under_ainvoke_with_their_runtime(
    async_harness: Harness, box: Toolbox
) -> None:
    harness = async_harness
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
    repair = harness.model.calls[1]
    assert repair[-2].text == BAD_PLAN
    request = repair[-1]
    assert isinstance(request, HumanMessage)
    for needle in ("teleport", "FROB", "nowhere", "line 4", "line 5", "line 6"):
        assert needle in request.text
    assert isinstance(repair[0], SystemMessage)
    # The valid plan is kept in the messages; the rejected one is not.
    assert [m.text for m in added(out) if m.text == BAD_PLAN] == []


async def test_a_loop_that_can_never_end_is_refused_before_any_tool_runs(
    harness: Harness, box: Toolbox
) -> None:
    """Both hand-written replies loop around a call with no way out: each is refused at the
    loop's line (the plan sits after two lines of the reply), and no tool ever runs."""
    forever = asm("top:\nPUSH 1\nCALL increment\nPOP R1\nJMP top")
    out = await harness.run([forever, forever], box.sync_tools, max_repairs=1)
    assert box.log == []
    request = harness.model.calls[1][-1].text
    assert "line 4, column 1: this loop (lines 4-7) can never end: there is no way out" in request
    assert "CALL increment again and again" in request
    record = meta(out["messages"][-1])
    assert (record["status"], record["repairs"]) == ("refused", 1)
    assert record["error"]["type"] == "RepairsExhausted"


async def test_a_syntax_error_is_repaired_with_its_line_and_column(
    harness: Harness, box: Toolbox
) -> None:
    """Both replies are hand-written: the first has a dangling comma on line 5."""
    broken = asm('PUSH "Paris"\nCALL get_temperature\nMOV R1,\nHLT')
    out = await harness.run([broken, WEATHER_PLAN], box.sync_tools)
    request = harness.model.calls[1][-1].text
    assert "syntax error" in request and "line 5, column" in request
    assert box.names() == ["get_temperature", "notify"]
    assert meta(out["messages"][-1])["repairs"] == 1


async def test_exhausted_repairs_raise_under_raise_and_no_tool_runs(
    harness: Harness, box: Toolbox
) -> None:
    """Both hand-written replies call a tool that does not exist."""
    with pytest.raises(RepairsExhausted, match="2 attempts") as caught:
        await harness.run(
            [BAD_PLAN, BAD_PLAN], box.sync_tools, max_repairs=1, on_tool_error="raise"
        )
    assert caught.value.attempts == 2
    assert any("teleport" in d.message for d in caught.value.diagnostics)
    assert box.log == []
    assert len(harness.model.calls) == 2


async def test_exhausted_repairs_end_the_turn_with_a_message_under_stop(
    harness: Harness, box: Toolbox
) -> None:
    """Both hand-written replies call a tool that does not exist."""
    out = await harness.run([BAD_PLAN, BAD_PLAN], box.sync_tools, max_repairs=1)
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.text == "I could not make a plan that passes the checks, so nothing was done."
    assert "the model wrote no valid plan in 2 attempts" in meta(final)["error"]["message"]
    record = meta(final)
    assert (record["status"], record["model_calls"], record["repairs"]) == ("refused", 2, 1)
    assert record["error"]["type"] == "RepairsExhausted"
    assert box.log == []


async def test_a_plain_text_reply_ends_the_turn_without_tool_calls(
    harness: Harness, box: Toolbox
) -> None:
    out = await harness.run(["It is sunny; no tools needed."], box.sync_tools)
    new = added(out)
    assert box.log == []
    assert new[0].text == "It is sunny; no tools needed."
    assert all(not m.tool_calls for m in new if isinstance(m, AIMessage))
    assert not any(isinstance(m, ToolMessage) for m in new)
    assert len(harness.model.calls) == 1


# -- 6. failures and budgets ----------------------------------------------------------------------


async def test_stop_on_tool_error_reports_the_tool_line_and_error_and_keeps_the_calls(
    harness: Harness,
) -> None:
    box = Toolbox(fail_on={3})
    out = await harness.run([FLAKY_PLAN], box.sync_tools)
    final = out["messages"][-1]
    assert "the tool flaky failed" in final.text and meta(final)["error"]["line"] == 6
    assert "flaky broke on call 3" in meta(final)["error"]["message"]  # for the app, not the user
    assert meta(final)["status"] == "stopped"
    assert box.log == [("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3})]
    assert planned_calls(out["messages"]) == [("flaky", {"x": n}) for n in (1, 2, 3)]
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["success", "success", "error"]
    assert [m.text for m in results[:2]] == ["10", "20"]
    assert "flaky broke on call 3" in results[2].text


async def test_raise_on_tool_error_propagates_after_the_completed_calls_ran_once(
    harness: Harness,
) -> None:
    """The middleware saves the completed calls to the agent state before raising; the node
    keeps them in its checkpoint and also hands them over on the error as ``messages``."""
    box = Toolbox(fail_on={3})
    config = {"configurable": {"thread_id": "raise"}}
    with pytest.raises(ToolExecutionError, match="flaky broke on call 3") as caught:
        await harness.run(
            [FLAKY_PLAN],
            box.sync_tools,
            config=config,
            checkpointer=InMemorySaver(),
            on_tool_error="raise",
        )
    assert caught.value.tool == "flaky" and caught.value.line == 6
    assert box.names() == ["flaky", "flaky", "flaky"]
    if harness.kind == "node":  # the live exception (the middleware rebuilds it from the state)
        assert isinstance(caught.value.original, ValueError)
        messages = caught.value.messages  # type: ignore[attr-defined]
        assert planned_calls(messages) == [("flaky", {"x": n}) for n in (1, 2, 3)]
        assert [m.text for m in messages if isinstance(m, ToolMessage)][:2] == ["10", "20"]
    else:
        saved = harness.runnable.get_state(config).values["messages"]
        assert planned_calls(saved)[:2] == [("flaky", {"x": 1}), ("flaky", {"x": 2})]
        assert [m.text for m in saved if isinstance(m, ToolMessage)][:2] == ["10", "20"]


async def test_replan_asks_again_with_the_results_and_does_not_repeat_completed_calls(
    harness: Harness,
) -> None:
    """Both replies are hand-written; the second finishes the work from x=3."""
    box = Toolbox(fail_on={3})
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    messages = [SystemMessage("Count things."), HumanMessage("Go.")]
    out = await harness.run([FLAKY_PLAN, second], box.sync_tools, messages, on_tool_error="replan")
    assert box.log == [
        ("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3}), ("increment", {"x": 30}),
    ]  # fmt: skip
    assert len(harness.model.calls) == 2
    asked = harness.model.calls[1]
    assert asked[0].text.startswith("Count things.")
    assert [type(m) for m in asked].count(SystemMessage) == 1
    shown = "\n".join(m.text for m in asked)
    # Which calls ran and how they ended, in the assistant's role; never what a tool wrote.
    assert "1. line 6: flaky: succeeded\n2. line 6: flaky: succeeded" in shown
    assert "3. line 6: flaky: failed (ToolExecutionError)" in shown
    conversation = "\n".join(m.text for m in asked[1:])  # (after the system prompt)
    assert "10" not in conversation and "20" not in conversation and "broke" not in conversation
    assert not any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in asked)
    assert "line 6" in asked[-1].text and "the tool flaky failed (ValueError)" in asked[-1].text
    assert "2 tool calls of it completed" in asked[-1].text
    record = meta(out["messages"][-1])
    assert (record["status"], record["model_calls"], record["replans"]) == ("finished", 2, 1)
    assert planned_calls(added(out, 2)) == [
        ("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3}), ("increment", {"x": 30}),
    ]  # fmt: skip
    assert planned_calls(out["messages"]).count(("flaky", {"x": 1})) == 1


async def test_replan_shows_the_results_so_far_even_without_infer_tools_messages(
    harness: Harness,
) -> None:
    """Both replies are hand-written: the model asked to replan sees the completed results,
    while the kept messages stay minimal (the plans and the final message)."""
    box = Toolbox(fail_on={3})
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    out = await harness.run(
        [FLAKY_PLAN, second], box.sync_tools, on_tool_error="replan", infer_tools_messages=False
    )
    shown = "\n".join(m.text for m in harness.model.calls[1])
    assert "1. line 6: flaky: succeeded\n2. line 6: flaky: succeeded" in shown
    assert [type(m) for m in added(out)] == [AIMessage, AIMessage, AIMessage]
    assert box.names() == ["flaky", "flaky", "flaky", "increment"]


@pytest.mark.parametrize("max_replans", [1, 2])
async def test_replan_stops_with_a_message_when_max_replans_is_spent(
    harness: Harness, max_replans: int
) -> None:
    """Every hand-written plan calls `flaky`, which fails every time."""
    plans = max_replans + 1
    box = Toolbox(fail_on=set(range(1, plans + 1)))
    plan = asm("PUSH 7\nCALL flaky\nPOP R1")
    out = await harness.run(
        [plan] * plans, box.sync_tools, on_tool_error="replan", max_replans=max_replans
    )
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and meta(final)["replans"] == max_replans
    assert f"flaky broke on call {plans}" in meta(final)["error"]["message"]
    assert len(harness.model.calls) == plans
    assert box.names() == ["flaky"] * plans


@pytest.mark.parametrize(
    ("plan", "option", "limit"),
    [
        (LOOP_PLAN, "max_instructions_to_exec", 20),
        (LOOP_PLAN, "max_tool_calls", 3),
        (
            asm("again:\nPUSH 1\nPUSH 2\nCALL increment\nINC R1\nCMP R1, 100\nJL again"),
            "max_stack_depth",
            5,
        ),
    ],
)
async def test_budgets_end_the_turn_naming_the_budget_and_its_number(
    harness: Harness, box: Toolbox, plan: str, option: str, limit: int
) -> None:
    out = await harness.run([plan], box.sync_tools, **{option: limit})
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert f"{option} budget exceeded: limit {limit}" in final.text
    assert meta(final)["error"]["budget"] == option
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


# -- 7. tool middleware ---------------------------------------------------------------------------


async def test_tool_retry_middleware_retries_a_flaky_tool_inside_a_plan(
    harness: Harness,
) -> None:
    box = Toolbox(fail_on={1, 2})
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False, on_failure="error")
    out = await harness.run(
        [asm("PUSH 4\nCALL flaky\nPOP R1")], box.sync_tools, tool_middleware=[retry]
    )
    assert box.log == [("flaky", {"x": 4})] * 3
    record = meta(out["messages"][-1])
    assert record["status"] == "finished" and record["registers"] == {"R1": 40}
    assert [m.text for m in out["messages"] if isinstance(m, ToolMessage)] == ["40"]


@pytest.mark.parametrize(
    ("middleware", "words"),
    [
        (lambda: ModelCallLimitMiddleware(run_limit=5), "has no wrap_tool_call hook"),
        (lambda: ToolCallLimitMiddleware(run_limit=1), "has no wrap_tool_call hook"),
        (
            lambda: HumanInTheLoopMiddleware(interrupt_on={"flaky": True}),
            "in interrupt_mode='batched' asks in after_model",
        ),
    ],
    ids=["model call limit", "tool call limit", "batched approval"],
)
@pytest.mark.parametrize("kind", ["agent", "node"])
def test_a_tool_middleware_whose_work_is_in_hooks_it_never_runs_is_refused(
    kind: str, box: Toolbox, middleware: Callable[[], Any], words: str
) -> None:
    """``tool_middleware`` runs a middleware's ``wrap_tool_call`` alone: one that does its work
    in other hooks (a limit counting in ``after_model``, an approval asked there) would do
    nothing, silently; it is refused when the planner is built, saying where it belongs."""
    with pytest.raises(UsageError, match=rf"tool_middleware: \w+ {re.escape(words)}"):
        planner(kind, box, tool_middleware=[middleware()])


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ([ToolRetryMiddleware], "takes middleware, not the class ToolRetryMiddleware"),
        (ToolRetryMiddleware(), "takes a list of middleware, got"),
    ],
    ids=["a class", "not a list"],
)
def test_tool_middleware_given_wrongly_says_how(given: Any, words: str) -> None:
    with pytest.raises(UsageError, match=rf"^tool_middleware {re.escape(words)}"):
        ToolsPlannerMiddleware(tool_middleware=given)


def test_approval_in_per_call_mode_is_a_tool_middleware() -> None:
    approval = HumanInTheLoopMiddleware(interrupt_on={"flaky": True}, interrupt_mode="per_call")
    assert ToolsPlannerMiddleware(tool_middleware=[approval]).options.tool_middleware == (approval,)


async def test_tool_retry_giving_up_stops_the_plan_with_the_error(harness: Harness) -> None:
    box = Toolbox(fail_on={1, 2, 3})
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    out = await harness.run(
        [asm("PUSH 4\nCALL flaky\nPOP R1")], box.sync_tools, tool_middleware=[retry]
    )
    assert box.names() == ["flaky", "flaky"]
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and "flaky" in final.text


class Replacing(AgentMiddleware[Any, Any]):
    """A tool middleware that runs the tool and returns ``value`` instead of its result."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        handler(request)
        return self.value

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        await handler(request)
        return self.value


class Refusing(AgentMiddleware[Any, Any]):
    """A tool middleware that raises before the tool runs."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        raise RuntimeError("the quota service is down")

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        raise RuntimeError("the quota service is down")


async def test_a_tool_middlewares_exception_is_the_calls_failure(harness: Harness) -> None:
    """As a tool's exception is, on every path: the plan stops at the call's line, the tool
    did not run, and the failure says what the middleware raised."""
    box = Toolbox()
    out = await harness.run(
        [asm("PUSH 4\nCALL flaky\nPOP R1")], box.sync_tools, tool_middleware=[Refusing()]
    )
    error = meta(out["messages"][-1])["error"]
    assert (error["exception"], error["line"]) == ("RuntimeError", 4)
    assert "the quota service is down" in error["detail"]
    assert box.log == []


class Guarding(AgentMiddleware[Any, Any]):
    """A tool middleware that runs the tool, then refuses a result holding ``word`` by raising
    (an output guard: the value must reach nobody)."""

    def __init__(self, word: str) -> None:
        self.word = word

    def _checked(self, result: Any) -> Any:
        if self.word in str(result.content):
            raise PermissionError("the output guard refused the result")
        return result

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._checked(handler(request))

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._checked(await handler(request))


async def test_a_tool_middlewares_exception_after_the_tool_ran_is_the_calls_failure(
    harness: Harness,
) -> None:
    """An output guard is not bypassed: the tool ran, but what it returned reaches neither the
    plan nor the history; the plan stops on the guard's error at the call's line."""
    box = Toolbox()
    plan = asm('PUSH 4\nCALL flaky\nPOP R1\nSAY "got {R1}"')
    out = await harness.run([plan], box.sync_tools, tool_middleware=[Guarding("40")])
    error = meta(out["messages"][-1])["error"]
    assert (error["exception"], error["line"]) == ("PermissionError", 4)
    assert box.log == [("flaky", {"x": 4})]
    assert not any("40" in m.text for m in out["messages"] if not isinstance(m, HumanMessage))


async def test_a_retry_that_gives_up_does_not_hand_the_plan_an_earlier_refused_result(
    harness: Harness,
) -> None:
    """The first attempt's result is refused by a guard, the second attempt raises, the retry
    gives up: the plan gets the failure, not the refused result of the first attempt."""
    box = Toolbox(fail_on={2})
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False, on_failure="error")
    plan = asm('PUSH 4\nCALL flaky\nPOP R1\nSAY "got {R1}"')
    out = await harness.run([plan], box.sync_tools, tool_middleware=[retry, Guarding("40")])
    assert box.names() == ["flaky", "flaky"]
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and meta(final)["error"]["line"] == 4
    assert not any("40" in m.text for m in out["messages"] if not isinstance(m, HumanMessage))


async def test_a_tool_middleware_returning_neither_message_nor_command_is_refused(
    harness: Harness,
) -> None:
    """The developer's mistake is the call's failure on every path, as a middleware that raises
    is: the plan stops on it at the call's line (``on_tool_error`` decides), nothing is lost."""
    box = Toolbox()
    out = await harness.run(
        [asm("PUSH 4\nCALL flaky\nPOP R1")], box.sync_tools, tool_middleware=[Replacing("40")]
    )
    error = meta(out["messages"][-1])["error"]
    assert (error["type"], error["exception"], error["line"]) == (
        "ToolExecutionError",
        "UsageError",
        4,
    )
    words = "the call of 'flaky' gave a str, where a plan takes a ToolMessage, a Command or"
    assert words in error["detail"]
    assert box.log == [("flaky", {"x": 4})]


async def test_a_command_without_the_calls_message_gives_the_plan_empty_text(
    harness: Harness,
) -> None:
    """A ``Command`` that adds no message of the call answers it with no text on every path
    (the state update is the tool's effect): the agent's history gets the call's message, so
    the plan goes on and the call counts."""
    box = Toolbox()
    command = Command(update={"note": 1})
    out = await harness.run(
        [asm('PUSH 4\nCALL flaky\nPOP R1\nSAY "got [{R1}]"')],
        box.sync_tools,
        tool_middleware=[Replacing(command)],
    )
    record = meta(out["messages"][-1])
    assert (record["status"], record["registers"]) == ("finished", {"R1": ""})
    assert (record["tool_calls"], out["messages"][-1].content) == (1, "got []")
    assert box.log == [("flaky", {"x": 4})]


def test_a_command_that_clears_the_history_gets_no_answer_added() -> None:
    """LangGraph asks no message of the call from a ``Command`` that removes every message, so
    the tool path adds none there (it would answer a call the history no longer holds); any
    other ``Command`` without the call's message gets one of no text."""
    from langchain_core.messages import RemoveMessage
    from langchain_core.tools import tool
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from llassembly.integration.calls import CallContext, call_id, run_call
    from llassembly.integration.options import PlannerOptions
    from llassembly.integration.planner import Planner
    from llassembly.machine.externs import externs_from
    from llassembly.machine.state import ToolCall

    @tool
    def note(x: int) -> int:
        """Note x."""
        return x

    ctx = CallContext(Planner(PlannerOptions()), externs_from([note]), "p-")
    call = ToolCall(tool="note", args={"x": 4}, index=1, number=1, line=2, source="CALL note")
    cid = call_id("p-", 1)
    request = ToolCallRequest(
        tool_call={"name": "note", "args": {"x": 4}, "id": cid, "type": "tool_call"},
        tool=note,
        state={},
        runtime=None,
    )
    clear = RemoveMessage(id=REMOVE_ALL_MESSAGES)
    out = run_call(ctx, call, request, lambda _: Command(update={"messages": [clear]}))
    assert [type(m).__name__ for m in out.update["messages"]] == ["RemoveMessage"]
    out = run_call(ctx, call, request, lambda _: Command(update={"note": 1}))
    (answer,) = out.update["messages"]
    assert (answer.tool_call_id, answer.content, out.update["note"]) == (cid, "", 1)
    # an answer written as a dict (LangGraph reads those as messages too) is the call's answer
    written = {"role": "tool", "content": "9", "tool_call_id": cid}
    out = run_call(ctx, call, request, lambda _: Command(update={"messages": [written]}))
    (answer,) = out.update["messages"]
    assert (type(answer).__name__, answer.tool_call_id, answer.content) == ("ToolMessage", cid, "9")
    assert answer.response_metadata["llassembly"]["index"] == 1  # tagged as the call's


# -- 8. what a tool itself returns, as the agent's tool node takes it ----------------------------


def _returning(make: Any) -> StructuredTool:
    """A tool ``mark(x)`` whose return value ``make(x, call_id)`` builds."""

    def mark(x: int, runtime: ToolRuntime) -> Any:
        """Mark x."""
        return make(x, runtime.tool_call_id)

    return StructuredTool.from_function(mark)


@pytest.mark.parametrize(
    "form",
    ["list of a message", "list of a command", "list of a command and a message"],
)
async def test_a_tool_returning_a_list_of_commands_and_messages_answers_its_call(
    harness: Harness, form: str
) -> None:
    """LangGraph's tool node takes a list of ``Command``s and ``ToolMessage``s holding one
    answer of the call; a plan's call takes it too, on every path, and reads that answer."""

    def make(x: int, cid: str) -> Any:
        answer = ToolMessage(f"marked {x}", tool_call_id=cid)
        if form == "list of a message":
            return [answer]
        if form == "list of a command":
            return [Command(update={"messages": [answer]})]
        return [Command(update={"messages": [ToolMessage("aside", tool_call_id="other")]}), answer]

    out = await harness.run(
        [asm('PUSH 4\nCALL mark\nPOP R1\nSAY "{R1}"')], [_returning(make)], max_tool_calls=5
    )
    record = meta(out["messages"][-1])
    assert (record["status"], record["registers"]) == ("finished", {"R1": "marked 4"})
    (answer,) = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.text != "aside"]
    named = "mark" if form == "list of a command" else None  # (the tool node names those only)
    assert (answer.text, answer.name) == ("marked 4", named)


@pytest.mark.parametrize("form", ["command", "list"])
async def test_a_tools_command_that_does_not_answer_its_call_is_the_calls_failure(
    harness: Harness, form: str
) -> None:
    """As the agent's tool node refuses it (every tool call needs its ``ToolMessage``), on
    every path: the plan stops on that error at the call's line."""
    command = Command(update={"messages": [ToolMessage("aside", tool_call_id="other")]})
    tool = _returning(lambda x, cid: command if form == "command" else [command])
    out = await harness.run([asm("PUSH 4\nCALL mark\nPOP R1")], [tool])
    error = meta(out["messages"][-1])["error"]
    assert (error["exception"], error["line"]) == ("ValueError", 4)
    assert "matching ToolMessage" in error["detail"] or "terminating ToolMessage" in error["detail"]


async def test_a_tools_command_answer_is_named_after_the_tool(harness: Harness) -> None:
    """The agent's tool node names the answer a tool's ``Command`` carries; so does a plan."""
    answer = lambda x, cid: Command(update={"messages": [ToolMessage("ok", tool_call_id=cid)]})  # noqa: E731
    out = await harness.run([asm("PUSH 4\nCALL mark\nPOP R1")], [_returning(answer)])
    (message,) = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert (message.text, message.name) == ("ok", "mark")


async def test_a_tools_runtime_carries_the_runs_execution_info(harness: Harness) -> None:
    """``ToolRuntime.execution_info`` (the thread id among it), as the agent's tool node sets
    it, on every path."""

    def thread(runtime: ToolRuntime) -> str:
        """The thread's id."""
        info = runtime.execution_info
        return str(info.thread_id if info is not None else "no execution info")

    out = await harness.run(
        [asm("CALL thread\nPOP R1")],
        [StructuredTool.from_function(thread)],
        config={"configurable": {"thread_id": "T1"}},
    )
    assert meta(out["messages"][-1])["registers"] == {"R1": "T1"}


async def test_a_tool_annotated_to_return_a_list_of_commands_gives_its_answers_text(
    harness: Harness,
) -> None:
    """``-> list[Command]`` is an answer as ``-> Command`` is: the plan reads its message's text,
    not a JSON array of commands."""

    def note(text: str, runtime: ToolRuntime) -> list[Command]:  # type: ignore[type-arg]
        """Note a text."""
        answer = ToolMessage(f"noted {text}", tool_call_id=runtime.tool_call_id)
        return [Command(update={"messages": [answer]})]

    plan = asm('PUSH "x"\nCALL note\nPOP R1\nSAY "got: {R1}"')
    out = await harness.run([plan], [StructuredTool.from_function(note)])
    assert out["messages"][-1].text == "got: noted x"


async def test_a_failure_the_tool_answers_itself_reads_alike_on_every_path(
    harness: Harness,
) -> None:
    """A tool that answers its own failure (``handle_tool_error``; every MCP tool's error
    result) gives a tested call's EAX the same text on every path as ``Emulator`` gives it."""

    def fail(x: int) -> int:
        """Fail."""
        raise ToolException(f"boom {x}")

    tool = StructuredTool.from_function(fail, handle_tool_error=True)
    plan = 'PUSH 4\nCALL fail\nJC bad\nHLT\nbad:\nSAY "EAX={EAX}"'
    said = Emulator(parse(plan), [tool]).run().answer
    assert said == "EAX=tool 'fail' raised ToolException: boom 4"
    out = await harness.run([asm(plan)], [tool])
    assert out["messages"][-1].text == said


async def test_a_tools_message_that_answers_another_call_is_the_calls_failure(
    harness: Harness,
) -> None:
    """A ``ToolMessage`` the tool returns for another call's id answers nothing: the call's
    failure, at its line, on every path (as a ``Command`` that does not answer its call); the
    turn neither starts over nor runs the tool again."""
    ran: list[int] = []

    def receipt(x: int, cid: str) -> ToolMessage:
        ran.append(x)
        return ToolMessage(f"paid {x}", tool_call_id="receipt-42")

    out = await harness.run([asm("PUSH 4\nCALL mark\nPOP R1")], [_returning(receipt)])
    error = meta(out["messages"][-1])["error"]
    assert (error["exception"], error["line"], ran) == ("ValueError", 4, [4])
    assert "receipt-42" in error["detail"]
