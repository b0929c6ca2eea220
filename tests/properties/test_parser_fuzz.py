"""Property tests for the parser: any text is handled, positions are sane, listings round-trip."""

from __future__ import annotations

import math
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llassembly.errors import AsmSyntaxError
from llassembly.language.instructions import (
    MNEMONICS,
    OPCODE_INFO,
    Opcode,
    OperandKind,
    register_index,
    register_name,
)
from llassembly.language.parser import LineError, parse, read_operand
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Path,
    PlainAnswer,
    Program,
    Reg,
)

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROUND_TRIP = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------------------------
# Arbitrary and assembly-ish text

_PIECES = [
    *MNEMONICS,
    "mov",
    "Call",
    "jmp",
    "R1",
    "r2",
    "R0",
    "R100",
    "R101",
    "EAX",
    "rbx",
    "ESP",
    "sp",
    "loop",
    ".next",
    "_start",
    "add",
    "add()",
    "()",
    "section",
    "segment",
    ".data",
    ".rodata",
    ".text",
    "global",
    "extern",
    "db",
    "DD",
    "dq",
    "equ",
    "0",
    "-7",
    "+3",
    "0x1F",
    "0x",
    "3.5",
    "1e3",
    "-.5",
    "9" * 30,
    '"',
    "'",
    '"a;b"',
    "'x'",
    "\\",
    '\\"',
    ":",
    "::",
    ",",
    ",,",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    ";",
    "#",
    "//",
    "[",
    "]",
    "[R1]",
    "[t + ESI*4 + 8]",
    "[t - 4]",
    "[ESI*3]",
    "dword",
    "QWORD PTR",
    "ptr",
    "*",
    "+",
    "resd",
    "resq 3",
    "times",
    "times 3",
    ".bss",
    "xmm0",
    "AL",
    "{",
    "}",
    '{"a": 1}',
    "[1, 2]",
    "```",
    "```asm",
    "~~~",
    "<think>",
    "</think>",
    "<THINK>",
    "é",
    "ß",
    "ı",
    "ﬀ",
    "٣",
    "\u2028",
    "\x00",
    "😀",
    "Here is the plan:",
    "Push it.",
]

asm_ish_text = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=3)), max_size=40).map(
    "".join
)

any_reply = st.one_of(st.text(), asm_ish_text)


def _line_count(reply: str) -> int:
    return len(reply.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def _outcome(reply: str) -> Program | PlainAnswer | AsmSyntaxError:
    try:
        return parse(reply)
    except AsmSyntaxError as exc:
        return exc


@FUZZ
@given(any_reply)
def test_any_text_gives_a_program_a_plain_answer_or_a_syntax_error(reply: str) -> None:
    outcome = _outcome(reply)
    assert isinstance(outcome, Program | PlainAnswer | AsmSyntaxError)


@FUZZ
@given(any_reply)
def test_every_position_points_into_the_reply(reply: str) -> None:
    outcome = _outcome(reply)
    count = _line_count(reply)
    if isinstance(outcome, AsmSyntaxError):
        assert outcome.diagnostics
        assert (outcome.line, outcome.column) == (
            outcome.diagnostics[0].line,
            outcome.diagnostics[0].column,
        )
        assert outcome.expected
        for diagnostic in outcome.diagnostics:
            assert 1 <= diagnostic.line <= count
            assert 1 <= diagnostic.column <= len(diagnostic.source) + 1
            assert diagnostic.message
            diagnostic.render()
    elif isinstance(outcome, Program):
        assert outcome.instructions or outcome.unknown
        assert len(outcome.source_lines) == count
        for ins in outcome.instructions:
            assert 1 <= ins.line <= count
            assert 1 <= ins.column <= len(outcome.source_of(ins.line))
            assert len(ins.operand_columns) == len(ins.operands)
            assert all(1 <= c <= len(outcome.source_of(ins.line)) for c in ins.operand_columns)
        for unknown in outcome.unknown:
            assert 1 <= unknown.line <= count
            assert unknown.column >= 1
        for places in outcome.label_lines.values():
            assert all(1 <= line <= count and column >= 1 for line, column in places)
        assert 0 <= outcome.entry <= len(outcome.instructions)


@FUZZ
@given(any_reply.filter(lambda r: "think" not in r.lower()))
def test_instructions_point_at_their_mnemonic(reply: str) -> None:
    outcome = _outcome(reply)
    if not isinstance(outcome, Program):
        return
    for ins in outcome.instructions:
        at = outcome.source_of(ins.line)[ins.column - 1 :]
        assert at.startswith(ins.text)
        assert ins.op is MNEMONICS[ins.text.split()[0].upper()]


# ---------------------------------------------------------------------------------------------
# Round trip: a program rendered as a listing parses back to the same instructions

_REGISTERS = st.sampled_from([register_name(i) for i in range(101 + 7)] + ["RAX", "RBP", "RDI"])


def _plain_name(name: str) -> bool:
    """A name the parser reads as a name: not a register, the stack pointer or a number."""
    return (
        register_index(name) is None
        and name.upper() not in {"ESP", "RSP", "SP"}
        and re.fullmatch(r"\.\d+(?:[eE]\d+)?", name) is None
    )


_NAMES = st.from_regex(r"[A-Za-z_.$@?][\w.$@?]{0,12}", fullmatch=True).filter(_plain_name)

_STRINGS = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n{"), max_size=12
).filter(lambda s: "think>" not in s.lower())
# A value named with a dot is a path (R1.x, page.items), and NONE or NULL the "no value": a
# name that stays a name as a value has neither.
_VALUE_NAMES = _NAMES.filter(lambda n: "." not in n[1:] and n.lower() not in ("none", "null"))

_VALUES: st.SearchStrategy[Operand] = st.one_of(
    _REGISTERS.map(lambda name: Reg(register_index(name) or 0, name)),
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1).map(Imm),  # the 64-bit literal range
    st.floats(allow_nan=False, allow_infinity=False).map(Imm),
    _STRINGS.map(Imm),
    _VALUE_NAMES.map(Name),
)


def _operand(kind: OperandKind) -> st.SearchStrategy[Operand]:
    if kind == "reg":
        return _REGISTERS.map(lambda name: Reg(register_index(name) or 0, name))
    if kind == "value":
        return _VALUES
    return _NAMES.map(Name)


@st.composite
def _instruction(draw: st.DrawFn) -> Instruction:
    op = draw(st.sampled_from(list(Opcode)))
    operands = tuple(draw(_operand(kind)) for kind in OPCODE_INFO[op].operands)
    return Instruction(op, operands, 0, 0, "")


@st.composite
def _programs(draw: st.DrawFn) -> Program:
    instructions = draw(st.lists(_instruction(), min_size=1, max_size=12))
    names = draw(st.lists(_NAMES, max_size=4, unique_by=str.lower))
    labels = {
        name.lower(): draw(st.integers(min_value=0, max_value=len(instructions))) for name in names
    }
    return Program(
        instructions=tuple(instructions),
        labels=labels,
        label_names={name.lower(): name for name in names},
    )


def _same_operand(a: Operand, b: Operand) -> bool:
    if isinstance(a, Imm) and isinstance(b, Imm) and isinstance(a.value, float):
        return isinstance(b.value, float) and (
            a.value == b.value and math.copysign(1, a.value) == math.copysign(1, b.value)
        )
    return a == b


@ROUND_TRIP
@given(_programs())
def test_listing_parses_back_to_the_same_program(program: Program) -> None:
    listing = program.listing()
    parsed = parse(listing)
    assert isinstance(parsed, Program), listing
    assert [i.op for i in parsed.instructions] == [i.op for i in program.instructions]
    for got, want in zip(parsed.instructions, program.instructions, strict=True):
        assert len(got.operands) == len(want.operands)
        assert all(_same_operand(g, w) for g, w in zip(got.operands, want.operands, strict=True))
    assert parsed.labels == program.labels
    assert parsed.label_names == program.label_names
    assert parsed.unknown == ()


@ROUND_TRIP
@given(_programs(), st.sampled_from(["asm", "nasm", "", "x86asm"]), st.booleans())
def test_fenced_listing_with_prose_keeps_line_numbers(
    program: Program, tag: str, crlf: bool
) -> None:
    body = program.listing()
    reply = f"Here is the plan.\nIt should work.\n```{tag}\n{body}\n```\nDone!"
    if crlf:
        reply = reply.replace("\n", "\r\n")
    parsed = parse(reply)
    assert isinstance(parsed, Program)
    assert [i.op for i in parsed.instructions] == [i.op for i in program.instructions]
    first_code_line = 4  # two lines of prose and the fence come first
    for got, want in zip(parsed.instructions, program.instructions, strict=True):
        assert parsed.source_of(got.line) == f"    {want}"
        assert got.column == 5
        assert body.split("\n")[got.line - first_code_line] == f"    {want}"


# ---------------------------------------------------------------------------------------------
# Memory operands: any spelling of [label + base + index*scale + disp] reads back its parts

_ADDRESS_REGISTERS = st.sampled_from(["ESI", "EDI", "EAX", "R1", "RBX", "R100"])


@st.composite
def _memory(draw: st.DrawFn) -> tuple[str, Mem]:
    label = draw(st.one_of(st.none(), _NAMES.filter(lambda n: n[0] != ".")))
    base = draw(st.one_of(st.none(), _ADDRESS_REGISTERS))
    index = draw(st.one_of(st.none(), _ADDRESS_REGISTERS))
    scale = draw(st.sampled_from([2, 4, 8]))
    disps = draw(st.lists(st.integers(-(2**20), 2**20), max_size=3))
    size, size_bytes = draw(st.sampled_from([("", 0), ("dword ", 4), ("QWORD PTR ", 8)]))
    terms = [label] if label else []
    terms += [base] if base else []
    terms += [f"{index}*{scale}"] if index else []
    terms += [str(d) for d in disps]
    if not terms:
        terms = ["0"]
    text = size + "[" + " + ".join(terms).replace("+ -", "- ") + "]"
    reg = {name: Reg(register_index(name) or 0, name) for name in (base, index) if name}
    expected = Mem(
        label,
        reg[base] if base else None,
        reg[index] if index else None,
        scale if index else 1,
        sum(disps),
        size_bytes,
        text,
    )
    return text, expected


@FUZZ
@given(_memory())
def test_memory_operands_read_back_their_parts(case: tuple[str, Mem]) -> None:
    text, expected = case
    got = read_operand(text, 0)
    assert isinstance(got, Mem)
    assert (got.label, got.disp, got.size, got.text) == (
        expected.label,
        expected.disp,
        expected.size,
        expected.text,
    )
    want = {(r.index, 1) for r in [expected.base] if r} | (
        {(expected.index.index, expected.scale)} if expected.index else set()
    )
    have = {(r.index, 1) for r in [got.base] if r} | (
        {(got.index.index, got.scale)} if got.index else set()
    )
    assert have == want


@FUZZ
@given(st.text(alphabet="[]+-*0123456789abESI ,tdwordqPTR", max_size=60))
def test_bracketed_junk_is_read_or_refused_with_a_line_error(text: str) -> None:
    try:
        operand = read_operand("[" + text, 0)
    except LineError as error:
        assert error.message and error.column >= 1
        return
    if isinstance(operand, Path):  # [EBX].name, [x + 8].items[0]: a part of what it holds
        operand = operand.base if isinstance(operand.base, Mem) else Mem(None, operand.base)
    assert isinstance(operand, Mem)
    assert operand.scale in (1, 2, 4, 8) and len(operand.registers) <= 2
