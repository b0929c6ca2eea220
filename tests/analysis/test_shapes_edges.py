"""Shapes from annotations a tool may carry, and the parts of a shape a path can name."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, NamedTuple, Union

from pydantic import BaseModel, PlainSerializer, model_serializer

from llassembly.analysis.shapes import (
    ANY,
    INT,
    NONE_SHAPE,
    TEXT,
    Shape,
    child,
    join,
    shape_of,
)


class Point(NamedTuple):
    x: int
    label: str


@dataclasses.dataclass
class Broken:
    """A record whose annotation names a type that does not exist."""

    ref: Missing  # type: ignore[name-defined]  # noqa: F821
    count: int


class Plain:
    """A class that is no record, scalar or container."""


def test_an_unknown_option_makes_a_union_unknown() -> None:
    assert join(INT, ANY) is None
    assert shape_of(Union[int, Any]) == ANY  # noqa: UP007


def test_a_union_of_more_than_six_shapes_is_unknown() -> None:
    records = [dataclasses.make_dataclass(f"R{i}", [("v", int)]) for i in range(7)]
    assert shape_of(Union[tuple(records[:6])]).kind == "union"  # noqa: UP007
    assert shape_of(Union[tuple(records)]) == ANY  # noqa: UP007


def test_an_annotation_that_cannot_be_hashed_is_still_read() -> None:
    assert shape_of(Annotated[int, {"unit": "cm"}]) == INT
    assert shape_of(Annotated[list[str], ["doc"]]) == Shape("list", item=TEXT)


def test_a_record_whose_hints_cannot_be_resolved_keeps_what_it_can() -> None:
    """``get_type_hints`` fails on the unknown name: the raw annotations are read, the
    unresolved one as unknown."""
    shape = shape_of(Broken)
    assert shape.kind == "object"
    assert shape.name == "Broken"
    assert shape.field("ref") == ANY
    assert shape.field("count") == ANY  # a string annotation ("int") is not evaluated


def test_a_named_tuple_is_a_fixed_list_of_its_fields() -> None:
    assert shape_of(Point) == Shape("tuple", "Point", options=(INT, TEXT))


def test_tuples_fixed_and_bare_and_unknown_classes() -> None:
    assert shape_of(tuple[int, str]) == Shape("tuple", options=(INT, TEXT))
    assert shape_of(tuple[int, ...]) == Shape("list", item=INT)
    assert shape_of(tuple) == Shape("list", item=ANY)
    assert shape_of(Plain) == ANY


def test_a_literal_of_bools_or_with_none_or_of_kinds_keeps_its_values_by_kind() -> None:
    assert shape_of(Literal[True, False]) == Shape("int", "bool", choices=(1, 0))
    a = Shape("text", choices=("a",))
    assert shape_of(Literal["a", None]) == Shape("union", options=(a, NONE_SHAPE))
    assert shape_of(Literal["a", None]) == shape_of(Literal["a"] | None)
    assert shape_of(Literal["a", 1, 2]) == Shape("union", options=(a, Shape("int", choices=(1, 2))))
    assert shape_of(Literal["a", "b"]).choices == ("a", "b")


def test_an_unknown_key_of_an_object_is_any_of_its_fields() -> None:
    point = shape_of(dataclasses.make_dataclass("P", [("x", int), ("name", str)]))
    assert child(point, None) == (Shape("union", options=(INT, TEXT)), None)
    assert child(point, 0) == (ANY, "is an object: [0] needs a field name; its fields: x, name")


def test_a_map_has_text_keys() -> None:
    scores = shape_of(dict[str, int])
    assert child(scores, "alice") == (INT, None)
    assert child(scores, None) == (INT, None)
    assert child(scores, 3) == (ANY, "is an object: its keys are text, not [3]")


def test_a_tuple_element_by_number_in_range_or_not() -> None:
    pair = shape_of(tuple[int, str])
    assert child(pair, 0) == (INT, None)
    assert child(pair, -1) == (TEXT, None)
    assert child(pair, None) == (Shape("union", options=(INT, TEXT)), None)
    assert child(pair, 2) == (ANY, "has 2 elements, not [2]")
    assert child(pair, -3) == (ANY, "has 2 elements, not [-3]")


class Written(BaseModel):
    """Fields its serializers write: one said, one not, one by a model serializer below."""

    said: Annotated[int, PlainSerializer(str, return_type=str)] = 1
    unsaid: Annotated[int, PlainSerializer(str)] = 1


class Whole(BaseModel):
    n: int = 1

    @model_serializer
    def _all(self) -> dict[str, Any]:
        return {"m": self.n}


def test_a_serializer_gives_a_field_the_shape_it_writes_or_none_known() -> None:
    assert shape_of(Written).fields == (("said", TEXT), ("unsaid", ANY))
    assert shape_of(Whole) == ANY


def _nested(fan: int, levels: int = 6) -> Any:
    """``L5`` with ``fan`` fields of type ``L4``, ... ``L0`` with ``fan`` int fields: a few
    hundred bytes of schema that unfold into ``fan ** levels`` leaves."""
    from pydantic import create_model

    made: Any = int
    for k in range(levels):
        made = create_model(f"L{k}", **{f"f{i}": (made, ...) for i in range(fan)})
    return made


def test_a_type_that_reuses_one_model_costs_as_its_declared_size() -> None:
    """Shapes are hashed once each (a shared part is not walked again at each place), and a
    refusal names the records a type nests instead of spelling them out: the message of a
    wrong value for ``L5`` (8 fields of ``L4``...) was 3.5 million characters; the verifier's
    joins and the prompt hashed every unfolded tree, walking it whole each time."""
    from langchain_core.tools import StructuredTool
    from pydantic import create_model

    from llassembly import build_system_prompt, check, externs_from, parse_program

    top = _nested(8)
    use = StructuredTool.from_function(
        lambda x: 1, name="use", description="A tool.", args_schema=create_model("Use", x=top)
    )
    assert "use(x: L5)" in build_system_prompt(externs_from([use]))
    [problem] = check(parse_program("PUSH 1\nCALL use\nPOP R1\nSAY R1"), [use])
    assert len(problem.message) < 1000 and "expected JSON L5 {" in problem.message
    shape = shape_of(top)
    calls = 0
    fields = type(shape).__hash__

    def counting(self: Any) -> int:
        nonlocal calls
        calls += 1
        return fields(self)

    type(shape).__hash__ = counting  # type: ignore[method-assign]
    try:
        hash(shape)
    finally:
        type(shape).__hash__ = fields  # type: ignore[method-assign]
    assert calls == 1  # (its parts' hashes were kept when it was made)
