"""The command line: ``llassembly check``, ``run`` and ``demo``; ``--json``, ``--version``,
exit codes."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool
from pydantic import Field

import llassembly
from llassembly.cli import (
    EXIT_CODES,
    JSON_SCHEMA,
    _returns_tools,
    load_tools,
    main,
)
from llassembly.errors import UsageError
from llassembly.integration.query import add_query
from llassembly.language.parser import NotWords, not_words

WEATHER = "examples/weather.asm"
WEATHER_TOOLS = "examples.weather_tools:TOOLS"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root with ``tests/`` importable, as a user would."""
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT / "tests"))


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def plan(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.asm"
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- check -----------------------------------------------------------------------------------


def test_check_accepts_the_weather_example() -> None:
    code, out = cli("check", WEATHER, "--tools", WEATHER_TOOLS)
    assert code == 0
    assert out == "OK: 20 instructions, 2 tool call sites.\n"


def test_check_counts_case_insensitive_tool_calls(tmp_path: Path) -> None:
    code, out = cli(
        "check", plan(tmp_path, "PUSH 1\nCALL Double\nPOP R1"), "--tools", "cli_tools:TOOLS"
    )
    assert code == 0
    assert "1 tool call sites" in out


def test_check_prints_every_problem_with_source_line_and_caret(tmp_path: Path) -> None:
    source = "MOV R1, 1\nFROB R2\nCALL nowhere\nJMP missing\n"
    code, out = cli("check", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 1
    lines = out.splitlines()
    assert lines[-1] == "3 problems found."
    expected = ((2, "FROB R2", 1), (3, "CALL nowhere", 6), (4, "JMP missing", 5))
    for number, text, column in expected:
        head = next(i for i, ln in enumerate(lines) if ln.startswith(f"line {number}, column"))
        assert lines[head].startswith(f"line {number}, column {column}: ")
        assert lines[head + 1] == f"    {text}"
        assert lines[head + 2] == "    " + " " * (column - 1) + "^"


def test_check_reports_a_syntax_error_with_a_caret(tmp_path: Path) -> None:
    code, out = cli("check", plan(tmp_path, "MOV R1, [R2\n"), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert "line 1, column 9: unclosed memory operand '[R2'" in out
    assert "    MOV R1, [R2\n            ^" in out


def test_check_of_a_plain_answer(tmp_path: Path) -> None:
    code, out = cli("check", plan(tmp_path, "The answer is 42."), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert "plain answer" in out


NOT_PLANS = {  # replies the planner sends back for repair, and the reason it gives
    "JSON": ('{"name": "double", "arguments": {"x": 2}}', "a JSON value"),
    "JSON after prose": (
        'I will call it.\n{"name": "double", "arguments": {"x": 2}}',
        "a JSON value",
    ),
    "python": ("```python\nprint(double(2))\n```", "code in python"),
    "unfenced python": ("def main():\n    return double(2)", "code in another language"),
    "call as text": ("double(x=2)", "a tool call written as text"),
}


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("kind", list(NOT_PLANS))
def test_a_reply_the_planner_repairs_is_a_plan_with_problems(
    command: str, kind: str, tmp_path: Path
) -> None:
    """Not a plain answer: rejected (exit 1) with the reason the planner sends the model."""
    reply, what = NOT_PLANS[kind]
    path = plan(tmp_path, reply)
    with pytest.raises(NotWords) as refused:  # the planner's own rule (turn.py asks it)
        not_words(reply)
    reason = f"the reply holds {what}, neither a program nor an answer in words: write the program"
    code, data = cli_json(command, path, "--tools", "cli_tools:TOOLS")
    assert (code, data["status"]) == (1, "rejected") and "text" not in data
    assert data["problems"] == [dataclasses.asdict(d) for d in refused.value.diagnostics]
    assert data["problems"][0]["message"].startswith(reason)
    code, out = cli(command, path, "--tools", "cli_tools:TOOLS")
    assert code == 1 and reason in out and "plain answer" not in out


# --- run -------------------------------------------------------------------------------------


def test_run_weather_prints_each_call_the_registers_and_the_answer() -> None:
    code, out = cli("run", WEATHER, "--tools", WEATHER_TOOLS)
    assert code == 0
    assert out.splitlines() == [
        "line  24  get_temperature(city='Paris') -> 21",
        "line  31  notify(message='warm city', value=21) -> None",
        "line  24  get_temperature(city='Oslo') -> 4",
        "line  24  get_temperature(city='Cairo') -> 33",
        "line  31  notify(message='warm city', value=33) -> None",
        "finished: 38 instructions, 5 tool calls",
        "registers: R1='Cairo', R2=33, R10=2",
        "answer: 2 of 3 cities are warmer than 20 degrees.",
    ]


def test_run_prints_every_line_the_plan_said(tmp_path: Path) -> None:
    source = 'PUSH 21\nCALL double\nPOP R1\nSAY "Doubled: {R1}."\nSAY "Done."\n'
    code, out = cli("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert out.endswith("registers: R1=42\nanswer: Doubled: 42.\n        Done.\n")


def test_run_of_a_plan_that_says_nothing_prints_no_answer_line(tmp_path: Path) -> None:
    code, out = cli("run", plan(tmp_path, "MOV R1, 1\n"), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert "answer" not in out


def test_run_prints_the_value_a_plan_returned(tmp_path: Path) -> None:
    """A top-level ``RET`` returns EAX (the x86 convention): ``run`` prints it, and ``--json``
    has it as ``returned`` (``null`` for a plan that returned nothing)."""
    source = "PUSH 21\nCALL double\nPOP EAX\nRET\n"
    code, out = cli("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert "returned: 42\n" in out
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert (code, data["returned"]) == (0, 42)
    code, data = cli_json("run", plan(tmp_path, "MOV R1, 1\n"), "--tools", "cli_tools:TOOLS")
    assert (code, data["returned"]) == (0, None)


def test_run_prints_tool_results_and_leftover_stack(tmp_path: Path) -> None:
    source = "PUSH 21\nCALL double\nPOP R1\nPUSH 'Ann'\nCALL greet\n"
    code, out = cli("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert out.splitlines() == [
        "line   2  double(x=21) -> 42",
        "line   5  greet(name='Ann') -> 'Hello, Ann'",
        "finished: 5 instructions, 2 tool calls",
        "registers: R1=42",
        "stack (bottom to top): ['Hello, Ann']",
    ]


def test_run_with_no_register_set(tmp_path: Path) -> None:
    code, out = cli("run", plan(tmp_path, "NOP\n"), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert "registers: (all zero)" in out


def test_run_reads_the_plan_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("PUSH 5\nCALL double\nPOP R3\n"))
    code, out = cli("run", "-", "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert "double(x=5) -> 10" in out
    assert "registers: R3=10" in out


@pytest.mark.parametrize("console", ["cp1252", "latin-1", "ascii", "utf-8"])
def test_the_plan_on_standard_input_is_utf8_whatever_the_console(
    console: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to be read in the console's encoding: ``hÃ©llo`` on cp1252, or refused as not
    UTF-8 on an ASCII console."""
    stream = io.TextIOWrapper(io.BytesIO('SAY "héllo"\n'.encode()), encoding=console)
    monkeypatch.setattr(sys, "stdin", stream)
    code, data = cli_json("run", "-", "--tools", "cli_tools:TOOLS")
    assert (code, data["answer"]) == (0, "héllo")


def test_run_stops_on_the_instruction_budget(tmp_path: Path) -> None:
    source = "loop: INC R1\nCMP R1, 1000\nJL loop\n"
    code, out = cli(
        "run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS", "--max-instructions", "10"
    )
    assert code == 2
    assert out.startswith("stopped: line ")
    assert "max_instructions_to_exec budget exceeded: limit 10, reached 11" in out


def test_run_stops_on_the_tool_call_budget(tmp_path: Path) -> None:
    source = "loop: PUSH R1\nCALL double\nPOP R1\nINC R1\nCMP R1, 1000\nJL loop\n"
    code, out = cli(
        "run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS", "--max-tool-calls", "2"
    )
    assert code == 2
    assert "max_tool_calls budget exceeded: limit 2, reached 3" in out
    assert out.count("double(") == 2


def test_run_stops_when_a_tool_raises(tmp_path: Path) -> None:
    code, out = cli("run", plan(tmp_path, "PUSH 3\nCALL explode\n"), "--tools", "cli_tools:TOOLS")
    assert code == 2
    assert "stopped: line 2: tool 'explode' raised RuntimeError: exploded on 3" in out


def test_run_of_a_rejected_plan_lists_the_problems(tmp_path: Path) -> None:
    code, out = cli("run", plan(tmp_path, "POP R1\n"), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert "rejected" in out
    assert "    POP R1\n    ^" in out


def test_tools_from_a_factory_function(tmp_path: Path) -> None:
    code, out = cli(
        "run", plan(tmp_path, "PUSH 'Bo'\nCALL greet\n"), "--tools", "cli_tools:make_tools"
    )
    assert code == 0
    assert "greet(name='Bo') -> 'Hello, Bo'" in out


def test_a_single_tool_may_be_named(tmp_path: Path) -> None:
    code, out = cli("run", plan(tmp_path, "PUSH 4\nCALL double\n"), "--tools", "cli_tools:double")
    assert code == 0
    assert "double(x=4) -> 8" in out


@pytest.mark.parametrize("tool", ["launch", "untyped_launch"])
def test_a_tool_of_no_parameters_is_one_tool_not_a_factory(tool: str, tmp_path: Path) -> None:
    """A factory is a function annotated to return tools; ``check`` used to call ``launch``
    (``-> str``) as one, then refuse its text as no list of tools."""
    from cli_tools import SIDE_EFFECTS

    SIDE_EFFECTS.clear()
    code, out = cli(
        "check", plan(tmp_path, f"CALL {tool}\nPOP R1\n"), "--tools", f"cli_tools:{tool}"
    )
    assert (code, out, SIDE_EFFECTS) == (0, "OK: 2 instructions, 1 tool call sites.\n", [])
    code, out = cli("run", plan(tmp_path, f"CALL {tool}\nPOP R1\n"), "--tools", f"cli_tools:{tool}")
    assert (code, SIDE_EFFECTS) == (0, [0])
    assert f"line   1  {tool}() -> 'launched'" in out


@pytest.mark.parametrize(
    ("factory", "source"),
    [("one_tool", "PUSH 4\nCALL double\n"), ("tool_map", "PUSH 'Bo'\nCALL greet\n")],
)
def test_a_factory_may_return_one_tool_or_a_mapping(
    factory: str, source: str, tmp_path: Path
) -> None:
    code, out = cli("run", plan(tmp_path, source), "--tools", f"cli_tools:{factory}")
    assert code == 0, out


def _ids() -> list[int]:
    return [1]


def _anything() -> Any:
    return [1]


def _tools() -> list[Any]:
    return []


def _named_tools() -> Mapping[str, Callable[..., int]] | None:
    return None


def _tool_tuple() -> tuple[BaseTool, ...]:
    return ()


@pytest.mark.parametrize(
    ("func", "factory"),
    [(_ids, False), (_anything, False), (_tools, True), (_named_tools, False), (_tool_tuple, True)],
)
def test_a_factory_is_a_function_whose_return_annotation_says_tools(
    func: Callable[[], Any], factory: bool
) -> None:
    assert _returns_tools(func) is factory


def test_run_records_an_iterator_result_without_emptying_it(tmp_path: Path) -> None:
    """The plan reads what ``Emulator.run()`` gives it; ``run`` used to record the generator
    (iterating it) before the plan read it, so the plan read ``[]``."""
    source = "PUSH 3\nCALL squares\nPOP R1\nSAY '{R1}'\n"
    from cli_tools import TOOLS

    assert llassembly.Emulator(llassembly.parse(source), TOOLS).run().answer == "[0,1,4]"
    code, out = cli("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert "line   2  squares(n=3) -> [0, 1, 4]" in out
    assert "answer: [0,1,4]" in out
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert (data["answer"], data["registers"], data["calls"][0]["result"]) == (
        "[0,1,4]",
        {"R1": "[0,1,4]"},
        [0, 1, 4],
    )


def test_run_reports_an_int_too_long_for_repr_without_crashing(tmp_path: Path) -> None:
    """Plans hold 64-bit integers: a 20,000-bit result stops the plan at its line."""
    code, out = cli("run", plan(tmp_path, "CALL huge\nPOP R1\n"), "--tools", "cli_tools:TOOLS")
    assert code == 2
    assert "huge() -> <int of 20000 bits>" in out
    assert "line 1: tool 'huge': the tool returned an integer of 20000 bits outside" in out


# --- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cli_tools", "must look like module:attribute"),
        (":TOOLS", "must look like module:attribute"),
        ("cli_tools:", "must look like module:attribute"),
        ("no_such_module_xyz:TOOLS", "cannot import module 'no_such_module_xyz'"),
        ("cli_tools:MISSING", "has no attribute 'MISSING'"),
        ("cli_tools:NOT_A_TOOL", "--tools must be a list of tools (LangChain tools, functions"),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_bad_tools_spec_exits_3_with_a_message(
    command: str, spec: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = cli(command, plan(tmp_path, "NOP\n"), "--tools", spec)
    assert code == 3
    assert out == ""
    assert message in capsys.readouterr().err


def test_a_missing_attribute_names_the_file_the_module_was_read_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``./calendar.py`` is shadowed by the standard library's ``calendar``, which Python had
    imported already: the message names the file that was read, so the user sees why."""
    code, _ = cli("check", plan(tmp_path, "NOP\n"), "--tools", "calendar:TOOLS")
    err = capsys.readouterr().err
    assert code == 3 and "module 'calendar' (" in err and "calendar.py) has no attribute" in err


def test_an_attribute_whose_lookup_raises_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A module ``__getattr__`` that imports what is not installed used to escape as a
    traceback (exit 1, no JSON)."""
    (tmp_path / "lazy_tools.py").write_text(
        "def __getattr__(name):\n    import optional_backend_not_installed\n", encoding="utf-8"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        argv = ("check", plan(tmp_path, "NOP\n"), "--tools", "lazy_tools:TOOLS")
        assert cli(*argv) == (3, "")
        code, data = cli_json(*argv)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lazy_tools", None)
    message = (
        "cannot load lazy_tools:TOOLS: ModuleNotFoundError: "
        "No module named 'optional_backend_not_installed'"
    )
    assert capsys.readouterr().err == f"llassembly: {message}\n"
    assert (code, data["error"]) == (3, {"type": "UsageError", "message": message})


def test_load_tools_raises_usage_error() -> None:
    with pytest.raises(UsageError):
        load_tools("nocolon")


def test_missing_plan_file_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.asm")
    code, _ = cli("run", missing, "--tools", "cli_tools:TOOLS")
    assert code == 3
    err = capsys.readouterr().err
    assert "cannot read plan" in err and "nope.asm" in err


def test_bad_limit_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli(
        "run", plan(tmp_path, "NOP\n"), "--tools", "cli_tools:TOOLS", "--max-instructions", "0"
    )
    assert code == 3
    assert "max_instructions_to_exec must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("summary", [(), ("--summary",)])
def test_check_with_a_bad_limit_exits_3_as_run_does(
    summary: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check`` used to accept (and summarize against) budgets ``run`` refuses."""
    argv = ("--tools", "cli_tools:TOOLS", "--max-instructions", "-5", "--max-tool-calls", "0")
    assert cli("run", plan(tmp_path, "NOP\n"), *argv) == (3, "")
    refused = capsys.readouterr().err
    assert refused == "llassembly: max_instructions_to_exec must be a positive integer, got -5\n"
    assert cli("check", plan(tmp_path, "NOP\n"), *argv, *summary) == (3, "")
    assert capsys.readouterr().err == refused


def test_argparse_errors_exit_3_not_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", WEATHER], out=io.StringIO()) == 3  # --tools is missing
    assert "--tools" in capsys.readouterr().err
    assert main(["frobnicate"], out=io.StringIO()) == 3


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"], out=io.StringIO()) == 0
    assert "check" in capsys.readouterr().out


def test_python_dash_m_llassembly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "llassembly", "check", WEATHER, "--tools", WEATHER_TOOLS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK: ")


# --- demo ------------------------------------------------------------------------------------


def test_demo_runs_the_installed_demo_with_its_arguments() -> None:
    """The dev install has the demo: ``llassembly demo`` runs it (it used to exit 3 whatever
    was installed, from a stub left behind when the demo became its own package)."""
    code, out = cli("demo", "--quiet")
    assert code == 0
    assert "Total: 3 model calls for 3 units" in out


def test_demo_passes_its_exit_code_on(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli("demo", "--max-turns", "0")
    assert code == 3
    assert "--max-turns must be positive" in capsys.readouterr().err


def test_demo_help_is_the_demos_own(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli("demo", "--help")
    assert code == 0
    assert "usage: llassembly-demo" in capsys.readouterr().out


def test_demo_says_how_to_install_it_when_it_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "llassembly_demo", None)  # import now fails: not installed
    monkeypatch.delitem(sys.modules, "llassembly_demo.cli", raising=False)
    code, out = cli("demo")
    assert code == 3
    assert out == ""
    err = capsys.readouterr().err
    assert "pip install -e . -e examples/npc_demo" in err and "not installed" in err


# --- --version, help and exit codes ------------------------------------------------------------


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"], out=io.StringIO()) == 0
    assert capsys.readouterr().out == f"llassembly {llassembly.__version__}\n"


def test_help_lists_every_exit_code_and_the_json_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for words in (["--help"], ["run", "--help"], ["check", "--help"], ["prompt", "--help"]):
        assert main(words, out=io.StringIO()) == 0
        shown = capsys.readouterr().out
        for code, meaning in EXIT_CODES.items():
            assert f"  {code}  {meaning}" in shown
        for status in ("ok", "finished", "rejected", "plain_answer", "stopped", "usage_error"):
            assert f'status "{status}"' in shown


@pytest.mark.parametrize("page", ["README.md", "docs/cli.md"])
def test_the_exit_code_table_of_the_docs_is_the_clis(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\d)` \| (.+?) \|$", text, flags=re.MULTILINE)
    assert {int(code): meaning for code, meaning in rows} == EXIT_CODES


def test_the_json_statuses_of_the_docs_are_the_helps() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = re.findall(r'^\| `"(\w+)"` \|', page, flags=re.MULTILINE)
    shown = re.findall(r'status "(\w+)"', JSON_SCHEMA)
    assert documented == shown


# --- --json ----------------------------------------------------------------------------------


def cli_json(*argv: str) -> tuple[int, dict[str, Any]]:
    """Run with ``--json``: standard output must be exactly one JSON object."""
    code, out = cli(*argv, "--json")
    data = json.loads(out)
    assert isinstance(data, dict)
    assert data["exit_code"] == code
    return code, data


@pytest.mark.parametrize(
    ("source", "status"),
    [
        ("PUSH 3\nCALL chatty\nPOP R1\nSAY 'done'", "finished"),
        ("PUSH 3\nCALL chatty\nPOP R1\nPUSH 4\nCALL chatty_failure\nPOP R2", "stopped"),
    ],
)
def test_run_json_stays_json_when_a_tool_prints(
    source: str, status: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under ``--json`` what tools print goes to standard error: standard output (the real
    one, where the tools' ``print`` went before) holds the JSON object alone."""
    (tmp_path / "printing_tools.py").write_text(
        "print('loading the tools')\nfrom cli_tools import CHATTY\n", encoding="utf-8"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        args = ["run", plan(tmp_path, source), "--tools", "printing_tools:CHATTY", "--json"]
        code = main(args)  # no ``out``: the JSON goes to sys.stdout, as from a shell
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("printing_tools", None)
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert (data["status"], data["exit_code"], code) == (status, code, 0 if code == 0 else 2)
    assert data["calls"][0]["result"] == 3
    assert "loading the tools" in captured.err
    assert "debug: chatty(3)" in captured.err
    assert "debug" not in captured.out


def test_run_without_json_leaves_what_tools_print_on_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["run", plan(tmp_path, "PUSH 3\nCALL chatty\nPOP R1"), "--tools", "cli_tools:CHATTY"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.index("debug: chatty(3)") < captured.out.index("line   2  chatty(x=3)")


def test_check_json_of_a_valid_plan_has_the_summary() -> None:
    code, data = cli_json("check", WEATHER, "--tools", WEATHER_TOOLS)
    assert code == 0
    assert (data["command"], data["status"]) == ("check", "ok")
    assert (data["instructions"], data["tool_call_sites"]) == (20, 2)
    assert data["max_tool_calls"] == 6  # three cities, each maybe notified
    assert [t["name"] for t in data["tools"]] == ["get_temperature", "notify"]


def test_check_json_of_a_rejected_plan_lists_the_problems(tmp_path: Path) -> None:
    source = "MOV R1, 1\nFROB R2\nCALL nowhere\n"
    code, data = cli_json("check", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert data["status"] == "rejected"
    problems = data["problems"]
    assert [(p["line"], p["column"], p["source"]) for p in problems] == [
        (2, 1, "FROB R2"),
        (3, 6, "CALL nowhere"),
    ]
    assert "nowhere" in problems[1]["message"]


def test_check_json_of_a_syntax_error(tmp_path: Path) -> None:
    code, data = cli_json("check", plan(tmp_path, "MOV R1, [R2\n"), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert data["status"] == "rejected"
    assert data["problems"] == [
        {
            "line": 1,
            "column": 9,
            "message": "unclosed memory operand '[R2'",
            "source": "MOV R1, [R2",
        }
    ]


@pytest.mark.parametrize("command", ["check", "run"])
def test_json_of_a_plain_answer(command: str, tmp_path: Path) -> None:
    code, data = cli_json(command, plan(tmp_path, "It is 42."), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert (data["status"], data["text"]) == ("plain_answer", "It is 42.")


def test_run_json_has_the_answer_calls_and_registers(tmp_path: Path) -> None:
    source = 'PUSH 21\nCALL double\nPOP R1\nPUSH "Ann"\nCALL greet\nSAY "{R1}"\n'
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 0
    assert data == {
        "command": "run",
        "status": "finished",
        "exit_code": 0,
        "answer": "42",
        "returned": None,
        "calls": [
            {"line": 2, "tool": "double", "args": {"x": 21}, "result": 42},
            {"line": 5, "tool": "greet", "args": {"name": "Ann"}, "result": "Hello, Ann"},
        ],
        "registers": {"R1": 42},
        "stack": ["Hello, Ann"],
        "instructions_executed": 6,
        "tool_calls": 2,
    }


def test_run_json_when_a_tool_raises_keeps_the_calls_before(tmp_path: Path) -> None:
    source = 'PUSH 1\nCALL double\nSAY "half way"\nPUSH 3\nCALL explode\n'
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:TOOLS")
    assert code == 2
    assert data["status"] == "stopped"
    assert data["error"] == {
        "type": "ToolExecutionError",
        "message": "tool 'explode' raised RuntimeError: exploded on 3",
        "line": 5,
        "source": "CALL explode",
    }
    assert data["calls"] == [{"line": 2, "tool": "double", "args": {"x": 1}, "result": 2}]
    assert data["answer"] == "half way"


def test_run_json_of_a_rejected_plan(tmp_path: Path) -> None:
    code, data = cli_json("run", plan(tmp_path, "POP R1\n"), "--tools", "cli_tools:TOOLS")
    assert code == 1
    assert data["status"] == "rejected"
    assert [p["source"] for p in data["problems"]] == ["POP R1"]


def test_run_json_shows_an_int_too_long_to_print_as_text(tmp_path: Path) -> None:
    code, data = cli_json(
        "run", plan(tmp_path, "CALL huge\nPOP R1\n"), "--tools", "cli_tools:TOOLS"
    )
    assert code == 2
    assert data["calls"] == [
        {"line": 1, "tool": "huge", "args": {}, "result": "<int of 20000 bits>"}
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ("run", WEATHER, "--tools", "no_such_module_xyz:TOOLS"),
        ("check", "missing-plan.asm", "--tools", WEATHER_TOOLS),
        ("run", WEATHER),  # --tools is missing: argparse's own mistake
        ("check", WEATHER, "--tools", WEATHER_TOOLS, "--max-tool-calls", "many"),
    ],
)
def test_json_of_a_usage_error(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, data = cli_json(*argv)
    assert code == 3
    assert data["status"] == "usage_error"
    assert data["error"]["type"] == "UsageError" and data["error"]["message"]
    assert capsys.readouterr().err == ""


# --- hostile text: a lone surrogate, a stream that cannot encode a character ------------------

CUT_PLAN = 'PUSH 1\nCALL cut\nPOP R1\nSAY "said {R1}"\nPUSH R1\nCALL echo\n'
"""A tool returns half an emoji; the plan says it and passes it on to another tool."""


def test_run_json_of_a_lone_surrogate_is_json_every_parser_reads(tmp_path: Path) -> None:
    """A lone surrogate is no character: JSON cannot carry it to every reader (it is not
    UTF-8), so it is written as U+FFFD, in results, arguments, registers, stack and answer."""
    code, out = cli("run", plan(tmp_path, CUT_PLAN), "--tools", "cli_tools:HOSTILE", "--json")
    assert code == 0
    assert out.isascii()  # the same bytes whatever the stream's encoding
    data = json.loads(out)
    cut = "abc\ufffd"
    assert data["status"] == "finished"
    assert data["calls"] == [
        {"line": 2, "tool": "cut", "args": {"x": 1}, "result": cut},
        {"line": 6, "tool": "echo", "args": {"text": cut}, "result": cut},
    ]
    assert (data["registers"], data["stack"], data["answer"]) == ({"R1": cut}, [cut], f"said {cut}")


def test_run_json_of_an_error_message_with_a_lone_surrogate(tmp_path: Path) -> None:
    source = "PUSH 1\nCALL cut_failure\n"
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:HOSTILE")
    assert (code, data["status"]) == (2, "stopped")
    assert data["error"]["message"] == "tool 'cut_failure' raised RuntimeError: bad input abc\ufffd"


def test_json_keeps_characters_and_surrogate_pairs_as_text(tmp_path: Path) -> None:
    """Only a lone surrogate is replaced: any character, an emoji whole, survives (escaped as
    ``\\uXXXX``: the output is ASCII), and so does a pair of surrogates (the emoji it spells),
    in keys as in values."""
    source = 'PUSH "Zürich 東京 \U0001f600"\nCALL echo\nPOP R1\nCALL halves\n'
    code, out = cli("run", plan(tmp_path, source), "--tools", "cli_tools:HOSTILE", "--json")
    assert code == 0 and out.isascii()
    data = json.loads(out)
    assert data["registers"] == {"R1": "Zürich 東京 \U0001f600"}
    assert data["calls"][1]["result"] == {"key \U0001f600": ["\U0001f600", "\ufffd"]}


def strict_stream(encoding: str) -> io.TextIOWrapper:
    """A standard output that cannot write what its encoding cannot hold (as a real one)."""
    return io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="strict", newline="\n")


def written(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode(stream.encoding)


def test_run_prints_a_lone_surrogate_escaped(tmp_path: Path) -> None:
    """Without ``--json`` text a stream cannot write is shown as a Python escape, as the call
    lines already show values (``repr``): ``abc\\ud83d``."""
    out = strict_stream("utf-8")
    code = main(["run", plan(tmp_path, CUT_PLAN), "--tools", "cli_tools:HOSTILE"], out=out)
    assert code == 0
    assert written(out).splitlines() == [
        "line   2  cut(x=1) -> 'abc\\ud83d'",
        "line   6  echo(text='abc\\ud83d') -> 'abc\\ud83d'",
        "finished: 6 instructions, 2 tool calls",
        "registers: R1='abc\\ud83d'",
        "stack (bottom to top): ['abc\\ud83d']",
        "answer: said abc\\ud83d",
    ]


def test_run_prints_what_an_ascii_stream_cannot_hold_escaped(tmp_path: Path) -> None:
    source = 'PUSH "Zürich"\nCALL echo\nPOP R1\nSAY "in {R1}"\nPUSH 1\nCALL cut_failure\n'
    out = strict_stream("ascii")
    code = main(["run", plan(tmp_path, source), "--tools", "cli_tools:HOSTILE"], out=out)
    assert code == 2
    assert written(out).splitlines() == [
        "line   2  echo(text='Z\\xfcrich') -> 'Z\\xfcrich'",
        "stopped: line 6: tool 'cut_failure' raised RuntimeError: bad input abc\\ud83d "
        "(CALL cut_failure)",
    ]


def test_check_prints_a_plan_line_a_stream_cannot_hold_escaped(tmp_path: Path) -> None:
    out = strict_stream("ascii")
    source = "CALL météo\n"
    code = main(["check", plan(tmp_path, source), "--tools", "cli_tools:HOSTILE"], out=out)
    assert code == 1
    assert "    CALL m\\xe9t\\xe9o\n" in written(out)


_ENVIRONMENTS = {
    "inherited": {},
    "C locale, no PYTHONIOENCODING": {"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": None},
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1, strict": {"PYTHONIOENCODING": "latin-1:strict", "PYTHONUTF8": "0"},
}


def run_process(
    argv: list[str], changes: dict[str, str | None]
) -> subprocess.CompletedProcess[bytes]:
    """``python -m llassembly ARGV`` in a fresh process, its environment changed by
    ``changes`` (``None`` removes a variable): the streams are the process's own."""
    env = {k: v for k, v in os.environ.items() if k not in changes}
    env.update({k: v for k, v in changes.items() if v is not None})
    env["PYTHONPATH"] = str(ROOT / "tests")
    return subprocess.run(
        [sys.executable, "-m", "llassembly", *argv],
        cwd=ROOT,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_run_json_stays_json_when_a_tool_writes_to_file_descriptor_1(tmp_path: Path) -> None:
    """A process a tool runs, or ``os.write(1, ...)``, used to write before the JSON object:
    under ``--json`` file descriptor 1 too goes to standard error for the command."""
    path = plan(tmp_path, "PUSH 3\nCALL shell_out\nPOP R1\nPUSH 4\nCALL shell_out\nPOP R2\n")
    done = run_process(["run", path, "--tools", "cli_tools:SHELL", "--json"], {})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["registers"] == {"R1": 3, "R2": 4}
    assert done.stderr.decode().splitlines() == ["debug: from fd 1", "debug: from a process"] * 2
    done = run_process(["run", path, "--tools", "cli_tools:SHELL"], {})
    assert done.stdout.decode().startswith("debug: from fd 1\ndebug: from a process\nline ")


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_reader_that_goes_away_ends_the_command_quietly(command: str, tmp_path: Path) -> None:
    """``llassembly run ... | head -1`` used to end in a ``BrokenPipeError`` traceback. Each
    command writes more than a pipe holds (5,000 calls, 3,000 problems), so it is still writing
    when the reader goes away, however late."""
    many = "".join(f"CALL nowhere{n}\n" for n in range(3000))  # 3,000 problems for check
    source = "MOV R1, 0\nnext:\nPUSH R1\nCALL double\nPOP R2\nINC R1\nCMP R1, 5000\nJL next\n"
    path = plan(tmp_path, source if command == "run" else many)
    argv = [command, path, "--tools", "cli_tools:TOOLS", "--max-tool-calls", "9999"]
    argv += ["--max-instructions", "99999"] if command == "run" else []
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    with subprocess.Popen(
        [sys.executable, "-m", "llassembly", *argv],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as process:  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline()
        process.stdout.close()
        err = process.stderr.read()
        assert (process.wait(timeout=120), err) == (141, b"")


def test_a_reader_that_goes_away_stops_the_run_even_where_the_plan_tests_its_calls(
    tmp_path: Path,
) -> None:
    """The failed write used to be taken for the tool's failure: a plan that tests its calls
    (``JC``) went on calling the tool 5,000 times with no one reading."""
    source = "MOV R1, 0\nagain:\nPUSH R1\nCALL count\nJC failed\nfailed:\nPOP R2\nINC R1\n"
    path = plan(tmp_path, source + "CMP R1, 5000\nJL again\n")
    counted = tmp_path / "count.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests"), "COUNT_FILE": str(counted)}
    argv = ["run", path, "--tools", "cli_tools:COUNTING", "--max-tool-calls", "9999"]
    argv += ["--max-instructions", "99999"]
    with subprocess.Popen(
        [sys.executable, "-m", "llassembly", *argv],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as process:  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().startswith(b"line   4  count(x=0) -> 0")
        process.stdout.close()
        err = process.stderr.read()
        assert (process.wait(timeout=120), err) == (141, b"")
    assert len(counted.read_text(encoding="utf-8").splitlines()) < 5000


@pytest.mark.parametrize("changes", _ENVIRONMENTS.values(), ids=_ENVIRONMENTS)
def test_a_process_prints_a_lone_surrogate_whatever_the_locale(
    changes: dict[str, str | None], tmp_path: Path
) -> None:
    """The crash was in the process's own stream encoding, which ``main(out=...)`` does not
    use: here the streams are a real process's, in the locales a user may have."""
    source = plan(tmp_path, CUT_PLAN + 'PUSH "Zürich"\nCALL echo\nSAY "in {R1}"\n')
    done = run_process(["run", source, "--tools", "cli_tools:HOSTILE", "--json"], changes)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.isascii()
    data = json.loads(done.stdout)
    assert data["answer"] == "said abc\ufffd\nin abc\ufffd"
    assert data["calls"][-1]["result"] == "Zürich"
    done = run_process(["run", source, "--tools", "cli_tools:HOSTILE"], changes)
    assert (done.returncode, done.stderr) == (0, b"")
    assert b"answer: said abc\\ud83d\n        in abc\\ud83d\n" in done.stdout


# --- records: results as JSON values ----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "result"),
    [
        ("PUSH 1\nCALL a_dict", {"x": 1, "point": {"x": 1, "label": "p"}}),
        ("PUSH 1\nCALL a_model", {"x": 1, "label": "p"}),
        ("PUSH 1\nCALL a_dataclass", {"width": 1, "tags": ["a", "b"]}),
        ("PUSH 1\nCALL a_typeddict", {"left": 1, "right": "r"}),
        ("PUSH 1\nCALL models", [{"x": 1, "label": "a"}, {"x": 2, "label": "b"}]),
        ("PUSH 1\nCALL a_tuple\nPOP R1\nPOP R2", [1, "two"]),
        ("PUSH 1\nCALL opaque", "<opaque>"),  # no JSON form: its text, as before
    ],
)
def test_run_json_shows_a_record_result_as_json(source: str, result: Any, tmp_path: Path) -> None:
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:RECORDS")
    assert (code, data["status"]) == (0, "finished")
    assert data["calls"][0]["result"] == result


def test_run_json_shows_a_record_argument_as_json(tmp_path: Path) -> None:
    """A record given to a tool is an object in ``args``; the plan's own values (registers,
    stack) are its numbers and strings, a record among them the JSON text the plan holds."""
    source = "PUSH 1\nCALL a_model\nPOP R1\nPUSH R1\nCALL take_point\nPUSH R1\n"
    code, data = cli_json("run", plan(tmp_path, source), "--tools", "cli_tools:RECORDS")
    assert code == 0
    assert data["calls"][1] == {
        "line": 5,
        "tool": "take_point",
        "args": {"p": {"x": 1, "label": "p"}},
        "result": 1,
    }
    assert json.loads(data["registers"]["R1"]) == {"x": 1, "label": "p"}
    assert data["stack"] == [1, data["registers"]["R1"]]


# --- async-only tools: refused before anything runs -------------------------------------------


@pytest.mark.parametrize("tool", ["wait", "wait_tool"])
def test_run_refuses_an_async_only_tool_before_any_call(
    tool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``Emulator.run()`` refuses the plan before anything runs; so does ``run`` (it used to
    call ``record`` first, then stop with exit 2 at the async tool)."""
    from cli_tools import ASYNC, SIDE_EFFECTS

    source = f"PUSH 1\nCALL record\nPOP R1\nPUSH 2\nCALL {tool}\nPOP R2\n"
    path, refused = _run_refuses_as_the_emulator(tmp_path, capsys, source, "ASYNC", ASYNC)
    code, data = cli_json("run", path, "--tools", "cli_tools:ASYNC")
    assert (code, SIDE_EFFECTS) == (3, [])
    assert data["error"] == {"type": "UsageError", "message": refused}
    assert re.search(r"nothing has run|none of their calls can be made", refused)
    assert cli("check", path, "--tools", "cli_tools:ASYNC")[0] == 0  # check runs no tool


def _run_refuses_as_the_emulator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, name: str, tools: Any
) -> tuple[Path, str]:
    """``run --tools cli_tools:NAME`` exits 3 with ``Emulator.run()``'s refusal, nothing run;
    the plan's path and the refusal."""
    from cli_tools import SIDE_EFFECTS

    with pytest.raises(UsageError) as refused:
        llassembly.Emulator(llassembly.parse(source), tools).run()
    path = plan(tmp_path, source)
    SIDE_EFFECTS.clear()
    code, out = cli("run", path, "--tools", f"cli_tools:{name}")
    assert (code, out, SIDE_EFFECTS) == (3, "", [])
    assert capsys.readouterr().err == f"llassembly: {refused.value}\n"
    return path, str(refused.value)


def test_run_refuses_a_tool_needing_injected_parameters_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``Emulator.run()`` does; ``run`` used to call ``record``, then give ``ship`` the one
    fixed id ``'ship-call'`` on every call."""
    from cli_tools import INJECTED

    source = "PUSH 1\nCALL record\nPOP R1\nPUSH 2\nCALL ship\nPOP R2\n"
    path, refused = _run_refuses_as_the_emulator(tmp_path, capsys, source, "INJECTED", INJECTED)
    assert "cannot give the injected parameters of the tools 'ship' ('call_id',)" in refused
    assert cli("check", path, "--tools", "cli_tools:INJECTED")[0] == 0


def test_a_tools_factory_that_raises_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = cli_json("check", plan(tmp_path, "NOP\n"), "--tools", "cli_tools:broken_factory")
    assert (code, data["status"]) == (3, "usage_error")
    assert data["error"]["message"] == (
        "calling cli_tools:broken_factory raised RuntimeError: no tools today"
    )


# --- prompt: what the planner model is sent ----------------------------------------------------


class RecordingModel(GenericFakeChatModel):
    """A scripted model (its replies are written here) that keeps what it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def system_message_sent(tools: list[Any], *, context: str | None, **options: Any) -> SystemMessage:
    """The system message the planner model gets in a ``create_agent`` run with
    ``ToolsPlannerMiddleware(**options)``, the agent's system prompt ``context``."""
    from langchain.agents import create_agent

    model = RecordingModel(messages=iter([AIMessage("It is warm.")]))  # a plain answer
    middleware = llassembly.ToolsPlannerMiddleware(**options)
    agent = create_agent(model, tools=tools, system_prompt=context, middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("How warm is it in Paris?")]})
    (sent,) = model.seen
    assert isinstance(sent[0], SystemMessage)
    assert not any(isinstance(m, SystemMessage) for m in sent[1:])  # the only one
    return sent[0]


TEMPLATE = "{context}\n\nPlan with these tools, in llassembly:\n\n{extern_functions}\n"


@pytest.mark.parametrize("queries", [False, True])
@pytest.mark.parametrize("context", [None, "You report the weather. Be brief."])
@pytest.mark.parametrize("template", [False, True])
def test_prompt_prints_what_the_planner_model_is_sent(
    queries: bool,
    context: str | None,
    template: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from examples.weather_tools import TOOLS

    options: dict[str, Any] = {"queries": queries}
    argv = ["prompt", "--tools", WEATHER_TOOLS]
    if queries:
        argv.append("--queries")
    if context is not None:
        argv += ["--context", context]
    if template:
        path = tmp_path / "template.md"
        path.write_text(TEMPLATE, encoding="utf-8")
        options["prompt_path"] = str(path)
        argv += ["--prompt-path", str(path)]
    sent = system_message_sent(TOOLS, context=context, **options)
    capsys.readouterr()
    code, out = cli(*argv)
    assert code == 0
    assert out == sent.text  # the prompt alone: `> prompt.txt` holds it
    tokens = count_tokens_approximately([sent])
    names = 3 if queries else 2
    assert capsys.readouterr().err == f"~{tokens} tokens (estimated), {names} tools\n"
    code, data = cli_json(*argv)
    assert data == {
        "command": "prompt",
        "status": "ok",
        "exit_code": 0,
        "system_prompt": sent.text,
        "tokens": tokens,
        "tools": ["get_temperature", "notify"] + (["query_text"] if queries else []),
    }


def test_prompt_with_queries_teaches_query_text() -> None:
    code, plain_prompt = cli("prompt", "--tools", WEATHER_TOOLS)
    code, with_queries = cli("prompt", "--tools", WEATHER_TOOLS, "--queries")
    assert code == 0
    assert "query_text" not in plain_prompt
    assert "CALL query_text" in with_queries


def test_check_with_queries_accepts_the_plans_the_planner_with_queries_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``prompt --queries`` teaches ``CALL query_text``; ``check`` used to refuse every such
    plan (unknown tool) and had no ``--queries``."""
    from examples.pay_bill import PLAN, find_payee, pay, read_file

    source = plan(tmp_path, PLAN)
    (tmp_path / "bill_tools.py").write_text(
        "from examples.pay_bill import find_payee, pay, read_file\n"
        "TOOLS = [read_file, find_payee, pay]\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        argv = ("check", source, "--tools", "bill_tools:TOOLS")
        assert cli(*argv)[0] == 1
        assert "unknown tool 'query_text'" in cli(*argv)[1]
        code, out = cli(*argv, "--queries")
        code_json, data = cli_json(*argv, "--queries", "--summary")
        code_clash, _ = cli("check", source, "--tools", "cli_tools:QUERY_CLASH", "--queries")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("bill_tools", None)
    assert (code, out) == (0, "OK: 20 instructions, 4 tool call sites.\n")
    assert (code_json, [t["name"] for t in data["tools"]]) == (
        0,
        ["read_file", "query_text", "find_payee", "pay"],
    )
    assert code_clash == 3
    assert "a tool is named 'query_text'" in capsys.readouterr().err
    externs = llassembly.externs_from([read_file, find_payee, pay])
    add_query(externs, "queries")  # what the planner's queries=True adds
    assert llassembly.check(llassembly.parse(PLAN), externs) == ()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tools", "cli_tools"], "--tools must look like module:attribute"),
        (["--tools", "no_such_module_xyz:TOOLS"], "cannot import module 'no_such_module_xyz'"),
        (["--tools", "cli_tools:NOT_A_TOOL"], "--tools must be a list of tools"),
        ([], "the following arguments are required: --tools"),
        (["--tools", WEATHER_TOOLS, "--prompt-path", "no/such.md"], "cannot read the prompt"),
        (["--tools", "cli_tools:QUERY_CLASH", "--queries"], "a tool is named 'query_text'"),
    ],
)
def test_prompt_of_bad_arguments_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = cli("prompt", *argv)
    assert (code, out) == (3, "")
    assert message in capsys.readouterr().err
    code, data = cli_json("prompt", *argv)
    assert (code, data["command"], data["status"]) == (3, "prompt", "usage_error")
    assert message in data["error"]["message"]


def test_prompt_loads_no_langgraph(tmp_path: Path) -> None:
    """The prompt is built without the integration: ``prompt`` loads no LangGraph (and no
    agent code), with or without queries."""
    code = textwrap.dedent(
        """
        import io, sys
        from llassembly.cli import main
        for extra in ([], ["--queries"]):
            out = io.StringIO()
            argv = ["prompt", "--tools", "examples.weather_tools:TOOLS", *extra]
            assert main(argv, out=out) == 0 and "# Tools" in out.getvalue()
        print(sorted(m for m in sys.modules if m.startswith(("langgraph", "langchain."))))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_the_size_line_of_the_docs_is_what_prompt_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/cli.md shows the prompt of its console example on standard output (checked by
    tests/end_to_end/test_docs.py) and quotes the line standard error gets for it: that line too."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    command = re.search(r"^\$ llassembly (prompt .*)$", page, flags=re.MULTILINE)
    quoted = re.search(r"on standard error `(~\d+ tokens \(estimated\), \d+ tools)`", page)
    assert command is not None and quoted is not None
    capsys.readouterr()
    assert main(shlex.split(command.group(1)), out=io.StringIO()) == 0
    assert capsys.readouterr().err == quoted.group(1) + "\n"


def _plan_given(source: str, data: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A plan's bytes given as a file, or on standard input: the name to pass the CLI."""
    path = tmp_path / "plan.asm"
    path.write_bytes(data)
    if source == "stdin":
        stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        monkeypatch.setattr(sys, "stdin", stream)
    return str(path) if source == "file" else "-"


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_plan_that_is_not_utf8_is_a_usage_error(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan saved in Latin-1 used to escape as a traceback (exit 1, no JSON)."""
    name = _plan_given(source, "NOP ; café\n".encode("latin-1"), tmp_path, monkeypatch)
    code, data = cli_json("check", name, "--tools", "cli_tools:TOOLS")
    assert (code, data["status"]) == (3, "usage_error")
    assert data["error"]["message"] == (
        f"cannot read plan {name!r}: it is not UTF-8 text (byte 0xe9 at offset 9)"
    )


def test_a_prompt_path_that_is_not_utf8_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to escape as a traceback (exit 1, no JSON)."""
    path = tmp_path / "latin1.md"
    path.write_bytes("Réponds. {context}\n{extern_functions}".encode("latin-1"))
    argv = ("prompt", "--tools", WEATHER_TOOLS, "--prompt-path", str(path))
    message = (
        f"cannot read the prompt template {str(path)!r}: 'utf-8' codec can't decode byte 0xe9 "
        "in position 1: invalid continuation byte"
    )
    assert cli(*argv) == (3, "")
    assert capsys.readouterr().err == f"llassembly: {message}\n"
    code, data = cli_json(*argv)
    assert (code, data["error"]) == (3, {"type": "UsageError", "message": message})


def test_run_json_when_a_tool_raises_an_error_whose_text_raises(tmp_path: Path) -> None:
    """Only the library's error leaves the run, and ``--json`` still prints one object."""
    code, data = cli_json(
        "run", plan(tmp_path, "CALL unprintable\n"), "--tools", "cli_tools:UNPRINTABLE"
    )
    assert code == 2 and data["status"] == "stopped"
    assert data["error"]["message"] == (
        "tool 'unprintable' raised Unprintable: a Unprintable that cannot be shown"
    )
    code, data = cli_json(
        "run", plan(tmp_path, "NOP\n"), "--tools", "cli_tools:unprintable_factory"
    )
    assert code == 3 and "a Unprintable that cannot be shown" in data["error"]["message"]


# --- what no plan of the examples reaches: odd values, streams and demos -----------------------


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_value_whose_repr_raises_is_shown_by_its_type() -> None:
    from llassembly.cli import show

    assert show(BrokenRepr()) == "<unprintable BrokenRepr>"
    assert show(10**5000) == "<int of 16610 bits>"


def test_text_for_a_stream_of_an_encoding_python_does_not_know_is_ascii_escaped() -> None:
    from llassembly.cli import printable

    class Odd(io.StringIO):
        encoding = "no-such-codec"  # type: ignore[assignment]

    assert printable("café \ud800 ok", Odd()) == "caf\\xe9 \\ud800 ok"
    assert printable("plain", Odd()) == "plain"


def test_json_of_odd_values_is_text_that_says_what_they_were() -> None:
    from llassembly.cli import plain

    deep: list[Any] = []
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    assert plain(deep) == "<list nested too deeply to show>"
    assert plain([1.5, float("inf"), float("-inf")]) == [1.5, "inf", "-inf"]
    assert plain(float("nan")) == "nan"
    assert plain(b"\xff\xfe") == "b'\\xff\\xfe'"  # bytes that are no UTF-8
    assert plain(b"ok") == "ok"


def test_a_demo_missing_a_module_of_its_own_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo is installed but a module it imports is not: that error, not 'install it'."""
    import llassembly.cli as cli_module

    def import_module(name: str) -> Any:
        raise ModuleNotFoundError("No module named 'pygame'", name="pygame")

    monkeypatch.setattr(cli_module.importlib, "import_module", import_module)
    with pytest.raises(ModuleNotFoundError) as caught:
        main(["demo"], out=io.StringIO())
    assert caught.value.name == "pygame"


def test_a_demo_that_stops_on_the_librarys_error_exits_2_and_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import types

    from llassembly.errors import ToolExecutionError

    demo = types.ModuleType("llassembly_demo.cli")

    def demo_main(argv: list[str], out: Any) -> int:
        raise ToolExecutionError("move", RuntimeError("blocked"), line=4, source="CALL move")

    demo.main = demo_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llassembly_demo.cli", demo)
    code, out = cli("demo", "--quiet")
    assert code == 2
    assert out == "stopped: line 4: tool 'move' raised RuntimeError: blocked (CALL move)\n"


@pytest.mark.parametrize("exiting", ["sys.exit(0)", "argparse"])
def test_a_tools_module_that_exits_while_imported_is_a_usage_error(
    exiting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module that parses the command line (or exits) when imported raises ``SystemExit``:
    a usage error with JSON, never exit 0 with nothing checked."""
    body = (
        "import sys\nsys.exit(0)\n"
        if exiting.startswith("sys")
        else "import argparse\nargparse.ArgumentParser().add_argument('--x', required=True)\n"
        "argparse.ArgumentParser().parse_args(['--nope'])\n"
    )
    (tmp_path / "exiting_tools.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, data = cli_json("check", plan(tmp_path, "NOP\n"), "--tools", "exiting_tools:TOOLS")
    assert (code, data["status"]) == (3, "usage_error")
    assert "cannot import module 'exiting_tools': SystemExit" in data["error"]["message"]


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_plan_saved_with_a_byte_order_mark_is_read_as_its_text(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UTF-8 with a BOM, as Windows editors save it: the first instruction is kept."""
    text = 'MOV R1, 5\nSAY "R1 is {R1}"\n'.encode("utf-8-sig")
    code, data = cli_json(
        "run", _plan_given(source, text, tmp_path, monkeypatch), "--tools", "cli_tools:TOOLS"
    )
    assert (code, data["answer"]) == (0, "R1 is 5")


def test_a_tool_that_exits_stops_the_run_with_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--json`` prints one object whatever happens: a tool calling ``sys.exit`` too."""
    body = (
        "import sys\nfrom langchain_core.tools import tool\n\n@tool\n"
        'def leave(x: int) -> int:\n    """Leave."""\n    sys.exit(0)\n\nTOOLS = [leave]\n'
    )
    (tmp_path / "leaving_tools.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, data = cli_json(
        "run", plan(tmp_path, 'PUSH 1\nCALL leave\nSAY "x"\n'), "--tools", "leaving_tools:TOOLS"
    )
    assert (code, data["status"], data["error"]["line"]) == (2, "stopped", 2)
    assert "sys.exit(0)" in data["error"]["message"]
