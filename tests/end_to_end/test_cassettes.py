"""Use cases end to end through ``ChatOllama``, Ollama's ``/api/chat`` replayed by vcrpy.

Every cassette in ``tests/cassettes/`` was WRITTEN BY HAND: no Ollama server was available
when they were made, so none of them is a recording of a real model. Each response follows
Ollama's streaming wire format (NDJSON lines of ``model``, ``created_at``, ``message`` with
``content`` and gpt-oss's ``thinking``, ``done``; the last line has ``done_reason`` and the
timing fields), and each program is written the way a real model writes one (fences,
comments, data sections, mixed case).

Replay is in record mode ``"none"``: a request without a matching interaction fails the test
instead of reaching the network. Each test checks the tool calls made, the final world state,
that exactly one HTTP interaction (one model call) happened, and what the library really sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import vcr  # type: ignore[import-untyped]
from conftest import TESTS
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_ollama import ChatOllama
from langgraph.graph import END, START, MessagesState, StateGraph
from use_cases.world import (
    NPC_TOOLS,
    WEATHER_TOOLS,
    Enemy,
    UnitContext,
    WeatherContext,
)

from llassembly import AToolsPlannerNode, ToolsPlannerMiddleware, ToolsPlannerNode

CASSETTES = TESTS / "cassettes"
REPLAY = vcr.VCR(
    cassette_library_dir=str(CASSETTES),
    record_mode="none",
    match_on=["method", "path"],
)
NPC_SYSTEM = "You control an NPC unit in a grid game. Coordinates are (x, y)."


class Replay:
    """One cassette being replayed, plus the request bodies the Ollama client really sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.cassette: Any = None

    def model(self) -> ChatOllama:
        def record(request: httpx.Request) -> None:
            self.sent.append(json.loads(request.content))

        async def arecord(request: httpx.Request) -> None:
            record(request)

        return ChatOllama(
            model="gpt-oss:20b",
            base_url="http://localhost:11434",
            sync_client_kwargs={"event_hooks": {"request": [record]}},
            async_client_kwargs={"event_hooks": {"request": [arecord]}},
        )

    def assert_one_model_call(self, tools: list[Any], human: str) -> None:
        """Exactly one HTTP interaction, and it asked for a plan with no tools bound."""
        assert self.cassette.play_count == 1
        assert self.cassette.all_played
        assert len(self.sent) == 1
        body = self.sent[0]
        assert body["model"] == "gpt-oss:20b"
        assert body["stream"] is True
        assert not body.get("tools")  # plans call the tools; the model is offered none
        system, *rest = body["messages"]
        assert system["role"] == "system"
        for t in tools:
            assert f"## {t.name}\n" in system["content"]
        assert rest[-1] == {"role": "user", "content": human}


@contextmanager
def replay(name: str) -> Iterator[Replay]:
    r = Replay()
    with REPLAY.use_cassette(f"{name}.yaml") as cassette:
        r.cassette = cassette
        yield r


def executed_calls(messages: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``(tool, args)`` of each executed call, from the messages the turn added."""
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    assert [c["id"] for c in calls if c["id"] not in answered] == []
    return [(c["name"], c["args"]) for c in calls]


def final_meta(messages: list[Any]) -> dict[str, Any]:
    last = messages[-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    meta: dict[str, Any] = last.response_metadata["llassembly"]
    return meta


def npc_graph(node: Any) -> Any:
    builder = StateGraph(MessagesState, context_schema=UnitContext)
    builder.add_node("planner", node)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile()


GP: tuple[Any, ...] = ("get_current_position",)
GE: tuple[Any, ...] = ("get_enemies_around",)


def test_npc_moves_in_a_loop_to_5_5_then_7_7() -> None:
    """create_agent + middleware. The cassette's response was WRITTEN BY HAND (no model server
    here), not recorded: a program with a data section and two position/step loops."""
    human = "Move to 5,5 and then to 7,7. Take one step at a time until you get there."
    unit = UnitContext(x=2, y=3)
    with replay("move_loop") as r:
        agent = create_agent(
            r.model(),
            tools=NPC_TOOLS,
            middleware=[ToolsPlannerMiddleware()],
            context_schema=UnitContext,
        )
        result = agent.invoke(
            {"messages": [SystemMessage(NPC_SYSTEM), HumanMessage(human)]}, context=unit
        )
        r.assert_one_model_call(NPC_TOOLS, human)

    to55, to77 = ("make_one_step", 5, 5), ("make_one_step", 7, 7)
    assert unit.log == [GP, to55, GP, to55, GP, to55, GP, GP, to77, GP, to77, GP]
    assert unit.position == (7, 7)
    calls = executed_calls(result["messages"])
    assert [name for name, _ in calls] == [entry[0] for entry in unit.log]
    assert calls[1] == ("make_one_step", {"x": 5, "y": 5})
    meta = final_meta(result["messages"])
    assert meta["status"] == "finished"
    assert meta["model_calls"] == 1 and meta["tool_calls"] == 12


def test_npc_attacks_enemies_on_the_way_picking_up_the_sword_then_goes_to_7_7() -> None:
    """create_agent + middleware. The cassette's response was WRITTEN BY HAND (no model server
    here), not recorded; its program follows the shape of a gpt-oss:20b plan for this task."""
    human = (
        "Go to 5,5. If you meet an enemy on the way, attack it with your sword (pick the sword "
        "up first if you don't hold it). Then run to 7,7."
    )
    unit = UnitContext(x=2, y=2, enemies={7: Enemy(4, 4, hp=1), 9: Enemy(0, 9, hp=3)})
    with replay("attack_on_the_way") as r:
        agent = create_agent(
            r.model(),
            tools=NPC_TOOLS,
            middleware=[ToolsPlannerMiddleware()],
            context_schema=UnitContext,
        )
        result = agent.invoke(
            {"messages": [SystemMessage(NPC_SYSTEM), HumanMessage(human)]}, context=unit
        )
        r.assert_one_model_call(NPC_TOOLS, human)

    to55, to77 = ("make_one_step", 5, 5), ("make_one_step", 7, 7)
    assert unit.log == [
        GP, GE, to55,                                                  # (2,2): nobody near
        GP, GE, ("has_sword",), ("pick_sword",), ("attack_enemy", 7), to55,  # (3,3): enemy 7
        GP, GE, to55,                                                  # (4,4): enemy 7 is dead
        GP,                                                            # (5,5)
        GP, to77, GP, to77, GP,                                        # on to (7,7)
    ]  # fmt: skip
    assert unit.position == (7, 7)
    assert unit.sword is True
    assert unit.enemies[7].hp == 0 and unit.enemies[9].hp == 3
    calls = executed_calls(result["messages"])
    assert ("attack_enemy", {"enemy_id": 7}) in calls
    assert len(calls) == len(unit.log)
    meta = final_meta(result["messages"])
    assert meta["status"] == "finished"
    assert meta["model_calls"] == 1
    assert (meta["registers"]["R1"], meta["registers"]["R2"]) == (7, 7)  # the last target


def test_npc_fights_until_no_enemy_is_left_drops_the_sword_and_goes_to_4_4() -> None:
    """StateGraph + ToolsPlannerNode (sync). The cassette's response was WRITTEN BY HAND (no
    model server here), not recorded: lower-case NASM-style code with prose around the fence."""
    human = "Attack the enemies around you until none remain, then drop your sword and go to 4,4."
    unit = UnitContext(
        x=3,
        y=3,
        sword=True,
        sword_on_ground=False,
        enemies={1: Enemy(4, 3, hp=2), 2: Enemy(2, 2, hp=1), 3: Enemy(8, 8, hp=5)},
    )
    with replay("clear_enemies") as r:
        graph = npc_graph(ToolsPlannerNode(r.model(), tools=NPC_TOOLS))
        result = graph.invoke(
            {"messages": [SystemMessage(NPC_SYSTEM), HumanMessage(human)]}, context=unit
        )
        r.assert_one_model_call(NPC_TOOLS, human)

    assert unit.log == [
        GE, ("attack_enemy", 1),
        GE, ("attack_enemy", 1),
        GE, ("attack_enemy", 2),
        GE,
        ("drop_sword",),
        GP, ("make_one_step", 4, 4), GP,
        ("say", "Area clear."),
    ]  # fmt: skip
    assert unit.position == (4, 4)
    assert unit.sword is False and unit.sword_on_ground is True
    assert {i: e.hp for i, e in unit.enemies.items()} == {1: 0, 2: 0, 3: 5}
    assert len(executed_calls(result["messages"])) == len(unit.log)
    assert final_meta(result["messages"])["model_calls"] == 1


async def test_weather_watch_loops_over_cities_and_notifies_for_warm_ones() -> None:
    """create_agent + middleware, async (ainvoke, httpx.AsyncClient). The cassette's response
    was WRITTEN BY HAND (no model server here), not recorded: an index loop with a float
    threshold constant."""
    human = "Check every city on my watch list and notify me about each one warmer than 20 degrees."
    weather = WeatherContext(
        cities=["Paris", "Oslo", "Cairo", "Lima"],
        temperatures={"Paris": 24.5, "Oslo": 9.0, "Cairo": 33.0, "Lima": 19.5},
    )
    with replay("weather_watch") as r:
        agent = create_agent(
            r.model(),
            tools=WEATHER_TOOLS,
            middleware=[ToolsPlannerMiddleware()],
            context_schema=WeatherContext,
        )
        system = SystemMessage("You watch the weather for the user.")
        result = await agent.ainvoke({"messages": [system, HumanMessage(human)]}, context=weather)
        r.assert_one_model_call(WEATHER_TOOLS, human)

    assert weather.log == [
        ("get_city_count",),
        ("get_city_name", 0), ("get_temperature", "Paris"), ("notify", "Paris", 24.5),
        ("get_city_name", 1), ("get_temperature", "Oslo"),
        ("get_city_name", 2), ("get_temperature", "Cairo"), ("notify", "Cairo", 33.0),
        ("get_city_name", 3), ("get_temperature", "Lima"),
    ]  # fmt: skip
    assert weather.notifications == ["Paris: 24.5 C", "Cairo: 33 C"]
    calls = executed_calls(result["messages"])
    assert ("notify", {"city": "Cairo", "temperature": 33.0}) in calls
    meta = final_meta(result["messages"])
    assert meta["model_calls"] == 1 and meta["tool_calls"] == 11
    assert meta["registers"]["R1"] == 4  # the loop index ran past the last city


async def test_patrol_route_argument_is_a_pydantic_model_given_as_json_text() -> None:
    """StateGraph + AToolsPlannerNode (async). The cassette's response was WRITTEN BY HAND (no
    model server here), not recorded: the JSON argument lives in a ``section .rodata`` string."""
    human = "Patrol between 2,2 and 6,2, two laps, and tell me when the route is set."
    unit = UnitContext(x=2, y=2)
    with replay("patrol_route") as r:
        graph = npc_graph(AToolsPlannerNode(r.model(), tools=NPC_TOOLS))
        result = await graph.ainvoke(
            {"messages": [SystemMessage(NPC_SYSTEM), HumanMessage(human)]}, context=unit
        )
        r.assert_one_model_call(NPC_TOOLS, human)

    route = {"waypoints": [{"x": 2, "y": 2}, {"x": 6, "y": 2}], "laps": 2}
    assert unit.log == [
        ("set_patrol_route", route),
        ("say", "Patrol route set, moving out."),
    ]
    assert unit.patrol == [(2, 2), (6, 2), (2, 2), (6, 2)]
    calls = executed_calls(result["messages"])
    assert calls[0][0] == "set_patrol_route"
    meta = final_meta(result["messages"])
    assert meta["model_calls"] == 1
    assert meta["registers"]["R1"] == 4


def test_a_request_the_cassette_does_not_hold_never_reaches_the_network() -> None:
    """Record mode "none": a second model call finds no interaction left and fails loudly
    (the cassette, written by hand, holds exactly one response)."""
    with replay("patrol_route") as r:
        model = r.model()
        model.invoke([HumanMessage("first")])
        with pytest.raises(vcr.errors.CannotOverwriteExistingCassetteException):
            model.invoke([HumanMessage("second")])
