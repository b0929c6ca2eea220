"""The examples in the package's docstrings run, and give what they show.

Every module of ``llassembly`` (but ``__main__``, which runs the command line when imported)
is searched for ``>>>`` examples, which run as ``doctest`` runs them, with ``ELLIPSIS``.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import re
from pathlib import Path

import pytest

import llassembly

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(llassembly.__path__, "llassembly.")
    if not info.name.endswith(".__main__")
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    return [t for t in tests if t.examples]


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_of_each_module_run_as_shown(name: str) -> None:
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in examples(name):
        runner.run(test, out=out.write)
    assert runner.summarize(verbose=False).failed == 0, out.getvalue()


def test_the_examples_are_found() -> None:
    """Guards the test above against finding nothing (a renamed package, a broken finder)."""
    found = {name for name in MODULES if examples(name)}
    assert {
        "llassembly.integration.options",
        "llassembly.integration.graph",
        "llassembly.language.parser",
    } <= found
    assert len(found) >= 10


REFERENCE = re.compile(r"(?<![\w.])(llassembly(?:\.[A-Za-z_]\w*)+)")
"""A dotted name in the package's text (``:func:`~llassembly.only_from```, ``llassembly.x``)."""


def resolves(reference: str) -> bool:
    """Whether ``reference`` names a module, or something in one (an attribute, a field)."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            fields = {**getattr(found, "__dataclass_fields__", {}), **_annotations(found)}
            if not hasattr(found, part) and part not in fields:
                return False
            found = getattr(found, part, None)
        return True
    return False


def _annotations(found: object) -> dict[str, object]:
    return dict(getattr(found, "__annotations__", {})) if isinstance(found, type) else {}


def test_every_dotted_name_in_the_docstrings_and_pages_exists() -> None:
    """A module moved or merged leaves no docstring or page pointing at its old place."""
    root = Path(llassembly.__file__).parent
    pages = [*root.rglob("*.py"), *(root.parent / "docs").rglob("*.md"), root.parent / "README.md"]
    stale = {
        f"{page.relative_to(root.parent)}: {reference}"
        for page in pages
        for reference in REFERENCE.findall(page.read_text(encoding="utf-8"))
        if not resolves(reference.rstrip("."))
    }
    assert not stale, sorted(stale)
    assert not resolves("llassembly.policies.only_from")  # (the old place: the check can fail)
    assert resolves("llassembly.analysis.policies.only_from") and resolves("llassembly.only_from")
