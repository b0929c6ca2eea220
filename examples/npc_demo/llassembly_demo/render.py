"""Text pictures of the world: the map a model is shown, and the demo's per-turn frame."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .world import World

__all__ = ["CLEAR_SCREEN", "UnitView", "frame", "map_text"]

CLEAR_SCREEN = "\x1b[H\x1b[2J"  # cursor home, clear screen: the next frame redraws in place
_RESET = "\x1b[0m"
_UNIT_COLOURS = ("\x1b[1;36m", "\x1b[1;35m", "\x1b[1;32m", "\x1b[1;34m", "\x1b[1;33m")
_ENEMY, _SWORD, _WALL, _DIM = "\x1b[1;31m", "\x1b[1;33m", "\x1b[2;37m", "\x1b[2m"


@dataclass(frozen=True)
class UnitView:
    """What the frame shows about a unit besides the world: its trail and last action."""

    unit_id: int
    path: Sequence[tuple[int, int]]
    status: str


def _axis(width: int) -> str:
    return "   " + " ".join(str(x % 10) for x in range(width))


def _grid(world: World, trails: Mapping[tuple[int, int], int] | None, colour: bool) -> list[str]:
    def paint(ch: str, code: str) -> str:
        return f"{code}{ch}{_RESET}" if colour else ch

    order = sorted(world.units)
    rows = [_axis(world.width)]
    for y in range(world.height):
        cells: list[str] = []
        for x in range(world.width):
            here = (x, y)
            unit = world.unit_at(here)
            if unit is not None:
                cells.append(paint(unit.letter, _UNIT_COLOURS[order.index(unit.id) % 5]))
            elif world.enemy_at(here) is not None:
                cells.append(paint("E", _ENEMY))
            elif here in world.swords:
                cells.append(paint("/", _SWORD))
            elif world.is_wall(here):
                cells.append(paint("#", _WALL))
            elif trails and here in trails:
                owner = world.units[trails[here]]
                trail = owner.letter.lower()
                cells.append(paint(trail, _UNIT_COLOURS[order.index(owner.id) % 5]))
            else:
                cells.append(paint(".", _DIM))
        rows.append(f"{y:>2} " + " ".join(cells))
    return rows


def map_text(world: World) -> str:
    """The map with axes, as the model is shown it (no colours, no trails)."""
    legend = (
        "Legend: # wall, . floor, capital letters are units, E an enemy, / a sword on the "
        f"ground. x is the column (0..{world.width - 1}, left to right), y the row "
        f"(0..{world.height - 1}, top to bottom)."
    )
    return "\n".join([*_grid(world, None, colour=False), legend])


def frame(world: World, views: Sequence[UnitView], turn: int, *, colour: bool = False) -> str:
    """One frame of the demo: the map with trails, each unit's last action, the enemies."""
    trails: dict[tuple[int, int], int] = {}
    for view in views:
        for cell in view.path:
            trails[cell] = view.unit_id
    lines = [f"Turn {turn}", *_grid(world, trails, colour)]
    for view in views:
        unit = world.units[view.unit_id]
        held = "sword" if unit.sword else "     "
        lines.append(f" {unit.letter} unit {unit.id} ({unit.x},{unit.y}) {held}  {view.status}")
    alive = ", ".join(f"{e.id} at ({e.x},{e.y}) hp {e.hp}" for e in world.enemies.values())
    lines.append(f" enemies: {alive or 'none left'}")
    return "\n".join(lines)
