"""Scanning one line of a plan: its comment, labels, mnemonic (or data name) and the rest.

The parser (``llassembly.parser``) decides which lines are code and builds the program; this
module reads a single line without judging it, and :mod:`llassembly.language.operands` reads
its operands. Everything here is linear in the line's length (see that module), and short lines
are scanned once and shared.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

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
_NAME = r"[A-Za-z_.$@?][\w.$@?]*+"  # IDENT, possessive: a name ends where it ends
# The head of a line in one match: its labels ("a: b:"), its first word, the space after it and
# a second word ("name db"). Each part can match one way only, so it is linear.
_HEAD = re.compile(rf"\s*+((?:{_NAME}[ \t]*+:\s*+)*+)(?:({_NAME})(\s*+)({_NAME})?)?")
_LABEL = re.compile(rf"({_NAME})[ \t]*+:")


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


class Scanned(NamedTuple):
    """What one code line holds (a named tuple: one is built per line, so it must be cheap)."""

    labels: tuple[tuple[str, int], ...] = ()
    mnemonic: str = ""
    mnemonic_col: int = 0
    rest: str = ""
    rest_col: int = 0
    data_name: str = ""
    code: str = ""  # the line without its comment


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
    code = strip_comment(line)
    head = _HEAD.match(code)
    if head is None:  # pragma: no cover - every part of the pattern is optional
        return Scanned((), "", 0, "", 0, "", code)
    pos = head.end(1)
    labels: tuple[tuple[str, int], ...] = ()
    if pos > head.start(1):
        labels = tuple((m.group(1), m.start()) for m in _LABEL.finditer(code, head.start(1), pos))
    word = head.group(2)
    if word is None:
        return Scanned(labels, "", 0, code[pos:].strip(), pos, "", code)
    rest_col = head.end(2)
    # "name db ..." / "name: db ..." define data.
    second = head.group(4)
    if second is not None and second.upper() in DATA_WORDS and word.upper() not in MNEMONICS:
        value_col = head.end(4)
        return Scanned(labels, second, pos, code[value_col:], value_col, word, code)
    rest = code[rest_col:]
    if labels and word.upper() in DATA_WORDS:
        name, column = labels[-1]
        return Scanned(labels[:-1], word, column, rest, rest_col, name, code)
    if rest and not head.group(3):
        # "MOV-1", "CALL-center": a mnemonic is a whole word, so this is not an instruction.
        return Scanned(labels, "", 0, code[pos:].strip(), pos, "", code)
    return Scanned(labels, word, pos, rest, rest_col, "", code)


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
