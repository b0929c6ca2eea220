"""The unit's tools, as LangChain ``@tool`` functions over a :class:`~.world.World`.

Each tool reads its unit from ``runtime.context`` (a :class:`UnitContext`: the world and the
unit's id), so one tool list serves every unit. Tools return numbers a plan can ``CMP``:

* ``make_one_step`` / ``pick_sword`` / ``drop_sword``: ``1`` done, ``0`` not done;
* ``attack_enemy``: the enemy's hit points left (``0`` = killed), ``-1`` when there was no hit
  (no sword, enemy out of reach, no such enemy). Failing softly keeps plans simple: a loop
  ``attack while result > 0`` ends on its own, and a plan never dies half-way because an enemy
  was killed by someone else;
* ids are ``0`` for "none", positions ``(-1, -1)`` for "nowhere".

The reason for every result (``"blocked by wall at (3,4)"``) is in ``world.log``; the demo
prints it next to each call.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain.tools import ToolRuntime, tool
from langchain_core.tools import BaseTool

from .world import World

__all__ = ["UNIT_TOOLS", "UnitContext"]


@dataclass
class UnitContext:
    """What a unit's tools need: the shared world and which unit they act for."""

    world: World
    unit_id: int


@tool
def make_one_step(x: int, y: int, runtime: ToolRuntime[UnitContext]) -> int:
    """Take one step (one cell, never diagonal) towards the cell (x, y).

    Returns 1 if the unit moved, 0 if it did not (already there, or blocked by a wall, the
    map's edge, another unit or an enemy).

    Args:
        x: Target column (grows to the right).
        y: Target row (grows downwards).
    """
    ctx = runtime.context
    return ctx.world.step_towards(ctx.unit_id, x, y)


@tool
def get_current_position(runtime: ToolRuntime[UnitContext]) -> tuple[int, int]:
    """Return the unit's position as two values: x, then y."""
    ctx = runtime.context
    return ctx.world.position_of(ctx.unit_id)


@tool
def get_enemies_around(runtime: ToolRuntime[UnitContext]) -> int:
    """Return the id of an enemy next to the unit (diagonals count: in reach), 0 if none."""
    ctx = runtime.context
    return ctx.world.enemy_around(ctx.unit_id)


@tool
def find_nearest_enemy(runtime: ToolRuntime[UnitContext]) -> int:
    """Return the id of the nearest living enemy anywhere on the map, 0 if none is left."""
    ctx = runtime.context
    return ctx.world.nearest_enemy(ctx.unit_id)


@tool
def get_enemy_position(enemy_id: int, runtime: ToolRuntime[UnitContext]) -> tuple[int, int]:
    """Return where an enemy stands as two values: x, then y; -1, -1 if it is dead.

    Args:
        enemy_id: The enemy's id (100 or more).
    """
    ctx = runtime.context
    return ctx.world.enemy_position(ctx.unit_id, enemy_id)


@tool
def attack_enemy(enemy_id: int, runtime: ToolRuntime[UnitContext]) -> int:
    """Hit an enemy next to the unit once with the sword.

    Returns the enemy's hit points left (0 means it died), or -1 if there was no hit: the
    unit holds no sword, the enemy is not on a neighbouring cell, or it is already dead.

    Args:
        enemy_id: The enemy's id (100 or more).
    """
    ctx = runtime.context
    return ctx.world.attack(ctx.unit_id, enemy_id)


@tool
def get_sword_position(runtime: ToolRuntime[UnitContext]) -> tuple[int, int]:
    """Return where the nearest sword lies on the ground as x, then y; -1, -1 if none."""
    ctx = runtime.context
    return ctx.world.sword_position(ctx.unit_id)


@tool
def pick_sword(runtime: ToolRuntime[UnitContext]) -> int:
    """Pick up a sword lying on the unit's cell or next to it. Returns 1 if picked up, else 0."""
    ctx = runtime.context
    return ctx.world.pick_sword(ctx.unit_id)


@tool
def drop_sword(runtime: ToolRuntime[UnitContext]) -> int:
    """Drop the unit's sword on its cell. Returns 1 if dropped, 0 if it held none."""
    ctx = runtime.context
    return ctx.world.drop_sword(ctx.unit_id)


@tool
def has_sword(runtime: ToolRuntime[UnitContext]) -> bool:
    """Return whether the unit holds a sword (1 yes, 0 no)."""
    ctx = runtime.context
    return ctx.world.holds_sword(ctx.unit_id)


UNIT_TOOLS: list[BaseTool] = [
    make_one_step,
    get_current_position,
    get_enemies_around,
    find_nearest_enemy,
    get_enemy_position,
    attack_enemy,
    get_sword_position,
    pick_sword,
    drop_sword,
    has_sword,
]
