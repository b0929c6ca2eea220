"""Example tools: a pretend weather service and a notifier, as plain typed functions.

Used by ``llassembly run examples/weather.asm --tools examples.weather_tools:TOOLS``.
"""

from __future__ import annotations

_TEMPERATURES = {"Paris": 21, "Oslo": 4, "Cairo": 33, "Lima": 18}


def get_temperature(city: str) -> int:
    """Return today's temperature in a city, in degrees Celsius (0 if unknown)."""
    return _TEMPERATURES.get(city, 0)


def notify(message: str, value: int) -> None:
    """Send a notification with a message and a number."""


TOOLS = [get_temperature, notify]
