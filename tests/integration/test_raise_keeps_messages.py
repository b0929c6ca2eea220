"""``ToolsPlannerNode(on_tool_error="raise")``: a raising tool never removes what was recorded.

The plan calls ``step(1)`` (it completes), then ``explode(2)`` (it raises). The error still
reaches the caller of ``invoke``/``ainvoke`` (same class, tool, line and ``error.messages``),
and the graph's checkpoint holds the turn's messages: the plan, the completed call, the failed
call and the final failure message. The scripted model's reply is written by hand.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from fakes import ScriptedChatModel
from langchain.tools import tool
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send
from pydantic import BaseModel
from test_resume_batches import Saver, async_opener, opener

from llassembly import AToolsPlannerNode, ToolsPlannerNode
from llassembly.errors import ToolExecutionError

RAN: Counter[str] = Counter()


@tool
def step(n: int) -> int:
    """Take step n; returns n."""
    RAN[f"step{n}"] += 1
    return n


@tool
def explode(n: int) -> int:
    """Blow up."""
    RAN[f"explode{n}"] += 1
    raise RuntimeError("the crate exploded")


PLAN = """Two steps.

```asm
PUSH 1
CALL step
POP R1
PUSH 2
CALL explode
POP R2
```"""
THREAD: RunnableConfig = {"configurable": {"thread_id": "raise-1"}}


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def saver_kind(request: pytest.FixtureRequest) -> Saver:
    kind: Saver = request.param
    return kind


@pytest.fixture
def storage(saver_kind: Saver, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if saver_kind == "postgres":
        dsn: str = request.getfixturevalue("postgres")
        return dsn
    return str(tmp_path / "db.sqlite")


def graph(model: ScriptedChatModel, saver: Any, *, is_async: bool = False, **options: Any) -> Any:
    node = (AToolsPlannerNode if is_async else ToolsPlannerNode)(
        model, [step, explode], on_tool_error="raise", **options
    )
    builder = StateGraph(MessagesState)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile(checkpointer=saver)


def shape(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = [(c["name"], c["args"]) for c in m.tool_calls] if isinstance(m, AIMessage) else []
        out.append((type(m).__name__, m.text, calls))
    return out


def assert_recorded(saved: list[BaseMessage], error: ToolExecutionError) -> None:
    """The checkpoint holds the question and every message of the turn, as the error does."""
    assert isinstance(saved[0], HumanMessage)
    assert shape(saved[1:]) == shape(error.messages)
    plan, call1, answer1, call2, answer2, final = saved[1:]
    assert "CALL explode" in plan.text
    assert isinstance(call1, AIMessage) and call1.tool_calls[0]["name"] == "step"
    assert isinstance(answer1, ToolMessage) and answer1.text == "1"
    assert isinstance(call2, AIMessage) and call2.tool_calls[0]["name"] == "explode"
    assert isinstance(answer2, ToolMessage) and answer2.status == "error"
    assert isinstance(final, AIMessage) and not final.tool_calls
    record = final.response_metadata["llassembly"]
    assert record["status"] == "stopped" and "the tool explode failed" in final.text
    assert "the crate exploded" in record["error"]["message"]  # the details: for the app


def assert_the_error(error: ToolExecutionError) -> None:
    assert error.tool == "explode" and error.line == 8
    assert "the crate exploded" in str(error)


def test_the_checkpoint_keeps_the_turns_messages_when_a_tool_raises(
    saver_kind: Saver, storage: str
) -> None:
    open_saver = opener(saver_kind, storage)
    model = ScriptedChatModel(replies=[PLAN])
    with open_saver() as saver:
        app = graph(model, saver)
        with pytest.raises(ToolExecutionError) as raised:
            app.invoke({"messages": [HumanMessage("Walk.")]}, THREAD)
        assert_the_error(raised.value)
        assert isinstance(raised.value.__cause__, RuntimeError)  # the live error, as it was
        assert_recorded(app.get_state(THREAD).values["messages"], raised.value)
    assert RAN == {"step1": 1, "explode2": 1}
    assert len(model.calls) == 1


async def test_async_the_checkpoint_keeps_the_turns_messages_when_a_tool_raises(
    saver_kind: Saver, storage: str
) -> None:
    open_saver = async_opener(saver_kind, storage)
    model = ScriptedChatModel(replies=[PLAN])
    async with open_saver() as saver:
        app = graph(model, saver, is_async=True)
        with pytest.raises(ToolExecutionError) as raised:
            await app.ainvoke({"messages": [HumanMessage("Walk.")]}, THREAD)
        assert_the_error(raised.value)
        assert isinstance(raised.value.__cause__, RuntimeError)
        assert_recorded((await app.aget_state(THREAD)).values["messages"], raised.value)
    assert RAN == {"step1": 1, "explode2": 1}
    assert len(model.calls) == 1


def test_invoking_again_raises_the_same_error_and_runs_nothing(tmp_path: Path) -> None:
    """The failed step can be retried with ``invoke(None)``: in a new instance it raises the
    error rebuilt from its record, with the same messages; no tool and no model runs again."""
    open_saver = opener("sqlite", str(tmp_path / "db.sqlite"))
    with open_saver() as saver:
        app = graph(ScriptedChatModel(replies=[PLAN]), saver)
        with pytest.raises(ToolExecutionError) as first:
            app.invoke({"messages": [HumanMessage("Walk.")]}, THREAD)
    with open_saver() as saver:
        app = graph(ScriptedChatModel(replies=[]), saver)
        with pytest.raises(ToolExecutionError) as again:
            app.invoke(None, THREAD)
        state = app.get_state(THREAD)
    assert str(again.value) == str(first.value)
    assert (again.value.tool, again.value.line) == ("explode", 8)
    assert shape(again.value.messages) == shape(first.value.messages)
    assert shape(state.values["messages"][1:]) == shape(first.value.messages)
    assert RAN == {"step1": 1, "explode2": 1}


def test_a_new_message_after_the_error_starts_a_new_turn() -> None:
    model = ScriptedChatModel(replies=[PLAN, "All good now."])
    app = graph(model, InMemorySaver())
    with pytest.raises(ToolExecutionError):
        app.invoke({"messages": [HumanMessage("Walk.")]}, THREAD)
    out = app.invoke({"messages": [HumanMessage("Never mind.")]}, THREAD)
    assert out["messages"][-1].text == "All good now."
    assert [m.text for m in out["messages"] if isinstance(m, HumanMessage)] == [
        "Walk.",
        "Never mind.",
    ]
    assert RAN == {"step1": 1, "explode2": 1}


def test_without_infer_tools_messages_the_checkpoint_keeps_what_the_error_carries() -> None:
    app = graph(ScriptedChatModel(replies=[PLAN]), InMemorySaver(), infer_tools_messages=False)
    with pytest.raises(ToolExecutionError) as raised:
        app.invoke({"messages": [HumanMessage("Walk.")]}, THREAD)
    saved = app.get_state(THREAD).values["messages"]
    assert shape(saved[1:]) == shape(raised.value.messages)
    assert not any(isinstance(m, ToolMessage) for m in saved)
    assert saved[-1].response_metadata["llassembly"]["status"] == "stopped"


def test_a_route_on_the_final_status_keeps_the_next_node_from_running() -> None:
    """Nodes after the planner's edges run in the step where the error is raised; a
    conditional edge on the final message's status keeps them out (the documented pattern)."""
    ran: list[str] = []

    def report(state: MessagesState) -> dict[str, Any]:
        ran.append("report")
        return {}

    def route(state: MessagesState) -> str:
        status = state["messages"][-1].response_metadata.get("llassembly", {}).get("status")
        return "report" if status == "finished" else END

    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[PLAN]), [step, explode], on_tool_error="raise"
    )
    builder = StateGraph(MessagesState)
    builder.add_node("planner", node)
    builder.add_node("report", report)
    builder.add_edge(START, "planner")
    builder.add_conditional_edges("planner", route, ["report", END])
    builder.add_edge("report", END)
    app = builder.compile(checkpointer=InMemorySaver())
    with pytest.raises(ToolExecutionError):
        app.invoke({"messages": [HumanMessage("Walk.")]}, THREAD)
    assert ran == []
    assert (
        app.get_state(THREAD).values["messages"][-1].response_metadata["llassembly"]["status"]
        == "stopped"
    )


def test_outside_a_graph_the_node_raises_at_once() -> None:
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[PLAN]), [step, explode], on_tool_error="raise"
    )
    with pytest.raises(ToolExecutionError) as raised:
        node({"messages": [HumanMessage("Walk.")]}, {})
    assert_the_error(raised.value)
    assert len(raised.value.messages) == 6


def test_the_node_hands_its_failure_to_itself_as_plain_data() -> None:
    """What the node returns when a tool raised: the messages, and a ``Send`` to its own node
    whose marker is plain data (it is checkpointed)."""
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[PLAN]), [step, explode], on_tool_error="raise"
    )
    config: RunnableConfig = {"metadata": {"langgraph_node": "my_planner"}}
    out = node({"messages": [HumanMessage("Walk.")]}, config)
    assert isinstance(out, Command)
    assert isinstance(out.update, dict) and len(out.update["messages"]) == 6
    assert isinstance(out.goto, Send) and out.goto.node == "my_planner"
    with pytest.raises(ToolExecutionError) as raised:
        node(out.goto.arg, config)
    assert_the_error(raised.value)


def test_the_hand_over_reaches_the_node_in_a_graph_with_a_pydantic_state() -> None:
    """LangGraph gives a ``Send``'s argument to the node as it is, whatever the state schema:
    the failure reaches the node's raising task, not a validated copy of the state."""

    class Chat(BaseModel):
        messages: Annotated[list[AnyMessage], add_messages]
        user: str = "ann"

    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[PLAN]), [step, explode], on_tool_error="raise"
    )
    builder = StateGraph(Chat)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    app = builder.compile(checkpointer=InMemorySaver())
    with pytest.raises(ToolExecutionError) as raised:
        app.invoke({"messages": [HumanMessage("Walk.")]}, THREAD)
    assert_the_error(raised.value)
    assert_recorded(app.get_state(THREAD).values["messages"], raised.value)
