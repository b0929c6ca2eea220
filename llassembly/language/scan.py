"""Scanning one line of a plan: comments, strings, operands, numbers, labels and mnemonics.

The parser (``llassembly.parser``) decides which lines are code and builds the program; this
module reads a single line without judging it. Everything here is bounded by the line's
length: no pattern backtracks, and short lines and operands are read once and shared.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from llassembly.language.instructions import (
    MNEMONICS,
    OPCODE_INFO,
)
from llassembly.language.opcodes import register_index
from llassembly.language.program import (
    Imm,
    Mem,
    Name,
    Operand,
    Reg,
)

__all__ = [
    "DATA_SIZES",
    "DATA_WORDS",
    "EXTERN_WORDS",
    "GLOBAL_WORDS",
    "IDENT",
    "RESERVE_SIZES",
    "SECTION_SHORT",
    "SECTION_WORDS",
    "SIZE_WORDS",
    "LineError",
    "Scanned",
    "has_instruction",
    "is_directive",
    "looks_like_code",
    "names_instruction",
    "read_memory",
    "read_number",
    "read_operand",
    "read_string",
    "scan",
    "split_operands",
    "strip_comment",
]

IDENT = re.compile(r"[A-Za-z_.$@?][\w.$@?]*")
# A name operand may also hold inner dashes: tools named like MCP tools (``get-weather``).
_NAME_OPERAND = re.compile(r"[A-Za-z_.$@?][\w.$@?]*(?:-[\w.$@?]+)*")
# Each digit run can match one way only (``\d+(?:\.\d*)?``, not ``\d+\.?\d*``): a long
# run of digits that turns out not to be a number must fail in linear time, not quadratic.
_NUMBER = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\Z")
DATA_SIZES = {"DB": 1, "DW": 2, "DD": 4, "DQ": 8, "DT": 10, "DS": 1, "STRING": 1, "ASCIZ": 1}
DATA_SIZES |= {"ASCII": 1, "EQU": 8}
RESERVE_SIZES = {"RESB": 1, "RESW": 2, "RESD": 4, "RESQ": 8}
DATA_WORDS = frozenset({*DATA_SIZES, *RESERVE_SIZES, "TIMES"})
SIZE_WORDS = {"BYTE": 1, "WORD": 2, "DWORD": 4, "QWORD": 8, "TWORD": 10, "OWORD": 16}
SIZE_WORDS |= {"XMMWORD": 16}
SECTION_WORDS = frozenset({"SECTION", "SEGMENT", ".SECTION"})
SECTION_SHORT = frozenset({".DATA", ".TEXT", ".RODATA", ".BSS", ".CODE"})
GLOBAL_WORDS = frozenset({"GLOBAL", ".GLOBAL", ".GLOBL", "GLOBL"})
EXTERN_WORDS = frozenset({"EXTERN", ".EXTERN", "EXTRN"})
_STACK_POINTERS = frozenset({"ESP", "RSP", "SP"})
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


class LineError(Exception):
    """A syntax problem on one line (internal; collected into an AsmSyntaxError)."""

    def __init__(self, column: int, message: str, expected: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message
        self.expected = expected


# ---------------------------------------------------------------------------------------------
# Scanning one line


_COMMENT_OR_QUOTE = re.compile(r"[;#\"']|//")


def strip_comment(text: str) -> str:
    """Cut a ``;``, ``#`` or ``//`` comment, ignoring those characters inside quotes."""
    first = _COMMENT_OR_QUOTE.search(text)
    if first is None:  # the common case: nothing to cut, found in C
        return text
    if first.group() not in ("'", '"'):
        return text[: first.start()]
    quote = ""
    i = first.start()
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in ";#" or text.startswith("//", i):
            return text[:i]
        i += 1
    return text


def read_string(text: str, start: int) -> tuple[str, int]:
    """Read a quoted string starting at ``text[start]``; return (value, index after it)."""
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
            continue
        if ch == quote:
            return "".join(out), i + 1
        out.append(ch)
        i += 1
    raise LineError(start + 1, "unterminated string", f"a closing {quote}")


def split_operands(text: str, offset: int) -> list[tuple[str, int]]:
    """Split operand text into raw tokens with their 0-based columns in the line."""
    tokens: list[tuple[str, int]] = []
    i = 0
    expect_operand = True
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == ",":
            if expect_operand:
                raise LineError(offset + i + 1, "unexpected comma", "an operand")
            expect_operand = True
            i += 1
            continue
        start = i
        if ch in "\"'":
            try:
                _, i = read_string(text, i)
            except LineError as exc:
                raise LineError(offset + exc.column, exc.message, exc.expected) from None
        elif ch == "[":
            close = text.find("]", i)
            i = len(text) if close < 0 else close + 1
        else:
            while i < len(text) and not text[i].isspace() and text[i] not in ",\"'[":
                i += 1
        if not expect_operand and tokens and _sized(tokens[-1][0]) and text[start] in "[pP":
            # "dword [n]", "DWORD PTR [n]": a size word and its memory operand are one operand
            column = tokens.pop()[1]
            tokens.append((text[column - offset : i], column))
            continue
        tokens.append((text[start:i], offset + start))
        expect_operand = False
    if tokens and expect_operand:
        raise LineError(offset + len(text.rstrip()), "trailing comma", "an operand after ','")
    return tokens


def _sized(token: str) -> bool:
    """A size word (``dword``), maybe with ``ptr``, still waiting for its ``[...]``."""
    words = token.upper().split()
    return (
        bool(words)
        and words[0] in SIZE_WORDS
        and not token.endswith("]")
        and (len(words) == 1 or words[1:] == ["PTR"])
    )


def read_number(token: str, column: int) -> int | float:
    """Read a numeric literal; the language's numbers are 64-bit integers and finite floats."""
    lowered = token.lower()
    too_big = LineError(
        column + 1,
        f"number {token[:20]}{'...' if len(token) > 20 else ''} is out of range",
        "an integer within 64 bits or a finite float",
    )
    try:
        if "x" in lowered:
            value: int | float = int(lowered, 16)
        elif any(c in lowered for c in ".e"):
            value = float(token)
        else:
            value = int(token)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        raise too_big from None
    if isinstance(value, float) and not math.isfinite(value):
        raise too_big
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise too_big
    return value


_OPERANDS: dict[str, Operand] = {}  # token -> operand (operands are immutable, shared)
_OPERANDS_KEPT = 16384


def read_operand(token: str, column: int) -> Operand:
    """Turn one raw operand token into an operand (short tokens read once, then shared)."""
    found = _OPERANDS.get(token)
    if found is not None:
        return found
    operand = _parse_operand(token, column)
    if len(token) <= 64:
        if len(_OPERANDS) >= _OPERANDS_KEPT:
            _OPERANDS.clear()
        _OPERANDS[token] = operand
    return operand


def _parse_operand(token: str, column: int) -> Operand:
    """Turn one raw operand token into an operand."""
    if token[0] in "\"'":
        value, _ = read_string(token, 0)
        return Imm(value)
    if token[0] == "[" or _sized(token.split("[", 1)[0].strip() or "-"):
        return read_memory(token, column)
    if _NUMBER.match(token):
        return Imm(read_number(token, column))
    if token.endswith("()"):
        token = token[:-2]
    if _NAME_OPERAND.fullmatch(token):
        index = register_index(token)
        if index is not None:
            return Reg(index, token.upper())
        if token.upper() in _STACK_POINTERS:
            raise LineError(
                column + 1,
                f"{token} (the stack pointer) is not available",
                "a general register (R1..R100, EAX..EBP); use PUSH and POP for the stack",
            )
        return Name(token)
    shown = token if len(token) <= 40 else token[:37] + "..."
    raise LineError(
        column + 1, f"cannot read operand {shown!r}", "a register, number, string or name"
    )


_MEMORY_EXPECTED = "a memory operand like [name], [name + 8] or [name + ESI*4]"
_TERM = re.compile(r"\s*([+-])?\s*([^+\-\s][^+\-]*?)\s*(?=[+-]|\Z)")


def read_memory(token: str, column: int) -> Mem:
    """Read ``[label + base + index*scale + disp]`` (any part may be missing), with an
    optional size word before it (``dword``, ``QWORD PTR``)."""
    size = 0
    opening = token.find("[")
    if opening > 0:
        size = SIZE_WORDS[token[:opening].upper().split()[0]]
    inside = token[opening + 1 :]
    if not inside.endswith("]"):
        raise LineError(column + 1, f"unclosed memory operand {token[:40]!r}", "a closing ]")
    inside = inside[:-1].strip()
    if not inside:
        raise LineError(column + 1, "empty memory operand []", _MEMORY_EXPECTED)
    label: str | None = None
    registers: list[tuple[Reg, int]] = []
    disp = 0
    position = 0
    while position < len(inside):
        term = _TERM.match(inside, position)
        if term is None or term.end() == position:
            raise LineError(
                column + 1, f"cannot read memory operand {token[:40]!r}", _MEMORY_EXPECTED
            )
        position = term.end()
        negative, body = term.group(1) == "-", term.group(2).strip()
        factors = [f.strip() for f in body.split("*")]
        if len(factors) > 2 or not all(factors):
            raise LineError(column + 1, f"cannot read {body!r} in {token[:40]}", _MEMORY_EXPECTED)
        numbers = [f for f in factors if _NUMBER.match(f)]
        names = [f for f in factors if not _NUMBER.match(f)]
        if not names:
            value = 1
            for factor in numbers:
                number = read_number(factor, column)
                if not isinstance(number, int):
                    raise LineError(column + 1, f"{factor} is not a whole number", "a byte offset")
                value *= number
            disp += -value if negative else value
            continue
        if len(names) > 1:
            raise LineError(
                column + 1, f"{body!r}: only a register may be scaled", _MEMORY_EXPECTED
            )
        name = names[0]
        index = register_index(name)
        scale = int(read_number(numbers[0], column)) if numbers else 1
        if index is None:
            if name.upper() in _STACK_POINTERS:
                raise LineError(
                    column + 1,
                    f"{name} (the stack pointer) is not available",
                    "a data label and general registers; use PUSH and POP for the stack",
                )
            if label is not None or negative or numbers or not IDENT.fullmatch(name):
                raise LineError(
                    column + 1,
                    f"{token[:40]}: a memory operand is based on one data label, added once",
                    _MEMORY_EXPECTED,
                )
            label = name
            continue
        if negative or scale not in (1, 2, 4, 8):
            raise LineError(
                column + 1,
                f"{body!r}: a register in an address is added, times 1, 2, 4 or 8",
                _MEMORY_EXPECTED,
            )
        registers.append((Reg(index, name.upper()), scale))
    if len(registers) > 2:
        raise LineError(column + 1, f"{token[:40]}: at most two registers", _MEMORY_EXPECTED)
    registers.sort(key=lambda pair: pair[1])  # the scaled one is the index
    base = registers[0][0] if len(registers) == 2 or (registers and registers[0][1] == 1) else None
    index_reg, scale = (None, 1)
    if len(registers) == 2:
        index_reg, scale = registers[1]
    elif registers and base is None:
        index_reg, scale = registers[0]
    return Mem(label, base, index_reg, scale, disp, size, token)


@dataclass(frozen=True, slots=True)
class Scanned:
    """What one code line holds."""

    labels: tuple[tuple[str, int], ...] = ()
    mnemonic: str = ""
    mnemonic_col: int = 0
    rest: str = ""
    rest_col: int = 0
    data_name: str = ""


def scan(line: str) -> Scanned:
    """Split a line into labels, a mnemonic (or data name) and the rest, without judging them.

    Choosing the code lines and reading them both scan each line; short lines are scanned once
    (a bounded cache: a scan depends on the line's text only).
    """
    if len(line) > _CACHED_LINE:
        return _scan_line(line)
    return _scan_cached(line)


_CACHED_LINE = 256


def _scan_line(line: str) -> Scanned:
    body = strip_comment(line)
    labels: list[tuple[str, int]] = []
    pos = 0
    while True:
        while pos < len(body) and body[pos].isspace():
            pos += 1
        match = IDENT.match(body, pos)
        if not match:
            break
        after = match.end()
        while after < len(body) and body[after] in " \t":
            after += 1
        if after < len(body) and body[after] == ":":
            labels.append((match.group(), pos))
            pos = after + 1
            continue
        break
    match = IDENT.match(body, pos)
    if not match:
        return Scanned(tuple(labels), rest=body[pos:].strip(), rest_col=pos)
    word = match.group()
    rest_col = match.end()
    rest = body[rest_col:]
    # "name db ..." / "name: db ..." define data.
    second = IDENT.match(rest.lstrip())
    if second and second.group().upper() in DATA_WORDS and word.upper() not in MNEMONICS:
        skipped = len(rest) - len(rest.lstrip())
        value_col = rest_col + skipped + second.end()
        return Scanned(
            tuple(labels),
            mnemonic=second.group(),
            mnemonic_col=pos,
            rest=body[value_col:],
            rest_col=value_col,
            data_name=word,
        )
    if word.upper() in DATA_WORDS and labels:
        name, col = labels.pop()
        return Scanned(
            tuple(labels),
            mnemonic=word,
            mnemonic_col=col,
            rest=rest,
            rest_col=rest_col,
            data_name=name,
        )
    if rest and not rest[0].isspace():
        # "MOV-1", "CALL-center": a mnemonic is a whole word, so this is not an instruction.
        return Scanned(tuple(labels), rest=body[pos:].strip(), rest_col=pos)
    return Scanned(tuple(labels), mnemonic=word, mnemonic_col=pos, rest=rest, rest_col=rest_col)


_scan_cached = functools.lru_cache(maxsize=16384)(_scan_line)


def is_directive(word: str) -> bool:
    upper = word.upper()
    return (
        upper in SECTION_WORDS
        or upper in SECTION_SHORT
        or upper in GLOBAL_WORDS
        or upper in EXTERN_WORDS
    )


def looks_like_code(line: str) -> bool:
    """Decide, for replies without fences, whether a line is code or prose."""
    try:
        scanned = scan(line)
    except LineError:
        return False
    if scanned.data_name or (scanned.mnemonic and is_directive(scanned.mnemonic)):
        return True
    if not scanned.mnemonic:
        return bool(scanned.labels) and not scanned.rest
    opcode = MNEMONICS.get(scanned.mnemonic.upper())
    if opcode is None:
        return False
    if scanned.mnemonic.isupper():
        return True
    if scanned.rest.rstrip().endswith((".", "!", "?")):
        return False  # "Push it." is a sentence, not code
    try:
        tokens = split_operands(scanned.rest, scanned.rest_col)
        for token, column in tokens:
            read_operand(token, column)
    except LineError:
        return False
    return len(tokens) == len(OPCODE_INFO[opcode].operands)


def names_instruction(line: str) -> bool:
    """Whether a line starts with a known mnemonic, whatever its operands."""
    scanned = scan(line)
    return not scanned.data_name and scanned.mnemonic.upper() in MNEMONICS


def has_instruction(line: str) -> bool:
    try:
        scanned = scan(line)
    except LineError:
        return False
    return not scanned.data_name and scanned.mnemonic.upper() in MNEMONICS and looks_like_code(line)
