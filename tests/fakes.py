"""Test doubles: a scripted chat model and tools that record their calls.

The scripted model's replies are written by hand in the tests (they are not recordings of a
real model); tests that replay real model traffic use cassettes instead.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next scripted reply and records what it was sent.

    A reply is text, or an ``AIMessage`` (e.g. one carrying native tool calls). ``kwargs``
    records what each call was bound with (``tools``, a ``response_format``). With
    ``profile={"structured_output": True}`` it answers ``with_structured_output(...,
    method="json_schema")`` as providers do: the schema bound as a response format (no
    tools), its reply's text read as JSON.
    """

    replies: list[str | AIMessage]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] = Field(default_factory=list)
    kwargs: list[dict[str, Any]] = Field(default_factory=list)
    schemas: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound_tools.append(list(tools))
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, method: str = "function_calling", include_raw: bool = False, **_: Any
    ) -> Runnable[Any, Any]:
        if method != "json_schema":
            raise NotImplementedError(f"the scripted model has no {method!r} structured output")
        self.schemas.append(schema)

        def parse(message: AIMessage) -> dict[str, Any]:
            try:
                parsed = json.loads(message.text)
            except ValueError as exc:
                return {"raw": message, "parsed": None, "parsing_error": exc}
            return {"raw": message, "parsed": parsed, "parsing_error": None}

        return self.bind(response_format=schema) | RunnableLambda(parse)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        self.kwargs.append(dict(kwargs))
        if len(self.calls) > len(self.replies):
            raise AssertionError(
                f"model called {len(self.calls)} times; only {len(self.replies)} replies scripted"
            )
        reply = self.replies[len(self.calls) - 1]
        message = reply.model_copy() if isinstance(reply, AIMessage) else AIMessage(content=reply)
        return ChatResult(generations=[ChatGeneration(message=message)])


_LOCK = threading.Lock()


class AnsweringChatModel(BaseChatModel):
    """A query model that answers by the question it is asked, after ``delay`` seconds.

    ``answers`` maps a piece of the question to its replies, one per attempt (queries asked at
    once arrive in any order, so a reply list in call order would not do). It records each
    request and how many ran at the same time (``peak``).
    """

    answers: dict[str, list[str]]
    delay: float = 0.0
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    running: int = 0
    peak: int = 0

    @property
    def _llm_type(self) -> str:
        return "answering"

    def _enter(self, step: int) -> None:
        with _LOCK:
            self.running += step
            self.peak = max(self.peak, self.running)

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls.append(list(messages))
        asked = messages[1].text.splitlines()[0]  # "Question: ..."
        for piece, replies in self.answers.items():
            if piece in asked:
                attempt = sum(1 for m in messages if isinstance(m, AIMessage))
                message = AIMessage(content=replies[attempt])
                return ChatResult(generations=[ChatGeneration(message=message)])
        raise AssertionError(f"no answer scripted for {asked[:80]!r}")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self._enter(1)
        try:
            time.sleep(self.delay)
            return self._reply(messages)
        finally:
            self._enter(-1)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self._enter(1)
        try:
            await asyncio.sleep(self.delay)
            return self._reply(messages)
        finally:
            self._enter(-1)


NPC_PLAN = (Path(__file__).parent / "data" / "npc_plan.md").read_text(encoding="utf-8")
"""The NPC plan from LLAssembly's README, as gpt-oss:20b wrote it for the tools
get_current_position, get_enemies_around, has_sword, pick_sword, attack_enemy and make_one_step:
walk to 5,5 attacking enemies met on the way, then walk to 7,7."""
