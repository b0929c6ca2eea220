"""The tools a plan may call, as every check takes them: a mapping by name, or a list.

The analysis reads a tool as a :class:`~llassembly.language.program.ToolShape` (its name, its
parameters, how many results it gives): an :class:`~llassembly.machine.externs.Extern`, or
anything with those three attributes. Plain callables and LangChain tools become externs in
the machine (``llassembly.check``, ``llassembly.verify`` and ``llassembly.summarize`` adapt
them); here they are refused with a clear error rather than failing deep inside a check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llassembly.errors import UsageError
from llassembly.language.program import ToolShape

__all__ = ["Adapt", "is_tool_shape", "tool_shapes"]

Adapt = Callable[[Any, "str | None"], ToolShape]
"""``adapt(item, name)``: a tool the analysis can read, made from an item that is not one
(``name`` is its key when the tools came as a mapping)."""


def is_tool_shape(item: object) -> bool:
    """Whether ``item`` has what the analysis reads of a tool (name, params, n_results)."""
    return all(hasattr(item, attr) for attr in ("name", "params", "n_results"))


def tool_shapes(tools: object, adapt: Adapt | None = None) -> Mapping[str, ToolShape]:
    """The tools by name, from a mapping ``name -> tool`` or a list of tools.

    A mapping whose every value is already a tool is returned as it is (the control-flow graph
    of one program and one mapping is built once).

    Args:
        tools: A mapping of name to tool, or an iterable of tools.
        adapt: Makes a tool of an item that is not one (without it, such an item is refused).

    Raises:
        UsageError: ``tools`` is neither a mapping nor a list, two tools share a name, or an
            item is no tool (and cannot be adapted).
    """
    if isinstance(tools, Mapping):
        found: dict[str, ToolShape] = {}
        for key, tool in tools.items():
            if not isinstance(key, str):
                raise UsageError(f"tools: a mapping of tools is keyed by tool name, not {key!r}")
            found[key] = _shape(tool, adapt, key)
        same = all(found[key] is tools[key] for key in found)
        return tools if same else found
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
        raise UsageError(
            "tools must be a list of tools (LangChain tools, functions or externs) or a "
            f"mapping of tool name to tool, not {type(tools).__name__}"
        )
    by_name: dict[str, ToolShape] = {}
    for item in tools:
        tool = _shape(item, adapt, None)
        if tool.name in by_name:
            raise UsageError(f"two tools are named {tool.name!r}: tool names must be unique")
        by_name[tool.name] = tool
    return by_name


def _shape(item: object, adapt: Adapt | None, name: str | None) -> ToolShape:
    if is_tool_shape(item):
        return item  # type: ignore[return-value]  # it has what a ToolShape has
    if adapt is not None:
        return adapt(item, name)
    shown = repr(item)[:80]
    raise UsageError(
        f"{shown} is not a tool the check can read: give externs (llassembly.externs_from), or "
        "call llassembly.check / verify / summarize, which take functions and LangChain tools"
    )
