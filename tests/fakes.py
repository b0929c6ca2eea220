"""Test doubles: a scripted chat model and tools that record their calls.

The scripted model's replies are written by hand in the tests (they are not recordings of a
real model); tests that replay real model traffic use cassettes instead.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
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


# -- docs/models.md: providers' chat model classes, stood in for ------------------------------

_WARMER = """```asm
    PUSH "Paris"
    CALL get_temperature
    POP R1
    PUSH "Oslo"
    CALL get_temperature
    POP R2
    CMP R1, R2
    JG paris
    SAY "Oslo is warmer: {R2} °C."
    HLT
paris:
    SAY "Paris is warmer: {R1} °C."
```"""
_TEXT_ME = """```asm
    PUSH "Oslo"
    CALL get_temperature
    POP R1
    CMP R1, 10
    JGE done
    PUSH "Oslo is below 10 °C"
    CALL {tool}
    POP R2
done:
    SAY "Oslo: {{R1}} °C."
```"""
MODELS_PAGE_REPLIES: dict[str, list[str]] = {
    "How warm is it in Paris and Oslo?": [
        """```asm
    PUSH "Paris"
    CALL get_temperature
    POP R1
    PUSH "Oslo"
    CALL get_temperature
    POP R2
    SAY "Paris: {R1} °C, Oslo: {R2} °C."
```"""
    ],
    "Which is warmer today, Paris or Oslo?": [
        '{"name": "get_temperature", "arguments": {"city": "Paris"}}',
        _WARMER,
    ],
    "Text me if Oslo is below 10 °C.": [
        _TEXT_ME.format(tool="send_sms"),
        _TEXT_ME.format(tool="notify"),
        _TEXT_ME.format(tool="notify"),
    ],
}
"""The stand-ins' replies on docs/models.md, by order: each written by hand (none is a model's
output). An order gets its replies in turn, per model object: a good plan; a JSON tool call,
then a plan; a plan that calls a tool it does not have, then twice one that pops the result of
a tool that returns nothing."""


class ProviderStandIn(BaseChatModel):
    """A provider's chat model class as docs/models.md uses it, with no network and no key.

    It takes ``model`` and the other constructor arguments its real class documents
    (``ACCEPTS``; any other is a ``TypeError``, so the page cannot show an argument the real
    class lacks) and answers each order (a request's first human message) with the replies
    :data:`MODELS_PAGE_REPLIES` holds for it, in turn. It has no ``bind_tools``: the planner
    never binds tools.
    """

    ACCEPTS: ClassVar[frozenset[str]] = frozenset()
    model: str
    settings: dict[str, Any] = Field(default_factory=dict)
    asked: dict[str, int] = Field(default_factory=dict)

    def __init__(self, *, model: str, **settings: Any) -> None:
        unknown = sorted(set(settings) - self.ACCEPTS)
        if unknown:
            raise TypeError(f"{type(self).__name__} takes no argument {unknown[0]!r}")
        super().__init__(model=model, settings=settings)

    @property
    def _llm_type(self) -> str:
        return f"stand-in for {type(self).__name__}"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        order = next(m.text for m in messages if isinstance(m, HumanMessage))
        key = next((k for k in MODELS_PAGE_REPLIES if k in order), None)
        if key is None:
            raise AssertionError(f"no reply scripted for {order[:80]!r}")
        asked = self.asked.get(key, 0)
        if asked >= len(MODELS_PAGE_REPLIES[key]):
            raise AssertionError(f"{key!r} asked {asked + 1} times; fewer replies scripted")
        self.asked[key] = asked + 1
        message = AIMessage(content=MODELS_PAGE_REPLIES[key][asked])
        return ChatResult(generations=[ChatGeneration(message=message)])


class ChatOpenAI(ProviderStandIn):
    # langchain-openai's reference: "Key init args"
    ACCEPTS = frozenset(
        {"temperature", "max_tokens", "timeout", "max_retries", "api_key", "base_url"}
        | {"organization", "logprobs", "stream_options", "use_responses_api"}
    )


class ChatAnthropic(ProviderStandIn):
    # langchain-anthropic's reference: the class's example and properties
    ACCEPTS = frozenset(
        {"temperature", "max_tokens", "timeout", "max_retries", "base_url", "top_k", "top_p"}
        | {"stop_sequences", "default_headers", "model_kwargs", "streaming"}
    )


class ChatOllama(ProviderStandIn):
    # fields of langchain-ollama 1.1's ChatOllama
    ACCEPTS = frozenset(
        {"base_url", "num_ctx", "num_predict", "temperature", "reasoning", "keep_alive", "seed"}
        | {"validate_model_on_init", "client_kwargs"}
    )


@contextmanager
def provider_stand_ins() -> Iterator[None]:
    """``langchain_openai``, ``langchain_anthropic`` and ``langchain_ollama`` hold the
    stand-ins while the context lasts; then the modules that were there (a real one, or none)
    are put back. ``init_chat_model`` keeps the provider classes it imported: that cache is
    emptied on the way in and out, so it keeps neither a stand-in nor a real class across."""
    from langchain.chat_models import base

    names = {
        "langchain_openai": ChatOpenAI,
        "langchain_anthropic": ChatAnthropic,
        "langchain_ollama": ChatOllama,
    }
    before = {name: sys.modules.get(name) for name in names}
    forget = getattr(base, "_get_chat_model_creator", None)
    for name, cls in names.items():
        module = types.ModuleType(name, "A stand-in (tests/fakes.py), not the provider's package.")
        setattr(module, cls.__name__, cls)
        sys.modules[name] = module
    if forget is not None:
        forget.cache_clear()
    try:
        yield
    finally:
        for name, module in before.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if forget is not None:
            forget.cache_clear()
