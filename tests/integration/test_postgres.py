"""Pause and resume on PostgreSQL (``PostgresSaver``, ``AsyncPostgresSaver``), in one process.

The same plan and checks as ``test_interrupts.py``: a tool interrupts in the middle of a plan,
and a new agent (or graph) built from scratch, with a new saver connection, a model that has no
replies left and only the thread id, resumes it. No completed call runs twice and the model is
not called again. Each test gets its own empty database (the ``postgres`` fixture).

Many processes, crashes and a queue of threads are in ``test_workers.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import ScriptedChatModel
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Command
from test_interrupts import (
    CALLS,
    PLAN,
    THREAD,
    Granularity,
    Surface,
    assert_finished_once,
    assert_paused,
    build,
)

# The agent path ignores granularity; the graph path and the nodes checkpoint between calls
# at "block" and "instruction" ("program" does not, see test_interrupts.py).
CASES: list[tuple[Surface, Granularity]] = [
    ("agent", "block"),
    ("graph-agent", "block"),
    ("graph-agent", "instruction"),
    ("node", "block"),
    ("node", "instruction"),
]
CASE = pytest.mark.parametrize(("surface", "granularity"), CASES)


@pytest.fixture(autouse=True)
def _reset_calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


@CASE
def test_resume_on_postgres_from_a_new_instance_runs_no_completed_call_twice(
    surface: Surface, granularity: Granularity, postgres: str
) -> None:
    model = ScriptedChatModel(replies=[PLAN])
    with PostgresSaver.from_conn_string(postgres) as saver:
        saver.setup()
        first = build(surface, model, saver, granularity)
        assert_paused(first.invoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD))

    no_replies_left = ScriptedChatModel(replies=[])  # calling it would fail the test
    with PostgresSaver.from_conn_string(postgres) as saver:
        second = build(surface, no_replies_left, saver, granularity, fresh_process=True)
        result = second.invoke(Command(resume="yes"), THREAD)
        assert second.get_state(THREAD).next == ()

    assert_finished_once(result)
    assert len(model.calls) == 1
    assert no_replies_left.calls == []


@CASE
async def test_async_resume_on_postgres_from_a_new_instance_runs_no_completed_call_twice(
    surface: Surface, granularity: Granularity, postgres: str
) -> None:
    model = ScriptedChatModel(replies=[PLAN])
    async with AsyncPostgresSaver.from_conn_string(postgres) as saver:
        await saver.setup()
        first = build(surface, model, saver, granularity, is_async=True)
        paused = await first.ainvoke({"messages": [HumanMessage("Walk three steps.")]}, THREAD)
        assert_paused(paused)

    no_replies_left = ScriptedChatModel(replies=[])
    async with AsyncPostgresSaver.from_conn_string(postgres) as saver:
        second = build(
            surface, no_replies_left, saver, granularity, is_async=True, fresh_process=True
        )
        result = await second.ainvoke(Command(resume="yes"), THREAD)
        assert (await second.aget_state(THREAD)).next == ()

    assert_finished_once(result)
    assert len(model.calls) == 1
    assert no_replies_left.calls == []
