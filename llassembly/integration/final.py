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
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage

from llassembly.errors import UsageError
from llassembly.integration.record import NOTHING_RAN
from llassembly.integration.views import planner_view
from llassembly.machine.say import final_answer_of

__all__ = [
    "AnswerRequest",
    "Answered",
    "answer_messages",
    "answer_request",
    "answered",
    "needs_model",
    "structured_from_text",
]


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
    if failure and (raising or failure.get("type") in NOTHING_RAN):
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
    conversation: Sequence[BaseMessage],
    turn: Sequence[BaseMessage],
    summary: Mapping[str, Any],
    structured: bool = False,
) -> AnswerRequest:
    """The final answer request: the conversation (with this turn's plans), then one message
    listing this turn's calls and results and asking for the reply.

    Args:
        conversation: The messages before and during the turn (no system message).
        turn: This turn's call messages (they are shown as text, in the last message).
        summary: The turn's record (``machine``, ``failure``).
        structured: The reply is a structured response (the agent's ``response_format``):
            the request asks for it rather than for words.
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
    said = final_answer_of(summary.get("machine"))
    if said:
        lines.append(f"The program's own answer:\n{said}")
    if structured:
        lines.append(
            "Now reply to the user's last message from these results, in the structured "
            "format you are asked for. Write no program."
        )
    else:
        lines.append(
            "Now reply to the user's last message from these results, in words. Write no "
            "program and call no tool."
        )
    return AnswerRequest([*planner_view(kept), HumanMessage("\n\n".join(lines))])


def _is_call(message: BaseMessage, turn: Sequence[BaseMessage]) -> bool:
    """A call message of this turn given again as another object (same id)."""
    if not message.id:
        return False
    return any(m.id == message.id for m in turn if isinstance(m, AIMessage | ToolMessage))
