"""Reading one line of a plan: its comment, labels, mnemonic (or data name) and operands.

The parser (:mod:`llassembly.language.parser`) decides which lines are code and builds the
program; this module reads a single line without judging it: :func:`scan` splits it into labels,
a mnemonic (or data name) and the rest, and :func:`read_operand` reads each operand (strings,
numbers, registers, names, memory operands, paths). Everything here is linear in the text's
length: no pattern backtracks (each repeated part can match one way only, or is possessive), no
loop rescans what it has read, runs of characters are skipped by patterns rather than one
character at a time, and short lines and operands are read once and shared.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Sequence
from typing import Literal, NamedTuple, cast

from llassembly.errors import clip
from llassembly.language.instructions import MNEMONICS, OPCODE_INFO, register_index
from llassembly.language.limits import is_int64
from llassembly.language.program import Imm, Mem, Name, Operand, Path, Reg

IDENT = re.compile(r"[A-Za-z_.$@?][\w.$@?]*")
# A name operand may also hold inner dashes: tools named like MCP tools (``get-weather``).
_NAME_OPERAND = re.compile(r"[A-Za-z_.$@?][\w.$@?]*(?:-[\w.$@?]+)*")
# Each digit run can match one way only (``\d+(?:\.\d*)?``, not ``\d+\.?\d*``): a long
# run of digits that turns out not to be a number must fail in linear time, not quadratic.
_NUMBER = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\Z")

_SIZE_WORDS = {"BYTE": 1, "WORD": 2, "DWORD": 4, "QWORD": 8, "TWORD": 10, "OWORD": 16}
_SIZE_WORDS |= {"XMMWORD": 16}
_STACK_POINTERS = frozenset({"ESP", "RSP", "SP"})
NO_VALUE_WORDS = frozenset({"NONE", "NULL"})
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
_STRING_END = {
    '"': re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL),
    "'": re.compile(r"'[^'\\]*+(?:\\.[^'\\]*+)*+'", re.DOTALL),
}
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_NOT_SPACE = re.compile(r"\S")
# An operand that is no string: a bracket (to its "]", or the end of an unclosed one) or a run of
# characters up to a space, a comma, a quote or a "[", then the steps of a path written right
# after it ("[...]", and ".name" after a "]": R1.items[0].id, [EBX].name). Linear: possessive.
_TOKEN = re.compile(
    r"""(?:\[[^\]]*+(?:\]|\Z)|[^\s,"'\[]++)(?:\[[^\]]*+(?:\]|\Z)|\.[^\s,"'\[]*+)*+"""
)


def _quoted_end(text: str, start: int) -> int | None:
    """The index after the quoted string starting at ``text[start]`` (a quote), or ``None``
    when it is not closed on this line."""
    closed = _STRING_END[text[start]].match(text, start)
    return None if closed is None else closed.end()


def _string_end(text: str, start: int, offset: int = 0) -> int:
    """The index after the quoted string starting at ``text[start]`` (``text`` starts at column
    ``offset`` of its line)."""
    end = _quoted_end(text, start)
    if end is None:
        raise LineError(offset + start + 1, "unterminated string", f"a closing {text[start]}")
    return end


def _read_string(text: str, start: int) -> tuple[str, int]:
    """Read a quoted string starting at ``text[start]``; return (value, index after it).

    Known escapes (``\\n \\t \\r \\0 \\\\ \\" \\'``) become their character; any other
    backslash pair is kept as written.
    """
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
    end = _quoted_end(line, start) if line[start : start + 1] in _STRING_END else None
    if end is None:
        return None
    body_start = start + 1
    shorter: list[int] = []  # value indexes of the characters written as a two-character escape
    produced, last = 0, body_start
    for escape in _ESCAPE.finditer(line, body_start, end - 1):
        produced += escape.start() - last
        known = escape.group(1) in _ESCAPES
        if known:
            shorter.append(produced)
        produced, last = produced + (1 if known else 2), escape.end()
    # each character is as many columns further as there are escapes before it
    return [body_start + p + bisect.bisect_left(shorter, p) + 1 for p in positions]


def split_operands(text: str, offset: int, most: int | None = None) -> list[tuple[str, int]]:
    """Split operand text into raw tokens with their 0-based columns in the line.

    With ``most``, stop once there are more tokens than that (the caller refuses so many).
    """
    tokens: list[tuple[str, int]] = []
    i = 0
    expect_operand = True
    while found := _NOT_SPACE.search(text, i):
        i = found.start()
        ch = text[i]
        if ch == ",":
            if expect_operand:
                raise LineError(offset + i + 1, "unexpected comma", "an operand")
            expect_operand = True
            i += 1
            continue
        start = i
        token = _TOKEN.match(text, i)  # None only at a quote: a string
        i = token.end() if token else _string_end(text, i, offset)
        if not expect_operand and tokens and text[start] in "[pP" and _sized(tokens[-1][0]):
            # "dword [n]", "DWORD PTR [n]": a size word and its memory operand are one operand
            column = tokens.pop()[1]
            tokens.append((text[column - offset : i], column))
            continue
        tokens.append((text[start:i], offset + start))
        expect_operand = False
        if most is not None and len(tokens) > most:
            return tokens
    if tokens and expect_operand:
        raise LineError(offset + len(text.rstrip()), "trailing comma", "an operand after ','")
    return tokens


def _sized(token: str) -> bool:
    """A size word (``dword``), maybe with ``ptr``, still waiting for its ``[...]``."""
    words = token.upper().split()
    if not words or token.endswith("]"):
        return False
    return words[0] in _SIZE_WORDS and words[1:] in ([], ["PTR"])


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
    if not (is_int64(value) or (isinstance(value, float) and math.isfinite(value))):
        raise too_big
    return value


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
        value, _ = _read_string(token, 0)
        return Imm(value)
    if token[0] == "[":
        close = token.find("]")
        if 0 < close < len(token) - 1:  # [EBX].name, [row + 8].items[0]
            return _path(token, close + 1, _read_memory(token[: close + 1]))
        return _read_memory(token)
    if _sized(token.split("[", 1)[0].strip() or "-"):
        return _read_memory(token)
    if _NUMBER.match(token):
        return Imm(read_number(token, 0))
    if token.endswith("()"):
        token = token[:-2]
    head = _PATH_HEAD.match(token)
    if head is not None and head.end() < len(token):  # R1.items[0].id, page.next_cursor
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
    """A path operand: ``base`` and the steps written in ``token`` from ``start``: ``.name``
    gives a field name, ``[...]`` a key: a number, a quoted field name, a register or a
    variable."""
    if isinstance(base, Mem) and base.label is None and base.index is None and not base.disp:
        base = base.base or base  # [EBX].name: the JSON text EBX holds, as C's EBX->name
    steps: list[Imm | Reg | Name] = []
    i, end = start, len(token)
    while i < end:
        step = _STEP.match(token, i)
        if step is None:
            message = f"cannot read {clip(token)!r} as a path"
            raise LineError(i + 1, message, _PATH_EXPECTED)
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
    elif IDENT.fullmatch(inside):
        return _register(inside) or Name(inside)
    message = f"{clip(token)}: [{clip(inside, 20)}] is no key"
    if any(c in inside for c in "*+"):  # MASM's table[ESI*4]
        message += f"; for a cell of a data label write [{token.split('[', 1)[0]} + {inside}]"
    expected = (
        "a key in brackets: a whole number ([0], [-1] for the last), a register ([ESI]), a "
        'variable ([i]) or a quoted field name (["next-cursor"])'
    )
    raise LineError(column + 1, message, expected)


_MEMORY_EXPECTED = "a memory operand like [name], [name + 8] or [name + ESI*4]"
_SIGN = re.compile(r"([+-])")


def _terms(inside: str, token: str) -> list[tuple[bool, str]]:
    """``x + ESI*4 - 8`` as ``(negative, text)`` terms; the first may go without a sign.

    One split at the signs: linear, whatever the spaces (a pattern that searched for each
    term's end afresh took quadratic time on ``[x      ...      y]``).
    """
    pieces = _SIGN.split(inside)
    terms = [(False, pieces[0].rstrip())] if pieces[0] else []
    for sign, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        body = piece.strip()
        if not body:  # "x + + 4", "x +"
            raise _bad_memory(f"cannot read memory operand {clip(token)!r}")
        terms.append((sign == "-", body))
    return terms


def _bad_memory(message: str) -> LineError:
    return LineError(1, message, _MEMORY_EXPECTED)


def _whole_number(factor: str) -> int:
    """An offset or a scale in an address: a whole number (``ESI*1.5`` is no address)."""
    number = read_number(factor, 0)
    if not isinstance(number, int):
        raise LineError(1, f"{clip(factor)} is not a whole number", "a byte offset")
    return number


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
    label: str | None = None
    registers: list[tuple[Reg, int]] = []
    disp = 0
    for negative, body in _terms(inside, token):
        factors = [f.strip() for f in body.split("*")]
        if len(factors) > 2 or not all(factors):
            raise _bad_memory(f"cannot read {clip(body)!r} in {clip(token)}")
        numbers = [f for f in factors if _NUMBER.match(f)]
        names = [f for f in factors if not _NUMBER.match(f)]
        whole = [_whole_number(factor) for factor in numbers]
        if not names:
            disp += -math.prod(whole) if negative else math.prod(whole)
            continue
        if len(names) > 1:
            raise _bad_memory(f"{clip(body)!r}: only a register may be scaled")
        name = names[0]
        register = _register(name)
        scale = whole[0] if whole else 1
        if register is None:
            _no_stack_pointer(name, "a data label and general registers")
            if label is not None or negative or numbers or not IDENT.fullmatch(name):
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

DATA_SIZES = {"DB": 1, "DW": 2, "DD": 4, "DQ": 8, "DT": 10, "DS": 1, "STRING": 1, "ASCIZ": 1}
DATA_SIZES |= {"ASCII": 1, "EQU": 8}
RESERVE_SIZES = {"RESB": 1, "RESW": 2, "RESD": 4, "RESQ": 8}
_DATA_WORDS = frozenset({*DATA_SIZES, *RESERVE_SIZES, "TIMES"})
SECTION_WORDS = frozenset({"SECTION", "SEGMENT", ".SECTION"})
SECTION_SHORT = frozenset({".DATA", ".TEXT", ".RODATA", ".BSS", ".CODE"})
GLOBAL_WORDS = frozenset({"GLOBAL", ".GLOBAL", ".GLOBL", "GLOBL"})
EXTERN_WORDS = frozenset({"EXTERN", ".EXTERN", "EXTRN"})
_DIRECTIVES = SECTION_WORDS | SECTION_SHORT | GLOBAL_WORDS | EXTERN_WORDS


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
        end = _quoted_end(text, found.start())
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
    return _scan_line(line) if len(line) > _CACHED_LINE else _scan_cached(line)


_CACHED_LINE = 256


def _scan_line(line: str) -> Scanned:
    code = strip_comment(line)
    head = cast("re.Match[str]", _HEAD.match(code))  # every part of the pattern is optional
    pos = head.end(1)
    labels = tuple((m.group(1), m.start()) for m in _LABEL.finditer(code, head.start(1), pos))
    word = head.group(2)
    if word is None:
        return Scanned(labels, "", 0, code[pos:].strip(), pos, "", code)
    rest_col = head.end(2)
    # "name db ..." / "name: db ..." define data, "loop dd 5" too (the parser refuses its name);
    # "MOV string, R1" and "PUSH db" stay instructions: no value follows the data word there.
    second = head.group(4)
    if second is not None and second.upper() in _DATA_WORDS:
        value_col = head.end(4)
        value = code[value_col:]
        if word.upper() not in MNEMONICS or (value[:1].isspace() and value.strip()[:1] not in ",;"):
            return Scanned(labels, second, pos, value, value_col, word, code)
    rest = code[rest_col:]
    if labels and word.upper() in _DATA_WORDS:
        name, column = labels[-1]
        return Scanned(labels[:-1], word, column, rest, rest_col, name, code)
    if rest and not head.group(3):
        # "MOV-1", "CALL-center": a mnemonic is a whole word, so this is not an instruction.
        return Scanned(labels, "", 0, code[pos:].strip(), pos, "", code)
    return Scanned(labels, word, pos, rest, rest_col, "", code)


_scan_cached = functools.lru_cache(maxsize=16384)(_scan_line)


def reserved_name(name: str, kind: str, column: int) -> LineError | None:
    """The problem of a ``kind`` (``"label"``, ``"data label"``) called by a word that always
    reads as something else in an operand, in any case: a register (``R5``, ``eax``, ``al``,
    ``xmm0``, the stack pointer ``esp``), ``NONE``/``NULL``, or for a data label an instruction
    (a mnemonic or an alias; only a line's first word is read as one, so a code label or a
    ``"variable"`` may have its name: see *Operands* in ``docs/language.md``); ``None`` for a
    free name."""
    upper = name.upper()
    if register_index(upper) is not None or upper in _STACK_POINTERS:
        word, why = "a register", f"{name} in an operand always reads the register"
    elif upper in NO_VALUE_WORDS:
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


def operands_of(scanned: Scanned) -> tuple[tuple[Operand, ...], tuple[int, ...]]:
    """The operands of a scanned instruction line and the 1-based column of each.

    Raises:
        LineError: An operand cannot be read.
    """
    tokens = split_operands(scanned.rest, scanned.rest_col) if scanned.rest else []
    return tuple([read_operand(t, c) for t, c in tokens]), tuple([c + 1 for _, c in tokens])


_MOST_OPERANDS = max(len(info.operands) for info in OPCODE_INFO.values())


def line_kind(line: str) -> Literal["instruction", "mnemonic", "code", "misspelt", ""]:
    """How a line reads, for choosing the code of a reply: ``"instruction"`` (a known mnemonic
    that reads as code), ``"mnemonic"`` (a known mnemonic in a sentence: ``Push it.``, or a
    lower-case one with the wrong operands), ``"code"`` (a data definition, a directive or a
    lone label), ``"misspelt"`` (an upper-case word of 2 to 7 letters with readable operands:
    an unknown mnemonic) or ``""`` (prose)."""
    scanned = scan(line)
    word = scanned.mnemonic
    if scanned.data_name and scanned.data_name.upper() in MNEMONICS:
        # "Push string values." is a sentence; "push db 'x', 0" is data (refused by name)
        return "mnemonic" if scanned.rest.rstrip().endswith((".", "!", "?")) else "code"
    if scanned.data_name or word.upper() in _DIRECTIVES:
        return "code"
    if not word:
        return "code" if scanned.labels and not scanned.rest else ""
    opcode = MNEMONICS.get(word.upper())
    if opcode is None and not (2 <= len(word) <= 7 and word.isalpha() and word.isupper()):
        return ""
    if opcode is not None and word.isupper():
        return "instruction"
    if opcode is not None and scanned.rest.rstrip().endswith((".", "!", "?")):
        return "mnemonic"  # "Push it." is a sentence, not code
    try:
        count = len(operands_of(scanned)[0])
    except LineError:
        return "" if opcode is None else "mnemonic"
    if opcode is None:
        return "misspelt" if 1 <= count <= _MOST_OPERANDS else ""
    return "instruction" if count == len(OPCODE_INFO[opcode].operands) else "mnemonic"
