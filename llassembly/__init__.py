"""llassembly: one model call per plan.

The model writes a whole plan in a small assembly language (PUSH, CALL a tool, POP, CMP,
jumps, loops); the library parses it, checks it before any tool runs, and executes it,
calling your LangChain tools.
"""

from ._approval import plan_call_approved, unless_plan_approved
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
from .graph import PlanGraph
from .middleware import ToolsPlannerMiddleware
from .nodes import AToolsPlannerNode, ToolsPlannerNode
from .parser import parse
from .planning import Plan, aplan, plan
from .program import PlainAnswer, Program
from .prompt import build_system_prompt
from .summary import Argument, CallSite, PlanSummary, ToolUse, summarize
from .verifier import check, verify

__version__ = "0.1.0"

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
