"""The numbers a plan lives within, each defined once: the machine's 64-bit integers, the
budgets every entry point defaults to, the size of a plan a model may write (and of a query's
answer shape), the text a plan may build, and the work the checks before the run may do.

Each is documented, with what going past it does, in ``docs/language.md``
(``tests/language/test_plan_limits.py`` checks the tables against this module).
"""

from __future__ import annotations

from typing import Any, Final

from llassembly.errors import UsageError

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


def check_budgets(**budgets: object) -> None:
    """Raise ``UsageError`` for a budget (named as its keyword) that is not a positive integer:
    the one rule of every entry point that takes one."""
    for label, limit in budgets.items():
        if type(limit) is not int or limit < 1:  # bool is an int, but not a limit
            raise UsageError(f"{label} must be a positive integer, got {limit!r}")


MAX_PLAN_INSTRUCTIONS: Final = 4096
"""Most instructions a plan may have (loops and subroutines keep real plans far below it): the
verifier refuses a longer one first, so every check refuses it alike."""

MAX_REPLY_LINES: Final = 32_768
"""Most lines the parser reads from one reply (code, prose and thinking together), far more
than a plan of :data:`MAX_PLAN_INSTRUCTIONS` needs."""

MAX_MEMORY_CELLS: Final = 4096
"""Most memory cells (all data labels and variables together) one plan may declare."""
MAX_REPEAT: Final = 1 << 16
"""The largest ``times`` or ``resX`` count."""

MAX_SAY_PLACEHOLDERS: Final = 256
"""Most placeholders (``{R1}``, ``{[t + ESI*4]}``) one text (a ``SAY``'s, or any quoted one)
may hold."""
MAX_PLAN_PLACEHOLDERS: Final = 4096
"""Most placeholders all the texts of one plan may hold together (a data-label text said by
several ``SAY`` counts once per ``SAY``)."""

MAX_ANSWER_FIELDS: Final = 32
"""Most fields (and list elements' shapes) a query answer shape may declare, nested ones counted."""
MAX_ANSWER_DEPTH: Final = 4
"""Most levels one query answer shape may nest."""
MAX_ANSWER_SHAPE_CHARS: Final = 4000
"""Longest text of one query answer shape."""

MAX_DATA_TEXT_CHARS: Final = 262_144
"""Longest text a plan may build from its data: the JSON list a row reads as when read whole
(at parse time for read-only rows, as it runs for writable ones), or a string made of several
values (``times 100 db "ab"``). Text the plan writes out itself is kept at any length; this
bounds what a short plan can make the machine build (4096 64-bit numbers read as about 100 KB)."""

MAX_BUILT_TEXT_CHARS: Final = 1_048_576
"""Longest text a plan may build as it runs: a template filled in (``"Hi {R1}"``), or the JSON
text of a structure with a part written (``MOV R1.email, R2``)."""

MAX_ROW_TEXT_PER_RUN: Final = 64 * MAX_DATA_TEXT_CHARS
"""Most characters of text the reads of writable rows whole may build in one run (counted in the
running process; an unchanged row read again builds nothing). Without it a loop that changes a large
row and reads it whole each round would do 10,000 times the work of an instruction per round."""

MAX_ARGUMENT_DEPTH: Final = 100
"""Deepest nesting of objects and arrays in a tool argument's value: a call's arguments are
kept in its message, which a checkpointer must store (LangGraph's refuses data nested a few
hundred levels deep)."""
MAX_CALL_DEPTH: Final = 16
"""Subroutine nesting the checks follow; a plan that nests deeper is refused."""
MAX_STATES: Final = 20_000
"""Most states (an instruction and its return stack) the checks keep; a plan that needs more
is refused."""
MAX_STEPS: Final = 5 * MAX_STATES
"""Most state visits of one check over the paths; a plan that needs more is refused."""
MAX_DIAGNOSTICS: Final = 1000
"""Most problems one check keeps (a hostile plan can have one per character); the rest are
counted in a last diagnostic."""
MAX_VALUE_STEPS: Final = 100_000
"""Most state visits the summary's analyses of values (constants, data flows) make; past it
every argument is unknown and may come from any result."""
MAX_VALUE_WORK: Final = 1_000_000
"""Most values (state visits times the registers and cells followed) those analyses handle,
likewise: a plan that writes many registers gets fewer visits."""
MAX_FOLLOWED_STACK: Final = DEFAULT_MAX_STACK_DEPTH
"""Values at the top of the data stack the analyses follow, as many as a run may hold by
default; a deeper one may be anything (a constant argument is then computed, and an argument's
sources may be every result and every query's answer)."""


def is_int64(value: Any) -> bool:
    """Whether ``value`` is an ``int`` (not a ``bool``) within the 64-bit range."""
    return type(value) is int and INT_MIN <= value <= INT_MAX
