"""An interrupt while results are pending in registers and memory: on resume no call runs again
and none is lost.

The plans are written as models write them, each result popped right after its call: a loop
fetching two crates, storing each result in memory (``POP [got + R5*8]``), then a question
(``ask`` interrupts for a person's answer):

* ``INSIDE``: ``ask`` is marked too, so the loop's two calls and the question are one batch;
  when ``ask`` interrupts, the fetched results are still pending in ``got`` and the answer in
  ``R3``;
* ``AFTER``: ``ask`` is not marked, so it waits for the batch of the loop's calls and
  interrupts in a step of its own.

Each case counts how often each tool really ran over the pause and the resume (every ``fetch``
once, ``ask`` twice: LangGraph runs the interrupted call again and ``interrupt()`` returns the
resume value), on every path (the agent path, the middleware's graph execution, the nodes),
sync and async, with ``InMemorySaver``, SQLite and PostgreSQL; the durable savers resume from a
new agent or graph with a new connection and a model with no replies left. The scripted
model's reply is written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from test_resume_batches import (  # noqa: F401  (_reset: a fresh count per test)
    RAN,
    SAVERS,
    SURFACES,
    THREAD,
    Saver,
    Surface,
    _reset,
    ask,
    async_opener,
    fetch,
    opener,
)

from llassembly import AToolsPlannerNode, ToolsPlannerMiddleware, ToolsPlannerNode

_LOOP = """MOV R5, 0
next:
PUSH [crates + R5*8]
CALL fetch
POP [got + R5*8]
INC R5
CMP R5, 2
JL next
PUSH "Fetch crate 3?"
CALL ask
POP R3
CMP R3, "yes"
JNE done
PUSH 3
CALL fetch
POP R4
done:
MOV R1, [got]
MOV R2, [got + 8]
HLT
section .data
crates dq 1, 2
got dq 0, 0"""


@pytest.fixture(params=SAVERS)
def kind(request: pytest.FixtureRequest) -> Saver:
    saver: Saver = request.param
    return saver


@pytest.fixture
def where(kind: Saver, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where the saver keeps its checkpoints: a database, a file, or nothing (in memory)."""
    if kind == "postgres":
        dsn: str = request.getfixturevalue("postgres")
        return dsn
    return str(tmp_path / "db.sqlite")


Plan = Literal["inside", "after"]
MARKED: dict[Plan, list[str]] = {"inside": ["fetch", "ask"], "after": ["fetch"]}
REPLY = f"```asm\n{_LOOP}\n```"


def build(
    surface: Surface,
    plan: Plan,
    model: ScriptedChatModel,
    saver: Any,
    *,
    granularity: str = "block",
    is_async: bool = False,
) -> Any:
    tools = [fetch, ask]
    if surface in ("agent", "graph-agent"):
        planner = ToolsPlannerMiddleware(
            execution="agent" if surface == "agent" else "graph",
            granularity=granularity,  # type: ignore[arg-type]
            parallel_tools=MARKED[plan],
            tools=tools,
        )
        return create_agent(model, tools=tools, middleware=[planner], checkpointer=saver)
    node = (AToolsPlannerNode if is_async else ToolsPlannerNode)(
        model,
        tools,
        granularity=granularity,  # type: ignore[arg-type]
        parallel_tools=MARKED[plan],
    )
    builder = StateGraph(MessagesState)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile(checkpointer=saver)


def assert_paused(result: dict[str, Any], app: Any, surface: Surface, plan: Plan) -> None:
    assert result["__interrupt__"][0].value == {"question": "Fetch crate 3?"}
    assert RAN == {"fetch1": 1, "fetch2": 1, "ask": 1}
    if surface == "agent" and plan == "inside":  # the checkpoint holds the pending values
        machine = app.get_state(THREAD).values["llassembly"]["machine"]
        assert json.loads(json.dumps(machine)) == machine
        assert machine["memory"]["got"] == [
            {"call": 1, "result": 0},
            {"call": 2, "result": 0},
        ]
        assert machine["registers"]["R3"] == {"call": 3, "result": 0}
        assert [o["number"] for o in machine["outstanding"]] == [1, 2, 3]


def assert_finished_once(result: dict[str, Any], plan: Plan) -> None:
    assert "__interrupt__" not in result
    assert RAN == {"fetch1": 1, "fetch2": 1, "ask": 2, "fetch3": 1}
    messages = result["messages"]
    batches = [
        [(c["name"], c["args"]) for c in m.tool_calls]
        for m in messages
        if isinstance(m, AIMessage) and m.tool_calls
    ]
    first = [("fetch", {"n": 1}), ("fetch", {"n": 2})]
    question = [("ask", {"question": "Fetch crate 3?"})]
    expected = [first + question] if plan == "inside" else [first, question]
    assert batches == [*expected, [("fetch", {"n": 3})]]  # in program order
    answers = [m.text for m in messages if isinstance(m, ToolMessage)]
    assert answers == ["10", "20", "yes", "30"]
    final = messages[-1]
    record = final.response_metadata["llassembly"]
    assert record["status"] == "finished" and record["tool_calls"] == 4
    assert record["registers"] == {"R1": 10, "R2": 20, "R3": "yes", "R4": 30, "R5": 2}


@pytest.mark.parametrize("plan", ["inside", "after"])
@pytest.mark.parametrize("surface", SURFACES)
def test_resume_with_results_pending_in_memory_runs_no_call_again(
    surface: Surface, plan: Plan, kind: Saver, where: str
) -> None:
    open_saver = opener(kind, where)
    model = ScriptedChatModel(replies=[REPLY])
    with open_saver() as saver:
        first = build(surface, plan, model, saver)
        paused = first.invoke({"messages": [HumanMessage("Fetch the crates.")]}, THREAD)
        assert_paused(paused, first, surface, plan)

    no_replies_left = ScriptedChatModel(replies=[])  # calling it would fail the test
    with open_saver() as saver:
        second = build(surface, plan, no_replies_left, saver)
        result = second.invoke(Command(resume="yes"), THREAD)
        assert second.get_state(THREAD).next == ()

    assert_finished_once(result, plan)
    assert len(model.calls) == 1 and no_replies_left.calls == []


@pytest.mark.parametrize("plan", ["inside", "after"])
@pytest.mark.parametrize("surface", SURFACES)
async def test_async_resume_with_results_pending_in_memory_runs_no_call_again(
    surface: Surface, plan: Plan, kind: Saver, where: str
) -> None:
    open_saver = async_opener(kind, where)
    model = ScriptedChatModel(replies=[REPLY])
    async with open_saver() as saver:
        first = build(surface, plan, model, saver, is_async=True)
        paused = await first.ainvoke({"messages": [HumanMessage("Fetch the crates.")]}, THREAD)
        assert paused["__interrupt__"][0].value == {"question": "Fetch crate 3?"}
        assert RAN == {"fetch1": 1, "fetch2": 1, "ask": 1}

    no_replies_left = ScriptedChatModel(replies=[])
    async with open_saver() as saver:
        second = build(surface, plan, no_replies_left, saver, is_async=True)
        result = await second.ainvoke(Command(resume="yes"), THREAD)
        assert (await second.aget_state(THREAD)).next == ()

    assert_finished_once(result, plan)
    assert len(model.calls) == 1 and no_replies_left.calls == []


@pytest.mark.parametrize("surface", ["graph-agent", "node"])
def test_resume_mid_overlap_at_instruction_granularity(surface: Surface) -> None:
    """A plan graph of one node per instruction: the batch is handed out from the node where
    the machine stopped running ahead, and the join runs on from there after the resume."""
    model = ScriptedChatModel(replies=[REPLY])
    saver = InMemorySaver()
    app = build(surface, "inside", model, saver, granularity="instruction")
    paused = app.invoke({"messages": [HumanMessage("Fetch the crates.")]}, THREAD)
    assert paused["__interrupt__"][0].value == {"question": "Fetch crate 3?"}
    result = app.invoke(Command(resume="yes"), THREAD)
    assert_finished_once(result, "inside")
