"""The system prompt: a template that teaches the language, plus one block per tool.

The built-in template is ``llassembly/prompts/base.md``. A custom template (``prompt_path``)
replaces it. Four placeholders are filled in by plain text replacement, in one pass, so any
other braces in a template (JSON, ``{unknown}``) are left alone:

* ``{context}``: the caller's own system message (may be empty);
* ``{extern_functions}``: one block per tool (:func:`describe_extern`), then one section of
  the records they take and return (:func:`types_section`);
* ``{structures}``: how a plan reads and builds structured values and text
  (``prompts/structures.md``), only when some tool takes or returns a structure (a record, a
  map, or a value of unknown type; a list of plain values is shown in its tool's block);
  empty otherwise, so a toolset of plain values gets a short prompt;
* ``{queries}``: how a plan reads prose with ``query_text`` (``prompts/queries.md``), only when
  queries are on (the built-in query is among the tools; it gets no tool block of its own).
  A template without this placeholder gets the section after the tools' blocks.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any, Final, TypeAlias

from pydantic import TypeAdapter

from llassembly.analysis.queries import is_query
from llassembly.analysis.shapes import (
    ANY,
    STRUCTURES,
    Shape,
    choices_text,
    named_shapes,
    options_of,
    shape_of,
)
from llassembly.errors import UsageError, clip
from llassembly.language.program import fewest_arguments
from llassembly.machine.externs import Extern, ToolSpec, externs_of

_CONTEXT = "{context}"
_TOOLS = "{extern_functions}"
_STRUCTURES = "{structures}"
_QUERIES = "{queries}"
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in (_CONTEXT, _TOOLS, _STRUCTURES, _QUERIES)))
_PLAIN = frozenset({"int", "float", "number", "text", "decimal", "none"})
_SCALARS = dict(none="None", int="int", float="float", number="number", decimal="str (decimal)")
TOOL_BLOCK_BUDGET: Final = 1200
"""Most characters one tool's block takes in the prompt, unless its signature and arguments
alone take more: they are never cut; the descriptions are, and the example is left out."""
_DESCRIPTION: Final = 400  # characters of the tool's own description kept, at most
_LEAST_DESCRIPTION: Final = 120  # and at least, when the arguments fill the block
_ARGUMENT: Final = 160  # characters of an argument's description kept
_LITERAL: Final = 60  # longest JSON literal an example pushes
_DEPTH: Final = 3
Names: TypeAlias = Mapping[tuple[str, int], str]  # a type's name and type_id: its prompt name


def load_template(prompt_path: str | os.PathLike[str] | None = None) -> str:
    """Return the template at ``prompt_path``, or the built-in one when it is ``None``.

    Raises:
        UsageError: ``prompt_path`` cannot be read.
    """
    if prompt_path is None:
        return _section("base")
    try:
        with open(prompt_path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:  # also a template in another encoding
        msg = f"cannot read the prompt template {os.fspath(prompt_path)!r}: {exc}"
        raise UsageError(msg) from exc


def uses_structures(externs: Mapping[str, Extern]) -> bool:
    """Whether some tool takes or returns a structure (a list of plain values aside) or a
    value of unknown type: the prompt then teaches structured values (``{structures}``)."""
    return any(
        (e.n_results == 1 and not e.result_types)  # no return annotation: anything may come back
        or any(
            _structured(shape_of(a)) for a in (*(p.annotation for p in e.params), *e.result_types)
        )
        for e in externs.values()
    )


def _structured(shape: Shape) -> bool:
    """A shape with fields (an object, a map, a fixed list), or not known; a list of plain
    values is not (its tool's block shows how to read one)."""
    return any(
        _structured(o.item) if o.kind == "list" and o.item is not None else o.kind not in _PLAIN
        for o in options_of(shape)
    )


def _section(name: str) -> str:
    files = resources.files("llassembly.integration")
    return files.joinpath(f"prompts/{name}.md").read_text("utf-8")


def build_system_prompt(
    externs: ToolSpec, context: str = "", prompt_path: str | os.PathLike[str] | None = None
) -> str:
    """Return the system prompt for these tools.

    Args:
        externs: The tools the plan may call (:data:`~llassembly.machine.externs.ToolSpec`).
        context: The caller's system message text, put where the template says ``{context}``.
        prompt_path: A template file to use instead of the built-in one. It may use either
            placeholder or none; other ``{...}`` text is kept as written.

    Example:
        >>> from llassembly import externs_from
        >>> def ping(host: str) -> bool:
        ...     '''Check that a host answers.'''
        ...     return True
        >>> "## ping" in build_system_prompt(externs_from([ping]), "You run the network.")
        True
    """
    by_name = externs_of(externs, param="externs")
    text = load_template(prompt_path)
    tools = [e for e in by_name.values() if not is_query(e)]
    names = type_names(tools)
    context = context.strip()
    structures = _section("structures").strip() + "\n" if uses_structures(by_name) else ""
    queries = _section("queries").strip() + "\n" if any(map(is_query, by_name.values())) else ""
    blocks = "\n\n".join(describe_extern(e, names) for e in tools) or "(no tools)"
    # A template of the user's without {queries} gets them after the tools.
    after = [types_section(tools, names), "" if _QUERIES in text else queries]
    blocks = "\n\n".join(filter(None, [blocks, *after]))
    if not context:  # drop the placeholder and the blank line after it
        text = re.sub(r"\{context\}[ \t]*\n?(?:[ \t]*\n)?", "", text)
    for placeholder, filled in ((_STRUCTURES, structures), (_QUERIES, queries)):
        if not filled:  # drop the placeholder's line
            text = re.sub(rf"\n{re.escape(placeholder)}[ \t]*(?=\n)", "", text)
    # One pass, so a placeholder spelled inside the context or a tool description stays as is.
    fill = {_CONTEXT: context, _TOOLS: blocks, _STRUCTURES: structures, _QUERIES: queries}
    return _PLACEHOLDER.sub(lambda m: fill[m.group(0)], text).strip() + "\n"


# -- a tool's block -------------------------------------------------------------------------------


def type_text(shape: Shape | None, depth: int = 0, names: Names | None = None) -> str:
    """A shape as the prompt writes a type: ``int``, ``str | None``, ``list[Event]``,
    ``Contact``, ``one of "a", "b"``, ``bool (1 or 0)``; a record by its name in ``names``."""
    if shape is None or shape.kind == "any" or depth > _DEPTH:
        return "any"
    kind, name = shape.kind, (names or {}).get((shape.name, shape.type_id), shape.name)
    inner = functools.partial(type_text, depth=depth + 1, names=names)
    if choices := choices_text(options_of(shape)):
        return choices
    if kind == "union":
        return " | ".join(map(inner, shape.options))
    if shape.name == "bool":
        return "bool (1 or 0)"
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "text":
        return f"str ({shape.name})" if shape.name in ("date", "datetime", "time") else "str"
    if kind == "object":
        if shape.name or not shape.fields or depth >= _DEPTH:
            return name or "JSON object"
        return "{" + ", ".join(f"{n}: {inner(s)}" for n, s in shape.fields) + "}"
    if kind == "map":
        item = shape.item
        return f"dict[str, {inner(item)}]" if item and item != ANY else "JSON object"
    if kind == "tuple":
        return shape.name or "[" + ", ".join(map(inner, shape.options)) + "]"
    return f"list[{inner(shape.item)}]"


def extern_signature(extern: Extern, names: Names | None = None) -> str:
    """Return ``name(a: int, b: str = "x") -> Page`` (``-> (int, int)`` for two results)."""
    args = ", ".join(
        f"{p.name}: {type_text(shape_of(p.annotation, read=True), 0, names)}"
        + (f" = {p.default_text or 'default'}" if p.has_default else "")
        for p in extern.params
    )
    results = [type_text(shape_of(t), 0, names) for t in extern.result_types]
    if extern.n_results == 0:
        returns = "nothing"
    elif extern.n_results == 1:
        returns = results[0] if results else "any"
    else:
        returns = "(" + ", ".join(results) + ")"
    return f"{extern.name}({args}) -> {returns}"


def first_paragraph(text: str | None) -> str:
    """The first paragraph of a tool's description, on one line."""
    return " ".join(inspect.cleandoc(text or "").split("\n\n", 1)[0].split())


def describe_extern(extern: Extern, names: Names | None = None) -> str:
    """Return the prompt block for one tool: signature, description, arguments and an example
    (the fields of its records are in :func:`types_section`; ``names``: :func:`type_names`).

    A description too long for :data:`TOOL_BLOCK_BUDGET` is cut (``...``); the signature and
    the arguments, with their types and the values a choice allows, never are.

    Example:
        >>> from llassembly import externs_from
        >>> def make_one_step(x: int, y: int) -> int:
        ...     '''Move one step towards (x, y).'''
        ...     return 0
        >>> print(describe_extern(externs_from([make_one_step])["make_one_step"]))
        ## make_one_step
        make_one_step(x: int, y: int) -> int
        Move one step towards (x, y).
        Example:
            PUSH 5             ; x
            PUSH 7             ; y
            CALL make_one_step
            POP R1             ; result
    """
    params = extern.params
    head = [f"## {extern.name}", extern_signature(extern, names)]
    rest = []
    declared = [_one(_declared(p.annotation)) for p in params]
    limits = [_limits_text(d) for d in declared]
    if any(p.description for p in params) or any(limits):
        rest.append("Arguments:")
        for p, limit in zip(params, limits, strict=True):
            about = p.description or type_text(shape_of(p.annotation, read=True), 0, names)
            rest.append(f"  {p.name}: " + _cut(about, _ARGUMENT) + limit)
    n = extern.n_results
    if n == 0:
        rest.append("Returns nothing: do not POP after it.")
    elif n > 1:
        rest.append(f"Returns {n} values: the first POP gets the first one.")
    example = ["Example:", *_example(extern, names, declared)]
    fixed = len("\n".join(head + rest + example))
    if fixed > TOOL_BLOCK_BUDGET:  # arguments are never cut: the example goes instead
        example, fixed = [], len("\n".join(head + rest))
    room = max(_LEAST_DESCRIPTION, min(_DESCRIPTION, TOOL_BLOCK_BUDGET - fixed - 1))
    about = _cut(first_paragraph(extern.description), room)
    return "\n".join(head + ([about] if about else []) + rest + example)


def _declared(annotation: Any) -> dict[str, Any]:
    """The JSON schema of a parameter's type (``{}`` for a type with none: nothing more is said
    of it)."""
    try:
        return TypeAdapter(annotation).json_schema()
    except Exception:
        return {}


def _one(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The keywords of a schema's one option besides null, or none."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    return options[0] if len(options) == 1 else {}


def _taken_fields(externs: list[Extern], named: Mapping[str, int]) -> dict[tuple[str, str], str]:
    """What ``# Types`` says after the type of a field of a record the tools take, by record
    and field name: its constraints and, where it may be left out, its default. A record is
    found by its schema's title, so of a name ``named`` counts twice none is."""
    said: dict[tuple[str, str], str] = {}
    for p in (p for extern in externs for p in extern.params):
        schema = _declared(p.annotation)
        for record in [schema, *schema.get("$defs", {}).values()]:
            if named.get(title := record.get("title", "")) != 1:
                continue
            needed = record.get("required", ())
            for field, declared in record.get("properties", {}).items():
                default = json.dumps(declared["default"]) if "default" in declared else "default"
                left_out = "" if field in needed else f" = {clip(default, _ARGUMENT)}"
                said.setdefault((title, field), _limits_text(_one(declared)) + left_out)
    return said


_LIMITS: Final = {
    "exclusiveMinimum": "> {}",
    "minimum": ">= {}",
    "exclusiveMaximum": "< {}",
    "maximum": "<= {}",
    "multipleOf": "a multiple of {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "minItems": "at least {} elements",
    "maxItems": "at most {} elements",
    "pattern": "matching {}",
}


def _limits_text(declared: Mapping[str, Any]) -> str:
    """`` (>= 1, <= 3)``: the constraints a parameter's schema declares, or ``""``."""
    said = [
        w.format(clip(str(declared[k]), _ARGUMENT)) for k, w in _LIMITS.items() if k in declared
    ]
    return f" ({', '.join(said)})" if said else ""


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a word with ``...``."""
    if len(text) <= limit:
        return text
    return text[: limit - 3].rsplit(" ", 1)[0].rstrip(" ,;:") + "..."


def _records(externs: list[Extern]) -> dict[tuple[str, int], Shape]:
    """Every named record type the tools take or return (nested too), once: its outermost shape,
    as the tools read it where one takes it (a plan writes it then)."""

    def records(annotations: Iterable[Any], read: bool) -> Iterator[Shape]:
        return (s for a in annotations for s in named_shapes(shape_of(a, read=read)) if s.name)

    taken: dict[tuple[str, int], Shape] = {}
    for named in records((p.annotation for e in externs for p in e.params), True):
        taken.setdefault((named.name, named.type_id), named)
    found: dict[tuple[str, int], Shape] = {}
    for extern in externs:
        params = records((p.annotation for p in extern.params), True)
        for named in itertools.chain(params, records(extern.result_types, False)):
            key = (named.name, named.type_id)
            found.setdefault(key, taken.get(key, named))
    return found


def type_names(externs: list[Extern]) -> dict[tuple[str, int], str]:
    """Each record type's name in the prompt: its own, the first of a name; a second type of
    one name (two classes ``Tag`` from two modules) gets a number no type has (``Tag2``)."""
    names: dict[tuple[str, int], str] = {}
    found = _records(externs)
    own, taken, last = {n for n, _ in found}, set[str](), dict[str, int]()
    for name, type_id in found:
        number = last.get(name, 1)  # (each name counts on from its last number: linear)
        given = f"{name}{number}" if number > 1 else name
        while given in taken or (number > 1 and given in own):
            number += 1
            given = f"{name}{number}"
        last[name] = number
        names[name, type_id] = given
        taken.add(given)
    return names


def types_section(externs: list[Extern], names: Names) -> str:
    """``# Types``: every record type the tools take or return (nested ones too), by its name
    in ``names``, with the types of its fields, once: the tools' blocks name them (``Hotel``).
    A record a tool takes says, as a signature does, its fields' constraints and defaults."""
    records = _records(externs)
    taken = _taken_fields(externs, Counter(name for name, _ in records))
    found = [
        f"{names[key]} {{"
        + ", ".join(
            f"{f}: {type_text(s, 1, names)}{taken.get((key[0], f), '')}" for f, s in shape.fields
        )
        + "}"
        for key, shape in records.items()
    ]
    if not found:
        return ""
    head = "# Types\nThe records the tools take and return: JSON objects with these fields."
    return "\n".join([head, *found])


def _example(
    extern: Extern, names: Names | None, declared: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The lines of a call: the arguments without a default pushed, ``CALL tool, N`` leaving
    the others to their defaults, its results popped (and a field read)."""
    pushed = fewest_arguments(extern)
    params = extern.params
    rows = [_push(extern, i, names, declared[i]) for i in range(pushed)]
    if pushed < len(params):
        left = [p.name for p in params[pushed:]]
        their = "its default" if len(left) == 1 else "their defaults"
        rows.append((f"CALL {extern.name}, {pushed}", f"{', '.join(left)}: {their}"))
    else:
        rows.append((f"CALL {extern.name}", ""))
    n = extern.n_results
    if n == 1:
        rows.append(("POP R1", "result"))
        result = shape_of(extern.result_types[0]) if extern.result_types else ANY
        path = _path_to_scalar(result, "R1")
        if path == "R1[0]":  # a list of plain values
            rows += [("MOV R2, R1[0]", "its first element"), ("LEN R3, R1", "how many")]
        elif path:
            rows.append((f"MOV R2, {path}", "a field"))
    else:
        rows += [(f"POP R{i + 1}", f"result {i + 1}") for i in range(n)]
    width = max(len(code) for code, _ in rows) + 1
    return [f"    {code.ljust(width)}; {note}" if note else f"    {code}" for code, note in rows]


def _push(
    extern: Extern, index: int, names: Names | None, declared: Mapping[str, Any]
) -> tuple[str, str]:
    """The example's line pushing a literal that fits the argument (one its constraints take,
    as the check before the run judges it; ``declared``: its schema's keywords), and its note."""
    name = extern.params[index].name
    shape = shape_of(extern.params[index].annotation, read=True)
    sample = _sample(shape)
    if isinstance(sample, bool):
        return f"PUSH {int(sample)}", name
    if isinstance(sample, int | float | str):  # the first one the check takes, if any
        low = {"minimum": 0, "exclusiveMinimum": 1, "maximum": 0}  # (a bound, and the step in)
        tried: list[Any] = [5 + 2 * index] if type(sample) is int else []
        bounds = [declared[k] + d for k, d in low.items() if type(declared.get(k)) in (int, float)]
        tried += [sample, *bounds]
        tried += [*declared.get("examples", ()), _FORMATS.get(str(declared.get("format")))]
        kinds = (str,) if isinstance(sample, str) else (int, float)
        fits = (v for v in tried if type(v) in kinds and extern.refuses(index, v) is None)
        sample = next(fits, None)
    text = json.dumps(sample, ensure_ascii=False)
    if sample is None or len(text) > _LITERAL:  # no literal known to fit: one the plan holds
        what = type_text(shape, 0, names) + (" (JSON text)" if shape.kind in STRUCTURES else "")
        return "PUSH R3", f"{name}: a {what}{_limits_text(declared)}"
    return (f"PUSH '{text}'" if isinstance(sample, dict | list) else f"PUSH {text}"), name


_FORMATS: Final = {"date": "2026-01-31", "date-time": "2026-01-31T09:00:00Z", "time": "09:00:00"}


def _without_none(shape: Shape) -> Shape:
    rest = [o for o in options_of(shape) if o.kind != "none"]
    return rest[0] if len(rest) == 1 else shape


def _path_to_scalar(shape: Shape, base: str) -> str:
    """A path from ``base`` to the first plain field of a structured result (``R1.items[0].id``),
    or ``""`` for a result of plain values."""
    path, current = base, _without_none(shape)
    for _ in range(_DEPTH + 1):
        if current.kind == "object" and current.fields:
            name, current = current.fields[0]
            path += f".{name}" if name.isidentifier() else f"[{json.dumps(name)}]"
        elif current.kind == "list" and current.item is not None:
            path += "[0]"
            current = current.item
        else:
            break
        current = _without_none(current)
    return path if path != base else ""


def _sample(shape: Shape, depth: int = 0) -> Any:
    """A small JSON-compatible value of this shape."""
    shape = _without_none(shape)
    kind = shape.kind
    if shape.choices:
        return shape.choices[0]
    if kind == "object":
        return {n: _sample(s, depth + 1) for n, s in shape.fields} if depth < _DEPTH else {}
    if shape.name == "bool":
        return True
    if kind in ("list", "tuple"):
        item = shape.item or (shape.options[0] if shape.options else None)
        return [_sample(item, depth + 1)] if item is not None and depth < _DEPTH else []
    # int, any and anything else: a number
    return {"float": 0.5, "text": "text", "decimal": "text", "map": {}}.get(kind, 1)
