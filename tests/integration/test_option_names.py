"""An option that names a tool the planner does not have is refused, naming it and the closest
tool names: a misspelt name would otherwise switch its gate off without a word. Names match
exactly, case included. Checked when the planner is built with its tools. When a model request
brings the tools (the middleware without ``tools=``), a tool selector before the planner may
have left some out, so a name the request lacks is warned of, and gates nothing at that step."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import WEATHER_PLAN, Toolbox
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

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
    "max_calls policy": (
        {"plan_policy": [max_calls({"nofity": 1})]},
        r"plan_policy max_calls\(\{'nofity': 1\}\) names the tool 'nofity'",
    ),
    "not_in_loop policy": (
        {"plan_policy": [not_in_loop("increment", "inc")]},
        r"plan_policy not_in_loop\('increment', 'inc'\) names the tool 'inc'",
    ),
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


SURE = ("data-flow argument", "approve_plan other case")  # (a plan calls a tool in any case)


@pytest.mark.parametrize("case", [case for case in BAD_OPTIONS if case not in SURE])
def test_the_middleware_warns_of_a_tool_at_a_request_otherwise(box: Toolbox, case: str) -> None:
    """Without ``tools=`` the planner knows only the tools the request offers, which a tool
    selector may have narrowed: the name is warned of, with the same words, and the plan runs."""
    options, match = BAD_OPTIONS[case]
    model = ScriptedChatModel(replies=[WEATHER_PLAN])
    app = create_agent(model, tools=box.sync_tools, middleware=[ToolsPlannerMiddleware(**options)])
    with pytest.warns(UserWarning, match=match) as seen:
        app.invoke({"messages": [HumanMessage("Warm?")]})
    assert "which this model request does not offer" in str(seen[0].message)
    assert box.names() == ["get_temperature", "notify"]


@pytest.mark.parametrize("case", SURE)
def test_the_middleware_refuses_at_the_request_what_is_sure_to_be_about_an_offered_tool(
    box: Toolbox, case: str
) -> None:
    """An argument an offered tool lacks; a tool named but for case as an offered one (a plan
    that calls it by that name calls the offered tool: the option must gate it)."""
    options, match = BAD_OPTIONS[case]
    model = ScriptedChatModel(replies=[WEATHER_PLAN])
    app = create_agent(model, tools=box.sync_tools, middleware=[ToolsPlannerMiddleware(**options)])
    with pytest.raises(UsageError, match=match):
        app.invoke({"messages": [HumanMessage("Warm?")]})
    assert model.calls == [] and box.log == []


class LeaveOutIncrement(AgentMiddleware):  # type: ignore[type-arg]
    """A tool selector: the model is never offered ``increment``."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tools=[t for t in request.tools if t.name != "increment"]))


NAMING_A_LEFT_OUT_TOOL: dict[str, dict[str, Any]] = {
    "approve_plan": {"approve_plan": ["increment"]},
    "parallel_tools": {"parallel_tools": ["increment", "get_temperature"]},
    "max_calls": {"plan_policy": [max_calls({"increment": 1})]},
    "not_in_loop": {"plan_policy": [not_in_loop("increment")]},
    "only_from": {"plan_policy": [only_from("increment", "x")]},
    "never_from": {"plan_policy": [never_from("notify", "message", ["increment"])]},
}


@pytest.mark.parametrize("execution", ["agent", "graph"])
@pytest.mark.parametrize("case", list(NAMING_A_LEFT_OUT_TOOL))
def test_an_option_naming_a_tool_a_selector_left_out_gates_nothing_there(
    box: Toolbox, case: str, execution: str
) -> None:
    """LangChain's ``LLMToolSelectorMiddleware`` narrows the tools of each model request: an
    option about a tool it left out cannot apply to a plan, which cannot call that tool."""
    model = ScriptedChatModel(replies=[WEATHER_PLAN])
    planner = ToolsPlannerMiddleware(execution=execution, **NAMING_A_LEFT_OUT_TOOL[case])
    app = create_agent(model, tools=box.sync_tools, middleware=[LeaveOutIncrement(), planner])
    with pytest.warns(UserWarning, match=r"names the tool 'increment', which this model request"):
        out = app.invoke({"messages": [HumanMessage("Warm?")]})
    assert box.names() == ["get_temperature", "notify"]
    assert out["messages"][-1].response_metadata["llassembly"]["status"] == "finished"


def test_options_naming_real_tools_are_taken(box: Toolbox) -> None:
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[]),
        box.sync_tools,
        approve_plan=["notify"],
        parallel_tools=["get_temperature"],
        plan_policy=[max_calls({"notify": 1}), not_in_loop("increment")],
    )
    assert node.options.approve_plan == ("notify",)


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_the_options_still_gate_the_offered_tools_they_name(box: Toolbox, execution: str) -> None:
    """Beside a tool the selector left out, an offered tool an option names is gated as ever."""
    model = ScriptedChatModel(replies=[WEATHER_PLAN])
    planner = ToolsPlannerMiddleware(execution=execution, approve_plan=["increment", "notify"])
    app = create_agent(
        model,
        tools=box.sync_tools,
        middleware=[LeaveOutIncrement(), planner],
        checkpointer=InMemorySaver(),
    )
    with pytest.warns(UserWarning, match="'increment'"):
        out = app.invoke(
            {"messages": [HumanMessage("Warm?")]}, {"configurable": {"thread_id": "t"}}
        )
    assert "__interrupt__" in out and box.log == []
