"""A tool as a plan calls it (an *extern*), read from what the tool declares about itself.

A tool's arguments (names, order, types, defaults, descriptions) come from its declared schema,
the contract LangChain itself reads: ``tool.tool_call_schema`` (a pydantic model, or the JSON
schema of an MCP tool or any ``StructuredTool`` built from one). A plain typed function is read
the way LangChain reads one (``create_schema_from_function``: its signature and docstring). The
results come from the return annotation where there is one, the output schema an MCP server
declares where there is one, else "any". The prompt, the verifier's checks and the run-time
conversion all read this one description: :attr:`Extern.params` (what the runtime injects,
``ToolRuntime``, ``InjectedState``, a ``RunnableConfig``..., is not among them), checked by
:meth:`Extern.convert_args` on every path, before any call (:meth:`Extern.refuses` for one
literal before the run), and :meth:`Extern.to_values` for the results.

The stack holds 64-bit integers, finite floats and strings only (see ``docs/language.md``,
*Values*): the conversions of popped values to what a parameter takes (:func:`converter`, by
the :class:`~llassembly.analysis.shapes.Shape` of its declared type) and of a result to stack
values (:func:`to_value`) keep to that, and fail with ``ValueError`` (or ``TypeError``) that
the extern turns into the library's own error, naming the tool and line.

Example:
    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> ext = externs_from([add])["add"]
    >>> ext.to_values(ext.call(ext.convert_args([2, "3"])))
    (5,)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import inspect
import json
import math
import re
import sys
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    NotRequired,  # pydantic reads these on Python 3.11
    TypeAlias,
    get_args,
    get_origin,
)

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python
from typing_extensions import TypedDict

from llassembly import compat, errors
from llassembly.analysis import summary as _summary
from llassembly.analysis import verifier as _verifier
from llassembly.analysis.constants import Semantics
from llassembly.analysis.shapes import JSON_TEXT, Shape, choices_text, hidden, shape_of
from llassembly.analysis.summary import PlanSummary
from llassembly.analysis.toolset import tool_shapes
from llassembly.errors import clip, first_line
from llassembly.language.instructions import register_index
from llassembly.language.limits import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_TOOL_CALLS,
    MAX_ARGUMENT_DEPTH,
    is_int64,
)
from llassembly.language.parser import no_constant, size_word
from llassembly.language.program import (
    NONE,
    PlainAnswer,
    Program,
    Template,
    Value,
    fewest_arguments,
)
from llassembly.language.templates import render
from llassembly.machine import schemas

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

Converter = Callable[[Any], Any]
_NAME_RE = re.compile(r"[A-Za-z_][\w.]*(?:-[\w.]+)*\Z", re.ASCII)  # as the parser reads one
_LEFT_OUT: Any = object()  # what NONE converts to where the tool has a default: left out
_PLAIN_TYPES = (int, float, str, bool, Any)


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter a tool takes from the stack.

    Attributes:
        name: The keyword the tool is called with.
        annotation: The declared type, with its constraints (``Annotated[float, Field(le=100)]``);
            ``Any`` when the schema says nothing.
        description: What the argument means, for the prompt (may be empty).
        has_default: The tool has a default for it (or does not require it): a plan may push
            ``NONE`` to leave it out.
        default_text: The default as the prompt shows it (``10``, ``None``), or ``""`` when it
            is not a plain value.
    """

    name: str
    annotation: Any
    description: str = ""
    has_default: bool = False
    default_text: str = ""


class _Refused(Exception):
    """A value a parameter does not take, and why (internal)."""


@dataclass(frozen=True, eq=False)
class Extern:
    """A tool the plan can ``CALL``. Build it with :func:`externs_from`.

    Attributes:
        name: The name the plan calls it by.
        params: Parameters taken from the stack, in push order.
        n_results: Values a call pushes (0, 1, or the length of a ``tuple[...]`` result).
        description: The tool's description.
        tool: The LangChain tool, or ``None`` for a plain callable.
        func: The plain callable (``None`` for a tool).
        injected: Names of parameters the runtime injects (not taken from the stack).
        runtime_param: The parameter that receives the ``ToolRuntime``, if any.
        result_types: Declared types of the results, one per value pushed (empty: any).
        query: It is the built-in query (``query_text``), answered by a model, not run.
        schema: The declared schema the arguments are validated against (the tool's pydantic
            ``tool_call_schema``, or one made from :attr:`params`).
        structured: The plan reads the tool's structured output (an MCP tool with an output
            schema) rather than its text content.
        unpacks: The tool returns a ``tuple[...]``: a call pushes its values (a ``tuple[int]``
            its one int, not the tuple).
    """

    name: str
    params: tuple[Param, ...]
    n_results: int = 1
    description: str = ""
    tool: BaseTool | None = None
    func: Callable[..., Any] | None = None
    injected: tuple[str, ...] = ()
    runtime_param: str | None = None
    result_types: tuple[Any, ...] = ()
    query: bool = False
    schema: Any = None
    structured: bool = False
    unpacks: bool = False
    _converters: tuple[Converter, ...] = field(init=False, repr=False)
    _validator: TypeAdapter[Any] | None = field(init=False, repr=False)
    _is_async: bool = field(init=False, repr=False)
    _as_text: frozenset[str] = field(init=False, repr=False)  # (Json[...]: the tool parses it)

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("_converters", tuple(converter(p.annotation) for p in self.params))
        set_("_as_text", frozenset(p.name for p in self.params if _json_text(p.annotation)))
        set_("_validator", _validator(self.schema, self.params))
        set_("_is_async", self.func is not None and inspect.iscoroutinefunction(self.func))

    # -- arguments ------------------------------------------------------------------------------

    def convert_args(
        self, values: Sequence[Value], *, line: int = 0, source: str = ""
    ) -> dict[str, Any]:
        """Popped values (first pushed first) as the call's arguments, checked against the
        tool's declared schema: as it validates them (a pydantic model built from its object, a
        date from its text); for a LangChain tool that validates its calls itself (a pydantic
        ``args_schema``), as converted (the JSON-ready values a model's call of it would hold).

        Raises:
            ToolArgumentError: A value does not fit its parameter, the schema refuses the
                arguments (the first problem, with its argument), or the count is wrong.
        """
        params, tool = self.params, self.name

        def refused(message: str, argument: str = "") -> errors.ToolArgumentError:
            return errors.ToolArgumentError(
                message, tool=tool, argument=argument, line=line, source=source
            )

        if not fewest_arguments(self) <= len(values) <= len(params):
            raise refused(f"tool {tool!r} takes {len(params)} arguments, got {len(values)}")
        args: dict[str, Any] = {}
        for position, value in enumerate(values):
            name = params[position].name
            try:
                converted = self._converted(position, value)
            except _Refused as exc:
                raise refused(f"tool {tool!r}, {exc}", argument=name) from exc.__cause__
            if converted is not _LEFT_OUT:
                args[name] = converted
        if self._validator is None:
            return args
        try:
            validated = self._validator.validate_python(args)
        except TypeError as exc:  # a constraint pydantic cannot apply (`"minimum": "5"`)
            detail = f"the arguments do not fit its schema ({first_line(exc)})"
            raise refused(f"tool {tool!r}, {detail}") from exc
        except ValidationError as exc:
            given = {p.name: v for p, v in zip(params, values, strict=False)}
            raise self.refused_by_schema(exc, given, line=line, source=source) from None
        if self.unvalidated:
            return args
        fields = validated if isinstance(validated, dict) else vars(validated)
        kept = self._as_text  # as validated, but JSON text the tool reads; defaults the tool's
        return {name: args[name] if name in kept else fields[name] for name in args}

    @property
    def unvalidated(self) -> bool:
        """Whether :meth:`convert_args` gives a call's arguments as converted, not validated: the
        tool validates them itself (a pydantic ``args_schema``), as a model's call of it, and
        that validation may change them."""
        model = isinstance(getattr(self.tool, "args_schema", None), type)
        return model and self._validator is not None

    def refused_by_schema(
        self, exc: BaseException, given: Mapping[str, Any], *, line: int = 0, source: str = ""
    ) -> errors.ToolArgumentError:
        """The call's error when the tool's schema refuses its arguments ``given`` as ``exc`` says,
        naming the argument pydantic names (``""``: all together, a model validator's refusal)."""
        name, detail = _first_error(exc)
        at = next((i for i, p in enumerate(self.params) if name == p.name and name in given), -1)
        reason = f"the arguments do not fit its schema ({detail})"
        reason = self._refusal(at, given[name], detail) if at >= 0 else reason
        return errors.ToolArgumentError(
            f"tool {self.name!r}, {reason}", tool=self.name, argument=name, line=line, source=source
        )

    def refuses(self, position: int, value: Value | Template) -> str | None:
        """Why the tool refuses ``value`` for its parameter at ``position`` (``None``: it takes
        it), asked by the check before the run: converted as :meth:`convert_args` does, then
        checked against the parameter's declared type and constraints. A text with placeholders
        (a :class:`~llassembly.language.program.Template`) is refused when no text it may become
        fits: see :func:`_never_fits`."""
        if isinstance(value, Template):
            reason = _never_fits(self._shape(position), value.pieces)
            return None if reason is None else self._refusal(position, value, reason)
        try:
            converted = self._converted(position, value)
            if converted is not _LEFT_OUT:
                _adapter(self.params[position].annotation).validate_python(converted)
        except _Refused as exc:
            return str(exc)
        except ValidationError as exc:
            return self._refusal(position, value, _first_error(exc, within=True)[1])
        except Exception:  # a converter, type or validator that cannot judge one value alone
            return None  # the run decides
        return None

    def _converted(self, position: int, value: Value) -> Any:
        """``value`` as the parameter at ``position`` takes it (:data:`_LEFT_OUT`: left out);
        raises :class:`_Refused` with the reason when it does not fit."""
        param = self.params[position]
        if value is None:
            shape = self._shape(position)
            if param.has_default:
                return _LEFT_OUT
            if shape.kind in ("any", "none") or any(o.kind == "none" for o in shape.options):
                return None  # X | None, Optional[X], Any
            raise _Refused(
                f"argument {param.name!r}: NONE (no value) was pushed, but the tool has no "
                f"default for it and takes {label(shape)}; push a value"
            )
        try:
            converted = self._converters[position](value)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise _Refused(self._refusal(position, value, first_line(exc))) from exc
        if isinstance(converted, dict | list) and _deeper(converted, MAX_ARGUMENT_DEPTH):
            levels = f"nested more than {MAX_ARGUMENT_DEPTH} levels deep"
            raise _Refused(f"argument {param.name!r}: {levels}")
        return converted

    def _refusal(self, position: int, value: Value | Template, detail: str) -> str:
        param = self.params[position]
        shown = clip(str(value), 80) if isinstance(value, Template) else short_repr(value, 80)
        expected = f"expected {label(self._shape(position))}, got {shown} ({detail})"
        return f"argument {param.name!r}: {expected}"

    def _shape(self, position: int) -> Shape:
        """The shape of the parameter at ``position``, as the tool reads it."""
        return shape_of(self.params[position].annotation, read=True)

    # -- running --------------------------------------------------------------------------------

    def call(self, args: dict[str, Any], *, line: int = 0, source: str = "") -> Any:
        """Run the tool with :meth:`convert_args`'s arguments (the caller adds the injected
        ones) and return what the plan reads of its result (:meth:`result_of`). A plain function
        is called directly; a LangChain tool is invoked with a tool call, as an agent's tool node
        invokes it, so a failure the tool handles itself (an error ``ToolMessage``) is one here.

        Raises:
            UsageError: The tool is async only (use :meth:`acall`).
            ToolException: The tool answered with an error ``ToolMessage``.
            ToolArgumentError: The tool's ``args_schema`` refused them (at ``line``, ``source``).
        """
        if self.tool is not None:
            with self._refusing(args, line, source) as noted:
                return self.result_of(compat.invoke_as_call(self._recorder, args, noted))
        if self.func is None or self._is_async:
            raise errors.UsageError(
                f"tool {self.name!r} is async: run the plan with the async node or middleware"
            )
        return self.func(**args)

    @contextlib.contextmanager
    def _refusing(self, args: dict[str, Any], line: int, source: str) -> Iterator[compat.Recorded]:
        """A call's record; within it, the schema refusing ``args`` is the call's error."""
        noted = compat.Recorded()
        try:
            yield noted
        except Exception as exc:
            if exc is noted.refused:
                raise self.refused_by_schema(exc, args, line=line, source=source) from exc
            raise

    async def acall(self, args: dict[str, Any], *, line: int = 0, source: str = "") -> Any:
        """Async :meth:`call`: awaits coroutine functions and ``tool.ainvoke``; a plain function
        runs on a thread (as ``ainvoke`` runs a sync tool), leaving the event loop free."""
        if self.tool is not None:
            with self._refusing(args, line, source) as noted:
                return self.result_of(await compat.ainvoke_as_call(self._recorder, args, noted))
        if self.func is None:
            raise errors.UsageError(f"extern {self.name!r} has neither a tool nor a function")
        return await (self.func(**args) if self._is_async else asyncio.to_thread(self.func, **args))

    @functools.cached_property
    def uninjected(self) -> tuple[str, ...]:
        """The injected parameters :meth:`call` cannot give (it passes the plan's arguments, and a
        tool's ``invoke`` its config): those its input schema (a function: signature) requires."""
        if self.tool is not None and self.injected:
            fields = getattr(self.tool.get_input_schema(), "model_fields", {})
            return tuple(n for n in self.injected if n in fields and fields[n].is_required())
        params = inspect.signature(self.func).parameters if self.func and self.injected else {}
        return tuple(n for n in self.injected if params[n].default is inspect.Parameter.empty)

    @functools.cached_property
    def _recorder(self) -> BaseTool:
        """The copy of the tool that notes what its code returned."""
        assert self.tool is not None
        return compat.recording_tool(self.tool)

    @property
    def async_only(self) -> bool:
        """Whether the tool can only be awaited (a coroutine function, or a LangChain tool
        built from one): a synchronous run cannot call it."""
        if (tool := self.tool) is None:
            return self._is_async
        return getattr(tool, "func", True) is None and getattr(tool, "coroutine", None) is not None

    # -- results --------------------------------------------------------------------------------

    def result_of(self, output: Any) -> Any:
        """What the plan reads of what the tool's code returned: a ``content_and_artifact``
        tool's content, or its structured output when the plan reads that (an MCP tool with
        an output schema); anything else as it is."""
        pair = isinstance(output, tuple) and len(output) == 2
        if self.tool is None or self.tool.response_format != "content_and_artifact" or not pair:
            return output
        content, artifact = output
        found = compat.mcp_structured(artifact) if self.structured else None
        if found is not None:
            return found
        if isinstance(content, list):  # content blocks: their text, as the message's text
            return "".join(
                b if isinstance(b, str) else str(b.get("text", ""))
                for b in content
                if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
            )
        return content

    def to_values(self, result: Any, *, line: int = 0, source: str = "") -> tuple[Value, ...]:
        """A raw result as stack values in natural order (the emulator pushes them so the first
        one pops first).

        Raises:
            AsmRuntimeError: A multi-result tool did not return a tuple/list of that length, or
                a value cannot be held.
        """
        n = self.n_results
        try:
            if n == 1 and not (self.unpacks and isinstance(result, (tuple, list))):
                return (to_value(result),)
            if n == 0:
                return ()
            if not isinstance(result, (tuple, list)) or len(result) != n:
                got = f"{len(result)} values" if isinstance(result, (tuple, list)) else "one value"
                msg = f"tool {self.name!r} is annotated to return {n} values but returned {got}"
                raise errors.AsmRuntimeError(msg, line=line, source=source, words=msg)
            return tuple(to_value(r) for r in result)
        except ValueError as exc:
            held = f"tool {self.name!r} returned a value a plan cannot hold"
            message = f"tool {self.name!r}: {exc}"
            raise errors.AsmRuntimeError(message, line=line, source=source, words=held) from exc


def _json_text(annotation: Any) -> bool:
    """Whether a parameter takes JSON text the tool parses itself (pydantic's ``Json[...]``)."""
    return shape_of(annotation) == JSON_TEXT


def _deeper(value: Any, levels: int) -> bool:
    """Whether objects and arrays nest in ``value`` more than ``levels`` deep (level by level:
    no recursion, each part seen once)."""
    level = [value]
    for _ in range(levels):
        level = [
            part
            for v in level
            if isinstance(v, dict | list | tuple)
            for part in (v.values() if isinstance(v, dict) else v)
        ]
    return any(isinstance(v, dict | list | tuple) for v in level)


def _first_error(exc: Any, within: bool = False) -> tuple[str, str]:
    """The argument of pydantic's (v1's too) first error (``""``: none), its text led by where
    in the argument it is (``payee.iban: Field required``; ``within``: one argument's value)."""
    found = exc.errors(include_url=False) if isinstance(exc, ValidationError) else exc.errors()
    if not found:
        return "", first_line(exc)
    loc = found[0].get("loc") or ()
    loc = ("", *loc) if within else loc or ("",)
    said = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in loc[1:]).lstrip(".")
    message = str(found[0].get("msg", ""))
    return str(loc[0]), f"{said}: {message}" if said else message


_cached_adapter = functools.lru_cache(maxsize=512)(TypeAdapter)


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return _cached_adapter(annotation)
    except TypeError:  # an annotation that cannot be hashed
        return TypeAdapter(annotation)


def _validator(schema: Any, params: Sequence[Param]) -> TypeAdapter[Any] | None:
    """What validates a call's arguments: the declared pydantic schema, else a typed dict of the
    parameters; ``None`` when the conversion alone gives what the parameters take (unconstrained
    plain ``int``/``float``/``str``/``bool``, and no validator of the schema's own)."""
    model = schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
    checks = model.__pydantic_decorators__ if model is not None else None
    own = checks and (checks.model_validators or checks.field_validators or checks.root_validators)
    if not own and all(p.annotation in _PLAIN_TYPES for p in params):
        return None
    if model is not None:
        return _adapter(model)
    fields = {p.name: NotRequired[p.annotation] if p.has_default else p.annotation for p in params}
    return TypeAdapter(TypedDict("Arguments", fields))  # type: ignore[operator]


# --- what a parameter takes: its label, the converter of a popped value --------------------------


def loaded(module: str, name: str) -> Any:
    """``module.name`` if ``module`` is already imported, else ``None``.

    A value can only be an instance of (or annotated with) a class whose module is loaded, so
    the engine checks for LangChain and LangGraph types this way without importing them.
    """
    return getattr(sys.modules.get(module), name, None)  # (None has none of the names asked)


def label(shape: Shape, inside: bool = False) -> str:
    """A short, model-readable name for what a parameter takes: ``int``, ``bool (1 or 0)``,
    ``JSON array of int``, ``one of "a", "b"``...; a record with its fields' types, a record
    ``inside`` it with their names only (so the words stay as long as its declaration)."""
    options = _taken(shape)
    if choices := choices_text(options):
        return choices
    if len(options) != 1:
        return " | ".join(label(o, inside) for o in options)  # (a union: see _taken)
    (shape,) = options
    if shape.kind == "object" and shape.name:  # inside: by its fields' names (a name is shared?)
        said = (f'"{n}"' + ("" if inside else f": {label(f, True)}") for n, f in shape.fields)
        return f"JSON {'object' if inside else shape.name} {{{clip(', '.join(said), 500)}}}"
    if shape.kind == "list" and shape.item is not None and shape.item.kind != "any":
        return f"JSON array of {label(shape.item, inside)}"
    return _KINDS.get("bool" if shape.name == "bool" else shape.kind, _NO_KIND)[1]


def _taken(shape: Shape) -> list[Shape]:
    """The shapes a parameter of ``shape`` takes besides ``NONE``."""
    return [o for o in shape.options if o.kind != "none"] if shape.kind == "union" else [shape]


_NUMBER_TEXT = frozenset("+-._eE")  # with digits and spaces: every character of a number's text


def _never_fits(shape: Shape, pieces: Sequence[str]) -> str | None:
    """Why no text made of ``pieces``, anything between them, fits a parameter of ``shape``
    (``None``: one may), as its converter judges text before any validator may rewrite it: a
    number's text holds digits, spaces and ``+-._eE`` only. Anything else (a ``Literal`` a
    validator may read case-blind, a union) is the run's to judge."""
    options = _taken(shape)
    if len(options) != 1 or options[0].kind not in ("int", "float", "number"):
        return None
    odd = [c for c in "".join(pieces) if not (c.isdecimal() or c.isspace() or c in _NUMBER_TEXT)]
    if options[0].name == "bool" or not odd:
        return None
    return f"its text around the placeholders holds {odd[0]!r}, which no number holds"


def _to_int(v: Any) -> int:
    if type(v) is int:
        return v  # (the stack holds 64-bit integers only)
    if type(v) is str:
        try:
            v = int(v.strip())
        except ValueError:
            v = float(v.strip())
    if type(v) is float and v.is_integer():
        v = int(v)
    if type(v) is not int:
        raise ValueError("not a whole number")
    if not is_int64(v):
        raise ValueError("outside the 64-bit range")
    return v


def _to_float(v: Any) -> float:
    try:
        number = float(v.strip() if type(v) is str else v)
    except OverflowError:
        raise ValueError("too large for a float") from None
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _to_bool(v: Any) -> bool:
    if type(v) is int or type(v) is float:
        if v == 1 or v == 0:
            return bool(v)
    elif type(v) is str and v.strip().lower() in _BOOL_TEXT:
        return _BOOL_TEXT[v.strip().lower()]
    raise ValueError("use 1 or 0")


def _json_of(kind: type) -> Converter:
    """A converter for a structured parameter: the value must be JSON text of that kind."""
    what = "an object" if kind is dict else "an array"

    def convert(v: Any) -> Any:
        if type(v) is not str:
            raise ValueError("push it as JSON text")
        data = json.loads(v, parse_constant=no_constant)  # (too deep: a RecursionError, said so)
        if not isinstance(data, kind):
            raise ValueError(f"the JSON is not {what}")
        return data

    return convert


_KINDS: dict[str, tuple[Converter, str]] = {
    "bool": (_to_bool, "bool (1 or 0)"),
    "int": (_to_int, "int"),
    "float": (_to_float, "float"),
    "number": (_to_float, "number"),
    "text": (str, "str"),
    "decimal": (render, "decimal number"),  # (a float as the plan shows it: 250.4, not 250.40..01)
    "object": (_json_of(dict), "JSON object"),
    "map": (_json_of(dict), "JSON object"),
    "list": (_json_of(list), "JSON array"),
    "tuple": (_json_of(list), "JSON array"),
}
_NO_KIND: tuple[Converter, str] = (lambda v: v, "any")  # none, any, a union: its validation alone


def converter(annotation: Any) -> Converter:
    """The one converter used for every value passed to a parameter of this declared type: a
    popped value becomes the JSON-ready value the parameter takes (a number, a text, the object
    or array its JSON text holds); the parameter's own validation (its declared schema) comes
    after it (a union of kinds: that validation alone, JSON text of an object or a list it
    may be read as that structure first)."""
    options = _taken(shape_of(annotation))
    if len(options) > 1:
        kinds = tuple(_STRUCTURES[o.kind] for o in options if o.kind in _STRUCTURES)
        return _json_or_as_is(kinds, annotation) if kinds else _NO_KIND[0]
    one = options[0]
    return _KINDS.get("bool" if one.name == "bool" else one.kind, _NO_KIND)[0]


_STRUCTURES = {"object": dict, "map": dict, "list": list, "tuple": list}


def _json_or_as_is(kinds: tuple[type, ...], annotation: Any) -> Converter:
    """A converter for a union with structures among its kinds: JSON text of a structure of
    ``kinds`` is that structure where the declared type takes it (``str | list[str]`` keeps
    ``[1, 2]`` as text); any other value goes to the union's validation as it is."""

    def fits(data: Any) -> bool:
        try:
            _adapter(annotation).validate_python(data)
        except ValidationError:
            return False
        return True

    def convert(v: Any) -> Any:
        if type(v) is str and v.lstrip()[:1] in ("{", "["):
            try:
                data = json.loads(v, parse_constant=no_constant)
            except (ValueError, RecursionError):  # (too deep, NaN: text all the same)
                return v
            return data if isinstance(data, kinds) and fits(data) else v
        return v

    return convert


# --- result -> stack values ----------------------------------------------------------------------


_CONTAINERS = (dict, list, tuple, set, frozenset)
_TEXT_OR_FLOAT = (float, str)


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
    return text if limit is None else clip(text, limit)


def to_value(x: Any) -> Value:
    """A tool's result as one stack value (see ``docs/language.md``, *Values*).

    Raises:
        ValueError: The result cannot be held: a number out of range, data nested too deeply,
            or an object whose conversion raises (never that object's own error).
    """
    try:
        return _to_value(x)
    except RecursionError:
        raise ValueError("the tool returned data nested too deeply to hold") from None
    except Exception as exc:
        if isinstance(exc, (ValueError, *compat.bubbling_errors())):
            raise  # (an interrupt from inside the object's own code: not a conversion error)
        raise ValueError(
            f"the tool returned a {type(x).__name__} that cannot be read ({first_line(exc)})"
        ) from exc


def _to_value(x: Any) -> Value:
    t = type(x)
    if x is None:
        return NONE  # "no value", as a JSON null reads (see docs/language.md, *Values*)
    if t is float and not math.isfinite(x):
        raise ValueError(f"the tool returned a non-finite number ({x}); plans hold finite numbers")
    if t is str or t is float:
        return typing.cast(Value, x)
    if t is bool:
        return 1 if x else 0
    if isinstance(x, enum.Enum):
        return _to_value(x.value)
    if isinstance(x, int):  # subclasses of the primitives become the primitive
        if not is_int64(number := int(x)):
            raise ValueError(
                f"the tool returned {short_repr(number)} outside the 64-bit range; plans hold "
                "64-bit integers"
            )
        return number
    if isinstance(x, _TEXT_OR_FLOAT):
        return _to_value(float(x) if isinstance(x, float) else str.__str__(x))
    tool_message = loaded("langchain_core.messages.tool", "ToolMessage") or ()  # (): not loaded
    if isinstance(x, tool_message):  # a tool that builds its own message: its content, or
        content = x.content  # the text of its blocks
        blocks = not isinstance(content, str) and all(isinstance(b, dict) for b in content)
        return _to_value(x.text if blocks else content)
    if isinstance(x, loaded("langgraph.types", "Command") or ()):
        # a state update: the value is its ToolMessage's text
        update = x.update if isinstance(x.update, dict) else {}
        answers = [m for m in update.get("messages", []) if isinstance(m, tool_message)]
        if not answers:  # (as the agent's tool node refuses it: no message answers the call)
            raise ValueError("the tool returned a Command whose update holds no ToolMessage")
        return _to_value(answers[0])
    plain: Any
    if isinstance(x, BaseModel):  # (a root model is its root, as its shape says)
        try:
            plain = x.model_dump(mode="json", fallback=_text)
        except UnicodeDecodeError:  # (bytes that are no UTF-8 in it: each part as JSON can)
            plain = x.model_dump()
        return _to_value(plain) if x.__pydantic_root_model__ else _dumps(plain)  # (NaN refused)
    if not isinstance(x, _CONTAINERS):
        try:  # a date, bytes, a UUID, a dataclass...: as pydantic writes it (a part it cannot
            plain = to_jsonable_python(x, fallback=_text)  # write as its text), held as itself
        except (PydanticSerializationError, UnicodeDecodeError):  # (bytes that are no UTF-8)
            if not dataclasses.is_dataclass(x):
                return _text(x)
            plain = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}  # (each part)
        return _to_value(plain) if type(plain) in (str, int, float, bool) else _dumps(plain)
    # A dict or list is JSON text whatever it holds (the plan reads it by path): a part with
    # no JSON form is written as its text, and so is a key JSON cannot have.
    try:
        return _dumps(x)
    except TypeError:  # a key JSON cannot have
        return _dumps(_text_keys(x))


def _dumps(x: Any) -> str:
    """``x`` as compact JSON text; ``TypeError`` for a key JSON cannot have, ``ValueError`` for
    NaN or an integer too long to write (data nested too deeply: see :func:`to_value`)."""
    try:
        return json.dumps(
            x, separators=(",", ":"), ensure_ascii=False, default=_json_or_text, allow_nan=False
        )
    except ValueError as exc:  # NaN, an integer too long to write, a model that cannot dump
        raise ValueError(
            f"the tool returned data that cannot be held as JSON ({first_line(exc)})"
        ) from None


def _text(x: Any) -> str:
    """The text of a result (or part of one) that has no JSON form."""
    try:
        return str(x)
    except Exception as exc:  # the object's own __str__ may raise anything
        if isinstance(exc, (RecursionError, *compat.bubbling_errors())):
            raise  # (to_value says so; an interrupt from the object's own code passes)
        raise ValueError(f"the tool returned a {type(x).__name__} that cannot be held") from None


def _json_or_text(obj: Any) -> Any:
    """Data inside a result as JSON: models dumped, sets as arrays, enums by value, and what
    pydantic writes as JSON (dates and times in ISO form, bytes as text, UUIDs, decimals,
    dataclasses), with keys as :func:`_text_keys` writes them; anything else as its text."""
    if isinstance(obj, BaseModel):
        data: Any = obj.model_dump(mode="json", fallback=_text)
    elif isinstance(obj, (set, frozenset)):
        data = list(obj)
    elif isinstance(obj, enum.Enum):
        data = obj.value
    else:
        try:
            data = to_jsonable_python(obj, fallback=_text)
        except (PydanticSerializationError, UnicodeDecodeError):
            return _text(obj)
    return _text_keys(data)


_JSON_KEYS = (str, int, float, bool, type(None))


def _text_keys(x: Any) -> Any:
    """``x`` with every dict key JSON cannot have (a tuple, a frozenset...) as its text
    (``RecursionError`` for data nested too deeply)."""
    if isinstance(x, dict):
        return {k if isinstance(k, _JSON_KEYS) else _text(k): _text_keys(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [_text_keys(v) for v in x]
    return x


# --- reading a tool's declared schema -----------------------------------------------------------


def _extern_of(item: Any, key: str | None, where: str) -> Extern:
    """One tool of the tools argument as an extern (the adapter of :func:`tool_shapes`), read as
    the module doc says, each parameter's declared constraints kept with its type (a JSON
    schema's properties as types the checks and pydantic read)."""
    # (BaseTool is loaded if the item is one)
    is_tool = isinstance(item, loaded("langchain_core.tools.base", "BaseTool") or ())
    if isinstance(item, Extern) or is_tool:
        if key is not None and key != item.name:
            own = "extern" if isinstance(item, Extern) else "LangChain tool"
            raise errors.UsageError(
                f"{where}: the {own} is named {item.name!r}; key it by its name, or give it "
                f"the name {key!r} (@tool({key!r}) for a LangChain tool)"
            )
        if isinstance(item, Extern):
            return item
    elif not callable(item):
        raise errors.UsageTypeError(
            f"{where}: {short_repr(item, 80)} is neither a LangChain tool nor a callable"
        )
    name = item.name if is_tool else key if key is not None else getattr(item, "__name__", "")
    if not _NAME_RE.match(name):
        raise errors.UsageError(
            f"tool name {name!r} cannot be written in a plan: use letters, digits, '_', '.', '-' "
            "(between them) and start with a letter or '_' (give the tool a name, e.g. "
            "@tool('my_tool'))"
        )
    if register_index(name) is not None or size_word(name):
        kind = "a size word" if size_word(name) else "a register name"
        raise errors.UsageError(
            f"tool name {name!r} is {kind} in the plan language: rename the tool"
        )
    output = compat.mcp_output_schema(item) if is_tool else None
    func = (getattr(item, "func", None) or getattr(item, "coroutine", None)) if is_tool else item
    try:  # the function's resolved annotations, extras kept
        hints = typing.get_type_hints(func if callable(func) else item._run, include_extras=True)
    except Exception as exc:
        raise errors.UsageError(
            f"cannot resolve the type annotations of tool {name!r}: {exc}"
        ) from exc
    declared = getattr(item, "args_schema", None) if is_tool else None
    if isinstance(declared, type):  # (LangChain reads injected arguments from it too)
        hints = {**hints, **_hints_of(declared)}
    injected, runtime = _injected(hints)
    if is_tool:
        schema, about = compat.call_schema(item), item.description or ""
    else:
        from langchain_core.tools.base import create_schema_from_function

        signature = inspect.signature(item).parameters.values()
        variadic = [p for p in signature if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if variadic:  # (each as the signature writes it, without its type: *args, **kwargs)
            shown = ", ".join(str(p.replace(annotation=p.empty)) for p in variadic)
            raise errors.UsageError(
                f"tool {name!r} takes {shown}: a plan passes each argument by its place on the "
                "stack, so every argument needs a name and a type (e.g. def f(city: str)), or "
                "give a LangChain tool whose args_schema declares them"
            )
        try:
            schema = create_schema_from_function(
                name,
                item,
                filter_args=[*injected, "self", "run_manager", "callbacks"],
                parse_docstring=True,
                error_on_invalid_docstring=False,
                include_injected=False,
            )
        except Exception as exc:
            raise errors.UsageError(f"cannot read the parameters of tool {name!r}: {exc}") from exc
        taken = {*typing.cast(type[BaseModel], schema).model_fields, *injected, "self"}
        left_out = [repr(p.name) for p in signature if p.default is p.empty and p.name not in taken]
        if left_out:  # (LangChain's schema drops them; the tool node would fail the same way)
            raise errors.UsageError(
                f"tool {name!r} requires {', '.join(left_out)}, which its schema leaves out "
                "(LangChain leaves out a parameter whose name starts with '_', run_manager and "
                "callbacks), so no call could pass it: rename it or give it a default"
            )
        about = inspect.getdoc(item) or ""
    returns = hints.get("return", Any)
    if is_tool and item.response_format == "content_and_artifact" and get_origin(returns) is tuple:
        returns = get_args(returns)[0]  # the plan reads the content
    results = _result_count(returns, name)
    if output is not None:
        results = 1, (schemas.type_of(output, output, schemas.title(name, "Result")),), False
    described = _docstring_args(about)
    params = []
    if isinstance(schema, dict):
        body = schema if schema.get("properties") else schemas.resolve(schema, schema)  # root $ref
        body = body if isinstance(body, Mapping) else {}  # (invopop/jsonschema writes them)
        required = schemas.required(body)
        for field, spec in (body.get("properties") or {}).items():
            spec = spec if isinstance(spec, Mapping) else {}
            shown = _default_text(spec.get("default")) if "default" in spec else ""
            annotation: Any = schemas.type_of(spec, schema, schemas.title(field))
            doc = str(spec.get("description") or described.get(field, ""))
            params.append(Param(field, annotation, doc, field not in required, shown))
    else:
        for field, declared in typing.cast(type[BaseModel], schema).model_fields.items():
            if field in injected or hidden(declared):
                continue  # (the tool node gives it; a model is not shown it)
            annotation = declared.rebuild_annotation() if declared.annotation is not None else Any
            optional = not declared.is_required()
            default = declared.get_default(call_default_factory=False) if optional else None
            shown = _default_text(default) if optional else ""
            doc = declared.description or described.get(field, "")
            params.append(Param(field, annotation, doc, optional, shown))
    return Extern(
        name=name,
        params=tuple(params),
        n_results=results[0],
        description=about,
        injected=injected,
        runtime_param=runtime,
        result_types=results[1],
        schema=None if isinstance(schema, dict) else schema,
        tool=item if is_tool else None,
        func=None if is_tool else item,
        structured=output is not None,
        unpacks=results[2],
    )


def _injected(hints: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """The parameters the runtime injects (LangChain's rule: ``InjectedToolArg`` and its kinds,
    ``ToolRuntime``; plus a ``RunnableConfig``), and the one that gets the ``ToolRuntime`` (as
    the tool node decides: the one annotated so, or an injected one named ``runtime``)."""
    config = loaded("langchain_core.runnables.config", "RunnableConfig") or ()
    marker = loaded("langchain_core.tools.base", "InjectedToolArg") or ()  # (): none loaded
    runtime_type = loaded("langgraph.prebuilt.tool_node", "ToolRuntime") or ()
    names: list[str] = []
    runtime: str | None = None
    for name, annotation in hints.items():
        is_runtime = _subclass(get_origin(annotation) or annotation, runtime_type)
        metadata = get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()
        marked = any(isinstance(m, marker) or _subclass(m, marker) for m in metadata)
        if name != "return" and (is_runtime or marked or annotation is config):
            names.append(name)
            # (the tool node gives the runtime to an injected parameter named "runtime" too)
            runtime = name if is_runtime or name == "runtime" else runtime
    return tuple(names), runtime


def _hints_of(schema: type) -> dict[str, Any]:
    """A schema's annotations, extras kept (none when they cannot be resolved)."""
    try:
        return typing.get_type_hints(schema, include_extras=True)
    except Exception:
        return {}


def _subclass(value: Any, base: Any) -> bool:
    return isinstance(value, type) and issubclass(value, base)


def _result_count(annotation: Any, name: str) -> tuple[int, tuple[Any, ...], bool]:
    """How many values a call pushes, their types, and whether they are a tuple's (see
    :attr:`Extern.unpacks`), from the return annotation. A tool declared to return a
    ``Command`` or a ``ToolMessage`` (or maybe one: an MCP tool's content; or a list of them, as
    the agent's tool node takes them) gives the text of its message."""
    if annotation is Any:
        return 1, (), False
    ann = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    if ann is None or ann is type(None):
        return 0, (), False
    command = loaded("langgraph.types", "Command") or ()
    message_like = (command, loaded("langchain_core.messages.tool", "ToolMessage") or ())
    unions = (typing.Union, type(int | str))
    options = get_args(ann) if get_origin(ann) in unions else (ann,)
    listed = [get_args(o)[0] if get_origin(o) is list and get_args(o) else o for o in options]
    parts = [p for o in listed for p in (get_args(o) if get_origin(o) in unions else (o,))]
    if any(_subclass(get_origin(p) or p, message_like) for p in parts):
        return 1, (str,), False  # the plan reads the text of the message it hands the agent
    if get_origin(ann) is tuple:
        args = get_args(ann)
        if len(args) == 2 and args[1] is Ellipsis:
            raise errors.UsageError(
                f"tool {name!r} returns {label(shape_of(ann))} of unknown length: annotate a "
                "fixed tuple (tuple[int, int]) so the plan knows how many values to POP, or "
                "return a list"
            )
        return len(args), args, True
    return 1, (ann,), False


def _default_text(default: Any) -> str:
    """A parameter's default as the prompt shows it, when it is a short plain value."""
    if default is not None and type(default) not in (int, float, bool, str):
        return ""
    text = json.dumps(default) if type(default) is str else repr(default)  # None: "None"
    return text if len(text) <= 20 else ""


def _docstring_args(doc: str | None) -> dict[str, str]:
    """The ``Args:`` section of a Google-style description, as name -> description (a tool's
    description holds its function's whole docstring unless LangChain parsed it)."""
    out: dict[str, str] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    heads = (i for i, ln in enumerate(lines) if ln.strip() in ("Args:", "Arguments:"))
    current, indent = "", -1
    for ln in lines[next(heads, len(lines)) + 1 :]:  # the lines after the first head
        if not ln.strip():
            continue
        depth = len(ln) - len(ln.lstrip())
        if depth == 0:
            break
        match = re.match(r"\s*\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)", ln)
        if match and (indent < 0 or depth <= indent):
            indent, current = depth, match.group(1)
            out[current] = match.group(3).strip()
        elif current:
            out[current] = f"{out[current]} {ln.strip()}".strip()
    return out


# --- the tools argument ---------------------------------------------------------------------------


# A mapping's values are ``object`` to type checkers: mypy joins a literal that mixes functions
# and LangChain tools to ``dict[str, object]``, and the user would need a cast. They are
# checked when read, as every item of a list is.
ToolSpec: TypeAlias = "Iterable[BaseTool | Callable[..., Any] | Extern] | Mapping[str, object]"
"""The tools argument of every public function: a list (or any iterable) of tools (LangChain
tools, typed functions, externs), or a mapping of tool name to tool. A key is the name
a plan calls the tool by: it names a function (whose ``__name__`` is then not used, so a lambda
or a ``functools.partial`` can be a tool); a LangChain tool or an extern has a name of its own,
which the key must be (the agent's tool node calls a tool by that name too). Anything else is a
:class:`~llassembly.errors.UsageTypeError` (a ``TypeError``) that says what to write."""


def externs_of(tools: ToolSpec, *, param: str = "tools") -> Mapping[str, Extern]:
    """The tools argument (see :data:`ToolSpec`) as externs by name: a mapping of externs
    keyed by their names is returned as it is.

    Raises:
        UsageTypeError: ``tools`` is neither a list nor a mapping of tools (the error names
            ``param`` and says what to write), or an item is no tool.
        UsageError: Two tools share a name, a key is not the name of the tool it holds, a
            callable has no usable name, annotations cannot be resolved, or a tool returns a
            ``tuple[X, ...]`` of unknown length.
    """
    return tool_shapes(tools, _extern_of, param=param)


def externs_from(tools: ToolSpec) -> dict[str, Extern]:
    """Build externs for LangChain tools and plain typed callables (a list, or a mapping of tool
    name to tool: see :data:`ToolSpec`), keeping their order.

    Raises:
        UsageTypeError: As for :func:`externs_of` (a ``TypeError``; wrap a single tool in a
            list: ``[add]``).
        UsageError: As for :func:`externs_of`.
    """
    return dict(externs_of(tools))


def check_sync_tools(tools: Iterable[Extern | None]) -> None:
    """Refuse, before anything runs, a synchronous run of a plan that calls async-only tools
    (``tools``: the tools its ``CALL``s name).

    Raises:
        UsageError: Some of ``tools`` are async-only.
    """
    blocked = sorted({t.name for t in tools if t is not None and t.async_only})
    if blocked:
        listed = ", ".join(repr(n) for n in blocked)
        raise errors.UsageError(
            f"the plan calls async-only tools ({listed}) but runs synchronously (invoke): none "
            "of their calls can be made; use ainvoke / the async node, or give the tools a sync "
            "function"
        )


def program_of(program: object, where: str) -> Program:
    """``program``, checked to be a :class:`Program`.

    Raises:
        UsageError: It is something else: a plain answer (the reply held no instruction; see
            :func:`~llassembly.parse_program`), or no parsed plan at all.
    """
    if isinstance(program, Program):
        return program
    if isinstance(program, PlainAnswer):
        raise errors.UsageError(
            f"{where}() takes a Program, but the reply held no instruction (parse() gave a "
            "PlainAnswer): check isinstance(parsed, Program) first, or use parse_program()"
        )
    raise errors.UsageError(f"{where}() takes a Program from parse(), got {type(program).__name__}")


# --- the engine's checks, with the tools as the API takes them -----------------------------------


def check(program: Program, tools: ToolSpec) -> tuple[errors.Diagnostic, ...]:
    """All problems of ``program`` with ``tools`` (see :func:`llassembly.analysis.verifier.check`).

    Example:
        >>> from llassembly import parse
        >>> def ping(x: int) -> int:
        ...     return x
        >>> check(parse("PUSH 1\\nCALL ping\\nPOP R1"), [ping])
        ()

    Raises:
        UsageError: ``program`` is not a :class:`Program`, or ``tools`` no toolset (a
            :class:`~llassembly.errors.UsageTypeError`, also a ``TypeError``, when it is
            neither a list nor a mapping of tools).
    """
    return _verifier.check(program_of(program, "check"), externs_of(tools))


def verify(program: Program, tools: ToolSpec) -> None:
    """Check ``program`` and raise if anything is wrong.

    Raises:
        PlanRejected: The plan has problems.
        UsageError: As for :func:`check`.
    """
    _verifier.verify(program_of(program, "verify"), externs_of(tools))


def summarize(
    program: Program,
    tools: ToolSpec,
    *,
    max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    semantics: Semantics | None = None,
) -> PlanSummary:
    """What ``program`` may do (see :func:`llassembly.analysis.summary.summarize`).

    Raises:
        UsageError: As for :func:`check`.
    """
    return _summary.summarize(
        program_of(program, "summarize"),
        externs_of(tools),
        max_instructions_to_exec=max_instructions_to_exec,
        max_tool_calls=max_tool_calls,
        semantics=semantics,
    )
