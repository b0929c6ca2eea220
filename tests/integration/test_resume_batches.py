"""An interrupt inside or after a ``parallel_tools`` batch: on resume no completed call runs again.

Two plans, each with a batch of marked ``fetch`` calls:

* ``INSIDE``: ``ask`` is marked too and runs in the same batch as ``fetch(1)`` and ``fetch(2)``;
  it interrupts while (or after) they complete;
* ``AFTER``: the batch ``fetch(1)``, ``fetch(2)`` completes, the machine runs on past a pure
  instruction, and the unmarked ``ask`` that follows interrupts (before the fix, in the same
  node of the plan graph as the batch).

Each case counts how often each tool really ran over the pause and the resume: every ``fetch``
once, ``ask`` twice (LangGraph re-runs the interrupted call, and ``interrupt()`` then returns
the resume value). It runs on every path (the agent path, the middleware's graph execution,
the nodes), at ``"block"`` and ``"instruction"``, sync and async, with ``InMemorySaver``, SQLite
and PostgreSQL; the durable savers resume from a new agent or graph with a new connection and a
model that has no replies left. The scripted model's reply is written by hand.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
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
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from llassembly import AToolsPlannerNode, ToolsPlannerMiddleware, ToolsPlannerNode

RAN: Counter[str] = Counter()
_LOCK = threading.Lock()


@tool
def fetch(n: int) -> int:
    """Fetch crate n; returns 10 times n."""
    with _LOCK:
        RAN[f"fetch{n}"] += 1
    return 10 * n


@tool
def ask(question: str) -> str:
    """Ask the human a yes/no question; returns "yes" or "no"."""
    with _LOCK:
        RAN["ask"] += 1
    answer: str = interrupt({"question": question})
    return answer


TOOLS = [fetch, ask]

INSIDE = """```asm
PUSH 1
CALL fetch
PUSH 2
CALL fetch
PUSH "Fetch crate 3?"
CALL ask
POP R3
POP R2
POP R1
CMP R3, "yes"
JNE done
PUSH 3
CALL fetch
POP R4
done:
HLT
```"""

AFTER = """```asm
PUSH 1
CALL fetch
PUSH 2
CALL fetch
MOV R5, 7
POP R2
POP R1
PUSH "Fetch crate 3?"
CALL ask
POP R3
CMP R3, "yes"
JNE done
PUSH 3
CALL fetch
POP R4
done:
HLT
```"""

Plan = Literal["inside", "after"]
PLANS: dict[Plan, tuple[str, list[str]]] = {
    "inside": (INSIDE, ["fetch", "ask"]),
    "after": (AFTER, ["fetch"]),
}
Surface = Literal["agent", "graph-agent", "node"]
Granularity = Literal["block", "instruction"]
SURFACES: list[Surface] = ["agent", "graph-agent", "node"]
GRANULARITIES: list[Granularity] = ["block", "instruction"]
THREAD: RunnableConfig = {"configurable": {"thread_id": "crates-1"}}


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def build(
    surface: Surface,
    plan: Plan,
    model: ScriptedChatModel,
    saver: Any,
    granularity: Granularity,
    *,
    is_async: bool = False,
) -> Any:
    marked = PLANS[plan][1]
    if surface in ("agent", "graph-agent"):
        execution = "agent" if surface == "agent" else "graph"
        planner = ToolsPlannerMiddleware(
            execution=execution, granularity=granularity, parallel_tools=marked, tools=TOOLS
        )
        return create_agent(model, tools=TOOLS, middleware=[planner], checkpointer=saver)
    node = (AToolsPlannerNode if is_async else ToolsPlannerNode)(
        model, TOOLS, granularity=granularity, parallel_tools=marked
    )
    builder = StateGraph(MessagesState)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile(checkpointer=saver)


def assert_paused(result: dict[str, Any]) -> None:
    assert result["__interrupt__"][0].value == {"question": "Fetch crate 3?"}
    assert RAN == {"fetch1": 1, "fetch2": 1, "ask": 1}


def assert_finished_once(result: dict[str, Any]) -> None:
    assert "__interrupt__" not in result
    assert RAN == {"fetch1": 1, "fetch2": 1, "ask": 2, "fetch3": 1}
    messages = result["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert sorted((c["name"], tuple(c["args"].values())) for c in calls) == [
        ("ask", ("Fetch crate 3?",)),
        ("fetch", (1,)),
        ("fetch", (2,)),
        ("fetch", (3,)),
    ]
    answers = {m.tool_call_id: m.text for m in messages if isinstance(m, ToolMessage)}
    assert sorted(answers) == sorted(str(c["id"]) for c in calls)
    assert sorted(answers.values()) == ["10", "20", "30", "yes"]
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    record = final.response_metadata["llassembly"]
    assert record["status"] == "finished"
    assert record["tool_calls"] == 4
    registers = {k: v for k, v in record["registers"].items() if k != "R5"}  # R5: "after" only
    assert registers == {"R1": 10, "R2": 20, "R3": "yes", "R4": 30}


# -- savers: each opens the same storage again, as a new process would -----------------------

Opener = Callable[[], Any]


def memory_opener() -> Opener:
    saver = InMemorySaver()

    @contextmanager
    def open_saver() -> Iterator[Any]:
        yield saver

    return open_saver


def sqlite_opener(path: Path) -> Opener:
    @contextmanager
    def open_saver() -> Iterator[Any]:
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()

    return open_saver


def postgres_opener(dsn: str) -> Opener:
    @contextmanager
    def open_saver() -> Iterator[Any]:
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            yield saver

    return open_saver


def async_sqlite_opener(path: Path) -> Callable[[], AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def open_saver() -> AsyncIterator[Any]:
        conn = await aiosqlite.connect(path)
        try:
            yield AsyncSqliteSaver(conn)
        finally:
            await conn.close()

    return open_saver


def async_postgres_opener(dsn: str) -> Callable[[], AbstractAsyncContextManager[Any]]:
    @asynccontextmanager
    async def open_saver() -> AsyncIterator[Any]:
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
            yield saver

    return open_saver


def async_memory_opener() -> Callable[[], AbstractAsyncContextManager[Any]]:
    saver = InMemorySaver()

    @asynccontextmanager
    async def open_saver() -> AsyncIterator[Any]:
        yield saver

    return open_saver


Saver = Literal["memory", "sqlite", "postgres"]
SAVERS: list[Saver] = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=SAVERS)
def saver_kind(request: pytest.FixtureRequest) -> Saver:
    kind: Saver = request.param
    return kind


@pytest.fixture
def storage(saver_kind: Saver, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where the saver keeps its checkpoints: a file, a database, or nothing (in memory)."""
    if saver_kind == "postgres":
        dsn: str = request.getfixturevalue("postgres")
        return dsn
    return str(tmp_path / "db.sqlite")


def opener(kind: Saver, where: str) -> Opener:
    if kind == "memory":
        return memory_opener()
    if kind == "sqlite":
        return sqlite_opener(Path(where))
    return postgres_opener(where)


def async_opener(kind: Saver, where: str) -> Callable[[], AbstractAsyncContextManager[Any]]:
    if kind == "memory":
        return async_memory_opener()
    if kind == "sqlite":
        return async_sqlite_opener(Path(where))
    return async_postgres_opener(where)


# -- the cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize("plan", ["inside", "after"])
@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("surface", SURFACES)
def test_resume_after_an_interrupt_in_or_after_a_batch_runs_no_completed_call_again(
    surface: Surface, granularity: Granularity, plan: Plan, saver_kind: Saver, storage: str
) -> None:
    open_saver = opener(saver_kind, storage)
    model = ScriptedChatModel(replies=[PLANS[plan][0]])
    with open_saver() as saver:
        first = build(surface, plan, model, saver, granularity)
        assert_paused(first.invoke({"messages": [HumanMessage("Fetch the crates.")]}, THREAD))

    no_replies_left = ScriptedChatModel(replies=[])  # calling it would fail the test
    with open_saver() as saver:
        second = build(surface, plan, no_replies_left, saver, granularity)
        result = second.invoke(Command(resume="yes"), THREAD)
        assert second.get_state(THREAD).next == ()

    assert_finished_once(result)
    assert len(model.calls) == 1
    assert no_replies_left.calls == []


@pytest.mark.parametrize("plan", ["inside", "after"])
@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("surface", SURFACES)
async def test_async_resume_after_an_interrupt_in_or_after_a_batch_runs_no_completed_call_again(
    surface: Surface, granularity: Granularity, plan: Plan, saver_kind: Saver, storage: str
) -> None:
    open_saver = async_opener(saver_kind, storage)
    model = ScriptedChatModel(replies=[PLANS[plan][0]])
    async with open_saver() as saver:
        first = build(surface, plan, model, saver, granularity, is_async=True)
        paused = await first.ainvoke({"messages": [HumanMessage("Fetch the crates.")]}, THREAD)
        assert_paused(paused)

    no_replies_left = ScriptedChatModel(replies=[])
    async with open_saver() as saver:
        second = build(surface, plan, no_replies_left, saver, granularity, is_async=True)
        result = await second.ainvoke(Command(resume="yes"), THREAD)
        assert (await second.aget_state(THREAD)).next == ()

    assert_finished_once(result)
    assert len(model.calls) == 1
    assert no_replies_left.calls == []


# -- a call of the interrupted batch failed: the failure survives the pause ------------------


@tool
def broken(n: int) -> int:
    """Always fails."""
    with _LOCK:
        RAN["broken"] += 1
    raise RuntimeError(f"crate {n} is lost")


FAILING = """```asm
PUSH 1
CALL fetch
PUSH 5
CALL broken
PUSH "Go on?"
CALL ask
POP R3
POP R2
POP R1
```"""


def failing_app(surface: Surface, model: ScriptedChatModel, saver: Any) -> Any:
    tools = [fetch, broken, ask]
    if surface == "graph-agent":
        planner = ToolsPlannerMiddleware(
            execution="graph", parallel_tools=True, on_tool_error="stop", tools=tools
        )
        return create_agent(model, tools=tools, middleware=[planner], checkpointer=saver)
    builder = StateGraph(MessagesState)
    node = ToolsPlannerNode(model, tools, parallel_tools=True, on_tool_error="stop")
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("surface", ["graph-agent", "node"])
def test_a_call_that_failed_in_an_interrupted_batch_stops_the_plan_after_the_resume(
    surface: Surface, tmp_path: Path
) -> None:
    """The failure is kept as a record while the batch waits; the resumed plan stops with it,
    in a new instance as in the same one, and no call runs again."""
    outcomes = []
    for fresh in (False, True):
        RAN.clear()
        open_saver = sqlite_opener(tmp_path / f"{fresh}.sqlite")
        with open_saver() as saver:
            first = failing_app(surface, ScriptedChatModel(replies=[FAILING]), saver)
            paused = first.invoke({"messages": [HumanMessage("Fetch.")]}, THREAD)
            assert paused["__interrupt__"][0].value == {"question": "Go on?"}
            if not fresh:
                result = first.invoke(Command(resume="yes"), THREAD)
        if fresh:
            with open_saver() as saver:
                second = failing_app(surface, ScriptedChatModel(replies=[]), saver)
                result = second.invoke(Command(resume="yes"), THREAD)
        assert RAN == {"fetch1": 1, "broken": 1, "ask": 2}
        final = result["messages"][-1]
        assert final.response_metadata["llassembly"]["status"] == "stopped"
        error = final.response_metadata["llassembly"]["error"]
        assert "crate 5 is lost" in error["message"] and error["source"] == "CALL broken"
        outcomes.append([(type(m).__name__, m.text) for m in result["messages"][1:]])
    assert outcomes[0] == outcomes[1]


TWO_QUESTIONS = """```asm
PUSH 1
CALL fetch
PUSH "A?"
CALL ask
PUSH "B?"
CALL ask
POP R3
POP R2
POP R1
```"""


@pytest.mark.parametrize("surface", SURFACES)
def test_two_calls_of_a_batch_interrupt_and_one_resume_answers_both(surface: Surface) -> None:
    """Each interrupting call is a task of its own: both questions are asked at once, and a
    resume that answers each by its id runs only those two again."""
    app = build(
        surface, "inside", ScriptedChatModel(replies=[TWO_QUESTIONS]), InMemorySaver(), "block"
    )
    paused = app.invoke({"messages": [HumanMessage("Fetch.")]}, THREAD)
    asked = paused["__interrupt__"]
    assert sorted(i.value["question"] for i in asked) == ["A?", "B?"]
    assert RAN == {"fetch1": 1, "ask": 2}
    answers = {i.id: f"{i.value['question']} yes" for i in asked}
    out = app.invoke(Command(resume=answers), THREAD)
    assert RAN == {"fetch1": 1, "ask": 4}
    registers = out["messages"][-1].response_metadata["llassembly"]["registers"]
    assert registers == {"R1": 10, "R2": "A? yes", "R3": "B? yes"}
