"""Every code block of the README and the user guide runs, and shows what it prints.

Pages: ``README.md``, ``docs/*.md`` and ``benchmarks/README.md``. In each page:

* ```` ```python ```` blocks run in order, in one namespace per page (a page reads like a
  notebook: a later block may use what an earlier one defined), offline: their models are
  stand-ins such as ``GenericFakeChatModel``. A ```` ```text ```` block right after a Python
  block is what it prints, compared exactly. A block that cannot run here (it needs a model
  server, or is a fragment of a larger program) says so in its info string,
  ```` ```python fragment ````, and is reported as skipped with its place. While
  ``docs/models.md`` runs, the provider packages it imports (``langchain_openai``,
  ``langchain_anthropic``, ``langchain_ollama``) are stand-ins that answer with hand-written
  plans (``provider_stand_ins`` in ``tests/fakes.py``), as the page says.
* ```` ```asm ```` blocks parse without a syntax error (or are marked ```` ```asm fragment ````).
* ```` ```console ```` blocks: each ``$ llassembly ...`` command prints what follows it.

Each block is one test case named by its page and line, so the counts of run and skipped
blocks are pytest's own summary.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shlex
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT
from fakes import provider_stand_ins

from llassembly.cli import main as cli_main
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator

PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "benchmarks" / "README.md"]
)
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
MODELS_PAGE = ROOT / "docs" / "models.md"  # its provider classes are stand-ins (see above)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (the line after the fence), its info string, its text,
    and the ``text`` block that follows it, if any."""

    page: Path
    line: int
    lang: str
    flags: frozenset[str]
    code: str
    shown: str | None = None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order (an indented fence, in a list, counts too)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None or not opening["info"].strip():
            i += 1
            continue
        indent, (lang, *flags) = len(opening["indent"]), opening["info"].split()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        code = "\n".join(line[indent:] for line in lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 2, lang, frozenset(flags), code))
        i = end + 1
    # a text block that follows a Python block with nothing but blank lines between is its output
    text = page.read_text(encoding="utf-8").splitlines()
    for n, block in enumerate(found[:-1]):
        after = found[n + 1]
        end_of_block = block.line - 1 + block.code.count("\n")
        between = text[end_of_block + 1 : after.line - 2]
        if block.lang == "python" and after.lang == "text" and not any(s.strip() for s in between):
            found[n] = Block(
                block.page, block.line, block.lang, block.flags, block.code, after.code
            )
    return found


ALL = [b for page in PAGES for b in blocks(page)]
PYTHON = [b for b in ALL if b.lang == "python"]
ASM = [b for b in ALL if b.lang == "asm"]
CONSOLE = [b for b in ALL if b.lang == "console"]


@functools.cache
def run_page(page: Path) -> dict[int, str | None]:
    """Run a page's Python blocks in order in one namespace: per block, ``None`` when it ran
    and printed what its text block shows, or what went wrong."""
    # A real module, as a script's __main__ is: dataclasses and pydantic look their module up.
    # Run from the repository's root, as a reader of the page would (``examples`` importable).
    module = types.ModuleType(f"docs_{page.stem}")
    sys.modules[module.__name__] = module
    sys.path.insert(0, str(ROOT))
    stand_ins = provider_stand_ins() if page == MODELS_PAGE else contextlib.nullcontext()
    try:
        with contextlib.chdir(ROOT), stand_ins:
            return _run_blocks(page, module.__dict__)
    finally:
        sys.path.remove(str(ROOT))
        del sys.modules[module.__name__]


def _run_blocks(page: Path, namespace: dict[str, object]) -> dict[int, str | None]:
    outcome: dict[int, str | None] = {}
    failed: str | None = None
    for block in (b for b in PYTHON if b.page == page and "fragment" not in b.flags):
        if failed is not None:
            outcome[block.line] = f"not run: the block at {failed} failed"
            continue
        printed = io.StringIO()
        # padded so that a traceback's line numbers are the page's
        source = "\n" * (block.line - 1) + block.code
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(source, str(block.page), "exec"), namespace)
        except Exception:
            outcome[block.line], failed = traceback.format_exc(), block.name
            continue
        if block.shown is not None and printed.getvalue() != block.shown:
            outcome[block.line] = (
                f"printed:\n{printed.getvalue()}\nbut the page shows:\n{block.shown}"
            )
        else:
            outcome[block.line] = None
    return outcome


@pytest.mark.parametrize("block", PYTHON, ids=[b.name for b in PYTHON])
def test_python_block_runs_and_prints_what_the_page_shows(block: Block) -> None:
    if "fragment" in block.flags:
        pytest.skip(f"{block.name} is marked a fragment: it is not run")
    problem = run_page(block.page)[block.line]
    assert problem is None, f"{block.name}:\n{problem}"


@pytest.mark.parametrize("block", ASM, ids=[b.name for b in ASM])
def test_asm_block_parses(block: Block) -> None:
    if "fragment" in block.flags:
        pytest.skip(f"{block.name} is marked a fragment: it is not parsed")
    parsed = parse(block.code)  # raises AsmSyntaxError, with the line, when it does not parse
    # a block of data alone holds no instruction: the parser takes it for a plain answer
    assert isinstance(parsed, Program) or "section" in block.code


@pytest.mark.parametrize("block", CONSOLE, ids=[b.name for b in CONSOLE])
def test_console_block_shows_what_the_command_prints(
    block: Block, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    commands = re.split(r"^\$ ", block.code, flags=re.MULTILINE)[1:]
    assert commands, f"{block.name}: no '$ ' command"
    for command in commands:
        line, _, shown = command.partition("\n")
        words = shlex.split(line)
        assert words[0] == "llassembly", f"{block.name}: only llassembly commands are run"
        out = io.StringIO()
        cli_main(words[1:], out=out)
        assert out.getvalue() == shown, f"{block.name}: {line}"


def test_the_pages_have_code_that_runs() -> None:
    """Guards the tests above against finding nothing (a moved page, a broken fence reader),
    and keeps the blocks that do not run few."""
    pages = {b.page.relative_to(ROOT).as_posix() for b in PYTHON}
    assert {"README.md", "docs/tutorial.md", "docs/approval.md"} <= pages
    fragments = [b.name for b in PYTHON if "fragment" in b.flags]
    assert len(fragments) <= 4, fragments
    assert len(PYTHON) - len(fragments) >= 15


def test_the_x86_style_plan_of_the_tutorial_runs_as_described() -> None:
    """The tutorial's x86 example: each result read in ``EAX``, none left on the stack."""
    section = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    section = section.split("## What the model writes", 1)[1]
    code = section.split("```asm\n", 1)[1].split("```", 1)[0]
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
    assert result.stack == []
    assert [c.call.args for c in result.calls] == [
        {"city": "Paris"},
        {"city": "Oslo"},
        {"city": "Cairo"},
        {"city": "Cairo"},
    ]
