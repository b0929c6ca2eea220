"""The shape of a value, from a tool's type annotations: what the verifier knows of a result
before the run (:mod:`llassembly.analysis.verifier`), and what the prompt tells the model of
each tool's structures. A shape not known (``-> dict``, ``-> Any``) is :data:`ANY`, checked as
the plan runs; shapes follow what the machine holds (``docs/language.md``, *Values*: a ``bool``
is a number, a date, UUID or ``Decimal`` is text, ``None`` is ``NONE``).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import inspect
import json
import typing
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, get_args, get_origin

from pydantic import AliasChoices, BaseModel, Json, PlainSerializer, WrapSerializer
from pydantic.dataclasses import is_pydantic_dataclass
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticUndefined
from typing_extensions import is_typeddict

from llassembly.errors import first_names

if TYPE_CHECKING:
    from llassembly.language.program import Template

Kind = Literal[
    "any", "int", "float", "number", "text", "decimal", "none", "object", "map", "list", "tuple",
    "union",
]  # fmt: skip
_MAX_DEPTH: Final = 6  # deeper structures (a recursive model) are not followed
_MAX_OPTIONS: Final = 6  # a value that may be more shapes than this is taken as unknown


@dataclass(frozen=True, slots=True)
class Shape:
    """What is known of a value before the run.

    Attributes:
        kind: ``any`` (nothing known), a scalar (``int``, ``float``, ``number``, ``text``,
            ``decimal``: text holding a number, ``none``), ``object`` (named fields), ``map``
            (text keys, values of one shape), ``list``, ``tuple`` (a fixed list), ``union``.
        name: The type's name (``Contact``, ``date``), for messages and the prompt.
        fields: An object's fields, in order.
        item: The shape of a list's elements or a map's values (an object's other fields, when
            it keeps extra ones: a model with ``extra="allow"``).
        options: A tuple's elements, or a union's shapes.
        literal: For a value written in the plan (a number or a text in quotes, a text with
            placeholders as its template, moved through registers, variables and the stack):
            the value and the line it is written on, so the check can ask a tool whether it
            takes it. Where values from different places meet, the literal is dropped and
            the shape kept.
        choices: The values a ``Literal`` or an enum allows (empty: any of its kind).
        type_id: A record's class (its ``id``): two types of one name stay two; not compared.
    """

    kind: Kind
    name: str = ""
    fields: tuple[tuple[str, Shape], ...] = ()
    item: Shape | None = None
    options: tuple[Shape, ...] = ()
    literal: tuple[int | float | str | Template | None, int] | None = None
    choices: tuple[int | float | str, ...] = ()
    type_id: int = dataclasses.field(default=0, compare=False, repr=False)
    _hash: int = dataclasses.field(default=0, init=False, compare=False, repr=False)

    def _own(self) -> tuple[Any, ...]:  # (what is compared: all but type_id)
        s = self
        return (s.kind, s.name, s.fields, s.item, s.options, s.literal, s.choices)

    def __post_init__(self) -> None:  # hashed once: a type that reuses a part is no tree walk
        object.__setattr__(self, "_hash", hash(self._own()))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (
            isinstance(other, Shape) and self._hash == other._hash and self._own() == other._own()
        )

    def field(self, key: str) -> Shape | None:
        """An object's field, or ``None``."""
        return dict(self.fields).get(key)


ANY: Final = Shape("any")
INT: Final = Shape("int")
FLOAT: Final = Shape("float")
BOOL: Final = Shape("int", "bool")  # a bool is a number the machine holds as 1 or 0
NUMBER: Final = Shape("number")
TEXT: Final = Shape("text")
NONE_SHAPE: Final = Shape("none")
JSON_TEXT: Final = Shape("text", "JSON text")
"""Pydantic's ``Json[...]``: JSON text the tool parses itself (the plan passes the text)."""
ANSWER_TEXT: Final = Shape("text", "answer text")
"""A query's answer (or an answer's field) of shape ``"text"``: text, checked as text, that no
path reads (where a tool's ``str`` may be JSON it wrote)."""
_NUMBERS: Final = frozenset({"int", "float", "number"})
STRUCTURES: Final = frozenset({"object", "map", "list", "tuple"})  # held as their JSON text
_TEXTS: Final = frozenset({"text", "decimal"}) | STRUCTURES
_SCALAR_TYPES: dict[type, Shape] = {  # asked in order (bool is an int, datetime a date)
    bool: BOOL,
    int: INT,
    float: FLOAT,
    decimal.Decimal: Shape("decimal", "decimal"),
    datetime.datetime: Shape("text", "datetime"),
    datetime.date: Shape("text", "date"),
    datetime.time: Shape("text", "time"),
    datetime.timedelta: Shape("text", "duration"),
    uuid.UUID: Shape("text", "uuid"),
    bytes: Shape("text", "text"),
    str: TEXT,
    PurePath: Shape("text", "path"),
}


def join(a: Shape | None, b: Shape | None) -> Shape | None:
    """A value that is ``a`` on some runs and ``b`` on others (``None``: not known)."""
    return None if a is None or b is None else (a if a == b else _union([a, b]))


def _union(shapes: Iterable[Shape]) -> Shape | None:
    # By the shape without its literal: two different literals of one type (or a literal and
    # any value of its type) are that type, so a union never grows with the values written.
    options: dict[Shape, Shape] = {}
    for shape in shapes:
        for option in options_of(shape):
            if option.kind == "any":
                return None
            plain = dataclasses.replace(option, literal=None) if option.literal else option
            if options.setdefault(plain, option) != option:
                options[plain] = plain
    if len(options) > _MAX_OPTIONS:
        return None
    found = tuple(options.values())
    return found[0] if len(found) == 1 else Shape("union", options=found)


def options_of(shape: Shape) -> tuple[Shape, ...]:
    """The shapes a value of ``shape`` may be: a union's options, else the shape itself."""
    return shape.options if shape.kind == "union" else (shape,)


def is_text(shape: Shape | None) -> bool:
    """Whether the value is text on every run (``NONE`` among texts: it reads as empty text; a
    structure is its JSON text)."""
    if shape is None:
        return False
    found = [o.kind for o in options_of(shape)]
    return all(k in _TEXTS or k == "none" for k in found) and any(k in _TEXTS for k in found)


def is_number(shape: Shape | None) -> bool:
    """Whether the value is a number on every run."""
    return shape is not None and all(o.kind in _NUMBERS for o in options_of(shape))


# -- from annotations ---------------------------------------------------------------------------


def shape_of(annotation: Any, depth: int = 0, read: bool = False) -> Shape:
    """The shape of a value of type ``annotation`` as the machine holds it (``depth``: how
    deep inside another shape it is; past ``_MAX_DEPTH`` nothing is known). ``read``: as a
    tool reads it (an argument), not as it is written (a result): see :func:`_model`."""
    if depth >= _MAX_DEPTH:
        return ANY
    try:
        return _cached(annotation, depth, read)
    except TypeError:  # an annotation that cannot be hashed
        return _shape(annotation, depth, read)


def _hints(cls: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return dict(getattr(cls, "__annotations__", {}))


def _shape(annotation: Any, depth: int, read: bool) -> Shape:
    ann = annotation
    while get_origin(ann) is Annotated:
        if any(type(m) is Json for m in get_args(ann)[1:]):  # (an instance of it)
            return JSON_TEXT
        ann = get_args(ann)[0]
    if ann is Any or ann is object or ann is inspect.Parameter.empty:
        return ANY
    if ann is None or ann is type(None):
        return NONE_SHAPE
    origin, args = get_origin(ann), get_args(ann)
    if origin is typing.Union or type(ann).__name__ == "UnionType":
        return _union(shape_of(a, depth, read) for a in args) or ANY
    if origin is Literal:
        return _choices(args)
    if isinstance(ann, type):
        if issubclass(ann, enum.Enum):  # whatever else it derives from (str, int)
            return _choices([m.value for m in ann])
        for kind, found in _SCALAR_TYPES.items():
            if issubclass(ann, kind):
                return found
        if issubclass(ann, BaseModel) or is_pydantic_dataclass(ann):
            return _model(ann, depth, read)
        if is_typeddict(ann):  # typing's or typing_extensions' (which pydantic reads)
            return _object(ann, list(_hints(ann).items()), depth, read)
        if dataclasses.is_dataclass(ann):
            hints = _hints(ann)
            items = [(f.name, hints.get(f.name, Any)) for f in dataclasses.fields(ann)]
            return _object(ann, items, depth, read)
        if issubclass(ann, tuple) and hasattr(ann, "_fields"):  # a NamedTuple: a JSON array
            hints = _hints(ann)
            parts = tuple(shape_of(hints.get(f, Any), depth + 1, read) for f in ann._fields)
            return Shape("tuple", ann.__name__, options=parts)
    container = origin if origin is not None else ann
    if container is tuple and len(args) == 2 and args[1] is Ellipsis:
        return Shape("list", item=shape_of(args[0], depth + 1, read))
    if container is tuple and args:  # (a bare tuple: a list, below)
        return Shape("tuple", options=tuple(shape_of(a, depth + 1, read) for a in args))
    if isinstance(container, type) and issubclass(container, Mapping):
        return Shape("map", item=shape_of(args[1], depth + 1, read) if len(args) == 2 else ANY)
    if container is Iterable or (  # str and bytes are text (above)
        isinstance(container, type) and issubclass(container, Sequence | set | frozenset)
    ):
        return Shape("list", item=shape_of(args[0], depth + 1, read) if args else ANY)
    return ANY


_cached = functools.lru_cache(maxsize=1024)(_shape)


def _choices(values: Sequence[Any]) -> Shape:
    """The shape of a ``Literal`` or an enum: its values' kinds (a union of them, ``None``
    among them ``NONE``), each with its values when they are plain ones (a bool as 1 or 0)."""
    scalars = ((bool, BOOL), (int, INT), (float, FLOAT), (str, TEXT), (type(None), NONE_SHAPE))
    kinds: dict[Shape, list[Any]] = {}
    for v in values:
        kinds.setdefault(next((s for t, s in scalars if isinstance(v, t)), ANY), []).append(v)
    plain = (bool, int, float, str)
    return (
        _union(
            dataclasses.replace(k, choices=tuple(int(v) if type(v) is bool else v for v in vs))
            if k.kind != "none" and all(type(v) in plain for v in vs)
            else k
            for k, vs in kinds.items()
        )
        or ANY
    )


def _model(cls: Any, depth: int, read: bool) -> Shape:
    """A pydantic model (or dataclass) as pydantic writes it to JSON, which the machine holds: a
    root model as its root; keys by serialization alias if it serializes by alias, its computed
    fields, not its excluded ones; a field a serializer writes as that returns (unknown if
    unsaid); dates, times or durations its config writes as numbers as numbers. ``read``: as
    its schema shows it to a model that writes one (a tool's argument): keys by
    :func:`read_keys`, no computed field, no field ``SkipJsonSchema`` hides."""
    _MODELS.add(id(cls))
    checks = cls.__pydantic_decorators__
    config = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", {})
    every = cls.model_fields if issubclass(cls, BaseModel) else cls.__pydantic_fields__
    if read:
        keys = read_keys(cls)
        items = [(keys[n], f.annotation) for n, f in every.items() if not hidden(f)]
    elif checks.model_serializers:
        return ANY
    else:
        items = _written(cls, every, checks, config)
    if getattr(cls, "__pydantic_root_model__", False):
        return shape_of(items[0][1], depth, read)
    shape = _object(cls, items, depth, read)
    shape = dataclasses.replace(shape, item=ANY) if config.get("extra") == "allow" else shape
    temporal = config.get("ser_json_temporal") in ("seconds", "milliseconds")
    numbers = {"datetime", "date", "time", "duration"} if temporal and not read else set()
    numbers |= {"duration"} if config.get("ser_json_timedelta") == "float" and not read else set()
    return _numbers(shape, numbers) if numbers else shape


def hidden(field: Any) -> bool:
    """Whether a pydantic field (its ``FieldInfo``) is hidden from models: ``SkipJsonSchema``
    leaves it out of the schema a model is shown."""
    return any(isinstance(m, _HIDDEN) for m in field.metadata)


_HIDDEN: Final = typing.cast(type, SkipJsonSchema)  # (a generic alias to mypy)


def _written(cls: Any, every: Any, checks: Any, config: Any) -> list[tuple[str, Any]]:
    """A model's keys as it writes them, each with the type of what it writes."""
    serializers = checks.field_serializers.values()
    written = {f: _hints(d.func).get("return", Any) for d in serializers for f in d.info.fields}
    kept = [(n, f) for n, f in every.items() if not f.exclude]
    fields = [(n, f.serialization_alias, f.annotation, f.metadata) for n, f in kept]
    fields += [(n, c.info.alias, c.info.return_type, []) for n, c in checks.computed_fields.items()]
    items = []
    for name, alias, annotation, metadata in fields:
        own = [m.return_type for m in metadata if isinstance(m, PlainSerializer | WrapSerializer)]
        found = written.get(name, written.get("*", own[-1] if own else annotation))
        key = alias if alias and config.get("serialize_by_alias") else name
        items.append((key, Any if found is PydanticUndefined else found))
    return items


def read_keys(cls: Any) -> dict[str, str]:
    """A pydantic model's (or dataclass's) fields, each with the key it is read by: its alias
    where it validates by alias (the first name of an ``AliasChoices``), else its name."""
    every = cls.model_fields if issubclass(cls, BaseModel) else cls.__pydantic_fields__
    config = getattr(cls, "model_config", None) or getattr(cls, "__pydantic_config__", {})
    by_alias = config.get("validate_by_alias", True)
    keys = {}
    for name, info in every.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            alias = next((c for c in alias.choices if isinstance(c, str)), None)
        alias = alias if isinstance(alias, str) else info.alias
        keys[name] = alias if by_alias and alias else name
    return keys


_MODELS: set[int] = set()  # the pydantic classes read (by id): each is written by its own config


def _numbers(shape: Shape, names: set[str], top: bool = True) -> Shape:
    """``shape`` with its texts named one of ``names`` as numbers, but in a pydantic model it
    holds (written by its own config)."""
    if shape.kind == "text" and shape.name in names:
        return NUMBER
    if shape.kind == "object" and not top and shape.type_id in _MODELS:
        return shape
    parts = tuple(_numbers(o, names, False) for o in shape.options)
    if shape.kind == "union":
        return _union(parts) or ANY
    item = shape.item and _numbers(shape.item, names, False)
    fields = tuple((n, _numbers(s, names, False)) for n, s in shape.fields)
    return dataclasses.replace(shape, fields=fields, item=item, options=parts)


def _object(cls: Any, items: list[tuple[str, Any]], depth: int, read: bool) -> Shape:
    fields = tuple((n, shape_of(a, depth + 1, read)) for n, a in items)
    return Shape("object", cls.__name__, fields, type_id=id(cls))


# -- paths ---------------------------------------------------------------------------------------


def child(shape: Shape, key: str | int | None) -> tuple[Shape, str | None]:
    """The shape of ``shape[key]`` (``key`` ``None``: not known before the run), and what is wrong
    when no value of the shape has that part (said of the value: ``has no field 'x'; its fields:
    ...``). A union is wrong only when no option has it (``null`` options are the run's to find)."""
    if shape.kind == "union":
        parts = [child(option, key) for option in shape.options if option.kind != "none"]
        found = [part for part, wrong in parts if wrong is None]
        problem = next((wrong for _, wrong in parts if wrong is not None), None)
        return (_union(found) or ANY, None) if found else (ANY, problem)
    kind = shape.kind
    if shape == ANSWER_TEXT:  # (its JSON, if a model wrote some, is no shape's to check)
        return ANY, "is a query's text answer: ask for the fields in the answer's shape"
    if kind == "any" or kind == "text":  # text may be JSON (a tool that returns json.dumps)
        return ANY, None
    if kind == "object":
        if isinstance(key, str):
            if part := shape.field(key) or shape.item:  # (item: it keeps extra fields)
                return part, None
            return ANY, f"has no field {key!r}; {fields_line(dict(shape.fields))}"
        if key is None:
            return _union(s for _, s in shape.fields) or ANY, None
        return ANY, f"is an object: [{key}] needs a field name; {fields_line(dict(shape.fields))}"
    if kind == "map":
        if isinstance(key, int):
            return ANY, f"is an object: its keys are text, not [{key}]"
        return shape.item or ANY, None
    if kind == "list" or kind == "tuple":
        if isinstance(key, str):
            return ANY, (
                f"is a list, not an object: it has no field {key!r}; take an element with a "
                "number ([0], [ESI]) first"
            )
        if kind == "list":
            return shape.item or ANY, None
        if key is None:
            return _union(shape.options) or ANY, None
        if not -len(shape.options) <= key < len(shape.options):
            return ANY, f"has {len(shape.options)} elements, not [{key}]"
        return shape.options[key], None
    what = "field " + repr(key) if isinstance(key, str) else f"element [{key}]"
    words = "always NONE (null)" if kind == "none" else "a number" if kind in _NUMBERS else "text"
    return ANY, f"is {words}, not an object or a list: it has no {what}"


def describe(shape: Shape | None) -> str:
    """A shape as the prompt and the messages write it: ``Contact``, ``list[Event]``,
    ``text | NONE``, ``decimal text``."""
    if shape is None or shape.kind == "any":
        return "any"
    item, options = describe(shape.item), [describe(o) for o in shape.options]
    return {
        "object": shape.name or "object",
        "list": f"list[{item}]",
        "map": f"dict[text, {item}]",
        "tuple": shape.name or f"[{', '.join(options)}]",
        "union": " | ".join(options),
        "none": "NONE",
        "decimal": "decimal text",
        "text": f"text ({shape.name})" if shape.name and shape != ANSWER_TEXT else "text",
    }.get(shape.kind, shape.kind)


def choices_text(options: Sequence[Shape]) -> str:
    """``one of "red", "green" or NONE``: the values of a value that is one of ``options``, when
    each is a ``Literal``'s or an enum's (or ``NONE``); else ``""``."""
    values = [json.dumps(c) for o in options for c in o.choices]
    if not values or not all(o.choices or o.kind == "none" for o in options):
        return ""
    none = " or NONE" if any(o.kind == "none" for o in options) else ""
    return f"one of {', '.join(values)}{none}"


def fields_line(fields: Iterable[str]) -> str:
    """``its fields: id, name, email`` (the first 20): what an object has, for a message about
    a path that names a field it has not, before the run and while it runs."""
    shown = first_names(fields)
    return f"its fields: {shown}" if shown else "it has no fields"


def carries(shape: Shape, part: Shape) -> bool:
    """Whether ``part`` is ``shape`` or one of its fields, elements or options, at any depth
    (each shape looked at once: a type may reuse one record in many places)."""
    seen: set[int] = set()
    todo = [shape]
    while todo:
        current = todo.pop()
        if current == part:
            return True
        if id(current) not in seen:
            seen.add(id(current))
            todo += [s for _, s in current.fields] + list(current.options)
            todo += [current.item] if current.item is not None else []
    return False


def named_shapes(shape: Shape | None) -> list[Shape]:
    """The objects inside ``shape`` (itself first, then the ones its fields hold), each once:
    all of them (a shape nests at most ``_MAX_DEPTH`` levels)."""
    found: dict[tuple[Shape, int], Shape] = {}
    todo = [shape] if shape is not None else []
    while todo:
        current = todo.pop(0)
        if current.kind == "object" and (current, current.type_id) not in found:
            found[current, current.type_id] = current
            todo += [s for _, s in current.fields]
        elif current.item is not None:
            todo.append(current.item)
        else:
            todo += list(current.options)
    return list(found.values())
