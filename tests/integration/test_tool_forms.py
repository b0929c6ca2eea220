"""Every tool a user can give ``create_agent`` works, read from what it declares: a ``@tool``
function, a ``StructuredTool`` with a pydantic or a JSON-schema ``args_schema``, a tool whose
function takes ``**kwargs``, a ``content_and_artifact`` tool, a ``BaseTool`` subclass and a
plain function; on the agent path, the graph path, the planner node and ``Emulator``.

Each form declares the same ``pay(to: str, amount: 0 < float <= 100)``: a plan that pays 40
runs; a literal ``5000`` is refused before the run with its line (the model is asked to repair
it); a computed ``5000`` is refused when the call is built, before the tool runs. (MCP tools,
from a real server: ``tests/integration/test_mcp.py``.) The model's replies are hand-written.

A tool taking an injected parameter (a tool-call id, a state, a config, a ``ToolRuntime``) gets
on every path what LangGraph's ``ToolNode`` gives it; ``Emulator.run()`` refuses, before the
run, one whose parameter it cannot give.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
import json
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from conftest import Harness, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import InjectedState, ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    Json,
    RootModel,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic.v1 import BaseModel as BaseModelV1
from pydantic.v1 import Field as FieldV1
from pydantic.v1 import confloat

from llassembly import (
    Emulator,
    ToolArgumentError,
    ToolsPlannerMiddleware,
    ToolsPlannerNode,
    UsageError,
    check,
    externs_from,
    parse,
)

PAID: list[tuple[str, float]] = []


def _paid(to: str, amount: float) -> dict[str, Any]:
    PAID.append((to, float(amount)))
    return {"status": "paid", "to": to, "amount": amount}


class PayArgs(BaseModel):
    to: str = Field(description="who is paid")
    amount: float = Field(gt=0, le=100, description="how much")


AmountV1 = confloat(gt=0, le=100)  # (LangChain refuses a v1 Field's own constraints)

PAY_SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "who is paid"},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
    },
    "required": ["to", "amount"],
}


def _decorated() -> Any:
    @tool
    def pay(to: str, amount: Annotated[float, Field(gt=0, le=100)]) -> dict[str, Any]:
        """Pay someone."""
        return _paid(to, amount)

    return pay


def _pydantic_schema() -> Any:
    return StructuredTool.from_function(
        func=lambda to, amount: _paid(to, amount),
        name="pay",
        description="Pay someone.",
        args_schema=PayArgs,
    )


class PayArgsV1(BaseModelV1):
    to: str = FieldV1(description="who is paid")
    amount: AmountV1 = FieldV1(description="how much")


def _pydantic_v1_schema() -> Any:
    return StructuredTool.from_function(
        func=lambda to, amount: _paid(to, amount),
        name="pay",
        description="Pay someone.",
        args_schema=PayArgsV1,
    )


def _json_schema() -> Any:
    return StructuredTool(
        name="pay",
        description="Pay someone.",
        args_schema=PAY_SCHEMA,
        func=lambda **kwargs: _paid(kwargs["to"], kwargs["amount"]),
    )


def _kwargs() -> Any:
    def pay(**kwargs: Any) -> dict[str, Any]:
        return _paid(kwargs["to"], kwargs["amount"])

    return StructuredTool.from_function(
        func=pay, name="pay", description="Pay someone.", args_schema=PayArgs
    )


def _content_and_artifact() -> Any:
    def pay(to: str, amount: Annotated[float, Field(gt=0, le=100)]) -> tuple[str, dict[str, Any]]:
        """Pay someone."""
        result = _paid(to, amount)
        return f"{result['status']} {result['amount']:g}", result

    return StructuredTool.from_function(func=pay, response_format="content_and_artifact")


def _subclass() -> Any:
    class Pay(BaseTool):
        name: str = "pay"
        description: str = "Pay someone."
        args_schema: type[BaseModel] = PayArgs

        def _run(self, to: str, amount: float) -> dict[str, Any]:
            return _paid(to, amount)

    return Pay()


def _function() -> Any:
    def pay(to: str, amount: Annotated[float, Field(gt=0, le=100)]) -> dict[str, Any]:
        """Pay someone."""
        return _paid(to, amount)

    return pay


FORMS: dict[str, Callable[[], Any]] = {
    "@tool": _decorated,
    "pydantic args_schema": _pydantic_schema,
    "JSON-schema args_schema": _json_schema,
    "pydantic.v1 args_schema": _pydantic_v1_schema,
    "**kwargs with args_schema": _kwargs,
    "content_and_artifact": _content_and_artifact,
    "BaseTool subclass": _subclass,
    "plain function": _function,
}
PATHS = ("agent", "graph", "node", "Emulator")

GOOD = 'PUSH "bob"\nPUSH 40\nCALL pay\nPOP R1\nSAY "{R1}"'
LITERAL = 'PUSH "bob"\nPUSH 5000\nCALL pay\nPOP R1'
COMPUTED = 'MOV R2, 4000\nADD R2, 1000\nPUSH "bob"\nPUSH R2\nCALL pay\nPOP R1'


def said(form: str) -> str:
    """What ``GOOD`` says: the plan reads the tool's own value (a content_and_artifact tool's
    content)."""
    if form == "content_and_artifact":
        return "paid 40"
    return '{"status":"paid","to":"bob","amount":40.0}'


async def run(path: str, form: str, replies: list[str]) -> tuple[Any, ScriptedChatModel]:
    """A turn on ``path`` with the scripted ``replies``: the final message and the model."""
    PAID.clear()
    model = ScriptedChatModel(replies=[asm(r) for r in replies])
    given = FORMS[form]()
    options: dict[str, Any] = {"max_repairs": 1}
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, [given], **options))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        out = await graph.compile().ainvoke({"messages": [HumanMessage("pay bob 40")]})
    else:
        planner = ToolsPlannerMiddleware(execution=path, **options)  # type: ignore[arg-type]
        agent = create_agent(model, tools=[given], middleware=[planner])
        out = await agent.ainvoke({"messages": [HumanMessage("pay bob 40")]})
    return out["messages"][-1], model


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("path", ["agent", "graph", "node"])
async def test_each_tool_form_runs_on_each_path(path: str, form: str) -> None:
    final, model = await run(path, form, [GOOD])
    assert final.text == said(form) and meta(final)["status"] == "finished"
    assert PAID == [("bob", 40.0)] and len(model.calls) == 1
    prompt = model.calls[0][0].text
    assert "pay(to: str, amount: float) -> " in prompt


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_tool_form_runs_in_the_emulator(form: str) -> None:
    PAID.clear()
    result = Emulator(parse(GOOD), [FORMS[form]()]).run()  # type: ignore[arg-type]
    assert result.answer == said(form) and PAID == [("bob", 40.0)]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("path", ["agent", "graph", "node"])
async def test_a_literal_the_schema_refuses_is_repaired_before_the_run(
    path: str, form: str
) -> None:
    final, model = await run(path, form, [LITERAL, GOOD])
    assert final.text == said(form) and PAID == [("bob", 40.0)]
    repair = model.calls[1][-1].text
    assert "line 5" in repair and "less than or equal to 100" in repair  # (2 lines of prose)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_literal_the_schema_refuses_is_refused_by_the_engine_with_its_line(form: str) -> None:
    [problem] = check(parse(LITERAL), [FORMS[form]()])  # type: ignore[arg-type]
    assert problem.line == 3 and "less than or equal to 100" in problem.message
    with pytest.raises(Exception, match="line 3"):
        Emulator(parse(LITERAL), [FORMS[form]()])  # type: ignore[arg-type]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("path", ["agent", "graph", "node"])
async def test_a_computed_value_the_schema_refuses_stops_before_the_call(
    path: str, form: str
) -> None:
    final, _ = await run(path, form, [COMPUTED])
    record = meta(final)
    assert record["status"] == "stopped" and record["error"]["type"] == "ToolArgumentError"
    assert record["error"]["line"] == 7 and record["error"]["argument"] == "amount"
    assert PAID == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_computed_value_the_schema_refuses_stops_the_emulator_before_the_call(form: str) -> None:
    PAID.clear()
    emulator = Emulator(parse(COMPUTED), [FORMS[form]()])  # type: ignore[arg-type]
    with pytest.raises(ToolArgumentError, match="line 5") as caught:
        emulator.run()
    assert caught.value.argument == "amount" and PAID == []


@pytest.mark.parametrize("path", ["graph", "node"])
async def test_a_plan_graphs_tool_runs_are_traced_when_someone_listens(path: str) -> None:
    """Under a callback handler (tracing, ``astream_events``) every call is invoked as the tool
    node invokes it, so its run shows; with nobody listening the tool's function is called
    directly (see ``llassembly.compat.direct_function``): the same messages either way."""
    from langchain_core.callbacks import BaseCallbackHandler

    class Tools(BaseCallbackHandler):
        def __init__(self) -> None:
            self.started: list[str] = []

        def on_tool_start(self, serialized: Any, input_str: str, **kwargs: Any) -> None:
            self.started.append(kwargs.get("name") or serialized.get("name"))

    listening = Tools()
    finals = []
    for config in ({"callbacks": [listening]}, {}):
        PAID.clear()
        model = ScriptedChatModel(replies=[asm(GOOD)])
        if path == "node":
            graph = StateGraph(MessagesState)
            graph.add_node("planner", ToolsPlannerNode(model, [_decorated()]))
            graph.add_edge(START, "planner")
            graph.add_edge("planner", END)
            runnable: Any = graph.compile()
        else:
            planner = ToolsPlannerMiddleware(execution="graph")
            runnable = create_agent(model, tools=[_decorated()], middleware=[planner])
        out = await runnable.ainvoke({"messages": [HumanMessage("pay")]}, config)
        finals.append(out["messages"][-1].text)
        assert PAID == [("bob", 40.0)]
    assert listening.started == ["pay"]
    assert finals[0] == finals[1] == said("@tool")


# -- injected parameters: every path gives what LangGraph's ToolNode gives --------------------

SEEN: list[Any] = []
"""What each injected-parameter tool was given (its one parameter the plan does not pass)."""
ASKED = "note 5"
USER: dict[str, Any] = {"configurable": {"user_id": "u1"}}


def _call_id() -> Any:
    @tool
    def note(x: int, call_id: Annotated[str, InjectedToolCallId]) -> int:
        """Note x."""
        SEEN.append(call_id)
        return x

    return note


def _state() -> Any:
    @tool
    def note(x: int, state: Annotated[dict[str, Any], InjectedState]) -> int:
        """Note x."""
        SEEN.append(state)
        return x

    return note


def _state_key() -> Any:
    @tool
    def note(x: int, messages: Annotated[list[Any], InjectedState("messages")]) -> int:
        """Note x."""
        SEEN.append({"messages": messages})
        return x

    return note


def _config() -> Any:
    @tool
    def note(x: int, config: RunnableConfig) -> int:
        """Note x."""
        SEEN.append(config.get("configurable", {}).get("user_id"))
        return x

    return note


def _runtime() -> Any:
    @tool
    def note(x: int, runtime: ToolRuntime) -> int:
        """Note x."""
        SEEN.append(runtime.tool_call_id)
        return x

    return note


class HiddenRuntime(BaseModel):
    """An ``args_schema`` as LangChain's ``ShellToolMiddleware`` writes its tool's: the
    runtime among its fields, hidden from the model's JSON schema."""

    x: int
    runtime: Annotated[Any, SkipJsonSchema()] = None


def _hidden_runtime() -> Any:
    def note(x: int, runtime: ToolRuntime) -> int:
        SEEN.append(runtime.tool_call_id if runtime else None)  # (the schema's default: None)
        return x

    return StructuredTool.from_function(
        note, name="note", description="Note x.", args_schema=HiddenRuntime
    )


def _function_state() -> Any:
    def note(x: int, state: Annotated[dict[str, Any], InjectedState]) -> int:
        """Note x."""
        SEEN.append(state)
        return x

    return note


INJECTED: dict[str, Callable[[], Any]] = {
    "InjectedToolCallId": _call_id,
    "InjectedState": _state,
    "InjectedState(key)": _state_key,
    "RunnableConfig": _config,
    "ToolRuntime": _runtime,
    "ToolRuntime, hidden in args_schema": _hidden_runtime,
    "plain function, InjectedState": _function_state,
}
# What a plain Emulator.run() cannot give (it passes the plan's arguments; a LangChain tool's
# own invoke adds its config).
NOT_IN_EMULATOR = {
    "InjectedToolCallId": "call_id",
    "InjectedState": "state",
    "InjectedState(key)": "messages",
    "ToolRuntime": "runtime",
    "plain function, InjectedState": "state",
}
NOTE = 'PUSH 5\nCALL note\nPOP R1\nSAY "{R1}"'


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("listening", [False, True], ids=["direct", "traced"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
@pytest.mark.parametrize("form", sorted(INJECTED))
@pytest.mark.parametrize("path", ["agent", "graph", "node"])
async def test_a_tool_with_an_injected_parameter_gets_what_the_tool_node_gives_on_each_path(
    path: str, form: str, asynchronous: bool, listening: bool
) -> None:
    """The plan's call id, the caller's state (the agent's; the node's input state) and the
    run's config reach the tool on every path, called directly or traced."""
    from langchain_core.callbacks import BaseCallbackHandler

    SEEN.clear()
    harness = Harness("node" if path == "node" else "agent", asynchronous=asynchronous)
    harness.defaults = {} if path == "node" else {"execution": path}
    config: dict[str, Any] = dict(USER)
    if listening:
        config["callbacks"] = [BaseCallbackHandler()]
    out = await harness.run([asm(NOTE)], [INJECTED[form]()], [HumanMessage(ASKED)], config=config)
    final = out["messages"][-1]
    assert meta(final)["status"] == "finished" and final.text == "5"
    [call] = [c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    [seen] = SEEN
    if form.startswith(("InjectedToolCallId", "ToolRuntime")):
        assert seen == call["id"]
    elif form == "RunnableConfig":
        assert seen == "u1"
    else:
        assert seen["messages"][0].text == ASKED
        if path == "node":  # the node's input state, as the node was given it
            assert [m.text for m in seen["messages"]] == [ASKED]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
@pytest.mark.parametrize("form", sorted(INJECTED))
def test_the_emulator_refuses_before_the_run_a_tool_whose_injected_parameter_it_cannot_give(
    form: str, asynchronous: bool
) -> None:
    SEEN.clear()
    emulator = Emulator(parse(NOTE), [INJECTED[form]()])
    if form not in NOT_IN_EMULATOR:  # a tool's invoke gives it its config
        result = asyncio.run(emulator.arun()) if asynchronous else emulator.run()
        assert result.answer == "5" and SEEN == [None]
        return
    param = NOT_IN_EMULATOR[form]
    with pytest.raises(UsageError, match=rf"tools 'note' .*'{param}'.*nothing has run") as caught:
        asyncio.run(emulator.arun()) if asynchronous else emulator.run()
    assert SEEN == [] and emulator.state.pc == 0
    assert "Emulator" in str(caught.value)


class LimitedV1(BaseModelV1):
    q: str
    limit: int = FieldV1(5, ge=1)  # LangChain cannot make its tool-call schema


@pytest.mark.parametrize("path", PATHS)
async def test_a_pydantic_v1_schema_langchain_cannot_describe_is_a_usage_error(path: str) -> None:
    old = StructuredTool.from_function(
        lambda q, limit=5: q, name="old", description="Old.", args_schema=LimitedV1
    )
    with pytest.raises(UsageError, match=r"tool 'old' \(a pydantic.v1 args_schema.*: On field"):
        if path == "Emulator":
            Emulator(parse('PUSH "x"\nCALL old, 1\nPOP R1'), [old])
        elif path == "node":
            ToolsPlannerNode(ScriptedChatModel(replies=[]), [old])
        else:
            planner = ToolsPlannerMiddleware(execution=path)  # type: ignore[arg-type]
            agent = create_agent(
                ScriptedChatModel(replies=[asm(GOOD)]), [old], middleware=[planner]
            )
            await agent.ainvoke({"messages": [HumanMessage("go")]})


BOOKED: list[tuple[str, int, int]] = []


class BookArgs(BaseModel):
    city: str
    start: int
    end: int

    @field_validator("city")
    @classmethod
    def tidy(cls, city: str) -> str:
        if not city.strip():
            raise ValueError("no city given")
        return city.strip().title()

    @model_validator(mode="after")
    def ordered(self) -> BookArgs:
        if self.start >= self.end:
            raise ValueError("start must be before end")
        return self


def _book(city: str, start: int, end: int) -> str:
    BOOKED.append((city, start, end))
    return f"booked {city} {start}-{end}"


def _run_on(
    path: str, tools: list[Any], plan: str, config: dict[str, Any], *, history: bool = False
) -> Any:
    """The final message of a turn on ``path`` (``history``: all its messages; the Emulator's
    answer, or its error), run synchronously (a sync tool's function may be called directly)."""
    if path == "Emulator":
        emulator = Emulator(parse(plan), tools)
        try:
            return emulator.run()
        except Exception as exc:
            return exc
    model = ScriptedChatModel(replies=[asm(plan)])
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, tools))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        runnable: Any = graph.compile()
    else:
        planner = ToolsPlannerMiddleware(execution=path)  # type: ignore[arg-type]
        runnable = create_agent(model, tools=tools, middleware=[planner])
    out = runnable.invoke({"messages": [HumanMessage("book")]}, config)
    return out["messages"] if history else out["messages"][-1]


def _sent(path: str, tools: list[Any], plan: str) -> tuple[str, dict[str, Any]]:
    """A turn's final text on ``path`` and the arguments of its one tool call, as its
    ``AIMessage`` holds them (what the agent's tool node validates again)."""
    messages = _run_on(path, tools, plan, {}, history=True)
    [call] = [c for m in messages for c in getattr(m, "tool_calls", [])]
    return messages[-1].text, call["args"]


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_the_args_schemas_own_validators_run_on_every_path(path: str, traced: bool) -> None:
    """A call gets what ``tool.invoke`` gives the function (a field validator's tidied value),
    with or without a callback handler (tracing); where the schema refuses, see the next test."""
    from langchain_core.callbacks import BaseCallbackHandler

    book = StructuredTool.from_function(
        _book, name="book", description="Book.", args_schema=BookArgs
    )
    config: dict[str, Any] = {"callbacks": [BaseCallbackHandler()]} if traced else {}
    plan = 'PUSH "  paris "\nPUSH {}\nPUSH {}\nCALL book\nPOP R1\nSAY "{{R1}}"'
    BOOKED.clear()
    good = _run_on(path, [book], plan.format(1, 2), config)
    assert BOOKED == [("Paris", 1, 2)]
    assert (good.answer if path == "Emulator" else good.text) == "booked Paris 1-2"


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("city", "start", "argument", "reason"),
    [("paris", 5, "", "start must be before end"), ("   ", 1, "city", "no city given")],
)
def test_arguments_the_args_schemas_validators_refuse_are_the_calls_argument_error(
    path: str, traced: bool, city: str, start: int, argument: str, reason: str
) -> None:
    """A validator of the tool's own ``args_schema`` (a model's, a field's) refusing the
    arguments refuses the call before the tool's code runs, the same on every path: a
    ``ToolArgumentError`` at the ``CALL``, naming the argument pydantic names, with the
    validator's reason (the agent's tool node words its own error message without it)."""
    from langchain_core.callbacks import BaseCallbackHandler

    book = StructuredTool.from_function(
        _book, name="book", description="Book.", args_schema=BookArgs
    )
    config: dict[str, Any] = {"callbacks": [BaseCallbackHandler()]} if traced else {}
    plan = f'PUSH "{city}"\nPUSH {start}\nPUSH 2\nCALL book\nPOP R1\nSAY "{{R1}}"'
    BOOKED.clear()
    refused = _run_on(path, [book], plan, config)
    assert BOOKED == []
    if path == "Emulator":
        assert isinstance(refused, ToolArgumentError) and refused.line == 4
        error = {"message": str(refused), "source": refused.source, "argument": refused.argument}
    else:
        record = meta(refused)
        assert record["status"] == "stopped" and record["error"]["type"] == "ToolArgumentError"
        error = record["error"]
    assert error["source"] == "CALL book" and error["argument"] == argument
    assert reason in error["message"] and "tool 'book'" in error["message"]


class TransferArgs(BaseModel):
    from_: str = Field(alias="from")
    amount: float


class NamedTransferArgs(TransferArgs):
    model_config = ConfigDict(populate_by_name=True)


@pytest.mark.parametrize("path", PATHS)
def test_an_argument_read_only_by_its_alias_is_a_usage_error(path: str) -> None:
    """LangChain's tool-call schema names the argument ``from_``, which ``tool.invoke``
    refuses: the tool is refused when it is read, on every path; a schema that also takes the
    field's name works."""
    sent: list[dict[str, Any]] = []

    def transfer(**kwargs: Any) -> str:
        sent.append(kwargs)
        return "ok"

    plan = 'PUSH "acct1"\nPUSH 12.5\nCALL transfer\nPOP R1\nSAY "{R1}"'
    tool_of = functools.partial(
        StructuredTool.from_function, transfer, name="transfer", description="Move money."
    )
    with pytest.raises(UsageError, match="argument 'from_' is read only by its alias 'from'"):
        _run_on(path, [tool_of(args_schema=TransferArgs)], plan, {})
    final = _run_on(path, [tool_of(args_schema=NamedTransferArgs)], plan, {})
    assert (final.answer if path == "Emulator" else final.text) == "ok"
    assert sent == [{"from_": "acct1", "amount": 12.5}]


class DoubleArgs(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def doubled(cls, n: int) -> int:
        return n * 2


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_the_args_schemas_own_validators_run_once_per_call(path: str, traced: bool) -> None:
    """A validator that is not idempotent (``n * 2``) gives what ``tool.invoke`` gives: it is
    applied once, not once by the library and again by LangChain."""
    from langchain_core.callbacks import BaseCallbackHandler

    def show(n: int) -> str:
        return f"n={n}"

    tool = StructuredTool.from_function(
        show, name="show", description="Show.", args_schema=DoubleArgs
    )
    config: dict[str, Any] = {"callbacks": [BaseCallbackHandler()]} if traced else {}
    assert tool.invoke({"n": 3}) == "n=6"
    final = _run_on(path, [tool], 'PUSH 3\nCALL show\nPOP R1\nSAY "{R1}"', config)
    assert (final.answer if path == "Emulator" else final.text) == "n=6"


class Cents(BaseModel):
    cents: int

    @field_validator("cents")
    @classmethod
    def from_dollars(cls, cents: int) -> int:
        return cents * 100


@tool
def pay(
    dollars: Annotated[int, AfterValidator(lambda v: v * 100)],
    note: Annotated[str, AfterValidator(lambda s: s + "!")],
) -> str:
    """Pay an amount in dollars (kept in cents)."""
    return f"{dollars} {note}"


@tool
def place(order: Cents) -> str:
    """Place an order."""
    return str(order.cents)


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("chosen", "plan", "given"),
    [
        (pay, 'PUSH 5\nPUSH "hi"\nCALL pay', {"dollars": 5, "note": "hi"}),
        (place, "PUSH '{\"cents\": 5}'\nCALL place", {"order": {"cents": 5}}),
    ],
    ids=["annotated", "model-parameter"],
)
def test_a_parameters_own_validators_run_once_per_call(
    path: str, traced: bool, chosen: Any, plan: str, given: dict[str, Any]
) -> None:
    """Validators written where a tool declares its parameters (``Annotated[...,
    AfterValidator]``, a model's ``field_validator``) are applied once, as a model's call of
    the tool applies them; the call's message records the values the plan gave."""
    from langchain_core.callbacks import BaseCallbackHandler

    config: dict[str, Any] = {"callbacks": [BaseCallbackHandler()]} if traced else {}
    expected = chosen.invoke(given)
    final = _run_on(path, [chosen], plan + '\nPOP R1\nSAY "{R1}"', config, history=True)
    if path == "Emulator":
        assert final.answer == expected
        return
    assert final[-1].text == expected
    if path == "agent":
        [call] = [c for m in final for c in getattr(m, "tool_calls", [])]
        assert call["args"] == given


class PageArgs(BaseModel):
    account: str
    limit: int = 5


class SpanArgs(BaseModel):
    n: int
    twice: int = Field(default_factory=lambda data: data["n"] * 2)
    given: int = Field(default="5", validate_default=True)


def _span(n: int, twice: int = 7, given: int = 7) -> str:
    return f"{n}:{twice}:{given!r}"


@pytest.mark.parametrize("traced", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_an_argument_left_out_gets_the_schemas_default_as_invoke_gives_it(
    path: str, traced: bool
) -> None:
    """``CALL tool, 1`` leaves the rest to their defaults: the tool gets what ``tool.invoke``
    gives it, the schema's default (a ``Field(default=...)``'s value, a ``default_factory``'s,
    an ``args_schema``'s over the function's own), never the function's ``FieldInfo``."""
    from langchain_core.callbacks import BaseCallbackHandler

    @tool
    def transactions(
        account: str,
        limit: int = Field(default=50, ge=1),
        tags: list[str] = Field(default_factory=list),  # noqa: B008
    ) -> str:
        """List an account's transactions."""
        return f"{account} {limit!r} {tags!r}"

    def page(account: str, limit: int = 10) -> str:
        return f"{account} {limit!r}"

    paged = StructuredTool.from_function(
        page, name="page", description="Page.", args_schema=PageArgs
    )
    spanned = StructuredTool.from_function(
        _span, name="span", description="Span.", args_schema=SpanArgs
    )
    config: dict[str, Any] = {"callbacks": [BaseCallbackHandler()]} if traced else {}
    for given, first, said in [
        (transactions, {"account": "chk"}, "chk 50 []"),
        (paged, {"account": "chk"}, "chk 5"),
        (spanned, {"n": 3}, "3:6:5"),
    ]:
        assert given.invoke(first) == said
        pushed = json.dumps(next(iter(first.values())))
        plan = f'PUSH {pushed}\nCALL {given.name}, 1\nPOP R1\nSAY "{{R1}}"'
        final = _run_on(path, [given], plan, config)
        assert (final.answer if path == "Emulator" else final.text) == said


class Hue(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(str, enum.Enum):  # noqa: UP042 (the spelling before StrEnum, still common)
    SMALL = "s"
    LARGE = "l"


@dataclasses.dataclass
class Slot:
    room: str
    seats: int


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
def test_a_calls_arguments_are_the_json_a_model_would_send(path: str) -> None:
    """A converted argument (an enum member, a dataclass, a set, a time) goes into the call's
    ``AIMessage`` as the JSON the tool's schema declares (what a model calling the tool sends),
    never as its ``repr`` or a Python object; so the agent's tool node runs it as the other
    paths do."""
    got: list[tuple[Any, ...]] = []

    @tool
    def paint(hue: Hue, size: Size, slot: Slot, tags: set[str], at: datetime.time) -> str:
        """Paint a wall."""
        got.append((hue, size, slot, tags, at))
        return "painted"

    plan = (
        'PUSH "red"\nPUSH "l"\nPUSH \'{"room": "A1", "seats": 4}\'\nPUSH \'["b", "a"]\'\n'
        'PUSH "09:30"\nCALL paint\nPOP R1\nSAY "{R1}"'
    )
    said, args = _sent(path, [paint], plan)
    assert said == "painted"
    assert got == [(Hue.RED, Size.LARGE, Slot("A1", 4), {"a", "b"}, datetime.time(9, 30))]
    assert {**args, "tags": sorted(args["tags"])} == {
        "hue": "red",
        "size": "l",
        "slot": {"room": "A1", "seats": 4},
        "tags": ["a", "b"],
        "at": "09:30",  # (as the plan wrote it: the tool's schema reads it)
    }
    assert all(type(v) in (str, dict, list) for v in args.values())


class Window(BaseModel):
    model_config = ConfigDict(serialize_by_alias=True)
    start: str = Field(alias="from")
    n: int


class Login(BaseModel):
    user: str
    password: SecretStr


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
def test_an_argument_the_tool_node_revalidates_is_written_as_its_schema_reads_it(
    path: str,
) -> None:
    """What the agent's tool node validates again: a model that writes itself by alias (as
    LangChain shows the model its schema), an enum as a mapping's key, a secret's own text
    (the plan holds it as text; a mask would reach the tool as its value)."""
    got: list[tuple[Any, ...]] = []

    @tool
    def book(w: Window, counts: dict[Hue, int], pin: SecretStr, login: Login) -> str:
        """Book a window."""
        secrets = pin.get_secret_value(), login.password.get_secret_value()
        got.append((w.start, w.n, counts, *secrets))
        return "booked"

    plan = (
        'PUSH \'{"from": "9am", "n": 2}\'\nPUSH \'{"red": 2}\'\nPUSH "1234"\n'
        'PUSH \'{"user": "ann", "password": "hunter2"}\'\nCALL book\nPOP R1\nSAY "{R1}"'
    )
    said, args = _sent(path, [book], plan)
    assert said == "booked"
    assert got == [("9am", 2, {Hue.RED: 2}, "1234", "hunter2")]
    assert args == {
        "w": {"from": "9am", "n": 2},
        "counts": {"red": 2},
        "pin": "1234",
        "login": {"user": "ann", "password": "hunter2"},
    }


@pytest.mark.parametrize("path", PATHS)
def test_a_json_text_parameter_takes_the_plans_json_text(path: str) -> None:
    """A ``pydantic.Json[...]`` parameter takes JSON text, which the tool parses (LangChain shows
    the model a string): the plan's JSON text reaches it as text. It used to be read as the
    structure, which ``Json`` refuses, so no plan could call such a tool."""

    @tool
    def store(payload: Json[dict[str, int]]) -> str:
        """Store a JSON payload."""
        return f"stored {sorted(payload.items())}"

    assert store.invoke({"payload": '{"a": 1}'}) == "stored [('a', 1)]"
    final = _run_on(path, [store], 'PUSH \'{"a": 1}\'\nCALL store\nPOP R1\nSAY "{R1}"', {})
    assert (final.answer if path == "Emulator" else final.text) == "stored [('a', 1)]"


class Slot2(BaseModel):
    start: str = Field(alias="from")  # read by its alias only; written by its name
    end: str = Field(validation_alias=AliasChoices("to", "until"))  # read by these alone


class Job(BaseModel):
    name: str
    token: str = Field(exclude=True)  # left out of what the model writes
    size: int

    @field_serializer("size")
    def _bytes(self, size: int) -> str:
        return f"{size} bytes"  # written as what it does not read back


class Booking(BaseModel):
    slot: Slot2
    job: Job


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
def test_a_model_argument_is_written_as_it_reads_not_as_it_serializes(path: str) -> None:
    """The tool node validates a call's arguments again: a model in them is written with the
    keys and values it reads (its validation aliases, its excluded fields, its values before
    any serializer), not as it dumps itself, which it may not read back."""
    got: list[Booking] = []

    @tool
    def book(b: Booking) -> str:
        """Book."""
        got.append(b)
        return "booked"

    value = '{"slot": {"from": "9am", "to": "5pm"}, "job": {"name": "a", "token": "t1", "size": 3}}'
    said, args = _sent(path, [book], f"PUSH '{value}'\nCALL book\nPOP R1\nSAY \"{{R1}}\"")
    assert said == "booked"
    assert [(b.slot.start, b.job.token, b.job.size) for b in got] == [("9am", "t1", 3)]
    assert args == {"b": json.loads(value)}


class Ids(RootModel[list[int]]):
    pass


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
def test_a_root_model_argument_is_written_as_its_root(path: str) -> None:
    """A ``RootModel`` reads its root value, not an object with a ``root`` key."""

    @tool
    def take(ids: Ids) -> str:
        """Take ids."""
        return f"got {ids.root}"

    said, args = _sent(path, [take], "PUSH '[1, 2]'\nCALL take\nPOP R1\nSAY \"{R1}\"")
    assert (said, args) == ("got [1, 2]", {"ids": [1, 2]})


class Retyping(AgentMiddleware[Any, Any]):
    """A tool middleware that rewrites a call's argument as text (a sanitiser, an edit)."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        call = {**request.tool_call, "args": {"n": str(request.tool_call["args"]["n"])}}
        return handler(request.override(tool_call=call))


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
def test_arguments_a_tool_middleware_changes_are_validated_by_the_tool(path: str) -> None:
    """What a tool middleware (or a person editing a call) gives the tool is validated by the
    tool's schema, as the agent's tool node validates it: ``"5"`` for an ``int`` is 5."""

    @tool
    def double(n: int) -> str:
        """Double a number."""
        return repr(n * 2)

    plan = asm('PUSH 5\nCALL double\nPOP R1\nSAY "{R1}"')
    model = ScriptedChatModel(replies=[plan])
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, [double], tool_middleware=[Retyping()]))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        runnable: Any = graph.compile()
    else:
        planner = ToolsPlannerMiddleware(execution=path, tool_middleware=[Retyping()])  # type: ignore[arg-type]
        runnable = create_agent(model, tools=[double], middleware=[planner])
    out = runnable.invoke({"messages": [HumanMessage("double 5")]})
    assert out["messages"][-1].text == "10"


class Correcting(AgentMiddleware[Any, Any]):
    """A tool middleware that corrects a result after the tool (a stale cache, a unit)."""

    def __init__(self, fixes: dict[str, str]) -> None:
        super().__init__()
        self.fixes = fixes

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        message = handler(request)
        message.content = self.fixes.get(message.content, message.content)
        return message


@pytest.mark.parametrize("execution", ["agent", "graph"])
@pytest.mark.parametrize(
    ("fixes", "said"),
    [
        ({"1": "12"}, "stock=12"),  # the tool's text inside the new one, but not whole
        ({"1": "7"}, "stock=7"),
        ({"1": "Note: checked.\n1"}, "stock=1"),  # a line added before it: the tool's value
    ],
)
def test_a_correction_decides_what_the_plan_reads_unless_it_only_adds_lines(
    execution: str, fixes: dict[str, str], said: str
) -> None:
    """A tool middleware that alters a result decides what the plan reads (its text, by the
    declared type); one that only adds lines around the tool's text (a notice) leaves the
    plan the tool's own value."""

    @tool
    def stock(item: str) -> int:
        """Units in stock."""
        return 1

    plan = asm('PUSH "bolts"\nCALL stock\nPOP R1\nSAY "stock={R1}"')
    middleware = [Correcting(fixes)]
    if execution == "agent":
        agent_middleware = [ToolsPlannerMiddleware(), *middleware]
    else:
        agent_middleware = [ToolsPlannerMiddleware(execution="graph", tool_middleware=middleware)]
    model = ScriptedChatModel(replies=[plan])
    out = create_agent(model, tools=[stock], middleware=agent_middleware).invoke(
        {"messages": [HumanMessage("stock?")]}
    )
    assert out["messages"][-1].text == said


class ShipArgs(BaseModel):
    crate: int
    tool_call_id: Annotated[str, InjectedToolCallId]


@pytest.mark.parametrize("path", PATHS)
def test_an_injected_argument_its_args_schema_declares_is_given_on_every_path(path: str) -> None:
    """LangChain reads injected arguments from a tool's input schema as well as from its
    function: a call id declared in the ``args_schema`` reaches the tool on every planner path
    (a plain ``Emulator.run()`` says it cannot give it), and is never an argument a plan
    pushes."""
    seen: list[tuple[int, str]] = []

    def ship_once(crate: int, tool_call_id: str) -> str:
        seen.append((crate, tool_call_id))
        return "shipped"

    ship = StructuredTool.from_function(
        ship_once, name="ship", description="Ship a crate once.", args_schema=ShipArgs
    )
    assert [p.name for p in externs_from([ship])["ship"].params] == ["crate"]
    final = _run_on(path, [ship], 'PUSH 7\nCALL ship\nPOP R1\nSAY "{R1}"', {})
    if path == "Emulator":  # (as for one its function declares: a plain run has no call id)
        assert isinstance(final, UsageError) and "tool_call_id" in str(final) and seen == []
        return
    assert final.text == "shipped"
    assert len(seen) == 1 and seen[0][0] == 7 and seen[0][1]


def _answers(kind: str) -> Any:
    """A tool whose result is its answer in one of the forms the agent's tool node takes."""
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command

    def reply(cid: Annotated[str, InjectedToolCallId] = "") -> Any:
        blocks = [{"type": "text", "text": "hi"}]
        message = {"role": "tool", "content": "hi", "tool_call_id": cid}
        return {
            "blocks": Command(update={"messages": [ToolMessage(blocks, tool_call_id=cid)]}),
            "dict": Command(update={"messages": [message]}),
            "list": [Command(update={"messages": [ToolMessage("hi", tool_call_id=cid)]})],
            "direct-blocks": ToolMessage(blocks, tool_call_id=cid),
            "error": Command(
                update={"messages": [ToolMessage("nope", tool_call_id=cid, status="error")]}
            ),
        }[kind]

    return StructuredTool.from_function(reply, name="reply", description="Reply.")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", ["blocks", "dict", "list", "direct-blocks", "error"])
def test_a_tools_answer_in_any_form_the_tool_node_takes_reads_alike_on_every_path(
    path: str, kind: str
) -> None:
    """A ``Command`` carrying the call's ``ToolMessage`` (its content in blocks, or written as
    a dict), a list of them, a ``ToolMessage`` itself: the plan reads the message's text on
    every path, the Emulator's too; an error message is the call's failure (``JC`` taken)."""
    plan = 'CALL reply\nJC failed\nPOP R1\nSAY "{R1}"\nHLT\nfailed:\nSAY "failed"'
    final = _run_on(path, [_answers(kind)], plan, {})
    text = final.answer if path == "Emulator" else final.text
    assert text == ("failed" if kind == "error" else "hi")


@pytest.mark.parametrize("path", PATHS)
def test_a_content_and_artifact_tool_that_returns_no_pair_fails_its_call(path: str) -> None:
    """LangChain refuses a ``content_and_artifact`` tool's value that is not a (content,
    artifact) pair, so the agent's tool node fails the call: it fails on every path."""

    def broken() -> Any:
        return "oops"

    tool = StructuredTool.from_function(
        broken, name="broken", description="Broken.", response_format="content_and_artifact"
    )
    plan = 'CALL broken\nJC failed\nPOP R1\nSAY "{R1}"\nHLT\nfailed:\nSAY "failed"'
    final = _run_on(path, [tool], plan, {})
    assert (final.answer if path == "Emulator" else final.text) == "failed"


@pytest.mark.parametrize("path", PATHS)
def test_two_answers_to_one_call_fail_it_and_a_list_of_strings_reads_as_json(path: str) -> None:
    """As the tool node: a result holding two messages that answer one call fails the call;
    a message whose content is a list of strings (no blocks) reads as that list's JSON."""
    from langchain_core.messages import ToolMessage

    def twice(cid: Annotated[str, InjectedToolCallId] = "") -> Any:
        return [ToolMessage("first", tool_call_id=cid), ToolMessage("second", tool_call_id=cid)]

    def strings(cid: Annotated[str, InjectedToolCallId] = "") -> Any:
        return ToolMessage(["a", "b"], tool_call_id=cid)

    plan = 'CALL {}\nJC failed\nPOP R1\nSAY "{{R1}}"\nHLT\nfailed:\nSAY "failed"'
    for func, said in ((twice, "failed"), (strings, '["a","b"]')):
        made = StructuredTool.from_function(func, name=func.__name__, description="A.")
        final = _run_on(path, [made], plan.format(func.__name__), {})
        assert (final.answer if path == "Emulator" else final.text) == said


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_a_middleware_that_fills_an_empty_result_decides_what_the_plan_reads(
    execution: str,
) -> None:
    """An empty result a middleware replaces ("No results found.") is a correction: the plan
    reads the message, as for any other result (only a reviewer's notice is no result)."""

    @tool
    def search(query: str) -> str:
        """Search."""
        return ""

    plan = asm('PUSH "x"\nCALL search\nPOP R1\nSAY "result=[{R1}]"')
    middleware = [Correcting({"": "No results found."})]
    if execution == "agent":
        agent_middleware = [ToolsPlannerMiddleware(), *middleware]
    else:
        agent_middleware = [ToolsPlannerMiddleware(execution="graph", tool_middleware=middleware)]
    out = create_agent(
        ScriptedChatModel(replies=[plan]), tools=[search], middleware=agent_middleware
    ).invoke({"messages": [HumanMessage("search")]})
    assert out["messages"][-1].text == "result=[No results found.]"


@pytest.mark.parametrize("path", PATHS)
def test_one_command_carrying_two_answers_to_a_call_reads_the_first_on_every_path(
    path: str,
) -> None:
    """The tool node takes one ``Command`` holding two messages that answer the call (a list
    of two it refuses): every path reads the first."""
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command

    def twice(cid: Annotated[str, InjectedToolCallId] = "") -> Any:
        said = [ToolMessage("first", tool_call_id=cid), ToolMessage("second", tool_call_id=cid)]
        return Command(update={"messages": said})

    made = StructuredTool.from_function(twice, name="twice", description="Twice.")
    final = _run_on(path, [made], 'CALL twice\nPOP R1\nSAY "{R1}"', {})
    assert (final.answer if path == "Emulator" else final.text) == "first"
