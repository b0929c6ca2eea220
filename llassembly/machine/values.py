"""Values between the stack and a tool: converting popped values to what a parameter takes,
and a tool's raw result to stack values.

The stack holds 64-bit integers, finite floats and strings only (see ``docs/language.md``,
*Values*); every conversion here keeps to that and fails with ``ValueError`` (or ``TypeError``)
that the extern turns into the library's own error, naming the tool and line. What a parameter
takes is read once, as a :class:`~llassembly.analysis.shapes.Shape` of its declared type.
"""

from __future__ import annotations

import enum
import json
import math
import sys
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from llassembly.analysis.shapes import Shape
from llassembly.language.limits import is_int64
from llassembly.language.program import NONE, Value

Converter = Callable[[Any], Any]


def loaded(module: str, name: str) -> Any:
    """``module.name`` if ``module`` is already imported, else ``None``.

    A value can only be an instance of (or annotated with) a class whose module is loaded, so
    the engine checks for LangChain and LangGraph types this way without importing them.
    """
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def label(shape: Shape) -> str:
    """A short, model-readable name for what a parameter takes: ``int``, ``bool (1 or 0)``,
    ``JSON array of int``, ``one of "a", "b"``..."""
    options = [o for o in shape.options if o.kind != "none"] if shape.kind == "union" else [shape]
    if len(options) != 1:
        return "any" if shape.kind == "any" else " | ".join(label(o) for o in options)
    (shape,) = options
    kind = shape.kind
    if shape.choices:
        return "one of " + ", ".join(json.dumps(c) for c in shape.choices)
    if shape.name == "bool":
        return "bool (1 or 0)"
    if kind in ("int", "float"):
        return kind
    if kind in ("text", "decimal"):
        return "str"
    if kind == "object":
        fields = ", ".join(f'"{n}": {label(f)}' for n, f in shape.fields)
        return f"JSON {shape.name} {{{fields}}}" if shape.name else "JSON object"
    if kind == "map":
        return "JSON object"
    if kind in ("list", "tuple"):
        item = shape.item if kind == "list" else None
        return (
            f"JSON array of {label(item)}"
            if item is not None and item.kind != "any"
            else "JSON array"
        )
    return "number" if kind == "number" else "any"


# --- converters: popped value -> what the parameter takes ----------------------------------------


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


def _in_range(number: int) -> int:
    if not is_int64(number):
        raise ValueError("outside the 64-bit range")
    return number


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


def _json_of(kind: type) -> Converter:
    """A converter for a structured parameter: the value must be JSON text of that kind."""
    what = "an object" if kind is dict else "an array"

    def convert(v: Any) -> Any:
        if type(v) is not str:
            raise ValueError("push it as JSON text")
        try:
            data = json.loads(v)
        except RecursionError:
            raise ValueError("nested too deeply") from None
        if not isinstance(data, kind):
            raise ValueError(f"the JSON is not {what}")
        return data

    return convert


_BY_KIND: dict[str, Converter] = {
    "int": _to_int,
    "float": _to_float,
    "number": _to_float,
    "text": _to_str,
    "decimal": _to_str,
    "object": _json_of(dict),
    "map": _json_of(dict),
    "list": _json_of(list),
    "tuple": _json_of(list),
}


def converter(shape: Shape) -> Converter:
    """The one converter used for every value passed to a parameter of this shape: a popped
    value becomes the JSON-ready value the parameter takes (a number, a text, the object or
    array its JSON text holds); the parameter's own validation (its declared schema) comes
    after it."""
    options = [o for o in shape.options if o.kind != "none"] if shape.kind == "union" else [shape]
    if len(options) != 1:
        return _identity  # a union of kinds: the schema's validation decides
    if options[0].name == "bool":
        return _to_bool
    return _BY_KIND.get(options[0].kind, _identity)


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
        if not is_int64(x):
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
