"""llassembly: one model call per plan.

The model writes a whole plan in a small assembly language (PUSH, CALL a tool, POP, CMP,
jumps, loops); the library parses it, checks it before any tool runs, and executes it,
calling your LangChain tools.

The engine (parse, verify, emulate) is imported here; the LangChain / LangGraph integration
(:class:`ToolsPlannerMiddleware`, the planner nodes, :class:`PlanGraph`, the approval helpers,
:func:`plan`) is imported when one of its names is first used, so the engine alone loads no
LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .emulator import CallRecord, Emulator, MachineState, RunResult, ToolCall, compile_program
from .errors import (
    AsmRuntimeError,
    AsmSyntaxError,
    BudgetExceeded,
    Diagnostic,
    EmptyReply,
    ExecutionError,
    InstructionBudgetExceeded,
    LLAssemblyError,
    PlanError,
    PlanRejected,
    RepairsExhausted,
    StackDepthExceeded,
    ToolArgumentError,
    ToolCallBudgetExceeded,
    ToolExecutionError,
    UsageError,
    WallClockExceeded,
)
from .externs import Extern, externs_from
from .parser import parse
from .program import PlainAnswer, Program
from .prompt import build_system_prompt
from .summary import Argument, CallSite, PlanSummary, ToolUse, summarize
from .verifier import check, verify

if TYPE_CHECKING:  # loaded on first use (see __getattr__); named here for type checkers
    from ._approval import plan_call_approved, unless_plan_approved
    from .graph import PlanGraph
    from .middleware import ToolsPlannerMiddleware
    from .nodes import AToolsPlannerNode, ToolsPlannerNode
    from .planning import Plan, aplan, plan

__version__ = "0.1.0"

_LAZY = {
    "AToolsPlannerNode": ".nodes",
    "Plan": ".planning",
    "PlanGraph": ".graph",
    "ToolsPlannerMiddleware": ".middleware",
    "ToolsPlannerNode": ".nodes",
    "aplan": ".planning",
    "plan": ".planning",
    "plan_call_approved": "._approval",
    "unless_plan_approved": "._approval",
}
"""The integration's names and the module each comes from."""


def __getattr__(name: str) -> Any:
    """Import an integration name on first use (PEP 562) and keep it in the package."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AToolsPlannerNode",
    "Argument",
    "AsmRuntimeError",
    "AsmSyntaxError",
    "BudgetExceeded",
    "CallRecord",
    "CallSite",
    "Diagnostic",
    "EmptyReply",
    "Emulator",
    "ExecutionError",
    "Extern",
    "InstructionBudgetExceeded",
    "LLAssemblyError",
    "MachineState",
    "PlainAnswer",
    "Plan",
    "PlanError",
    "PlanGraph",
    "PlanRejected",
    "PlanSummary",
    "Program",
    "RepairsExhausted",
    "RunResult",
    "StackDepthExceeded",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallBudgetExceeded",
    "ToolExecutionError",
    "ToolUse",
    "ToolsPlannerMiddleware",
    "ToolsPlannerNode",
    "UsageError",
    "WallClockExceeded",
    "__version__",
    "aplan",
    "build_system_prompt",
    "check",
    "compile_program",
    "externs_from",
    "parse",
    "plan",
    "plan_call_approved",
    "summarize",
    "unless_plan_approved",
    "verify",
]
