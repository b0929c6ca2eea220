"""The import path ``llassembly.policies`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.analysis.policies import (
    PlanPolicy,
    check_policies,
    max_calls,
    not_in_loop,
)

__all__ = [
    "PlanPolicy",
    "check_policies",
    "max_calls",
    "not_in_loop",
]
