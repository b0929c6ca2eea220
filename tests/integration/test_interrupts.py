"""A tool that calls ``interrupt()`` in the middle of a plan: pause, resume, nothing repeated.

The plan calls ``step(1)``, ``step(2)``, then ``ask_permission`` (which interrupts), then
``step(3)`` if the human said yes. Every case checks, after ``Command(resume=...)``:

* no completed tool call ran twice (a module-level counter counts every real call);
* the model was called exactly once over the pause and the resume;
* the final messages record every call exactly once.

The interrupting tool itself runs twice: LangGraph re-runs the node that raised the interrupt,
and ``interrupt()`` then returns the resume value. That is LangGraph's contract, not a repeat.

Durable (SQLite) cases resume from a new agent or graph built from scratch, with a new saver on
the same file, a new model that has no replies left, and only the thread id. The scripted
model's reply is written by hand (it is not a recording).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import pytest
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.tools import tool
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from llassembly import AToolsPlannerNode, ToolsPlannerMiddleware, ToolsPlannerNode

CALLS: Counter[str] = Counter()


@tool
def step(n: int) -> None:
    """Take step number n."""
    CALLS[f"step{n}"] += 1


@tool
def ask_permission(question: str) -> str:
    """Ask the human a yes/no question and return the answer ("yes" or "no")."""
    CALLS["ask_permission"] += 1
    answer: str = interrupt({"question": question})
    return answer


TOOLS = [step, ask_permission]

PLAN = """I'll take two steps, ask before the third.

```asm
; two steps first
PUSH 1
CALL step
PUSH 2
CALL step
; then ask the human
PUSH "May I take step 3?"
CALL ask_permission
POP R1
CMP R1, "yes"
JNE done
PUSH 3
CALL step
done:
HLT
```
"""

Surface = Literal["agent", "graph-agent", "node"]
Granularity = Literal["block", "instruction", "program"]
THREAD: RunnableConfig = {"configurable": {"thread_id": "npc-1"}}


@pytest.fixture(autouse=True)
def _reset_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


def build(
    surface: Surface,
    model: ScriptedChatModel,
    checkpointer: Any,
    granularity: Granularity,
    *,
    is_async: bool = False,
    fresh_process: bool = False,
) -> Any:
    """An agent (create_agent + middleware) or a one-node StateGraph, compiled with a saver."""
    if surface == "agent":
        # The agent path learns the agent's tools from each model request (every step is
        # one), so a fresh process needs nothing but the thread id.
        planner = ToolsPlannerMiddleware(granularity=granularity)
        return create_agent(model, tools=TOOLS, middleware=[planner], checkpointer=checkpointer)
    if surface == "graph-agent":
        # The plan graph runs in a visit of the model node, which has the agent's tools; some
        # tests still pass them in a fresh process (tools= must keep working there too).
        planner = ToolsPlannerMiddleware(
            execution="graph", granularity=granularity, tools=TOOLS if fresh_process else None
        )
        return create_agent(model, tools=TOOLS, middleware=[planner], checkpointer=checkpointer)
    node_class = AToolsPlannerNode if is_async else ToolsPlannerNode
    builder = StateGraph(MessagesState)
    builder.add_node("planner", node_class(model, TOOLS, granularity=granularity))
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile(checkpointer=checkpointer)


@contextmanager
def sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@asynccontextmanager
async def async_sqlite_saver(path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    conn = await aiosqlite.connect(path)
    try:
        yield AsyncSqliteSaver(conn)
    finally:
        await conn.close()


def tool_names(messages: list[Any]) -> list[str]:
    return [c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]


def assert_paused(result: dict[str, Any]) -> None:
    interrupts = result.get("__interrupt__")
    assert interrupts, f"expected an interrupt, got keys {sorted(result)}"
    assert interrupts[0].value == {"question": "May I take step 3?"}
    assert CALLS == {"step1": 1, "step2": 1, "ask_permission": 1}


def assert_finished_once(result: dict[str, Any]) -> None:
    """Every completed call ran once; the messages hold each call exactly once."""
    assert "__interrupt__" not in result
    # ask_permission: once raising the interrupt, once returning the resume value.
    assert CALLS == {"step1": 1, "step2": 1, "ask_permission": 2, "step3": 1}
    messages = result["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("step", {"n": 1}),
        ("step", {"n": 2}),
        ("ask_permission", {"question": "May I take step 3?"}),
        ("step", {"n": 3}),
    ]
    ids = [str(c["id"]) for c in calls]
    assert len(set(ids)) == len(ids)
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    assert sorted(m.tool_call_id for m in answers) == sorted(ids)
    assert next(m.text for m in answers if m.name == "ask_permission") == "yes"
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    meta = final.response_metadata["llassembly"]
    assert meta["status"] == "finished"
    assert meta["tool_calls"] == 4
    assert meta["model_calls"] == 1


SURFACES: list[Surface] = ["agent", "graph-agent", "node"]
CHECKED: list[Granularity] = ["block", "instruction"]


# -- InMemorySaver: pause and resume on the same instance ------------------------------------


@pytest.mark.parametrize("granularity", CHECKED)
@pytest.mark.parametrize("surface", SURFACES)
def test_resume_with_in_memory_saver_runs_no_completed_call_twice(
    surface: Surface, granularity: Granularity
) -> None:
    model = ScriptedChatModel(replies=[PLAN])
    app = build(surface, model, InMemorySaver(), granularity)

    assert_paused(app.invoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))
    result = app.invoke(Command(resume="yes"), THREAD)

    assert_finished_once(result)
    assert len(model.calls) == 1


@pytest.mark.parametrize("granularity", CHECKED)
@pytest.mark.parametrize("surface", SURFACES)
async def test_async_resume_with_in_memory_saver_runs_no_completed_call_twice(
    surface: Surface, granularity: Granularity
) -> None:
    model = ScriptedChatModel(replies=[PLAN])
    app = build(surface, model, InMemorySaver(), granularity, is_async=True)

    assert_paused(await app.ainvoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))
    result = await app.ainvoke(Command(resume="yes"), THREAD)

    assert_finished_once(result)
    assert len(model.calls) == 1


# -- SQLite: resume from a new instance, new saver, same file, only the thread id -----------


@pytest.mark.parametrize("granularity", CHECKED)
@pytest.mark.parametrize("surface", SURFACES)
def test_resume_from_a_new_instance_on_the_same_sqlite_file(
    surface: Surface, granularity: Granularity, tmp_path: Path
) -> None:
    db = tmp_path / "db.sqlite"
    model = ScriptedChatModel(replies=[PLAN])
    with sqlite_saver(db) as saver:
        first = build(surface, model, saver, granularity)
        assert_paused(first.invoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))
    del first

    no_replies_left = ScriptedChatModel(replies=[])  # calling it would fail the test
    with sqlite_saver(db) as saver:
        second = build(surface, no_replies_left, saver, granularity, fresh_process=True)
        result = second.invoke(Command(resume="yes"), THREAD)
        assert second.get_state(THREAD).next == ()

    assert_finished_once(result)
    assert len(model.calls) == 1
    assert no_replies_left.calls == []


@pytest.mark.parametrize("granularity", CHECKED)
@pytest.mark.parametrize("surface", SURFACES)
async def test_async_resume_from_a_new_instance_on_the_same_sqlite_file(
    surface: Surface, granularity: Granularity, tmp_path: Path
) -> None:
    db = tmp_path / "db.sqlite"
    model = ScriptedChatModel(replies=[PLAN])
    async with async_sqlite_saver(db) as saver:
        first = build(surface, model, saver, granularity, is_async=True)
        paused = await first.ainvoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD)
        assert_paused(paused)
    del first

    no_replies_left = ScriptedChatModel(replies=[])
    async with async_sqlite_saver(db) as saver:
        second = build(
            surface, no_replies_left, saver, granularity, is_async=True, fresh_process=True
        )
        result = await second.ainvoke(Command(resume="yes"), THREAD)
        assert (await second.aget_state(THREAD)).next == ()

    assert_finished_once(result)
    assert len(model.calls) == 1
    assert no_replies_left.calls == []


# -- other resume answers and setups ---------------------------------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_resume_value_reaches_the_plan_and_a_no_skips_the_last_step(surface: Surface) -> None:
    model = ScriptedChatModel(replies=[PLAN])
    app = build(surface, model, InMemorySaver(), "block")

    assert_paused(app.invoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))
    result = app.invoke(Command(resume="no"), THREAD)

    assert CALLS == {"step1": 1, "step2": 1, "ask_permission": 2}
    names = tool_names(result["messages"])
    assert names == ["step", "step", "ask_permission"]
    assert result["messages"][-1].response_metadata["llassembly"]["registers"]["R1"] == "no"
    assert len(model.calls) == 1


def test_the_graph_path_resumes_in_a_new_instance_with_no_tools_argument(
    tmp_path: Path,
) -> None:
    """The plan graph runs in a visit of the agent's model node, which has the agent's tools:
    a new process resumes it with the plain pattern (no ``tools=`` for the middleware)."""
    db = tmp_path / "db.sqlite"
    with sqlite_saver(db) as saver:
        first = build("graph-agent", ScriptedChatModel(replies=[PLAN]), saver, "block")
        assert_paused(first.invoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))

    no_replies_left = ScriptedChatModel(replies=[])
    with sqlite_saver(db) as saver:
        agent = create_agent(
            no_replies_left,
            tools=TOOLS,
            middleware=[ToolsPlannerMiddleware(execution="graph")],
            checkpointer=saver,
        )
        result = agent.invoke(Command(resume="yes"), THREAD)
    assert_finished_once(result)
    assert no_replies_left.calls == []


# -- "program" granularity: documented behaviour on resume -----------------------------------


@pytest.mark.parametrize("surface", ["graph-agent", "node"])
def test_program_granularity_reruns_completed_calls_on_resume(surface: Surface) -> None:
    """One node runs the whole plan, so there is no checkpoint between calls: on resume the
    plan starts over and the calls before the interrupt run again. The model is still not
    called again, and the messages still list each call once (they come from the final run)."""
    model = ScriptedChatModel(replies=[PLAN])
    app = build(surface, model, InMemorySaver(), "program")

    assert_paused(app.invoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))
    result = app.invoke(Command(resume="yes"), THREAD)

    assert CALLS == {"step1": 2, "step2": 2, "ask_permission": 2, "step3": 1}
    assert len(model.calls) == 1
    names = tool_names(result["messages"])
    assert names == ["step", "step", "ask_permission", "step"]


def _door_app(where: str, opened: list[str], asked_by: str) -> Any:
    """A plan that opens a door, asked about per call: by LangChain's approval (``hitl``) or
    by the tool's own ``interrupt`` with a ``response_schema`` (``tool``)."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from pydantic import BaseModel

    class Approval(BaseModel):
        approve: bool

    @tool
    def open_door(room: str) -> str:
        """Open a door."""
        if asked_by == "tool":
            answer = interrupt(f"Open {room}?", response_schema=Approval)  # type: ignore[call-arg]
            if not answer.approve:
                return "kept shut"
        opened.append(room)
        return f"{room} open"

    plan = '```asm\nPUSH "hall"\nCALL open_door\nPOP R1\nSAY "{R1}"\n```'
    model = ScriptedChatModel(replies=[plan])
    per_call = HumanInTheLoopMiddleware(interrupt_on={"open_door": True}, interrupt_mode="per_call")
    gates = [per_call] if asked_by == "hitl" else []
    if where == "node":
        builder = StateGraph(MessagesState)
        builder.add_node("p", ToolsPlannerNode(model, [open_door], tool_middleware=gates))
        builder.add_edge(START, "p")
        builder.add_edge("p", END)
        return builder.compile(checkpointer=InMemorySaver())
    if where == "graph":
        planner = ToolsPlannerMiddleware(execution="graph", tool_middleware=gates)
        return create_agent(model, [open_door], middleware=[planner], checkpointer=InMemorySaver())
    middleware = [ToolsPlannerMiddleware(), *gates]
    return create_agent(model, [open_door], middleware=middleware, checkpointer=InMemorySaver())


@pytest.mark.parametrize("asked_by", ["hitl", "tool"])
@pytest.mark.parametrize("where", ["agent", "graph", "node"])
def test_a_resume_value_an_interrupt_refuses_fails_the_run_and_can_be_given_again(
    where: str, asked_by: str
) -> None:
    """As in LangGraph's tool node: an answer that does not match the interrupt's
    ``response_schema`` is no failure of the tool (it never ran); the run fails and the
    same interrupt takes a well-formed answer."""
    from pydantic import ValidationError

    opened: list[str] = []
    app, thread = _door_app(where, opened, asked_by), {"configurable": {"thread_id": "t"}}
    assert "__interrupt__" in app.invoke({"messages": [HumanMessage("Open the hall.")]}, thread)
    typo = {"type": "aprove"} if asked_by == "hitl" else {"aprove": True}
    with pytest.raises(ValidationError):
        app.invoke(Command(resume=typo), thread)
    good = {"type": "approve"} if asked_by == "hitl" else {"approve": True}
    out = app.invoke(Command(resume=good), thread)
    assert out["messages"][-1].text == "hall open" and opened == ["hall"]


@pytest.mark.parametrize("result", ["done", ""])
def test_a_reviewers_edit_notice_is_no_result_even_around_an_empty_one(result: str) -> None:
    """``HumanInTheLoopMiddleware`` adds a notice to the result of a call a reviewer edited
    (with no line break when the result is empty): the plan reads the tool's own result."""
    from conftest import asm
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    @tool
    def archive(folder: str) -> str:
        """Archive a folder; a note, empty when there is nothing to say."""
        return result

    plan = asm('PUSH "inbox"\nCALL archive\nPOP R1\nSAY "result=[{R1}]"')
    hitl = HumanInTheLoopMiddleware(interrupt_on={"archive": True})
    app = create_agent(
        ScriptedChatModel(replies=[plan]),
        tools=[archive],
        middleware=[ToolsPlannerMiddleware(), hitl],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": "edited"}}
    app.invoke({"messages": [HumanMessage("archive")]}, thread)
    edit = {"type": "edit", "edited_action": {"name": "archive", "args": {"folder": "old"}}}
    out = app.invoke(Command(resume={"decisions": [edit]}), thread)
    assert out["messages"][-1].text == f"result=[{result}]"
