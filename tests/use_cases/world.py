"""An NPC unit on a grid and a weather service, as LangChain tools with side effects.

The tools read and change the world through ``ToolRuntime.context``: pass a
:class:`UnitContext` or :class:`WeatherContext` as the run's ``context``. Every call is also
appended to ``context.log`` so a test can compare the exact sequence of calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain.tools import ToolRuntime, tool
from pydantic import BaseModel, Field

__all__ = [
    "NPC_TOOLS",
    "WEATHER_TOOLS",
    "Enemy",
    "PatrolRoute",
    "UnitContext",
    "Waypoint",
    "WeatherContext",
]


# -- the NPC unit ----------------------------------------------------------------------------


@dataclass
class Enemy:
    x: int
    y: int
    hp: int


@dataclass
class UnitContext:
    """The unit's world: where it stands, what it holds, who is around."""

    x: int = 0
    y: int = 0
    sword: bool = False
    sword_on_ground: bool = True
    enemies: dict[int, Enemy] = field(default_factory=dict)
    patrol: list[tuple[int, int]] = field(default_factory=list)
    log: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def position(self) -> tuple[int, int]:
        return (self.x, self.y)

    def enemy_near(self) -> int:
        """Id of the first living enemy within one step (0 if none)."""
        for enemy_id, enemy in sorted(self.enemies.items()):
            if enemy.hp > 0 and max(abs(enemy.x - self.x), abs(enemy.y - self.y)) <= 1:
                return enemy_id
        return 0


def _sign(n: int) -> int:
    return (n > 0) - (n < 0)


@tool
def get_current_position(runtime: ToolRuntime[UnitContext]) -> tuple[int, int]:
    """Return the unit's current position as (x, y)."""
    unit = runtime.context
    unit.log.append(("get_current_position",))
    return unit.position


@tool
def make_one_step(x: int, y: int, runtime: ToolRuntime[UnitContext]) -> None:
    """Move the unit one cell towards the target cell (x, y); diagonal steps are allowed."""
    unit = runtime.context
    unit.log.append(("make_one_step", x, y))
    unit.x += _sign(x - unit.x)
    unit.y += _sign(y - unit.y)


@tool
def get_enemies_around(runtime: ToolRuntime[UnitContext]) -> int:
    """Return the id of a living enemy next to the unit, or 0 if there is none."""
    unit = runtime.context
    unit.log.append(("get_enemies_around",))
    return unit.enemy_near()


@tool
def has_sword(runtime: ToolRuntime[UnitContext]) -> bool:
    """Return whether the unit holds a sword."""
    unit = runtime.context
    unit.log.append(("has_sword",))
    return unit.sword


@tool
def pick_sword(runtime: ToolRuntime[UnitContext]) -> None:
    """Pick up the sword lying in the unit's pack."""
    unit = runtime.context
    unit.log.append(("pick_sword",))
    if not unit.sword_on_ground:
        raise ValueError("there is no sword to pick up")
    unit.sword, unit.sword_on_ground = True, False


@tool
def drop_sword(runtime: ToolRuntime[UnitContext]) -> None:
    """Drop the sword the unit holds."""
    unit = runtime.context
    unit.log.append(("drop_sword",))
    if not unit.sword:
        raise ValueError("the unit holds no sword")
    unit.sword, unit.sword_on_ground = False, True


@tool
def attack_enemy(enemy_id: int, runtime: ToolRuntime[UnitContext]) -> int:
    """Hit the enemy with the given id once with the sword; return its remaining hit points."""
    unit = runtime.context
    unit.log.append(("attack_enemy", enemy_id))
    if not unit.sword:
        raise ValueError("cannot attack without a sword")
    enemy = unit.enemies.get(enemy_id)
    if enemy is None or enemy.hp <= 0:
        raise ValueError(f"no living enemy with id {enemy_id}")
    if max(abs(enemy.x - unit.x), abs(enemy.y - unit.y)) > 1:
        raise ValueError(f"enemy {enemy_id} is out of reach")
    enemy.hp -= 1
    return enemy.hp


class Waypoint(BaseModel):
    x: int = Field(ge=0, le=9)
    y: int = Field(ge=0, le=9)


class PatrolRoute(BaseModel):
    """A patrol: the cells to visit in order, repeated ``laps`` times."""

    waypoints: list[Waypoint] = Field(min_length=1)
    laps: int = Field(default=1, ge=1)


@tool
def set_patrol_route(route: PatrolRoute, runtime: ToolRuntime[UnitContext]) -> int:
    """Give the unit a patrol route; return how many cells it will visit in total."""
    unit = runtime.context
    unit.log.append(("set_patrol_route", route.model_dump()))
    unit.patrol = [(w.x, w.y) for w in route.waypoints] * route.laps
    return len(unit.patrol)


@tool
def say(text: str, runtime: ToolRuntime[UnitContext]) -> None:
    """Make the unit say something out loud."""
    runtime.context.log.append(("say", text))


NPC_TOOLS = [
    get_current_position,
    make_one_step,
    get_enemies_around,
    has_sword,
    pick_sword,
    attack_enemy,
    drop_sword,
    set_patrol_route,
    say,
]


# -- the weather service ---------------------------------------------------------------------


@dataclass
class WeatherContext:
    """Cities to watch, their temperatures, and the notifications sent."""

    cities: list[str]
    temperatures: dict[str, float]
    notifications: list[str] = field(default_factory=list)
    log: list[tuple[Any, ...]] = field(default_factory=list)


@tool
def get_city_count(runtime: ToolRuntime[WeatherContext]) -> int:
    """Return how many cities are on the watch list."""
    runtime.context.log.append(("get_city_count",))
    return len(runtime.context.cities)


@tool
def get_city_name(index: int, runtime: ToolRuntime[WeatherContext]) -> str:
    """Return the name of the city at position index (0-based) of the watch list."""
    runtime.context.log.append(("get_city_name", index))
    return runtime.context.cities[index]


@tool
def get_temperature(city: str, runtime: ToolRuntime[WeatherContext]) -> float:
    """Return the current temperature of a city in degrees Celsius."""
    runtime.context.log.append(("get_temperature", city))
    return runtime.context.temperatures[city]


@tool
def notify(city: str, temperature: float, runtime: ToolRuntime[WeatherContext]) -> None:
    """Send the user a notification that a city is warm."""
    runtime.context.log.append(("notify", city, temperature))
    runtime.context.notifications.append(f"{city}: {temperature:g} C")


WEATHER_TOOLS = [get_city_count, get_city_name, get_temperature, notify]
