"""Tests for llassembly.nodes: ``ToolsPlannerNode`` / ``AToolsPlannerNode`` in a ``StateGraph``.

What the nodes share with the middleware (prompt, messages, repairs, failures, budgets) is
tested in test_contract.py; here is what only the nodes do.

Every model reply here is written by hand (``ScriptedChatModel``); none is a recording of a
real model. Tools record their calls (see ``conftest.Toolbox``).
"""

from __future__ import annotations

import gc
import inspect
import operator
from typing import Annotated, Any, TypedDict

import pytest
from conftest import (
    BAD_PLAN,
    WEATHER_PLAN,
    Harness,
    Toolbox,
    asm,
    meta,
)
from fakes import ScriptedChatModel
from langchain_core.messages import AIMessage, HumanMessage

from llassembly.errors import UsageError
from llassembly.integration.nodes import (
    AToolsPlannerNode,
    ToolsPlannerNode,
)


@pytest.fixture(params=[False, True], ids=["ToolsPlannerNode-invoke", "AToolsPlannerNode-ainvoke"])
def harness(request: pytest.FixtureRequest) -> Harness:
    return Harness("node", asynchronous=request.param)


class AppendState(TypedDict):
    """A state whose messages keep what they were given (no ``add_messages``)."""

    messages: Annotated[list[Any], operator.add]


# -- 1. public API ------------------------------------------------------------------------------


@pytest.mark.parametrize("node_type", [ToolsPlannerNode, AToolsPlannerNode])
def test_node_keeps_the_documented_signature(node_type: type[ToolsPlannerNode]) -> None:
    params = list(inspect.signature(node_type).parameters.values())
    head = [(p.name, p.default) for p in params[:5]]
    empty = inspect.Parameter.empty
    assert head == [
        ("model", empty),
        ("tools", empty),
        ("infer_tools_messages", True),
        ("prompt_path", None),
        ("max_instructions_to_exec", 1000),
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])


def test_the_nodes_and_the_middleware_list_the_options_in_one_order() -> None:
    """Every entry point lists the planner options in the order they are declared."""
    from llassembly import ToolsPlannerMiddleware
    from llassembly.integration.options import OPTIONS

    order = [option.name for option in OPTIONS]
    for entry in (ToolsPlannerNode, AToolsPlannerNode, ToolsPlannerMiddleware):
        names = [n for n in inspect.signature(entry).parameters if n in order]
        assert names == [n for n in order if n in names], entry.__name__


def test_node_takes_the_model_and_tools_by_position_and_options_by_keyword(
    box: Toolbox,
) -> None:
    with pytest.raises(TypeError, match="positional"):
        ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools, 50)  # type: ignore[misc]
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[]),
        box.sync_tools,
        max_instructions_to_exec=50,
        infer_tools_messages=False,
    )
    assert node.options.max_instructions_to_exec == 50
    assert node.options.infer_tools_messages is False


def test_node_rejects_a_state_without_messages(box: Toolbox) -> None:
    node = ToolsPlannerNode(ScriptedChatModel(replies=[]), box.sync_tools)
    with pytest.raises(UsageError, match="messages"):
        node({"history": []}, {})


def test_node_runs_outside_a_graph(box: Toolbox) -> None:
    node = ToolsPlannerNode(ScriptedChatModel(replies=[WEATHER_PLAN]), box.sync_tools)
    update = node({"messages": [HumanMessage("Warm?")]}, {})
    assert box.names() == ["get_temperature", "notify"]
    assert meta(update["messages"][-1])["status"] == "finished"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("asking", ["approve_plan", "tool"])
async def test_node_outside_a_graph_refuses_to_pause(asking: str, asynchronous: bool) -> None:
    """An interrupt (plan approval, ``interrupt()`` in a tool) cannot pause a node called
    outside a graph: it raises, rather than return a turn cut short as if it were done."""
    from langchain_core.tools import tool
    from langgraph.types import interrupt

    shipped: list[int] = []

    @tool
    def ship(n: int) -> int:
        """Ship crate n."""
        shipped.append(n)
        return n

    @tool
    def ask(question: str) -> str:
        """Ask a person."""
        return str(interrupt(question))

    plan = asm('PUSH 1\nCALL ship\nPOP R1\nPUSH "ok?"\nCALL ask\nPOP R2\nSAY "{R2}"')
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[plan]), [ship, ask], approve_plan=asking == "approve_plan"
    )
    state = {"messages": [HumanMessage("ship")]}
    with pytest.raises(UsageError) as raised:
        await node.ainvoke(state) if asynchronous else node.invoke(state)
    assert str(raised.value) == (
        "the planner node was interrupted (a plan approval or interrupt() in a tool) outside a "
        "graph: add it to a StateGraph compiled with a checkpointer to pause and resume"
    )
    assert shipped == ([] if asking == "approve_plan" else [1])


def test_node_reads_message_likes_as_langchain_does(box: Toolbox) -> None:
    """A state whose list keeps what it was given (no ``add_messages``) may hold message-likes,
    which chat models and ``create_agent`` accept: the node converts them the same way."""
    from langgraph.graph import END, START, StateGraph

    plan = asm('PUSH 1\nCALL increment\nPOP R1\nSAY "{R1}"')
    for given in [("user", "go"), {"role": "user", "content": "go"}, "go"]:
        graph = StateGraph(AppendState)
        graph.add_node(
            "planner", ToolsPlannerNode(ScriptedChatModel(replies=[plan]), box.sync_tools)
        )
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        out = graph.compile().invoke({"messages": [given]})
        assert out["messages"][-1].text == "2"
        assert meta(out["messages"][-1])["status"] == "finished"


# -- 2. tools ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fresh_tools_reusing_freed_memory_run_their_own_functions() -> None:
    """Tools made, used and dropped over and over (as per-request tool lists are) must never
    run a dropped tool's function, even when Python reuses an address."""
    plan = asm("PUSH 1\nCALL increment\nPOP R1\nPUSH 2\nCALL flaky\nPOP R2")
    for round_number in range(40):
        box = Toolbox()
        node = ToolsPlannerNode(ScriptedChatModel(replies=[plan]), box.sync_tools)
        update = node({"messages": [HumanMessage(f"round {round_number}")]}, {})
        assert box.log == [("increment", {"x": 1}), ("flaky", {"x": 2})]
        assert meta(update["messages"][-1])["registers"] == {"R1": 2, "R2": 20}
        del box, node, update
        gc.collect()


@pytest.mark.parametrize("node_type", [ToolsPlannerNode, AToolsPlannerNode])
async def test_one_node_class_serves_invoke_and_ainvoke(node_type: type[ToolsPlannerNode]) -> None:
    """``ToolsPlannerNode`` under ``ainvoke`` (async tools included) and under ``invoke``;
    ``AToolsPlannerNode`` is the same class, kept for code that names it."""
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph

    @tool
    async def fetch(city: str) -> float:
        """Today's temperature, from an async API."""
        return 7.0

    @tool
    def double(x: float) -> float:
        """Twice x."""
        return 2 * x

    plan = asm('PUSH "Oslo"\nCALL fetch\nCALL double\nPOP R1\nSAY "{R1}"')
    sync_plan = asm('PUSH 3.5\nCALL double\nPOP R1\nSAY "{R1}"')
    for asynchronous, reply, tools in [(True, plan, [fetch, double]), (False, sync_plan, [double])]:
        graph = StateGraph(MessagesState)
        graph.add_node("planner", node_type(ScriptedChatModel(replies=[reply]), tools))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        app, question = graph.compile(), {"messages": [HumanMessage("go")]}
        out = await app.ainvoke(question) if asynchronous else app.invoke(question)
        assert out["messages"][-1].text in ("14", "7")
        assert meta(out["messages"][-1])["status"] == "finished"


# -- 3. the turn graph ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replans", "repairs"), [(13, 0), (0, 24), (5, 6)], ids=["replans", "repairs", "both"]
)
def test_a_turn_within_the_options_never_meets_the_callers_recursion_limit(
    box: Toolbox, replans: int, repairs: int
) -> None:
    """The turn graph's steps (one per model call, plan run, approval) are bounded by the
    node's own options, not by the graph's ``recursion_limit`` (LangGraph's default 25):
    every draft repaired and every plan replanned, as the options allow, and the turn ends."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    box.fail_on = set(range(1, replans + 1))
    good = asm('PUSH 1\nCALL flaky\nPOP R1\nSAY "{R1}"')
    replies = ([BAD_PLAN] * repairs + [good]) * (replans + 1)
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=replies),
        box.sync_tools,
        on_tool_error="replan",
        max_replans=replans,
        max_repairs=repairs,
    )
    graph = StateGraph(MessagesState)
    graph.add_node("planner", node)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    out = graph.compile().invoke({"messages": [HumanMessage("go")]})
    assert out["messages"][-1].text == "10"
    result = meta(out["messages"][-1])
    assert (result["status"], result["replans"], result["repairs"]) == (
        "finished",
        replans,
        repairs * (replans + 1),
    )


def test_an_approved_turn_with_no_repairs_or_replans_fits_its_recursion_limit(box: Toolbox) -> None:
    """The least limit: a plan, a refused edit asked again, a good edit, the run, the answer."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.types import Command

    good = asm('PUSH 1\nCALL flaky\nPOP R1\nSAY "{R1}"')
    node = ToolsPlannerNode(
        ScriptedChatModel(replies=[good, "It is 20."]),
        box.sync_tools,
        max_replans=0,
        max_repairs=0,
        approve_plan=True,
        final_answer="model",
    )
    graph = StateGraph(MessagesState)
    graph.add_node("planner", node)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    app, config = graph.compile(checkpointer=InMemorySaver()), {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [HumanMessage("go")]}, config)
    app.invoke(Command(resume={"type": "edit", "plan": "FROB R1"}), config)
    edit = asm('PUSH 2\nCALL flaky\nPOP R1\nSAY "{R1}"')
    out = app.invoke(Command(resume={"type": "edit", "plan": edit}), config)
    assert (out["messages"][-1].text, box.log) == ("It is 20.", [("flaky", {"x": 2})])


def test_a_model_with_invoke_alone_still_plans_untagged() -> None:
    """A duck-typed model (``invoke``/``ainvoke``, no ``with_config``) worked before the node
    tagged its plans: it still does, its calls untagged."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    class Duck:
        def invoke(self, messages: Any, config: Any = None, **kw: Any) -> AIMessage:
            return AIMessage(asm('PUSH 2\nPUSH 3\nCALL add, 2\nPOP R1\nSAY "sum {R1}"'))

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    graph = StateGraph(MessagesState)
    graph.add_node("p", ToolsPlannerNode(Duck(), [add]))  # type: ignore[arg-type]
    graph.add_edge(START, "p")
    graph.add_edge("p", END)
    out = graph.compile().invoke({"messages": [HumanMessage("add")]})
    assert out["messages"][-1].text == "sum 5"
