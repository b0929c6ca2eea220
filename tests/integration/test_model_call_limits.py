"""The planner's own model calls (plans, repairs, new plans after a failure, the final answer)
each pass the agent's model node, so ``ModelCallLimitMiddleware`` counts and limits every one
of them, on both execution paths; the visits that only step a plan are not counted.

Every model reply here is written by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import BAD_PLAN, FLAKY_PLAN, WEATHER_PLAN, Toolbox, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

EXECUTIONS = ["agent", "graph"]
THREAD = {"configurable": {"thread_id": "t"}}


def _agent(
    replies: list[str], limit: ModelCallLimitMiddleware, box: Toolbox, **options: Any
) -> tuple[Any, ScriptedChatModel]:
    from llassembly import ToolsPlannerMiddleware

    model = ScriptedChatModel(replies=replies)
    app = create_agent(
        model,
        tools=box.sync_tools,
        middleware=[ToolsPlannerMiddleware(**options), limit],
        checkpointer=InMemorySaver(),
    )
    return app, model


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_a_run_limit_stops_repairs_at_the_limit(execution: str, box: Toolbox) -> None:
    limit = ModelCallLimitMiddleware(run_limit=2)
    app, model = _agent([BAD_PLAN, BAD_PLAN, WEATHER_PLAN], limit, box, execution=execution)
    out = app.invoke({"messages": [HumanMessage("Warm?")]}, THREAD)
    assert len(model.calls) == 2 and box.log == []
    assert "Model call limits exceeded: run limit (2/2)" in out["messages"][-1].text
    assert app.get_state(THREAD).values["thread_model_call_count"] == 2


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_within_the_limit_repairs_run_and_every_call_is_counted(
    execution: str, box: Toolbox
) -> None:
    limit = ModelCallLimitMiddleware(run_limit=3)
    app, model = _agent([BAD_PLAN, BAD_PLAN, WEATHER_PLAN], limit, box, execution=execution)
    out = app.invoke({"messages": [HumanMessage("Warm?")]}, THREAD)
    assert len(model.calls) == 3 and box.names() == ["get_temperature", "notify"]
    assert meta(out["messages"][-1])["status"] == "finished"
    assert meta(out["messages"][-1])["model_calls"] == 3
    assert app.get_state(THREAD).values["thread_model_call_count"] == 3
    # the rejected drafts showed progress while the turn ran; they are not kept
    kept = [m.text for m in out["messages"] if isinstance(m, AIMessage)]
    assert BAD_PLAN not in kept


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_a_new_plan_after_a_failure_is_refused_at_the_limit(execution: str) -> None:
    box = Toolbox(fail_on={2})
    limit = ModelCallLimitMiddleware(run_limit=1)
    second = asm("PUSH 30\nCALL increment\nPOP R1")
    app, model = _agent(
        [FLAKY_PLAN, second], limit, box, execution=execution, on_tool_error="replan"
    )
    out = app.invoke({"messages": [HumanMessage("go")]}, THREAD)
    assert len(model.calls) == 1
    assert box.names() == ["flaky", "flaky"]  # the second call failed; no new plan ran
    assert "Model call limits exceeded" in out["messages"][-1].text


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_the_final_answer_call_is_refused_at_the_limit_with_the_error_behaviour(
    execution: str, box: Toolbox
) -> None:
    limit = ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")
    app, model = _agent(
        [WEATHER_PLAN, "It is warm."], limit, box, execution=execution, final_answer="model"
    )
    with pytest.raises(ModelCallLimitExceededError):
        app.invoke({"messages": [HumanMessage("Warm?")]}, THREAD)
    assert len(model.calls) == 1 and box.names() == ["get_temperature", "notify"]


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_a_plans_steps_are_not_counted_and_a_thread_limit_spans_turns(
    execution: str, box: Toolbox
) -> None:
    limit = ModelCallLimitMiddleware(thread_limit=2)
    plan = asm("MOV R1, 0\nagain:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 6\nJL again")
    app, model = _agent([plan, plan, plan], limit, box, execution=execution)
    for _ in range(2):
        out = app.invoke({"messages": [HumanMessage("count")]}, THREAD)
        assert meta(out["messages"][-1])["status"] == "finished"
    assert box.names() == ["increment"] * 12
    out = app.invoke({"messages": [HumanMessage("count")]}, THREAD)
    assert "thread limit (2/2)" in out["messages"][-1].text and len(model.calls) == 2


@pytest.mark.parametrize("execution", EXECUTIONS)
def test_a_usage_callback_counts_the_tokens_of_every_model_call(
    box: Toolbox, execution: str
) -> None:
    """A refused draft (taken out once repaired) and a query's reply are no messages of the
    turn, but their model calls pass LangChain's callbacks as every call does: its usage
    callback counts the tokens of all, as docs/models.md says to count them."""
    from langchain_core.callbacks import get_usage_metadata_callback

    from llassembly import ToolsPlannerMiddleware

    def reply(text: str, tokens: int) -> AIMessage:
        usage = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}
        return AIMessage(text, usage_metadata=usage, response_metadata={"model_name": "m"})  # type: ignore[arg-type]

    plan = asm('PUSH "It is warm."\nPUSH "Warm?"\nPUSH "text"\nCALL query_text\nPOP R1\nSAY R1')
    replies = [reply(BAD_PLAN, 1000), reply(plan, 200), reply("yes", 30), reply("Yes.", 4)]
    model = ScriptedChatModel(replies=replies)
    planner = ToolsPlannerMiddleware(execution=execution, queries=True, final_answer="model")
    app = create_agent(model, tools=box.sync_tools, middleware=[planner])
    with get_usage_metadata_callback() as usage:
        out = app.invoke({"messages": [HumanMessage("Warm?")]})
    assert meta(out["messages"][-1])["model_calls"] == 4
    assert usage.usage_metadata["m"]["input_tokens"] == 1234
    kept = [m.usage_metadata for m in out["messages"] if isinstance(m, AIMessage)]
    assert sum(u["input_tokens"] for u in kept if u) < 1234  # (why the docs name the callback)
