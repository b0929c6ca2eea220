"""What a command's outcome looks like: its exit code (:data:`EXIT_CODES`), the shape of
``--json`` output (:data:`JSON_SCHEMA`), and the :class:`Report` that writes it, as text for
a person or as one JSON object."""

from __future__ import annotations

import json
import math
from typing import Any, TextIO

from pydantic_core import to_jsonable_python

from llassembly import Diagnostic

EXIT_OK, EXIT_PLAN, EXIT_RUN, EXIT_USAGE = 0, 1, 2, 3

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success: the plan is valid (check), ran to its end (run), or the prompt was printed",
    EXIT_PLAN: "the plan has problems (syntax, verifier) or holds no instruction",
    EXIT_RUN: "the run stopped: a tool raised, a budget ran out, a run-time error",
    EXIT_USAGE: "the command was used wrongly: arguments, --tools, a file it reads, no demo",
}
"""Every exit code of ``llassembly`` and what it means (the demo's are the same)."""

JSON_SCHEMA = """\
JSON output (--json): one object on standard output, whatever happens
(what the tools print goes to standard error).
  Always:    "command" ("check" | "run" | "prompt" | null), "status", "exit_code"
  status "ok" (check, exit 0): "instructions", "tool_call_sites", and the
             plan summary's fields: "tools", "min_tool_calls", "max_tool_calls",
             "max_instructions", "ends", "complete", "budgets", "within_budgets"
             (null = unbounded)
  status "ok" (prompt, exit 0): "system_prompt" (exactly what the planner model
             gets), "tokens" (its estimate), "tools" (the names plans may call)
  status "finished" (run, exit 0): "answer" (the SAY lines, "" if none),
             "returned" (what a top-level RET returned in EAX/XMM0, or null),
             "calls", "registers" (non-zero ones), "stack", "instructions_executed",
             "tool_calls"
  status "rejected" (exit 1): "problems": [{"line", "column", "message", "source"}]
  status "plain_answer" (exit 1): "text" (the reply holds no instruction)
  status "stopped" (run, exit 2): "error": {"type", "message", "line", "source"},
             "calls" made before it, "answer" said before it
  status "usage_error" (exit 3): "error": {"type", "message"} (also run of a
             plan calling an async-only tool: nothing has run)
  A call is {"line", "tool", "args", "result"}: JSON values (a record, a
  pydantic model or dataclass, is an object of its fields); a value JSON
  cannot hold (an object of no JSON form, an int too long to print) is its
  text. Registers, stack and returned hold the plan's numbers and strings.
  The output is ASCII (other characters as \\uXXXX
  escapes); a lone surrogate (half a character) is written as U+FFFD."""
"""The shape of ``--json`` output, as shown in ``llassembly --help``."""


def show(value: Any) -> str:
    """``repr`` that survives ints too long for Python to turn into text."""
    try:
        return repr(value)
    except Exception:  # a huge int (ValueError), or a tool result with a broken __repr__
        if isinstance(value, int):
            return f"<int of {value.bit_length()} bits>"
        return f"<unprintable {type(value).__name__}>"


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate (half a character: an emoji a web service cut in
    two) replaced by U+FFFD; a pair of surrogates becomes the character it spells. A lone
    surrogate is no character: UTF-8 cannot encode it, and JSON readers differ on it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def printable(text: str, stream: TextIO) -> str:
    """``text`` as ``stream`` can write it: what its encoding cannot hold (a lone surrogate
    always, an accented letter on an ASCII console) as a Python escape, as ``repr`` shows it."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # a stream that names an encoding Python does not know
        return text.encode("ascii", "backslashreplace").decode("ascii")
    return text


def plain(value: Any) -> Any:
    """``value`` as a JSON value: numbers, well-formed strings, arrays, objects (a record, a
    pydantic model or a dataclass, as its fields, as pydantic writes them); anything else, and
    data nested too deeply, as its text."""
    try:
        return _json_value(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deeply to show>"


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return well_formed(str.__str__(value))
    if isinstance(value, int):
        try:
            str(value)  # Python refuses to print ints of more than 4300 digits
        except ValueError:
            return show(value)
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {
            well_formed(k if type(k) is str else show(k)): _json_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_value(v) for v in value]
    try:  # a record, an enum, a date...: the JSON data pydantic writes for it
        data = to_jsonable_python(value, fallback=show)
    except Exception:  # bytes that are no UTF-8, a model whose own serializer raises
        return well_formed(show(value))
    return _json_value(data)


class Report:
    """Where a command's outcome goes: text for a person, or one JSON object (``--json``)."""

    def __init__(self, out: TextIO, *, as_json: bool, command: str | None) -> None:
        self.out = out
        self.as_json = as_json
        self.command = command

    def text(self, line: str, end: str = "\n") -> None:
        """A line for a person (see :func:`printable`); nothing under ``--json``."""
        if not self.as_json:
            self.out.write(printable(line + end, self.out))

    def json(self, status: str, code: int, **fields: Any) -> int:
        """The one JSON object under ``--json``; return the exit code either way.

        The object is ASCII (any other character as a ``\\uXXXX`` escape), so no stream's
        encoding can fail on it, and its strings are well formed (:func:`well_formed`, the
        messages and plan lines too), so every JSON reader reads the same text.
        """
        if self.as_json:
            data = {"command": self.command, "status": status, "exit_code": code, **fields}
            self.out.write(json.dumps(plain(data), indent=2, ensure_ascii=True) + "\n")
        return code


def problem(diagnostic: Diagnostic) -> dict[str, Any]:
    return {
        "line": diagnostic.line,
        "column": diagnostic.column,
        "message": diagnostic.message,
        "source": diagnostic.source,
    }
