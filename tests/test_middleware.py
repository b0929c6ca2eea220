"""Tests for llassembly.middleware: ``ToolsPlannerMiddleware`` inside ``create_agent``.

Every model reply here is written by hand (``ScriptedChatModel``); none is a recording of a
real model. Tools record their calls (see ``conftest.Toolbox``).
"""

from __future__ import annotations

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
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ModelRetryMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from llassembly.errors import RepairsExhausted, ToolExecutionError, UsageError
from llassembly.middleware import ToolsPlannerMiddleware


@pytest.fixture(
    params=[(False, "agent"), (True, "agent"), (False, "graph"), (True, "graph")],
    ids=["invoke", "ainvoke", "graph-invoke", "graph-ainvoke"],
)
def harness(request: pytest.FixtureRequest) -> Harness:
    asynchronous, execution = request.param
    return Harness("agent", asynchronous=asynchronous, defaults={"execution": execution})


# -- 1. public API ------------------------------------------------------------------------------


def test_middleware_keeps_the_documented_defaults() -> None:
    params = inspect.signature(ToolsPlannerMiddleware).parameters
    assert params["infer_tools_messages"].default is True
    assert params["max_instructions_to_exec"].default == 1000
    assert params["prompt_path"].default is None
    options = ToolsPlannerMiddleware().options
    assert (options.infer_tools_messages, options.max_instructions_to_exec) == (True, 1000)
    assert options.prompt_path is None


def test_middleware_accepts_the_documented_options_positionally() -> None:
    planner = ToolsPlannerMiddleware(False, None, 50)
    assert planner.options.infer_tools_messages is False
    assert planner.options.max_instructions_to_exec == 50


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("granularity", "fast", "granularity"),
        ("on_tool_error", "ignore", "on_tool_error"),
        ("max_repairs", -1, "max_repairs"),
        ("max_instructions_to_exec", 0, "max_instructions_to_exec"),
        ("prompt_path", "/no/such/template.md", "prompt_path"),
    ],
)
def test_middleware_rejects_invalid_options(option: str, value: Any, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        ToolsPlannerMiddleware(**{option: value})


# -- 2. the prompt --------------------------------------------------------------------------------


async def test_model_gets_the_planner_prompt_with_caller_context_and_no_tools(
    harness: Harness, box: Toolbox
) -> None:
    """The hand-written reply is a valid plan; we check what the model was sent."""
    messages = [SystemMessage("You control the weather station."), HumanMessage("Warm?")]
    await harness.run([WEATHER_PLAN], box.sync_tools, messages)
    sent = harness.model.calls[0]
    assert isinstance(sent[0], SystemMessage)
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    prompt = sent[0].text
    assert prompt.startswith("You control the weather station.")
    assert "# How you act: write one program" in prompt
    for tool in box.sync_tools:
        assert f"## {tool.name}\n{tool.name}(" in prompt
    assert "get_temperature(city: str) -> int" in prompt
    assert [m.text for m in sent[1:]] == ["Warm?"]
    assert all(not bound for bound in harness.model.bound_tools)


async def test_prompt_path_replaces_the_built_in_template(
    harness: Harness, box: Toolbox, tmp_path: Path
) -> None:
    template = tmp_path / "prompt.md"
    template.write_text("CUSTOM PLANNER.\nContext: {context}\nTools:\n{extern_functions}\n")
    messages = [SystemMessage("Be brief."), HumanMessage("Warm?")]
    await harness.run([WEATHER_PLAN], box.sync_tools, messages, prompt_path=str(template))
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
        assert len(request.tool_calls) == 1
        assert answer.tool_call_id == request.tool_calls[0]["id"]
        record = meta(request)
        assert (record["line"], record["source"]) == (line, source)
        assert isinstance(record["index"], int)
        assert meta(answer) == record
    assert [m.text for m in new if isinstance(m, ToolMessage)] == ["21", "null"]
    assert box.log == [("get_temperature", {"city": "Paris"}), ("notify", {"message": "warm"})]


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


async def test_ids_differ_between_two_turns_of_one_thread(box: Toolbox) -> None:
    plan = asm("PUSH 1\nCALL increment\nPOP R1")
    model = ScriptedChatModel(replies=[plan, plan])
    agent = create_agent(
        model, tools=box.sync_tools, middleware=[ToolsPlannerMiddleware()],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("once")]}, config)
    out = agent.invoke({"messages": [HumanMessage("again")]}, config)
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2
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


# LangChain's own ToolNode emits this warning too when a dataclass context reaches a tool.
UPSTREAM_CONTEXT_WARNING = "ignore:Pydantic serializer warnings:UserWarning"


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
async def test_async_tools_run_under_ainvoke(box: Toolbox) -> None:
    harness = Harness("agent", asynchronous=True)
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
    assert box.log == []
    assert len(harness.model.calls) == 2


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
    assert (
        "flaky" in final.text and "line 6" in final.text and "flaky broke on call 3" in final.text
    )
    assert meta(final)["status"] == "stopped"
    assert box.log == [("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3})]
    assert planned_calls(out["messages"]) == [("flaky", {"x": n}) for n in (1, 2, 3)]
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["success", "success", "error"]
    assert [m.text for m in results[:2]] == ["10", "20"]
    assert "flaky broke on call 3" in results[2].text


async def test_raise_on_tool_error_propagates_after_the_completed_calls_are_saved(
    harness: Harness,
) -> None:
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
    saved = harness.runnable.get_state(config).values["messages"]
    assert planned_calls(saved)[:2] == [("flaky", {"x": 1}), ("flaky", {"x": 2})]
    assert [m.text for m in saved if isinstance(m, ToolMessage)][:2] == ["10", "20"]


async def test_replan_asks_again_with_the_results_and_does_not_repeat_completed_calls(
    harness: Harness,
) -> None:
    """Both replies are hand-written; the second finishes the work from x=3."""
    box = Toolbox(fail_on={3})
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    out = await harness.run([FLAKY_PLAN, second], box.sync_tools, on_tool_error="replan")
    assert box.log == [
        ("flaky", {"x": 1}), ("flaky", {"x": 2}), ("flaky", {"x": 3}), ("increment", {"x": 30}),
    ]  # fmt: skip
    assert len(harness.model.calls) == 2
    asked = harness.model.calls[1]
    shown = "\n".join(m.text for m in asked)
    assert 'flaky({"x": 1}) -> 10' in shown and 'flaky({"x": 2}) -> 20' in shown
    assert not any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in asked)
    assert "flaky broke on call 3" in asked[-1].text and "line 6" in asked[-1].text
    record = meta(out["messages"][-1])
    assert record["status"] == "finished"
    assert (record["model_calls"], record["replans"]) == (2, 1)
    assert planned_calls(out["messages"]).count(("flaky", {"x": 1})) == 1


async def test_replan_shows_the_results_so_far_even_without_infer_tools_messages(
    harness: Harness,
) -> None:
    """Both replies are hand-written: the model asked to replan sees the completed results,
    while the agent state keeps only the plans and the final message."""
    box = Toolbox(fail_on={3})
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    out = await harness.run(
        [FLAKY_PLAN, second], box.sync_tools, on_tool_error="replan", infer_tools_messages=False
    )
    shown = "\n".join(m.text for m in harness.model.calls[1])
    assert 'flaky({"x": 1}) -> 10' in shown and 'flaky({"x": 2}) -> 20' in shown
    assert [type(m) for m in added(out)] == [AIMessage, AIMessage, AIMessage]
    assert box.names() == ["flaky", "flaky", "flaky", "increment"]


async def test_replan_stops_with_a_message_when_max_replans_is_spent(harness: Harness) -> None:
    """Both hand-written plans call `flaky`, which fails every time."""
    box = Toolbox(fail_on={1, 2})
    plan = asm("PUSH 7\nCALL flaky\nPOP R1")
    out = await harness.run([plan, plan], box.sync_tools, on_tool_error="replan", max_replans=1)
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped"
    assert "flaky broke on call 2" in final.text
    assert len(harness.model.calls) == 2
    assert box.names() == ["flaky", "flaky"]


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
    assert meta(final)["error"]["budget"] == option
    if option == "max_tool_calls":
        assert box.names() == ["increment"] * limit


# -- 7. other middleware ---------------------------------------------------------------------------


class FailOnceModel(ScriptedChatModel):
    """Raises on its first call, then answers with the scripted replies (hand-written)."""

    failures: int = 0

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if self.failures == 0:
            self.failures += 1
            raise ConnectionError("model server hiccup")
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
async def test_model_retry_around_the_planner_runs_the_tools_once(
    box: Toolbox, asynchronous: bool
) -> None:
    model = FailOnceModel(replies=[WEATHER_PLAN])
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    agent = create_agent(model, tools=box.sync_tools, middleware=[retry, ToolsPlannerMiddleware()])
    payload = {"messages": [HumanMessage("Warm?")]}
    out = agent.invoke(payload) if not asynchronous else await agent.ainvoke(payload)
    assert model.failures == 1 and len(model.calls) == 1
    assert box.names() == ["get_temperature", "notify"]
    assert meta(out["messages"][-1])["status"] == "finished"


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


async def test_tool_retry_giving_up_stops_the_plan_with_the_error(harness: Harness) -> None:
    box = Toolbox(fail_on={1, 2, 3})
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    out = await harness.run(
        [asm("PUSH 4\nCALL flaky\nPOP R1")], box.sync_tools, tool_middleware=[retry]
    )
    assert box.names() == ["flaky", "flaky"]
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and "flaky" in final.text


async def test_on_the_graph_path_tool_call_limit_middleware_does_not_see_plan_calls(
    box: Toolbox,
) -> None:
    """Documented behaviour of ``execution="graph"``: plans do not go through the agent's tool
    node, so ``ToolCallLimitMiddleware`` never sees their calls; ``max_tool_calls`` is the
    budget (on the agent path it sees them: see test_agent_path.py)."""
    plan = asm("MOV R1, 0\nloop:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 4\nJL loop")
    limiter = ToolCallLimitMiddleware(run_limit=1, exit_behavior="error")
    model = ScriptedChatModel(replies=[plan])
    agent = create_agent(
        model,
        tools=box.sync_tools,
        middleware=[limiter, ToolsPlannerMiddleware(execution="graph")],
    )
    out = agent.invoke({"messages": [HumanMessage("count")]})
    assert box.names() == ["increment"] * 4
    assert meta(out["messages"][-1])["status"] == "finished"

    box.log.clear()
    model = ScriptedChatModel(replies=[plan])
    agent = create_agent(
        model, tools=box.sync_tools, middleware=[ToolsPlannerMiddleware(max_tool_calls=2)]
    )
    out = agent.invoke({"messages": [HumanMessage("count")]})
    assert box.names() == ["increment"] * 2
    assert "max_tool_calls budget exceeded: limit 2" in out["messages"][-1].text
