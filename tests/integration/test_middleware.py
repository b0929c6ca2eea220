"""Tests for llassembly.middleware: ``ToolsPlannerMiddleware`` inside ``create_agent``.

What the middleware shares with the nodes (prompt, messages, repairs, failures, budgets) is
tested on both of its paths in test_contract.py; here is what only the middleware does.

Every model reply here is written by hand (``ScriptedChatModel``); none is a recording of a
real model. Tools record their calls (see ``conftest.Toolbox``).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from conftest import (
    WEATHER_PLAN,
    Toolbox,
    asm,
    meta,
)
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRetryMiddleware,
    ToolCallLimitMiddleware,
    hook_config,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool

from llassembly.integration.middleware import ToolsPlannerMiddleware, answer_of_call

# -- 1. public API ------------------------------------------------------------------------------


def test_middleware_keeps_the_documented_defaults() -> None:
    params = inspect.signature(ToolsPlannerMiddleware).parameters
    assert params["infer_tools_messages"].default is True
    assert params["max_instructions_to_exec"].default == 1000
    assert params["prompt_path"].default is None
    options = ToolsPlannerMiddleware().options
    assert (options.infer_tools_messages, options.max_instructions_to_exec) == (True, 1000)
    assert options.prompt_path is None


def test_middleware_options_are_keyword_only() -> None:
    with pytest.raises(TypeError, match="positional"):
        ToolsPlannerMiddleware(False, None, 50)  # type: ignore[misc]
    planner = ToolsPlannerMiddleware(infer_tools_messages=False, max_instructions_to_exec=50)
    assert planner.options.infer_tools_messages is False
    assert planner.options.max_instructions_to_exec == 50


# -- 2. other middleware ---------------------------------------------------------------------------


class FailOnceModel(ScriptedChatModel):
    """Raises on its first call, then answers with the scripted replies (hand-written)."""

    failures: int = 0

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if self.failures == 0:
            self.failures += 1
            raise ConnectionError("model server hiccup")
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
async def test_model_retry_around_the_planner_runs_the_tools_once(
    box: Toolbox, asynchronous: bool
) -> None:
    model = FailOnceModel(replies=[WEATHER_PLAN])
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    agent = create_agent(model, tools=box.sync_tools, middleware=[retry, ToolsPlannerMiddleware()])
    payload = {"messages": [HumanMessage("Warm?")]}
    out = agent.invoke(payload) if not asynchronous else await agent.ainvoke(payload)
    assert model.failures == 1 and len(model.calls) == 1
    assert box.names() == ["get_temperature", "notify"]
    assert meta(out["messages"][-1])["status"] == "finished"


async def test_on_the_graph_path_tool_call_limit_middleware_does_not_see_plan_calls(
    box: Toolbox,
) -> None:
    """Documented behaviour of ``execution="graph"``: plans do not go through the agent's tool
    node, so ``ToolCallLimitMiddleware`` never sees their calls; ``max_tool_calls`` is the
    budget (on the agent path it sees them: see test_agent_path.py)."""
    plan = asm("MOV R1, 0\nloop:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 4\nJL loop")
    limiter = ToolCallLimitMiddleware(run_limit=1, exit_behavior="error")
    model = ScriptedChatModel(replies=[plan])
    agent = create_agent(
        model,
        tools=box.sync_tools,
        middleware=[limiter, ToolsPlannerMiddleware(execution="graph")],
    )
    out = agent.invoke({"messages": [HumanMessage("count")]})
    assert box.names() == ["increment"] * 4
    assert meta(out["messages"][-1])["status"] == "finished"

    box.log.clear()
    model = ScriptedChatModel(replies=[plan])
    agent = create_agent(
        model, tools=box.sync_tools, middleware=[ToolsPlannerMiddleware(max_tool_calls=2)]
    )
    out = agent.invoke({"messages": [HumanMessage("count")]})
    assert box.names() == ["increment"] * 2
    assert "max_tool_calls budget exceeded: limit 2" in out["messages"][-1].text


class Answering(AgentMiddleware[Any, Any]):
    """An outer middleware that answers every model call itself: first with a call of
    ``ping``, then with words; the planner's model hook never runs."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return AIMessage("pinged")
        call = {"name": "ping", "args": {"x": 1}, "id": "own-1", "type": "tool_call"}
        return AIMessage("", tool_calls=[call])


def test_a_call_and_a_turn_the_planner_did_not_make_pass_it_untouched() -> None:
    """No planner record: its tool hook hands the call on as it is, and its after-agent hook
    does nothing."""
    runs: list[int] = []

    @tool
    def ping(x: int) -> int:
        """Ping."""
        runs.append(x)
        return x + 1

    model = ScriptedChatModel(replies=[])
    app = create_agent(model, tools=[ping], middleware=[Answering(), ToolsPlannerMiddleware()])
    out = app.invoke({"messages": [HumanMessage("ping")]})
    assert runs == [1] and model.calls == []
    answer = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [(m.text, m.tool_call_id, m.response_metadata) for m in answer] == [("2", "own-1", {})]
    assert out["messages"][-1].text == "pinged"


def test_a_calls_answer_is_none_when_the_history_holds_no_call_of_it() -> None:
    answer = ToolMessage("2", tool_call_id="c2")
    assert answer_of_call([HumanMessage("go"), answer], "c1") is None
    assert answer_of_call([], "c1") is None
    assert answer_of_call([HumanMessage("go"), answer], "c2") is answer


class _SyncOnly(AgentMiddleware):
    """A ``wrap_tool_call`` middleware with its sync hook only."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


class _AsyncOnly(AgentMiddleware):
    """A ``wrap_tool_call`` middleware with its async hook only."""

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
@pytest.mark.parametrize("asynchronous", [True, False], ids=["ainvoke", "invoke"])
async def test_a_tool_middleware_without_the_hook_the_run_needs_fails_the_run(
    path: str, asynchronous: bool
) -> None:
    """A middleware with only the sync hook under ``ainvoke`` (only the async one under
    ``invoke``) cannot wrap a call: LangChain raises its ``NotImplementedError`` out of the
    run, for the model's own tool calls too. A plan's call lets it through, where it used to
    be the tool's failure ("tool 'fetch' raised NotImplementedError"), the tool never run."""
    from langgraph.graph import END, START, MessagesState, StateGraph

    from llassembly import ToolsPlannerNode

    ran: list[str] = []

    @tool
    def fetch(key: str) -> str:
        """Fetch a key."""
        ran.append(key)
        return key.upper()

    middleware = _AsyncOnly() if not asynchronous else _SyncOnly()
    model = ScriptedChatModel(replies=['```asm\nPUSH "a"\nCALL fetch\nPOP R1\nSAY "{R1}"\n```'])
    app: Any
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, [fetch], tool_middleware=[middleware]))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        app = graph.compile()
    elif path == "graph":
        planner = ToolsPlannerMiddleware(execution="graph", tool_middleware=[middleware])
        app = create_agent(model, tools=[fetch], middleware=[planner])
    else:
        app = create_agent(model, tools=[fetch], middleware=[ToolsPlannerMiddleware(), middleware])
    given = {"messages": [HumanMessage("go")]}
    with pytest.raises(NotImplementedError, match="wrap_tool_call"):
        await app.ainvoke(given) if asynchronous else app.invoke(given)
    assert ran == []


class Reminding(AgentMiddleware[Any, Any]):
    """Adds a message before every model-node visit (the date, a retrieved note): an everyday
    ``before_model`` hook, harmless in a plain agent."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [HumanMessage("(reminder: today is Monday)")]}


SAYING = asm('PUSH "Paris"\nCALL get_temperature\nPOP R1\nSAY "{R1}"')
BROKEN = asm("CALL nowhere")


@pytest.mark.parametrize(
    ("execution", "options", "replies", "model_calls"),
    [
        ("graph", {}, [SAYING], 1),
        ("agent", {"final_answer": "model"}, [SAYING, "It is 21 °C."], 2),
        ("graph", {"final_answer": "model"}, [SAYING, "It is 21 °C."], 2),
        ("agent", {"max_repairs": 1}, [BROKEN, SAYING], 2),
        ("graph", {"max_repairs": 1}, [BROKEN, SAYING], 2),
    ],
    ids=["graph", "agent-answer", "graph-answer", "agent-repair", "graph-repair"],
)
def test_a_message_a_before_model_hook_adds_is_part_of_the_same_turn(
    box: Toolbox, execution: str, options: dict[str, Any], replies: list[str], model_calls: int
) -> None:
    """The hook runs before every visit of the model node, also those of one turn's steps
    (a plan run, a repair, the final answer): what it adds does not start a new turn, so
    the plan runs once and the repairs stay within ``max_repairs``."""
    model = ScriptedChatModel(replies=[*replies, SAYING, SAYING])  # (more: a turn begun again)
    planner = ToolsPlannerMiddleware(execution=execution, **options)
    agent = create_agent(model, tools=box.sync_tools, middleware=[planner, Reminding()])
    out = agent.invoke({"messages": [HumanMessage("Warm in Paris?")]})
    assert box.names() == ["get_temperature"]
    assert len(model.calls) == model_calls
    assert meta(out["messages"][-1])["status"] in ("finished", "answered")


def test_a_message_a_before_model_hook_adds_does_not_skip_the_plan_s_approval(box: Toolbox) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    model = ScriptedChatModel(replies=[SAYING, SAYING, SAYING])
    planner = ToolsPlannerMiddleware(approve_plan=True)
    agent = create_agent(
        model,
        tools=box.sync_tools,
        middleware=[planner, Reminding()],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [HumanMessage("Warm in Paris?")]}, config)
    assert "__interrupt__" in paused and box.log == [] and len(model.calls) == 1
    agent.invoke(Command(resume={"type": "approve"}), config)
    assert box.names() == ["get_temperature"] and len(model.calls) == 1


class DroppingSecrets(AgentMiddleware[Any, Any]):
    """A message filter: the model is never sent a message that holds a secret."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        kept = [m for m in request.messages if "SECRET" not in m.text]
        return handler(request.override(messages=[*kept, HumanMessage("(context: in Paris)")]))


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_the_planner_model_is_sent_the_messages_a_middleware_before_it_left(
    box: Toolbox, execution: str
) -> None:
    """A ``wrap_model_call`` listed before the planner that edits the messages (drops some,
    adds context) decides what the planner's model reads, as it would the model's."""
    model = ScriptedChatModel(replies=[SAYING])
    planner = ToolsPlannerMiddleware(execution=execution)
    agent = create_agent(model, tools=box.sync_tools, middleware=[DroppingSecrets(), planner])
    history = [HumanMessage("my SECRET card is 4111"), HumanMessage("Warm?")]
    out = agent.invoke({"messages": history})
    asked = [m.text for m in model.calls[0][1:]]
    assert asked == ["Warm?", "(context: in Paris)"]
    assert box.names() == ["get_temperature"] and meta(out["messages"][-1])["status"] == "finished"


class NotingInTheAssistantsRole(AgentMiddleware[Any, Any]):
    """Adds an assistant's note before every model-node visit, each call step's too."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [AIMessage("(note: the tools are slow today)")]}


def test_a_message_a_before_model_hook_adds_between_a_plans_calls_is_no_new_turn(
    box: Toolbox,
) -> None:
    """On the agent path each call of a plan is a visit of the model node: an AIMessage a
    hook adds after a call's result does not hide the result, nor end the turn."""
    plan = asm('PUSH "Paris"\nCALL get_temperature\nPOP R1\nPUSH "Oslo"\nCALL get_temperature')
    model = ScriptedChatModel(replies=[plan, plan])
    planner = ToolsPlannerMiddleware()
    agent = create_agent(
        model, tools=box.sync_tools, middleware=[planner, NotingInTheAssistantsRole()]
    )
    out = agent.invoke({"messages": [HumanMessage("Warm?")]})
    assert box.names() == ["get_temperature"] * 2 and len(model.calls) == 1
    assert meta(out["messages"][-1])["status"] == "finished"


def test_a_new_run_after_one_stopped_between_a_call_and_its_step_begins_a_new_turn(
    box: Toolbox,
) -> None:
    """A run stopped after the tool node answered a call (a recursion limit, a process that
    died there): resumed with ``invoke(None)`` it goes on; a new message instead starts anew."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.errors import GraphRecursionError

    plan = asm('PUSH "Paris"\nCALL get_temperature\nPOP R1\nSAY "Paris {R1}"')
    notify = asm('PUSH "hello"\nCALL notify\nSAY "notified"')
    model = ScriptedChatModel(replies=[plan, notify])
    agent = create_agent(
        model, box.sync_tools, middleware=[ToolsPlannerMiddleware()], checkpointer=InMemorySaver()
    )
    thread: Any = {"configurable": {"thread_id": "t"}}
    with pytest.raises(GraphRecursionError):
        agent.invoke({"messages": [HumanMessage("Warm?")]}, {**thread, "recursion_limit": 3})
    assert isinstance(agent.get_state(thread).values["messages"][-1], ToolMessage)
    out = agent.invoke({"messages": [HumanMessage("Forget that. Notify me.")]}, thread)
    assert box.names() == ["get_temperature", "notify"] and len(model.calls) == 2
    assert out["messages"][-1].text == "notified"

    box.log.clear()
    model = ScriptedChatModel(replies=[plan])
    agent = create_agent(
        model, box.sync_tools, middleware=[ToolsPlannerMiddleware()], checkpointer=InMemorySaver()
    )
    with pytest.raises(GraphRecursionError):
        agent.invoke({"messages": [HumanMessage("Warm?")]}, {**thread, "recursion_limit": 3})
    assert agent.invoke(None, thread)["messages"][-1].text == "Paris 21"
    assert box.names() == ["get_temperature"] and len(model.calls) == 1


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_the_final_answer_model_is_sent_what_a_middleware_before_the_planner_left(
    box: Toolbox, execution: str
) -> None:
    """As the planner's model is (above): the final answer's request holds the conversation
    the filter left, with the turn's calls and results as ever."""
    model = ScriptedChatModel(replies=[SAYING, "It is 21 °C in Paris."])
    planner = ToolsPlannerMiddleware(execution=execution, final_answer="model")
    agent = create_agent(model, tools=box.sync_tools, middleware=[DroppingSecrets(), planner])
    history = [HumanMessage("my SECRET card is 4111"), HumanMessage("Warm?")]
    out = agent.invoke({"messages": history})
    answering = model.calls[1]
    assert "SECRET" not in repr(answering) and "(context: in Paris)" in repr(answering)
    assert "get_temperature" in repr(answering)
    assert out["messages"][-1].text == "It is 21 °C in Paris."


@pytest.mark.parametrize("final_answer", ["plan", "model"])
@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_the_planner_s_messages_carry_the_agent_s_name(
    box: Toolbox, execution: str, final_answer: str
) -> None:
    """``create_agent(name=...)`` names every message its model node answers with; the
    planner answers in the model's place, so its calls, notes and answer carry the name too
    (a supervisor tells agents apart by it), whichever way the answer is written."""
    model = ScriptedChatModel(replies=[WEATHER_PLAN, "It is cold."])
    planner = ToolsPlannerMiddleware(execution=execution, final_answer=final_answer)
    agent = create_agent(model, tools=box.sync_tools, middleware=[planner], name="weather")
    out = agent.invoke({"messages": [HumanMessage("Warm in Paris?")]})
    said = [m for m in out["messages"] if isinstance(m, AIMessage)]
    assert len(said) >= 3 if execution == "agent" else len(said) >= 2
    assert [m.name for m in said] == ["weather"] * len(said)


class Noting(AgentMiddleware[Any, Any]):
    """Adds a message after every model-node visit (an audit note): harmless in a plain agent."""

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [HumanMessage("(audit: model turn logged)")]}


@pytest.mark.parametrize(
    ("execution", "options", "replies", "model_calls"),
    [
        ("graph", {}, [SAYING], 1),
        ("agent", {"final_answer": "model"}, [SAYING, "It is 21."], 2),
        ("agent", {"max_repairs": 1}, [BROKEN, SAYING], 2),
        ("graph", {"max_repairs": 1}, [BROKEN, SAYING], 2),
    ],
    ids=["graph", "agent-answer", "agent-repair", "graph-repair"],
)
def test_a_message_an_after_model_hook_adds_does_not_end_the_turn(
    box: Toolbox, execution: str, options: dict[str, Any], replies: list[str], model_calls: int
) -> None:
    """A hook after the model node that adds a message (no model's answer: a note) leaves
    the turn's next step due: the plan runs, the repair and the final answer are asked for."""
    model = ScriptedChatModel(replies=[*replies, SAYING, SAYING])
    planner = ToolsPlannerMiddleware(execution=execution, **options)
    agent = create_agent(model, tools=box.sync_tools, middleware=[planner, Noting()])
    out = agent.invoke({"messages": [HumanMessage("Warm in Paris?")]})
    assert box.names() == ["get_temperature"]
    assert len(model.calls) == model_calls
    answer = [m for m in out["messages"] if isinstance(m, AIMessage)][-1]
    assert meta(answer)["status"] in ("finished", "answered")


class Gating(AgentMiddleware[Any, Any]):
    """Ends the run before the second model-node visit (a budget guard), with a note or not."""

    def __init__(self, note: list[Any]) -> None:
        super().__init__()
        self.note, self.visits = note, 0

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.visits += 1
        return {"messages": self.note, "jump_to": "end"} if self.visits >= 2 else None


@pytest.mark.parametrize("note", ["human", "none"])
@pytest.mark.parametrize(
    ("execution", "options", "replies"),
    [("graph", {}, [SAYING]), ("agent", {"max_repairs": 1}, [BROKEN, SAYING])],
    ids=["graph", "agent-repair"],
)
def test_a_hook_that_ends_the_run_before_the_model_node_ends_it(
    box: Toolbox, execution: str, options: dict[str, Any], replies: list[str], note: str
) -> None:
    """A ``before_model`` hook that jumps to the end (a guard) ends the run there, with or
    without a message of its own: the planner does not send the agent back to a model node
    that did not run."""
    said = {"human": [HumanMessage("(stopped by a guard)")], "none": []}[note]
    gate = Gating(said)
    model = ScriptedChatModel(replies=[*replies, SAYING, SAYING])
    planner = ToolsPlannerMiddleware(execution=execution, **options)
    agent = create_agent(model, tools=box.sync_tools, middleware=[planner, gate])
    agent.invoke({"messages": [HumanMessage("Warm in Paris?")]}, {"recursion_limit": 40})
    assert gate.visits == 2


def test_an_unnamed_agent_inside_a_named_one_gives_its_messages_no_name(box: Toolbox) -> None:
    """The name is the agent's own (its model's replies carry it), never one a named agent
    running it as a tool passes down in the run's metadata."""
    inner = create_agent(
        ScriptedChatModel(replies=[WEATHER_PLAN]),
        tools=box.sync_tools,
        middleware=[ToolsPlannerMiddleware()],
    )
    seen: list[Any] = []

    @tool
    def ask_weather(question: str) -> str:
        """Ask the weather agent."""
        out = inner.invoke({"messages": [HumanMessage(question)]})
        seen.extend(m for m in out["messages"] if isinstance(m, AIMessage))
        return str(out["messages"][-1].text)

    call = {"name": "ask_weather", "args": {"question": "Warm?"}, "id": "c1", "type": "tool_call"}
    outer = create_agent(
        ScriptedChatModel(replies=[AIMessage("", tool_calls=[call]), "Done."]),
        tools=[ask_weather],
        name="supervisor",
    )
    outer.invoke({"messages": [HumanMessage("Warm in Paris?")]})
    assert seen and [m.name for m in seen] == [None] * len(seen)


def test_the_name_is_the_agent_s_of_this_turn_not_of_an_earlier_one(box: Toolbox) -> None:
    """A thread continued by an agent with no name (the same graph built without ``name=``)
    gives the planner's messages no name, as its model's replies have none."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver, thread = InMemorySaver(), {"configurable": {"thread_id": "named"}}
    for name in ("weather", None):
        model = ScriptedChatModel(replies=[WEATHER_PLAN])
        agent = create_agent(
            model,
            tools=box.sync_tools,
            middleware=[ToolsPlannerMiddleware()],
            checkpointer=saver,
            name=name,
        )
        out = agent.invoke({"messages": [HumanMessage("Warm in Paris?")]}, thread)
        last = out["messages"][-1]
        assert isinstance(last, AIMessage) and last.name == name
