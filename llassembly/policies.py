"""The import path ``llassembly.policies`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.analysis.policies import (
    DataFlowPolicy,
    PlanPolicy,
    check_policies,
    max_calls,
    never_from,
    not_in_loop,
    only_from,
)

__all__ = [
    "DataFlowPolicy",
    "PlanPolicy",
    "check_policies",
    "max_calls",
    "never_from",
    "not_in_loop",
    "only_from",
]
