"""Random plans for the property tests (``properties/test_emulator_fuzz.py``, the hostile
fuzz, the summary's and the overlap's random runs): a small tool set with every arity and
result shape (and one tool that raises), the machine's budgets, and a generator of plans that
use every instruction (x86 spellings and operand forms included), memory operands over
writable and read-only data, variables, calls that leave their last arguments out
(``CALL tool, N``) and calls whose failure the plan tests (``JC``)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from llassembly.errors import (
    LLAssemblyError,
)
from llassembly.language.instructions import MNEMONICS, OPCODE_INFO, Opcode
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import (
    Extern,
    externs_from,
)
from llassembly.machine.state import RunResult
from llassembly.machine.steps import CompiledProgram, compile_program

# --- a small tool set: every arity and result shape, and one tool that raises -----------------


class Point(BaseModel):
    x: int
    y: int


def add2(a: int, b: int) -> int:
    return a + b


def name() -> str:
    return "Paris"


def pair(x: float) -> tuple[int, int]:
    return 1, 2


def sink(message: str) -> None:
    return None


def fail(x: int) -> int:
    raise RuntimeError("the tool failed")


def describe(p: Point) -> dict[str, int]:
    return {"sum": p.x + p.y}


def echo(value):  # type: ignore[no-untyped-def]  # untyped: takes and returns anything
    return value


def truth(flag: bool) -> bool:
    return not flag


def triple(a: str, b: float, c: int) -> tuple[str, float, int]:
    return a, b, c


def opt(a: int, b: int = 2, c: str = "x") -> int:
    return a + b + len(c)


TOOLS = [add2, name, pair, sink, fail, describe, echo, truth, triple, opt]
EXTERNS: dict[str, Extern] = externs_from(TOOLS)

MAX_INSTRUCTIONS = 200
MAX_TOOL_CALLS = 6
MAX_STACK = 8
LIMITS: dict[str, Any] = {
    "max_instructions_to_exec": MAX_INSTRUCTIONS,
    "max_tool_calls": MAX_TOOL_CALLS,
    "max_stack_depth": MAX_STACK,
}

# --- program generator -----------------------------------------------------------------------

REGISTERS = ["R0", "R1", "R2", "r3", "R100", "EAX", "rax", "EBX", "ECX", "EDX", "ESI", "xmm0", "AL"]
DATA = {
    "greeting": 'db "Hello", 0',
    "limit": "dd 10",
    "ratio": "dq 0.5",
    "point": 'db {"x": 1, "y": 2}',
    "size": "equ 3",
    "counts": "dd 0, 1, 2",
    "scores": "times 3 dq 1.5",
}
BSS = {"buf": "resd 4"}
RODATA = {"cities": "dd greeting, point", "table": "dw 4, -2, 7"}
MEMORY_LABELS = ["limit", "counts", "scores", "buf", "cities", "table", "var1"]
VARIABLES = ["var1", "var2"]
LABELS = ["L0", "L1", "L2", "L3"]
_MNEMONICS = sorted(MNEMONICS)
_OLD_OPCODES = {op.name for op in list(Opcode)[: list(Opcode).index(Opcode.DIV)]}


def _string_literal(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    )
    return f'"{escaped}"'


_ints = st.one_of(
    st.integers(-5, 20),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, -(2**63) + 1, 2**63, 0x7FFFFFFF]),
)
_floats = st.floats(allow_nan=False, allow_infinity=False).map(repr)
_strings = st.text(
    st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_characters="\r"), max_size=8
).map(_string_literal)
_json_strings = st.sampled_from(['\'{"x": 1, "y": 2}\'', "'[1, 2]'", "'1'", "'true'", "'0.5'"])
_none = st.sampled_from(["NONE", '"\ufdd0"', '"2024-03-05"'])  # no value; texts that are no NONE
_values = st.one_of(
    st.sampled_from(REGISTERS),
    _ints.map(str),
    _floats,
    _strings,
    _json_strings,
    _none,
    st.sampled_from(sorted(DATA)),
)
_targets = st.one_of(st.sampled_from(LABELS), st.sampled_from(sorted(EXTERNS)))


@st.composite
def memory_operand(draw: st.DrawFn) -> str:
    """``[label + reg*scale + disp]`` with any part missing, sometimes with a size word, some
    in bounds and at a cell, some not (the verifier or the run refuses those)."""
    parts = []
    if draw(st.integers(0, 5)):
        parts.append(draw(st.sampled_from(MEMORY_LABELS)))
    if not parts or draw(st.booleans()):
        reg = draw(st.sampled_from(["ESI", "EAX", "R1", "ECX", "R0"]))
        scale = draw(st.sampled_from([1, 2, 4, 8, 4, 8]))
        parts.append(reg if scale == 1 else f"{reg}*{scale}")
    if draw(st.booleans()):
        parts.append(str(draw(st.sampled_from([0, 2, 4, 8, 16, 24]))))
    text = "[" + " + ".join(parts) + "]"
    size = draw(st.sampled_from(["", "", "dword ", "QWORD PTR ", "byte "]))
    return size + text


_OPERAND = {
    "reg": st.one_of(
        st.sampled_from(REGISTERS), memory_operand(), st.sampled_from([*VARIABLES, "limit"])
    ),
    "value": st.one_of(_values, memory_operand(), st.sampled_from(VARIABLES)),
    "label": st.sampled_from(LABELS),
    "target": _targets,
    "mem": memory_operand(),
    "count": st.integers(-1, 4).map(str),
}


@st.composite
def any_instruction(draw: st.DrawFn) -> str:
    mnemonic = draw(st.sampled_from(_MNEMONICS))
    info = OPCODE_INFO[MNEMONICS[mnemonic]]
    kinds = draw(st.sampled_from([form.kinds for form in info.shapes]))
    operands = [draw(_OPERAND[kind]) for kind in kinds]
    return f"{mnemonic} {', '.join(operands)}".strip()


_X86 = sorted(m for m, op in MNEMONICS.items() if m != op.name or op.name not in _OLD_OPCODES)
_small = st.one_of(st.sampled_from(["ECX", "ESI", "R1", "EAX"]), st.integers(-3, 9).map(str))

# x86-style lines models write: the new opcodes over registers, memory and variables.
x86_instruction = st.one_of(
    st.builds("{} {}, {}".format, st.sampled_from(_X86), _OPERAND["reg"], _small),
    st.builds("MOV {}, {}".format, _OPERAND["reg"], st.one_of(_small, memory_operand())),
    st.builds("MOV {}, {}".format, st.sampled_from(VARIABLES), _values),
    st.builds(
        "{} {}".format,
        st.sampled_from(["DIV", "IDIV", "MUL", "NEG", "NOT", "INC"]),
        st.one_of(_small, memory_operand()),
    ),
    st.builds("MOV ECX, {}\n{}: LOOP {}".format, st.integers(-1, 4), st.just("L2"), st.just("L2")),
    st.sampled_from(["XOR ESI, ESI", "TEST EAX, EAX", "CDQ", "SETG AL", "LEA ESI, [counts + 4]"]),
)


@st.composite
def tool_call(draw: st.DrawFn) -> str:
    """PUSH as many values as the tool takes (usually fitting ones), CALL it, POP the results."""
    extern = EXTERNS[draw(st.sampled_from(sorted(EXTERNS)))]
    fitting = st.one_of(st.sampled_from(REGISTERS), st.integers(-3, 3).map(str), _values)
    pushed = draw(st.integers(0, len(extern.params))) if draw(st.booleans()) else None
    count = len(extern.params) if pushed is None else pushed
    lines = [f"PUSH {draw(fitting)}" for _ in range(count)]
    lines.append(f"CALL {extern.name}" + ("" if pushed is None else f", {pushed}"))
    if draw(st.booleans()):  # the plan tests whether it failed
        lines.append(draw(st.sampled_from(["JC L1", "JNC L2", "SETC R1", "CMOVNC R2, EAX"])))
    pops = draw(st.integers(0, extern.n_results))
    lines.extend(f"POP {draw(st.sampled_from(REGISTERS))}" for _ in range(pops))
    if not pops and draw(st.booleans()):  # the result read in EAX instead
        lines.append(draw(st.sampled_from(["TEST EAX, EAX", "CMP EAX, 1", "MOV [buf], EAX"])))
    return "\n".join(lines)


# Uniform opcodes rarely line up a tool call, so stack traffic, compares and whole tool calls
# are drawn more often.
instructions = st.one_of(
    any_instruction(),
    _values.map("PUSH {}".format),
    st.sampled_from(sorted(EXTERNS)).map("CALL {}".format),
    st.sampled_from(REGISTERS).map("POP {}".format),
    st.tuples(_values, _values).map("CMP {0[0]}, {0[1]}".format),
    tool_call(),
    tool_call(),
    x86_instruction,
)


@st.composite
def programs(draw: st.DrawFn) -> str:
    body = draw(st.lists(instructions, min_size=1, max_size=16))
    if draw(st.booleans()):  # a counted loop around the body (R9 is never drawn elsewhere)
        count = draw(st.integers(1, 60))
        body = [f"MOV R9, {count}", "top: NOP", *body, "DEC R9", "JNZ top"]
    lines = [
        "section .data",
        *(f"{k} {v}" for k, v in DATA.items()),
        "section .bss",
        *(f"{k} {v}" for k, v in BSS.items()),
        "section .rodata",
        *(f"{k} {v}" for k, v in RODATA.items()),
        "section .text",
    ]
    positions = {label: draw(st.integers(0, len(body))) for label in LABELS}
    if draw(st.booleans()):
        lines.insert(0, f"global {draw(st.sampled_from(LABELS))}")
    for index in range(len(body) + 1):
        lines.extend(f"{label}:" for label, at in positions.items() if at == index)
        if index < len(body):
            lines.append(body[index])
    return "\n".join(lines)


def compiled_or_none(source: str) -> CompiledProgram | None:
    """Parse and verify; ``None`` when the plan is (correctly) refused before the run."""
    try:
        parsed = parse(source)
        if not isinstance(parsed, Program):
            return None
        return compile_program(parsed, EXTERNS, max_stack_depth=MAX_STACK)
    except LLAssemblyError:
        return None


def check_budgets(emu: Emulator) -> None:
    state = emu.state
    assert state.executed <= MAX_INSTRUCTIONS
    assert state.tool_calls <= MAX_TOOL_CALLS
    assert len(state.stack) + len(state.calls) <= MAX_STACK


def run_within_budgets(emu: Emulator) -> RunResult | LLAssemblyError:
    try:
        return emu.run()
    except LLAssemblyError as exc:
        return exc
    finally:
        check_budgets(emu)


SETTINGS = settings(
    deadline=None,
    max_examples=400,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
