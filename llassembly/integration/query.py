"""Asking the query model: what a query sends, the model call itself, and a whole query with
its one retry where a plan graph runs it.

A query's request holds the library's own instructions and the question about the text
(:func:`query_request`), nothing of the plan's tools, system prompt or conversation. The model
is called with no tools bound: through its native structured output where its profile says it
has one (:func:`llassembly.compat.structured_model`), else as plain text. Its runs are tagged
:data:`QUERY_TAG` (``metadata["llassembly"] == "query"``, and the query's call id under
``"llassembly_call"``), so a ``stream_mode="messages"`` stream shows each query as a model call
of its own. What the reply gives is decided by :func:`llassembly.machine.query.settle`:

* on the agent path the turn's step decides, in a visit of the model node of their own the
  queries of one batch (:class:`~llassembly.integration.events.AskQuery` / ``Queried``); the
  driver calls :func:`ask_all` / :func:`aask_all`;
* in a plan graph (the planner nodes, the middleware's ``execution="graph"``) the query runs as
  the plan's call (:func:`run_query` / :func:`arun_query`, which give a :class:`QueryAnswer`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from llassembly.compat import structured_model, tagged_model
from llassembly.errors import QueryFailed, failure_of
from llassembly.integration.record import KEY, QueryDue
from llassembly.language.program import Value
from llassembly.machine.emulator import adrive, drive
from llassembly.machine.query import (
    NOT_PARSED,
    QUERY_INSTRUCTIONS,
    QUERY_TOOL,
    Refusal,
    Reply,
    answer_shape,
    question_text,
    retry_text,
    settle,
)
from llassembly.machine.state import ToolCall

__all__ = [
    "QUERY_CALL_KEY",
    "QUERY_TAG",
    "QueryAnswer",
    "QueryRequest",
    "aask",
    "aask_all",
    "arun_query",
    "ask",
    "ask_all",
    "query_request",
    "query_runner",
    "run_query",
    "settled_due",
]

QUERY_TAG: Final = "llassembly:query"
"""The tag (and ``metadata["llassembly"] == "query"``) of every query model call."""
QUERY_CALL_KEY: Final = f"{KEY}_call"
"""In a query model call's metadata: the query's call id (its messages carry the same)."""


@dataclass(frozen=True)
class QueryRequest:
    """What one attempt of a query sends its model.

    Attributes:
        messages: The query's instructions, the question about the text, then each refused
            answer with why it was refused.
        schema: The JSON schema of the reply (``{"value": ...}``, the value of the shape).
        call_id: The query's call id (``prefix + call number``).
        line: Its line in the plan.
        source: Its instruction.
    """

    messages: list[BaseMessage]
    schema: dict[str, Any]
    call_id: str
    line: int = 0
    source: str = ""


def query_request(
    args: Mapping[str, Any],
    refused: Sequence[Refusal],
    call_id: str,
    line: int = 0,
    source: str = "",
) -> QueryRequest:
    """The request of a query's next attempt (``refused``: the answers refused so far)."""
    shape = answer_shape(args)
    text, question = str(args.get("text", "")), str(args.get("question", ""))
    messages: list[BaseMessage] = [
        SystemMessage(QUERY_INSTRUCTIONS),
        HumanMessage(question_text(text, question, shape)),
    ]
    for refusal in refused:
        again = retry_text(refusal["problem"], shape)
        messages += [AIMessage(refusal["answer"]), HumanMessage(again)]
    schema = {
        "title": "answer",
        "type": "object",
        "properties": {"value": shape.schema()},
        "required": ["value"],
        "additionalProperties": False,
    }
    return QueryRequest(messages, schema, call_id, line, source)


def _asking(model: Any, request: QueryRequest) -> Generator[Any, Any, Reply]:
    """One attempt, sans-IO: yields the runnable to invoke with the request's messages."""
    structured = structured_model(model, request.schema)
    metadata = {KEY: "query", QUERY_CALL_KEY: request.call_id}
    runnable = tagged_model(structured if structured is not None else model, QUERY_TAG, metadata)
    try:
        output = yield runnable
    except Exception as exc:  # the model's failure is the query's (interrupts pass: see drive)
        return Reply(error=f"{type(exc).__name__}: {exc}")
    if structured is None:
        return Reply(text=_text(output))
    raw, parsed = output.get("raw"), output.get("parsed")
    return Reply(text=_text(raw), parsed=NOT_PARSED if parsed is None else parsed)


def _text(message: Any) -> str:
    return message.text if isinstance(message, BaseMessage) else str(message or "")


def ask(model: Any, request: QueryRequest, config: RunnableConfig | None = None) -> Reply:
    """One attempt of a query: ``model`` called with no tools (see the module doc)."""
    return drive(_asking(model, request), lambda runs: runs.invoke(request.messages, config))


async def aask(model: Any, request: QueryRequest, config: RunnableConfig | None = None) -> Reply:
    """Async :func:`ask`."""

    async def invoke(runnable: Any) -> Any:
        return await runnable.ainvoke(request.messages, config)

    return await adrive(_asking(model, request), invoke)


def ask_all(
    model: Any, requests: Sequence[QueryRequest], config: RunnableConfig | None = None
) -> tuple[Reply, ...]:
    """One attempt of each query of a batch, at once (on threads; one runs on the caller's
    thread), the replies in the order asked."""
    if len(requests) == 1:
        return (ask(model, requests[0], config),)
    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, ask, model, request, config)
            for request in requests
        ]
        return tuple(future.result() for future in futures)


async def aask_all(
    model: Any, requests: Sequence[QueryRequest], config: RunnableConfig | None = None
) -> tuple[Reply, ...]:
    """Async :func:`ask_all` (the attempts awaited together)."""
    return tuple(await asyncio.gather(*(aask(model, request, config) for request in requests)))


# -- a batch of queries, where the turn asks them (agent path) ------------------------------------


def settled_due(call: ToolCall, due: QueryDue, reply: Reply) -> QueryDue:
    """A query of the turn's batch after its model's ``reply``: its value, the answers refused
    so far (to ask again), or its failure."""
    try:
        outcome = settle(call.args, reply, due["refused"], line=call.line, source=call.source)
    except QueryFailed as error:
        return QueryDue(call=due["call"], refused=due["refused"], failure=failure_of(error))
    if isinstance(outcome, list):  # refused: asked once more, with why
        return QueryDue(call=due["call"], refused=outcome)
    return QueryDue(call=due["call"], refused=due["refused"], value=outcome)


# -- a whole query, where a plan graph runs it as a call -------------------------------------------


@dataclass(frozen=True)
class QueryAnswer:
    """A query's answer as a plan graph's call gives it: the value, and the model calls it
    took (recorded in its ``ToolMessage``, so the turn counts them, resumed or not)."""

    value: Value
    attempts: int


def _query(call: ToolCall, call_id: str) -> Generator[QueryRequest, Reply, QueryAnswer]:
    refused: list[Refusal] = []
    while True:
        reply = yield query_request(call.args, refused, call_id, call.line, call.source)
        outcome = settle(call.args, reply, refused, line=call.line, source=call.source)
        if not isinstance(outcome, list):
            return QueryAnswer(outcome, len(refused) + 1)
        refused = outcome


def run_query(
    model: Any, call: ToolCall, call_id: str, config: RunnableConfig | None = None
) -> QueryAnswer:
    """A query to its end: asked, and asked once more after an answer that cannot be used.

    Raises:
        QueryFailed: No usable answer, or the model raised.
    """
    return drive(_query(call, call_id), lambda request: ask(model, request, config))


async def arun_query(
    model: Any, call: ToolCall, call_id: str, config: RunnableConfig | None = None
) -> QueryAnswer:
    """Async :func:`run_query`."""

    async def attempt(request: QueryRequest) -> Reply:
        return await aask(model, request, config)

    return await adrive(_query(call, call_id), attempt)


def query_runner(model: Any) -> Callable[[ToolCall], Value]:
    """Answers a plan's ``CALL query_text`` with ``model``, for a machine you run yourself
    (``Emulator.run(call)``, with ``query_text`` among its tools: ``QUERY_EXTERN``).

    Example:
        >>> answer = query_runner(model)  # doctest: +SKIP
        >>> run = lambda c: answer(c) if c.tool == "query_text" else run_tool(c)  # doctest: +SKIP
        >>> emulator.run(run)  # doctest: +SKIP
    """

    def answer(call: ToolCall) -> Value:
        return run_query(model, call, f"{QUERY_TOOL}_{call.number}").value

    return answer
