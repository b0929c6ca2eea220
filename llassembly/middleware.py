"""The import path ``llassembly.middleware`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.integration.middleware import (
    PLAN_TAG,
    PlannerAgentState,
    ToolsPlannerMiddleware,
)

__all__ = [
    "PLAN_TAG",
    "PlannerAgentState",
    "ToolsPlannerMiddleware",
]
