"""Edges of reading tools and their results (``llassembly.machine.externs``): odd
annotations, JSON schemas and docstrings a tool may declare, results a tool may return, and
values a caller may pass that no plan pushes."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.errors import GraphInterrupt
from pydantic import AfterValidator, BaseModel, Field, ValidationError

from llassembly import Emulator, build_system_prompt, check, parse, verify
from llassembly.analysis.shapes import shape_of
from llassembly.errors import AsmRuntimeError, ToolArgumentError, ToolExecutionError, UsageError
from llassembly.machine.externs import Extern, _first_error, externs_from, label, to_value


def one(item: Any) -> Extern:
    return next(iter(externs_from([item]).values()))


# -- arguments --------------------------------------------------------------------------------


def _never(value: int) -> int:
    return value // 0


def judged_at_run(x: Annotated[int, AfterValidator(_never)]) -> int:
    """A validator that raises an error pydantic does not make its own."""
    return x


def test_a_validator_that_cannot_judge_one_value_leaves_it_to_the_run() -> None:
    extern = one(judged_at_run)
    assert extern.refuses(0, 5) is None
    assert extern.refuses(0, "five") == (
        "argument 'x': expected int, got 'five' (could not convert string to float: 'five')"
    )


def unhashable(x: Annotated[int, ["metadata", "in", "a", "list"]]) -> int:
    """An annotation that cannot be hashed (no cached adapter)."""
    return x


def test_an_annotation_that_cannot_be_hashed_is_still_checked() -> None:
    extern = one(unhashable)
    assert extern.refuses(0, 5) is None
    assert extern.refuses(0, 2.5) == "argument 'x': expected int, got 2.5 (not a whole number)"


def either(x: int | float) -> float:
    """A union of two kinds."""
    return x


def test_a_union_is_labelled_by_its_kinds() -> None:
    assert label(shape_of(int | str)) == "int | str"
    refusal = one(either).refuses(0, "abc")
    assert refusal is not None and refusal.startswith("argument 'x': expected int | float, got")


def ratio(x: float) -> float:
    """A float."""
    return x


def test_an_integer_too_large_for_a_float_is_refused_as_an_argument() -> None:
    """No plan pushes one, but ``convert_args`` (and ``Emulator.call_at``) take plain data."""
    with pytest.raises(ToolArgumentError, match=r"argument 'x': expected float, got .* \(too lar"):
        one(ratio).convert_args([10**400])
    assert one(ratio).convert_args([2]) == {"x": 2.0}


def test_a_validation_error_with_no_line_errors_is_read_as_its_text() -> None:
    """Pydantic does not raise one itself; a schema's own code may."""
    exc = ValidationError.from_exception_data("Arguments", [])
    assert _first_error(exc) == ("", "0 validation errors for Arguments")


# -- running ----------------------------------------------------------------------------------


def test_an_extern_with_neither_a_tool_nor_a_function_cannot_be_called_async() -> None:
    with pytest.raises(UsageError, match="extern 'noop' has neither a tool nor a function"):
        asyncio.run(Extern("noop", ()).acall({}))


@tool(response_format="content_and_artifact")
def blocks(q: str) -> tuple[list[Any], dict[str, int]]:
    """Answer in content blocks."""
    content = [{"type": "text", "text": f"Hello {q}"}, ", ", {"type": "image", "url": "u"}]
    return [*content, {"type": "text", "text": "!"}], {"raw": 1}


def test_a_content_and_artifact_tools_blocks_are_read_as_their_text() -> None:
    assert one(blocks).call({"q": "you"}) == "Hello you, !"


# -- results ----------------------------------------------------------------------------------


class Text(str):
    pass


class Number(float):
    pass


class Hue(enum.Enum):
    RED = "red"


class Deep:
    def __str__(self) -> str:
        raise RecursionError


class Asks(int):
    def __int__(self) -> int:
        raise GraphInterrupt(())


def test_subclasses_of_text_and_float_are_held_as_the_plain_value() -> None:
    held = to_value(Text("x")), to_value(Number(1.5))
    assert held == ("x", 1.5) and (type(held[0]), type(held[1])) == (str, float)


def test_an_enum_inside_data_is_written_by_its_value() -> None:
    assert to_value({"hue": Hue.RED, "all": [Hue.RED]}) == '{"hue":"red","all":["red"]}'


def test_a_result_whose_text_recurses_too_deeply_cannot_be_held() -> None:
    with pytest.raises(ValueError, match="the tool returned data nested too deeply to hold"):
        to_value(Deep())


class AsksWhenShown:
    """A result with no JSON form whose text asks a person first."""

    def __str__(self) -> str:
        raise GraphInterrupt(())


def test_an_interrupt_from_a_results_own_code_is_not_a_conversion_error() -> None:
    with pytest.raises(GraphInterrupt):
        to_value(Asks(3))
    with pytest.raises(GraphInterrupt):  # from the text of an object with no JSON form too
        to_value(AsksWhenShown())
    with pytest.raises(GraphInterrupt):
        to_value({"who": AsksWhenShown()})


# -- reading a tool ---------------------------------------------------------------------------


def clashes(model_dump: int) -> int:
    """A parameter named as a pydantic model's method."""
    return model_dump


def test_a_function_whose_parameters_cannot_be_read_is_refused() -> None:
    with pytest.raises(UsageError, match="cannot read the parameters of tool 'clashes': Field "):
        one(clashes)


def _anything(**kwargs: Any) -> int:
    return 1


SCHEMA = {
    "type": "object",
    "properties": {
        "mode": {"const": "fast"},
        "wrapped": {"allOf": [{"type": "integer"}]},
        "maybe": {"type": ["integer", "null"]},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "missing": {"$ref": "#/$defs/Nowhere"},
    },
    "required": ["mode", "wrapped", "maybe", "pair", "counts", "missing"],
}


def test_a_json_schemas_properties_are_read_as_the_types_they_declare() -> None:
    declared = StructuredTool.from_function(
        _anything, name="declared", description="Declared.", args_schema=SCHEMA
    )
    annotations = {p.name: p.annotation for p in one(declared).params}
    assert annotations == {
        "mode": Literal["fast"],
        "wrapped": int,
        "maybe": int | None,
        "pair": tuple[int, str],
        "counts": dict[str, int],
        "missing": Any,  # a $ref to no definition: anything
    }


def long_default(text: str = "a" * 30, short: str = "hi", hue: Hue = Hue.RED) -> int:
    """Defaults."""
    return 1


def test_a_long_default_or_one_that_is_no_plain_value_is_not_shown() -> None:
    assert [p.default_text for p in one(long_default).params] == ["", '"hi"', ""]


@tool
def forecast(city: str, days: int) -> str:
    """Weather for a city.

    Args:
        city: The city.

        days: How many days.
    Returns:
        The forecast.
    """
    return city


def test_the_args_section_of_a_tools_description_skips_blank_lines_and_ends_at_the_next() -> None:
    assert [(p.name, p.description) for p in one(forecast).params] == [
        ("city", "The city."),
        ("days", "How many days."),
    ]


def test_verify_refuses_what_is_not_a_parsed_plan() -> None:
    with pytest.raises(UsageError, match=r"verify\(\) takes a Program from parse\(\), got str"):
        verify("MOV EAX, 1", [])  # type: ignore[arg-type]


def test_a_required_parameter_the_schema_leaves_out_is_refused_by_name() -> None:
    """LangChain's schema of a function leaves out ``_x``, ``run_manager`` and ``callbacks``; a
    plan could never pass one that has no default, so the tool is refused when it is read (it
    would fail at its first call), and one with a default is read as the schema says."""

    def pay(_account: int, amount: int) -> int:
        return amount

    def log(amount: int, callbacks: object) -> int:
        return amount

    def fine(amount: int, _account: int = 0, callbacks: object = None) -> int:
        return amount

    with pytest.raises(UsageError, match=r"^tool 'pay' requires '_account', which its schema"):
        externs_from([pay])
    with pytest.raises(UsageError, match=r"requires 'callbacks'.*rename it or give it a default$"):
        externs_from([log])
    assert [p.name for p in externs_from([fine])["fine"].params] == ["amount"]


# -- JSON-schema arguments as the tool declares them (an MCP tool's, a StructuredTool's) -------


def _echo(**kwargs: Any) -> str:
    return json.dumps(kwargs, sort_keys=True)


def _schema_tool(name: str, properties: dict[str, Any]) -> StructuredTool:
    """A tool taking ``properties`` (all required), as a JSON schema declares them."""
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return StructuredTool.from_function(_echo, name=name, description="Echo.", args_schema=schema)


def _sent(tool: StructuredTool, plan: str) -> Any:
    """What the tool got from ``plan`` (checked first: no problem)."""
    program = parse(plan + "\nPOP R1\nSAY R1")
    assert [d.message for d in check(program, [tool])] == []
    return json.loads(Emulator(program, [tool]).run().answer)


_OBJ = {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]}


def test_keys_an_object_schema_does_not_list_reach_the_tool_unless_it_forbids_them() -> None:
    """JSON Schema allows keys an object does not list (``additionalProperties`` is true unless
    said): the tool gets the object the plan wrote, whole; ``false`` leaves them out."""
    tag = _schema_tool("tag", {"meta": _OBJ})
    meta = {"source": "web", "campaign": "x"}
    assert _sent(tag, f"PUSH '{json.dumps(meta)}'\nCALL tag") == {"meta": meta}
    strict = _schema_tool("strict", {"meta": {**_OBJ, "additionalProperties": False}})
    # a closed object takes the keys it lists: a record read from another tool fits it
    assert _sent(strict, f"PUSH '{json.dumps(meta)}'\nCALL strict") == {"meta": {"source": "web"}}


def test_an_argument_of_a_union_with_objects_or_lists_is_given_its_json() -> None:
    """``oneOf`` objects, "one id or a list of ids": JSON text of an object or a list is the
    structure (as for a parameter of one structure); other text stays text."""
    circle = {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]}
    square = {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"]}
    draw = _schema_tool("draw", {"shape": {"oneOf": [circle, square]}})
    assert _sent(draw, "PUSH '{\"r\": 2}'\nCALL draw") == {"shape": {"r": 2}}
    ids = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}
    fetch = _schema_tool("fetch", {"ids": ids})
    assert _sent(fetch, 'PUSH \'["a", "b"]\'\nCALL fetch') == {"ids": ["a", "b"]}
    assert _sent(fetch, 'PUSH "a"\nCALL fetch') == {"ids": "a"}


def test_an_all_of_of_objects_is_one_object_with_every_field() -> None:
    named = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    aged = {"type": "object", "properties": {"age": {"type": "integer"}}}
    create = _schema_tool("create", {"p": {"allOf": [named, aged]}})
    assert "create(p: " in build_system_prompt(externs_from([create]))
    person = {"name": "Ada", "age": 36}
    assert _sent(create, f"PUSH '{json.dumps(person)}'\nCALL create") == {"p": person}
    found = check(parse("PUSH '{\"age\": 3}'\nCALL create"), [create])
    assert [(d.line, "name" in d.message) for d in found] == [(2, True)]


def test_a_pattern_pydantic_cannot_compile_is_left_to_the_tool() -> None:
    """JSON Schema patterns are ECMA-262 and may look around (zod's email rule does), which
    pydantic's engine cannot compile: the tool is still read, and the tool judges the value."""
    email = {"type": "string", "pattern": "^(?!\\.)[^@]+@[^@]+$"}
    mail = _schema_tool("mail", {"to": email, "code": {"type": "string", "pattern": "^[A-Z]+$"}})
    assert "mail(to: str, code: str)" in build_system_prompt(externs_from([mail]))
    assert _sent(mail, 'PUSH "ada@x.org"\nPUSH "AB"\nCALL mail') == {
        "to": "ada@x.org",
        "code": "AB",
    }
    found = check(parse('PUSH "ada@x.org"\nPUSH "ab"\nCALL mail'), [mail])  # compiled: checked
    assert [d.line for d in found] == [3]


@pytest.mark.parametrize("name", ["get-weather", "files.read", "x_1", "a-b-c"])
def test_a_tool_name_a_plan_can_write_is_taken_and_called(name: str) -> None:
    tool = _schema_tool(name, {})
    assert _sent(tool, f"CALL {name}") == {}


@pytest.mark.parametrize("name", ["a-", "a--b", "-a", "1abc", "my tool"])
def test_a_tool_name_no_plan_can_write_is_refused_when_the_tool_is_read(name: str) -> None:
    """A name the parser cannot read after ``CALL`` (a dash goes between parts of a name)."""
    with pytest.raises(UsageError, match="cannot be written in a plan"):
        externs_from([_schema_tool(name, {})])


def test_a_keyword_applies_only_to_the_json_type_it_is_for() -> None:
    """``maxLength``/``pattern`` bind strings, ``minimum`` numbers, ``maxItems`` arrays; on
    another type (the ``null`` of ``type: [string, null]`` too) JSON Schema ignores them."""
    props = {
        "nick": {"type": ["string", "null"], "maxLength": 3},
        "limit": {"type": ["integer", "null"], "minimum": 0},
        "code": {"type": "integer", "pattern": "^[0-9]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxLength": 1},
    }
    odd = _schema_tool("odd", props)
    plan = 'PUSH NONE\nPUSH NONE\nPUSH 5\nPUSH \'["a", "b"]\'\nCALL odd'
    assert _sent(odd, plan) == {"nick": None, "limit": None, "code": 5, "tags": ["a", "b"]}
    found = check(parse('PUSH "abcd"\nPUSH -1\nPUSH 5\nPUSH "[]"\nCALL odd'), [odd])
    assert [(d.line, d.message.split(": expected")[0]) for d in found] == [
        (5, "CALL odd: argument 'nick'"),
        (5, "CALL odd: argument 'limit'"),
    ]


def bad(n: Annotated[int | str, Field(ge=5)]) -> int:
    return 1


def test_a_constraint_pydantic_cannot_apply_refuses_the_call_as_the_librarys_error() -> None:
    """pydantic raises ``TypeError`` (no ``ValidationError``) for ``ge`` on a union."""
    with pytest.raises(ToolArgumentError, match=r"^tool 'bad', the arguments do not fit its sch"):
        one(bad).convert_args(["abc"])


_ORDER = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def _declaring(output: dict[str, Any]) -> Extern:
    """An extern for a tool whose (MCP) output schema is ``output``."""
    from llassembly.compat import MCP_OUTPUT_SCHEMA

    tool = _schema_tool("get_order", {})
    tool.metadata = {MCP_OUTPUT_SCHEMA: output}
    return one(tool)


def test_an_output_schemas_definitions_are_read_as_the_input_schemas_are() -> None:
    """Draft-07 keeps them under ``definitions`` (zod-to-json-schema writes so)."""
    ext = _declaring({"$ref": "#/definitions/Order", "definitions": {"Order": _ORDER}})
    assert label(shape_of(ext.result_types[0])) == 'JSON Order {"id": int}'
    found = check(parse('CALL get_order\nPOP R1\nSAY "{R1.idd}"'), {"get_order": ext})
    assert [(d.line, "has no field 'idd'" in d.message) for d in found] == [(3, True)]


def test_an_input_schema_whose_root_is_a_ref_takes_the_arguments_it_names() -> None:
    """Reflectors such as Go's invopop/jsonschema write the arguments as a definition."""
    args = {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}}
    schema = {
        "type": "object",
        "$ref": "#/$defs/Args",
        "$defs": {"Args": {**args, "required": ["q"]}},
    }
    search = StructuredTool.from_function(_echo, name="search", description=".", args_schema=schema)
    assert [(p.name, p.has_default) for p in one(search).params] == [("q", False), ("limit", True)]
    assert _sent(search, 'PUSH "cats"\nCALL search, 1') == {"q": "cats"}


def test_a_ref_by_json_pointer_names_the_schema_it_points_at() -> None:
    """zod-to-json-schema writes a reused object as ``{"$ref": "#/properties/<first use>"}``;
    a pointer may step into a list, and a cycle of refs is read as far as any schema is."""
    point = {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}
    distance = _schema_tool("distance", {"a": point, "b": {"$ref": "#/properties/a"}})
    assert "distance(a: A, b: A2) -> str" in build_system_prompt(externs_from([distance]))
    plan = "PUSH '{\"lat\": 1}'\nPUSH '{\"lat\": 2}'\nCALL distance"
    assert _sent(distance, plan) == {"a": {"lat": 1}, "b": {"lat": 2}}
    odd = {"c": {"anyOf": [{"type": "integer"}]}, "d": {"$ref": "#/properties/c/anyOf/0"}}
    odd |= {"e": {"$ref": "#/properties/e"}, "f": {"$ref": "#/properties/f~1x"}}
    annotations = {p.name: p.annotation for p in one(_schema_tool("odd", odd)).params}
    assert (annotations["d"], annotations["e"], annotations["f"]) == (int, Any, Any)


def test_an_all_of_of_a_base_object_and_what_is_required_here_is_one_object() -> None:
    base = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    }
    p = {"allOf": [{"$ref": "#/$defs/Base"}, {"required": ["name"], "description": "."}]}
    schema = {"type": "object", "properties": {"p": p}, "required": ["p"], "$defs": {"Base": base}}
    create = StructuredTool.from_function(_echo, name="create", description=".", args_schema=schema)
    assert "create(p: P) -> str" in build_system_prompt(externs_from([create]))
    assert _sent(create, 'PUSH \'{"name": "Ada"}\'\nCALL create') == {"p": {"name": "Ada"}}
    found = check(parse("PUSH '{\"age\": 3}'\nCALL create"), [create])
    assert [(d.line, d.message.split("(")[-1]) for d in found] == [
        (2, "name: Field required); the value is written on line 1")
    ]


MALFORMED = {
    "required_true": {"type": "object", "required": True, "properties": {"a": {"type": "string"}}},
    "minimum_text": {"type": "integer", "minimum": "5"},
    "pattern_number": {"type": "string", "pattern": 5},
    "multiple_of_zero": {"type": "number", "multipleOf": 0},
    "negative_length": {"type": "string", "maxLength": -1},
    "float_length": {"type": "string", "minLength": 1.0},
    "properties_list": {"type": "object", "properties": []},
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_schema_keyword_no_validator_can_hold_is_left_to_the_tool(name: str) -> None:
    """A server's sloppy schema (draft-3 ``"required": true``, a bound of the wrong type, an
    impossible one) does not keep its tools from loading: a keyword no validator can be
    built from is the tool's to judge, and the argument is still passed."""
    tool = _schema_tool("sloppy", {"a": MALFORMED[name]})
    assert "sloppy(a: " in build_system_prompt(externs_from([tool]))


def test_a_unions_json_text_that_fits_only_as_text_is_given_as_text() -> None:
    """JSON text of a structure is the structure where that fits (``str | list[str]`` given
    ``["a", "b"]``), else the text it is (``[1, 2]`` is no list of texts, but it is a text)."""
    got: list[Any] = []

    def search(q: str | list[str]) -> int:
        """Search."""
        got.append(q)
        return 1

    for literal in ("'[1, 2]'", '\'["a", "b"]\'', '"plain"'):
        program = parse(f"PUSH {literal}\nCALL search\nPOP R1")
        assert [d.message for d in check(program, [search])] == []
        Emulator(program, [search]).run()
    assert got == ["[1, 2]", ["a", "b"], "plain"]


def test_an_all_of_keeps_the_objects_own_fields_beside_its_parts() -> None:
    """``{"properties": {"o": ...}, "required": ["o"], "allOf": [base, more]}``: its own
    fields and requirements hold with the parts'."""
    base = {"type": "object", "properties": {"b": {"type": "integer"}}}
    own = {"type": "object", "properties": {"o": {"type": "integer"}}, "required": ["o"]}
    both = _schema_tool("both", {"x": {**own, "allOf": [base, {"required": ["b"]}]}})
    assert _sent(both, 'PUSH \'{"o": 1, "b": 2}\'\nCALL both') == {"x": {"o": 1, "b": 2}}
    found = check(parse("PUSH '{\"b\": 2}'\nCALL both"), [both])
    assert [(d.line, "'o'" in d.message or " o" in d.message) for d in found] == [(2, True)]


@pytest.mark.parametrize(
    "ref",
    [
        "#foo",  # an $anchor: not a pointer, not read
        "#/allOf/" + "9" * 5000,  # an index past what int() reads
        "#/allOf/\u00b2",  # a digit that is no ASCII digit
    ],
)
def test_a_ref_that_points_at_nothing_is_read_as_any(ref: str) -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": ref}},
        "required": ["x"],
        "allOf": [{"properties": [1]}],
        "$defs": {"B": {"type": "object", "properties": {"b": {"type": "integer"}}}},
    }
    tool = StructuredTool.from_function(_echo, name="t", description="T.", args_schema=schema)
    assert [str(p.annotation) for p in externs_from([tool])["t"].params] == ["typing.Any"]


def test_an_all_of_part_whose_properties_are_no_mapping_is_no_object() -> None:
    odd = {"allOf": [{"properties": [1]}, {"properties": {"a": {"type": "integer"}}}]}
    assert [
        str(p.annotation) for p in externs_from([_schema_tool("t", {"x": odd})])["t"].params
    ] == ["typing.Any"]


def test_a_ref_to_a_definition_kept_elsewhere_finds_it_by_name() -> None:
    """``#/definitions/B`` where the schema keeps ``B`` under ``$defs`` (a mixed draft)."""
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/definitions/B"}},
        "required": ["x"],
        "$defs": {"B": {"type": "object", "properties": {"b": {"type": "integer"}}}},
    }
    tool = StructuredTool.from_function(_echo, name="t", description="T.", args_schema=schema)
    assert _sent(tool, 'PUSH \'{"b": "7"}\'\nCALL t') == {"x": {"b": 7}}


def test_the_text_fallback_of_a_union_is_for_the_argument_that_does_not_fit_only() -> None:
    got: list[Any] = []

    def tag(labels: str | list[str], meta: str | dict[str, int]) -> int:
        """Tag."""
        got.append((labels, meta))
        return 1

    program = parse("PUSH '[1, 2]'\nPUSH '{\"k\": 1}'\nCALL tag\nPOP R1")
    assert [d.message for d in check(program, [tag])] == []
    Emulator(program, [tag]).run()
    assert got == [("[1, 2]", {"k": 1})]


def test_a_tools_message_for_another_call_is_its_failure_in_the_emulator_too() -> None:
    """As on the agent paths (test_contract): it answers no call."""

    def receipt() -> ToolMessage:
        return ToolMessage("paid", tool_call_id="receipt-42")

    tool = StructuredTool.from_function(receipt, name="receipt", description="Pay.")
    with pytest.raises(ToolExecutionError, match="receipt-42"):
        Emulator(parse("CALL receipt\nPOP R1"), [tool]).run()


def test_required_names_given_as_a_tuple_are_required() -> None:
    """A schema built in Python may hold ``"required"`` as a tuple or a set."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ("a",)}
    tool = StructuredTool.from_function(_echo, name="t", description="T.", args_schema=schema)
    assert [p.has_default for p in externs_from([tool])["t"].params] == [False]


def test_a_unions_text_too_deep_for_json_is_given_as_text() -> None:
    got: list[Any] = []

    def keep(doc: str | list[Any]) -> int:
        """Keep a document."""
        got.append(doc)
        return 1

    deep = "[" * 5000 + "]" * 5000
    emulator = Emulator(parse("MOV R1, R2\nPUSH R1\nCALL keep\nPOP R1"), [keep])
    emulator.state.regs[2] = deep
    emulator.run()
    assert got == [deep]


def test_a_definition_named_many_times_is_one_type_read_once() -> None:
    """A ``$ref`` read anew at each place it is named gave one type per path to it (``L2``,
    ``L22``, ``L227``... in the prompt) and work that grew as the schema's fan-out to the
    power of its depth; a definition that names itself is "any" inside itself."""
    defs: dict[str, Any] = {"L0": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    for k in range(1, 6):
        fields = {f"f{i}": {"$ref": f"#/$defs/L{k - 1}"} for i in range(8)}
        defs[f"L{k}"] = {"type": "object", "properties": fields}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/L5"}}, "$defs": defs}
    tree = StructuredTool.from_function(_echo, name="tree", description=".", args_schema=schema)
    prompt = build_system_prompt(externs_from([tree]))
    types = prompt.split("# Types", 1)[1].split("\n\n", 1)[0]
    named = [line.split(" ", 1)[0] for line in types.splitlines()[2:]]
    assert named[0] == "L5" and len(set(named)) == len(named)
    assert set(named) <= {f"L{k}" for k in range(6)}  # (as deep as a shape is followed)
    node = {"type": "object", "properties": {f"c{i}": {"$ref": "#"} for i in range(12)}}
    node["properties"]["label"] = {"type": "string"}
    nodes = StructuredTool.from_function(
        _echo, name="nodes", description=".", args_schema={**node, "title": "Node"}
    )
    assert "nodes(" in build_system_prompt(externs_from([nodes]))


def test_a_computed_number_for_a_decimal_is_the_number_the_plan_shows() -> None:
    """A float the plan computed reaches a ``Decimal`` parameter as the plan's own answer
    shows it (15 significant digits), not with the binary noise of its last digit: money
    computed as 1250.40 - 1000 is 250.4, not 250.4000000000001."""
    paid: list[Decimal] = []

    @tool
    def pay(amount: Decimal) -> str:
        """Pay an amount."""
        paid.append(amount)
        return "paid"

    plan = 'NUM R1, "1250.40"\nSUB R1, 1000\nPUSH R1\nCALL pay\nPOP R2\nSAY "{R1}"'
    assert Emulator(parse(plan), [pay]).run().answer == "250.4"
    assert paid == [Decimal("250.4")] and str(paid[0]) == "250.4"


def test_a_refused_decimal_is_said_to_be_one() -> None:
    """The refusal of a value for a ``Decimal`` said "expected str", where the prompt shows
    ``str (decimal)`` and a number is taken: it says what it takes."""

    @tool
    def pay(amount: Annotated[Decimal, Field(gt=0)]) -> str:
        """Pay an amount."""
        return "paid"

    [problem] = check(parse("PUSH -5\nCALL pay"), [pay])
    assert "expected decimal number, got -5" in problem.message


class _Item(BaseModel):
    qty: int = Field(ge=1)


class _Inner(BaseModel):
    item: _Item


class _Outer(BaseModel):
    inner: _Inner


class _Order(BaseModel):
    deep: _Outer | None = None  # _Item is first named deep in the schema...
    item: _Item  # ... and then near its top


class _OrderArgs(BaseModel):
    order: _Order


def test_a_definition_met_deep_first_is_read_whole_where_it_is_met_near_the_top() -> None:
    """A definition read once per schema was read where it was first met, near the depth
    limit, and that cut read ("any" inside) stood for it everywhere: a JSON-schema tool's
    constraint near the top (``item.qty >= 1``) went unchecked. Each depth reads its own."""
    place = StructuredTool.from_function(
        _echo, name="place", description=".", args_schema=_OrderArgs.model_json_schema()
    )
    [problem] = check(parse('MOV R1, \'{"item": {"qty": 0}}\'\nPUSH R1\nCALL place'), [place])
    assert "item.qty: Input should be greater than or equal to 1" in problem.message


def test_bytes_that_are_no_utf_8_are_held_as_their_text() -> None:
    """A result of bytes that do not decode (an image, a hash) is held as its text, as
    LangChain shows it to a model, alone or inside a structure; never a stopped plan."""

    def raw() -> bytes:
        """Raw bytes."""
        return b"ab\xff"

    def record() -> dict[str, bytes]:
        """A record holding raw bytes."""
        return {"digest": b"\xff\xfe"}

    result = Emulator(parse("CALL raw\nPOP R1\nCALL record\nPOP R2"), [raw, record]).run()
    assert result.registers["R1"] == "b'ab\\xff'"
    assert json.loads(str(result.registers["R2"])) == {"digest": "b'\\xff\\xfe'"}


class Reading(BaseModel):
    station: str
    temp: float


def test_a_model_result_holding_nan_stops_the_plan_as_a_dict_holding_it_does() -> None:
    """One rule for a non-finite float inside a structure, whatever holds it: the plan
    stops at the CALL (a model is not written with NaN as null, reading as "no value")."""

    def model() -> Reading:
        """A reading."""
        return Reading(station="A", temp=float("nan"))

    def mapping() -> dict[str, Any]:
        """A reading."""
        return {"station": "A", "temp": float("nan")}

    for reading in (model, mapping):
        with pytest.raises(AsmRuntimeError, match="cannot be held as JSON"):
            Emulator(parse(f"CALL {reading.__name__}\nPOP R1"), [reading]).run()


class Handle:
    """A part with no JSON form."""

    def __str__(self) -> str:
        return "h-42"


@dataclasses.dataclass
class Job:
    id: int
    handle: Any


class JobModel(BaseModel):
    model_config = {"arbitrary_types_allowed": True}
    id: int
    handle: Handle


def test_a_structure_with_a_part_that_has_no_json_form_keeps_its_other_parts() -> None:
    """A dataclass or a model result holding an object with no JSON form is JSON with that
    part as its text, as a dict holding it is: its fields stay readable by path."""

    def as_dataclass() -> Job:
        """A job."""
        return Job(1, Handle())

    def as_model() -> JobModel:
        """A job."""
        return JobModel(id=1, handle=Handle())

    def as_dict() -> dict[str, Any]:
        """A job."""
        return {"id": 1, "handle": Handle()}

    for job in (as_dataclass, as_model, as_dict):
        result = Emulator(parse(f"CALL {job.__name__}\nPOP R1\nMOV R2, R1.id"), [job]).run()
        assert json.loads(str(result.registers["R1"])) == {"id": 1, "handle": "h-42"}
        assert result.registers["R2"] == 1


@dataclasses.dataclass
class Blob:
    id: int
    blob: bytes


class BlobModel(BaseModel):
    id: int
    blob: bytes


def test_bytes_that_are_no_utf_8_inside_any_structure_keep_its_other_parts() -> None:
    """Raw bytes inside a dataclass or a model are held as their text and the other fields
    stay readable by path, as inside a dict."""

    def as_dataclass() -> Blob:
        """A blob."""
        return Blob(1, b"\xff\xfe")

    def as_model() -> BlobModel:
        """A blob."""
        return BlobModel(id=1, blob=b"\xff\xfe")

    def as_dict() -> dict[str, Any]:
        """A blob."""
        return {"id": 1, "blob": b"\xff\xfe"}

    for blob in (as_dataclass, as_model, as_dict):
        result = Emulator(parse(f"CALL {blob.__name__}\nPOP R1\nMOV R2, R1.id"), [blob]).run()
        assert json.loads(str(result.registers["R1"])) == {"id": 1, "blob": "b'\\xff\\xfe'"}
        assert result.registers["R2"] == 1
