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

import gc
import re
from dataclasses import dataclass, field

from llassembly.errors import (
    AsmSyntaxError,
    Diagnostic,
    EmptyReply,
)
from llassembly.language.data import DataSection
from llassembly.language.instructions import (
    MNEMONICS,
    OPCODE_INFO,
)
from llassembly.language.limits import MAX_PLAN_PLACEHOLDERS, MAX_REPLY_LINES
from llassembly.language.program import (
    Instruction,
    PlainAnswer,
    Program,
    UnknownInstruction,
)
from llassembly.language.scan import (
    EXTERN_WORDS,
    GLOBAL_WORDS,
    IDENT,
    SECTION_SHORT,
    SECTION_WORDS,
    LineError,
    clip,
    has_instruction,
    looks_like_code,
    names_instruction,
    read_operand,
    scan,
    split_operands,
    strip_comment,
)
from llassembly.language.settle import placeholders, settle

__all__ = ["parse", "parse_program"]

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
_MAX_OPERANDS = max(len(info.operands) for info in OPCODE_INFO.values())


@dataclass
class _Builder:
    lines: tuple[str, ...]
    instructions: list[Instruction] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    label_lines: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    label_names: dict[str, str] = field(default_factory=dict)
    section: DataSection = field(default_factory=DataSection)
    unknown: list[UnknownInstruction] = field(default_factory=list)
    errors: list[tuple[Diagnostic, str]] = field(default_factory=list)
    entry_name: str | None = None
    entry_site: tuple[int, int] = (0, 0)
    placeholders: int = 0  # of all SAY texts so far (see MAX_PLAN_PLACEHOLDERS)

    def error(self, line: int, column: int, message: str, expected: str) -> None:
        self.errors.append((Diagnostic(line, column, message, self.lines[line - 1]), expected))

    def label(self, name: str, line: int, column: int) -> None:
        key = name.lower()
        self.label_lines.setdefault(key, []).append((line, column))
        if key not in self.labels:
            self.labels[key] = len(self.instructions)
            self.label_names[key] = name


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
        code = strip_comment(line)
        if len(code) == len(line):
            continue
        if (code.strip() and has_instruction(code)) or line.lstrip().startswith((";", "//")):
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
    """Spaces for every character of ``text`` but its line breaks."""
    return "\n".join(" " * len(line) for line in text.split("\n"))


def _is_code_block(tag: str, lines: list[str]) -> bool:
    """Whether a fenced block holds the program.

    An assembly tag is enough; an untagged block needs one line that starts with a mnemonic (so a
    broken line is reported rather than the reply taken as prose); any other language needs a
    line that reads as an instruction.
    """
    if tag in _ASM_TAGS:
        return True
    if not tag:
        return any(names_instruction(line) for line in lines)
    return any(has_instruction(line) for line in lines)


def _code_line_numbers(lines: list[str]) -> list[int]:
    """Return the 0-based indexes of the lines that hold the program."""
    blocks: list[tuple[str, list[int]]] = []
    outside: list[int] = []
    current: list[int] | None = None
    tag = ""
    for index, line in enumerate(lines):
        fence = _FENCE.match(line) if "```" in line or "~~~" in line else None
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
    code = [i for i in outside if lines[i] and not lines[i].isspace() and looks_like_code(lines[i])]
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
        scanned = scan(line)
        word = scanned.mnemonic
        if not (2 <= len(word) <= 7 and word.isalpha() and word.isupper()) or scanned.data_name:
            return False
        tokens = split_operands(scanned.rest, scanned.rest_col)
        for token, column in tokens:
            read_operand(token, column)
    except LineError:
        return False
    return 1 <= len(tokens) <= _MAX_OPERANDS and word not in MNEMONICS


# ---------------------------------------------------------------------------------------------
# Reading the chosen lines


def _read_line(builder: _Builder, number: int, line: str) -> None:
    scanned = scan(line)
    for name, column in scanned.labels:
        builder.label(name, number, column + 1)
    if scanned.data_name:
        builder.section.define(number, scanned, builder.error)
        return
    if not scanned.mnemonic:
        if scanned.rest:
            raise LineError(
                scanned.rest_col + 1,
                f"cannot read {clip(scanned.rest, 60)!r}",
                "an instruction, a label or a directive",
            )
        return
    upper = scanned.mnemonic.upper()
    if upper in SECTION_WORDS or upper in SECTION_SHORT:
        section = (scanned.rest.split() or [""])[0] if upper in SECTION_WORDS else upper
        builder.section.read_only = section.lower().lstrip(".") in _READ_ONLY_SECTIONS
        return
    if upper in EXTERN_WORDS:
        return
    if upper in GLOBAL_WORDS:
        entry = IDENT.search(scanned.rest)
        if entry and builder.entry_name is None:
            builder.entry_name = entry.group()
            builder.entry_site = (number, scanned.rest_col + entry.start() + 1)
        return
    tokens = split_operands(scanned.rest, scanned.rest_col) if scanned.rest else []
    operands = tuple([read_operand(token, column) for token, column in tokens])
    text = scanned.code[scanned.mnemonic_col :].strip()
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
            tuple([column + 1 for _, column in tokens]),
        )
    )


def _fill_answers(builder: _Builder) -> None:
    """Settle each instruction's operands (:func:`~llassembly.language.settle.settled`): the
    placeholders of each ``SAY`` and of every other text, and what each name means; done once
    every data label is read, since its text may be defined after the code. All the texts
    together hold at most :data:`MAX_PLAN_PLACEHOLDERS` placeholders."""
    data = builder.section.data
    names = set(data) | set(builder.labels)
    for position, ins in enumerate(builder.instructions):
        settled, problems = settle(ins, data, names, builder.lines[ins.line - 1])
        builder.instructions[position] = settled
        for problem in problems:
            builder.error(ins.line, problem.column, problem.message, problem.expected)
        builder.placeholders += placeholders(settled)
        if builder.placeholders > MAX_PLAN_PLACEHOLDERS:
            message = (
                f"the texts of this plan hold more than the {MAX_PLAN_PLACEHOLDERS} "
                "placeholders a plan may have"
            )
            expected = "fewer placeholders: SAY in a loop, or say a summary"
            builder.error(ins.line, ins.column, message, expected)
            return


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


def parse_program(text: str) -> Program:
    """Parse a reply that must hold a program: :func:`parse` without the plain answer.

    Example:
        >>> program = parse_program("PUSH 1\\nPOP R1")
        >>> [str(i) for i in program.instructions]
        ['PUSH 1', 'POP R1']

    Args:
        text: The reply as the model wrote it.

    Returns:
        The :class:`Program`.

    Raises:
        AsmSyntaxError: Some code line cannot be read, or the reply holds no instruction (it
            is an answer in words: line 1, asking for the program).
        EmptyReply: The reply is empty, blank or only thinking.
    """
    parsed = parse(text)
    if isinstance(parsed, Program):
        return parsed
    first = text.replace("\r\n", "\n").replace("\r", "\n").split("\n", 1)[0]
    problem = Diagnostic(
        1,
        1,
        "the reply holds no instruction, only words: write the program in one ```asm block",
        first,
    )
    raise AsmSyntaxError((problem,), "a program")


_LARGE_REPLY = 64 * 1024
_READ_ONLY_SECTIONS = frozenset({"rodata", "rdata", "const"})


def _parse(normalised: str) -> Program | PlainAnswer:
    source_lines = tuple(normalised.split("\n", MAX_REPLY_LINES))
    if len(source_lines) > MAX_REPLY_LINES:
        # Every line costs work in each stage; no plan needs this many (the checker refuses
        # more than MAX_PLAN_INSTRUCTIONS), and a reply is refused before any of it is done.
        first_over = source_lines[-1].split("\n", 1)[0]
        problem = Diagnostic(
            MAX_REPLY_LINES + 1,
            1,
            f"the reply has more than {MAX_REPLY_LINES} lines; a plan needs far fewer",
            first_over,
        )
        raise AsmSyntaxError((problem,), "a shorter plan: loops and subroutines, not every step")
    visible = _remove_thinking(normalised).split("\n")
    builder = _Builder(source_lines)
    for index in _code_line_numbers(visible):
        line = visible[index]
        if not line or line.isspace():
            continue
        try:
            _read_line(builder, index + 1, line)
        except LineError as exc:
            builder.error(index + 1, exc.column, exc.message, exc.expected)
    builder.section.resolve(builder.error)
    _fill_answers(builder)
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
        data=builder.section.data,
        entry=entry,
        source_lines=source_lines,
        unknown=tuple(builder.unknown),
        label_lines={k: tuple(v) for k, v in builder.label_lines.items()},
        label_names=builder.label_names,
        entry_name=builder.entry_name,
        entry_site=builder.entry_site,
        memory=builder.section.memory,
    )
