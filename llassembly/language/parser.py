"""Parser: a model's reply to a :class:`~llassembly.language.program.Program` (or a plain answer).

Real models wrap the code in fences, add prose and ``<think>`` text, mix case, put labels and
instructions on one line and write data sections. This module accepts what is unambiguous and
reports the rest with line, column and what was expected (see ``docs/language.md``). It chooses
the code lines (told from fences, prose and thinking), splits each into labels, a mnemonic (or
data name) and operands (:func:`scan`, :func:`read_operand`), reads the data labels (each row
bounded before it is built, so a short reply cannot make the parser build megabytes), then what
the operands mean, once every label of the plan is known (:func:`_settled`). Reading is linear in
the text's length: no pattern backtracks (each repeated part can match one way only, or is
possessive), no loop rescans what it has read, runs of characters are skipped by patterns rather
than one character at a time, and short lines and operands are read once and shared.

Example:
    >>> program = parse("```asm\\nloop: INC R1\\nCMP R1, 3\\nJL loop\\n```")
    >>> [str(i) for i in program.instructions]
    ['INC R1', 'CMP R1, 3', 'JL loop']
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import gc
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence, Set
from typing import Any, Literal, NamedTuple, cast

from llassembly.errors import AsmSyntaxError, Diagnostic, EmptyReply, PlanRejected, clip
from llassembly.language.instructions import MNEMONICS, OPCODE_INFO, Opcode, register_index
from llassembly.language.limits import (
    MAX_BUILT_TEXT_CHARS,
    MAX_DATA_TEXT_CHARS,
    MAX_MEMORY_CELLS,
    MAX_PLAN_PLACEHOLDERS,
    MAX_REPEAT,
    MAX_REPLY_LINES,
    MAX_SAY_PLACEHOLDERS,
    is_int64,
)
from llassembly.language.program import (
    NONE,
    Imm,
    Instruction,
    Mem,
    MemoryLabel,
    Name,
    Operand,
    Path,
    PlainAnswer,
    Program,
    Reg,
    Template,
    UnknownInstruction,
    Value,
    place_of,
    row_json,
)
from llassembly.language.templates import near_misses, split_template, template_of

# -- operands ----------------------------------------------------------------------------------

_NAME = r"[A-Za-z_.$@?][\w.$@?]*+"  # a name; possessive: it ends where it ends
_IDENT = re.compile(_NAME)
# A name operand may also hold inner dashes: tools named like MCP tools (``get-weather``).
_NAME_OPERAND = re.compile(rf"{_NAME}(?:-[\w.$@?]+)*")
# Each digit run can match one way only (``\d+(?:\.\d*)?``, not ``\d+\.?\d*``): a long
# run of digits that turns out not to be a number must fail in linear time, not quadratic.
_NUMBER = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\Z")

_SIZE_WORDS = {"BYTE": 1, "WORD": 2, "DWORD": 4, "QWORD": 8, "TWORD": 10, "OWORD": 16}
_SIZE_WORDS |= {"XMMWORD": 16}


def size_word(name: str) -> bool:
    """Whether ``name`` is a size word (``DWORD``, as in ``DWORD PTR [x]``): no name of a tool."""
    return name.upper() in _SIZE_WORDS


_SIZED = re.compile(rf"\s*+(?:{'|'.join(_SIZE_WORDS)})(?:\s++PTR)?+\s*+", re.IGNORECASE)
"""A size word (``dword``), maybe with ``ptr``, still waiting for its ``[...]``."""
_STACK_POINTERS = frozenset({"ESP", "RSP", "SP"})
_NO_VALUE_WORDS = frozenset({"NONE", "NULL"})
"""The words for the value "no value" (see :data:`~llassembly.language.program.NONE`)."""
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


class LineError(Exception):
    """A syntax problem on one line (internal; collected into an AsmSyntaxError)."""

    def __init__(self, column: int, message: str, expected: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message
        self.expected = expected


# A quoted string from its opening quote: runs of plain characters and escape pairs, each
# matched one way and possessively, so an unterminated string fails in linear time.
_STRING = re.compile(r""""[^"\\]*+(?:\\.[^"\\]*+)*+"|'[^'\\]*+(?:\\.[^'\\]*+)*+'""", re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_NOT_SPACE = re.compile(r"\S")
# An operand that is no string: a bracket (to its "]", or the end of an unclosed one) or a run of
# characters up to a space, a comma, a quote or a "[", then the steps of a path written right
# after it ("[...]", and ".name" after a "]": R1.items[0].id, [EBX].name). Linear: possessive.
_TOKEN = re.compile(
    r"""(?:\[[^\]]*+(?:\]|\Z)|[^\s,"'\[]++)(?:\[[^\]]*+(?:\]|\Z)|\.[^\s,"'\[]*+)*+"""
)


def _string_end(text: str, start: int, offset: int = 0) -> int:
    """The index after the quoted string starting at ``text[start]`` (``text`` starts at column
    ``offset`` of its line)."""
    closed = _STRING.match(text, start)
    if closed is None:
        raise LineError(offset + start + 1, "unterminated string", f"a closing {text[start]}")
    return closed.end()


def _read_string(text: str, start: int) -> tuple[str, int]:
    """The quoted string starting at ``text[start]`` and the index after it: known escapes
    (``\\n \\t \\r \\0 \\\\ \\" \\'``) become their character, other backslash pairs stay."""
    end = _string_end(text, start)
    body = text[start + 1 : end - 1]
    if "\\" not in body:
        return body, end
    # [text, escaped character, text, ...]: one split, one lookup per escape
    parts = _ESCAPE.split(body)
    parts[1::2] = [_ESCAPES.get(c, "\\" + c) for c in parts[1::2]]
    return "".join(parts), end


def string_columns(line: str, start: int, positions: Sequence[int]) -> list[int] | None:
    """The 1-based columns in ``line`` of the characters at ``positions`` (indexes into the
    value, escapes read, increasing) of the string literal whose quote is ``line[start]``, or
    ``None`` when no literal starts there. Linear in the literal's length: a known escape is two
    characters of source for one of value."""
    closed = _STRING.match(line, start)
    if closed is None:
        return None
    body_start = start + 1
    shorter: list[int] = []  # value indexes of the characters written as a two-character escape
    for escape in _ESCAPE.finditer(line, body_start, closed.end() - 1):
        if escape.group(1) in _ESCAPES:  # its offset, less one per known escape before it
            shorter.append(escape.start() - body_start - len(shorter))
    # each character is as many columns further as there are escapes before it
    return [body_start + p + bisect.bisect_left(shorter, p) + 1 for p in positions]


def _operands(
    text: str, offset: int, most: int | None = None
) -> tuple[tuple[Operand, ...], tuple[int, ...]]:
    """The operands written in ``text`` (at 0-based column ``offset`` of its line) and the
    1-based column of each; with ``most``, more data values than that are refused unread."""
    tokens: list[tuple[str, int]] = []
    i = 0
    expect_operand = True
    while found := _NOT_SPACE.search(text, i):
        start = found.start()
        if text[start] == ",":
            if expect_operand:
                raise LineError(offset + start + 1, "unexpected comma", "an operand")
            expect_operand = True
            i = start + 1
            continue
        token = _TOKEN.match(text, start)  # None only at a quote: a string
        i = token.end() if token else _string_end(text, start, offset)
        if not expect_operand and text[start] in "[pP" and _SIZED.fullmatch(tokens[-1][0]):
            # "dword [n]", "DWORD PTR [n]": a size word and its memory operand are one operand
            column = tokens.pop()[1]
            tokens.append((text[column - offset : i], column))
            continue
        tokens.append((text[start:i], offset + start))
        expect_operand = False
        if most is not None and len(tokens) > most:
            raise _too_many(offset)
    if tokens and expect_operand:
        raise LineError(offset + len(text.rstrip()), "trailing comma", "an operand after ','")
    return tuple([read_operand(t, c) for t, c in tokens]), tuple([c + 1 for _, c in tokens])


def read_number(token: str, column: int) -> int | float:
    """Read a numeric literal; the language's numbers are 64-bit integers and finite floats."""
    lowered = token.lower()
    with contextlib.suppress(ValueError):  # more digits than sys.get_int_max_str_digits
        if "x" in lowered:
            value: int | float = int(lowered, 16)
        elif any(c in lowered for c in ".e"):
            value = float(token)
        else:
            value = int(token)
        if is_int64(value) or (isinstance(value, float) and math.isfinite(value)):
            return value
    raise LineError(
        column + 1,
        f"number {token[:20]}{'...' if len(token) > 20 else ''} is out of range",
        "an integer within 64 bits or a finite float",
    )


def read_operand(token: str, column: int) -> Operand:
    """Turn one raw operand token into an operand (short tokens read once, then shared: an
    operand is immutable, and its problem's column is counted from the token's)."""
    try:
        return (_read_short if len(token) <= 64 else _read)(token)
    except LineError as exc:
        raise LineError(column + exc.column, exc.message, exc.expected) from None


def _read(token: str) -> Operand:
    """Turn one raw operand token into an operand (columns counted from the token's start)."""
    if token[0] in "\"'":
        return Imm(_read_string(token, 0)[0])
    close = token.find("]")
    if token[0] == "[" and 0 < close < len(token) - 1:  # [EBX].name, [row + 8].items[0]
        return _path(token, close + 1, _read_memory(token[: close + 1]))
    if token[0] == "[" or _SIZED.fullmatch(token.split("[", 1)[0]):
        return _read_memory(token)
    if _NUMBER.match(token):
        return Imm(read_number(token, 0))
    if token.endswith("()"):
        token = token[:-2]
    if head := _PATH_HEAD.match(token):  # R1.items[0].id, page.next_cursor
        base = _register(head.group()) or Name(head.group())
        try:
            return _path(token, head.end(), base)
        except LineError:
            if isinstance(base, Reg) or not _NAME_OPERAND.fullmatch(token):
                raise  # a name with dots that reads as no path ("a.", "x..y") stays a name
    if _NAME_OPERAND.fullmatch(token):
        _no_stack_pointer(token, "a general register (R1..R100, EAX..EBP)")
        return _register(token) or Name(token)
    raise LineError(1, f"cannot read operand {clip(token)!r}", "a register, number, string or name")


_read_short = functools.lru_cache(maxsize=16384)(_read)


def _register(name: str) -> Reg | None:
    """The register called ``name`` (any case), or ``None``."""
    index = register_index(name)
    return None if index is None else Reg(index, name.upper())


def _no_stack_pointer(name: str, expected: str) -> None:
    """Refuse the stack pointer (``ESP``): the stack is PUSH and POP's alone."""
    if name.upper() in _STACK_POINTERS:
        message = f"{name} (the stack pointer) is not available"
        raise LineError(1, message, expected + "; use PUSH and POP for the stack")


# A path's base: a name before its first "." or "[" (a leading "." is a local label's).
_PATH_HEAD = re.compile(r"[A-Za-z_$@?][\w$@?]*(?=[.\[])")
_STEP = re.compile(r"\.([\w$@?]+(?:-[\w$@?]+)*)|\[([^\]]*)\]")  # .name or [key]
_PATH_EXPECTED = 'a path like R1.items[0].id, R1["next-cursor"] or [EBX].name'


def _path(token: str, start: int, base: Reg | Name | Mem) -> Path:
    """A path operand: ``base`` and the steps written in ``token`` from ``start``: ``.name`` gives a
    field name, ``[...]`` a key: a number, a quoted field name, a register or a variable."""
    if isinstance(base, Mem) and base.label is None and base.index is None and not base.disp:
        base = base.base or base  # [EBX].name: the JSON text EBX holds, as C's EBX->name
    steps: list[Imm | Reg | Name] = []
    i, end = start, len(token)
    while i < end:
        step = _STEP.match(token, i)
        if step is None:
            raise LineError(i + 1, f"cannot read {clip(token)!r} as a path", _PATH_EXPECTED)
        steps.append(Imm(step[1]) if step[1] else _key(step[2].strip(), token, i))
        i = step.end()
    return Path(base, tuple(steps), token)


def _key(inside: str, token: str, column: int) -> Imm | Reg | Name:
    """One ``[...]`` key of a path."""
    if inside[:1] in ("'", '"'):
        value, after = _read_string(inside, 0)
        if after == len(inside):
            return Imm(value)
    elif _NUMBER.match(inside) and not any(c in inside.lower() for c in ".ex"):
        return Imm(read_number(inside, column))
    elif _IDENT.fullmatch(inside):
        return _register(inside) or Name(inside)
    message = f"{clip(token)}: [{clip(inside, 20)}] is no key"
    if any(c in inside for c in "*+"):  # MASM's table[ESI*4]
        message += f"; for a cell of a data label write [{token.split('[', 1)[0]} + {inside}]"
    expected = (
        "a key in brackets: a whole number ([0], [-1] for the last), a register ([ESI]), a "
        'variable ([i]) or a quoted field name (["next-cursor"])'
    )
    raise LineError(column + 1, message, expected)


_SIGN = re.compile(r"([+-])")


def _bad_memory(message: str) -> LineError:
    return LineError(1, message, "a memory operand like [name], [name + 8] or [name + ESI*4]")


def _read_memory(token: str) -> Mem:
    """Read ``[label + base + index*scale + disp]`` (any part may be missing), with an
    optional size word before it (``dword``, ``QWORD PTR``)."""
    opening = token.find("[")
    size = _SIZE_WORDS[token[:opening].upper().split()[0]] if opening > 0 else 0
    inside = token[opening + 1 :]
    if not inside.endswith("]"):
        raise LineError(1, f"unclosed memory operand {clip(token)!r}", "a closing ]")
    inside = inside[:-1].strip()
    if not inside:
        raise _bad_memory("empty memory operand []")
    # x + ESI*4 - 8 as (negative, text) terms, the first maybe without a sign, in one split at
    # the signs: linear, whatever the spaces (a pattern that searched for each term's end afresh
    # took quadratic time on [x      ...      y]).
    pieces = _SIGN.split(inside)
    terms = [(False, pieces[0].rstrip())] if pieces[0] else []
    for sign, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        if not piece.strip():  # "x + + 4", "x +"
            raise _bad_memory(f"cannot read memory operand {clip(token)!r}")
        terms.append((sign == "-", piece.strip()))
    label: str | None = None
    registers: list[tuple[Reg, int]] = []
    disp = 0
    for negative, body in terms:
        factors = [f.strip() for f in body.split("*")]
        if len(factors) > 2 or not all(factors):
            raise _bad_memory(f"cannot read {clip(body)!r} in {clip(token)}")
        numbers = [f for f in factors if _NUMBER.match(f)]
        names = [f for f in factors if not _NUMBER.match(f)]
        scale = 1
        for factor in numbers:  # an offset or a scale: a whole number (ESI*1.5 is no address)
            number = read_number(factor, 0)
            if not isinstance(number, int):
                raise LineError(1, f"{clip(factor)} is not a whole number", "a byte offset")
            scale *= number
        if not names:
            disp += -scale if negative else scale
            continue
        if len(names) > 1:
            raise _bad_memory(f"{clip(body)!r}: only a register may be scaled")
        name = names[0]
        register = _register(name)
        if register is None:
            _no_stack_pointer(name, "a data label and general registers")
            if label is not None or negative or numbers or not _IDENT.fullmatch(name):
                message = f"{clip(token)}: a memory operand is based on one data label, added once"
                raise _bad_memory(message)
            label = name
            continue
        if negative or scale not in (1, 2, 4, 8):
            message = f"{clip(body)!r}: a register in an address is added, times 1, 2, 4 or 8"
            raise _bad_memory(message)
        registers.append((register, scale))
    if len(registers) > 2:
        raise _bad_memory(f"{token[:40]}: at most two registers")
    registers.sort(key=lambda pair: pair[1])  # the scaled one is the index
    has_base = bool(registers) and (len(registers) == 2 or registers[0][1] == 1)
    base = registers.pop(0)[0] if has_base else None
    index_reg, scale = registers[0] if registers else (None, 1)
    return Mem(label, base, index_reg, scale, disp, size, token)


# -- one line ----------------------------------------------------------------------------------

_DATA_SIZES = {"DB": 1, "DW": 2, "DD": 4, "DQ": 8, "DT": 10, "DS": 1, "STRING": 1, "ASCIZ": 1}
_DATA_SIZES |= {"ASCII": 1, "EQU": 8}
_RESERVE_SIZES = {"RESB": 1, "RESW": 2, "RESD": 4, "RESQ": 8}
_SIZES = _DATA_SIZES | _RESERVE_SIZES
_DATA_WORDS = frozenset({*_SIZES, "TIMES"})
_SECTION_WORDS = frozenset({"SECTION", "SEGMENT", ".SECTION"})
_SECTION_SHORT = frozenset({".DATA", ".TEXT", ".RODATA", ".BSS", ".CODE"})
_GLOBAL_WORDS = frozenset({"GLOBAL", ".GLOBAL", ".GLOBL", "GLOBL"})
_EXTERN_WORDS = frozenset({"EXTERN", ".EXTERN", "EXTRN"})
_DIRECTIVES = _SECTION_WORDS | _SECTION_SHORT | _GLOBAL_WORDS | _EXTERN_WORDS


_COMMENT_OR_QUOTE = re.compile(r"[;#\"']|//")
# The head of a line in one match: its labels ("a: b:"), its first word, the space after it and
# a second word ("name db"). Each part can match one way only, so it is linear.
_HEAD = re.compile(rf"\s*+((?:{_NAME}[ \t]*+:\s*+)*+)(?:({_NAME})(\s*+)({_NAME})?)?")
_LABEL = re.compile(rf"({_NAME})[ \t]*+:")


def strip_comment(text: str) -> str:
    """Cut a ``;``, ``#`` or ``//`` comment, ignoring those characters inside quotes."""
    position = 0
    while found := _COMMENT_OR_QUOTE.search(text, position):
        if found.group() not in ("'", '"'):
            return text[: found.start()]
        closed = _STRING.match(text, found.start())
        if closed is None:  # an unterminated string runs to the end of the line
            return text
        position = closed.end()
    return text  # the common case: nothing to cut, found in C


class Scanned(NamedTuple):
    """What one code line holds (a named tuple: one is built per line, so it must be cheap)."""

    labels: tuple[tuple[str, int], ...] = ()
    mnemonic: str = ""
    mnemonic_col: int = 0
    rest: str = ""
    rest_col: int = 0
    data_name: str = ""


def scan(line: str) -> Scanned:
    """Split a line into labels, a mnemonic (or data name) and the rest, without judging them;
    a short line is scanned once (a bounded cache: choosing the code lines and reading them both
    scan each line, and a scan depends on the line's text only)."""
    return _scan_line(line) if len(line) > 256 else _scan_cached(line)


def _scan_line(line: str) -> Scanned:
    code = strip_comment(line)
    head = cast("re.Match[str]", _HEAD.match(code))  # every part of the pattern is optional
    pos = head.end(1)
    labels = tuple((m.group(1), m.start()) for m in _LABEL.finditer(code, head.start(1), pos))
    word, rest_col = head.group(2) or "", head.end(2)
    # "name db ..." / "name: db ..." define data, "loop dd 5" too (the parser refuses its name);
    # "MOV string, R1" and "PUSH db" stay instructions: no value follows the data word there.
    second = head.group(4)
    if second is not None and second.upper() in _DATA_WORDS:
        value = code[head.end(4) :]
        if word.upper() not in MNEMONICS or (value[:1].isspace() and value.strip()[:1] not in ",;"):
            return Scanned(labels, second, pos, value, head.end(4), word)
    rest = code[rest_col:]
    if labels and word.upper() in _DATA_WORDS:
        name, column = labels[-1]
        return Scanned(labels[:-1], word, column, rest, rest_col, name)
    # "MOV-1", "CALL-center": a mnemonic is a whole word, so this is not an instruction.
    if not word or (rest and not head.group(3)):
        return Scanned(labels, "", 0, code[pos:].strip(), pos, "")
    return Scanned(labels, word, pos, rest, rest_col, "")


_scan_cached = functools.lru_cache(maxsize=16384)(_scan_line)


def reserved_name(name: str, kind: str, column: int) -> LineError | None:
    """The problem of a ``kind`` (``"label"``, ``"data label"``) called by a word that always reads
    as something else in an operand, in any case: a register (``R5``, ``eax``, ``al``, ``xmm0``, the
    stack pointer ``esp``), ``NONE``/``NULL``, or for a data label an instruction (a mnemonic or an
    alias; only a line's first word is read as one, so a code label or a ``"variable"`` may have its
    name: see *Operands* in ``docs/language.md``); ``None`` for a free name."""
    upper = name.upper()
    if register_index(upper) is not None or upper in _STACK_POINTERS:
        word, why = "a register", f"{name} in an operand always reads the register"
    elif upper in _NO_VALUE_WORDS:
        word, why = "the value NONE", f"{name} in an operand always reads the value NONE (no value)"
    elif upper in MNEMONICS and kind == "data label":
        word, why = "an instruction", f"{name} at the start of a line is read as the instruction"
    else:
        return None
    thing = "data" if kind == "data label" else kind
    return LineError(
        column,
        f"{kind} {name!r} has the name of {word}: {why}, never this {thing}; rename the {kind} "
        f"(e.g. {name}_{thing})",
        f"a {kind} name that is no register,{' instruction,' * (thing == 'data')} NONE or NULL",
    )


_MOST_OPERANDS = max(len(info.operands) for info in OPCODE_INFO.values())


def line_kind(line: str) -> Literal["instruction", "mnemonic", "code", "misspelt", ""]:
    """How a line reads, for choosing the code of a reply: ``"instruction"`` (a known mnemonic
    that reads as code), ``"mnemonic"`` (a known mnemonic in a sentence: ``Push it.``, or a
    lower-case one with the wrong operands), ``"code"`` (a data definition, a directive or a
    lone label), ``"misspelt"`` (an upper-case word of 2 to 7 letters with readable operands:
    an unknown mnemonic; or an instruction after a label it cannot read) or ``""`` (prose)."""
    scanned = scan(line)
    word = scanned.mnemonic
    if scanned.data_name and scanned.data_name.upper() in MNEMONICS:
        # "Push string values." is a sentence; "push db 'x', 0" is data (refused by name)
        return "mnemonic" if scanned.rest.rstrip().endswith((".", "!", "?")) else "code"
    if scanned.data_name or word.upper() in _DIRECTIVES:
        return "code"
    if not word:
        if scanned.labels and not scanned.rest:
            return "code"
        head, colon, rest = line.partition(":")  # (report-1: SAY "x": a label it cannot read)
        code = colon and head.strip() and not any(c.isspace() for c in head.strip())
        return "misspelt" if code and line_kind(rest) == "instruction" else ""
    opcode = MNEMONICS.get(word.upper())
    if opcode is None and not (2 <= len(word) <= 7 and word.isalpha() and word.isupper()):
        return ""
    if opcode is not None and word.isupper():
        return "instruction"
    if opcode is not None and scanned.rest.rstrip().endswith((".", "!", "?")):
        return "mnemonic"  # "Push it." is a sentence, not code
    try:
        count = len(_operands(scanned.rest, scanned.rest_col)[0])
    except LineError:
        return "" if opcode is None else "mnemonic"
    if opcode is None:
        return "misspelt" if 1 <= count <= _MOST_OPERANDS else ""
    return "instruction" if count == len(OPCODE_INFO[opcode].operands) else "mnemonic"


# -- choosing the code lines -------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(?:```|~~~)\s*([\w+#.-]*)")
# Fence tags that make a block code even when no line in it reads as a valid instruction.
_ASM_TAGS = frozenset({"asm", "nasm", "masm", "gas", "fasm", "yasm", "tasm", "x86asm", "x86"})
_ASM_TAGS |= {"assembly", "assembler", "s", "llasm", "llassembly"}


def remove_thinking(text: str) -> str:
    """Blank out ``<think>`` blocks (and everything before a lone ``</think>``), keeping lines.
    A ``<think>`` in a code comment (``CALL withdraw ; see <think> notes``) starts no thinking
    block: tags are searched for in a copy of ``text`` whose code lines have their comments
    blanked (same length, same lines)."""
    masked = text.split("\n") if "<" in text else []
    for i, line in enumerate(masked):
        code = strip_comment(line) if "<" in line else line
        if len(code) < len(line) and (
            line_kind(code) == "instruction" or line.lstrip().startswith((";", "//"))
        ):
            masked[i] = code.ljust(len(line))
    searched = "\n".join(masked) if masked else text
    spans = [m.span() for m in _THINK_BLOCK.finditer(searched)]
    # everything before the last lone </think> is thinking too
    cut = max((m.end() for m in _THINK_CLOSE.finditer(_blanked(searched, spans))), default=0)
    return _blanked(text, [(0, cut), *((s, e) for s, e in spans if e > cut)])


def _blanked(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with spaces for every character of ``spans`` (in order) but line breaks."""
    out, last = [], 0
    for start, end in spans:
        start = max(start, last)
        blank = "\n".join(" " * len(line) for line in text[start:end].split("\n"))
        out += [text[last:start], blank]
        last = max(last, end)
    return "".join([*out, text[last:]])


def _code_line_numbers(lines: list[str]) -> list[int]:
    """Return the 0-based indexes of the lines that hold the program."""
    blocks: list[tuple[str, list[int]]] = []  # each fenced block: its tag and its lines
    outside: list[int] = []
    inside: list[int] | None = None  # the lines of the block open here
    for index, line in enumerate(lines):
        fence = _FENCE.match(line) if "```" in line or "~~~" in line else None
        if fence and inside is None:
            inside = []
            blocks.append((fence.group(1).lower(), inside))
        elif fence:
            inside = None
        else:
            (outside if inside is None else inside).append(index)
    # A fenced block holds the program when its tag is an assembly one; an untagged block needs
    # one line that starts with a mnemonic (so a broken line is reported rather than the reply
    # taken as prose); any other language needs a line that reads as an instruction.
    chosen: list[int] = []
    for tag, block in blocks:
        kinds = ("instruction",) if tag else ("instruction", "mnemonic")
        if tag in _ASM_TAGS or any(line_kind(lines[j]) in kinds for j in block):
            chosen += block
    if chosen:
        return chosen
    outside_set = set(outside)
    code = [i for i in outside if line_kind(lines[i]) in ("instruction", "code")]
    if not code:
        return []
    first, last = code[0], code[-1]
    # A misspelt instruction right next to the code ("PUSHH R1" as the last line) belongs to
    # it: take it in, so the verifier reports it instead of the plan silently losing a line.
    while first - 1 in outside_set and line_kind(lines[first - 1]) == "misspelt":
        first -= 1
    while last + 1 in outside_set and line_kind(lines[last + 1]) == "misspelt":
        last += 1
    return [i for i in outside if first <= i <= last]


# -- reading the chosen lines -------------------------------------------------------------------


_COUNT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|\d+)\Z")
_TIMES = re.compile(r"\s*(\S+)\s+(\S+)\s+(\S.*)", re.DOTALL)  # "5 dd 0": a times line's rest
_ROW_TEXT = "this row read whole (the JSON list of its cells)"


def _too_long(column: int, what: str, limit: int) -> LineError:
    return LineError(
        column + 1,
        f"{what} would be longer than the {limit} characters a plan may build from its data",
        "less data: write the text out once, or keep large data in tools",
    )


def _too_many(column: int) -> LineError:
    return LineError(
        column + 1,
        f"the data holds more than the {MAX_MEMORY_CELLS} cells a plan may have",
        "less data: keep large data in tools and fetch what the plan needs",
    )


def no_constant(name: str) -> Any:
    """JSON in a plan (its data, what it reads) holds finite numbers: no ``NaN``, ``Infinity``."""
    raise ValueError(f"{name} is not a finite number")


def _data_parts(rest: str, column: int, most: int) -> list[Imm | Name]:
    """The values of a data definition: literals, one JSON text, or names of other labels;
    more than ``most`` values are refused before they are read."""
    text = rest.strip()
    if not text:
        raise LineError(column + 1, "data definition without a value", "a string, number or JSON")
    if text[0] in "{[":
        try:
            loaded = json.loads(text, parse_constant=no_constant)
            dumped = json.dumps(loaded, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            return [Imm(dumped)]
        except (ValueError, RecursionError) as exc:
            detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80]
            start = column + len(rest) - len(rest.lstrip())
            raise LineError(start + 1, f"invalid JSON in data: {detail}", "valid JSON") from None
    parts = _operands(rest, column, most)[0]
    if any(not isinstance(p, Imm | Name) for p in parts):
        raise LineError(
            column + 1,
            "data may only hold strings, numbers, JSON or names of other data labels",
            "a literal value",
        )
    return [p for p in parts if isinstance(p, Imm | Name)]


def _data_cells(parts: Sequence[Imm | Name], column: int, limit: int) -> tuple[Value, list[Value]]:
    """The value a bare label reads and the label's cells, from literal parts: one value is one
    cell; strings with character codes after them are one string (a final ``0`` ends it);
    several numbers are one cell each, and the label reads as their JSON list. Text longer than
    ``limit`` is refused before it is built."""
    values = [p.value for p in parts if isinstance(p, Imm)]
    if len(values) == 1:
        return values[0], values
    if isinstance(values[0], str):
        out, size = [values[0]], len(values[0])
        for position, value in enumerate(values[1:], start=1):
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, int) and value == 0:
                if position != len(values) - 1:
                    raise LineError(
                        column + 1,
                        "a string ends at its 0; the values after it would be lost",
                        "one string per data label (end it with 0, or leave the 0 out)",
                    )
                break
            elif isinstance(value, int) and 0 < value < 0x110000:
                out.append(chr(value))
            else:
                raise LineError(
                    column + 1, f"cannot append {clip(repr(value))} to a string", "a character code"
                )
            size += len(out[-1])
            if size > limit:
                raise _too_long(column, "this string", limit)
        text = "".join(out)
        return text, [text]
    listed = row_json(values, limit)
    if listed is None:
        raise _too_long(column, _ROW_TEXT, limit)
    return listed, values


def _count(token: str, word: str, column: int) -> int:
    """The count of ``times N`` or ``resX N``: a whole number from 1 to :data:`MAX_REPEAT`."""
    count = read_number(token, column) if _COUNT.match(token) else 0
    if not isinstance(count, int) or not 0 < count <= MAX_REPEAT:
        raise LineError(
            column + 1, f"{word} needs a count of 1 to {MAX_REPEAT}, not {clip(token)}", "a count"
        )
    return count


def _settled(operand: Operand, kind: str, names: Set[str]) -> Operand:
    """What one operand of kind ``kind`` (or a fill of its placeholders) means, given the
    ``names`` of the plan's labels: ``loop.start``, ``github.search`` read as paths are a label
    or a tool name where a jump or ``CALL`` takes one, or where the whole dotted name is a
    label; ``[EBX + name]`` with no data label ``name`` is the field ``name`` of the JSON text
    in ``EBX`` (C's ``EBX->name``); ``NONE`` and ``NULL`` are the value "no value"."""
    dotted = isinstance(operand, Path) and isinstance(operand.base, Name)
    dotted = dotted and "[" not in str(operand)
    if dotted and (kind not in ("value", "reg") or str(operand).lower() in names):
        return Name(str(operand))
    if isinstance(operand, Mem) and operand.label is not None and kind != "mem":
        field, base = operand.label, operand.base
        plain = operand.index is None and operand.disp == 0 and "." not in field
        if base is not None and plain and field.lower() not in names:
            return Path(base, (Imm(field),), operand.text)
    if kind == "value" and isinstance(operand, Name) and operand.name.upper() in _NO_VALUE_WORDS:
        return Imm(NONE)  # no label is called so (see reserved_name)
    if isinstance(operand, Template):
        fills = tuple(_settled(fill, "value", names) for fill in operand.fills)
        return dataclasses.replace(operand, fills=fills)  # type: ignore[arg-type]
    return operand


_VALID_FORMS = "a placeholder: {R1}, {best}, {R1.items[0].title}, {R1:.2f}, {R1:,}, {R1:02}"


def _as_template(
    operand: Operand, column: int, source_line: str, data: Mapping[str, Value] | None = None
) -> tuple[Operand, list[LineError]]:
    """A text operand with placeholders as a :class:`Template` (the operands its placeholders
    read, the pieces around them, their formats and columns; any other operand as it is), and
    the problems found, at their columns in ``source_line`` (``column`` is the operand's); with
    ``data`` it is ``SAY``'s text, which a data label may hold (``template_of``). A text with
    more than :data:`MAX_SAY_PLACEHOLDERS` placeholders is refused at the first one past the
    limit. Linear in the length of the text and of the line."""
    text = template_of(operand, data or {})
    if text is None or "{" not in text:
        return operand, []
    where = "the text" if data is None else "the answer text"
    misses = list(itertools.islice(near_misses(text, where), MAX_SAY_PLACEHOLDERS))
    pieces, found = split_template(text) if not misses else ([], [])
    at = [i for i, _ in misses] or [i for _, _, i in found]
    # each character's own column when the text is written on this line, else the operand's
    columns = string_columns(source_line, column - 1, at) or [column] * len(at)
    if misses:
        return operand, [
            LineError(c, why, _VALID_FORMS) for c, (_, why) in zip(columns, misses, strict=True)
        ]
    if len(found) > MAX_SAY_PLACEHOLDERS:
        message = (
            f"{where} holds more than the {MAX_SAY_PLACEHOLDERS} placeholders one SAY may "
            "have (and one text)"
        )
        expected = "fewer placeholders: SAY once per item in a loop, or say a summary"
        return operand, [LineError(columns[-1], message, expected)]
    fills: list[Reg | Name | Mem | Path] = []
    problems: list[LineError] = []
    for (ref, spec, _), column in zip(found, columns, strict=True):
        shown = "{" + ref + (":" + spec if spec else "") + "}"
        try:
            fill = read_operand(ref, column - 1)
        except LineError as exc:
            message = f"cannot read {clip(shown)} in {where}: {exc.message}"
            problems.append(LineError(column, message, exc.expected))
            continue
        if not isinstance(fill, Reg | Name | Mem | Path):  # {.5} reads as a number
            problems.append(LineError(column, f"{clip(shown)} names no value", "a register"))
            continue
        fills.append(fill)
    if problems or not fills:  # no fills: {{R1}} is the text {R1}
        return (operand if problems else Imm(pieces[0])), problems
    specs = tuple(spec for _, spec, _ in found)
    return Template(text, tuple(pieces), tuple(fills), specs, tuple(columns)), []


def _parse(normalised: str) -> Program | PlainAnswer:
    """:func:`parse` of a reply whose line breaks are ``\\n`` (its stages: see the module doc)."""
    source_lines = tuple(normalised.split("\n", MAX_REPLY_LINES))
    if len(source_lines) > MAX_REPLY_LINES:
        # Every line costs work in each stage; no plan needs this many (the checker refuses
        # more than MAX_PLAN_INSTRUCTIONS), and a reply is refused before any of it is done.
        message = f"the reply has more than {MAX_REPLY_LINES} lines; a plan needs far fewer"
        too_many = Diagnostic(MAX_REPLY_LINES + 1, 1, message, source_lines[-1].split("\n", 1)[0])
        raise AsmSyntaxError((too_many,), "a shorter plan: loops and subroutines, not every step")
    shown = remove_thinking(normalised)
    visible = shown.split("\n")
    code_lines = tuple(index + 1 for index in _code_line_numbers(visible))
    instructions: list[Instruction] = []
    unknown: list[UnknownInstruction] = []
    labels: dict[str, int] = {}
    label_lines: dict[str, list[tuple[int, int]]] = {}
    label_names: dict[str, str] = {}
    entry_name: str | None = None
    entry_site = (0, 0)
    data: dict[str, Value] = {}  # each data label to the value it reads as bare
    memory: dict[str, MemoryLabel] = {}  # each data label but an equ constant to its cells
    read_only = False  # the current section is read-only (.rodata)
    cells = 0  # cells of the rows read so far (see MAX_MEMORY_CELLS)
    repeated = 0  # characters the strings repeated by times build (see MAX_BUILT_TEXT_CHARS)
    # rows naming other labels (cities dd paris, oslo), filled in once all are read
    pending_rows: list[tuple[str, list[Imm | Name], int, int]] = []
    errors: list[tuple[int, LineError]] = []  # each problem, with its line

    def define(number: int, scanned: Scanned) -> None:
        """A data definition: its bare value in ``data``, its cells in ``memory``."""
        nonlocal cells, repeated
        name, word = scanned.data_name, scanned.mnemonic.upper()
        rest, column = scanned.rest, scanned.rest_col
        if problem := reserved_name(name, "data label", scanned.mnemonic_col + 1):
            raise problem
        key = name.lower()
        if key in data:
            message = f"data label {name!r} is defined twice"
            errors.append((number, LineError(scanned.mnemonic_col + 1, message, "a new name")))
        repeat, values = 1, [cast("Imm | Name", Imm(0))]
        if word == "TIMES":  # "times 5 dd 0": the count, the data word and the values
            words = _TIMES.match(rest)
            if words is None or words[2].upper() not in _DATA_SIZES:
                raise LineError(column + 1, "cannot read this times line", "times COUNT dd VALUE")
            if words[2].upper() == "EQU":
                raise LineError(
                    column + 1,
                    "times cannot repeat an equ constant",
                    "times COUNT dd VALUE (a row), or NAME equ VALUE (one constant)",
                )
            repeat, word = _count(words[1], "times", column), words[2].upper()
            rest, column = words[3], column + words.start(3)
        if word in _RESERVE_SIZES:  # resd N: N cells of 0
            repeat = _count(rest.strip() or "0", word, column)
        else:
            # Values past the budget are refused before they are read (an equ constant is no
            # memory, but holds no more values than a row may).
            room = MAX_MEMORY_CELLS if word == "EQU" else MAX_MEMORY_CELLS - cells
            values = _data_parts(rest, column, room)
        # A row counts against the memory budget before it is built, so a short reply cannot
        # make the parser build millions of cells (``times 65536 dd 1, 2, ...``, many ``resd``);
        # a string is one cell, however it is repeated, and what repeated strings build (each
        # part at least a character) counts against a budget of its own, before it is built.
        literal = [v.value for v in values if isinstance(v, Imm)]
        text = len(literal) == len(values) and isinstance(literal[0], str)
        if text and repeat > 1:
            once = sum(max(len(v), 1) if isinstance(v, str) else 1 for v in literal)
            if once * repeat > MAX_DATA_TEXT_CHARS:
                raise _too_long(column, "this string", MAX_DATA_TEXT_CHARS)
            repeated += once * repeat
            if repeated > MAX_BUILT_TEXT_CHARS:
                raise _too_long(column, "the strings times repeats", MAX_BUILT_TEXT_CHARS)
        if word != "EQU":
            cells += 1 if text else len(values) * repeat
            if cells > MAX_MEMORY_CELLS:
                raise _too_many(column)
        size, parts = _SIZES[word], values * repeat
        writable = not read_only and word != "EQU"
        if any(isinstance(p, Name) for p in parts):
            data[key] = ""
            pending_rows.append((key, parts, number, column))
            memory[key] = MemoryLabel((), size, writable, number)
            return
        # Text written out in the plan is kept whatever its length; text built from it
        # (repeated by times) may not grow past the limit (checked above: strings alone).
        value: Value
        if text and all(type(v) is str for v in literal):
            value = "".join(cast("list[str]", literal)) * repeat
            row: list[Value] = [value]
        else:
            value, row = _data_cells(parts, column, max(MAX_DATA_TEXT_CHARS, len(rest)))
        data[key] = value
        if word != "EQU":
            memory[key] = MemoryLabel(tuple(row), size, writable, number)

    for number in code_lines:
        scanned = scan(visible[number - 1])
        for name, column in scanned.labels:
            if problem := reserved_name(name, "label", column + 1):
                errors.append((number, problem))
                continue
            label_lines.setdefault(name.lower(), []).append((number, column + 1))
            labels.setdefault(name.lower(), len(instructions))
            label_names.setdefault(name.lower(), name)
        upper = scanned.mnemonic.upper()
        try:
            if scanned.data_name:
                define(number, scanned)
            elif not scanned.mnemonic:
                if scanned.rest:
                    raise LineError(
                        scanned.rest_col + 1,
                        f"cannot read {clip(scanned.rest, 60)!r}",
                        "an instruction, a label or a directive",
                    )
            elif upper in _SECTION_WORDS or upper in _SECTION_SHORT:
                section = (scanned.rest.split() or [""])[0] if upper in _SECTION_WORDS else upper
                read_only = section.lower().lstrip(".") in ("rodata", "rdata", "const")
            elif upper in _GLOBAL_WORDS:
                entry = _IDENT.search(scanned.rest)
                if entry and entry_name is None:
                    entry_name = entry.group()
                    entry_site = (number, scanned.rest_col + entry.start() + 1)
            elif upper not in _EXTERN_WORDS:
                operands, columns = _operands(scanned.rest, scanned.rest_col)
                text = (scanned.mnemonic + scanned.rest).strip()
                opcode = MNEMONICS.get(upper)
                column = scanned.mnemonic_col + 1
                if opcode is None:
                    unknown.append(UnknownInstruction(scanned.mnemonic, number, column, text))
                    continue
                instructions.append(Instruction(opcode, operands, number, column, text, columns))
        except LineError as exc:
            errors.append((number, exc))

    # Fill in the rows that name other labels: each named label stands for its value.
    rows = {key for key, *_ in pending_rows}
    for key, parts, number, column in pending_rows:
        found: list[Value] = []
        for part in parts:
            value = part.value if isinstance(part, Imm) else data.get(part.name.lower())
            if isinstance(part, Name) and (value is None or part.name.lower() in rows):
                message = f"{clip(part.name)!r} in this data row is no data label with a value"
                expected = "numbers, strings or names of data labels defined with values"
                errors.append((number, LineError(column + 1, message, expected)))
                value = 0
            found.append(value)
        listed = row_json(found, MAX_DATA_TEXT_CHARS)
        if listed is None:
            errors.append((number, _too_long(column, _ROW_TEXT, MAX_DATA_TEXT_CHARS)))
        memory[key] = dataclasses.replace(memory[key], cells=tuple(found))
        data[key] = listed or ""

    # Settle each instruction's operands (_settled): the placeholders of each SAY and of every
    # other text, and what each name means; done once every data label is read, since its text
    # may be defined after the code. All the texts together hold at most MAX_PLAN_PLACEHOLDERS.
    names = set(data) | set(labels)
    placeholders = 0
    for position, ins in enumerate(instructions):
        line, say, columns = source_lines[ins.line - 1], ins.op is Opcode.SAY, ins.operand_columns
        info = OPCODE_INFO[ins.op]
        kinds = (info.shape(len(ins.operands)) or info.shapes[0]).kinds  # as effects reads it
        settled: list[Operand] = []
        problems: list[LineError] = []
        if say and len(ins.operands) != 1:
            message = f"SAY takes one operand, {len(ins.operands)} were given"
            expected = (
                'text in quotes with placeholders (SAY "It is {R1} degrees"), or a data label'
            )
            column = columns[1] if len(columns) > 1 else ins.column
            problems.append(LineError(column, message, expected + " holding such text"))
        for at, operand in enumerate(() if problems else ins.operands):
            kind = kinds[at] if at < len(kinds) else "value"
            if kind == "value":  # SAY's text may be a data label's
                operand, wrong = _as_template(operand, columns[at], line, data if say else None)
                problems += wrong
            if isinstance(operand, Template):
                placeholders += len(operand.fills)
            written = place_of(operand)
            if kind == "reg" and isinstance(written, Name):  # MOV none, 3: no variable
                problems += filter(None, [reserved_name(written.name, "variable", columns[at])])
            settled.append(_settled(operand, kind, names))
        errors += [(ins.line, problem) for problem in problems]
        said = settled[0] if say and settled else None
        if isinstance(said, Template):  # its placeholders are operands of their own
            operands, columns = (ins.operands[0], *said.fills), (columns[0], *said.columns)
            instructions[position] = dataclasses.replace(
                ins, operands=operands, operand_columns=columns
            )
        elif tuple(settled) != ins.operands:
            instructions[position] = dataclasses.replace(ins, operands=tuple(settled))
        if placeholders > MAX_PLAN_PLACEHOLDERS:
            message = (
                f"the texts of this plan hold more than the {MAX_PLAN_PLACEHOLDERS} "
                "placeholders a plan may have"
            )
            expected = "fewer placeholders: SAY in a loop, or say a summary"
            errors.append((ins.line, LineError(ins.column, message, expected)))
            break

    if errors:
        reported = tuple(Diagnostic(n, e.column, e.message, source_lines[n - 1]) for n, e in errors)
        raise AsmSyntaxError(reported, errors[0][1].expected)
    if not instructions and not unknown:
        if not shown.strip():  # only thinking: nothing was said to the user
            raise EmptyReply()
        return PlainAnswer(shown.strip())
    return Program(
        instructions=tuple(instructions),
        labels=labels,
        data=data,
        entry=labels.get((entry_name or "").lower(), 0),
        source_lines=source_lines,
        unknown=tuple(unknown),
        label_lines={k: tuple(v) for k, v in label_lines.items()},
        label_names=label_names,
        entry_name=entry_name,
        entry_site=entry_site,
        memory=memory,
        code_lines=code_lines,
    )


def parse(text: str) -> Program | PlainAnswer:
    """Parse a model's reply.

    The result is one of two types: narrow it with ``isinstance`` before using it as a program (a
    type checker requires it), or call :func:`parse_program` when only a program will do.

    Example:
        >>> reply = parse("PUSH 1\\nPOP R1")
        >>> if isinstance(reply, PlainAnswer):  # the model answered in words
        ...     print(reply.text)
        ... else:  # here ``reply`` is a Program
        ...     print(len(reply.instructions))
        2

    Args:
        text: The reply as the model wrote it.

    Returns:
        A :class:`Program`, or a :class:`PlainAnswer` when the reply holds no instruction.

    Raises:
        AsmSyntaxError: Some code line cannot be read; every such line is listed.
        EmptyReply: The reply is empty, blank or only thinking: neither a plan nor an answer.
    """
    normalised = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")  # (BOM)
    if not normalised.strip():
        raise EmptyReply()
    # A large reply builds tens of thousands of small objects that hold no reference cycles;
    # the cyclic collector, walking them again and again as they pile up, made parsing grow
    # faster than the reply (22x the time for 10x the text). Reference counting frees them.
    collecting = gc.isenabled() and len(normalised) >= 64 * 1024
    if collecting:
        gc.disable()
    try:
        return _parse(normalised)
    finally:
        if collecting:
            gc.enable()


def parse_program(text: str) -> Program:
    """Parse a reply that must hold a program: :func:`parse`, but a reply that holds no
    instruction (an answer in words) raises :class:`AsmSyntaxError` (line 1, asking for the
    program) instead of being a :class:`PlainAnswer`.

    Example:
        >>> program = parse_program("PUSH 1\\nPOP R1")
        >>> [str(i) for i in program.instructions]
        ['PUSH 1', 'POP R1']
    """
    parsed = parse(text)
    if isinstance(parsed, Program):
        return parsed
    first = text.replace("\r\n", "\n").replace("\r", "\n").split("\n", 1)[0]
    message = "the reply holds no instruction, only words: write the program in one ```asm block"
    raise AsmSyntaxError((Diagnostic(1, 1, message, first),), "a program")


class NotWords(PlanRejected):
    """A reply that holds neither a program nor an answer in words (code in another language,
    a JSON object, a tool call written as text): the model is asked to repair it, and once its
    repairs are spent the reply stands as its answer."""


# A tool call in a model's own markup, whatever the words around it: tags, gpt-oss's tokens, ReAct.
_CALL_MARKUP = re.compile(
    r"^[ \t]*(?:<tool_call>|<function[=>]|Action[ \t]*Input[ \t]*:)"
    r"|<\|(?:channel|constrain|call)\|>",
    re.M,
)
_CALL_TEXT = re.compile(r"^\s*[A-Za-z_][\w.]*\(.*\)[\s;]*$")  # get_weather(city="Paris")
_CODE_TEXT = re.compile(  # a line of code in another language, as no sentence starts
    r"^\s*(?:(?:async\s+)?def\s+\w+\s*\(|class\s+\w+[(:]|import\s+[\w.]+(?:\s+as\s+\w+)?$"
    r"|from\s+[\w.]+\s+import\s|(?:const|let|var)\s+\w+\s*=|function\s+\w+\s*\("
    r"|[A-Za-z_][\w.]*(?:\[[^]]*\])?\s*=\s*(?:await\s+)?[\w.]+\(.*\)[\s;]*$)"
)
_JSON_START = re.compile(r"^[ \t]*[\[{]", re.M)
_PROSE_WORDS = 12  # words of prose beside code that make a reply an answer in words


def not_words(text: str) -> None:
    """Refuse a :class:`PlainAnswer`'s ``text`` that is no answer in words (raise :class:`NotWords`,
    saying what the reply holds and what to write instead): a tool call in a model's markup, or,
    with little prose beside it, code (fenced or not), a JSON object or list that starts a line and
    ends one, a call written as code (``get_weather(city="Paris")``)."""
    stripped = text.strip()
    fences = [m.group(1).lower() for m in map(_FENCE.match, stripped.splitlines()) if m]
    prose = re.sub(r"```.*?(```|$)", " ", stripped, flags=re.S)
    start, end = _JSON_START.search(prose), 0
    with contextlib.suppress(ValueError, RecursionError):  # no JSON, or nested too deeply
        end = json.JSONDecoder().raw_decode(prose, start.end() - 1)[1] if start else 0
    if start and end and not prose[end:].split("\n", 1)[0].strip():
        prose = prose[: start.start()] + prose[end:]
    else:
        end = 0
    lines, code, inside = prose.splitlines(), set[int](), False
    for n, line in enumerate(lines):  # the code lines, and the indented lines of their blocks
        if _CODE_TEXT.match(line) or _CALL_TEXT.match(line) or (inside and line[:1] in " \t)]}"):
            code.add(n)
            inside = True
        elif line.strip():
            inside = False
    mostly_code = sum(len(s.split()) for n, s in enumerate(lines) if n not in code) < _PROSE_WORDS
    what = ""
    if _CALL_MARKUP.search(prose):
        what = "a tool call written as text"
    elif mostly_code and fences:
        what = f"code in {fences[0]}" if fences[0] else "a code block that is not a program"
    elif mostly_code and end:
        what = "a JSON value"
    elif mostly_code and code:
        kind = any(_CODE_TEXT.match(lines[n]) for n in code)
        what = "code in another language" if kind else "a tool call written as text"
    if what:
        problem = (
            f"the reply holds {what}, neither a program nor an answer in words: write the "
            "program in one ```asm block (tools run only through CALL), or answer the user in "
            "words"
        )
        raise NotWords((Diagnostic(1, 1, problem),))
