"""Values between the stack and a tool: reading type annotations, converting popped values
to a parameter's declared type, and turning a tool's raw result into stack values.

The stack holds 64-bit integers, finite floats and strings only (see ``docs/language.md``,
*Values*); every conversion here keeps to that and fails with ``ValueError`` (or ``TypeError``)
that the extern turns into the library's own error, naming the tool and line.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import math
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from llassembly.language.program import NONE, Value

__all__ = [
    "EMPTY",
    "INT_MAX",
    "INT_MIN",
    "Converter",
    "accepts_none",
    "converter",
    "field_refuses",
    "first_line",
    "is_model",
    "is_subclass",
    "loaded",
    "short_repr",
    "strip_annotation",
    "to_value",
    "type_label",
]

Converter = Callable[[Any], Any]
EMPTY = inspect.Parameter.empty


def loaded(module: str, name: str) -> Any:
    """``module.name`` if ``module`` is already imported, else ``None``.

    A value can only be an instance of (or annotated with) a class whose module is loaded, so
    the engine checks for LangChain and LangGraph types this way without importing them.
    """
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


# --- type helpers -------------------------------------------------------------------------------


def strip_annotation(annotation: Any) -> Any:
    """Drop ``Annotated[...]`` and ``X | None`` wrappers (no ``None`` ever lives on the stack)."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
            continue
        args = get_args(annotation)
        if get_origin(annotation) in (typing.Union, _UnionType) and type(None) in args:
            rest = [a for a in args if a is not type(None)]
            if len(rest) == 1:
                annotation = rest[0]
                continue
        return annotation


_UnionType = type(int | None)


def accepts_none(annotation: Any) -> bool:
    """Whether a parameter of this type takes ``None`` (``X | None``, ``Optional[X]``, ``Any``)."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is Any or annotation is EMPTY or annotation is None:
        return True
    if get_origin(annotation) in (typing.Union, _UnionType):
        return type(None) in get_args(annotation)
    return False


def is_subclass(annotation: Any, base: type) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, base)


def is_model(annotation: Any) -> bool:
    return is_subclass(annotation, BaseModel)


def type_label(annotation: Any) -> str:
    """Return a short, model-readable name for a type: ``int``, ``JSON array of int``, ..."""
    ann = strip_annotation(annotation)
    if ann is Any or ann is EMPTY:
        return "any"
    if ann in (int, float, str):
        return str(ann.__name__)
    if ann is bool:
        return "bool (1 or 0)"
    if is_model(ann):
        fields = ", ".join(
            f'"{n}": {type_label(f.annotation)}' for n, f in ann.model_fields.items()
        )
        return f"JSON {ann.__name__} {{{fields}}}"
    origin, args = get_origin(ann), get_args(ann)
    if ann is dict or origin is dict:
        return "JSON object"
    if ann is list or origin in (list, tuple, set, frozenset):
        return f"JSON array of {type_label(args[0])}" if args else "JSON array"
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if is_subclass(ann, enum.Enum):
        return "one of " + ", ".join(json.dumps(m.value) for m in ann)
    return str(getattr(ann, "__name__", ann)).replace("typing.", "")


# --- converters: popped value -> declared type ---------------------------------------------------


INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _in_range(number: int) -> int:
    if not INT_MIN <= number <= INT_MAX:
        raise ValueError("outside the 64-bit range")
    return number


def _to_int(v: Any) -> int:
    if type(v) is int:
        return v
    if type(v) is float and v.is_integer():
        return _in_range(int(v))
    if type(v) is str:
        s = v.strip()
        try:
            return _in_range(int(s))
        except ValueError:
            f = float(s)
            if f.is_integer():
                return _in_range(int(f))
    raise ValueError("not a whole number")


def _finite(number: float) -> float:
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _to_float(v: Any) -> float:
    try:
        if type(v) is float or type(v) is int:
            return _finite(float(v))
        if type(v) is str:
            return _finite(float(v.strip()))
    except OverflowError:
        raise ValueError("too large for a float") from None
    raise ValueError("not a number")


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _to_bool(v: Any) -> bool:
    if type(v) is int or type(v) is float:
        if v == 1 or v == 0:
            return bool(v)
    elif type(v) is str and v.strip().lower() in _BOOL_TEXT:
        return _BOOL_TEXT[v.strip().lower()]
    raise ValueError("use 1 or 0")


def _to_str(v: Any) -> str:
    return v if type(v) is str else str(v)


def _identity(v: Any) -> Any:
    return v


def _from_json(parse: Callable[[str], Any], kind: type | None = None) -> Converter:
    """A converter for JSON-typed parameters: the value must be JSON text."""

    def convert(v: Any) -> Any:
        if type(v) is not str:
            raise ValueError("push it as JSON text")
        loaded = parse(v)
        if kind is not None and not isinstance(loaded, kind):
            raise ValueError(f"the JSON is not {'an object' if kind is dict else 'an array'}")
        return loaded

    return convert


def _general(adapter: TypeAdapter[Any]) -> Converter:
    """Lax pydantic validation of the value itself, then of the value read as JSON text."""

    def convert(v: Any) -> Any:
        try:
            return adapter.validate_python(v)
        except ValueError:
            if type(v) is not str:
                raise
            return adapter.validate_json(v)

    return convert


def converter(annotation: Any) -> Converter:
    """Build the one converter used for every value passed to a parameter of this type."""
    ann = strip_annotation(annotation)
    simple: dict[Any, Converter] = {int: _to_int, float: _to_float, bool: _to_bool, str: _to_str}
    if ann in simple:
        return simple[ann]
    if ann is Any or ann is EMPTY:
        return _identity
    if is_model(ann):
        return _from_json(ann.model_validate_json)
    if ann is dict or ann is list:
        return _from_json(json.loads, ann)
    if get_origin(ann) in (dict, list):
        return _from_json(TypeAdapter(ann).validate_json)
    return _general(TypeAdapter(ann))


def field_refuses(schema: Any, name: str, value: Any) -> str | None:
    """What the field ``name`` of a pydantic ``schema`` (a LangChain tool's ``args_schema``)
    says against ``value``, a converted argument: its type and constraints (``Field(ge=0)``,
    ``max_length``), as the tool validates it when invoked. ``None`` when it takes the value,
    or cannot judge one field alone (no pydantic schema, no such field, a failing validator):
    the run then decides."""
    if not is_model(schema) or name not in schema.model_fields:
        return None
    check = _field_adapter(schema, name)
    try:
        if check is not None:
            check.validate_python(value)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        return str(errors[0].get("msg", "")) if errors else first_line(exc)
    except Exception:  # a validator that fails otherwise: the run decides
        return None
    return None


@functools.lru_cache(maxsize=256)
def _field_adapter(schema: type[BaseModel], name: str) -> TypeAdapter[Any] | None:
    found = schema.model_fields[name]
    kind: Any = found.annotation
    if found.metadata:
        kind = typing.cast(Any, Annotated)[(kind, *found.metadata)]
    try:
        return TypeAdapter(kind)
    except Exception:  # a type pydantic cannot build a validator for alone
        return None


# --- result -> stack values ----------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    """Data inside a result as JSON: models dumped, sets as arrays, enums by value, and what
    pydantic writes as JSON (dates and times in ISO form, bytes as text, UUIDs, decimals,
    dataclasses); anything else is not JSON data (``TypeError``)."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    try:
        return to_jsonable_python(obj)
    except PydanticSerializationError:
        raise TypeError(type(obj).__name__) from None


_CONTAINERS = (dict, list, tuple, set, frozenset)


def short_repr(value: Any, limit: int | None = None) -> str:
    """``repr`` that never fails (an integer too long to print reads ``an integer of N bits``,
    data nested too deeply or an object whose ``repr`` raises reads as what it is), cut to
    ``limit`` characters when given. The one safe ``repr`` of the package."""
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except RecursionError:
        text = f"a {type(value).__name__} nested too deeply to show"
    except Exception:  # any object's repr may raise; this one must not
        text = f"a {type(value).__name__} that cannot be shown"
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def first_line(exc: BaseException) -> str:
    """A short, safe description of a conversion error (never the whole huge value)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    try:
        text = str(exc)
    except Exception:  # a message quoting an integer too long to print, or worse
        text = ""
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def to_value(x: Any) -> Value:
    """A tool's result as one stack value (see ``docs/language.md``, *Values*).

    Raises:
        ValueError: The result cannot be held: a number out of range, data nested too deeply,
            or an object whose conversion raises (never that object's own error).
    """
    try:
        return _to_value(x)
    except ValueError:
        raise
    except RecursionError:
        raise ValueError("the tool returned data nested too deeply to hold") from None
    except Exception as exc:
        bubble = loaded("langgraph.errors", "GraphBubbleUp")
        if bubble is not None and isinstance(exc, bubble):
            raise  # an interrupt from inside the object's own code: not a conversion error
        raise ValueError(
            f"the tool returned a {type(x).__name__} that cannot be read ({first_line(exc)})"
        ) from exc


def _to_value(x: Any) -> Value:
    t = type(x)
    if x is None:
        return NONE  # "no value", as a JSON null reads (see docs/language.md, *Values*)
    if t is float and not math.isfinite(x):
        raise ValueError(f"the tool returned a non-finite number ({x}); plans hold finite numbers")
    if t is int:
        if not INT_MIN <= x <= INT_MAX:
            raise ValueError(
                f"the tool returned {short_repr(x)} outside the 64-bit range; plans hold 64-bit "
                "integers"
            )
        return typing.cast(Value, x)
    if t is str or t is float:
        return typing.cast(Value, x)
    if t is bool:
        return 1 if x else 0
    if isinstance(x, enum.Enum):
        return _to_value(x.value)
    tool_message = loaded("langchain_core.messages.tool", "ToolMessage")
    if tool_message is not None and isinstance(x, tool_message):
        return _to_value(x.content)  # a tool that builds its own message: keep the content
    command = loaded("langgraph.types", "Command")
    if command is not None and isinstance(x, command):
        # a state update: the value is its ToolMessage's text
        update = x.update if isinstance(x.update, dict) else {}
        answers = [m for m in update.get("messages", []) if isinstance(m, tool_message or ())]
        return _to_value(answers[0].content) if answers else ""
    if isinstance(x, BaseModel):
        return x.model_dump_json()
    if isinstance(x, int):  # subclasses of the primitives become the primitive
        return _to_value(int(x))
    if isinstance(x, float):
        return float(x)
    if isinstance(x, str):
        return str.__str__(x)
    if x is not None and not isinstance(x, _CONTAINERS):
        try:  # a date, bytes, a UUID...: the JSON scalar pydantic writes, held as itself
            plain = to_jsonable_python(x)
        except PydanticSerializationError:
            plain = None
        if type(plain) in (str, int, float, bool):
            return _to_value(plain)
    try:
        return _dumps(x, _json_default)
    except TypeError:  # not JSON data as it is
        pass
    if isinstance(x, _CONTAINERS):
        # A dict or list is JSON text whatever it holds (the plan reads it by path): a key
        # JSON cannot have is written as its text, and so is a part with no JSON form.
        try:
            keyed = _text_keys(x)
        except RecursionError:
            raise ValueError("the tool returned data nested too deeply to hold") from None
        return _dumps(keyed, _json_or_text)
    return _text(x)


def _dumps(x: Any, default: Callable[[Any], Any]) -> str:
    """``x`` as compact JSON text; ``TypeError`` when ``default`` gives up on a part.

    Raises:
        ValueError: Data nested too deeply, NaN, an integer too long to write.
    """
    try:
        return json.dumps(
            x, separators=(",", ":"), ensure_ascii=False, default=default, allow_nan=False
        )
    except RecursionError:
        raise ValueError("the tool returned data nested too deeply to hold") from None
    except ValueError as exc:  # NaN, an integer too long to write, a model that cannot dump
        raise ValueError(
            f"the tool returned data that cannot be held as JSON ({first_line(exc)})"
        ) from None


def _text(x: Any) -> str:
    """The text of a result (or part of one) that has no JSON form."""
    try:
        return str(x)
    except RecursionError:
        raise ValueError("the tool returned data nested too deeply to hold") from None
    except Exception:  # the object's own __str__ may raise anything
        raise ValueError(f"the tool returned a {type(x).__name__} that cannot be held") from None


def _json_or_text(obj: Any) -> Any:
    """:func:`_json_default`, or the part's text when it has no JSON form."""
    try:
        return _text_keys(_json_default(obj))
    except TypeError:
        return _text(obj)


_JSON_KEYS = (str, int, float, bool, type(None))


def _text_keys(x: Any) -> Any:
    """``x`` with every dict key JSON cannot have (a tuple, a frozenset...) as its text
    (``RecursionError`` for data nested too deeply)."""
    if isinstance(x, dict):
        return {k if isinstance(k, _JSON_KEYS) else _text(k): _text_keys(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [_text_keys(v) for v in x]
    return x
