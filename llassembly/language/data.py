"""Reading a plan's data labels: ``name db "text", 0``, ``row dd 1, 2, 3``, ``times``, ``resX``,
``equ`` and rows naming other labels (see ``docs/language.md``, *Data and memory*).

Every row is bounded before it is built: its cells count against :data:`MAX_MEMORY_CELLS` as
they are read, and text made of several values (a string repeated by ``times``, the JSON list a
row reads as, a row naming other labels) may not grow past :data:`MAX_DATA_TEXT_CHARS`
characters beyond what the plan writes out, so a short reply cannot make the parser build
megabytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from llassembly.language.limits import MAX_DATA_TEXT_CHARS, MAX_MEMORY_CELLS
from llassembly.language.opcodes import register_index
from llassembly.language.program import Imm, MemoryLabel, Name, Value
from llassembly.language.scan import (
    DATA_SIZES,
    RESERVE_SIZES,
    LineError,
    Scanned,
    clip,
    read_number,
    read_operand,
    split_operands,
)

__all__ = ["MAX_REPEAT", "DataSection", "row_json"]

MAX_REPEAT = 1 << 16
"""The largest ``times`` or ``resX`` count."""

Report = Callable[[int, int, str, str], None]
"""``(line, column, message, expected)``: how a problem that does not stop the line is kept."""

_COUNT = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|\d+)\Z")
_TIMES_HEAD = re.compile(r"\s*\S+\s+\S+\s+")  # "5 dd " before the values of a times line


def row_json(cells: Sequence[Value], limit: int) -> str | None:
    """The JSON list of ``cells`` (what a row read whole gives), or ``None`` when it would be
    longer than ``limit`` characters.

    The size is bounded from below before anything is built (each string is at least its
    length plus its quotes), so a row of huge strings is refused without building its text.
    """
    least = len(cells) + 1
    for cell in cells:
        least += len(cell) + 2 if type(cell) is str else 1
    if least > limit:
        return None
    text = json.dumps(list(cells), separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else None


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
            raise LineError(
                start + 1, f"invalid JSON in data: {detail[:80]}", "valid JSON"
            ) from None
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
        out = [values[0]]
        size = len(values[0])
        for position, value in enumerate(values[1:], start=1):
            if isinstance(value, str):
                out.append(value)
                size += len(value)
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
                size += 1
            else:
                raise LineError(
                    column + 1, f"cannot append {clip(repr(value))} to a string", "a character code"
                )
            if size > limit:
                raise _too_long(column, "this string", limit)
        text = "".join(out)
        return text, [text]
    listed = row_json(values, limit)
    if listed is None:
        raise _too_long(column, "this row read whole (the JSON list of its cells)", limit)
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
    words = rest.split(None, 2)
    if len(words) < 3 or words[1].upper() not in DATA_SIZES:
        raise LineError(column + 1, "cannot read this times line", "times COUNT dd VALUE")
    if words[1].upper() == "EQU":
        raise LineError(
            column + 1,
            "times cannot repeat an equ constant",
            "times COUNT dd VALUE (a row), or NAME equ VALUE (one constant)",
        )
    count = _count(words[0], "times", column)
    head = _TIMES_HEAD.match(rest)
    value_col = column + (head.end() if head is not None else 0)
    return count, words[1].upper(), words[2], value_col


@dataclass
class DataSection:
    """The data labels of one plan as the parser reads them, line by line.

    Attributes:
        data: Each label (lower-cased) to the value it reads as bare.
        memory: Each label but an ``equ`` constant to its cells.
        read_only: Whether the current section is read-only (``.rodata``).
        cells: Cells of the rows read so far (see :data:`MAX_MEMORY_CELLS`).
    """

    data: dict[str, Value] = field(default_factory=dict)
    memory: dict[str, MemoryLabel] = field(default_factory=dict)
    read_only: bool = False
    cells: int = 0
    # Rows naming other labels (``cities dd paris, oslo``): resolved once all are read.
    pending_rows: list[tuple[str, list[Imm | Name], int, int]] = field(default_factory=list)

    def define(self, number: int, scanned: Scanned, report: Report) -> None:
        """A data definition: its bare value in :attr:`data`, its cells in :attr:`memory`.

        Raises:
            LineError: The line cannot be read, or it holds more than its budget.
        """
        name, word = scanned.data_name, scanned.mnemonic.upper()
        rest, column = scanned.rest, scanned.rest_col
        if register_index(name) is not None:
            raise LineError(
                scanned.mnemonic_col + 1,
                f"data label {name!r} has the name of a register: {name} in an operand always "
                f"reads the register, never this data; rename the data label (e.g. {name}_data)",
                "a data label name that is not a register (R0..R100, EAX..EBP, RAX..RBP)",
            )
        key = name.lower()
        if key in self.data:
            message = f"data label {name!r} is defined twice"
            report(number, scanned.mnemonic_col + 1, message, "a new name")
        repeat = 1
        if word == "TIMES":
            repeat, word, rest, column = _repeat(rest, column)
        if word in RESERVE_SIZES:
            count = _count(rest.strip() or "0", word, column)
            self._claim(count, column)
            size, parts = RESERVE_SIZES[word], [cast("Imm | Name", Imm(0))] * count
        else:
            # Values past the budget are refused before they are read (an equ constant is no
            # memory, but holds no more values than a row may).
            room = MAX_MEMORY_CELLS if word == "EQU" else (MAX_MEMORY_CELLS - self.cells) // repeat
            values = _data_parts(rest, column, room)
            if word != "EQU":
                self._claim(len(values) * repeat, column)
            size, parts = DATA_SIZES[word], values * repeat
        writable = not self.read_only and word != "EQU"
        if any(isinstance(p, Name) for p in parts):
            self.data[key] = ""
            self.pending_rows.append((key, parts, number, column))
            self.memory[key] = MemoryLabel((), size, writable, number)
            return
        # Text written out in the plan is kept whatever its length; text built from it
        # (repeated by times) may not grow past the limit.
        limit = max(MAX_DATA_TEXT_CHARS, len(rest))
        value, cells = _data_cells(parts, column, limit)
        self.data[key] = value
        if word != "EQU":
            self.memory[key] = MemoryLabel(tuple(cells), size, writable, number)

    def _claim(self, cells: int, column: int) -> None:
        """Count a row against the memory budget before building it, so a short reply cannot
        make the parser build millions of cells (``times 65536 dd 1, 2, ...``, many ``resd``)."""
        self.cells += cells
        if self.cells > MAX_MEMORY_CELLS:
            raise _too_many(column)

    def resolve(self, report: Report) -> None:
        """Fill in rows that name other labels: each named label stands for its value."""
        rows = {key for key, *_ in self.pending_rows}
        for key, parts, number, column in self.pending_rows:
            cells: list[Value] = []
            for part in parts:
                if isinstance(part, Imm):
                    cells.append(part.value)
                    continue
                found = self.data.get(part.name.lower())
                if found is None or part.name.lower() in rows:
                    report(
                        number,
                        column + 1,
                        f"{clip(part.name)!r} in this data row is no data label with a value",
                        "numbers, strings or names of data labels defined with values",
                    )
                    found = 0
                cells.append(found)
            text = row_json(cells, MAX_DATA_TEXT_CHARS)
            if text is None:
                error = _too_long(
                    column, "this row read whole (the JSON list of its cells)", MAX_DATA_TEXT_CHARS
                )
                report(number, error.column, error.message, error.expected)
                text = ""
            label = self.memory[key]
            self.memory[key] = MemoryLabel(tuple(cells), label.size, label.writable, label.line)
            self.data[key] = text
