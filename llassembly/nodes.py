"""The import path ``llassembly.nodes`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.integration.nodes import (
    AToolsPlannerNode,
    ToolsPlannerNode,
)

__all__ = [
    "AToolsPlannerNode",
    "ToolsPlannerNode",
]
