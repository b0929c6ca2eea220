"""The README's examples run as the README says."""

from __future__ import annotations

from pathlib import Path

import pytest

from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_x86_style_example_of_the_language_section_runs() -> None:
    section = README.read_text(encoding="utf-8").split("## The language", 1)[1]
    code = section.split("```asm", 1)[1].split("```", 1)[0]
    warm: list[str] = []

    def get_temperature(city: str) -> float:
        """Temperature of a city."""
        return {"Paris": 17.5, "Oslo": 3.0, "Cairo": 33.0}[city]

    def notify_warm(city: str) -> None:
        """Tell someone a city is warm."""
        warm.append(city)

    program = parse(code)
    assert isinstance(program, Program)
    result = Emulator(program, [get_temperature, notify_warm]).run()
    assert warm == ["Cairo"]
    assert result.stack == []  # each result was read in EAX, none left behind
    assert [c.call.args for c in result.calls] == [
        {"city": "Paris"},
        {"city": "Oslo"},
        {"city": "Cairo"},
        {"city": "Cairo"},
    ]


def test_the_game_loop_example_prints_what_the_readme_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    section = README.read_text(encoding="utf-8").split("## Plan now, run later", 1)[1]
    code = section.split("```python\n", 1)[1].split("\n```\n", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out == shown
