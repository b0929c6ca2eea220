"""A JSON schema read as the Python type it declares (the arguments and results of MCP tools,
and of any tool whose ``args_schema`` is a JSON schema).

``integer`` is ``int``, an ``enum`` a ``Literal``, an object with properties a ``TypedDict``
named after it, constraints (``maximum``, ``pattern``...) pydantic ``Field`` metadata; ``$ref``
pointers are followed into the schema, each definition read once for each depth it is met at
(one type, however often it is named there; so a schema's cost is its size, not the number of
paths through it), down to the depth limit as any nesting is (a recursive definition too).
:mod:`~llassembly.machine.externs` reads a tool's schema with :func:`type_of`.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter
from typing_extensions import TypedDict

_SCHEMA_DEPTH = 8  # deeper JSON schemas are read as "any"


def type_of(schema: Any, root: Mapping[str, Any], name: str) -> Any:
    """The type ``schema`` (a part of ``root``, which its ``$ref``s point into) declares,
    named ``name`` where it is an object with no title."""
    return _annotation(schema, root, name, 0, {})


def title(*words: str) -> str:
    """A type name made of ``words`` (``order_item`` -> ``OrderItem``)."""
    text = "".join(p[:1].upper() + p[1:] for w in words for p in re.split(r"[^A-Za-z0-9]+", w))
    return text if text.isidentifier() else "Object"


_JSON_TYPES: dict[str, Any] = {
    "integer": int,
    "number": float,
    "string": str,
    "boolean": bool,
    "null": type(None),
}
_NUMBER_WORDS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt"}
_NUMBER_WORDS |= {"exclusiveMaximum": "lt", "multipleOf": "multiple_of"}
_CONSTRAINTS: dict[str, dict[str, str]] = {  # by the JSON type a keyword applies to (else: ignored)
    "integer": _NUMBER_WORDS,
    "number": _NUMBER_WORDS,
    "string": {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern"},
    "array": {"minItems": "min_length", "maxItems": "max_length"},
}


def _annotation(
    schema: Any, root: Mapping[str, Any], name: str, depth: int, read: dict[tuple[str, int], Any]
) -> Any:
    """:func:`type_of`, ``depth`` levels in, with the definitions ``read`` so far (by their
    ``$ref`` and the depth they were met at)."""
    if not isinstance(schema, Mapping) or depth > _SCHEMA_DEPTH:
        return Any
    if _is_ref(schema):
        ref = str(schema["$ref"])
        if (ref, depth) not in read:  # (a read depends on the depth left: kept by both)
            named = title(ref.rsplit("/", 1)[-1])
            read[ref, depth] = _annotation(resolve(schema, root), root, named, depth + 1, read)
        return read[ref, depth]
    if "const" in schema:
        return _literal([schema["const"]])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _literal(schema["enum"])
    options = schema.get("anyOf") or schema.get("oneOf")
    if not options and isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        options = schema["allOf"]
    elif not options and isinstance(schema.get("allOf"), list) and schema["allOf"]:
        each = [resolve(p, root) for p in schema["allOf"]]
        objects = [p for p in each if _object_part(p)]
        if len(objects) == len(each) and any(p.get("properties") for p in objects):
            return _annotation(_all_of(schema, objects), root, name, depth + 1, read)
    kinds = schema.get("type")
    if isinstance(kinds, list):
        options = [{**schema, "type": k} for k in kinds]
    if isinstance(options, list) and options:
        found = tuple(_annotation(o, root, name, depth + 1, read) for o in options)
        return typing.cast(Any, typing.Union)[found]  # (of one type: that type)
    if kinds == "array":
        items = schema.get("prefixItems")
        if isinstance(items, list) and items:
            parts = tuple(_annotation(i, root, f"{name}Item", depth + 1, read) for i in items)
            base: Any = typing.cast(Any, tuple)[parts]
        else:
            base = list[_annotation(schema.get("items"), root, f"{name}Item", depth + 1, read)]  # type: ignore[misc]
    elif kinds == "object":  # with properties: a TypedDict named after it
        named, properties = str(schema.get("title") or name), schema.get("properties")
        needed, extra = required(schema), schema.get("additionalProperties")
        if isinstance(properties, Mapping) and properties:
            fields = {
                key: (ann if key in needed else NotRequired[ann])
                for key, spec in properties.items()
                for ann in [_annotation(spec, root, title(named, key), depth + 1, read)]
            }
            base = typing.cast(Any, TypedDict)(title(named), fields)
            # keys it does not list: kept (JSON Schema's default), or left out (a closed one's)
            base.__pydantic_config__ = ConfigDict(extra="ignore" if extra is False else "allow")
        else:
            value = _annotation(extra, root, f"{named}Value", depth + 1, read) if extra else Any
            base = dict[str, value]  # type: ignore[valid-type]
    else:
        base = _JSON_TYPES.get(str(kinds), Any)
    words = _CONSTRAINTS.get(kinds, {}) if isinstance(kinds, str) else {}
    kw = {key: schema[word] for word, key in words.items() if word in schema}
    for inclusive, exclusive in (("ge", "gt"), ("le", "lt")):  # draft 4: exclusiveMinimum: true
        if isinstance(kw.get(exclusive), bool) and kw.pop(exclusive) and inclusive in kw:
            kw[exclusive] = kw.pop(inclusive)  # makes minimum exclusive (false: inclusive)
    # A keyword no validator can be built from (ECMA-262's look-around in a pattern, a bound of
    # the wrong type, multipleOf 0) is the tool's to judge.
    kw = {key: value for key, value in kw.items() if _builds(base, key, value)}
    if kw and base is not Any:
        return typing.cast(Any, Annotated)[(base, Field(**kw))]
    return base


def _is_ref(schema: Any) -> bool:
    return isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str)


def resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    """The schema a ``$ref`` names by its JSON pointer into ``root`` (``#/$defs/Point``,
    ``#/properties/origin``; ``None``: none), or ``schema`` when it is no ``$ref``."""
    ref = str(schema["$ref"]) if _is_ref(schema) else None
    if ref is None or not ref.startswith("#/"):
        return schema if ref is None else None  # (another document's, an anchor: not read)
    found: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(found, list) and re.fullmatch("[0-9]{1,9}", part):
            found = found[int(part)] if int(part) < len(found) else None
        else:
            found = found.get(part) if isinstance(found, Mapping) else None
    if found is None:  # a definition by its name, wherever the schema keeps it
        defs = [root.get(k) for k in ("$defs", "definitions")]
        found = next((d[part] for d in defs if isinstance(d, Mapping) and part in d), None)
    return found


def _object_part(part: Any) -> bool:
    """Whether ``part`` of an ``allOf`` is an object's: with properties, or only saying what is
    required (``allOf: [{"$ref": "#/$defs/Base"}, {"required": ["name"]}]``)."""
    if not isinstance(part, Mapping) or part.get("type", "object") != "object":
        return False
    if isinstance(part.get("properties"), Mapping):
        return bool(part["properties"])
    return set(part) <= {"type", "required", "description", "title"}


def _all_of(schema: Mapping[str, Any], parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """An ``allOf`` of objects as one object with every part's properties, each required one
    required (a value must be each of them)."""
    every = [schema, *parts]  # (its own fields too)
    properties = {
        k: v
        for p in every
        if isinstance(p.get("properties"), Mapping)
        for k, v in p["properties"].items()
    }
    needed = sorted({name for p in every for name in required(p)})
    rest = {k: v for k, v in schema.items() if k != "allOf"}
    return {**rest, "type": "object", "properties": properties, "required": needed}


def _builds(base: Any, key: str, value: Any) -> bool:
    """Whether pydantic builds a validator of ``base`` constrained by ``key=value``."""
    try:
        TypeAdapter(Annotated[base, Field(**{key: value})])
    except Exception:  # pydantic_core's SchemaError, a TypeError
        return False
    return True


def required(schema: Mapping[str, Any]) -> set[str]:
    """The names an object's schema requires (a draft-3 ``"required": true`` names none)."""
    found = schema.get("required")
    return {str(name) for name in found} if isinstance(found, list | tuple | set) else set()


def _literal(values: list[Any]) -> Any:
    plain = [v for v in values if v is None or isinstance(v, str | int | float | bool)]
    return typing.cast(Any, Literal)[tuple(plain)] if plain else Any
