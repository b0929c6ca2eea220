"""The examples in the package's docstrings run, and give what they show.

Every module of ``llassembly`` (but ``__main__``, which runs the command line when imported)
is searched for ``>>>`` examples, which run as ``doctest`` runs them, with ``ELLIPSIS``.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil

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
