"""``prompt_for`` gives exactly the system message the planner model receives: on the agent
path, the graph path and the node, with and without the agent's own system prompt, and the
same text as ``llassembly prompt``."""

from __future__ import annotations

import pytest
from conftest import asm
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode, UsageError
from llassembly.cli import main as cli_main


@tool
def get_temperature(city: str) -> float:
    """Today's temperature in a city, in degrees Celsius."""
    return 20.0


TOOLS = [get_temperature]
PLAN = asm('PUSH "Oslo"\nCALL get_temperature\nPOP R1\nSAY "{R1}"')


@pytest.mark.parametrize("execution", ["agent", "graph"])
@pytest.mark.parametrize("context", ["", "You are a weather bot for Norway."])
def test_the_middleware_prompt_is_the_system_message_its_model_receives(
    execution: str, context: str
) -> None:
    model = ScriptedChatModel(replies=[PLAN])
    planner = ToolsPlannerMiddleware(execution=execution, queries=True)  # type: ignore[arg-type]
    agent = create_agent(model, TOOLS, middleware=[planner], system_prompt=context or None)
    agent.invoke({"messages": [HumanMessage("Warm in Oslo?")]})
    [sent, *_] = model.calls[0]
    assert isinstance(sent, SystemMessage)
    assert sent.text == planner.prompt_for(TOOLS, system_prompt=context)
    assert "query_text" in sent.text  # the options the planner has shape what it is sent
    if context:
        assert context in sent.text


def test_the_node_prompt_is_the_system_message_its_model_receives() -> None:
    model = ScriptedChatModel(replies=[PLAN])
    node = ToolsPlannerNode(model, TOOLS)
    graph = StateGraph(MessagesState)
    graph.add_node("planner", node)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    graph.compile().invoke({"messages": [SystemMessage("Be brief."), HumanMessage("Oslo?")]})
    assert model.calls[0][0].text == node.prompt_for(system_prompt="Be brief.")


def test_the_command_prints_the_same_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["prompt", "--tools", "test_prompt_for:TOOLS"]) == 0
    printed = capsys.readouterr().out
    assert printed.rstrip("\n") == ToolsPlannerMiddleware().prompt_for(TOOLS).rstrip("\n")


def test_without_tools_it_says_what_it_needs() -> None:
    with pytest.raises(UsageError, match="prompt_for needs the tools"):
        ToolsPlannerMiddleware().prompt_for()
    given = ToolsPlannerMiddleware(tools=TOOLS)
    assert given.prompt_for() == given.prompt_for(TOOLS)
