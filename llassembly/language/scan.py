"""Scanning one line of a plan: its comment, labels, mnemonic (or data name) and the rest.

The parser (``llassembly.parser``) decides which lines are code and builds the program; this
module reads a single line without judging it, and :mod:`llassembly.language.operands` reads
its operands. Everything here is linear in the line's length (see that module), and short lines
are scanned once and shared.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from llassembly.language.instructions import (
    MNEMONICS,
    OPCODE_INFO,
)
from llassembly.language.operands import (
    IDENT,
    SIZE_WORDS,
    LineError,
    clip,
    quoted_end,
    read_memory,
    read_number,
    read_operand,
    read_string,
    skip_to,
    split_operands,
    string_columns,
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
    "clip",
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
    "string_columns",
    "strip_comment",
]

DATA_SIZES = {"DB": 1, "DW": 2, "DD": 4, "DQ": 8, "DT": 10, "DS": 1, "STRING": 1, "ASCIZ": 1}
DATA_SIZES |= {"ASCII": 1, "EQU": 8}
RESERVE_SIZES = {"RESB": 1, "RESW": 2, "RESD": 4, "RESQ": 8}
DATA_WORDS = frozenset({*DATA_SIZES, *RESERVE_SIZES, "TIMES"})
SECTION_WORDS = frozenset({"SECTION", "SEGMENT", ".SECTION"})
SECTION_SHORT = frozenset({".DATA", ".TEXT", ".RODATA", ".BSS", ".CODE"})
GLOBAL_WORDS = frozenset({"GLOBAL", ".GLOBAL", ".GLOBL", "GLOBL"})
EXTERN_WORDS = frozenset({"EXTERN", ".EXTERN", "EXTRN"})


# ---------------------------------------------------------------------------------------------
# Scanning one line


_COMMENT_OR_QUOTE = re.compile(r"[;#\"']|//")
_NOT_SPACE = re.compile(r"\S")
_NOT_BLANK = re.compile(r"[^ \t]")


def strip_comment(text: str) -> str:
    """Cut a ``;``, ``#`` or ``//`` comment, ignoring those characters inside quotes."""
    position = 0
    while True:
        found = _COMMENT_OR_QUOTE.search(text, position)
        if found is None:  # the common case: nothing to cut, found in C
            return text
        if found.group() not in ("'", '"'):
            return text[: found.start()]
        end = quoted_end(text, found.start())
        if end is None:  # an unterminated string runs to the end of the line
            return text
        position = end


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
        pos = skip_to(_NOT_SPACE, body, pos)
        match = IDENT.match(body, pos)
        if not match:
            break
        after = skip_to(_NOT_BLANK, body, match.end())
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
