"""The import path ``llassembly.graph`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.integration.graph import (
    GRANULARITIES,
    RUN_KEY,
    Granularity,
    PlanGraph,
    PlanRun,
    PlanState,
)

__all__ = [
    "GRANULARITIES",
    "RUN_KEY",
    "Granularity",
    "PlanGraph",
    "PlanRun",
    "PlanState",
]
