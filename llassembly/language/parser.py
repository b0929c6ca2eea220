"""Parser: a model's reply to a :class:`~llassembly.language.program.Program` (or a plain answer).

Real models wrap the code in fences, add prose and ``<think>`` text, mix case, put labels and
instructions on one line and write data sections. This module accepts what is unambiguous and
reports the rest with line, column and what was expected (see ``docs/language.md``). It reads
the code lines (told from fences, prose and thinking; each read by
:mod:`llassembly.language.scan`), then the data labels (each row bounded before it is built, so
a short reply cannot make the parser build megabytes), then what the operands mean, once every
label of the plan is known (:func:`_settled`).

Example:
    >>> program = parse("```asm\\nloop: INC R1\\nCMP R1, 3\\nJL loop\\n```")
    >>> [str(i) for i in program.instructions]
    ['INC R1', 'CMP R1, 3', 'JL loop']
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import re
from collections.abc import Sequence, Set
from typing import Any, cast

from llassembly.errors import AsmSyntaxError, Diagnostic, EmptyReply, PlanRejected, clip
from llassembly.language.instructions import MNEMONICS, OPCODE_INFO, Opcode
from llassembly.language.limits import (
    MAX_DATA_TEXT_CHARS,
    MAX_MEMORY_CELLS,
    MAX_PLAN_PLACEHOLDERS,
    MAX_REPEAT,
    MAX_REPLY_LINES,
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
    Template,
    UnknownInstruction,
    Value,
    row_json,
)
from llassembly.language.scan import (
    DATA_SIZES,
    EXTERN_WORDS,
    GLOBAL_WORDS,
    IDENT,
    NO_VALUE_WORDS,
    RESERVE_SIZES,
    SECTION_SHORT,
    SECTION_WORDS,
    LineError,
    Scanned,
    line_kind,
    operands_of,
    read_number,
    read_operand,
    reserved_name,
    scan,
    split_operands,
    strip_comment,
)
from llassembly.language.templates import template_operand

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(?:```|~~~)\s*([\w+#.-]*)")
# Fence tags that make a block code even when no line in it reads as a valid instruction.
_ASM_TAGS = frozenset({"asm", "nasm", "masm", "gas", "fasm", "yasm", "tasm", "x86asm", "x86"})
_ASM_TAGS |= {"assembly", "assembler", "s", "llasm", "llassembly"}


# -- choosing the code lines -------------------------------------------------------------------


def _remove_thinking(text: str) -> str:
    """Blank out ``<think>`` blocks (and everything before a lone ``</think>``), keeping lines.

    A ``<think>`` written inside a code comment (``CALL withdraw ; see <think> notes``) is part
    of the comment, not the start of a thinking block: tags are searched for in a copy of
    ``text`` whose code lines have their comments blanked (same length, same lines).
    """
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


def _is_code_block(tag: str, lines: list[str]) -> bool:
    """Whether a fenced block holds the program.

    An assembly tag is enough; an untagged block needs one line that starts with a mnemonic (so a
    broken line is reported rather than the reply taken as prose); any other language needs a
    line that reads as an instruction.
    """
    kinds = ("instruction",) if tag else ("instruction", "mnemonic")
    return tag in _ASM_TAGS or any(line_kind(line) in kinds for line in lines)


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
    chosen = [
        i for tag, block in blocks if _is_code_block(tag, [lines[j] for j in block]) for i in block
    ]
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


def _no_constant(name: str) -> Any:
    """JSON in data holds finite numbers only (no ``NaN``, ``Infinity``)."""
    raise ValueError(f"{name} is not a finite number")


def _data_parts(rest: str, column: int, most: int) -> list[Imm | Name]:
    """The values of a data definition: literals, one JSON text, or names of other labels.

    More than ``most`` values are refused before they are read.
    """
    text = rest.strip()
    if not text:
        raise LineError(column + 1, "data definition without a value", "a string, number or JSON")
    if text[0] in "{[":
        start = column + len(rest) - len(rest.lstrip())
        try:
            loaded = json.loads(text, parse_constant=_no_constant)
            dumped = json.dumps(loaded, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            return [Imm(dumped)]
        except (ValueError, RecursionError) as exc:
            detail = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
            message = f"invalid JSON in data: {detail[:80]}"
            raise LineError(start + 1, message, "valid JSON") from None
    tokens = split_operands(rest, column, most)
    if len(tokens) > most:
        raise _too_many(column)
    parts = [read_operand(tok, col) for tok, col in tokens]
    if any(not isinstance(p, Imm | Name) for p in parts):
        raise LineError(
            column + 1,
            "data may only hold strings, numbers, JSON or names of other data labels",
            "a literal value",
        )
    return [p for p in parts if isinstance(p, Imm | Name)]


def _data_cells(parts: Sequence[Imm | Name], column: int, limit: int) -> tuple[Value, list[Value]]:
    """The value a bare label reads and the label's cells, from literal parts.

    One value is one cell. Strings with character codes after them are one string (a final
    ``0`` ends it). Several numbers are one cell each, and the label reads as their JSON list.
    Text longer than ``limit`` is refused before it is built.
    """
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


def _repeat(rest: str, column: int) -> tuple[int, str, str, int]:
    """``5 dd 0`` after ``times``: the count, the data word and the values."""
    words = _TIMES.match(rest)
    if words is None or words[2].upper() not in DATA_SIZES:
        raise LineError(column + 1, "cannot read this times line", "times COUNT dd VALUE")
    if words[2].upper() == "EQU":
        raise LineError(
            column + 1,
            "times cannot repeat an equ constant",
            "times COUNT dd VALUE (a row), or NAME equ VALUE (one constant)",
        )
    return _count(words[1], "times", column), words[2].upper(), words[3], column + words.start(3)


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
    if kind == "value" and isinstance(operand, Name) and operand.name.upper() in NO_VALUE_WORDS:
        return Imm(NONE)  # no label is called so (see reserved_name)
    if isinstance(operand, Template):
        fills = tuple(_settled(fill, "value", names) for fill in operand.fills)
        return dataclasses.replace(operand, fills=fills)  # type: ignore[arg-type]
    return operand


_READ_ONLY_SECTIONS = frozenset({"rodata", "rdata", "const"})


def _parse(normalised: str) -> Program | PlainAnswer:
    """:func:`parse` of a reply whose line breaks are ``\\n`` (its stages: see the module doc)."""
    source_lines = tuple(normalised.split("\n", MAX_REPLY_LINES))
    if len(source_lines) > MAX_REPLY_LINES:
        # Every line costs work in each stage; no plan needs this many (the checker refuses
        # more than MAX_PLAN_INSTRUCTIONS), and a reply is refused before any of it is done.
        message = f"the reply has more than {MAX_REPLY_LINES} lines; a plan needs far fewer"
        too_many = Diagnostic(MAX_REPLY_LINES + 1, 1, message, source_lines[-1].split("\n", 1)[0])
        raise AsmSyntaxError((too_many,), "a shorter plan: loops and subroutines, not every step")
    shown = _remove_thinking(normalised)
    visible = shown.split("\n")
    code = _code_line_numbers(visible)
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
    # rows naming other labels (cities dd paris, oslo), filled in once all are read
    pending_rows: list[tuple[str, list[Imm | Name], int, int]] = []
    errors: list[tuple[Diagnostic, str]] = []  # each problem, with what was expected there

    def error(line: int, problem: LineError) -> None:
        diagnostic = Diagnostic(line, problem.column, problem.message, source_lines[line - 1])
        errors.append((diagnostic, problem.expected))

    def claim(count: int, column: int) -> None:
        """Count a row against the memory budget before building it, so a short reply cannot
        make the parser build millions of cells (``times 65536 dd 1, 2, ...``, many ``resd``)."""
        nonlocal cells
        cells += count
        if cells > MAX_MEMORY_CELLS:
            raise _too_many(column)

    def define(number: int, scanned: Scanned) -> None:
        """A data definition: its bare value in ``data``, its cells in ``memory``."""
        name, word = scanned.data_name, scanned.mnemonic.upper()
        rest, column = scanned.rest, scanned.rest_col
        problem = reserved_name(name, "data label", scanned.mnemonic_col + 1)
        if problem is not None:
            raise problem
        key = name.lower()
        if key in data:
            message = f"data label {name!r} is defined twice"
            error(number, LineError(scanned.mnemonic_col + 1, message, "a new name"))
        repeat = 1
        if word == "TIMES":
            repeat, word, rest, column = _repeat(rest, column)
        if word in RESERVE_SIZES:
            count = _count(rest.strip() or "0", word, column)
            claim(count, column)
            size, parts = RESERVE_SIZES[word], [cast("Imm | Name", Imm(0))] * count
        else:
            # Values past the budget are refused before they are read (an equ constant is no
            # memory, but holds no more values than a row may).
            room = MAX_MEMORY_CELLS if word == "EQU" else (MAX_MEMORY_CELLS - cells) // repeat
            values = _data_parts(rest, column, room)
            if word != "EQU":
                claim(len(values) * repeat, column)
            size, parts = DATA_SIZES[word], values * repeat
        writable = not read_only and word != "EQU"
        if any(isinstance(p, Name) for p in parts):
            data[key] = ""
            pending_rows.append((key, parts, number, column))
            memory[key] = MemoryLabel((), size, writable, number)
            return
        # Text written out in the plan is kept whatever its length; text built from it
        # (repeated by times) may not grow past the limit.
        limit = max(MAX_DATA_TEXT_CHARS, len(rest))
        value, row = _data_cells(parts, column, limit)
        data[key] = value
        if word != "EQU":
            memory[key] = MemoryLabel(tuple(row), size, writable, number)

    for number in (index + 1 for index in code):
        scanned = scan(visible[number - 1])
        for name, column in scanned.labels:
            problem = reserved_name(name, "label", column + 1)
            if problem is not None:
                error(number, problem)
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
            elif upper in SECTION_WORDS or upper in SECTION_SHORT:
                section = (scanned.rest.split() or [""])[0] if upper in SECTION_WORDS else upper
                read_only = section.lower().lstrip(".") in _READ_ONLY_SECTIONS
            elif upper in GLOBAL_WORDS:
                entry = IDENT.search(scanned.rest)
                if entry and entry_name is None:
                    entry_name = entry.group()
                    entry_site = (number, scanned.rest_col + entry.start() + 1)
            elif upper not in EXTERN_WORDS:
                operands, columns = operands_of(scanned)
                text = scanned.code[scanned.mnemonic_col :].strip()
                opcode = MNEMONICS.get(upper)
                column = scanned.mnemonic_col + 1
                if opcode is None:
                    unknown.append(UnknownInstruction(scanned.mnemonic, number, column, text))
                else:
                    instructions.append(
                        Instruction(opcode, operands, number, column, text, columns)
                    )
        except LineError as exc:
            error(number, exc)

    # Fill in the rows that name other labels: each named label stands for its value.
    rows = {key for key, *_ in pending_rows}
    for key, parts, number, column in pending_rows:
        found: list[Value] = []
        for part in parts:
            value = part.value if isinstance(part, Imm) else data.get(part.name.lower())
            if isinstance(part, Name) and (value is None or part.name.lower() in rows):
                message = f"{clip(part.name)!r} in this data row is no data label with a value"
                expected = "numbers, strings or names of data labels defined with values"
                error(number, LineError(column + 1, message, expected))
                value = 0
            found.append(value)
        listed = row_json(found, MAX_DATA_TEXT_CHARS)
        if listed is None:
            error(number, _too_long(column, _ROW_TEXT, MAX_DATA_TEXT_CHARS))
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
        kinds = info.accepts(len(ins.operands)) or info.operands
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
                operand, wrong = template_operand(operand, columns[at], line, data if say else None)
                problems += wrong
            if isinstance(operand, Template):
                placeholders += len(operand.fills)
            written = operand.base if isinstance(operand, Path) else operand
            if kind == "reg" and isinstance(written, Name):  # MOV none, 3: no variable
                problems += filter(None, [reserved_name(written.name, "variable", columns[at])])
            settled.append(_settled(operand, kind, names))
        for problem in problems:
            error(ins.line, problem)
        said = settled[0] if say and settled else None
        if isinstance(said, Template):  # its placeholders are operands of their own
            operands, columns = (ins.operands[0], *said.fills), (columns[0], *said.columns)
            instructions[position] = dataclasses.replace(
                ins, operands=operands, operand_columns=columns
            )
        elif not say and tuple(settled) != ins.operands:
            instructions[position] = dataclasses.replace(ins, operands=tuple(settled))
        if placeholders > MAX_PLAN_PLACEHOLDERS:
            message = (
                f"the texts of this plan hold more than the {MAX_PLAN_PLACEHOLDERS} "
                "placeholders a plan may have"
            )
            expected = "fewer placeholders: SAY in a loop, or say a summary"
            error(ins.line, LineError(ins.column, message, expected))
            break

    if errors:
        raise AsmSyntaxError(tuple(d for d, _ in errors), errors[0][1])
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
        code_lines=tuple(index + 1 for index in code),
    )


def parse(text: str) -> Program | PlainAnswer:
    """Parse a model's reply.

    The result is one of two types: narrow it with ``isinstance`` before using it as a
    program (a type checker requires it), or call :func:`parse_program` when only a program
    will do.

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
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    if not normalised.strip():
        raise EmptyReply()
    # A large reply builds tens of thousands of small objects that hold no reference cycles;
    # the cyclic collector, walking them again and again as they pile up, made parsing grow
    # faster than the reply (22x the time for 10x the text). Reference counting frees them.
    collecting = gc.isenabled() and len(normalised) >= _LARGE_REPLY
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
    """Refuse a :class:`PlainAnswer`'s ``text`` that is no answer in words: a tool call in a
    model's markup, or, with little prose beside it, code (fenced or not), a JSON object or
    list that starts a line and ends one, a call written as code (``get_weather(city="Paris")``).

    Raises:
        NotWords: Saying what the reply holds and what to write instead.
    """
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


_LARGE_REPLY = 64 * 1024
