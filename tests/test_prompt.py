"""Tests for llassembly.prompt: the system prompt and the per-tool blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain.tools import ToolRuntime, tool
from pydantic import BaseModel, create_model

from llassembly.errors import UsageError
from llassembly.integration.prompt import (
    TOOL_BLOCK_BUDGET,
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
        "equality only",
        "first argument first",
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


def test_built_in_template_stays_compact() -> None:
    # Before memory, division, the EAX rule and SAY were taught: 552 words, 3123 characters;
    # number formats and templates added 150 characters (the blocks of plain tools lost more).
    # At most about 15% more, all of them together (words as a token estimate, and chars / 4).
    text = load_template()
    assert len(text.split()) <= 552 * 1.15
    assert len(text) <= 3123 * 1.15


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


def test_a_structured_result_is_described_by_its_fields_and_read_by_a_path() -> None:
    block = describe_extern(externs_from([search])["search"])
    assert "search(query: str, cursor: str | None = None, limit: int = 10) -> Page" in block
    assert (
        "Fields: Page {items: list[Item], next_cursor: str | None}; "
        "Item {id: int, title: str, price: float}"
    ) in block
    assert "PUSH NONE              ; cursor: its default" in block
    assert "MOV R2, R1.items[0].id ; a field" in block


def test_the_prompt_teaches_structures_only_to_a_toolset_that_has_them() -> None:
    with_structures = build_system_prompt(externs_from([search, make_one_step]))
    assert "## Structured values" in with_structures and "{structures}" not in with_structures
    assert "R1.items[ESI].name" in with_structures and "PUSH NONE" in with_structures
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


def test_each_structured_type_is_described_once_per_prompt() -> None:
    def search_again(query: str) -> Page:
        """Search once more."""
        return {"items": [], "next_cursor": None}

    prompt = build_system_prompt(externs_from([search, search_again]))
    tools = prompt.split("\n# Tools\n", 1)[1]
    assert tools.count("Page {items") == 1 and tools.count("Item {id") == 1
    assert "search_again(query: str) -> Page" in prompt


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
    assert "Example:" in block or block.endswith(" ...")


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
        assert size - base <= (count - 1) * 400  # blocks after the first name their types


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
        "Arguments, push in this order:",
        "  x: Target column.",
        "  y: Target row.",
        "Example:",
        "    PUSH 5             ; x",
        "    PUSH 7             ; y",
        "    CALL make_one_step",
        "    POP R1             ; result",
    ]


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
    assert "Fields: Point {x: int, y: int}" in block
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
