"""The README works as a newcomer reads it: short, its two Quickstart commands do what it says,
its links lead somewhere. (Its code blocks run in ``test_docs.py``.)"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]


def quickstart() -> list[str]:
    section = README.read_text(encoding="utf-8").split("## Quickstart", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_reads_in_five_minutes() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250


def test_the_quickstart_is_two_commands_one_for_the_demo_one_for_the_tests() -> None:
    demo, tests = quickstart()
    assert demo.startswith("python3 -m venv .venv && ") and demo.endswith(
        ".venv/bin/llassembly-demo"
    )
    assert tests.startswith("python3 -m venv .venv && ")
    assert tests.endswith(".venv/bin/python -m pytest -q -n auto")


def test_ci_runs_the_quickstarts_test_command() -> None:
    _, tests = quickstart()
    assert tests in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_quickstart_installs_projects_that_exist_and_declare_what_it_runs() -> None:
    """Each ``pip install -e PATH`` is a project here, and the demo command is a script of the
    demo's project (the command itself installs from the network, so it is not run here)."""
    demo, tests = quickstart()
    scripts: dict[str, str] = {}
    for command in (demo, tests):
        words = shlex.split(command)
        targets = [words[i + 1] for i, w in enumerate(words) if w == "-e"]
        assert targets, command
        for target in targets:
            project = ROOT / target.split("[")[0] / "pyproject.toml"
            assert project.is_file(), target
            data = tomllib.loads(project.read_text(encoding="utf-8"))
            scripts.update(data["project"].get("scripts", {}))
            for extra in re.findall(r"\[(.+)\]", target):
                assert extra in data["project"]["optional-dependencies"], target
    assert scripts["llassembly-demo"] == "llassembly_demo.cli:main"


def test_the_quickstarts_demo_command_runs_without_a_model_server() -> None:
    """``llassembly-demo`` as installed in this environment (the test extras install it too)."""
    script = Path(sys.executable).parent / "llassembly-demo"
    if not script.exists():
        pytest.skip(f"the demo's script is not installed next to {sys.executable}")
    done = subprocess.run(
        [str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "bundled replay model" in done.stdout
    assert "Total: 3 model calls for 3 units" in done.stdout


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{page.name}: {target}"


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
