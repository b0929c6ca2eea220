"""Queries as the analysis sees them: a plan reading prose with a model (``CALL query_text``).

A query asks a model with no tools to answer one question about a text with a value of an
*answer shape* the plan writes (``docs/queries.md``): :func:`parse_answer_shape` reads it,
:func:`query_sites` finds each query's shape before the run (so the type check follows its
answer as it follows a tool's typed result), and :func:`query_sources` is the one place that
says where an answer derives from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from llassembly.analysis.cfg import ControlFlow, Layout
from llassembly.analysis.constants import COPIES_ONLY, UNKNOWN, Abstract, constants, join
from llassembly.analysis.paths import paths_of
from llassembly.analysis.shapes import INT, NUMBER, TEXT, Shape
from llassembly.language.limits import MAX_ANSWER_DEPTH, MAX_ANSWER_FIELDS, MAX_ANSWER_SHAPE_CHARS

QUERY_TOOL: Final = "query_text"
"""The name a plan calls a query by."""
QUERY_PARAMS: Final = ("text", "question", "shape")
"""A query's arguments, in push order."""
QUERY_SOURCE: Final = QUERY_TOOL
"""The source that marks a value a model produced: the query's name, as a tool's result has
the tool's (see :func:`query_sources`)."""

AnswerKind = Literal["number", "integer", "text", "boolean", "object", "list"]
_SCALARS: Final[dict[str, AnswerKind]] = {
    "number": "number",
    "float": "number",
    "integer": "integer",
    "int": "integer",
    "text": "text",
    "string": "text",
    "str": "text",
    "boolean": "boolean",
    "bool": "boolean",
}
_HOW = (
    'write the shape as "number", "integer", "text", "boolean", an object of named fields '
    """('{"iban": "text", "amount": "number"}') or a list of one shape ('["text"]')"""
)


def query_sources(inputs: Iterable[str]) -> frozenset[str]:
    """The sources of a query's answer: every source of what it read (its arguments: the
    text and the question), and :data:`QUERY_SOURCE`, since a model produced it. A query is
    the one call whose results derive from its arguments: they are what its model read (a
    tool's results derive from the tool alone, see
    :func:`~llassembly.analysis.dataflow.result_sources`).

    Example:
        >>> sorted(query_sources({"read_file"}))
        ['query_text', 'read_file']
    """
    return frozenset(inputs) | {QUERY_SOURCE}


def query_site(line: int) -> str:
    """The mark of the answer of the query at ``line`` (``query_text@9``): how a summary
    follows each query's answer (:func:`~llassembly.analysis.dataflow.argument_flows`); never
    a source a value carries at run time."""
    return f"{QUERY_TOOL}@{line}"


def site_line(source: str) -> int | None:
    """The line of a :func:`query_site` mark, or ``None`` for a source that is none."""
    name, at, line = source.partition("@")
    return int(line) if at and name == QUERY_TOOL and line.isdigit() else None


def is_query(tool: object) -> bool:
    """Whether ``tool`` is the built-in query (not a tool of the same name)."""
    return getattr(tool, "query", False) is True


@dataclass(frozen=True, slots=True)
class AnswerShape:
    """The shape of a query's answer (see :func:`parse_answer_shape`).

    Attributes:
        kind: ``number``, ``integer``, ``text``, ``boolean``, ``object`` or ``list``.
        fields: An object's fields, in order.
        item: A list's elements.
    """

    kind: AnswerKind
    fields: tuple[tuple[str, AnswerShape], ...] = ()
    item: AnswerShape | None = None

    def shape(self) -> Shape:
        """The shape the verifier follows (a boolean is a number, ``1`` or ``0``)."""
        if self.kind == "object":
            return Shape("object", "answer", tuple((n, s.shape()) for n, s in self.fields))
        if self.kind == "list":
            return Shape("list", item=self.item.shape() if self.item else None)
        return {"number": NUMBER, "integer": INT, "text": TEXT, "boolean": INT}[self.kind]

    def schema(self) -> dict[str, Any]:
        """The JSON schema of a value of this shape."""
        if self.kind == "object":
            return {
                "type": "object",
                "properties": {name: shape.schema() for name, shape in self.fields},
                "required": [name for name, _ in self.fields],
                "additionalProperties": False,
            }
        if self.kind == "list":
            return {"type": "array", "items": self.item.schema() if self.item else {}}
        return {"type": "string" if self.kind == "text" else self.kind}

    def describe(self) -> str:
        """The shape in words: ``number``, ``{iban: text, amount: number}``, ``list of text``."""
        if self.kind == "object":
            return "{" + ", ".join(f"{n}: {s.describe()}" for n, s in self.fields) + "}"
        if self.kind == "list":
            return f"list of {self.item.describe() if self.item else 'anything'}"
        return "true or false" if self.kind == "boolean" else self.kind


def parse_answer_shape(spec: object) -> AnswerShape:
    """The answer shape a plan wrote (the third argument of ``query_text``).

    Raises:
        ValueError: ``spec`` is no shape; the message says what is wrong and how to write one.

    Example:
        >>> parse_answer_shape('{"iban": "text", "amount": "number"}').describe()
        '{iban: text, amount: number}'
    """
    if not isinstance(spec, str):
        raise ValueError(f"the answer shape must be text, not {spec!r}; {_HOW}")
    if len(spec) > MAX_ANSWER_SHAPE_CHARS:
        raise ValueError(f"the answer shape is longer than {MAX_ANSWER_SHAPE_CHARS} characters")
    stripped = spec.strip()
    if stripped[:1] in ("{", "["):
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError):
            raise ValueError(f"the answer shape {_shown(spec)} is not valid JSON; {_HOW}") from None
    else:
        data = stripped
    return _parse(data, 0, [0])  # [fields counted]


def _shown(spec: str) -> str:
    return json.dumps(spec if len(spec) <= 60 else spec[:57] + "...", ensure_ascii=False)


def _parse(data: Any, depth: int, counted: list[int]) -> AnswerShape:
    if depth > MAX_ANSWER_DEPTH:
        raise ValueError(f"the answer shape nests deeper than {MAX_ANSWER_DEPTH} levels")
    if isinstance(data, str):
        kind = _SCALARS.get(data.strip().lower())
        if kind is None:
            raise ValueError(f"{json.dumps(data)} is no answer shape; {_HOW}")
        return AnswerShape(kind)
    if isinstance(data, dict):
        if not data:
            raise ValueError("an object answer shape needs at least one field")
        fields = []
        for name, part in data.items():
            counted[0] += 1
            if counted[0] > MAX_ANSWER_FIELDS:
                raise ValueError(f"the answer shape has more than {MAX_ANSWER_FIELDS} fields")
            if not name.strip():
                raise ValueError("a field of the answer shape needs a name")
            fields.append((name, _parse(part, depth + 1, counted)))
        return AnswerShape("object", tuple(fields))
    if isinstance(data, list):
        if len(data) != 1:
            raise ValueError(
                "a list answer shape names the shape of its elements once: "
                """'["text"]' or '[{"name": "text"}]'"""
            )
        counted[0] += 1
        return AnswerShape("list", item=_parse(data[0], depth + 1, counted))
    raise ValueError(f"{json.dumps(data)} is no answer shape; {_HOW}")


# -- the query sites of a plan ------------------------------------------------------------------


def query_sites(flow: ControlFlow, layout: Layout) -> dict[int, AnswerShape | str]:
    """Each reachable ``CALL query_text`` of ``flow``'s program: its answer shape, or why it
    has none (the shape is not written in the plan, or is no shape).

    The shape is the value the plan pushes last before the call, known when every path that
    reaches the call pushes the same text written in the plan (a literal, a data label, or a
    register holding one): values are followed by copying only, so what the check knows does
    not depend on anything computed.
    """
    sites = {pc: tool for pc, tool in flow.tools.items() if is_query(tool)}
    if not sites:
        return {}
    paths = paths_of(flow)
    stacks = constants(paths, layout, COPIES_ONLY)
    seen: dict[int, Abstract] = {}
    for number, (pc, _) in enumerate(paths.states):
        if pc not in sites:
            continue
        stack = stacks(number) if stacks is not None else ()
        top = stack[-1] if len(stack) >= len(QUERY_PARAMS) else UNKNOWN
        seen[pc] = top if pc not in seen else join(seen[pc], top)
    found: dict[int, AnswerShape | str] = {}
    for pc in sorted(seen):
        try:
            if seen[pc] is UNKNOWN:
                raise ValueError(_NOT_WRITTEN)
            found[pc] = parse_answer_shape(seen[pc])
        except ValueError as exc:
            found[pc] = f"CALL {sites[pc].name}: {exc}"
    return found


_NOT_WRITTEN = (
    "the answer shape (the last value pushed before it) must be written in the plan, the same "
    """on every path, e.g. PUSH "number" or PUSH '{"iban": "text", "amount": "number"}' right """
    "before the CALL"
)
