"""The import path ``llassembly.program`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.language.instructions import (
    MNEMONICS,
    OPCODE_INFO,
    Flow,
    OpcodeInfo,
    OperandKind,
    stack_effect,
    successors,
)
from llassembly.language.opcodes import (
    EAX_INDEX,
    ECX_INDEX,
    EDX_INDEX,
    REGISTER_COUNT,
    Opcode,
    register_index,
    register_name,
)
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    MemoryLabel,
    Name,
    Operand,
    PlainAnswer,
    Program,
    Reg,
    ToolShape,
    UnknownInstruction,
    Value,
    find_tool,
)

__all__ = [
    "EAX_INDEX",
    "ECX_INDEX",
    "EDX_INDEX",
    "MNEMONICS",
    "OPCODE_INFO",
    "REGISTER_COUNT",
    "Flow",
    "Imm",
    "Instruction",
    "Mem",
    "MemoryLabel",
    "Name",
    "Opcode",
    "OpcodeInfo",
    "Operand",
    "OperandKind",
    "PlainAnswer",
    "Program",
    "Reg",
    "ToolShape",
    "UnknownInstruction",
    "Value",
    "find_tool",
    "register_index",
    "register_name",
    "stack_effect",
    "successors",
]
