"""How a turn ends: with the plan's own answer, or with one more model call.

``final_answer="plan"`` (the default) ends the turn with the text the plan said (``SAY``), or
with a summary of its calls when it said nothing. ``final_answer="model"`` asks the model once
more after the plan, like a joiner: the conversation, then the calls and results as text (no
tool-call blocks, no tools offered), and its reply becomes the final message.

``response_format`` (``create_agent``): the plan's answer fills ``structured_response`` when it
is JSON that validates into the schema; otherwise (or under ``final_answer="model"``) the final
model call carries the agent's ``response_format``, so the agent's own strategy
(``ToolStrategy``, ``ProviderStrategy``) produces and validates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig

from llassembly.errors import UsageError
from llassembly.integration.messages import (
    NOT_APPROVED,
    final_message,
    planner_view,
)
from llassembly.integration.node import Node
from llassembly.machine.say import answer_of

__all__ = [
    "AnswerRequest",
    "Answered",
    "answer_messages",
    "answer_node",
    "answer_request",
    "answered",
    "awaited_answer",
    "final_answer_messages",
    "graph_path_ending",
    "needs_model",
    "plan_call_messages",
    "structured_from_text",
    "turn_summary",
]

_NO_CALL_FAILURES = (NOT_APPROVED, "RepairsExhausted")  # nothing of the plan ran


class AnswerRequest(list[BaseMessage]):
    """The conversation for the final answer call (a list, marked so a driver knows that this
    request keeps the agent's own system prompt and ``response_format``)."""


@dataclass
class Answered:
    """What the final answer call gave: its messages (the reply last but for a
    ``ToolStrategy`` result's ``ToolMessage``) and the structured response, if any."""

    messages: list[AnyMessage]
    structured: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def reply(self) -> AIMessage:
        """The model's reply."""
        return next(m for m in reversed(self.messages) if isinstance(m, AIMessage))


def answer_request(request: ModelRequest[Any], messages: AnswerRequest) -> ModelRequest[Any]:
    """The final answer call inside ``create_agent``: the agent's own system prompt and
    ``response_format``, the calls shown as text, no tools."""
    return request.override(
        messages=cast("list[AnyMessage]", list(messages)), tools=[], tool_choice=None
    )


def answered(response: Any) -> Answered:
    """An :class:`Answered` from what a model handler returned (``ModelResponse``,
    ``ExtendedModelResponse`` or an ``AIMessage``)."""
    if isinstance(response, AIMessage):
        return Answered([response])
    inner = getattr(response, "model_response", response)
    messages = list(getattr(inner, "result", []))
    if not any(isinstance(m, AIMessage) for m in messages):
        raise UsageError(f"the model handler returned no AIMessage ({type(response).__name__})")
    return Answered(messages, getattr(inner, "structured_response", None))


def needs_model(
    final_answer: str,
    failure: Mapping[str, Any] | None,
    raising: bool,
    response_format: Any,
    structured: Any,
) -> bool:
    """Whether the turn ends with a model call: asked for (``final_answer="model"``), or the
    agent wants a structured response the plan's answer did not give. Never when nothing of
    the plan ran (rejected, no valid plan) or when its failure is raised."""
    if failure and (raising or failure.get("type") in _NO_CALL_FAILURES):
        return False
    if final_answer == "model":
        return True
    return response_format is not None and structured is None and not failure


def structured_from_text(response_format: Any, text: str | None) -> Any:
    """The plan's answer validated into the agent's ``response_format``, or ``None``.

    The answer must be JSON of the schema (any of them, for a union ``ToolStrategy``); it is
    parsed and validated by LangChain's own binding for the schema.
    """
    if response_format is None or not text or text.lstrip()[:1] not in "{[":
        return None
    from langchain.agents.structured_output import (
        ProviderStrategy,
        ProviderStrategyBinding,
        ToolStrategy,
    )

    if isinstance(response_format, ProviderStrategy):
        specs = [response_format.schema_spec]
    elif isinstance(response_format, ToolStrategy):
        specs = list(response_format.schema_specs)
    else:  # AutoStrategy or a bare schema
        specs = ToolStrategy(getattr(response_format, "schema", response_format)).schema_specs
    for spec in specs:
        try:
            return ProviderStrategyBinding.from_schema_spec(spec).parse(AIMessage(content=text))
        except Exception:
            continue
    return None


def answer_messages(
    conversation: Sequence[BaseMessage], turn: Sequence[BaseMessage], summary: Mapping[str, Any]
) -> AnswerRequest:
    """The final answer request: the conversation (with this turn's plans), then one message
    listing this turn's calls and results and asking for the reply.

    Args:
        conversation: The messages before and during the turn (no system message).
        turn: This turn's call messages (they are shown as text, in the last message).
        summary: The turn's record (``machine``, ``failure``).
    """
    calls = {id(m) for m in turn}
    kept = [m for m in conversation if id(m) not in calls and not _is_call(m, turn)]
    lines: list[str] = []
    for message in planner_view(list(turn)):
        if isinstance(message, HumanMessage):
            lines.append(message.text)
    if not lines:
        lines.append("The program called no tool.")
    failure = summary.get("failure")
    if failure:
        lines.append(
            f"The program stopped at line {failure.get('line', 0)} "
            f"({failure.get('source', '')}): {failure.get('detail') or failure.get('message')}."
        )
    said = answer_of(summary.get("machine"))
    if said:
        lines.append(f"The program's own answer:\n{said}")
    lines.append(
        "Now reply to the user's last message from these results, in words. Write no program "
        "and call no tool."
    )
    return AnswerRequest([*planner_view(kept), HumanMessage("\n\n".join(lines))])


def _is_call(message: BaseMessage, turn: Sequence[BaseMessage]) -> bool:
    """A call message of this turn given again as another object (same id)."""
    if not message.id:
        return False
    return any(m.id == message.id for m in turn if isinstance(m, AIMessage | ToolMessage))


# -- the graph path (planner nodes) -----------------------------------------------------------


def answer_node(turn_key: str) -> Node:
    """``final_answer="model"`` (the planner nodes): one more model call, the reply ends the
    turn. (The middleware makes this call through the agent's model handler instead.)"""

    def request(state: Mapping[str, Any]) -> list[BaseMessage]:
        new = state.get("new_messages", [])
        calls = [m for m in new if "llassembly" in m.response_metadata]
        return answer_messages([*state.get("conversation", []), *new], calls, state)

    def system(run: Any) -> list[BaseMessage]:
        return [SystemMessage(run.context)] if run.context else []

    def update(state: Mapping[str, Any], reply: AIMessage) -> dict[str, Any]:
        return {"final_reply": reply, "model_calls": state.get("model_calls", 0) + 1}

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        run = config["configurable"][turn_key]
        if run.call_model is None:
            raise UsageError("this planner has no synchronous model; use the async entry point")
        return update(state, run.call_model([*system(run), *request(state)]))

    async def asynchronous(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        run = config["configurable"][turn_key]
        if run.acall_model is None:
            raise UsageError("this planner has no async model")
        return update(state, await run.acall_model([*system(run), *request(state)]))

    return Node(sync, asynchronous)


# -- the graph path (middleware) --------------------------------------------------------------

_SUMMARY_KEYS = (
    "machine",
    "failure",
    "model_calls",
    "repairs",
    "replans",
    "tool_calls",
    "executed",
)


def graph_path_ending(
    update: dict[str, Any],
    record: dict[str, Any],
    final: Mapping[str, Any],
    options: Any,
    response_format: Any,
    state: Mapping[str, Any],
) -> dict[str, Any]:
    """``after_model``'s ``update`` for a plan that ended: with the structured response from
    the plan's answer, or, when the model must answer, without the final message and jumping
    back to the model node: the middleware then makes that call through the agent's model
    handler (the request waits in the planner's ``record`` as ``answer``)."""
    failure = final.get("failure")
    said = answer_of(final.get("machine"))
    structured = None if failure else structured_from_text(response_format, said)
    raising = options.on_tool_error == "raise"
    if not needs_model(options.final_answer, failure, raising, response_format, structured):
        if structured is not None:
            update["structured_response"] = structured
        return update
    new = list(final.get("new_messages", []))
    calls = [m for m in new if "llassembly" in m.response_metadata]
    asked = answer_messages([*_conversation(state.get("messages", [])), *new], calls, final)
    summary = {key: final.get(key) for key in _SUMMARY_KEYS}
    record["answer"] = {"messages": list(asked), "summary": summary}
    return {**update, "messages": update["messages"][:-1], "jump_to": "model"}


def awaited_answer(state: Any, key: str) -> AnswerRequest | None:
    """The final answer request ``after_model`` left in the planner's record, or ``None``."""
    record = state.get(key) if isinstance(state, Mapping) else None
    asked = record.get("answer") if isinstance(record, Mapping) else None
    return AnswerRequest(asked["messages"]) if isinstance(asked, Mapping) else None


def final_answer_messages(
    state: Any, key: str, result: Answered, options: Any
) -> tuple[list[BaseMessage], dict[str, Any]]:
    """After the final answer call: the messages that end the turn (the reply, with the
    turn's record in its metadata, and any message the agent's strategy added after it), and
    the planner's record without the request."""
    record = dict(state.get(key) or {}) if isinstance(state, Mapping) else {}
    summary = dict(record.pop("answer")["summary"])
    summary.update(final_reply=result.reply, model_calls=summary.get("model_calls", 0) + 1)
    final = final_message(summary, options)
    return [final if m is result.reply else m for m in result.messages], record


# -- the agent path ---------------------------------------------------------------------------


def _conversation(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


def plan_call_messages(
    messages: Sequence[AnyMessage], prefixes: tuple[str, ...]
) -> list[AnyMessage]:
    """The call ``AIMessage``/``ToolMessage`` pairs the turn's plans added (agent path: the
    call ids start with a plan's prefix)."""
    if not prefixes:
        return []
    found: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            ours = message.tool_call_id.startswith(prefixes)
        elif isinstance(message, AIMessage) and message.tool_calls:
            ours = all((c.get("id") or "").startswith(prefixes) for c in message.tool_calls)
        else:
            ours = False
        if ours:
            found.append(message)
    return found


def turn_summary(
    rec: Mapping[str, Any], out: Sequence[AnyMessage], state_messages: Sequence[AnyMessage]
) -> dict[str, Any]:
    """What the final message reports (the shape the graph path's turn state has)."""
    return {
        "machine": rec.get("machine"),
        "failure": rec.get("failure"),
        "model_calls": rec["model_calls"],
        "repairs": rec["repairs"],
        "replans": rec["replans"],
        "tool_calls": rec["tool_calls"],
        "executed": rec["executed"],
        "new_messages": [*plan_call_messages(state_messages, tuple(rec["prefixes"])), *out],
    }
