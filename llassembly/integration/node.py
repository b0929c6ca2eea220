"""A graph node with a sync and an async body, built on LangChain's public ``Runnable``.

LangGraph wraps a plain function given to ``add_node`` so that ``ainvoke`` runs it on a thread;
the planner's nodes need their own async body (the model and the tools are awaited), and no
run of their own in traces (the model and tool runs nest under the graph's node run), as
LangGraph's own two-bodied nodes do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config

__all__ = ["Node"]


class Node(Runnable[Any, Any]):
    """Calls ``func(input, config)`` on ``invoke`` and awaits ``afunc(input, config)`` on
    ``ainvoke`` (without ``afunc``, ``ainvoke`` calls ``func`` as ``invoke`` does)."""

    def __init__(
        self,
        func: Callable[[Any, RunnableConfig], Any],
        afunc: Callable[[Any, RunnableConfig], Awaitable[Any]] | None = None,
    ) -> None:
        self.func = func
        self.afunc = afunc
        self.name = getattr(func, "__name__", None) or "Node"

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.func(input, ensure_config(config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if self.afunc is None:
            return self.invoke(input, config)
        return await self.afunc(input, ensure_config(config))
