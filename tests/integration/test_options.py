"""Tests for llassembly.options: every planner option is declared once, and the middleware,
the nodes and ``PlannerOptions`` agree with that declaration on names, defaults and docs."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from fakes import ScriptedChatModel

from llassembly.errors import UsageError
from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.nodes import (
    AToolsPlannerNode,
    ToolsPlannerNode,
)
from llassembly.integration.options import (
    OPTIONS,
    PlannerOptions,
    document_options,
)

# Parameters a class takes that are not planner options (documented in the class itself).
OWN = {
    ToolsPlannerMiddleware: {"tools"},
    ToolsPlannerNode: {"model", "tools"},
    AToolsPlannerNode: {"model", "tools"},
}
# Options only the middleware takes: the nodes always run plans as a graph.
MIDDLEWARE_ONLY = {"execution"}
EMPTY = inspect.Parameter.empty


def parameters(cls: type) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(cls).parameters.items() if n != "self"}


def test_every_option_has_a_name_a_doc_and_a_check_that_accepts_its_default() -> None:
    names = [option.name for option in OPTIONS]
    assert len(names) == len(set(names)) == 18
    assert names == [f.name for f in dataclasses.fields(PlannerOptions)]
    for option in OPTIONS:
        assert option.name and option.doc.strip(), option
        assert option.doc.rstrip().endswith("."), option.name
        assert "\n" not in option.doc, option.name  # one paragraph: the classes' docs wrap it
        option.check(option.name, option.keep(option.default))


def test_the_options_are_declared_once_as_the_planner_options_fields() -> None:
    fields = dataclasses.fields(PlannerOptions)
    assert [f.name for f in fields] == [option.name for option in OPTIONS]
    for f, option in zip(fields, OPTIONS, strict=True):
        assert f.default == option.default == getattr(PlannerOptions, f.name), f.name
        assert f.metadata["doc"] == option.doc, f.name
    assert PlannerOptions().execution == "agent"  # the middleware's default
    node = ToolsPlannerNode(ScriptedChatModel(replies=[]), [])
    assert node.options.execution == "graph"  # the nodes always run plans as a graph
    with pytest.raises(TypeError):
        PlannerOptions(2)  # type: ignore[misc]  # keyword-only


@pytest.mark.parametrize("cls", list(OWN), ids=lambda c: c.__name__)
def test_each_class_takes_every_option_with_the_declared_default(cls: type) -> None:
    params = parameters(cls)
    expected = [
        o.name for o in OPTIONS if cls is ToolsPlannerMiddleware or o.name not in MIDDLEWARE_ONLY
    ]
    assert [name for name in params if name not in OWN[cls]] == expected  # in one order
    for option in OPTIONS:
        if option.name in params:
            assert params[option.name].default == option.default, (cls, option.name)
    for name in OWN[cls] & {"model"}:
        assert params[name].default is EMPTY


@pytest.mark.parametrize("cls", list(OWN), ids=lambda c: c.__name__)
def test_each_class_documents_every_parameter_with_the_declared_doc(cls: type) -> None:
    doc = inspect.getdoc(cls) or ""
    if cls is AToolsPlannerNode:  # "Async :class:`ToolsPlannerNode`": same parameters
        assert ":class:`ToolsPlannerNode`" in doc
        assert parameters(cls) == parameters(ToolsPlannerNode)
        doc = inspect.getdoc(ToolsPlannerNode) or ""
    flat = " ".join(doc.split())
    for name in parameters(cls):
        assert f"\n    {name}: " in doc, (cls, name)
    for option in OPTIONS:
        if option.name in parameters(cls):
            assert f"{option.name}: {' '.join(option.doc.split())}" in flat, (cls, option.name)
    assert "see llassembly.options" not in doc  # the placeholder line was expanded


def test_document_options_refuses_an_undocumented_parameter() -> None:
    class Documented:
        """A thing.

        Args:
            (every planner option)
        """

        def __init__(self, max_repairs: int = 2, colour: str = "red") -> None: ...

    with pytest.raises(TypeError, match="colour"):
        document_options(Documented)

    class NoPlaceholder:
        """A thing without an Args section."""

    with pytest.raises(TypeError, match="every planner option"):
        document_options(NoPlaceholder)


def test_from_arguments_keeps_options_as_planner_options_stores_them() -> None:
    def policy(summary: Any, program: Any) -> list[str]:
        return []

    options = PlannerOptions.from_arguments(
        {
            "self": object(),
            "model": object(),
            "max_repairs": 5,
            "approve_plan": ["send"],
            "plan_policy": [policy],
            "parallel_tools": ["a", "b"],
            "tool_middleware": [],
        }
    )
    assert options == PlannerOptions(
        max_repairs=5,
        approve_plan=("send",),
        plan_policy=(policy,),
        parallel_tools=("a", "b"),
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "max_instructions_to_exec",
            0,
            "max_instructions_to_exec must be a positive integer, got 0",
        ),
        ("max_tool_calls", True, "max_tool_calls must be a positive integer, got True"),
        ("max_stack_depth", "5", "max_stack_depth must be a positive integer, got '5'"),
        ("max_repairs", -1, "max_repairs must be a non-negative integer, got -1"),
        ("max_replans", 1.5, "max_replans must be a non-negative integer, got 1.5"),
        ("on_tool_error", "ignore", "on_tool_error must be one of ('stop', 'raise', 'replan')"),
        ("final_answer", "both", "final_answer must be one of ('plan', 'model')"),
        ("execution", "thread", "execution must be one of ('agent', 'graph')"),
        ("granularity", "fast", "granularity must be one of ('block', 'instruction', 'program')"),
        (
            "prompt_path",
            "/no/such/template.md",
            "prompt_path '/no/such/template.md' is not a readable file",
        ),
        ("approve_plan", "send", "approve_plan takes True, False or a list of tool names"),
        ("plan_policy", [1], "plan_policy must be a list of callables"),
        ("parallel_tools", "a", "parallel_tools must be True, False, 'read_only' or tool names"),
    ],
)
def test_every_check_names_its_option(option: str, value: Any, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        ToolsPlannerMiddleware(**{option: value})
    assert message in str(caught.value)
    if option not in MIDDLEWARE_ONLY:
        with pytest.raises(UsageError) as caught:
            ToolsPlannerNode(ScriptedChatModel(replies=[]), [], **{option: value})
        assert message in str(caught.value)
