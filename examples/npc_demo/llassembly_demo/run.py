"""The NPC demo: each unit plans once, then all units act turn by turn on one shared map.

Design. A game needs every unit to act in the same turns, interleaved, one action at a time,
with the map drawn between turns; a whole plan cannot run to its end inside one agent call.
So the demo uses the library in two stages, both through its public API:

1. **Planning** (one model call per unit, plus repairs if the plan does not parse or verify):
   :func:`llassembly.plan` builds the system prompt from the unit's tools and context (the
   map), asks the model, and parses, verifies and compiles the reply, repairing it exactly as
   :class:`~llassembly.ToolsPlannerMiddleware` does inside ``create_agent``. Nothing runs yet.
2. **Playing**: each unit's plan runs in its own :class:`~llassembly.Emulator`
   (:meth:`llassembly.Plan.emulator`), driven through the game-loop API:
   :meth:`~llassembly.Emulator.advance` runs the plan's pure instructions up to its next tool
   call, the demo executes that call (the real LangChain tool, with a ``ToolRuntime`` whose
   context is the world and the unit), and :meth:`~llassembly.Emulator.complete` hands the
   result back. Each turn, every unit still running makes exactly one tool call, in unit
   order. No model call happens while playing.

``tests/test_demo.py`` checks that running the same plans through ``create_agent`` with
:class:`~llassembly.ToolsPlannerMiddleware` (see :mod:`.agents`, which interleaves the agents'
tool calls in the same order) leaves the same world.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from llassembly import (
    Emulator,
    ExecutionError,
    Extern,
    LLAssemblyError,
    PlanGraph,
    Program,
    ToolCall,
    plan,
)

from .render import UnitView, map_text
from .replay import bundled_plans
from .tools import UNIT_TOOLS, UnitContext
from .world import World

__all__ = [
    "DEFAULT_MAP",
    "MAX_INSTRUCTIONS",
    "MAX_TOOL_CALLS",
    "CallLog",
    "Game",
    "Order",
    "UnitRun",
    "bundled_scenario",
    "new_game",
    "plan_unit",
    "play",
    "unit_context",
]

# 12 x 10. A, B, C: units 1, 2, 3. E: enemies 101, 102, 103 (reading order). /: a sword.
DEFAULT_MAP = """
############
#A...#.....#
#....#..E..#
#..E.#.....#
#..........#
#..........#
#...##.....#
#./......E.#
#B.......C.#
############
"""
ARMED_UNITS = (1,)  # unit 1 starts with its own sword
MAX_TOOL_CALLS = 200
MAX_INSTRUCTIONS = 5000
SPAWN_POINTS = ((10, 1), (6, 5), (10, 5), (1, 5))  # where units added with --order start


@dataclass(frozen=True)
class Order:
    """An order for one unit, in words."""

    unit_id: int
    text: str


@dataclass(frozen=True)
class CallLog:
    """One tool call a unit made: when, what, what came back and why."""

    turn: int
    call: ToolCall
    result: Any
    text: str

    def describe(self) -> str:
        args = ", ".join(str(v) for v in self.call.args.values())
        result = self.result
        shown = f"{result[0]},{result[1]}" if isinstance(result, tuple) else str(result)
        if isinstance(result, bool):
            shown = str(int(result))
        return f"{self.call.tool}({args}) -> {shown}  {self.text}"


@dataclass
class UnitRun:
    """One unit's plan, its machine and what it did."""

    unit_id: int
    letter: str
    order: str
    status: str = "planning"  # planning, no plan, running, finished, stopped, out of turns
    detail: str = ""
    reply: str = ""
    program: Program | None = None
    graph: PlanGraph | None = None
    emulator: Emulator | None = None
    model_calls: int = 0
    calls: list[CallLog] = field(default_factory=list)
    path: list[tuple[int, int]] = field(default_factory=list)

    @property
    def react_model_calls(self) -> int:
        """Model calls an agent making one tool call per round trip would need: calls + 1."""
        return len(self.calls) + 1

    def view(self) -> UnitView:
        if self.status == "running":
            status = f"#{len(self.calls)} {self.calls[-1].describe()}" if self.calls else "ready"
        else:
            status = f"{self.status}{': ' + self.detail if self.detail else ''}"
        return UnitView(self.unit_id, list(self.path), status)

    def tally(self) -> str:
        counts = Counter(c.call.tool for c in self.calls)
        return ", ".join(f"{name} x{n}" for name, n in counts.most_common())


def bundled_scenario() -> tuple[World, list[Order]]:
    """The demo's map and its three units' orders (the orders of the bundled plans)."""
    world = World.parse(DEFAULT_MAP)
    for unit_id in ARMED_UNITS:
        world.units[unit_id].sword = True
    plans = bundled_plans()
    orders = [
        Order(unit_id, plan.order) for unit_id, plan in zip(sorted(world.units), plans, strict=True)
    ]
    return world, orders


def add_unit_with_order(world: World, text: str) -> Order:
    """Place a new unit at the first free spawn point and give it ``text`` as its order."""
    letter = next(ch for ch in "ABCDFGHIJKLMNOPQRSTUVWXYZ" if ord(ch) - 64 not in world.units)
    spot = next((p for p in SPAWN_POINTS if world.blocker(p) is None), None)
    if spot is None:
        raise LLAssemblyError("no free spawn point left for another unit")
    unit = world.add_unit(letter, *spot)
    return Order(unit.id, text)


def unit_context(world: World, unit_id: int) -> str:
    """The system message a unit's planner gets: who it is, the rules and the map."""
    unit = world.units[unit_id]
    return (
        "Control an in-game NPC unit based on the provided commands.\n"
        f"You are unit {unit.id}, shown as {unit.letter} on the map, now at "
        f"({unit.x},{unit.y}){' holding a sword' if unit.sword else ''}. Other units and enemies "
        "move or die while your program runs, so check the world with the tools instead of "
        "assuming. You move one cell per step, never diagonally; walls, units and enemies "
        "block steps. Each enemy has a few hit points; each hit takes one.\n"
        f"{map_text(world)}"
    )


class _ModelCalls(BaseCallbackHandler):
    """Counts a model's calls, a call that fails too."""

    def __init__(self) -> None:
        self.count = 0

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.count += 1


def plan_unit(model: BaseChatModel, world: World, order: Order) -> UnitRun:
    """Ask ``model`` for the unit's plan (repairing it if needed) and load it into a machine."""
    unit = world.units[order.unit_id]
    run = UnitRun(unit.id, unit.letter, order.text, path=[unit.position])
    counter = _ModelCalls()
    request = [SystemMessage(unit_context(world, unit.id)), HumanMessage(order.text)]
    try:
        found = plan(
            model,
            UNIT_TOOLS,
            request,
            max_tool_calls=MAX_TOOL_CALLS,
            max_instructions_to_exec=MAX_INSTRUCTIONS,
            config={"callbacks": [counter]},
        )
    except Exception as exc:  # RepairsExhausted (no valid plan), or the model is unreachable
        run.status, run.detail = "no plan", f"{type(exc).__name__}: {exc}"
        run.model_calls = counter.count
        return run
    run.model_calls, run.reply = found.model_calls, found.text
    if found.compiled is None:
        run.status, run.detail = "no plan", f"the model answered in words: {found.text[:120]!r}"
        return run
    run.graph = found.graph("instruction")  # instruction granularity, for drawing plans
    run.program = found.compiled.program
    run.emulator = found.emulator()
    run.status = "running"
    return run


def _execute(world: World, run: UnitRun, extern: Extern, call: ToolCall) -> Any:
    """Run the real LangChain tool for ``call`` with the unit's ``ToolRuntime``."""
    args = dict(call.args)
    if extern.runtime_param is not None:
        args[extern.runtime_param] = ToolRuntime(
            state={},
            context=UnitContext(world, run.unit_id),
            config={},
            stream_writer=lambda _chunk: None,
            tool_call_id=f"unit{run.unit_id}_call{call.number}",
            store=None,
        )
    if extern.tool is None:  # pragma: no cover - the demo's tools are all LangChain tools
        return extern.call(args)
    return extern.tool.invoke(args)


def _take_turn(world: World, run: UnitRun, turn: int) -> bool:
    """Let ``run`` make its next tool call. Returns whether it made one."""
    emulator = run.emulator
    if emulator is None or run.status != "running":
        return False
    try:
        call = emulator.advance()
    except ExecutionError as exc:  # a budget ran out or an instruction failed
        run.status, run.detail = "stopped", str(exc).splitlines()[0]
        return False
    if call is None:
        run.status = "finished"
        return False
    logged = len(world.log)
    try:
        result = _execute(world, run, emulator.compiled.externs[call.tool], call)
        emulator.complete(result)
    except LLAssemblyError as exc:
        run.status, run.detail = "stopped", str(exc).splitlines()[0]
        return False
    except Exception as exc:  # a tool raised: this unit stops, the game goes on
        run.status, run.detail = "stopped", f"{call.tool} raised {type(exc).__name__}: {exc}"
        return False
    text = world.log[-1].text if len(world.log) > logged else ""
    run.calls.append(CallLog(turn, call, result, text))
    position = world.units[run.unit_id].position
    if position != run.path[-1]:
        run.path.append(position)
    return True


def play(
    world: World,
    runs: Sequence[UnitRun],
    *,
    max_turns: int = 400,
    on_turn: Callable[[int], None] | None = None,
) -> int:
    """Play turns until every plan has ended (or ``max_turns``). Returns the turns played.

    Each turn, each running unit (in id order) makes one tool call; ``on_turn(turn)`` is
    called after every turn in which some unit acted.
    """
    ordered = sorted(runs, key=lambda r: r.unit_id)
    turn = 0
    while turn < max_turns and any(r.status == "running" for r in ordered):
        acted = [_take_turn(world, run, turn + 1) for run in ordered]
        if not any(acted):
            break
        turn += 1
        if on_turn is not None:
            on_turn(turn)
    for run in ordered:
        if run.status != "running" or run.emulator is None:
            continue
        try:
            pending = run.emulator.advance()  # ends a plan whose last call was its last action
        except ExecutionError as exc:
            run.status, run.detail = "stopped", str(exc).splitlines()[0]
            continue
        if pending is None:
            run.status = "finished"
        else:
            run.status, run.detail = "out of turns", f"still running after {turn} turns"
    return turn


def outcome(world: World, run: UnitRun) -> str:
    """One line on where the unit ended and what it did."""
    unit = world.units[run.unit_id]
    kills = [
        c.call.args.get("enemy_id")
        for c in run.calls
        if c.call.tool == "attack_enemy" and c.result == 0
    ]
    parts = [
        f"{run.status}{' (' + run.detail + ')' if run.detail else ''}",
        f"at ({unit.x},{unit.y})",
    ]
    parts.append("holding a sword" if unit.sword else "without a sword")
    if kills:
        parts.append("killed " + ", ".join(f"enemy {k}" for k in kills))
    return ", ".join(parts)


@dataclass
class Game:
    """A world, its units' plans and machines, and how many turns have been played."""

    world: World
    runs: list[UnitRun]
    start_enemies: dict[int, tuple[int, int]]
    turns: int = 0

    def play(self, *, max_turns: int = 400, on_turn: Callable[[int], None] | None = None) -> int:
        """Play until every plan has ended (see :func:`play`); returns the turns played."""
        self.turns = play(self.world, self.runs, max_turns=max_turns, on_turn=on_turn)
        return self.turns

    @property
    def fallen(self) -> list[tuple[int, int]]:
        """Where the enemies that died stood."""
        return [pos for eid, pos in self.start_enemies.items() if eid not in self.world.enemies]


def new_game(model: BaseChatModel, extra_orders: Sequence[str] = ()) -> Game:
    """The bundled scenario plus a unit per extra order, each unit planned by ``model``."""
    world, orders = bundled_scenario()
    orders += [add_unit_with_order(world, text) for text in extra_orders]
    start = {e.id: e.position for e in world.enemies.values()}
    return Game(world, [plan_unit(model, world, order) for order in orders], start)
