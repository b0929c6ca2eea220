"""The numbers a plan lives within, each defined once.

* The machine's values: integers are 64-bit (:data:`INT_MIN` .. :data:`INT_MAX`), floats finite.
* The budgets every entry point defaults to: :data:`DEFAULT_MAX_INSTRUCTIONS`,
  :data:`DEFAULT_MAX_TOOL_CALLS`, :data:`DEFAULT_MAX_STACK_DEPTH`.
* The size of a plan a model may write: :data:`MAX_PLAN_INSTRUCTIONS`.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "DEFAULT_MAX_INSTRUCTIONS",
    "DEFAULT_MAX_STACK_DEPTH",
    "DEFAULT_MAX_TOOL_CALLS",
    "INT_MAX",
    "INT_MIN",
    "MAX_MEMORY_CELLS",
    "MAX_PLAN_INSTRUCTIONS",
    "is_int64",
]

INT_MIN: Final = -(2**63)
"""The least integer a register holds."""
INT_MAX: Final = 2**63 - 1
"""The greatest integer a register holds."""

DEFAULT_MAX_INSTRUCTIONS: Final = 1000
"""Instructions one run may execute (``max_instructions_to_exec``)."""
DEFAULT_MAX_TOOL_CALLS: Final = 100
"""Tool calls one run may make (``max_tool_calls``)."""
DEFAULT_MAX_STACK_DEPTH: Final = 256
"""Values on the data stack plus return addresses (``max_stack_depth``)."""

MAX_PLAN_INSTRUCTIONS: Final = 4096
"""Most instructions a plan written by the model may have (loops and subroutines keep real
plans far below it); a longer one is refused before it is checked further or compiled."""

MAX_MEMORY_CELLS: Final = 4096
"""Most memory cells (all data labels and variables together) one plan may declare."""


def is_int64(value: Any) -> bool:
    """Whether ``value`` is an ``int`` (not a ``bool``) within the 64-bit range."""
    return type(value) is int and INT_MIN <= value <= INT_MAX
