"""Tiny tools for ``tests/test_cli.py`` (imported by the CLI as ``cli_tools:...``)."""

from __future__ import annotations

from typing import Any


def double(x: int) -> int:
    """Return twice x."""
    return 2 * x


def greet(name: str) -> str:
    """Return a greeting."""
    return f"Hello, {name}"


def explode(x: int) -> int:
    """Always raise."""
    raise RuntimeError(f"exploded on {x}")


def huge() -> int:
    """Return an integer of 20000 bits (more digits than Python prints by default)."""
    return 2**20000 - 1


TOOLS = [double, greet, explode, huge]


def make_tools() -> list[Any]:
    """A factory: the CLI calls it to get the list."""
    return [double, greet]


NOT_A_TOOL = 42


def chatty(x: int) -> int:
    """Return x, printing a debug line as tools under development do."""
    print(f"debug: chatty({x})")
    return x


def chatty_failure(x: int) -> int:
    """Print a debug line, then raise."""
    print(f"debug: about to fail on {x}")
    raise RuntimeError("failed")


CHATTY = [chatty, chatty_failure]
