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
import importlib.abc
import importlib.machinery
import sys
import types
from typing import TYPE_CHECKING, Any

from llassembly.analysis.summary import (
    Argument,
    CallSite,
    PlanSummary,
    ToolUse,
)
from llassembly.errors import (
    AsmRuntimeError,
    AsmSyntaxError,
    BudgetExceeded,
    CallNotRun,
    DataFlowRefused,
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
    UsageTypeError,
    WallClockExceeded,
)
from llassembly.integration.prompt import build_system_prompt
from llassembly.language.parser import parse, parse_program
from llassembly.language.program import (
    PlainAnswer,
    Program,
)
from llassembly.machine.emulator import (
    CallRecord,
    Emulator,
    MachineState,
    RunResult,
    ToolCall,
    compile_program,
)
from llassembly.machine.externs import (
    Extern,
    externs_from,
)
from llassembly.machine.toolset import (
    check,
    summarize,
    verify,
)

if TYPE_CHECKING:  # loaded on first use (see __getattr__); named here for type checkers
    from llassembly.integration.approval import (
        plan_call_approved,
        unless_plan_approved,
    )
    from llassembly.integration.graph import PlanGraph
    from llassembly.integration.middleware import PLAN_TAG, ToolsPlannerMiddleware
    from llassembly.integration.nodes import (
        AToolsPlannerNode,
        ToolsPlannerNode,
    )
    from llassembly.integration.planning import (
        Plan,
        aplan,
        plan,
    )

__version__ = "0.1.0"

_LAZY = {
    "AToolsPlannerNode": ".integration.nodes",
    "PLAN_TAG": ".integration.middleware",
    "Plan": ".integration.planning",
    "PlanGraph": ".integration.graph",
    "ToolsPlannerMiddleware": ".integration.middleware",
    "ToolsPlannerNode": ".integration.nodes",
    "aplan": ".integration.planning",
    "plan": ".integration.planning",
    "plan_call_approved": ".integration.approval",
    "unless_plan_approved": ".integration.approval",
}
"""The integration's names and the module each comes from."""

_MOVED = {
    "llassembly.verifier": "llassembly.analysis.verifier",
    "llassembly.summary": "llassembly.analysis.summary",
    "llassembly.prompt": "llassembly.integration.prompt",
    "llassembly.options": "llassembly.integration.options",
    "llassembly.planning": "llassembly.integration.planning",
    "llassembly.planner": "llassembly.integration.planner",
    "llassembly.nodes": "llassembly.integration.nodes",
}
"""Module paths of earlier releases that have no file of their own any more, and where each
module lives now (the most used old paths, ``llassembly.parser`` and the like, are modules
that re-export theirs)."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old path of :data:`_MOVED` as the module at its new path (the same object),
    loaded only when it is imported, as before."""

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(_MOVED[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        """The module ran when :meth:`create_module` imported it at its new path."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


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
    "PLAN_TAG",
    "AToolsPlannerNode",
    "Argument",
    "AsmRuntimeError",
    "AsmSyntaxError",
    "BudgetExceeded",
    "CallNotRun",
    "CallRecord",
    "CallSite",
    "DataFlowRefused",
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
    "UsageTypeError",
    "WallClockExceeded",
    "__version__",
    "aplan",
    "build_system_prompt",
    "check",
    "compile_program",
    "externs_from",
    "parse",
    "parse_program",
    "plan",
    "plan_call_approved",
    "summarize",
    "unless_plan_approved",
    "verify",
]
