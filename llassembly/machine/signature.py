"""What a tool's signature tells the machine beyond its parameters' types: which parameters the
runtime injects (LangChain's rule: ``InjectedToolArg`` and its kinds, ``ToolRuntime``, plus a
``RunnableConfig``), the resolved annotations, and how many values a call pushes.

LangChain's types are looked up only if loaded (see :func:`~llassembly.machine.values.loaded`):
a plain typed callable does not need them, and the engine imports no LangChain or LangGraph.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, get_args, get_origin

from llassembly.errors import UsageError
from llassembly.machine.values import EMPTY, is_subclass, loaded, type_label

__all__ = ["is_injected", "is_runtime", "result_count", "type_hints"]


def is_injected(annotation: Any) -> bool:
    """Whether the runtime supplies this parameter (LangChain's rule, plus ``RunnableConfig``)."""
    config = loaded("langchain_core.runnables.config", "RunnableConfig")
    if (config is not None and annotation is config) or is_runtime(annotation):
        return True
    injected = loaded("langchain_core.tools.base", "InjectedToolArg")
    if injected is None:
        return False
    metadata = get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()
    return any(isinstance(m, injected) or is_subclass(m, injected) for m in metadata)


def is_runtime(annotation: Any) -> bool:
    """Whether the parameter is LangGraph's ``ToolRuntime``."""
    runtime = loaded("langgraph.prebuilt.tool_node", "ToolRuntime")
    return runtime is not None and is_subclass(get_origin(annotation) or annotation, runtime)


def type_hints(obj: Any, name: str) -> dict[str, Any]:
    """The resolved annotations of ``obj`` (a tool's function or schema), extras kept."""
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception as exc:
        msg = f"cannot resolve the type annotations of tool {name!r}: {exc}"
        raise UsageError(msg) from exc


def result_count(annotation: Any, name: str) -> tuple[int, tuple[Any, ...]]:
    """How many values a call pushes, and their types, from the return annotation."""
    if annotation is EMPTY or annotation is Any:
        return 1, ()
    ann = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    if ann is None or ann is type(None):
        return 0, ()
    if get_origin(ann) is tuple:
        args = get_args(ann)
        if len(args) == 2 and args[1] is Ellipsis:
            msg = (
                f"tool {name!r} returns {type_label(ann)} of unknown length: annotate a fixed "
                "tuple (tuple[int, int]) so the plan knows how many values to POP, or return a list"
            )
            raise UsageError(msg)
        return len(args), args
    return 1, (ann,)
