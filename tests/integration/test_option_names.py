"""An option that names a tool the planner does not have is refused, naming it and the closest
tool names: a misspelt name would otherwise switch its gate off without a word. Names match
exactly, case included. Checked when the planner is built with its tools, and when a model
request brings the tools (the middleware without ``tools=``)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import WEATHER_PLAN, Toolbox
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from llassembly import (
    ToolsPlannerMiddleware,
    ToolsPlannerNode,
    max_calls,
    never_from,
    not_in_loop,
    only_from,
)
from llassembly.errors import UsageError

BAD_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "approve_plan misspelt": ({"approve_plan": ["notfy"]}, r"approve_plan names the tool 'notfy'"),
    "approve_plan other case": ({"approve_plan": ["Notify"]}, r"'Notify'.*did you mean 'notify'"),
    "parallel_tools": ({"parallel_tools": ["get_temprature"]}, r"did you mean 'get_temperature'"),
    "max_calls policy": ({"plan_policy": [max_calls({"nofity": 1})]}, r"plan_policy .*'nofity'"),
    "not_in_loop policy": ({"plan_policy": [not_in_loop("increment", "inc")]}, r"'inc'"),
}  # fmt: skip
BAD_OPTIONS |= {
    "data-flow tool": (
        {"plan_policy": [only_from("notfy", "message")]},
        r"only_from\('notfy'.*did you mean 'notify'",
    ),
    "data-flow source": (
        {"plan_policy": [never_from("notify", "message", ["get_temp"])]},
        r"'get_temp'.*did you mean 'get_temperature'",
    ),
    "data-flow argument": (
        {"plan_policy": [only_from("notify", "mesage")]},
        r"names the argument 'mesage' of notify.*did you mean 'message'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_the_node_refuses_an_option_naming_no_tool_when_built(box: Toolbox, case: str) -> None:
    options, match = BAD_OPTIONS[case]
    with pytest.raises(UsageError, match=match):
        ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools, **options)


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_the_middleware_refuses_it_when_built_with_tools(box: Toolbox, case: str) -> None:
    options, match = BAD_OPTIONS[case]
    with pytest.raises(UsageError, match=match):
        ToolsPlannerMiddleware(tools=box.sync_tools, **options)


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_the_middleware_refuses_it_at_the_first_request_otherwise(box: Toolbox, case: str) -> None:
    options, match = BAD_OPTIONS[case]
    model = ScriptedChatModel(replies=[WEATHER_PLAN])
    app = create_agent(model, tools=box.sync_tools, middleware=[ToolsPlannerMiddleware(**options)])
    with pytest.raises(UsageError, match=match):
        app.invoke({"messages": [HumanMessage("Warm?")]})
    assert model.calls == [] and box.log == []


def test_options_naming_real_tools_are_taken(box: Toolbox) -> None:
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[]),
        box.sync_tools,
        approve_plan=["notify"],
        parallel_tools=["get_temperature"],
        plan_policy=[max_calls({"notify": 1}), not_in_loop("increment")],
    )
    assert node.options.approve_plan == ("notify",)
