"""Parser: a model's reply to a :class:`~llassembly.program.Program` (or a plain answer).

Real models wrap the code in fences, add prose and ``<think>`` text, mix case, put labels and
instructions on one line and write data sections. This module accepts what is unambiguous and
reports the rest with line, column and what was expected (see ``docs/language.md``).

Example:
    >>> program = parse("```asm\\nloop: INC R1\\nCMP R1, 3\\nJL loop\\n```")
    >>> [str(i) for i in program.instructions]
    ['INC R1', 'CMP R1, 3', 'JL loop']
"""

from __future__ import annotations

import functools
import gc
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import AsmSyntaxError, Diagnostic, EmptyReply
from .program import (
    MNEMONICS,
    OPCODE_INFO,
    Imm,
    Instruction,
    Name,
    Operand,
    PlainAnswer,
    Program,
    Reg,
    UnknownInstruction,
    Value,
    register_index,
)

__all__ = ["parse"]

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(?:```|~~~)\s*([\w+#.-]*)")
# Fence tags that make a block code even when no line in it reads as a valid instruction.
_ASM_TAGS = frozenset(
    {
        "asm",
        "nasm",
        "masm",
        "gas",
        "fasm",
        "yasm",
        "tasm",
        "assembly",
        "assembler",
        "x86asm",
        "x86",
        "s",
        "llasm",
        "llassembly",
    }
)
_IDENT = re.compile(r"[A-Za-z_.$@?][\w.$@?]*")
# A name operand may also hold inner dashes: tools named like MCP tools (``get-weather``).
_NAME_OPERAND = re.compile(r"[A-Za-z_.$@?][\w.$@?]*(?:-[\w.$@?]+)*")
# Each digit run can match one way only (``\d+(?:\.\d*)?``, not ``\d+\.?\d*``): a long
# run of digits that turns out not to be a number must fail in linear time, not quadratic.
_NUMBER = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\Z")
_DATA_WORDS = frozenset({"DB", "DW", "DD", "DQ", "DT", "EQU", "DS", "STRING", "ASCIZ", "ASCII"})
_SECTION_WORDS = frozenset({"SECTION", "SEGMENT", ".SECTION"})
_SECTION_SHORT = frozenset({".DATA", ".TEXT", ".RODATA", ".BSS", ".CODE"})
_GLOBAL_WORDS = frozenset({"GLOBAL", ".GLOBAL", ".GLOBL", "GLOBL"})
_EXTERN_WORDS = frozenset({"EXTERN", ".EXTERN", "EXTRN"})
_STACK_POINTERS = frozenset({"ESP", "RSP", "SP"})
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
_MAX_OPERANDS = max(len(info.operands) for info in OPCODE_INFO.values())


class _LineError(Exception):
    """A syntax problem on one line (internal; collected into an AsmSyntaxError)."""

    def __init__(self, column: int, message: str, expected: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message
        self.expected = expected


@dataclass
class _Builder:
    lines: tuple[str, ...]
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    label_lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    label_names: dict[str, str] = field(default_factory=dict)
    data: dict[str, Value] = field(default_factory=dict)
    unknown: list[UnknownInstruction] = field(default_factory=list)
    errors: list[tuple[Diagnostic, str]] = field(default_factory=list)
    entry_name: str | None = None
    entry_site: tuple[int, int] = (0, 0)

    def error(self, line: int, column: int, message: str, expected: str) -> None:
        self.errors.append((Diagnostic(line, column, message, self.lines[line - 1]), expected))

    def label(self, name: str, line: int, column: int) -> None:
        key = name.lower()
        self.label_lines.setdefault(key, []).append((line, column))
        if key not in self.labels:
            self.labels[key] = len(self.instructions)
            self.label_names[key] = name


# ---------------------------------------------------------------------------------------------
# Scanning one line


_COMMENT_OR_QUOTE = re.compile(r"[;#\"']|//")


def _strip_comment(text: str) -> str:
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


def _read_string(text: str, start: int) -> tuple[str, int]:
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
    raise _LineError(start + 1, "unterminated string", f"a closing {quote}")


def _split_operands(text: str, offset: int) -> list[tuple[str, int]]:
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
                raise _LineError(offset + i + 1, "unexpected comma", "an operand")
            expect_operand = True
            i += 1
            continue
        start = i
        if ch in "\"'":
            try:
                _, i = _read_string(text, i)
            except _LineError as exc:
                raise _LineError(offset + exc.column, exc.message, exc.expected) from None
        elif ch == "[":
            close = text.find("]", i)
            i = len(text) if close < 0 else close + 1
        else:
            while i < len(text) and not text[i].isspace() and text[i] not in ",\"'":
                i += 1
        tokens.append((text[start:i], offset + start))
        expect_operand = False
    if tokens and expect_operand:
        raise _LineError(offset + len(text.rstrip()), "trailing comma", "an operand after ','")
    return tokens


def _number(token: str, column: int) -> int | float:
    """Read a numeric literal; the language's numbers are 64-bit integers and finite floats."""
    lowered = token.lower()
    too_big = _LineError(
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


def _operand(token: str, column: int) -> Operand:
    """Turn one raw operand token into an operand (short tokens read once, then shared)."""
    found = _OPERANDS.get(token)
    if found is not None:
        return found
    operand = _read_operand(token, column)
    if len(token) <= 64:
        if len(_OPERANDS) >= _OPERANDS_KEPT:
            _OPERANDS.clear()
        _OPERANDS[token] = operand
    return operand


def _read_operand(token: str, column: int) -> Operand:
    """Turn one raw operand token into an operand."""
    if token[0] in "\"'":
        value, _ = _read_string(token, 0)
        return Imm(value)
    if token[0] == "[":
        raise _LineError(
            column + 1,
            f"memory operand {token} is not supported",
            "a register, number, string or name (use registers and the stack instead of memory)",
        )
    if _NUMBER.match(token):
        return Imm(_number(token, column))
    if token.endswith("()"):
        token = token[:-2]
    if _NAME_OPERAND.fullmatch(token):
        index = register_index(token)
        if index is not None:
            return Reg(index, token.upper())
        if token.upper() in _STACK_POINTERS:
            raise _LineError(
                column + 1,
                f"{token} (the stack pointer) is not available",
                "a general register (R1..R100, EAX..EBP); use PUSH and POP for the stack",
            )
        return Name(token)
    shown = token if len(token) <= 40 else token[:37] + "..."
    raise _LineError(
        column + 1, f"cannot read operand {shown!r}", "a register, number, string or name"
    )


@dataclass(frozen=True, slots=True)
class _Scanned:
    """What one code line holds."""

    labels: tuple[tuple[str, int], ...] = ()
    mnemonic: str = ""
    mnemonic_col: int = 0
    rest: str = ""
    rest_col: int = 0
    data_name: str = ""


def _scan(line: str) -> _Scanned:
    """Split a line into labels, a mnemonic (or data name) and the rest, without judging them.

    Choosing the code lines and reading them both scan each line; short lines are scanned once
    (a bounded cache: a scan depends on the line's text only).
    """
    if len(line) > _CACHED_LINE:
        return _scan_line(line)
    return _scan_cached(line)


_CACHED_LINE = 256


def _scan_line(line: str) -> _Scanned:
    body = _strip_comment(line)
    labels: list[tuple[str, int]] = []
    pos = 0
    while True:
        while pos < len(body) and body[pos].isspace():
            pos += 1
        match = _IDENT.match(body, pos)
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
    match = _IDENT.match(body, pos)
    if not match:
        return _Scanned(tuple(labels), rest=body[pos:].strip(), rest_col=pos)
    word = match.group()
    rest_col = match.end()
    rest = body[rest_col:]
    # "name db ..." / "name: db ..." define data.
    second = _IDENT.match(rest.lstrip())
    if second and second.group().upper() in _DATA_WORDS and word.upper() not in MNEMONICS:
        skipped = len(rest) - len(rest.lstrip())
        value_col = rest_col + skipped + second.end()
        return _Scanned(
            tuple(labels),
            mnemonic=second.group(),
            mnemonic_col=pos,
            rest=body[value_col:],
            rest_col=value_col,
            data_name=word,
        )
    if word.upper() in _DATA_WORDS and labels:
        name, col = labels.pop()
        return _Scanned(
            tuple(labels),
            mnemonic=word,
            mnemonic_col=col,
            rest=rest,
            rest_col=rest_col,
            data_name=name,
        )
    if rest and not rest[0].isspace():
        # "MOV-1", "CALL-center": a mnemonic is a whole word, so this is not an instruction.
        return _Scanned(tuple(labels), rest=body[pos:].strip(), rest_col=pos)
    return _Scanned(tuple(labels), mnemonic=word, mnemonic_col=pos, rest=rest, rest_col=rest_col)


_scan_cached = functools.lru_cache(maxsize=16384)(_scan_line)


def _is_directive(word: str) -> bool:
    upper = word.upper()
    return (
        upper in _SECTION_WORDS
        or upper in _SECTION_SHORT
        or upper in _GLOBAL_WORDS
        or upper in _EXTERN_WORDS
    )


def _looks_like_code(line: str) -> bool:
    """Decide, for replies without fences, whether a line is code or prose."""
    try:
        scanned = _scan(line)
    except _LineError:
        return False
    if scanned.data_name or (scanned.mnemonic and _is_directive(scanned.mnemonic)):
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
        tokens = _split_operands(scanned.rest, scanned.rest_col)
        for token, column in tokens:
            _operand(token, column)
    except _LineError:
        return False
    return len(tokens) == len(OPCODE_INFO[opcode].operands)


def _names_instruction(line: str) -> bool:
    """Whether a line starts with a known mnemonic, whatever its operands."""
    scanned = _scan(line)
    return not scanned.data_name and scanned.mnemonic.upper() in MNEMONICS


def _has_instruction(line: str) -> bool:
    try:
        scanned = _scan(line)
    except _LineError:
        return False
    return (
        not scanned.data_name and scanned.mnemonic.upper() in MNEMONICS and _looks_like_code(line)
    )


# ---------------------------------------------------------------------------------------------
# Choosing the code lines


def _mask_code_comments(text: str) -> str:
    """``text`` with the comments of code lines blanked (same length, same lines).

    A ``<think>`` written inside a code comment (``CALL withdraw ; see <think> notes``) is part
    of the comment, not the start of a thinking block: think tags are searched for in this copy.
    """
    if "<" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if "<" not in line:
            continue
        code = _strip_comment(line)
        if len(code) == len(line):
            continue
        if (code.strip() and _has_instruction(code)) or line.lstrip().startswith((";", "//")):
            lines[i] = code + " " * (len(line) - len(code))
    return "\n".join(lines)


def _remove_thinking(text: str) -> str:
    """Blank out ``<think>`` blocks (and everything before a lone ``</think>``), keeping lines.

    Tags inside the comments of code lines do not count (see :func:`_mask_code_comments`).
    """
    masked = _mask_code_comments(text)
    spans = [m.span() for m in _THINK_BLOCK.finditer(masked)]
    closing = None
    rest = masked
    if spans:
        pieces, last = [], 0
        for start, end in spans:
            pieces += [masked[last:start], _blank_text(masked[start:end])]
            last = end
        rest = "".join([*pieces, masked[last:]])
    for closing in _THINK_CLOSE.finditer(rest):  # noqa: B007 - the last one is wanted
        pass
    cut = closing.end() if closing is not None else 0
    blanked = [(0, cut)] if cut else []
    blanked += [(s, e) for s, e in spans if e > cut]
    if not blanked:
        return text
    out, last = [], 0
    for start, end in blanked:
        start = max(start, last)
        out += [text[last:start], _blank_text(text[start:end])]
        last = max(last, end)
    return "".join([*out, text[last:]])


def _blank_text(text: str) -> str:
    return "".join("\n" if ch == "\n" else " " for ch in text)


def _is_code_block(tag: str, lines: list[str]) -> bool:
    """Whether a fenced block holds the program.

    An assembly tag is enough; an untagged block needs one line that starts with a mnemonic (so a
    broken line is reported rather than the reply taken as prose); any other language needs a
    line that reads as an instruction.
    """
    if tag in _ASM_TAGS:
        return True
    if not tag:
        return any(_names_instruction(line) for line in lines)
    return any(_has_instruction(line) for line in lines)


def _code_line_numbers(lines: list[str]) -> list[int]:
    """Return the 0-based indexes of the lines that hold the program."""
    blocks: list[tuple[str, list[int]]] = []
    outside: list[int] = []
    current: list[int] | None = None
    tag = ""
    for index, line in enumerate(lines):
        fence = _FENCE.match(line)
        if fence:
            if current is None:
                current, tag = [], fence.group(1).lower()
            else:
                blocks.append((tag, current))
                current = None
            continue
        if current is None:
            outside.append(index)
        else:
            current.append(index)
    if current is not None:
        blocks.append((tag, current))
    chosen = [
        i for tag, block in blocks if _is_code_block(tag, [lines[j] for j in block]) for i in block
    ]
    if chosen:
        return chosen
    outside_set = set(outside)
    code = [i for i in outside if _looks_like_code(lines[i])]
    if not code:
        return []
    first, last = code[0], code[-1]
    # A misspelt instruction right next to the code ("PUSHH R1" as the last line) belongs to
    # it: take it in, so the verifier reports it instead of the plan silently losing a line.
    while first - 1 in outside_set and _misspelt_instruction(lines[first - 1]):
        first -= 1
    while last + 1 in outside_set and _misspelt_instruction(lines[last + 1]):
        last += 1
    return [i for i in outside if first <= i <= last]


def _misspelt_instruction(line: str) -> bool:
    """An upper-case word of 2 to 7 letters with readable operands: an unknown mnemonic."""
    try:
        scanned = _scan(line)
        word = scanned.mnemonic
        if not (2 <= len(word) <= 7 and word.isalpha() and word.isupper()) or scanned.data_name:
            return False
        tokens = _split_operands(scanned.rest, scanned.rest_col)
        for token, column in tokens:
            _operand(token, column)
    except _LineError:
        return False
    return 1 <= len(tokens) <= _MAX_OPERANDS and word not in MNEMONICS


# ---------------------------------------------------------------------------------------------
# Reading the chosen lines


def _no_constant(name: str) -> Any:
    """JSON in data holds finite numbers only (no ``NaN``, ``Infinity``)."""
    raise ValueError(f"{name} is not a finite number")


def _data_value(rest: str, column: int) -> Value:
    """Read the value part of a data definition."""
    text = rest.strip()
    if not text:
        raise _LineError(column + 1, "data definition without a value", "a string, number or JSON")
    if text[0] in "{[":
        start = column + len(rest) - len(rest.lstrip())
        try:
            loaded = json.loads(text, parse_constant=_no_constant)
            return json.dumps(loaded, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (ValueError, RecursionError) as exc:
            detail = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
            raise _LineError(
                start + 1, f"invalid JSON in data: {detail[:80]}", "valid JSON"
            ) from None
    parts = [_operand(tok, col) for tok, col in _split_operands(rest, column)]
    if any(isinstance(p, Reg | Name) for p in parts):
        raise _LineError(
            column + 1, "data may only hold strings, numbers or JSON", "a literal value"
        )
    values = [p.value for p in parts if isinstance(p, Imm)]
    if len(values) == 1:
        return values[0]
    if isinstance(values[0], str):
        out = [values[0]]
        for position, value in enumerate(values[1:], start=1):
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, int) and value == 0:
                if position != len(values) - 1:
                    raise _LineError(
                        column + 1,
                        "a string ends at its 0; the values after it would be lost",
                        "one string per data label (end it with 0, or leave the 0 out)",
                    )
                break
            elif isinstance(value, int) and 0 < value < 0x110000:
                out.append(chr(value))
            else:
                raise _LineError(
                    column + 1, f"cannot append {value!r} to a string", "a character code"
                )
        return "".join(out)
    return json.dumps(values, separators=(",", ":"))


def _read_line(builder: _Builder, number: int, line: str) -> None:
    scanned = _scan(line)
    for name, column in scanned.labels:
        builder.label(name, number, column + 1)
    if scanned.data_name:
        if register_index(scanned.data_name) is not None:
            name = scanned.data_name
            raise _LineError(
                scanned.mnemonic_col + 1,
                f"data label {name!r} has the name of a register: {name} in an operand always "
                f"reads the register, never this data; rename the data label (e.g. {name}_data)",
                "a data label name that is not a register (R0..R100, EAX..EBP, RAX..RBP)",
            )
        value = _data_value(scanned.rest, scanned.rest_col)
        key = scanned.data_name.lower()
        if key in builder.data:
            builder.error(
                number,
                scanned.mnemonic_col + 1,
                f"data label {scanned.data_name!r} is defined twice",
                "a new name",
            )
        builder.data[key] = value
        return
    if not scanned.mnemonic:
        if scanned.rest:
            raise _LineError(
                scanned.rest_col + 1,
                f"cannot read {scanned.rest!r}",
                "an instruction, a label or a directive",
            )
        return
    upper = scanned.mnemonic.upper()
    if upper in _SECTION_WORDS or upper in _SECTION_SHORT or upper in _EXTERN_WORDS:
        return
    if upper in _GLOBAL_WORDS:
        entry = _IDENT.search(scanned.rest)
        if entry and builder.entry_name is None:
            builder.entry_name = entry.group()
            builder.entry_site = (number, scanned.rest_col + entry.start() + 1)
        return
    tokens = _split_operands(scanned.rest, scanned.rest_col)
    operands = tuple(_operand(token, column) for token, column in tokens)
    text = _strip_comment(line)[scanned.mnemonic_col :].strip()
    opcode = MNEMONICS.get(upper)
    if opcode is None:
        builder.unknown.append(
            UnknownInstruction(scanned.mnemonic, number, scanned.mnemonic_col + 1, text)
        )
        return
    builder.instructions.append(
        Instruction(
            opcode,
            operands,
            number,
            scanned.mnemonic_col + 1,
            text,
            tuple(column + 1 for _, column in tokens),
        )
    )


def parse(text: str) -> Program | PlainAnswer:
    """Parse a model's reply.

    Args:
        text: The reply as the model wrote it.

    Returns:
        A :class:`Program`, or a :class:`PlainAnswer` when the reply holds no instruction.

    Raises:
        AsmSyntaxError: Some code line cannot be read; every such line is listed.
        EmptyReply: The reply is empty, blank or only thinking: neither a plan nor an answer.
    """
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    if not normalised.strip():
        raise EmptyReply()
    if len(normalised) < _LARGE_REPLY:
        return _parse(normalised)
    # A large reply builds tens of thousands of small objects that hold no reference cycles;
    # the cyclic collector, walking them again and again as they pile up, made parsing grow
    # faster than the reply (22x the time for 10x the text). Reference counting frees them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(normalised)
    finally:
        if collecting:
            gc.enable()


_LARGE_REPLY = 64 * 1024


def _parse(normalised: str) -> Program | PlainAnswer:
    source_lines = tuple(normalised.split("\n"))
    visible = _remove_thinking(normalised).split("\n")
    builder = _Builder(source_lines)
    for index in _code_line_numbers(visible):
        try:
            _read_line(builder, index + 1, visible[index])
        except _LineError as exc:
            builder.error(index + 1, exc.column, exc.message, exc.expected)
    if builder.errors:
        raise AsmSyntaxError(tuple(d for d, _ in builder.errors), builder.errors[0][1])
    if not builder.instructions and not builder.unknown:
        answer = _remove_thinking(normalised).strip()
        if not answer:  # only thinking: nothing was said to the user
            raise EmptyReply()
        return PlainAnswer(answer)
    entry = 0
    if builder.entry_name is not None:
        entry = builder.labels.get(builder.entry_name.lower(), 0)
    return Program(
        instructions=tuple(builder.instructions),
        labels=builder.labels,
        data=builder.data,
        entry=entry,
        source_lines=source_lines,
        unknown=tuple(builder.unknown),
        label_lines={k: tuple(v) for k, v in builder.label_lines.items()},
        label_names=builder.label_names,
        entry_name=builder.entry_name,
        entry_site=builder.entry_site,
    )
