"""Shared helpers of the tests (the folders mirror the package: ``language``, ``analysis``,
``machine``, ``integration``, plus ``properties`` for the property-based and fuzz suites and
``end_to_end`` for what a user runs): tools that record their calls, and harnesses that
run one planner turn through ``create_agent`` + ``ToolsPlannerMiddleware`` or through a
``StateGraph(MessagesState)`` with ``ToolsPlannerNode`` / ``AToolsPlannerNode``.

Every model reply in these tests is written by hand (``ScriptedChatModel``); none is a
recording of a real model.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pg_cluster
import psycopg
import pytest
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from psycopg.conninfo import make_conninfo
from pydantic import BaseModel

from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.nodes import (
    AToolsPlannerNode,
    ToolsPlannerNode,
)

TESTS = Path(__file__).resolve().parent
"""The tests' folder: helper modules, scripts run as processes, ``data/``, ``cassettes/``."""
ROOT = TESTS.parent
"""The repository's root."""


def asm(code: str, prose: str = "Here is the plan.") -> str:
    """A hand-written model reply: some prose and ``code`` in one ```asm fence."""
    return f"{prose}\n```asm\n{code.strip()}\n```"


# -- hand-written plans -----------------------------------------------------------------------

WEATHER_PLAN = asm(
    """
PUSH "Paris"
CALL get_temperature
POP R1
CMP R1, 20
JLE cold
PUSH "warm"
CALL notify
cold:
HLT
"""
)

# Three calls of `flaky`: with fail_on={3} the third one raises (line 6 of the reply).
FLAKY_PLAN = asm(
    """
MOV R1, 1
again:
PUSH R1
CALL flaky
POP R2
INC R1
CMP R1, 4
JL again
"""
)

# Three problems the verifier reports together (lines 4, 5 and 6 of the reply).
BAD_PLAN = asm("PUSH 1\nCALL teleport\nFROB R1\nJMP nowhere")

# Ends only after a million rounds: a budget has to stop it. (A loop with no way out at all is
# refused before it runs.)
LOOP_PLAN = asm("MOV R1, 0\nloop:\nPUSH R1\nCALL increment\nPOP R1\nCMP R1, 1000000\nJL loop")


class Point(BaseModel):
    """A pydantic argument: plans pass it as JSON text."""

    x: int
    y: int


@dataclass
class Ctx:
    """The run context given to ``create_agent(context_schema=...)`` / ``StateGraph``."""

    user: str = "nobody"


@dataclass
class Toolbox:
    """LangChain tools that record every call in ``log`` as ``(name, args)``.

    ``seen`` keeps what ``ToolRuntime`` tools observed (context, state, store, tool_call_id).
    ``fail_on`` makes ``flaky`` raise on those call numbers (1-based, counted per tool).
    """

    fail_on: set[int] = field(default_factory=set)
    log: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def _record(self, name: str, **args: Any) -> int:
        self.log.append((name, args))
        self.counts[name] = self.counts.get(name, 0) + 1
        return self.counts[name]

    def names(self) -> list[str]:
        return [name for name, _ in self.log]

    @property
    def sync_tools(self) -> list[BaseTool]:
        box = self

        @tool
        def get_temperature(city: str) -> int:
            """Temperature of a city in degrees Celsius."""
            box._record("get_temperature", city=city)
            return {"Paris": 21, "Oslo": 4}.get(city, 0)

        @tool
        def notify(message: str) -> None:
            """Tell the user something."""
            box._record("notify", message=message)

        @tool
        def increment(x: int) -> int:
            """Return x + 1."""
            box._record("increment", x=x)
            return x + 1

        @tool
        def flaky(x: int) -> int:
            """Return x * 10; fails on some calls."""
            number = box._record("flaky", x=x)
            if number in box.fail_on:
                raise ValueError(f"flaky broke on call {number}")
            return x * 10

        @tool
        def position() -> tuple[int, int]:
            """Where the player stands, as (x, y)."""
            box._record("position")
            return (3, 4)

        @tool
        def go(to: Point) -> str:
            """Walk to a point."""
            box._record("go", to=to.model_dump())
            return f"at {to.x},{to.y}"

        @tool
        def whoami(runtime: ToolRuntime) -> str:
            """Name the current user."""
            box._record("whoami")
            store_item = runtime.store.get(("users",), "me") if runtime.store else None
            state = runtime.state
            messages = state.get("messages", []) if isinstance(state, dict) else []
            box.seen.append(
                {
                    "context": runtime.context,
                    "messages": [m.text for m in messages],
                    "store": store_item.value if store_item else None,
                    "tool_call_id": runtime.tool_call_id,
                }
            )
            user = runtime.context.user if runtime.context is not None else "unknown"
            return user

        return [get_temperature, notify, increment, flaky, position, go, whoami]

    @property
    def async_tools(self) -> list[BaseTool]:
        box = self

        @tool
        async def adouble(x: int) -> int:
            """Return 2 * x (async)."""
            box._record("adouble", x=x)
            return 2 * x

        @tool
        async def awhoami(runtime: ToolRuntime) -> str:
            """Name the current user (async)."""
            box._record("awhoami")
            box.seen.append({"context": runtime.context, "tool_call_id": runtime.tool_call_id})
            return runtime.context.user if runtime.context is not None else "unknown"

        return [adouble, awhoami]


@pytest.fixture
def box() -> Toolbox:
    return Toolbox()


# -- harnesses --------------------------------------------------------------------------------


@dataclass
class Harness:
    """Runs one planner turn through ``kind`` (``"agent"``: ``create_agent`` with the
    middleware; ``"node"``: a ``StateGraph`` with the node), with ``invoke`` or ``ainvoke``.

    The async node (``AToolsPlannerNode``) is used under ``ainvoke``, the sync one under
    ``invoke``. After :meth:`build`, ``model`` is the scripted model and ``runnable`` the
    compiled agent or graph.
    """

    kind: str
    asynchronous: bool
    defaults: dict[str, Any] = field(default_factory=dict)  # planner options of every build
    model: ScriptedChatModel = field(default_factory=lambda: ScriptedChatModel(replies=[]))
    runnable: Any = None

    def build(
        self,
        replies: Sequence[str],
        tools: Sequence[BaseTool],
        *,
        context_schema: type | None = None,
        store: Any = None,
        checkpointer: Any = None,
        middleware: Sequence[Any] = (),
        **options: Any,
    ) -> Harness:
        self.model = ScriptedChatModel(replies=list(replies))
        options = {**self.defaults, **options}
        extra: dict[str, Any] = {"store": store, "checkpointer": checkpointer}
        if self.kind == "agent":
            self.runnable = build_agent(
                self.model,
                tools,
                middleware=middleware,
                agent_kwargs={**extra, "context_schema": context_schema},
                **options,
            )
        else:
            self.runnable = build_graph(
                self.model,
                tools,
                asynchronous=self.asynchronous,
                context_schema=context_schema,
                compile_kwargs=extra,
                **options,
            )
        return self

    async def invoke(self, payload: Any, **kwargs: Any) -> Any:
        return await invoke(self.runnable, payload, asynchronous=self.asynchronous, **kwargs)

    async def run(
        self,
        replies: Sequence[str],
        tools: Sequence[BaseTool],
        messages: Sequence[BaseMessage] | None = None,
        *,
        context: Any = None,
        config: Any = None,
        **build: Any,
    ) -> dict[str, Any]:
        """Build, then run one turn on ``messages`` (default: one HumanMessage)."""
        self.build(replies, tools, **build)
        payload = {"messages": list(messages) if messages else [HumanMessage("Do the task.")]}
        kwargs: dict[str, Any] = {}
        if context is not None:
            kwargs["context"] = context
        if config is not None:
            kwargs["config"] = config
        out: dict[str, Any] = await self.invoke(payload, **kwargs)
        return out


def build_agent(
    model: ScriptedChatModel,
    tools: Sequence[BaseTool],
    *,
    middleware: Sequence[Any] = (),
    agent_kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> Any:
    """``create_agent`` with a ``ToolsPlannerMiddleware(**options)`` (plus ``middleware``)."""
    planner = ToolsPlannerMiddleware(**options)
    return create_agent(
        model, tools=list(tools), middleware=[*middleware, planner], **(agent_kwargs or {})
    )


def build_graph(
    model: ScriptedChatModel,
    tools: Sequence[BaseTool],
    *,
    asynchronous: bool,
    context_schema: type | None = None,
    compile_kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> Any:
    """A ``StateGraph(MessagesState)`` whose only node is the planner."""
    node_type = AToolsPlannerNode if asynchronous else ToolsPlannerNode
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(
        MessagesState, context_schema=context_schema
    )
    builder.add_node("planner", node_type(model, list(tools), **options))
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile(**(compile_kwargs or {}))


async def invoke(runnable: Any, payload: Any, *, asynchronous: bool, **kwargs: Any) -> Any:
    """``runnable.invoke`` or ``await runnable.ainvoke`` with the same arguments."""
    if asynchronous:
        return await runnable.ainvoke(payload, **kwargs)
    return runnable.invoke(payload, **kwargs)


def ask(text: str = "Do the task.") -> dict[str, list[BaseMessage]]:
    return {"messages": [HumanMessage(text)]}


def added(out: dict[str, Any], count_in: int = 1) -> list[AnyMessage]:
    """The messages a turn added (after the ``count_in`` input messages)."""
    messages: list[AnyMessage] = out["messages"]
    return messages[count_in:]


def planned_calls(messages: Sequence[BaseMessage]) -> list[tuple[str, dict[str, Any]]]:
    """``(name, args)`` of every tool call recorded in ``messages``, in order."""
    return [
        (call["name"], call["args"])
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]


def shape(messages: Sequence[BaseMessage]) -> list[tuple[Any, ...]]:
    """Messages without ids: type, content, and tool name/args (for comparisons)."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            out.append(("tool", m.name, m.text, m.status))
        elif isinstance(m, AIMessage):
            calls = [(c["name"], c["args"]) for c in m.tool_calls]
            out.append(("ai", m.text, calls))
        else:
            out.append((m.type, m.text))
    return out


def meta(message: BaseMessage) -> dict[str, Any]:
    """The ``llassembly`` record in a message's ``response_metadata``."""
    record: dict[str, Any] = message.response_metadata["llassembly"]
    return record


# -- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server's connection string: ``LLASSEMBLY_TEST_POSTGRES``, or a throw-away
    cluster started here. Skipped with the reason when none can be started, except in CI
    (``CI=true``), where that is a failure."""
    dsn = os.environ.get(pg_cluster.ENV)
    if dsn:
        yield dsn
        return
    try:
        cluster = pg_cluster.start()
    except pg_cluster.NoPostgres as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the PostgreSQL tests, but none could be started: {e}")
        pytest.skip(f"no PostgreSQL server: {e} (or set {pg_cluster.ENV})")
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


@pytest.fixture
def postgres(postgres_server: str) -> Iterator[str]:
    """The connection string of a new, empty database, dropped after the test."""
    name = f"llassembly_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(postgres_server, dbname=name)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


SLOW_FOLDERS = ("properties",)
"""Folders whose every test is ``slow`` (property-based and fuzz suites)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW_FOLDERS` ``slow``: the README's test command leaves them
    out (``-m "not slow"`` in ``addopts``) and ``.ci/run`` runs them after it (``-m slow``)."""
    for item in items:
        if item.path.parent.name in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
