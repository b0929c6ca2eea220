"""The command line: ``llassembly check`` and ``llassembly run``."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from llassembly.cli import (
    load_tools,
    main,
)
from llassembly.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
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
    assert out == "OK: 19 instructions, 2 tool call sites.\n"


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


# --- run -------------------------------------------------------------------------------------


def test_run_weather_prints_each_call_and_the_registers() -> None:
    code, out = cli("run", WEATHER, "--tools", WEATHER_TOOLS)
    assert code == 0
    assert out.splitlines() == [
        "line  23  get_temperature(city='Paris') -> 21",
        "line  30  notify(message='warm city', value=21) -> None",
        "line  23  get_temperature(city='Oslo') -> 4",
        "line  23  get_temperature(city='Cairo') -> 33",
        "line  30  notify(message='warm city', value=33) -> None",
        "finished: 37 instructions, 5 tool calls",
        "registers: R1='Cairo', R2=33, R10=2",
    ]


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
        ("cli_tools:NOT_A_TOOL", "neither a LangChain tool nor a callable"),
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


def test_demo_says_where_the_demo_lives(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"], out=io.StringIO()) == 3
    err = capsys.readouterr().err
    assert "pip install -e . -e examples/npc_demo" in err and "llassembly-demo" in err
