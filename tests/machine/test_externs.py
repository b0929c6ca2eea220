"""Tests for llassembly.externs: tools and callables as externs, argument and result conversion."""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any, Literal

import pytest
from langchain.tools import InjectedState, InjectedStore, ToolRuntime, tool
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolArg, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, Field

from llassembly import Emulator, ToolExecutionError, check, parse, parse_program
from llassembly.errors import (
    AsmRuntimeError,
    ToolArgumentError,
    UsageError,
)
from llassembly.integration.prompt import first_paragraph
from llassembly.language.program import NONE, find_tool
from llassembly.machine.externs import (
    Extern,
    Param,
    externs_from,
)


class Point(BaseModel):
    x: int
    y: int = Field(description="vertical")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def one(fn: Any) -> Extern:
    return next(iter(externs_from([fn]).values()))


def make_one_step(x: int, y: int) -> int:
    """Move one step towards (x, y).

    Longer explanation that the prompt does not need.

    Args:
        x: Target column.
        y: Target row,
            on two lines.
    """
    return x + y


# --- building -----------------------------------------------------------------------------------


def test_plain_callable_params_in_push_order_with_types_and_docstring_descriptions() -> None:
    ext = one(make_one_step)
    assert ext.name == "make_one_step"
    assert [(p.name, p.annotation) for p in ext.params] == [("x", int), ("y", int)]
    assert [p.description for p in ext.params] == ["Target column.", "Target row, on two lines."]
    assert ext.description.startswith("Move one step towards (x, y).\n\nLonger")  # declared
    assert first_paragraph(ext.description) == "Move one step towards (x, y)."  # the prompt's
    assert ext.n_results == 1
    assert ext.tool is None
    assert ext.func is make_one_step
    assert ext.injected == ()
    assert ext.runtime_param is None


def test_tool_with_tool_runtime_skips_it_and_records_it_as_injected() -> None:
    @tool
    def where(unit: str, runtime: ToolRuntime) -> str:
        """Say where a unit is."""
        return unit

    ext = one(where)
    assert [p.name for p in ext.params] == ["unit"]
    assert ext.injected == ("runtime",)
    assert ext.runtime_param == "runtime"
    assert ext.tool is where
    assert ext.description == "Say where a unit is."


def test_every_kind_of_injected_parameter_is_skipped() -> None:
    def store_it(
        key: str,
        state: Annotated[dict[str, Any], InjectedState],
        store: Annotated[Any, InjectedStore()],
        call_id: Annotated[str, InjectedToolCallId],
        secret: Annotated[str, InjectedToolArg],
        rt: ToolRuntime[None, dict[str, Any]],
    ) -> None:
        """Store a key."""

    ext = one(store_it)
    assert [p.name for p in ext.params] == ["key"]
    assert ext.injected == ("state", "store", "call_id", "secret", "rt")
    assert ext.runtime_param == "rt"


def test_the_injected_parameters_a_plain_call_cannot_give_are_those_without_a_default() -> None:
    """``Extern.call`` passes the plan's arguments (a tool's invoke adds its config)."""

    def plain(x: int, config: RunnableConfig, secret: Annotated[str, InjectedToolArg] = "") -> int:
        """Use x."""
        return x

    @tool
    def tooled(
        x: int,
        config: RunnableConfig,
        state: Annotated[dict[str, Any], InjectedState],
        secret: Annotated[str, InjectedToolArg] = "",
    ) -> int:
        """Use x."""
        return x

    assert one(plain).uninjected == ("config",)
    assert one(tooled).injected == ("config", "state", "secret")
    assert one(tooled).uninjected == ("state",)
    assert one(make_one_step).uninjected == ()


def test_tool_schema_descriptions_are_used_for_arguments() -> None:
    @tool(parse_docstring=True)
    def scan(radius: int, label: Annotated[str, "what to look for"]) -> list[str]:
        """Scan around.

        Args:
            radius: How far to look.
        """
        return []

    ext = one(scan)
    assert [p.description for p in ext.params] == ["How far to look.", "what to look for"]
    assert ext.description == "Scan around."


def test_tuple_return_pushes_two_values_and_none_pushes_nothing() -> None:
    def pos() -> tuple[int, int]:
        return (1, 2)

    def act(x: int) -> None:
        return None

    assert one(pos).n_results == 2
    assert one(pos).result_types == (int, int)
    assert one(act).n_results == 0


def test_missing_or_other_return_annotation_pushes_one_value() -> None:
    def untyped(x: int):  # type: ignore[no-untyped-def]
        return x

    def many() -> list[int]:
        return [1]

    assert one(untyped).n_results == 1
    assert one(many).n_results == 1


def test_variable_length_tuple_return_is_a_usage_error() -> None:
    def spread() -> tuple[int, ...]:
        return (1, 2, 3)

    with pytest.raises(UsageError, match=r"unknown length.*tuple\[int, int\]"):
        externs_from([spread])


def test_untyped_parameter_passes_the_value_through() -> None:
    def echo(v):  # type: ignore[no-untyped-def]
        return v

    ext = one(echo)
    assert ext.params[0].annotation is Any
    assert ext.convert_args(["x"]) == {"v": "x"}
    assert ext.convert_args([1.5]) == {"v": 1.5}


def test_base_tool_subclass_takes_params_from_its_schema() -> None:
    class AddInput(BaseModel):
        a: int = Field(description="first")
        b: int

    class Add(BaseTool):
        name: str = "add"
        description: str = "Add two numbers."
        args_schema: type[BaseModel] = AddInput

        def _run(self, **kwargs: Any) -> int:
            return int(kwargs["a"]) + int(kwargs["b"])

    ext = one(Add())
    assert [(p.name, p.annotation, p.description) for p in ext.params] == [
        ("a", int, "first"),
        ("b", int, ""),
    ]
    assert ext.n_results == 1
    assert ext.call(ext.convert_args(["2", 3])) == 5


@pytest.mark.parametrize(
    ("spec", "takes", "refuses"),
    [
        ({"minimum": 0, "exclusiveMinimum": True, "maximum": 10}, [0.5, 10], [0, -1, 10.5]),
        ({"minimum": 0, "exclusiveMinimum": False}, [0, 0.5], [-0.5]),
        ({"maximum": 10, "exclusiveMaximum": True}, [9.5, -3], [10, 11]),
        ({"maximum": 10, "exclusiveMaximum": False}, [10], [10.5]),
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 10}, [0.5, 9.5], [0, 10]),  # draft 6 on
    ],
)
def test_json_schema_bounds_are_read_in_both_forms_of_exclusive(
    spec: dict[str, Any], takes: list[float], refuses: list[float]
) -> None:
    """``exclusiveMinimum: true`` (draft 4, OpenAPI 3.0) makes ``minimum`` exclusive; a number
    (draft 6 on) is the exclusive bound itself."""
    schema = {"type": "object", "properties": {"n": {"type": "number", **spec}}, "required": ["n"]}
    ext = one(StructuredTool(name="t", description="T.", args_schema=schema, func=lambda n: n))
    assert [ext.refuses(0, v) for v in takes] == [None] * len(takes)
    assert all(ext.refuses(0, v) for v in refuses)
    assert [ext.convert_args([v]) for v in takes] == [{"n": v} for v in takes]


def test_duplicate_names_are_a_usage_error() -> None:
    def ping(host: str) -> bool:
        return True

    pong = StructuredTool.from_function(lambda host: True, name="ping", description="Ping.")
    with pytest.raises(UsageError, match="two tools are named 'ping'"):
        externs_from([ping, pong])


def test_order_is_kept_and_externs_pass_through() -> None:
    def a() -> None: ...

    def b() -> None: ...

    built = externs_from([b, a])
    assert list(built) == ["b", "a"]
    assert externs_from(built.values()) == built


@pytest.mark.parametrize("bad", [lambda x: x, "not callable"])
def test_unusable_callable_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(UsageError):
        externs_from([bad])


def test_tool_named_like_a_register_is_a_usage_error() -> None:
    def eax() -> None: ...

    with pytest.raises(UsageError, match="register"):
        externs_from([eax])


@pytest.mark.parametrize("name", ["word", "DWord", "xmmword"])
def test_tool_named_like_a_size_word_is_a_usage_error(name: str) -> None:
    """``CALL dword`` starts a memory operand (``DWORD PTR [x]``), so no plan could call it:
    such a tool is refused when given, as one named like a register is."""

    def f() -> None: ...

    f.__name__ = name
    with pytest.raises(UsageError, match=f"tool name '{name}' is a size word"):
        externs_from([f])


def test_unresolvable_annotation_is_a_usage_error() -> None:
    def f(x: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(UsageError, match="cannot resolve the type annotations of tool 'f'"):
        externs_from([f])


# --- find_tool (a tool by name) ------------------------------------------------------------------


def test_find_tool_prefers_exact_then_unique_case_insensitive() -> None:
    def Move() -> None: ...

    def jump() -> None: ...

    built = externs_from([Move, jump])
    assert find_tool("Move", built) is built["Move"]
    assert find_tool("move", built) is built["Move"]
    assert find_tool("JUMP", built) is built["jump"]
    assert find_tool("fly", built) is None


def test_find_tool_ambiguous_case_insensitive_match_is_none() -> None:
    def scan() -> None: ...

    def Scan() -> None: ...

    built = externs_from([scan, Scan])
    assert find_tool("scan", built) is built["scan"]
    assert find_tool("SCAN", built) is None


# --- convert_args -------------------------------------------------------------------------------


def typed(annotation: Any) -> Extern:
    return Extern(name="t", params=(Param("v", annotation),), func=lambda v: v)


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (int, 5, 5),
        (int, 5.0, 5),
        (int, "42", 42),
        (int, " -3 ", -3),
        (int, "7.0", 7),
        (float, 2, 2.0),
        (float, 2.5, 2.5),
        (float, "1e3", 1000.0),
        (bool, 1, True),
        (bool, 0, False),
        (bool, 1.0, True),
        (bool, "true", True),
        (bool, "False", False),
        (bool, "1", True),
        (bool, "0", False),
        (str, "Paris", "Paris"),
        (str, 42, "42"),
        (str, 2.5, "2.5"),
        (int | None, "3", 3),
        (Annotated[int, "doc"], 4, 4),
        (dict, '{"a": 1}', {"a": 1}),
        (list, "[1, 2]", [1, 2]),
        (dict[str, int], '{"a": 1}', {"a": 1}),
        (list[int], '[1, "2"]', [1, 2]),
        (Literal["n", "s"], "s", "s"),
        (Color, "red", Color.RED),
    ],
)
def test_values_are_converted_to_the_declared_type(
    annotation: Any, value: Any, expected: Any
) -> None:
    got = typed(annotation).convert_args([value])["v"]
    assert got == expected
    assert type(got) is type(expected)


def test_pydantic_model_argument_is_validated_from_json_text() -> None:
    def go(to: Point) -> str:
        return f"{to.x},{to.y}"

    ext = one(go)
    args = ext.convert_args(['{"x": 1, "y": 2}'])
    assert args == {"to": Point(x=1, y=2)}
    assert ext.call(args) == "1,2"


def test_pydantic_model_argument_through_a_langchain_tool() -> None:
    @tool
    def go(to: Point, speed: float) -> str:
        """Go somewhere."""
        return f"{to.x},{to.y}@{speed}"

    ext = one(go)
    assert ext.call(ext.convert_args(['{"x": 1, "y": 2}', 3])) == "1,2@3.0"


@pytest.mark.parametrize(
    ("annotation", "value", "expected_text"),
    [
        (int, "abc", "expected int"),
        (int, 2.5, "expected int"),
        (int, "2.5", "expected int"),
        (float, "fast", "expected float"),
        (bool, 2, "expected bool"),
        (bool, "abc", "expected bool"),
        (bool, "yes", "expected bool"),
        (Point, '{"x": "left"}', "expected JSON Point"),
        (Point, "not json", "expected JSON Point"),
        (Point, 5, "push it as JSON text"),
        (dict, "[1]", "the JSON is not an object"),
        (list, '{"a": 1}', "the JSON is not an array"),
        (dict, "{oops", "expected JSON object"),
        (list[int], '["a"]', "expected JSON array of int"),
        (Literal["n", "s"], "e", 'expected one of "n", "s"'),
    ],
)
def test_a_value_that_does_not_fit_raises_tool_argument_error(
    annotation: Any, value: Any, expected_text: str
) -> None:
    ext = typed(annotation)
    with pytest.raises(ToolArgumentError, match="tool 't', argument 'v'") as info:
        ext.convert_args([value], line=7, source="CALL t")
    err = info.value
    assert err.tool == "t"
    assert err.argument == "v"
    assert err.line == 7
    assert expected_text in str(err)
    assert repr(value)[:20] in str(err)
    assert str(err).startswith("line 7: ")


def test_the_failing_argument_is_named_when_an_earlier_one_converted() -> None:
    with pytest.raises(ToolArgumentError, match="argument 'y': expected int, got 'up'") as info:
        one(make_one_step).convert_args([1, "up"])
    assert info.value.argument == "y"


def test_wrong_number_of_values_raises_tool_argument_error() -> None:
    with pytest.raises(ToolArgumentError, match="takes 2 arguments, got 1"):
        one(make_one_step).convert_args([1])


# --- to_values ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (True, 1),
        (False, 0),
        (7, 7),
        (2.5, 2.5),
        ("Paris", "Paris"),
        (Point(x=1, y=2), '{"x":1,"y":2}'),
        ({"a": [1, "é"]}, '{"a":[1,"é"]}'),
        ([1, 2], "[1,2]"),
        ((1, 2), "[1,2]"),
        ({"p": Point(x=1, y=2)}, '{"p":{"x":1,"y":2}}'),
        (None, NONE),  # "no value", as a JSON null reads
        (Color.BLUE, "blue"),
        (ToolMessage(content="done", tool_call_id="1"), "done"),
        (object, str(object)),
    ],
)
def test_a_single_result_becomes_one_stack_value(result: Any, expected: Any) -> None:
    got = typed(int).to_values(result)
    assert got == (expected,)
    assert type(got[0]) is type(expected)


class _Opaque:
    """An object with no JSON form: its text is what a plan can hold of it."""

    def __str__(self) -> str:
        return "opaque!"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({1: "a", (2, 3): "b"}, {"1": "a", "(2, 3)": "b"}),
        ({"a": _Opaque(), "b": 1}, {"a": "opaque!", "b": 1}),
        ([_Opaque(), {frozenset({1}): 2}], ["opaque!", {"frozenset({1})": 2}]),
        ((Point(x=1, y=2), {None: _Opaque()}), [{"x": 1, "y": 2}, {"null": "opaque!"}]),
    ],
)
def test_a_dict_or_list_result_is_json_text_whatever_it_holds(result: Any, expected: Any) -> None:
    """Keys JSON cannot have, and parts with no JSON form, are written as their text: the
    plan reads the result by path like any JSON (not Python's ``str()`` of the whole)."""
    (got,) = typed(int).to_values(result)
    assert isinstance(got, str)
    assert json.loads(got) == expected


def test_a_result_with_no_json_form_is_its_text() -> None:
    assert typed(int).to_values(_Opaque()) == ("opaque!",)


def test_a_plan_reads_a_part_of_a_result_python_cannot_make_json() -> None:
    def fetch() -> dict[Any, Any]:
        """Data keyed by tuples, holding an object."""
        return {(2, 3): "b", "item": _Opaque()}

    result = Emulator(parse_program("CALL fetch\nPOP R1\nMOV R2, R1.item"), [fetch]).run()
    assert result.registers["R2"] == "opaque!"


def test_a_tuple_result_becomes_values_in_natural_order() -> None:
    def pos() -> tuple[int, bool, dict[str, int]]:
        return (3, True, {"a": 1})

    ext = one(pos)
    assert ext.to_values(ext.call({})) == (3, 1, '{"a":1}')


def test_a_one_value_tuple_result_pushes_its_value_as_the_check_and_prompt_say() -> None:
    """``-> tuple[int]`` pushes the int (docs: a tuple result pushes its values in order), as
    the check takes it; a tuple of another length is the count error."""

    def next_ticket() -> tuple[int]:
        """The next ticket number."""
        return (5,)

    ext = one(next_ticket)
    assert (ext.n_results, ext.result_types) == (1, (int,))
    assert ext.to_values((5,)) == (5,) and ext.to_values(["a"]) == ("a",)
    with pytest.raises(AsmRuntimeError, match="'next_ticket' is annotated to return 1 values"):
        ext.to_values((5, 6))
    source = 'CALL next_ticket\nPOP R1\nADD R1, 1\nSAY "{R1}"'
    assert check(parse(source), [next_ticket]) == ()
    assert Emulator(parse_program(source), [next_ticket]).run().answer == "6"


@pytest.mark.parametrize("result", [(1,), (1, 2, 3), 5, "ab"])
def test_a_multi_result_tool_returning_the_wrong_count_is_a_runtime_error(result: Any) -> None:
    def pos() -> tuple[int, int]:
        return (1, 2)

    with pytest.raises(AsmRuntimeError, match="'pos' is annotated to return 2 values") as info:
        one(pos).to_values(result, line=4)
    assert info.value.line == 4


def test_a_none_annotated_tool_pushes_nothing_whatever_it_returns() -> None:
    def act() -> None:
        return None

    assert one(act).to_values(None) == ()
    assert one(act).to_values(5) == ()


# --- call / acall -------------------------------------------------------------------------------


def test_call_runs_a_plain_function_directly() -> None:
    ext = one(make_one_step)
    assert ext.call({"x": 2, "y": 3}) == 5


def test_call_runs_a_langchain_tool_through_invoke() -> None:
    @tool
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    assert one(double).call({"x": 4}) == 8


async def test_acall_awaits_an_async_callable_and_runs_a_sync_one() -> None:
    async def later(x: int) -> int:
        return x + 1

    assert await one(later).acall({"x": 1}) == 2
    assert await one(make_one_step).acall({"x": 1, "y": 1}) == 2


async def test_acall_awaits_an_async_langchain_tool() -> None:
    @tool
    async def later(x: int) -> int:
        """Later."""
        return x + 1

    assert await one(later).acall({"x": 1}) == 2


def test_sync_call_of_an_async_callable_is_a_usage_error() -> None:
    async def later(x: int) -> int:
        return x

    with pytest.raises(UsageError, match="async"):
        one(later).call({"x": 1})


# --- labels -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "label"),
    [
        (int, "int"),
        (bool, "bool (1 or 0)"),
        (Any, "any"),
        (str | None, "str"),
        (list[int], "JSON array of int"),
        (dict[str, int], "JSON object"),
        (Point, 'JSON Point {"x": int, "y": int}'),
        (Literal["a", "b"], 'one of "a", "b"'),
        (Color, 'one of "red", "blue"'),
    ],
)
def test_type_label_is_short_and_readable(annotation: Any, label: str) -> None:
    from llassembly.analysis.shapes import shape_of
    from llassembly.machine.externs import label as type_label

    assert type_label(shape_of(annotation)) == label


def test_a_failure_a_langchain_tool_handles_itself_is_a_failure_of_the_plan() -> None:
    """A ``ToolException`` the tool answers as an error message (``handle_tool_error``) stops
    the plan run by ``Emulator``, as it stops it on the agent path; its result is not read."""
    from langchain_core.tools import ToolException, tool

    @tool
    def lookup(n: int) -> int:
        """Raises a ToolException the tool handles itself."""
        raise ToolException(f"no item {n}")

    lookup.handle_tool_error = True
    with pytest.raises(ToolExecutionError) as raised:
        Emulator(parse('PUSH 3\nCALL lookup\nPOP R1\nSAY "got {R1}"'), [lookup]).run()
    assert raised.value.line == 2 and "no item 3" in str(raised.value)
