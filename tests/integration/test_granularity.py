"""The three plan-graph granularities ("block", "instruction", "program") are interchangeable:
the same plan makes the same tool calls, the same messages and ends in the same registers,
through the middleware and through the nodes, sync and async.

Every model reply here is written by hand (``ScriptedChatModel``); the NPC plan is the seed
plan from the project brief, a hand-written example of what a model writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import FLAKY_PLAN, Harness, Toolbox, asm, meta, planned_calls, shape
from fakes import NPC_PLAN
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from llassembly.errors import UsageError
from llassembly.integration.graph import (
    GRANULARITIES,
    PlanGraph,
    PlanRun,
)
from llassembly.language.parser import parse
from llassembly.machine import steps
from llassembly.machine.externs import externs_from
from llassembly.machine.state import ToolCall
from llassembly.machine.steps import compile_program


@dataclass
class Grid:
    """A small NPC world: the unit starts at (0, 0); enemies 7 at (2, 2) and 9 at (4, 4)."""

    x: int = 0
    y: int = 0
    sword: bool = False
    enemies: dict[tuple[int, int], int] = field(default_factory=lambda: {(2, 2): 7, (4, 4): 9})
    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def tools(self) -> list[BaseTool]:
        grid = self

        @tool
        def get_current_position() -> tuple[int, int]:
            """Where the unit stands, as (x, y)."""
            grid.log.append(("get_current_position", {}))
            return (grid.x, grid.y)

        @tool
        def get_enemies_around() -> int:
            """Id of an enemy next to the unit, 0 if none."""
            grid.log.append(("get_enemies_around", {}))
            return grid.enemies.get((grid.x, grid.y), 0)

        @tool
        def has_sword() -> bool:
            """Whether the unit holds a sword."""
            grid.log.append(("has_sword", {}))
            return grid.sword

        @tool
        def pick_sword() -> None:
            """Pick up a sword."""
            grid.log.append(("pick_sword", {}))
            grid.sword = True

        @tool
        def attack_enemy(enemy_id: int) -> None:
            """Attack an enemy by id."""
            grid.log.append(("attack_enemy", {"enemy_id": enemy_id}))
            grid.enemies = {k: v for k, v in grid.enemies.items() if v != enemy_id}

        @tool
        def make_one_step(x: int, y: int) -> None:
            """Take one step towards (x, y)."""
            grid.log.append(("make_one_step", {"x": x, "y": y}))
            grid.x += (x > grid.x) - (x < grid.x)
            grid.y += (y > grid.y) - (y < grid.y)

        return [
            get_current_position,
            get_enemies_around,
            has_sword,
            pick_sword,
            attack_enemy,
            make_one_step,
        ]


LOOP_WITH_CALLS = asm(
    """
MOV R1, 0
MOV R2, 0
loop:
PUSH R1
CALL increment
POP R1
PUSH "Oslo"
CALL get_temperature
POP R3
ADD R2, R3
CMP R1, 4
JL loop
"""
)

SUBROUTINES = asm(
    """
global _start
bump:
PUSH R1
CALL increment
POP R1
RET
_start:
MOV R1, 10
CALL bump
CALL bump
CALL report
HLT
report:
CALL position
POP R4
POP R5
PUSH "done"
CALL notify
RET
"""
)

PROGRAMS = {
    "loop": (LOOP_WITH_CALLS, set()),
    "subroutines": (SUBROUTINES, set()),
    "npc": (NPC_PLAN, set()),
    "failing": (FLAKY_PLAN, {3}),
}
# The middleware on the graph path (each granularity), the nodes (each granularity), and the
# middleware on the agent path (its calls run in the agent's tool node; granularity does not
# apply, so it runs once per harness).
HARNESSES = [("agent", False), ("agent", True), ("node", False), ("node", True)]
RUNS = [
    (kind, asynchronous, execution, granularity)
    for kind, asynchronous in HARNESSES
    for execution in (["graph", "agent"] if kind == "agent" else ["graph"])
    for granularity in (GRANULARITIES if execution == "graph" else ("block",))
]


async def _run(
    name: str, kind: str, asynchronous: bool, granularity: str, execution: str = "graph"
) -> dict[str, Any]:
    plan, fail_on = PROGRAMS[name]
    world: Grid | Toolbox = Grid() if name == "npc" else Toolbox(fail_on=set(fail_on))
    tools = world.tools if isinstance(world, Grid) else world.sync_tools
    harness = Harness(kind, asynchronous)
    extra = {"execution": execution} if kind == "agent" else {}
    out = await harness.run(
        [plan], tools, [HumanMessage("Go.")], granularity=granularity, max_tool_calls=500, **extra
    )
    final = out["messages"][-1]
    return {
        "executed": list(world.log),
        "recorded": planned_calls(out["messages"]),
        "messages": shape(out["messages"]),
        "registers": meta(final)["registers"],
        "status": meta(final)["status"],
        "model_calls": len(harness.model.calls),
    }


@pytest.mark.parametrize("name", list(PROGRAMS))
async def test_every_granularity_gives_the_same_calls_messages_and_registers(name: str) -> None:
    runs = {
        (kind, asynchronous, execution, granularity): await _run(
            name, kind, asynchronous, granularity, execution
        )
        for kind, asynchronous, execution, granularity in RUNS
    }
    assert ("agent", True, "agent", "block") in runs
    reference = runs["node", False, "graph", "block"]
    assert reference["executed"], "the plan made no tool call at all"
    assert reference["model_calls"] == 1
    for key, run in runs.items():
        assert run == reference, key


async def test_npc_plan_walks_fights_and_arrives() -> None:
    grid = Grid()
    harness = Harness("node", asynchronous=False)
    out = await harness.run([NPC_PLAN], grid.tools, granularity="instruction", max_tool_calls=500)
    assert (grid.x, grid.y) == (7, 7)
    assert [a for a in grid.log if a[0] in {"pick_sword", "attack_enemy"}] == [
        ("pick_sword", {}),
        ("attack_enemy", {"enemy_id": 7}),
        ("attack_enemy", {"enemy_id": 9}),
    ]
    registers = meta(out["messages"][-1])["registers"]
    assert (registers["R1"], registers["R2"], registers["R3"], registers["R4"]) == (7, 7, 7, 7)


async def test_failing_plan_stops_at_the_same_call_at_every_granularity() -> None:
    finals = []
    for granularity in GRANULARITIES:
        run = await _run("failing", "agent", False, granularity, "graph")
        assert run["status"] == "stopped"
        assert [name for name, _ in run["executed"]] == ["flaky"] * 3
        finals.append(run["messages"][-1])
    on_agent_path = await _run("failing", "agent", False, "block", "agent")
    assert [name for name, _ in on_agent_path["executed"]] == ["flaky"] * 3
    finals.append(on_agent_path["messages"][-1])
    assert finals[0] == finals[1] == finals[2] == finals[3]
    assert "the tool flaky failed" in finals[0][1]


# -- drawing and serialising ----------------------------------------------------------------------


def _plan_graph(text: str, granularity: Any, tools: list[BaseTool]) -> PlanGraph:
    externs = externs_from(tools)
    program = parse(text)
    compiled = compile_program(program, externs, max_stack_depth=64)  # type: ignore[arg-type]
    return PlanGraph(compiled, granularity, max_instructions_to_exec=1000, max_tool_calls=100)


def test_instruction_graph_draws_each_instruction_and_taken_edges() -> None:
    text = asm('PUSH "Paris"\nCALL get_temperature\nPOP R1\nCMP R1, 20\nJLE cold\nHLT\ncold:\nNOP')
    mermaid = _plan_graph(text, "instruction", Toolbox().sync_tools).draw_mermaid()
    for needle in ("CALL get_temperature", "POP R1", "CMP R1, 20", "JLE cold", "HLT"):
        assert needle in mermaid, needle
    assert "i1(L4 CALL get_temperature)" in mermaid
    # JLE (node i4) goes to `cold` (i6) when taken and falls through to HLT (i5) when not.
    assert re.search(r"i4 -\. &nbsp;taken&nbsp; \.-> i6;", mermaid)
    assert re.search(r"i4 -\. &nbsp;not taken&nbsp; \.-> i5;", mermaid)


def test_block_graph_has_far_fewer_nodes_than_instruction_graph() -> None:
    tools = Grid().tools
    per_instruction = _plan_graph(NPC_PLAN, "instruction", tools)
    per_block = _plan_graph(NPC_PLAN, "block", tools)
    count = len(per_instruction.compiled.program.instructions)
    assert len(per_instruction.graph.get_graph().nodes) == count + 2  # plus start and end
    assert len(per_block.graph.get_graph().nodes) < count // 2


def _direct_run(tools: list[BaseTool]) -> PlanRun:
    externs = externs_from(tools)

    def execute(call: ToolCall, config: RunnableConfig, asynchronous: bool) -> Any:
        extern = externs[call.tool]
        return extern.acall(call.args) if asynchronous else extern.call(call.args)

    return PlanRun(execute, "asmtest_")


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("name", ["subroutines", "failing"])
def test_plan_graph_state_survives_a_msgpack_round_trip(name: str, granularity: Any) -> None:
    plan, fail_on = PROGRAMS[name]
    tools = Toolbox(fail_on=set(fail_on)).sync_tools
    graph = _plan_graph(plan, granularity, tools)
    run = _direct_run(tools)
    state = graph.graph.invoke(graph.initial_state(), graph.config_for(run))
    assert (state.get("failure") is not None) == bool(fail_on)
    serde = JsonPlusSerializer()
    restored = serde.loads_typed(serde.dumps_typed(state))
    assert restored == state
    assert serde.dumps_typed(state)[0] == "msgpack"
    assert any(isinstance(m, ToolMessage) for m in restored["messages"])


@pytest.mark.parametrize("granularity", GRANULARITIES)
async def test_checkpointed_planner_state_survives_a_msgpack_round_trip(granularity: Any) -> None:
    box = Toolbox(fail_on={3})
    harness = Harness("agent", asynchronous=False)
    config = {"configurable": {"thread_id": f"serde-{granularity}"}}
    await harness.run(
        [FLAKY_PLAN], box.sync_tools, config=config, checkpointer=InMemorySaver(),
        granularity=granularity,
    )  # fmt: skip
    values = harness.runnable.get_state(config).values
    serde = JsonPlusSerializer()
    kind, data = serde.dumps_typed(values)
    assert kind == "msgpack"
    restored = serde.loads_typed((kind, data))
    assert shape(restored["messages"]) == shape(values["messages"])
    assert isinstance(restored["messages"][-1], AIMessage)


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_a_plan_with_its_own_stack_limit_is_not_compiled_again_as_it_runs(
    granularity: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan compiled with a stack limit other than the default runs on its compilation:
    neither the run's start nor a batch's call task compiles it again (each did: a machine
    made with the default limit recompiled the program)."""
    tools = Toolbox().sync_tools
    text = asm('PUSH "Paris"\nCALL get_temperature\nPOP R1\nPUSH "Oslo"\nCALL get_temperature')
    compiled = compile_program(parse(text), externs_from(tools), max_stack_depth=64)  # type: ignore[arg-type]
    graph = PlanGraph(compiled, granularity, parallel_tools=True)
    again: list[object] = []
    real = steps._compile_steps
    monkeypatch.setattr(steps, "_compile_steps", lambda *args: again.append(args) or real(*args))
    state = graph.graph.invoke(graph.initial_state(), graph.config_for(_direct_run(tools)))
    assert state["failure"] is None
    assert sum(isinstance(m, ToolMessage) for m in state["messages"]) == 2
    assert again == []


@pytest.mark.parametrize("granularity", ["line", "Block", "", None])
def test_a_plan_graph_of_an_unknown_granularity_is_refused(granularity: Any) -> None:
    words = r"^granularity must be one of \('block', 'instruction', 'program'\), got "
    with pytest.raises(UsageError, match=words + re.escape(repr(granularity)) + "$"):
        _plan_graph("PUSH 1\nPOP R1", granularity, [])


PAUSING = asm(
    'PUSH 1\nCALL step\nPOP R1\nPUSH "ok?"\nCALL ask\nPOP R2\nPUSH 3\nCALL step\nPOP R3\nSAY "done"'
)


def _pausing_tools(ran: list[Any]) -> list[BaseTool]:
    from langgraph.types import interrupt

    @tool
    def step(n: int) -> int:
        """Take step n."""
        ran.append(n)
        return n

    @tool
    def ask(question: str) -> str:
        """Ask the person."""
        ran.append("ask")
        return str(interrupt(question))

    return [step, ask]


def _pausing_app(where: str, tools: list[BaseTool], saver: Any, **options: Any) -> Any:
    from fakes import ScriptedChatModel
    from langchain.agents import create_agent
    from langgraph.graph import END, START, MessagesState, StateGraph

    from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode

    model = ScriptedChatModel(replies=[PAUSING])
    if where == "node":
        builder = StateGraph(MessagesState)
        builder.add_node("planner", ToolsPlannerNode(model, tools, **options))
        builder.add_edge(START, "planner")
        builder.add_edge("planner", END)
        return builder.compile(checkpointer=saver)
    planner = ToolsPlannerMiddleware(**{"execution": "graph", **options})
    return create_agent(model, tools=tools, middleware=[planner], checkpointer=saver)


@pytest.mark.parametrize(
    ("where", "before", "after"),
    [
        ("node", {"granularity": "block"}, {"granularity": "instruction"}),
        ("node", {"granularity": "program"}, {"granularity": "block"}),
        ("agent", {"granularity": "block"}, {"granularity": "instruction"}),
        ("agent", {"granularity": "block"}, {"execution": "agent"}),
        ("node", {"parallel_tools": True}, {"parallel_tools": False}),
        ("agent", {"parallel_tools": True}, {"parallel_tools": False}),
    ],
)
def test_a_plan_paused_in_a_plan_graph_resumes_only_as_it_ran(
    where: str, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """A plan graph's checkpoints hold the steps of its shape: resumed by a planner built with
    another ``granularity`` or ``parallel_tools`` (or the middleware with ``execution="agent"``),
    the turn says so, before anything runs, and the same options resume it as ever."""
    from langgraph.types import Command

    ran: list[Any] = []
    saver, thread = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    tools = _pausing_tools(ran)
    paused = _pausing_app(where, tools, saver, **before).invoke(
        {"messages": [HumanMessage("go")]}, thread
    )
    assert "__interrupt__" in paused and ran[:2] == [1, "ask"]  # (and step 3, run ahead)
    ran.clear()
    with pytest.raises(UsageError, match=r"paused while it ran as a plan graph of granularity="):
        _pausing_app(where, tools, saver, **{**before, **after}).invoke(
            Command(resume="yes"), thread
        )
    assert ran == []
    out = _pausing_app(where, tools, saver, **before).invoke(Command(resume="yes"), thread)
    assert out["messages"][-1].text == "done" and ran.count("ask") == 1
    assert (1 in ran) is (before.get("granularity") == "program")  # (it runs all again)
