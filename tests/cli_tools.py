"""Tiny tools for ``tests/end_to_end/test_cli.py`` (imported by the CLI as ``cli_tools:...``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from pydantic import BaseModel


def double(x: int) -> int:
    """Return twice x."""
    return 2 * x


def greet(name: str) -> str:
    """Return a greeting."""
    return f"Hello, {name}"


def explode(x: int) -> int:
    """Always raise."""
    raise RuntimeError(f"exploded on {x}")


def squares(n: int) -> list[int]:
    """The first n squares, returned lazily (a generator)."""
    return (i * i for i in range(n))  # type: ignore[return-value]


def huge() -> int:
    """Return an integer of 20000 bits (more digits than Python prints by default)."""
    return 2**20000 - 1


TOOLS = [double, greet, explode, huge, squares]


def make_tools() -> list[Any]:
    """A factory: the CLI calls it to get the list."""
    return [double, greet]


NOT_A_TOOL = 42


def launch() -> str:
    """A tool of no parameters: naming it in --tools must not run it."""
    SIDE_EFFECTS.append(0)
    return "launched"


def untyped_launch():
    """A tool of no parameters and no annotation: a tool too, as the API takes it."""
    SIDE_EFFECTS.append(0)
    return "launched"


def one_tool() -> Callable[..., Any]:
    """A factory of one tool."""
    return double


def tool_map() -> dict[str, StructuredTool]:
    """A factory of a mapping of tools."""
    return {"greet": StructuredTool.from_function(greet)}


def chatty(x: int) -> int:
    """Return x, printing a debug line as tools under development do."""
    print(f"debug: chatty({x})")
    return x


def chatty_failure(x: int) -> int:
    """Print a debug line, then raise."""
    print(f"debug: about to fail on {x}")
    raise RuntimeError("failed")


CHATTY = [chatty, chatty_failure]


def shell_out(x: int) -> int:
    """Write to file descriptor 1 itself, and run a process that does, as tools that shell
    out do."""
    os.write(1, b"debug: from fd 1\n")
    subprocess.run(["echo", "debug: from a process"], check=True)
    return x


SHELL = [shell_out]


def count(x: int) -> int:
    """Add a line to the file $COUNT_FILE names: a side effect another process sees."""
    with open(os.environ["COUNT_FILE"], "a", encoding="utf-8") as file:
        file.write(f"{x}\n")
    return x


COUNTING = [count]


# --- hostile text: what tools from outside return -----------------------------------------------

CUT_EMOJI = "abc\ud83d"
"""Text ending in half an emoji (a lone surrogate), as a JSON API that cut a string returns it."""


def cut(x: int) -> str:
    """Return text whose last character was cut in half."""
    return CUT_EMOJI


def echo(text: str) -> str:
    """Return the text given."""
    return text


def cut_failure(x: int) -> int:
    """Raise with half an emoji in the message."""
    raise RuntimeError(f"bad input {CUT_EMOJI}")


def halves() -> dict[str, list[str]]:
    """Return an emoji as a pair of surrogates (in a key and a value), and a lone one."""
    return {"key \ud83d\ude00": ["\ud83d\ude00", "\udcff"]}


HOSTILE = [cut, echo, cut_failure, halves, double]


# --- records: results that are objects ----------------------------------------------------------


class Point(BaseModel):
    """A pydantic model."""

    x: int
    label: str


@dataclass
class Box:
    """A dataclass."""

    width: int
    tags: tuple[str, ...]


class Pair(TypedDict):
    """A TypedDict."""

    left: int
    right: str


class Opaque:
    """An object JSON cannot hold: its text stands for it."""

    def __repr__(self) -> str:
        return "<opaque>"


def a_dict(x: int) -> dict[str, Any]:
    """Return a dict with a nested model."""
    return {"x": x, "point": Point(x=x, label="p")}


def a_model(x: int) -> Point:
    """Return a pydantic model."""
    return Point(x=x, label="p")


def a_dataclass(x: int) -> Box:
    """Return a dataclass."""
    return Box(width=x, tags=("a", "b"))


def a_typeddict(x: int) -> Pair:
    """Return a TypedDict."""
    return {"left": x, "right": "r"}


def models(x: int) -> list[Point]:
    """Return a list of pydantic models."""
    return [Point(x=x, label="a"), Point(x=x + 1, label="b")]


def a_tuple(x: int) -> tuple[int, str]:
    """Return two values."""
    return x, "two"


def opaque(x: int) -> Any:
    """Return an object JSON cannot hold."""
    return Opaque()


def take_point(p: Point) -> int:
    """Take a record as an argument."""
    return p.x


RECORDS = [a_dict, a_model, a_dataclass, a_typeddict, models, a_tuple, opaque, take_point]


# --- async-only tools: a synchronous run refuses them before anything runs ---------------------

SIDE_EFFECTS: list[int] = []
"""What :func:`record` was called with (a side effect a refused run must not have)."""


def record(x: int) -> int:
    """Keep x: a side effect."""
    SIDE_EFFECTS.append(x)
    return x


async def wait(x: int) -> int:
    """An async def tool."""
    return x


async def _wait(x: int) -> int:
    return x


wait_tool = StructuredTool.from_function(
    coroutine=_wait, name="wait_tool", description="A LangChain tool built from a coroutine only."
)

ASYNC = [record, wait, wait_tool]


@tool
def ship(crate: int, call_id: Annotated[str, InjectedToolCallId]) -> int:
    """A tool that needs its tool-call id (injected), as one idempotent by call id does."""
    return crate


INJECTED = [record, ship]


def broken_factory() -> list[Any]:
    """A factory that fails."""
    raise RuntimeError("no tools today")


def query_text(text: str) -> str:
    """A tool of the user's with the name plans call a query by."""
    return text


QUERY_CLASH = [double, query_text]


class Unprintable(Exception):
    """An error whose text cannot be made (its ``__str__`` raises)."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


def unprintable() -> int:
    """Raise an error whose text cannot be made."""
    raise Unprintable


def unprintable_factory() -> list[Any]:
    """A tools factory that raises an error whose text cannot be made."""
    raise Unprintable


UNPRINTABLE = [unprintable]
