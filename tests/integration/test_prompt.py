"""Tests for llassembly.prompt: the system prompt and the per-tool blocks."""

from __future__ import annotations

import datetime
import enum
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, NotRequired

import pytest
from langchain.tools import ToolRuntime, tool
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field, computed_field, create_model
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from llassembly import Emulator, check, parse
from llassembly.errors import UsageError
from llassembly.integration.prompt import (
    TOOL_BLOCK_BUDGET,
    _section,
    build_system_prompt,
    describe_extern,
    extern_signature,
    load_template,
)
from llassembly.machine.externs import externs_from


class Point(BaseModel):
    x: int
    y: int


def make_one_step(x: int, y: int) -> int:
    """Move one step towards (x, y).

    Args:
        x: Target column.
        y: Target row.
    """
    return 0


def position() -> tuple[int, int]:
    """Where the player stands."""
    return (0, 0)


@tool
def say(text: str, runtime: ToolRuntime) -> None:
    """Say something out loud."""


@tool
def go(to: Point, fast: bool) -> str:
    """Go to a point."""
    return ""


EXTERNS = externs_from([make_one_step, position, say, go])


def test_built_in_template_teaches_the_language() -> None:
    text = " ".join(load_template().split())
    for needle in [
        "R1",
        "R100",
        "JNZ",
        "JGE",
        "CALL label",
        "RET",
        "HLT",
        "section .data",
        "```asm",
        "in character order",
        "first argument first",
        "Not a name: `NONE`, `NULL`, registers; not a data name: instructions.",
        "`CALL tool, N`: only the first N arguments were pushed",
        "unless `JC` follows the `CALL`: it jumps if the call failed",
        "changes no other register.",
        'Quoted text in any instruction fills them in (`MOV R3, "{R1}-{R2}"`)',
        "`{R1.name}`",
        "first `POP` gets",
        "{context}",
        "{extern_functions}",
        "DIV",
        "dividing by 0 is an error",
        "`[best]` is its cell",
        "[temps + ESI*4]",
        "in `EAX` right after the `CALL`, and do not `POP` it",
    ]:
        assert needle in text, needle
    assert "no memory" not in text.lower()


BASE_TOKENS_BEFORE_FAILURES = 884
"""The prompt with no tool before reserved words, ordered text, ``CALL tool, N`` and ``JC``
were taught (``count_tokens_approximately``; 3,557 characters, 626 words of template)."""


def test_built_in_template_stays_compact() -> None:
    # Before memory, division, the EAX rule and SAY were taught: 552 words, 3123 characters.
    # Memory, division, the EAX rule, SAY, formats and templates took it to 626 words, 3557
    # characters; reserved words, ordered text, CALL tool, N and JC to at most 15% more.
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately

    text = load_template()
    assert len(text.split()) <= 626 * 1.15
    assert len(text) <= 3557 * 1.15
    base = count_tokens_approximately([SystemMessage(build_system_prompt({}))])
    assert base <= BASE_TOKENS_BEFORE_FAILURES * 1.15


DEMO_PROMPT_BEFORE_STRUCTURES = 6186
"""The demo's system prompt (its ten tools, no context) before structured values were taught."""


def test_the_demo_prompt_stays_within_ten_percent_of_its_size_before_structures() -> None:
    from llassembly_demo.tools import UNIT_TOOLS

    prompt = build_system_prompt(externs_from(UNIT_TOOLS))
    assert len(prompt) <= DEMO_PROMPT_BEFORE_STRUCTURES * 1.1
    assert "## Structured values" not in prompt  # plain values only: not taught


class Item(BaseModel):
    id: int
    title: str
    price: float


class Page(TypedDict):
    items: list[Item]
    next_cursor: str | None


def search(query: str, cursor: str | None = None, limit: int = 10) -> Page:
    """Search the catalogue."""
    return {"items": [], "next_cursor": None}


def test_a_structured_result_is_named_in_its_block_and_read_by_a_path() -> None:
    block = describe_extern(externs_from([search])["search"])
    assert "search(query: str, cursor: str | None = None, limit: int = 10) -> Page" in block
    assert "Page {" not in block  # its fields are in the types section
    assert "CALL search, 1         ; cursor, limit: their defaults" in block
    assert "MOV R2, R1.items[0].id ; a field" in block


def test_the_prompt_teaches_structures_only_to_a_toolset_that_has_them() -> None:
    with_structures = build_system_prompt(externs_from([search, make_one_step]))
    assert "## Structured values" in with_structures and "{structures}" not in with_structures
    assert "R1.items[ESI].name" in with_structures and "KEYS dst, obj" in with_structures
    plain = build_system_prompt(externs_from([make_one_step, position]))
    assert "## Structured values" not in plain and "{structures}" not in plain


def test_a_list_of_plain_values_is_read_in_its_block_without_the_structures_section() -> None:
    def enemies(radius: int) -> list[int]:
        """The ids of the enemies within radius."""
        return []

    prompt = build_system_prompt(externs_from([enemies, make_one_step]))
    assert "## Structured values" not in prompt
    assert "MOV R2, R1[0] ; its first element" in prompt
    assert "LEN R3, R1    ; how many" in prompt


class Address(BaseModel):
    street: str
    city: str


class Hotel(BaseModel):
    name: str
    address: Address
    kind: Literal["inn", "hotel", "resort"]


class Stay(TypedDict):
    hotel: Hotel
    nights: int


def test_one_types_section_holds_every_record_type_once() -> None:
    """Reached from arguments and results, nested, in maps and unions: each record's fields
    once, whichever tool names it first and however long that tool's description."""

    def search_again(query: str) -> Page:
        """Search once more."""
        return {"items": [], "next_cursor": None}

    def book(stay: Stay, note: str | None = None) -> dict[str, Hotel] | None:
        """Book a stay. """ + "Read the terms first. " * 400
        return None

    prompt = build_system_prompt(externs_from([book, search, search_again]))
    tools, types = prompt.split("\n# Tools\n", 1)[1].split("\n# Types\n", 1)
    assert "search_again(query: str) -> Page" in tools
    assert "book(stay: Stay, note: str | None = None) -> dict[str, Hotel] | None" in tools
    assert "{" not in tools.replace("{R", "")  # no fields in the tools' blocks
    assert types.splitlines()[1:] == [
        "Stay {hotel: Hotel, nights: int}",
        'Hotel {name: str, address: Address, kind: one of "inn", "hotel", "resort"}',
        "Address {street: str, city: str}",
        "Page {items: list[Item], next_cursor: str | None}",
        "Item {id: int, title: str, price: float}",
    ]


class Tag(BaseModel):
    label: str


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_two_record_types_of_one_name_get_two_names_in_the_prompt() -> None:
    """Two classes ``Tag`` (from two modules) are two types: the second is ``Tag2`` in its
    tool's block and in the types, never merged into the first; a ``Tag2`` of the tools keeps
    its own name; one type reached at many depths (a recursive one) stays one name."""
    other = create_model("Tag", totally=(int, ...), different=(str, ...))
    own = create_model("Tag2", mine=(int, ...))

    def tags(tag: Tag) -> list[Tag]:
        """Tags like this one."""
        return []

    def odd() -> Any:
        """Other tags."""
        return {}

    def mine(tree: Node) -> Any:
        """My own Tag2."""
        return None

    odd.__annotations__["return"] = dict[str, other]  # type: ignore[valid-type]
    mine.__annotations__["return"] = own

    prompt = build_system_prompt(externs_from([tags, odd, mine]))
    tools, types = prompt.split("\n# Tools\n", 1)[1].split("\n# Types\n", 1)
    assert "tags(tag: Tag) -> list[Tag]" in tools
    assert "odd() -> dict[str, Tag3]" in tools
    assert "mine(tree: Node) -> Tag2" in tools
    assert types.splitlines()[1:] == [
        "Tag {label: str}",
        "Tag3 {totally: int, different: str}",
        "Node {name: str, children: list[Node] = []}",
        "Tag2 {mine: int}",
    ]


class Payee(BaseModel):
    iban: str = Field(pattern=r"^[A-Z]{2}[0-9]+$")
    name: str = Field(max_length=40)
    share: float = Field(default=1.0, gt=0, le=1)
    note: str | None = None


class Order(TypedDict):
    payee: Payee
    day: Annotated[int, Field(ge=1, le=28)]
    memo: NotRequired[str]


def test_the_types_say_what_a_taken_record_s_fields_must_be_and_which_may_be_left_out() -> None:
    """A record a tool takes is checked against its schema: its fields' constraints, and a
    default (``= ...``) where a field may be left out, as the tools' signatures say them. A
    record a tool only returns says neither: a plan never writes one."""

    def pay(order: Order) -> Payee:
        """Pay someone."""
        raise NotImplementedError

    def last_payee() -> Item:
        """The last item bought."""
        raise NotImplementedError

    prompt = build_system_prompt(externs_from([pay, last_payee]))
    assert prompt.split("\n# Types\n", 1)[1].splitlines()[1:] == [
        "Order {payee: Payee, day: int (>= 1, <= 28), memo: str = default}",
        "Payee {iban: str (matching ^[A-Z]{2}[0-9]+$), name: str (at most 40 characters), "
        "share: float (> 0, <= 1) = 1.0, note: str | None = null}",
        "Item {id: int, title: str, price: float}",
    ]


class Booking(BaseModel):
    guest: str
    when: str = Field("today", alias="date")
    nights: int = Field(1, ge=1)
    secret: SkipJsonSchema[str] = "server-side"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return f"{self.guest} {self.when}"


def test_a_taken_record_is_written_as_the_tool_reads_it() -> None:
    """A record a tool takes is described by the keys its schema validates, as the model's own
    tool schema shows it: an aliased field by its alias, no field hidden from models
    (``SkipJsonSchema``) at any depth, no computed field (it is written, never read); the
    call's example writes it so too, and a plan writing it so reaches the tool."""
    got: list[Booking] = []

    def book(booking: Booking) -> str:
        """Book a room."""
        got.append(booking)
        return "ok"

    externs = externs_from([book])
    prompt = build_system_prompt(externs)
    assert prompt.split("\n# Types\n", 1)[1].splitlines()[1:] == [
        'Booking {guest: str, date: str = "today", nights: int (>= 1) = 1}',
    ]
    tools = prompt.split("\n# Tools\n", 1)[1]
    assert "secret" not in tools and "label" not in tools and "when" not in tools
    assert '{"guest": "text", "date": "text"' in describe_extern(externs["book"])
    plan = 'PUSH \'{"guest": "Ada", "date": "monday"}\'\nCALL book\nPOP R1\n'
    assert check(parse(plan), externs) == ()
    Emulator(parse(plan), externs).run()
    assert (got[0].when, got[0].secret) == ("monday", "server-side")


def test_the_types_of_a_json_schema_tool_say_its_records_constraints_too() -> None:
    """An MCP tool declares its records in JSON schema (``$defs``): read the same way (a
    nested field's default value is not kept: ``= default`` says it may be left out)."""
    schema = {
        "type": "object",
        "properties": {"order": {"$ref": "#/$defs/Order"}},
        "required": ["order"],
        "$defs": {
            "Order": {
                "type": "object",
                "title": "Order",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0},
                    "currency": {"type": "string", "default": "EUR", "minLength": 3},
                },
                "required": ["amount"],
            }
        },
    }
    pay = StructuredTool(name="pay", description="Pay.", args_schema=schema, func=lambda **kw: "ok")
    prompt = build_system_prompt(externs_from([pay]))
    assert prompt.split("\n# Types\n", 1)[1].splitlines()[1:] == [
        "Order {amount: float (> 0), currency: str (at least 3 characters) = default}",
    ]


def test_a_record_with_no_name_is_written_out_where_it_is_used() -> None:
    def move(to: dict[str, int]) -> Any:
        return None

    move.__annotations__["to"] = TypedDict("", {"x": int, "y": int})  # type: ignore[operator]
    assert "move(to: {x: int, y: int}) -> any" in describe_extern(externs_from([move])["move"])


def test_a_long_description_is_cut_but_never_the_arguments_or_their_choices() -> None:
    fields: dict[str, Any] = {
        f"option_{i}": (Literal["north", "south", "east", "west"], Field(description="x" * 500))
        for i in range(12)
    }
    args = create_model("Args", **fields)

    @tool(args_schema=args)
    def steer(**kwargs: Any) -> str:
        """Steer the ship."""
        return ""

    steer.description = "Steer the ship. " * 200
    block = describe_extern(externs_from([steer])["steer"])
    assert block.count('one of "north", "south", "east", "west"') == 12  # the signature
    assert all(f"  option_{i}: xxx" in block for i in range(12))
    assert "Steer the ship. Steer" in block and "..." in block
    assert len(block.split("\n")[2]) <= 120  # the description, cut at a word


def _huge_tool(fields: int, doc: int) -> Any:
    model = create_model("Huge", **{f"field_{i}": (str, ...) for i in range(fields)})  # type: ignore[call-overload]

    def huge(record: Any, note: str) -> Any:
        return []

    huge.__annotations__ = {"record": model, "note": str, "return": list[model]}  # type: ignore[valid-type]
    huge.__doc__ = "A tool that does many things. " * doc
    return huge


@pytest.mark.parametrize(("fields", "doc"), [(3, 1), (60, 1), (5, 200), (200, 200)])
def test_every_tool_block_stays_within_its_budget(fields: int, doc: int) -> None:
    block = describe_extern(externs_from([_huge_tool(fields, doc)])["huge"])
    assert len(block) <= TOOL_BLOCK_BUDGET
    assert block.startswith("## huge\nhuge(record: Huge, note: str) -> list[Huge]")
    assert "Example:" in block


def test_prompts_for_large_toolsets_grow_by_the_budget_per_tool_at_most() -> None:
    def tools(count: int) -> list[Any]:
        made = []
        for i in range(count):

            def find(query: str, cursor: str | None = None) -> Page:
                """Find records."""
                return {"items": [], "next_cursor": None}

            find.__name__ = f"find_{i}"
            made.append(find)
        return made

    base = len(build_system_prompt(externs_from(tools(1))))
    for count in (10, 50, 200):
        size = len(build_system_prompt(externs_from(tools(count))))
        assert size - base <= (count - 1) * TOOL_BLOCK_BUDGET
        assert size - base <= (count - 1) * 250  # the types section names their types once


def test_the_data_the_template_shows_works_as_it_says() -> None:
    from llassembly.language.parser import parse
    from llassembly.machine.emulator import Emulator

    template = load_template()
    data = template.split("## Data\n", 1)[1].split("\nA name", 1)[0]
    plan = "MOV EAX, 7\nMOV [best], EAX\nMOV ESI, 2\nMOV [temps + ESI*4], 9\nMOV R1, city\nHLT\n"
    emulator = Emulator(parse(plan + data), [])
    emulator.run()
    assert emulator.state.mem == {"best": [7], "temps": [0, 0, 9]}
    assert emulator.result().registers["R1"] == "Paris"


def test_prompt_has_one_block_per_tool_and_the_caller_context() -> None:
    prompt = build_system_prompt(EXTERNS, "You are a goblin in a dungeon.")
    assert prompt.startswith("You are a goblin in a dungeon.")
    for name in EXTERNS:
        assert f"## {name}\n" in prompt
    assert "{extern_functions}" not in prompt
    assert "{context}" not in prompt


def test_empty_context_leaves_no_placeholder_or_leading_blank_lines() -> None:
    prompt = build_system_prompt(EXTERNS)
    assert "{context}" not in prompt
    assert prompt.startswith("# ")


def test_block_shows_signature_description_arguments_results_and_example() -> None:
    block = describe_extern(EXTERNS["make_one_step"])
    assert block.splitlines() == [
        "## make_one_step",
        "make_one_step(x: int, y: int) -> int",
        "Move one step towards (x, y).",
        "Arguments:",
        "  x: Target column.",
        "  y: Target row.",
        "Example:",
        "    PUSH 5             ; x",
        "    PUSH 7             ; y",
        "    CALL make_one_step",
        "    POP R1             ; result",
    ]


def test_an_argument_without_a_description_is_listed_with_its_type() -> None:
    def book(room: str, nights: int = 1) -> str:
        """Book a room.

        Args:
            room: The room's number.
        """
        return ""

    block = describe_extern(externs_from([book])["book"])
    assert "  room: The room's number.\n  nights: int\n" in block


def test_block_of_a_two_result_tool_pops_twice() -> None:
    block = describe_extern(EXTERNS["position"])
    assert "position() -> (int, int)" in block
    assert "Arguments" not in block  # the signature shows there are none
    assert "Returns 2 values: the first POP gets the first one." in block
    assert "POP R1" in block
    assert "POP R2" in block


def test_block_of_a_none_tool_has_no_pop_and_hides_the_runtime() -> None:
    block = describe_extern(EXTERNS["say"])
    assert "say(text: str) -> nothing" in block
    assert "runtime" not in block
    assert "POP" not in block.split("Example:")[1]
    assert 'PUSH "text"' in block


def test_block_of_a_model_argument_shows_json_in_single_quotes() -> None:
    block = describe_extern(EXTERNS["go"])
    assert "go(to: Point, fast: bool (1 or 0)) -> str" in block
    assert "Point {x: int, y: int}" in build_system_prompt(EXTERNS).split("# Types")[1]
    assert """PUSH '{"x": 1, "y": 1}'""" in block
    assert "PUSH 1 " in block


def test_a_tools_signature_is_shown_in_its_block() -> None:
    ext = EXTERNS["make_one_step"]
    assert extern_signature(ext) == "make_one_step(x: int, y: int) -> int"
    assert extern_signature(ext) in describe_extern(ext)


def test_no_tools_is_said_plainly() -> None:
    assert "(no tools)" in build_system_prompt({})


def test_prompt_path_replaces_the_built_in_template(tmp_path: Path) -> None:
    path = tmp_path / "mine.md"
    path.write_text("CTX={context}\nTOOLS:\n{extern_functions}\n", encoding="utf-8")
    prompt = build_system_prompt(EXTERNS, "hello", prompt_path=path)
    assert prompt.startswith("CTX=hello\nTOOLS:\n## make_one_step")
    assert "How you act" not in prompt
    assert build_system_prompt(EXTERNS, "hello", prompt_path=str(path)) == prompt


def test_template_without_placeholders_is_used_as_is(tmp_path: Path) -> None:
    path = tmp_path / "plain.md"
    path.write_text("Just plan.", encoding="utf-8")
    assert build_system_prompt(EXTERNS, "ignored", prompt_path=path) == "Just plan.\n"


def test_template_with_stray_braces_does_not_crash(tmp_path: Path) -> None:
    path = tmp_path / "braces.md"
    path.write_text('{context} {unknown} {"x": 1} {0} {{ } {\n{extern_functions}', encoding="utf-8")
    prompt = build_system_prompt(EXTERNS, "ctx", prompt_path=path)
    assert prompt.startswith('ctx {unknown} {"x": 1} {0} {{ } {\n## make_one_step')


def test_context_with_braces_is_inserted_verbatim() -> None:
    prompt = build_system_prompt(EXTERNS, "Use {extern_functions} literally? {x}")
    assert prompt.startswith("Use {extern_functions} literally? {x}")


def test_missing_prompt_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the prompt template"):
        build_system_prompt(EXTERNS, prompt_path=tmp_path / "nope.md")


def test_a_prompt_path_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    """It used to escape as a bare ``UnicodeDecodeError``."""
    path = tmp_path / "latin1.md"
    path.write_bytes("Réponds. {context}\n{extern_functions}".encode("latin-1"))
    with pytest.raises(UsageError) as refused:
        build_system_prompt(EXTERNS, prompt_path=path)
    assert str(refused.value) == (
        f"cannot read the prompt template {str(path)!r}: 'utf-8' codec can't decode byte 0xe9 "
        "in position 1: invalid continuation byte"
    )


# -- every example plan the prompt shows verifies ------------------------------------------------


class Lamp(BaseModel):
    title: str
    price: float


class LampPage(TypedDict):
    items: list[Lamp]
    next_cursor: str | None


def _example_tools() -> dict[str, Any]:
    """The tools the examples of ``prompts/*.md`` name, with the signatures they say."""
    from llassembly.integration.query import QUERY_EXTERN

    def probe(x: int) -> int:
        return 0

    def search(query: str, cursor: str | None = None) -> LampPage:
        return {"items": [Lamp(title="Desk lamp", price=19.5)], "next_cursor": None}

    def ratings(city: str) -> dict[str, float]:
        return {"Ritz": 4.5, "Savoy": 4.8}

    def read_file(name: str) -> str:
        return "Pay EUR 12.50 to DE89370400440532013000."

    def pay(iban: str, amount: float) -> str:
        return "paid"

    tools = externs_from([probe, search, ratings, read_file, pay])
    return {**tools, "query_text": QUERY_EXTERN}


def _asm_blocks(text: str) -> list[str]:
    return [block.split("```", 1)[0] for block in text.split("```asm\n")[1:]]


@pytest.mark.parametrize("name", ["base", "structures", "queries"])
def test_every_example_plan_in_the_prompt_files_parses_and_verifies(name: str) -> None:
    from importlib import resources

    from llassembly.analysis.verifier import check
    from llassembly.language.parser import parse
    from llassembly.language.program import Program

    prompts = resources.files("llassembly.integration").joinpath("prompts")
    blocks = _asm_blocks(prompts.joinpath(f"{name}.md").read_text("utf-8"))
    assert blocks
    for block in blocks:
        program = parse(block)
        assert isinstance(program, Program), block
        assert [d.message for d in check(program, _example_tools())] == [], block


def test_the_examples_without_queries_run_and_say_what_they_mean() -> None:
    from llassembly.language.parser import parse
    from llassembly.language.program import Program
    from llassembly.machine.emulator import Emulator

    prompts = load_template() + _section("structures")
    answers = []
    for block in _asm_blocks(prompts):
        program = parse(block)
        assert isinstance(program, Program)
        answers.append(Emulator(program, _example_tools()).run().answer)
    assert answers == ["", "1 lamps, 19.50 in all", "Ritz: 4.5\nSavoy: 4.8"]


def test_every_tool_blocks_example_verifies() -> None:
    """The example each block writes (``CALL tool, N`` leaving the defaults out, JSON in
    quotes, a field read) is a plan the verifier takes, for tools of every form."""
    from benchmarks import bench_tokens
    from llassembly.analysis.verifier import check
    from llassembly.language.parser import parse
    from llassembly.language.program import Program

    catalogue = [bench_tokens._catalogue_tool(i) for i in range(4)]
    tools = {**externs_from(catalogue), **EXTERNS, **externs_from([search])}
    for extern in tools.values():
        example = describe_extern(extern).split("Example:\n", 1)[1]
        program = parse(example)
        assert isinstance(program, Program)
        assert [d.message for d in check(program, tools)] == [], example


def route(
    origin: Annotated[str, Field(pattern="^[A-Z]{3}$")],
    stops: Annotated[int, Field(ge=1, le=3)],
    budget: Annotated[float, Field(gt=100, le=10000, description="In EUR.")],
    day: datetime.date,
) -> str:
    """Plan a route."""
    return ""


def test_an_arguments_constraints_are_shown_and_its_example_keeps_them() -> None:
    """The planner writes literals the check takes: each constraint of the declared schema is
    shown beside its argument, and the example pushes values that keep them (a value held in
    a register where no literal is known to fit)."""
    tools = externs_from([route])
    block = describe_extern(tools["route"])
    assert "  origin: str (matching ^[A-Z]{3}$)" in block
    assert "  stops: int (>= 1, <= 3)" in block
    assert "  budget: In EUR. (> 100, <= 10000)" in block
    assert (
        'PUSH "2026-01-31" ; day' in block
        and "PUSH R3           ; origin: a str (matching" in block
    )
    example = block.split("Example:\n", 1)[1]
    program = parse(example)
    assert [d.message for d in check(program, tools)] == [], example


class Spot(NamedTuple):
    x: int
    y: int


def test_a_tuple_parameter_is_shown_as_the_array_of_its_items_or_by_its_name() -> None:
    def move(to: tuple[int, str], path: list[tuple[float, float]], at: Spot) -> None:
        """Move."""

    signature = extern_signature(externs_from([move])["move"])
    assert signature == "move(to: [int, str], path: list[[float, float]], at: Spot) -> nothing"


def _paint(**kwargs: Any) -> str:
    return ""


def test_an_enum_shows_its_values_whatever_their_kinds() -> None:
    """With ``None`` among them (``NONE``), booleans (1 or 0, as the plan holds them), or
    values of several kinds; a check message says them alike."""
    schema = {
        "type": "object",
        "properties": {
            "color": {"type": ["string", "null"], "enum": ["red", "green", None]},
            "confirm": {"type": "boolean", "const": True},
            "level": {"enum": ["auto", 1, 2]},
        },
        "required": ["color", "confirm", "level"],
    }
    paint = StructuredTool.from_function(_paint, name="paint", description=".", args_schema=schema)
    assert extern_signature(externs_from([paint])["paint"]) == (
        'paint(color: one of "red", "green" or NONE, confirm: one of 1, level: one of "auto", 1, 2)'
        " -> str"
    )
    found = check(parse('PUSH "x"\nPUSH 1\nPUSH 3\nCALL paint'), [paint])
    assert [d.message.split(", got")[0] for d in found] == [
        'CALL paint: argument \'color\': expected one of "red", "green"',
        "CALL paint: argument 'level': expected one of \"auto\", 1, 2",
    ]


class _Category(str, enum.Enum):  # noqa: UP042 (the spelling before StrEnum, still common)
    GROCERIES = "groceries"
    RENT = "rent"


class _Unit(enum.StrEnum):
    KG = "kg"
    LB = "lb"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def test_an_enum_shows_its_values_whatever_it_derives_from() -> None:
    """A ``str`` enum (and a ``StrEnum``) shows its values as an ``Enum`` and an ``IntEnum``
    do, in the signature and in a refusal: the model is told what it may push."""

    @tool
    def spend(category: _Category, unit: _Unit, level: _Level) -> str:
        """Spend."""
        return "ok"

    assert extern_signature(externs_from([spend])["spend"]) == (
        'spend(category: one of "groceries", "rent", unit: one of "kg", "lb", level: one of 1, 2)'
        " -> str"
    )
    [found] = check(parse('PUSH "food"\nPUSH "kg"\nPUSH 1\nCALL spend'), [spend])
    assert found.message.startswith(
        'CALL spend: argument \'category\': expected one of "groceries", "rent", got'
    )


def test_a_record_inside_a_refused_one_is_told_by_its_fields_when_its_name_is_shared() -> None:
    """Two record types named ``Tag`` (the prompt lists the second as ``Tag2``): a refusal
    that named the inner record by its class name alone pointed at the other one's fields."""
    import types

    first, second = types.ModuleType("shop_a"), types.ModuleType("shop_b")
    exec("from pydantic import BaseModel\nclass Tag(BaseModel):\n    label: str\n", vars(first))
    code = "from pydantic import BaseModel\nclass Tag(BaseModel):\n    code: int\n    color: str\n"
    exec(code, vars(second))
    order = create_model("Order", sku=(str, ...), tag=(second.Tag, ...))
    tag_item = StructuredTool.from_function(
        lambda tag: "ok",
        name="tag_item",
        description=".",
        args_schema=create_model("T", tag=first.Tag),
    )
    place = StructuredTool.from_function(
        lambda order: "ok",
        name="place",
        description=".",
        args_schema=create_model("P", order=order),
    )
    assert "Tag2 {code: int, color: str}" in build_system_prompt(externs_from([tag_item, place]))
    plan = 'MOV R1, \'{"sku": "x", "tag": {"code": "red", "color": "r"}}\'\nPUSH R1\nCALL place'
    [problem] = check(parse(plan), [tag_item, place])
    assert '"tag": JSON object {"code", "color"}' in problem.message
