"""Every public function that takes tools takes them the same way (issue 28, item 3): a list
(any iterable) of LangChain tools, functions or externs, or a mapping of tool name to tool.
Anything else, a single tool included, is a ``TypeError`` (also a ``UsageError``) that names
the parameter and says what to write."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from langchain_core.tools import tool

import llassembly
from llassembly import (
    AToolsPlannerNode,
    Emulator,
    ToolsPlannerMiddleware,
    ToolsPlannerNode,
    UsageError,
    aplan,
    build_system_prompt,
    check,
    compile_program,
    externs_from,
    parse_program,
    plan,
    summarize,
    verify,
)
from llassembly.cli import main
from tests.fakes import ScriptedChatModel

PLAN = "PUSH 2\nPUSH 3\nCALL add\nPOP R1"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def add_tool(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(replies=[f"```asm\n{PLAN}\n```"])


def _names(externs: Any) -> list[str]:
    return sorted(externs)


# Each public entry point, called with ``tools``; it returns the tool names the plan may call
# (so a test can see the tools arrived under the right names).
ENTRY_POINTS: dict[str, Callable[[Any], list[str]]] = {
    "check": lambda tools: (check(parse_program(PLAN), tools), ["add"])[1],
    "verify": lambda tools: (verify(parse_program(PLAN), tools), ["add"])[1],
    "summarize": lambda tools: [u.name for u in summarize(parse_program(PLAN), tools).tools],
    "Emulator": lambda tools: _names(Emulator(parse_program(PLAN), tools).compiled.externs),
    "compile_program": lambda tools: _names(
        compile_program(parse_program(PLAN), tools, max_stack_depth=16).externs
    ),
    "externs_from": lambda tools: _names(externs_from(tools)),
    "build_system_prompt": lambda tools: ["add"] if "## add" in build_system_prompt(tools) else [],
    "ToolsPlannerNode": lambda tools: _names(ToolsPlannerNode(_model(), tools=tools).externs),
    "AToolsPlannerNode": lambda tools: _names(AToolsPlannerNode(_model(), tools=tools).externs),
    "ToolsPlannerMiddleware": lambda tools: _names(
        ToolsPlannerMiddleware(tools=tools)._given or {}
    ),
    "plan": lambda tools: _names(plan(_model(), tools, "add 2 and 3").externs),
    "aplan": lambda tools: _names(asyncio.run(aplan(_model(), tools, "add 2 and 3")).externs),
}

WAYS: dict[str, Callable[[], Any]] = {
    "a list of a function": lambda: [add],
    "a tuple of a LangChain tool": lambda: (add_tool.model_copy(update={"name": "add"}),),
    "a generator of externs": lambda: (e for e in externs_from([add]).values()),
    "a mapping of a function": lambda: {"add": add},
    "a mapping naming a lambda": lambda: {"add": lambda a, b: a + b},
    "a mapping of a LangChain tool by its name": lambda: {
        "add": add_tool.model_copy(update={"name": "add"})
    },
    "a mapping of externs": lambda: externs_from([add]),
}


@pytest.mark.parametrize("way", sorted(WAYS))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_takes_a_list_or_a_mapping(entry: str, way: str) -> None:
    assert ENTRY_POINTS[entry](WAYS[way]()) == ["add"]


def test_the_entry_points_are_every_public_name_that_takes_tools() -> None:
    """A new public function with a ``tools`` (or ``externs``) parameter joins the table
    (records the library builds, such as ``Plan``, are left out)."""
    import dataclasses
    import inspect

    taking = set()
    for name in llassembly.__all__:
        value = getattr(llassembly, name)
        target = value.__init__ if inspect.isclass(value) else value
        if not callable(target) or dataclasses.is_dataclass(value):
            continue
        try:
            params = inspect.signature(target).parameters
        except (TypeError, ValueError):
            continue
        takes = [p for p in ("tools", "externs") if p in params]
        # (a parameter of tool *names*, as ``not_in_loop(*tools)`` takes, is not one)
        if any(params[p].kind is not inspect.Parameter.VAR_POSITIONAL for p in takes):
            taking.add(name)
    assert taking == set(ENTRY_POINTS)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_single_tool_is_a_type_error_saying_wrap_it_in_a_list(entry: str) -> None:
    for single, shown in ((add, "[add]"), (add_tool, "[add_tool]")):
        with pytest.raises(TypeError, match=rf"must be a list .* wrap it in a list: \{shown}"):
            ENTRY_POINTS[entry](single)
        with pytest.raises(UsageError):  # the same error is the library's own usage error
            ENTRY_POINTS[entry](single)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(
    ("junk", "message"),
    [
        (5, r"must be a list of tools .* or a mapping of tool name to tool, not int"),
        ("add", r"must be a list of tools .* not str: a name is not a tool"),
        ([5], r"\[0\]: 5 is neither a LangChain tool nor a callable"),
        ({"add": 5}, r"\['add'\]: 5 is neither a LangChain tool nor a callable"),
        ({1: add}, r"a mapping of tools is keyed by tool name, not 1"),
        (None, r"not NoneType"),
    ],
)
def test_anything_else_is_a_type_error_naming_the_parameter(
    entry: str, junk: Any, message: str
) -> None:
    if junk is None and entry == "ToolsPlannerMiddleware":
        return  # tools=None is its default: the agent's own tools
    parameter = "externs" if entry in ("compile_program", "build_system_prompt") else "tools"
    with pytest.raises(TypeError, match=rf"^{parameter}\b.*{message}"):
        ENTRY_POINTS[entry](junk)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_mapping_key_must_be_the_name_of_a_tool_that_has_one(entry: str) -> None:
    """A key names a function (its ``__name__`` is not used); a LangChain tool or an extern
    has its own name, which the agent's tool node also calls it by, so a different key is
    refused rather than silently renaming it."""
    for named in (add_tool, externs_from([add_tool])["add_tool"]):
        with pytest.raises(UsageError, match=r"\['add'\]: .*named 'add_tool'.* key it by"):
            ENTRY_POINTS[entry]({"add": named})
    assert ENTRY_POINTS[entry]({"add": add_tool.func}) == ["add"]  # a function: the key


@pytest.mark.parametrize(
    ("attr", "code", "shown"),
    [
        ("LIST", 0, "5"),
        ("MAPPING", 0, "5"),
        ("SINGLE", 0, "5"),
        ("JUNK", 3, "--tools must be a list of tools"),
        ("JUNK_ITEM", 3, "--tools[1]: 5 is neither"),
    ],
)
def test_the_cli_tools_option_takes_the_same_convention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attr: str, code: int, shown: str
) -> None:
    (tmp_path / "tools_ways.py").write_text(
        "def add(a: int, b: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "LIST = [add]\nMAPPING = {'add': add}\nSINGLE = add\nJUNK = 5\nJUNK_ITEM = [add, 5]\n",
        encoding="utf-8",
    )
    (tmp_path / "plan.asm").write_text(PLAN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert main(["run", "plan.asm", "--tools", f"tools_ways:{attr}", "--json"], out=out) == code
    data = json.loads(out.getvalue())
    assert shown in json.dumps(data)


def test_a_users_strict_code_passes_tools_either_way_without_casts(tmp_path: Path) -> None:
    """``mypy --strict`` takes a list or a mapping mixing functions and LangChain tools at
    every entry point, and flags a single tool (the mistake the run-time error names)."""
    import subprocess
    import sys
    import textwrap

    snippet = tmp_path / "user_code.py"
    snippet.write_text(
        textwrap.dedent(
            '''
            from langchain_core.language_models.fake_chat_models import FakeListChatModel
            from langchain_core.tools import tool

            from llassembly import (
                Emulator, ToolsPlannerMiddleware, ToolsPlannerNode, build_system_prompt,
                check, compile_program, externs_from, parse_program, plan, summarize,
            )

            def add(a: int, b: int) -> int:
                return a + b

            @tool
            def mul(a: int, b: int) -> int:
                """Multiply."""
                return a * b

            model = FakeListChatModel(responses=["x"])
            p = parse_program("PUSH 1\\nPUSH 2\\nCALL add\\nPOP R1")
            Emulator(p, add)
            '''
        )
        + "".join(
            call.replace("TOOLS", tools) + "\n"
            for tools in ("[add, mul]", '{"add": add, "mul": mul}', "externs_from([add])")
            for call in (
                "check(p, TOOLS)",
                "summarize(p, TOOLS)",
                "Emulator(p, TOOLS)",
                "compile_program(p, TOOLS, max_stack_depth=8)",
                "build_system_prompt(TOOLS)",
                "externs_from(TOOLS)",
                "ToolsPlannerNode(model, tools=TOOLS)",
                "ToolsPlannerMiddleware(tools=TOOLS)",
                "plan(model, TOOLS, 'q')",
            )
        ),
        encoding="utf-8",
    )
    root = ROOT
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        cwd=root,  # the project's settings and cache
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr
    assert "user_code.py:20:" in errors[0] and "Emulator" in errors[0]
