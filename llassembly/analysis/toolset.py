"""The tools argument every public function takes: a list of tools, or a mapping of tool name
to tool. The one place that reads it (:func:`given_tools`, :func:`tool_shapes`), as
:class:`~llassembly.language.program.ToolShape` records (name, parameters, results), and the
``TypeError`` for anything else, naming the parameter and what to write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from llassembly.errors import UsageError, UsageTypeError

Adapt: TypeAlias = Callable[[Any, str | None, str], Any]
"""``adapt(item, key, where)``: the tool ``item`` is, as its caller needs it (an extern), or a
``UsageError`` that starts with ``where`` (``tools[0]``, ``tools['add']``); ``key`` is the
item's key when the tools came as a mapping, else ``None``."""


def is_tool_shape(item: object) -> bool:
    """Whether ``item`` has what the analysis reads of a tool (name, params, n_results)."""
    return all(hasattr(item, attr) for attr in ("name", "params", "n_results"))


def looks_like_one_tool(value: object) -> bool:
    """Whether ``value`` is one tool rather than a collection of them: a function, a LangChain
    tool (a pydantic model, so iterable, but with a name and ``invoke``) or an extern."""
    return (
        callable(value)
        or is_tool_shape(value)
        or (hasattr(value, "name") and hasattr(value, "invoke"))
    )


def given_tools(tools: object, param: str = "tools") -> Mapping[str, Any] | tuple[Any, ...]:
    """``tools`` as a mapping (checked to be keyed by text) or a tuple (a list or any other
    iterable, read once), before any item is read.

    Raises:
        UsageTypeError: ``tools`` is neither: one tool (wrap it in a list), a name, a number,
            ``None``...; or a mapping has a key that is not text.
    """
    if isinstance(tools, Mapping):
        for key in [key for key in tools if not isinstance(key, str)][:1]:
            raise UsageTypeError(f"{param}: a mapping of tools is keyed by tool name, not {key!r}")
        return tools
    one = looks_like_one_tool(tools)
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable) or one:
        msg = (
            f"{param} must be a list of tools (LangChain tools, functions or externs) or a "
            f"mapping of tool name to tool, not {type(tools).__name__}"
        )
        if isinstance(tools, str | bytes):
            msg += ": a name is not a tool; give the tool itself, in a list"
        elif one:
            name = getattr(tools, "name", None) or getattr(tools, "__name__", None)
            name = name if isinstance(name, str) and name.isidentifier() else "tool"
            msg += f": wrap it in a list: [{name}]"
        raise UsageTypeError(msg)
    return tuple(tools)


def tool_shapes(
    tools: object, adapt: Adapt | None = None, *, param: str = "tools"
) -> Mapping[str, Any]:
    """The tools by name, from a mapping ``name -> tool`` or a list of tools; a mapping whose
    every value is already what ``adapt`` makes of it is returned as it is (the control-flow
    graph of one program and one mapping is built once).

    Args:
        adapt: Makes each item the tool its caller needs (without it, an item must already be
            a :class:`ToolShape`, and is refused otherwise).
        param: The parameter's name, for errors (``tools``, ``externs``, ``--tools``).

    Raises:
        UsageTypeError: ``tools`` is neither a mapping nor a list, or an item is no tool.
        UsageError: Two tools share a name, or ``adapt`` refuses an item.
    """
    given, adapt = given_tools(tools, param), adapt or _as_shape
    if isinstance(given, Mapping):
        found = {key: adapt(tool, key, f"{param}[{key!r}]") for key, tool in given.items()}
        return given if all(found[key] is given[key] for key in found) else found
    by_name: dict[str, Any] = {}
    for index, item in enumerate(given):
        tool = adapt(item, None, f"{param}[{index}]")
        if tool.name in by_name:
            raise UsageError(f"two tools are named {tool.name!r}: tool names must be unique")
        by_name[tool.name] = tool
    return by_name


def _as_shape(item: object, key: str | None, where: str) -> Any:
    """The adapter without one: an item must already be a :class:`ToolShape`."""
    if is_tool_shape(item):
        return item
    raise UsageTypeError(
        f"{where}: {repr(item)[:80]} is not a tool the check can read: give externs "
        "(llassembly.externs_from), or call llassembly.check / verify / summarize, which take "
        "functions and LangChain tools"
    )
