"""A small grid world for NPC units: walls, units, enemies and swords. Pure Python.

Coordinates are ``(x, y)``: ``x`` grows to the right (columns), ``y`` grows downwards (rows),
``(0, 0)`` is the top-left cell. A map is text, one line per row:

=========  ==================================================================
``#``      wall
``.``      floor
``A``-``Z``  a unit standing on floor (its id is the letter's place: A 1, B 2, C 3...)
``E``      an enemy standing on floor (ids 101, 102... in reading order); no unit is ``E``
``/``      a sword lying on floor
=========  ==================================================================

Rules:

* A unit moves one cell at a time, never diagonally. It cannot step off the map, into a wall,
  or onto a cell taken by another unit or a living enemy; a step that cannot be made does not
  move it, and :attr:`World.log` says why (``"blocked by wall at (3,4)"``).
* ``step_towards`` takes the axis with the larger distance to the target (ties: ``x``) and, when
  that cell is blocked, tries the other axis.
* Enemies stand still. Each hit with a sword takes one hit point; at 0 an enemy dies and is
  removed from the world (its id is then unknown). Reach is one cell, diagonals included.
* A unit holds at most one sword. It picks one up from its own cell or a neighbouring one
  (diagonals included) and drops it on its own cell.

Every action returns a number a plan can test (1 done / 0 not done, hit points, ids) and
appends an :class:`Event` with the reason to :attr:`World.log`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["FIRST_ENEMY_ID", "Enemy", "Event", "Unit", "World", "WorldError"]

FIRST_ENEMY_ID = 101
DEFAULT_ENEMY_HP = 2
_T = TypeVar("_T")
REACH = 1  # Chebyshev distance for attacking, seeing "around" and picking up a sword


class WorldError(ValueError):
    """A map or a world set-up that does not make sense (not a failed action)."""


@dataclass
class Unit:
    """A unit the player commands."""

    id: int
    letter: str
    x: int
    y: int
    sword: bool = False

    @property
    def position(self) -> tuple[int, int]:
        return (self.x, self.y)


@dataclass
class Enemy:
    """An enemy; it dies (and leaves the world) at 0 hit points."""

    id: int
    x: int
    y: int
    hp: int = DEFAULT_ENEMY_HP

    @property
    def position(self) -> tuple[int, int]:
        return (self.x, self.y)


@dataclass(frozen=True)
class Event:
    """One action or observation of a unit, its result and the reason in words."""

    unit: int
    action: str
    args: tuple[int, ...]
    result: Any
    text: str


def _distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Chebyshev distance: 1 for the eight neighbouring cells."""
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]))


def _walk_distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _cell(position: tuple[int, int]) -> str:
    return f"({position[0]},{position[1]})"


@dataclass
class World:
    """The grid, its units, enemies and swords, and the log of what happened.

    Build one with :meth:`parse`. Every method that acts for a unit takes the unit's id.

    Example:
        >>> world = World.parse("A.#\\n..E")
        >>> world.step_towards(1, 2, 0)
        1
        >>> world.step_towards(1, 2, 0), world.log[-1].text
        (0, 'blocked by wall at (2,0)')
    """

    walls: list[list[bool]]
    units: dict[int, Unit] = field(default_factory=dict)
    enemies: dict[int, Enemy] = field(default_factory=dict)
    swords: list[tuple[int, int]] = field(default_factory=list)
    log: list[Event] = field(default_factory=list)

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str, *, enemy_hp: int = DEFAULT_ENEMY_HP) -> World:
        """Build a world from a map (see the module docstring for the characters).

        Raises:
            WorldError: Rows of different widths, an unknown character, or a repeated letter.
        """
        rows = [line.strip() for line in text.strip("\n").splitlines() if line.strip()]
        if not rows or any(len(r) != len(rows[0]) for r in rows):
            raise WorldError("a map needs at least one row and rows of equal width")
        world = cls(walls=[[ch == "#" for ch in row] for row in rows])
        letters: dict[str, tuple[int, int]] = {}
        next_enemy = FIRST_ENEMY_ID
        for y, row in enumerate(rows):
            for x, ch in enumerate(row):
                if ch in "#.":
                    continue
                if ch == "E":
                    world.enemies[next_enemy] = Enemy(next_enemy, x, y, enemy_hp)
                    next_enemy += 1
                elif ch == "/":
                    world.swords.append((x, y))
                elif ch.isupper():
                    if ch in letters:
                        raise WorldError(f"unit {ch} appears twice in the map")
                    letters[ch] = (x, y)
                else:
                    raise WorldError(f"unknown map character {ch!r} at {_cell((x, y))}")
        for ch, (x, y) in sorted(letters.items()):
            unit_id = ord(ch) - ord("A") + 1
            world.units[unit_id] = Unit(unit_id, ch, x, y)
        return world

    def add_unit(self, letter: str, x: int, y: int, *, sword: bool = False) -> Unit:
        """Place a new unit (id from its letter) on a free floor cell.

        Raises:
            WorldError: The letter is taken or the cell is not free floor.
        """
        unit_id = ord(letter) - ord("A") + 1
        if not ("A" <= letter <= "Z") or letter == "E" or unit_id in self.units:
            raise WorldError(f"unit letter {letter!r} is not a free capital letter")
        if self.blocker((x, y)) is not None:
            raise WorldError(
                f"cannot place unit {letter} at {_cell((x, y))}: {self.blocker((x, y))}"
            )
        unit = Unit(unit_id, letter, x, y, sword)
        self.units[unit_id] = unit
        return unit

    # -- reading ----------------------------------------------------------------------------

    @property
    def width(self) -> int:
        return len(self.walls[0])

    @property
    def height(self) -> int:
        return len(self.walls)

    def is_wall(self, position: tuple[int, int]) -> bool:
        x, y = position
        return self.walls[y][x]

    def in_bounds(self, position: tuple[int, int]) -> bool:
        return 0 <= position[0] < self.width and 0 <= position[1] < self.height

    def unit(self, unit_id: int) -> Unit:
        """The unit with ``unit_id``. Raises :class:`WorldError` if there is none."""
        found = self.units.get(unit_id)
        if found is None:
            raise WorldError(f"there is no unit {unit_id}")
        return found

    def enemy_at(self, position: tuple[int, int]) -> Enemy | None:
        return next((e for e in self.enemies.values() if e.position == position), None)

    def unit_at(self, position: tuple[int, int]) -> Unit | None:
        return next((u for u in self.units.values() if u.position == position), None)

    def blocker(self, position: tuple[int, int]) -> str | None:
        """Why a unit cannot enter ``position`` (``None`` when it can)."""
        where = _cell(position)
        if not self.in_bounds(position):
            return f"off the map at {where}"
        if self.is_wall(position):
            return f"blocked by wall at {where}"
        other = self.unit_at(position)
        if other is not None:
            return f"blocked by unit {other.id} at {where}"
        enemy = self.enemy_at(position)
        if enemy is not None:
            return f"blocked by enemy {enemy.id} at {where}"
        return None

    def snapshot(self) -> dict[str, Any]:
        """Plain data describing the world now (for comparing two runs)."""
        return {
            "units": {u.id: (u.x, u.y, u.sword) for u in self.units.values()},
            "enemies": {e.id: (e.x, e.y, e.hp) for e in self.enemies.values()},
            "swords": sorted(self.swords),
        }

    # -- acting -----------------------------------------------------------------------------

    def _record(
        self, unit_id: int, action: str, args: tuple[int, ...], result: _T, text: str
    ) -> _T:
        self.log.append(Event(unit_id, action, args, result, text))
        return result

    def step_towards(self, unit_id: int, x: int, y: int) -> int:
        """Move the unit one cell towards ``(x, y)``. Returns 1 if it moved, 0 if it did not."""
        unit = self.unit(unit_id)
        args = (x, y)
        dx, dy = x - unit.x, y - unit.y
        if dx == 0 and dy == 0:
            return self._record(unit_id, "step", args, 0, f"already at {_cell(unit.position)}")
        along_x = (unit.x + (1 if dx > 0 else -1), unit.y)
        along_y = (unit.x, unit.y + (1 if dy > 0 else -1))
        first, second = (along_x, along_y) if abs(dx) >= abs(dy) else (along_y, along_x)
        tries = [first] if (dx == 0 or dy == 0) else [first, second]
        reasons: list[str] = []
        for cell in tries:
            reason = self.blocker(cell)
            if reason is None:
                unit.x, unit.y = cell
                return self._record(unit_id, "step", args, 1, f"moved to {_cell(cell)}")
            reasons.append(reason)
        return self._record(unit_id, "step", args, 0, "; ".join(reasons))

    def position_of(self, unit_id: int) -> tuple[int, int]:
        unit = self.unit(unit_id)
        return self._record(unit_id, "position", (), unit.position, f"at {_cell(unit.position)}")

    def enemy_around(self, unit_id: int) -> int:
        """Id of the nearest living enemy within reach (diagonals count), or 0."""
        here = self.unit(unit_id).position
        near = sorted(
            (_distance(here, e.position), e.id)
            for e in self.enemies.values()
            if _distance(here, e.position) <= REACH
        )
        found = near[0][1] if near else 0
        text = f"enemy {found} is next to the unit" if found else "no enemy within reach"
        return self._record(unit_id, "enemies_around", (), found, text)

    def nearest_enemy(self, unit_id: int) -> int:
        """Id of the nearest living enemy anywhere (walking distance, then id), or 0."""
        here = self.unit(unit_id).position
        ranked = sorted((_walk_distance(here, e.position), e.id) for e in self.enemies.values())
        found = ranked[0][1] if ranked else 0
        text = f"nearest enemy is {found}" if found else "no enemy left"
        return self._record(unit_id, "nearest_enemy", (), found, text)

    def enemy_position(self, unit_id: int, enemy_id: int) -> tuple[int, int]:
        """Where enemy ``enemy_id`` stands, or ``(-1, -1)`` if it is dead or unknown."""
        enemy = self.enemies.get(enemy_id)
        where = enemy.position if enemy is not None else (-1, -1)
        text = f"enemy {enemy_id} at {_cell(where)}" if enemy else f"no enemy {enemy_id}"
        return self._record(unit_id, "enemy_position", (enemy_id,), where, text)

    def sword_position(self, unit_id: int) -> tuple[int, int]:
        """The nearest sword lying on the ground, or ``(-1, -1)`` if there is none."""
        here = self.unit(unit_id).position
        ranked = sorted(self.swords, key=lambda s: (_walk_distance(here, s), s))
        where = ranked[0] if ranked else (-1, -1)
        text = f"a sword lies at {_cell(where)}" if ranked else "no sword on the ground"
        return self._record(unit_id, "sword_position", (), where, text)

    def attack(self, unit_id: int, enemy_id: int) -> int:
        """Hit an enemy once. Returns its hit points left (0: it died), or -1 if no hit.

        No hit when the unit holds no sword, there is no living enemy ``enemy_id``, or the
        enemy is out of reach (not on a neighbouring cell); the log says which.
        """
        unit = self.unit(unit_id)
        args = (enemy_id,)
        enemy = self.enemies.get(enemy_id)
        if not unit.sword:
            return self._record(unit_id, "attack", args, -1, "cannot attack: no sword")
        if enemy is None:
            return self._record(unit_id, "attack", args, -1, f"no living enemy {enemy_id}")
        if _distance(unit.position, enemy.position) > REACH:
            text = f"enemy {enemy_id} at {_cell(enemy.position)} is out of reach (not adjacent)"
            return self._record(unit_id, "attack", args, -1, text)
        enemy.hp -= 1
        if enemy.hp <= 0:
            del self.enemies[enemy_id]
            return self._record(unit_id, "attack", args, 0, f"killed enemy {enemy_id}")
        return self._record(
            unit_id, "attack", args, enemy.hp, f"hit enemy {enemy_id}, {enemy.hp} hp left"
        )

    def pick_sword(self, unit_id: int) -> int:
        """Pick up a sword from the unit's cell or a neighbouring one. Returns 1 or 0."""
        unit = self.unit(unit_id)
        if unit.sword:
            return self._record(unit_id, "pick_sword", (), 0, "already holds a sword")
        near = sorted(s for s in self.swords if _distance(unit.position, s) <= REACH)
        if not near:
            return self._record(unit_id, "pick_sword", (), 0, "no sword on or next to the unit")
        own = unit.position if unit.position in near else near[0]
        self.swords.remove(own)
        unit.sword = True
        return self._record(unit_id, "pick_sword", (), 1, f"picked up the sword at {_cell(own)}")

    def drop_sword(self, unit_id: int) -> int:
        """Drop the unit's sword on its cell. Returns 1, or 0 if it holds none."""
        unit = self.unit(unit_id)
        if not unit.sword:
            return self._record(unit_id, "drop_sword", (), 0, "holds no sword")
        unit.sword = False
        self.swords.append(unit.position)
        return self._record(
            unit_id, "drop_sword", (), 1, f"dropped the sword at {_cell(unit.position)}"
        )

    def holds_sword(self, unit_id: int) -> bool:
        held = self.unit(unit_id).sword
        return self._record(unit_id, "has_sword", (), held, "holds a sword" if held else "no sword")
