"""The NPC demo: units on a grid world, each steered by one plan from one model call.

Run it with ``llassembly-demo`` (or ``python -m llassembly_demo``). It uses only the public API
of ``llassembly``. The pieces:

* :mod:`.world`: the grid world (pure Python) and its rules;
* :mod:`.tools`: the units' LangChain tools (context: :class:`~.tools.UnitContext`);
* :mod:`.replay`: the default model, which replays the hand-written plans in ``plans/``;
* :mod:`.run`: planning (one model call per unit) and turn-by-turn play on the emulator;
* :mod:`.agents`: the same game through ``create_agent`` + ``ToolsPlannerMiddleware``;
* :mod:`.render` / :mod:`.picture`: the terminal frame and the PNG picture;
* :mod:`.cli`: the ``llassembly-demo`` command.
"""

from .tools import UNIT_TOOLS, UnitContext
from .world import Enemy, Event, Unit, World, WorldError

__all__ = ["UNIT_TOOLS", "Enemy", "Event", "Unit", "UnitContext", "World", "WorldError"]
