"""llassembly: one model call per plan.

The model writes a whole plan in a small assembly language (PUSH, CALL a tool, POP, CMP,
jumps, loops); the library parses it, checks it before any tool runs, and executes it,
calling your LangChain tools.

The engine (parse, verify, emulate) is imported here; the LangChain / LangGraph integration
(:class:`ToolsPlannerMiddleware`, the planner nodes, :class:`PlanGraph`, the approval helpers,
:func:`plan`) is imported when one of its names is first used, so the engine alone loads no
LangGraph. The subpackages are ``language`` (text to program), ``analysis`` (what is known
before a run), ``machine`` (running a plan) and ``integration`` (LangChain and LangGraph).
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from llassembly.analysis.policies import (
    DataFlowPolicy,
    PlanPolicy,
    max_calls,
    never_from,
    not_in_loop,
    only_from,
)
from llassembly.analysis.summary import Argument, CallSite, PlanSummary, ToolUse
from llassembly.errors import (
    AsmRuntimeError,
    AsmSyntaxError,
    BudgetExceeded,
    CallNotRun,
    DataFlowRefused,
    Diagnostic,
    EmptyReply,
    ExecutionError,
    Failure,
    InstructionBudgetExceeded,
    LLAssemblyError,
    PlanError,
    PlanRejected,
    QueryFailed,
    RepairsExhausted,
    StackDepthExceeded,
    ToolArgumentError,
    ToolCallBudgetExceeded,
    ToolExecutionError,
    UsageError,
    UsageTypeError,
    WallClockExceeded,
)
from llassembly.integration.prompt import build_system_prompt
from llassembly.language.parser import parse, parse_program
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import Extern, check, externs_from, summarize, verify
from llassembly.machine.state import CallRecord, MachineState, RunResult, ToolCall
from llassembly.machine.steps import compile_program

if _TYPE_CHECKING:  # loaded on first use (see __getattr__); named here for type checkers
    from llassembly.integration.approval import plan_call_approved, unless_plan_approved
    from llassembly.integration.graph import PlanGraph
    from llassembly.integration.mcp import load_mcp_tools
    from llassembly.integration.middleware import PLAN_TAG, ToolsPlannerMiddleware
    from llassembly.integration.nodes import AToolsPlannerNode, ToolsPlannerNode
    from llassembly.integration.planning import Plan, aplan, plan
    from llassembly.integration.record import Status, TurnResult

__version__ = "0.1.0"

_LAZY = {
    "approval": ("plan_call_approved", "unless_plan_approved"),
    "graph": ("PlanGraph",),
    "mcp": ("load_mcp_tools",),
    "middleware": ("PLAN_TAG", "ToolsPlannerMiddleware"),
    "nodes": ("AToolsPlannerNode", "ToolsPlannerNode"),
    "planning": ("Plan", "aplan", "plan"),
    "record": ("Status", "TurnResult"),
}
"""The integration's names, by their module in ``llassembly.integration`` (as imported above)."""


def __getattr__(name: str) -> _Any:
    """Import an integration name on first use (PEP 562) and keep it in the package."""
    module = next((module for module, names in _LAZY.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"llassembly.integration.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, "analysis", "integration", "language", "machine"})


__all__ = [
    "PLAN_TAG",
    "AToolsPlannerNode",
    "Argument",
    "AsmRuntimeError",
    "AsmSyntaxError",
    "BudgetExceeded",
    "CallNotRun",
    "CallRecord",
    "CallSite",
    "DataFlowPolicy",
    "DataFlowRefused",
    "Diagnostic",
    "EmptyReply",
    "Emulator",
    "ExecutionError",
    "Extern",
    "Failure",
    "InstructionBudgetExceeded",
    "LLAssemblyError",
    "MachineState",
    "PlainAnswer",
    "Plan",
    "PlanError",
    "PlanGraph",
    "PlanPolicy",
    "PlanRejected",
    "PlanSummary",
    "Program",
    "QueryFailed",
    "RepairsExhausted",
    "RunResult",
    "StackDepthExceeded",
    "Status",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallBudgetExceeded",
    "ToolExecutionError",
    "ToolUse",
    "ToolsPlannerMiddleware",
    "ToolsPlannerNode",
    "TurnResult",
    "UsageError",
    "UsageTypeError",
    "WallClockExceeded",
    "__version__",
    "aplan",
    "build_system_prompt",
    "check",
    "compile_program",
    "externs_from",
    "load_mcp_tools",
    "max_calls",
    "never_from",
    "not_in_loop",
    "only_from",
    "parse",
    "parse_program",
    "plan",
    "plan_call_approved",
    "summarize",
    "unless_plan_approved",
    "verify",
]
