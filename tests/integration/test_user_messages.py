"""What the user is told: final messages that say what happened, plan text an app can tell
from the answer while streaming, and a final request that asks for what it binds.

Every model reply here is written by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import BAD_PLAN, FLAKY_PLAN, WEATHER_PLAN, Toolbox, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode
from llassembly.integration.middleware import PLAN_TAG


def _app(replies: list[str], box: Toolbox, **options: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(replies=replies)
    planner = ToolsPlannerMiddleware(**options)
    return create_agent(model, tools=box.sync_tools, middleware=[planner]), model


def test_a_plan_refused_after_its_repairs_says_the_problem_and_its_line(box: Toolbox) -> None:
    app, _ = _app([BAD_PLAN, BAD_PLAN], box, max_repairs=1)
    final = app.invoke({"messages": [HumanMessage("Warm?")]})["messages"][-1]
    assert final.text == "I could not make a plan that passes the checks, so nothing was done."
    problems = "\n".join(meta(final)["error"]["problems"])  # the details: for the app
    assert meta(final)["status"] == "refused" and "line 5, column" in problems
    assert "unknown instruction 'FROB'" in problems and "unknown tool 'teleport'" in problems
    assert len(meta(final)["drafts"]) == 2 and all(d["problems"] for d in meta(final)["drafts"])


def test_the_stop_message_counts_only_the_calls_that_completed() -> None:
    box = Toolbox(fail_on={3})
    app, _ = _app([FLAKY_PLAN], box)
    final = app.invoke({"messages": [HumanMessage("go")]})["messages"][-1]
    assert box.names() == ["flaky"] * 3
    assert "2 tool calls had completed before it" in final.text
    assert meta(final)["tool_calls"] == 2


PARALLEL_PLAN = """PUSH 1
CALL get
PUSH 2
CALL get
PUSH 3
CALL get
POP R3
POP R2
POP R1
SAY "{R1} {R2} {R3}"
"""


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
def test_the_stop_message_counts_the_calls_that_ran_beside_the_failed_one(path: str) -> None:
    """With ``parallel_tools`` the three calls run at once and the second fails: the first
    completed before it, the third completed beside it; the message and the count say both."""
    ran: list[int] = []

    @tool
    def get(x: int) -> int:
        """Get."""
        ran.append(x)
        if x == 2:
            raise ValueError("bad")
        return x

    model = ScriptedChatModel(replies=[asm(PARALLEL_PLAN)])
    request = {"messages": [HumanMessage("go")]}
    if path == "node":
        out = ToolsPlannerNode(model, [get], parallel_tools=True)(request, {})
    else:
        planner = ToolsPlannerMiddleware(execution=path, parallel_tools=True)
        out = create_agent(model, tools=[get], middleware=[planner]).invoke(request)
    final = out["messages"][-1]
    assert sorted(ran) == [1, 2, 3]
    assert "1 tool call had completed before it. 1 more, run at the same time" in final.text
    assert meta(final)["tool_calls"] == 2


class Rewriting(AgentMiddleware[Any, Any]):
    """A tool middleware that writes text over the result: the plan cannot read it as an int."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        result = handler(request)
        result.content = "not a number"
        return result


@pytest.mark.parametrize("path", ["agent", "graph"])
def test_a_call_whose_answer_cannot_be_read_is_not_counted_as_run_beside_itself(path: str) -> None:
    """The call that stopped the plan (its answer read as no int) was said to be "1 more, run
    at the same time, completed after it"."""

    @tool
    def count() -> int:
        """Count."""
        return 3

    model = ScriptedChatModel(replies=[asm('CALL count\nPOP R1\nSAY "{R1}"')])
    rewriting = [Rewriting()]  # inside the agent, or the planner's option on the graph path
    options = {"tool_middleware": rewriting} if path == "graph" else {}
    planner = ToolsPlannerMiddleware(execution=path, **options)  # type: ignore[arg-type]
    inner = rewriting if path == "agent" else []
    agent = create_agent(model, tools=[count], middleware=[planner, *inner])
    final = agent.invoke({"messages": [HumanMessage("go")]})["messages"][-1]
    assert meta(final)["status"] == "stopped" and meta(final)["error"]["line"] == 3
    assert "run at the same time" not in final.text and meta(final)["tool_calls"] == 0


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_streamed_plan_text_carries_the_planner_tag_and_the_answer_does_not(
    box: Toolbox, execution: str
) -> None:
    """What an app shows a user while streaming: every chunk of the planner's own model calls
    (the plan, a rejected draft) carries ``PLAN_TAG`` and ``metadata["llassembly"] ==
    "plan"``; the turn's answer does not."""
    app, _ = _app([BAD_PLAN, WEATHER_PLAN], box, execution=execution)
    plan_text, kinds, answers = [], [], []
    for chunk, metadata in app.stream(
        {"messages": [HumanMessage("Warm?")]}, stream_mode="messages"
    ):
        if not isinstance(chunk, AIMessage | AIMessageChunk):
            continue
        if PLAN_TAG in metadata.get("tags", []):  # the planner model writing
            assert metadata.get("llassembly") == "plan"
            plan_text.append(chunk.text)
            continue
        kind = chunk.response_metadata.get("llassembly", {}).get("kind")
        kinds.append(kind)
        if kind == "answer":
            answers.append(chunk.text)
    assert BAD_PLAN in plan_text and WEATHER_PLAN in plan_text
    assert set(kinds) <= {"draft", "call", "answer"} and "draft" in kinds
    assert len(answers) == 1 and "```asm" not in answers[0]


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_the_streamed_answer_a_model_wrote_is_shown_once_as_the_answer(
    box: Toolbox, execution: str
) -> None:
    """With ``final_answer="model"`` the recipe of docs/tutorial.md (*Streaming*) shows the
    final call's answer: the message that ends the turn is streamed with its kind."""
    app, _ = _app(
        [WEATHER_PLAN, "It is warm in Paris."], box, execution=execution, final_answer="model"
    )
    answers = _streamed_answers(app)
    assert answers == ["It is warm in Paris."]


def _streamed_answers(app: Any) -> list[str]:
    """What the tutorial's streaming recipe shows a user: the chunks of kind ``"answer"``
    outside the planner's own model calls."""
    return [
        chunk.text
        for chunk, metadata in app.stream(
            {"messages": [HumanMessage("Warm?")]}, stream_mode="messages"
        )
        if PLAN_TAG not in metadata.get("tags", [])
        and chunk.response_metadata.get("llassembly", {}).get("kind") == "answer"
    ]


def test_the_nodes_planner_calls_carry_the_planner_tag_and_its_answer_call_does_not(
    box: Toolbox,
) -> None:
    """As above, for ``ToolsPlannerNode`` (whose model streams from the turn graph inside it:
    ``subgraphs=True``), with a final answer written by the model."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[BAD_PLAN, WEATHER_PLAN, "Warm: 21."]),
        box.sync_tools,
        final_answer="model",
    )
    graph = StateGraph(MessagesState)
    graph.add_node("planner", node)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    tagged, untagged = [], []
    for _, (chunk, metadata) in graph.compile().stream(
        {"messages": [HumanMessage("Warm?")]}, stream_mode="messages", subgraphs=True
    ):
        if PLAN_TAG in metadata.get("tags", []):
            assert metadata.get("llassembly") == "plan"
            tagged.append(chunk.text)
        elif isinstance(chunk, AIMessage | AIMessageChunk):
            untagged.append(chunk.text)
    assert tagged == [BAD_PLAN, WEATHER_PLAN]
    assert "Warm: 21." in untagged and not any("```asm" in text for text in untagged)


def test_a_plain_answer_streams_as_the_answer_once(box: Toolbox) -> None:
    app, _ = _app(["It is warm: 21 degrees."], box)
    answers = _streamed_answers(app)
    assert answers == ["It is warm: 21 degrees."]


class Weather(BaseModel):
    warm: bool


def test_the_final_request_asks_for_the_structured_format_it_binds(box: Toolbox) -> None:
    call = {"name": "Weather", "args": {"warm": True}, "id": "w1", "type": "tool_call"}
    answer = AIMessage("", tool_calls=[call])
    model = ScriptedChatModel(replies=[WEATHER_PLAN, answer])
    agent = create_agent(
        model,
        tools=box.sync_tools,
        middleware=[ToolsPlannerMiddleware(final_answer="model")],
        response_format=ToolStrategy(Weather),
    )
    out = agent.invoke({"messages": [HumanMessage("Warm?")]})
    asked = model.calls[-1][-1].text
    assert "in words" not in asked and "structured format" in asked
    assert out["structured_response"] == Weather(warm=True)
