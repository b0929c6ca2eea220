"""The demo's grid world: map parsing, movement, collisions, fighting, swords, and its tools."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.tools import ToolRuntime

from llassembly import Emulator, Program, parse
from llassembly.machine.externs import externs_from
from llassembly_demo.tools import UNIT_TOOLS, UnitContext, attack_enemy, make_one_step
from llassembly_demo.world import FIRST_ENEMY_ID, World, WorldError


def last(world: World) -> str:
    return world.log[-1].text


# -- the map ----------------------------------------------------------------------------------


def test_map_gives_units_ids_from_letters_and_enemies_ids_from_101_in_reading_order() -> None:
    world = World.parse("B.E\n#A.\nE./")
    assert {u.id: (u.letter, u.position) for u in world.units.values()} == {
        1: ("A", (1, 1)),
        2: ("B", (0, 0)),
    }
    assert {e.id: e.position for e in world.enemies.values()} == {101: (2, 0), 102: (0, 2)}
    assert all(e.id >= FIRST_ENEMY_ID and e.hp == 2 for e in world.enemies.values())
    assert world.swords == [(2, 2)]
    assert (world.width, world.height) == (3, 3)
    assert world.is_wall((0, 1)) and not world.is_wall((1, 0))


@pytest.mark.parametrize(
    ("text", "message"),
    [("A..\n..", "equal width"), ("A?.", "unknown map character '\\?'"), ("A.A", "twice")],
)
def test_a_bad_map_is_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(WorldError, match=message):
        World.parse(text)


def test_a_unit_cannot_be_placed_on_a_wall_or_named_e() -> None:
    world = World.parse("A#.")
    with pytest.raises(WorldError, match="blocked by wall"):
        world.add_unit("B", 1, 0)
    with pytest.raises(WorldError, match="not a free capital"):
        world.add_unit("E", 2, 0)
    assert world.add_unit("C", 2, 0).id == 3


# -- moving -----------------------------------------------------------------------------------


def test_a_step_goes_one_cell_along_the_longer_axis_and_x_on_a_tie() -> None:
    world = World.parse("A....\n.....\n.....")
    assert world.step_towards(1, 4, 1) == 1
    assert world.units[1].position == (1, 0)
    assert world.step_towards(1, 1, 2) == 1
    assert world.units[1].position == (1, 1)
    assert world.step_towards(1, 2, 2) == 1  # a tie: x first
    assert world.units[1].position == (2, 1)
    assert last(world) == "moved to (2,1)"


def test_a_step_into_a_wall_tries_the_other_axis() -> None:
    world = World.parse("A#.\n...")
    assert world.step_towards(1, 2, 1) == 1
    assert world.units[1].position == (0, 1)


def test_a_step_into_a_wall_with_no_other_axis_does_not_move_and_says_why() -> None:
    world = World.parse("A#.")
    assert world.step_towards(1, 2, 0) == 0
    assert world.units[1].position == (0, 0)
    assert last(world) == "blocked by wall at (1,0)"


def test_both_axes_blocked_reports_both_reasons() -> None:
    world = World.parse("A#\n#.")
    assert world.step_towards(1, 1, 1) == 0
    assert last(world) == "blocked by wall at (1,0); blocked by wall at (0,1)"


def test_a_step_off_the_map_does_not_move() -> None:
    world = World.parse("A.")
    assert world.step_towards(1, -5, 0) == 0
    assert last(world) == "off the map at (-1,0)"
    assert world.units[1].position == (0, 0)


def test_units_and_enemies_block_steps() -> None:
    world = World.parse("AB\n.E")
    assert world.step_towards(1, 1, 0) == 0
    assert last(world) == "blocked by unit 2 at (1,0)"
    assert world.step_towards(2, 1, 1) == 0
    assert last(world) == "blocked by enemy 101 at (1,1)"
    assert world.units[2].position == (1, 0)


def test_a_step_to_where_the_unit_stands_is_not_a_move() -> None:
    world = World.parse("A.")
    assert world.step_towards(1, 0, 0) == 0
    assert last(world) == "already at (0,0)"


def test_a_sword_on_the_ground_does_not_block() -> None:
    world = World.parse("A/.")
    assert world.step_towards(1, 1, 0) == 1


# -- seeing and fighting ----------------------------------------------------------------------


def test_enemies_around_sees_only_neighbouring_cells_diagonals_included() -> None:
    world = World.parse("A..\n..E\n...")
    assert world.enemy_around(1) == 0
    world.step_towards(1, 1, 0)
    assert world.enemy_around(1) == 101
    assert world.nearest_enemy(1) == 101
    assert world.enemy_position(1, 101) == (2, 1)
    assert world.enemy_position(1, 555) == (-1, -1)


def test_attack_without_a_sword_fails_with_a_message() -> None:
    world = World.parse("AE")
    assert world.attack(1, 101) == -1
    assert last(world) == "cannot attack: no sword"
    assert world.enemies[101].hp == 2


def test_attack_out_of_reach_fails_with_a_message() -> None:
    world = World.parse("A.E")
    world.units[1].sword = True
    assert world.attack(1, 101) == -1
    assert last(world) == "enemy 101 at (2,0) is out of reach (not adjacent)"


def test_an_enemy_dies_at_zero_hp_and_is_removed() -> None:
    world = World.parse("A.\n.E", enemy_hp=2)
    world.units[1].sword = True
    assert world.attack(1, 101) == 1  # diagonal neighbour: in reach
    assert last(world) == "hit enemy 101, 1 hp left"
    assert world.attack(1, 101) == 0
    assert last(world) == "killed enemy 101"
    assert world.enemies == {}
    assert world.attack(1, 101) == -1
    assert last(world) == "no living enemy 101"
    assert world.nearest_enemy(1) == 0
    assert world.step_towards(1, 1, 1) == 1  # the cell is free now


# -- swords -----------------------------------------------------------------------------------


def test_pick_sword_needs_a_sword_on_or_next_to_the_unit() -> None:
    world = World.parse("A../")
    assert world.sword_position(1) == (3, 0)
    assert world.pick_sword(1) == 0
    assert last(world) == "no sword on or next to the unit"
    world.step_towards(1, 3, 0)
    world.step_towards(1, 3, 0)
    assert world.pick_sword(1) == 1
    assert world.holds_sword(1) is True
    assert world.swords == []
    assert world.sword_position(1) == (-1, -1)
    assert world.pick_sword(1) == 0
    assert last(world) == "already holds a sword"


def test_drop_sword_leaves_it_on_the_units_cell_for_others() -> None:
    world = World.parse("AB")
    assert world.drop_sword(1) == 0
    assert last(world) == "holds no sword"
    world.units[1].sword = True
    assert world.drop_sword(1) == 1
    assert world.swords == [(0, 0)]
    assert world.holds_sword(1) is False
    assert world.pick_sword(2) == 1  # B stands next to it


def test_snapshot_is_plain_data() -> None:
    world = World.parse("A/E")
    assert world.snapshot() == {
        "units": {1: (0, 0, False)},
        "enemies": {101: (2, 0, 2)},
        "swords": [(1, 0)],
    }


# -- the LangChain tools ----------------------------------------------------------------------


def runtime_for(world: World, unit_id: int) -> ToolRuntime[UnitContext]:
    return ToolRuntime(
        state={},
        context=UnitContext(world, unit_id),
        config={},
        stream_writer=lambda _: None,
        tool_call_id="t1",
        store=None,
    )


def test_tools_act_for_the_unit_in_their_runtime_context() -> None:
    world = World.parse("A.\nB.")
    assert make_one_step.invoke({"x": 1, "y": 1, "runtime": runtime_for(world, 2)}) == 1
    assert world.units[2].position == (1, 1)
    assert world.units[1].position == (0, 0)
    assert attack_enemy.invoke({"enemy_id": 101, "runtime": runtime_for(world, 1)}) == -1


def test_tool_shapes_for_plans() -> None:
    externs = externs_from(UNIT_TOOLS)
    assert [p.name for p in externs["make_one_step"].params] == ["x", "y"]
    assert externs["get_current_position"].n_results == 2
    assert externs["get_enemy_position"].n_results == 2
    assert externs["has_sword"].n_results == 1
    assert all(e.runtime_param == "runtime" for e in externs.values())


def test_a_plan_tests_step_results_with_cmp() -> None:
    """Walk right until a step fails; count the steps (the wall stops the unit)."""
    world = World.parse("A..#")
    externs = externs_from(UNIT_TOOLS)
    plan = parse(
        """
        again:
            PUSH 9
            PUSH 0
            CALL make_one_step
            POP R1
            CMP R1, 1
            JNE done
            INC R2
            JMP again
        done:
            CALL get_current_position
            POP R3
            POP R4
        """
    )
    assert isinstance(plan, Program)
    emulator = Emulator(plan, externs)

    def call(request: Any) -> Any:
        tool = externs[request.tool].tool
        assert tool is not None
        return tool.invoke({**request.args, "runtime": runtime_for(world, 1)})

    result = emulator.run(call)
    assert result.registers == {"R2": 2, "R3": 2}  # R1 (0: not moved) and R4 (y) are zero
    assert [e.text for e in world.log[-2:]] == ["blocked by wall at (3,0)", "at (2,0)"]
