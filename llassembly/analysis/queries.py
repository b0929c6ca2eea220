"""Queries as the analysis sees them: a plan reading prose with a model (``CALL query_text``).

A query asks a model with no tools to answer one question about a text with a value of an
*answer shape* the plan writes (``docs/queries.md``): :func:`parse_answer_shape` reads it,
:func:`query_sites` finds each query's shape before the run (so the type check follows its answer as
it does a tool's typed result), and :func:`query_sources` alone says where an answer derives from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Final

from llassembly.analysis.cfg import ControlFlow, Layout
from llassembly.analysis.constants import COPIES_ONLY, UNKNOWN, Abstract, constants, join
from llassembly.analysis.paths import paths_of
from llassembly.analysis.shapes import ANSWER_TEXT, BOOL, INT, NUMBER, Shape
from llassembly.errors import clip
from llassembly.language.limits import MAX_ANSWER_DEPTH, MAX_ANSWER_FIELDS, MAX_ANSWER_SHAPE_CHARS

QUERY_TOOL: Final = "query_text"
"""The name a plan calls a query by."""
QUERY_PARAMS: Final = ("text", "question", "shape")
"""A query's arguments, in push order."""
QUERY_SOURCE: Final = QUERY_TOOL
"""The source that marks a value a model produced: the query's name, as a tool's result has
the tool's (see :func:`query_sources`)."""

_SCALARS: Final = (  # a scalar answer: its shape, JSON schema type, words, and names to write
    (NUMBER, "number", "number", ("number", "float")),
    (INT, "integer", "integer", ("integer", "int")),
    (ANSWER_TEXT, "string", "text", ("text", "string", "str")),
    (BOOL, "boolean", "true or false", ("boolean", "bool")),
)
_HOW = (
    'write the shape as "number", "integer", "text", "boolean", an object of named fields '
    """('{"iban": "text", "amount": "number"}') or a list of one shape ('["text"]')"""
)


def query_sources(inputs: Iterable[str]) -> frozenset[str]:
    """The sources of a query's answer: every source of what it read (its arguments: the text and
    the question), and :data:`QUERY_SOURCE`, since a model produced it. A query is the one call
    whose results derive from its arguments: they are what its model read (a tool's results derive
    from the tool alone, see :func:`~llassembly.analysis.dataflow.result_sources`).

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


def answer_schema(shape: Shape) -> dict[str, Any]:
    """The JSON schema of an answer of ``shape`` (a :func:`parse_answer_shape`)."""
    if shape.kind == "object":
        return {
            "type": "object",
            "properties": {name: answer_schema(part) for name, part in shape.fields},
            "required": [name for name, _ in shape.fields],
            "additionalProperties": False,
        }
    if shape.kind == "list":
        return {"type": "array", "items": answer_schema(shape.item) if shape.item else {}}
    return {"type": next(kind for s, kind, _, _ in _SCALARS if s == shape)}


def answer_words(shape: Shape) -> str:
    """An answer shape in words: ``number``, ``{iban: text, amount: number}``, ``list of text``."""
    if shape.kind == "object":
        return "{" + ", ".join(f"{n}: {answer_words(s)}" for n, s in shape.fields) + "}"
    if shape.kind == "list":
        return f"list of {answer_words(shape.item) if shape.item else 'anything'}"
    return next(words for s, _, words, _ in _SCALARS if s == shape)


def parse_answer_shape(spec: object) -> Shape:
    """The answer shape a plan wrote (the third argument of ``query_text``), as a value's shape
    (a boolean is a ``bool``: a number, ``1`` or ``0``; an object is named ``answer``);
    :func:`answer_schema` and :func:`answer_words` say it to the query model.

    Raises:
        ValueError: ``spec`` is no shape; the message says what is wrong and how to write one.

    Example:
        >>> answer_words(parse_answer_shape('{"iban": "text", "amount": "number"}'))
        '{iban: text, amount: number}'
    """
    if not isinstance(spec, str):
        raise ValueError(f"the answer shape must be text, not {spec!r}; {_HOW}")
    if len(spec) > MAX_ANSWER_SHAPE_CHARS:
        raise ValueError(f"the answer shape is longer than {MAX_ANSWER_SHAPE_CHARS} characters")
    data: Any = spec.strip()
    if data[:1] in ("{", "["):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError):
            shown = json.dumps(clip(spec, 60), ensure_ascii=False)
            raise ValueError(f"the answer shape {shown} is not valid JSON; {_HOW}") from None
    return _parse(data, 0, [0])  # [fields counted]


def _parse(data: Any, depth: int, counted: list[int]) -> Shape:
    if depth > MAX_ANSWER_DEPTH:
        raise ValueError(f"the answer shape nests deeper than {MAX_ANSWER_DEPTH} levels")
    if isinstance(data, str):
        word = data.strip().lower()
        for shape, _, _, names in _SCALARS:
            if word in names:
                return shape
    elif isinstance(data, dict):
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
        return Shape("object", "answer", tuple(fields))
    elif isinstance(data, list):
        if len(data) != 1:
            raise ValueError(
                "a list answer shape names the shape of its elements once: "
                """'["text"]' or '[{"name": "text"}]'"""
            )
        counted[0] += 1
        return Shape("list", item=_parse(data[0], depth + 1, counted))
    raise ValueError(f"{json.dumps(data)} is no answer shape; {_HOW}")


# -- the query sites of a plan ------------------------------------------------------------------


def query_sites(flow: ControlFlow, layout: Layout) -> dict[int, Shape | str]:
    """Each reachable ``CALL query_text`` of ``flow``'s program: its answer shape as the verifier
    follows it, or why it has none (the shape is not written in the plan, or is no shape). The
    shape is the value pushed last before the call, known when every path to the call pushes
    the same text written in the plan (a literal, a data label, or a register holding one):
    values are followed by copying only, so what the check knows depends on nothing computed."""
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
    found: dict[int, Shape | str] = {}
    for pc in sorted(seen):
        try:
            if seen[pc] is UNKNOWN:
                raise ValueError(_NOT_WRITTEN)
            found[pc] = _followed(parse_answer_shape(seen[pc]))
        except ValueError as exc:
            found[pc] = f"CALL {sites[pc].name}: {exc}"
    return found


def _followed(shape: Shape) -> Shape:
    # A boolean answer is any number to the verifier (INT, not BOOL): one value that is an
    # answer on some paths and a number on others stays one shape (``int``, not ``int | int``).
    if shape == BOOL:
        return INT
    fields = tuple((name, _followed(part)) for name, part in shape.fields)
    return replace(shape, fields=fields, item=_followed(shape.item) if shape.item else None)


_NOT_WRITTEN = (
    "the answer shape (the last value pushed before it) must be written in the plan, the same "
    """on every path, e.g. PUSH "number" or PUSH '{"iban": "text", "amount": "number"}' right """
    "before the CALL"
)
