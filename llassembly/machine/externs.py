"""Tool adapter: LangChain tools and plain typed callables become *externs* a plan can ``CALL``.

An :class:`Extern` knows what the stack machine needs about one tool:

* ``params``: the parameters taken from the stack, in push order (the value pushed first is the
  first parameter). Parameters the runtime injects (``ToolRuntime``, ``InjectedState``,
  ``InjectedStore``, ``InjectedToolCallId``, any ``InjectedToolArg``, a ``RunnableConfig``) are
  not among them; their names are in ``injected`` and the ``ToolRuntime`` one is
  ``runtime_param``.
* ``n_results``: how many values a call pushes, from the return annotation: ``tuple[A, B]``
  gives 2, ``None`` gives 0, anything else (or no annotation) gives 1.
* :meth:`Extern.convert_args` turns popped values into keyword arguments of the declared types,
  :meth:`Extern.to_values` turns a raw result into stack values, :meth:`Extern.call` and
  :meth:`Extern.acall` run the tool.

A parameter without an annotation is typed ``Any``: the popped value is passed unchanged.
Conversion is precomputed per parameter when the extern is built, so the common
``int``/``float``/``str``/``bool`` path costs a type check and never touches pydantic.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeGuard, get_args, get_origin

from pydantic import BaseModel

from llassembly.analysis.toolset import tool_shapes
from llassembly.compat import tool_signature_function
from llassembly.errors import (
    AsmRuntimeError,
    ToolArgumentError,
    UsageError,
    UsageTypeError,
)
from llassembly.language.instructions import register_index
from llassembly.language.program import NONE, Value
from llassembly.machine.describe import (
    describe_extern,
    docstring_args,
    extern_signature,
    first_paragraph,
)
from llassembly.machine.signature import is_injected, is_runtime, result_count, type_hints
from llassembly.machine.values import (
    EMPTY,
    Converter,
    accepts_none,
    converter,
    field_refuses,
    first_line,
    is_model,
    loaded,
    short_repr,
    to_value,
    type_label,
)

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = [
    "Extern",
    "Param",
    "ToolLike",
    "ToolSpec",
    "check_sync_tools",
    "describe_extern",
    "extern_signature",
    "externs_from",
    "externs_of",
    "type_label",
]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_FILTERED = frozenset({"self", "run_manager", "callbacks"})


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter a tool takes from the stack.

    Attributes:
        name: The keyword the tool is called with.
        annotation: The declared type (``Any`` when the parameter has none).
        description: What the argument means, for the prompt (may be empty).
        has_default: The tool has a default for it: a plan may push ``NONE`` to leave it out.
        default_text: The default as the prompt shows it (``10``, ``None``), or ``""`` when
            it is not a plain value.
    """

    name: str
    annotation: Any
    description: str = ""
    has_default: bool = False
    default_text: str = ""


class _Refused(Exception):
    """A value a parameter does not take, and why (internal: :meth:`Extern.convert_args`
    raises a :class:`ToolArgumentError`, :meth:`Extern.refuses` returns the reason)."""


_LEFT_OUT: Any = object()  # what NONE converts to where the tool has a default: left out


# --- the extern ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Extern:
    """A tool the plan can ``CALL``. Build it with :func:`externs_from`.

    Attributes:
        name: The name the plan calls it by.
        params: Parameters taken from the stack, in push order.
        n_results: Values a call pushes (0, 1, or the length of a ``tuple[...]`` annotation).
        description: First paragraph of the tool description or docstring.
        tool: The LangChain tool, or ``None`` for a plain callable.
        func: The plain callable (``None`` for a tool).
        injected: Names of parameters the runtime injects (not taken from the stack).
        runtime_param: The parameter that receives the ``ToolRuntime``, if any.
        result_types: Annotations of the results, one per value pushed.
        query: It is the built-in query (``query_text``), answered by a model, not run.

    Example:
        >>> def add(a: int, b: int) -> int:
        ...     return a + b
        >>> ext = externs_from([add])["add"]
        >>> ext.to_values(ext.call(ext.convert_args([2, "3"])))
        (5,)
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
    _converters: tuple[tuple[str, Converter], ...] = field(init=False, repr=False)
    _is_async: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        converters = tuple((p.name, converter(p.annotation)) for p in self.params)
        object.__setattr__(self, "_converters", converters)
        is_async = self.func is not None and inspect.iscoroutinefunction(self.func)
        object.__setattr__(self, "_is_async", is_async)

    def convert_args(
        self, values: Sequence[Value], *, line: int = 0, source: str = ""
    ) -> dict[str, Any]:
        """Convert popped values (first pushed first) into keyword arguments.

        Raises:
            ToolArgumentError: A value does not fit its parameter, or the count is wrong.
        """
        converters = self._converters
        if len(values) != len(converters):
            msg = f"tool {self.name!r} takes {len(converters)} arguments, got {len(values)}"
            raise ToolArgumentError(msg, tool=self.name, argument="", line=line, source=source)
        out: dict[str, Any] = {}
        for position, value in enumerate(values):
            try:
                converted = self._converted(position, value)
            except _Refused as exc:
                msg = f"tool {self.name!r}, {exc}"
                name = self.params[position].name
                raise ToolArgumentError(
                    msg, tool=self.name, argument=name, line=line, source=source
                ) from exc.__cause__
            if converted is not _LEFT_OUT:
                out[converters[position][0]] = converted
        return out

    def refuses(self, position: int, value: Value) -> str | None:
        """Why the tool refuses ``value`` for its parameter at ``position`` (``None``: it
        takes it), asked by the check before the run: converted as :meth:`convert_args`
        does, then checked against the field of a LangChain tool's ``args_schema``
        (:func:`~llassembly.machine.values.field_refuses`), as the tool does when invoked."""
        try:
            converted = self._converted(position, value)
        except _Refused as exc:
            return str(exc)
        except Exception:  # a converter that fails otherwise: the run decides
            return None
        if converted is _LEFT_OUT:
            return None
        schema = getattr(self.tool, "args_schema", None)
        detail = field_refuses(schema, self.params[position].name, converted)
        return None if detail is None else self._refusal(position, value, detail)

    def _converted(self, position: int, value: Value) -> Any:
        """``value`` as the parameter at ``position`` takes it (:data:`_LEFT_OUT`: left out);
        raises :class:`_Refused` with the reason when it does not fit."""
        param = self.params[position]
        if value == NONE and type(value) is str:
            if param.has_default:
                return _LEFT_OUT
            if accepts_none(param.annotation):
                return None
            reason = (
                f"argument {param.name!r}: NONE (no value) was pushed, but the tool has no "
                f"default for it and takes {type_label(param.annotation)}; push a value"
            )
            raise _Refused(reason)
        try:
            return self._converters[position][1](value)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise _Refused(self._refusal(position, value, first_line(exc))) from exc

    def _refusal(self, position: int, value: Value, detail: str) -> str:
        param, shown = self.params[position], short_repr(value, 80)
        expected = f"expected {type_label(param.annotation)}, got {shown} ({detail})"
        return f"argument {param.name!r}: {expected}"

    def to_values(self, result: Any, *, line: int = 0, source: str = "") -> tuple[Value, ...]:
        """Return a raw result as stack values in natural order (the emulator pushes them so
        the first one pops first).

        Raises:
            AsmRuntimeError: A multi-result tool did not return a tuple/list of that length.
        """
        n = self.n_results
        try:
            if n == 1:
                return (to_value(result),)
            if n == 0:
                return ()
            if not isinstance(result, (tuple, list)) or len(result) != n:
                got = f"{len(result)} values" if isinstance(result, (tuple, list)) else "one value"
                msg = f"tool {self.name!r} is annotated to return {n} values but returned {got}"
                raise AsmRuntimeError(msg, line=line, source=source)
            return tuple(to_value(r) for r in result)
        except ValueError as exc:
            raise AsmRuntimeError(f"tool {self.name!r}: {exc}", line=line, source=source) from exc

    def call(self, args: dict[str, Any]) -> Any:
        """Run the tool with converted arguments and return its raw result.

        A plain function is called directly; a LangChain tool through ``tool.invoke(args)``.
        Injected parameters are not supplied here: the caller adds them to ``args``.

        Raises:
            UsageError: The tool is async only (use :meth:`acall`).
        """
        if self.tool is not None:
            return self.tool.invoke(args)
        func = self.func
        if func is None or self._is_async:
            msg = f"tool {self.name!r} is async: run the plan with the async node or middleware"
            raise UsageError(msg)
        return func(**args)

    async def acall(self, args: dict[str, Any]) -> Any:
        """Async :meth:`call`: awaits coroutine functions and ``tool.ainvoke``."""
        if self.tool is not None:
            return await self.tool.ainvoke(args)
        func = self.func
        if func is None:
            raise UsageError(f"extern {self.name!r} has neither a tool nor a function")
        if self._is_async:
            return await func(**args)
        return func(**args)

    @property
    def async_only(self) -> bool:
        """Whether the tool can only be awaited (a coroutine function, or a LangChain tool
        built from one): a synchronous run cannot call it."""
        if self.tool is not None:
            return (
                getattr(self.tool, "func", True) is None
                and getattr(self.tool, "coroutine", None) is not None
            )
        return self._is_async

    def signature(self) -> str:
        """Return ``name(a: int, b: str) -> int`` as the prompt shows it."""
        return extern_signature(self)

    def describe(self) -> str:
        """Return the block the system prompt shows for this tool."""
        return describe_extern(self)


# --- building externs ----------------------------------------------------------------------------


def _build(
    name: str,
    fn: Callable[..., Any],
    *,
    tool: BaseTool | None = None,
    description: str = "",
    described: Mapping[str, str] | None = None,
) -> Extern:
    """Build an extern from the parameters of ``fn`` (or of a tool's pydantic ``args_schema``)."""
    hints = type_hints(fn, name)
    schema = tool.args_schema if tool is not None else None
    fields = typing.cast(type[BaseModel], schema).model_fields if is_model(schema) else {}
    defaults = {n: f.default for n, f in fields.items() if not f.is_required()}
    if tool is not None and not hasattr(tool, "func") and is_model(schema):
        # A BaseTool subclass: its schema, not ``_run(**kwargs)``, lists the parameters.
        model = typing.cast(type[BaseModel], schema)
        schema_hints = type_hints(model, name)
        items = [(n, schema_hints.get(n, f.annotation)) for n, f in model.model_fields.items()]
    else:
        signature = inspect.signature(fn).parameters.values()
        variadic = [p for p in signature if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if variadic:
            shown = ", ".join(
                ("*" if p.kind is p.VAR_POSITIONAL else "**") + p.name for p in variadic
            )
            raise UsageError(
                f"tool {name!r} takes {shown}: a plan passes each argument by its place on the "
                "stack, so every argument needs a name and a type (e.g. def f(city: str))"
            )
        items = [(p.name, hints.get(p.name, Any)) for p in signature if p.name not in _FILTERED]
        defaults |= {p.name: p.default for p in signature if p.default is not p.empty}
    doc_args = docstring_args(inspect.getdoc(fn))
    described = described or {}
    params: list[Param] = []
    injected: list[str] = []
    runtime_param: str | None = None
    for pname, ann in items:
        if is_injected(ann):
            injected.append(pname)
            runtime_param = pname if is_runtime(ann) else runtime_param
            continue
        # Only Annotated[...] carries a description (a Literal's later values are not one).
        extras = get_args(ann)[1:] if get_origin(ann) is Annotated else ()
        meta = [m for m in extras if isinstance(m, str)]
        about = described.get(pname) or doc_args.get(pname) or (meta[0] if meta else "")
        shown = _default_text(defaults.get(pname))
        params.append(Param(pname, ann, about, pname in defaults, shown))
    n_results, result_types = result_count(hints.get("return", EMPTY), name)
    return Extern(
        name=name,
        params=tuple(params),
        n_results=n_results,
        description=description or first_paragraph(inspect.getdoc(fn)),
        tool=tool,
        func=None if tool is not None else fn,
        injected=tuple(injected),
        runtime_param=runtime_param,
        result_types=result_types,
    )


def _from_tool(tool: BaseTool) -> Extern:
    schema = tool.args_schema
    described: dict[str, str] = {}
    if is_model(schema):
        fields = typing.cast(type[BaseModel], schema).model_fields
        described = {n: f.description for n, f in fields.items() if f.description}
    fn = tool_signature_function(tool)
    about = first_paragraph(tool.description)
    return _build(tool.name, fn, tool=tool, description=about, described=described)


def _check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        msg = (
            f"tool name {name!r} cannot be written in a plan: use letters, digits, '_', '.', '-' "
            "and start with a letter or '_' (give the tool a name, e.g. @tool('my_tool'))"
        )
        raise UsageError(msg)
    if register_index(name) is not None:
        msg = f"tool name {name!r} is a register name in the plan language: rename the tool"
        raise UsageError(msg)


def _default_text(default: Any) -> str:
    """A parameter's default as the prompt shows it, when it is a short plain value."""
    if default is None:
        return "None"
    if type(default) in (int, float, bool, str):
        text = json.dumps(default) if type(default) is str else repr(default)
        return text if len(text) <= 20 else ""
    return ""


def _is_tool(item: Any) -> TypeGuard[BaseTool]:
    """Whether ``item`` is a LangChain ``BaseTool``."""
    base = loaded("langchain_core.tools.base", "BaseTool")
    return base is not None and isinstance(item, base)


ToolLike: TypeAlias = "BaseTool | Callable[..., Any] | Extern"
"""One tool as the API takes it: a LangChain tool, a typed function, or an :class:`Extern`."""

# A mapping's values are ``object`` to type checkers: mypy joins a literal that mixes functions
# and LangChain tools to ``dict[str, object]``, and the user would need a cast. They are
# checked when read, as every item of a list is.
ToolSpec: TypeAlias = "Iterable[ToolLike] | Mapping[str, object]"
"""The tools argument of every public function: a list (or any iterable) of tools, or a
mapping of tool name to tool. A key is the name a plan calls the tool by: it names a function
(whose ``__name__`` is then not used, so a lambda or a ``functools.partial`` can be a tool); a
LangChain tool or an extern has a name of its own, which the key must be (the agent's tool node
calls a tool by that name too). Anything else is a :class:`~llassembly.errors.UsageTypeError`
(a ``TypeError``) that says what to write."""


def _extern_of(item: Any, key: str | None, where: str) -> Extern:
    """One tool of the tools argument as an extern (the adapter of :func:`tool_shapes`)."""
    if isinstance(item, Extern) or _is_tool(item):
        if key is not None and key != item.name:
            own = "extern" if isinstance(item, Extern) else "LangChain tool"
            msg = (
                f"{where}: the {own} is named {item.name!r}; key it by its name, or give it "
                f"the name {key!r} (@tool({key!r}) for a LangChain tool)"
            )
            raise UsageError(msg)
        if isinstance(item, Extern):
            return item
        _check_name(item.name)
        return _from_tool(item)
    if callable(item):
        name = key if key is not None else getattr(item, "__name__", "")
        _check_name(name)
        return _build(name, item)
    msg = f"{where}: {short_repr(item, 80)} is neither a LangChain tool nor a callable"
    raise UsageTypeError(msg)


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
    """Build externs for LangChain tools and plain typed callables, keeping their order.

    Args:
        tools: A list of tools, or a mapping of tool name to tool (see :data:`ToolSpec`).

    Raises:
        UsageTypeError: ``tools`` is neither a list nor a mapping of tools, or an item is no
            tool (a ``TypeError``; wrap a single tool in a list: ``[add]``).
        UsageError: Two tools share a name, a key is not the name of the tool it holds, a
            callable has no usable name, annotations cannot be resolved, or a tool returns a
            ``tuple[X, ...]`` of unknown length.
    """
    return dict(externs_of(tools))


def check_sync_tools(names: Iterable[str], externs: Mapping[str, Extern]) -> None:
    """Refuse, before anything runs, a synchronous run of a plan that calls async-only tools.

    Raises:
        UsageError: Some of ``names`` are async-only tools.
    """
    blocked = sorted({n for n in names if n in externs and externs[n].async_only})
    if blocked:
        listed = ", ".join(repr(n) for n in blocked)
        raise UsageError(
            f"the plan calls async-only tools ({listed}) but runs synchronously: nothing has "
            "run; use ainvoke / the async node, or give the tools a sync function"
        )
