"""The import path ``llassembly.emulator`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.machine.emulator import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_STACK_DEPTH,
    DEFAULT_MAX_TOOL_CALLS,
    CallRecord,
    CompiledProgram,
    Emulator,
    MachineState,
    RunResult,
    ToolCall,
    compile_program,
)

__all__ = [
    "DEFAULT_MAX_INSTRUCTIONS",
    "DEFAULT_MAX_STACK_DEPTH",
    "DEFAULT_MAX_TOOL_CALLS",
    "CallRecord",
    "CompiledProgram",
    "Emulator",
    "MachineState",
    "RunResult",
    "ToolCall",
    "compile_program",
]
