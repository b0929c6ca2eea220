"""The demo's default model: it replays hand-written plans, so the demo runs without a server.

Each file in ``llassembly_demo/plans/`` is a plan written by a person (its header says so)
with a ``; order: ...`` line naming the order it answers. :class:`ReplayChatModel` answers a
conversation whose last human message is one of those orders with that file, in an ``asm``
fence, as a real model would. It does not plan anything: give ``llassembly-demo --ollama URL``
a live model to see plans written by a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from llassembly import UsageError

__all__ = ["BundledPlan", "ReplayChatModel", "bundled_plans"]

_ORDER_PREFIX = "; order:"


@dataclass(frozen=True)
class BundledPlan:
    """A hand-written plan file and the order it answers."""

    name: str
    order: str
    text: str


def bundled_plans() -> list[BundledPlan]:
    """The plans shipped in ``llassembly_demo/plans`` (sorted by file name)."""
    folder = resources.files(__package__ or "llassembly_demo").joinpath("plans")
    plans: list[BundledPlan] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".asm"):
            continue
        text = entry.read_text(encoding="utf-8")
        order = next(
            (
                ln[len(_ORDER_PREFIX) :].strip()
                for ln in text.splitlines()
                if ln.startswith(_ORDER_PREFIX)
            ),
            None,
        )
        if order is None:
            raise UsageError(f"bundled plan {entry.name} has no '{_ORDER_PREFIX}' line")
        plans.append(BundledPlan(entry.name, order, text))
    return plans


class ReplayChatModel(BaseChatModel):
    """A chat model that answers each bundled order with its hand-written plan file.

    The replies are not generated: they are the files in ``llassembly_demo/plans/``, written
    by hand, returned for the order they name. An order it does not know is an error (a live
    model is needed for that). Every call is recorded in :attr:`requests`.

    Example:
        >>> model = ReplayChatModel()
        >>> order = bundled_plans()[0].order
        >>> "HAND-WRITTEN" in model.invoke([HumanMessage(order)]).text
        True
    """

    plans: dict[str, str] = Field(
        default_factory=lambda: {p.order: p.text for p in bundled_plans()}
    )
    requests: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "llassembly-replay"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Plans call tools themselves; the replay model ignores the tool list it is given."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        order = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        self.requests.append(order)
        plan = self.plans.get(order.strip())
        if plan is None:
            known = "; ".join(repr(o) for o in self.plans)
            raise UsageError(
                f"the replay model has no plan for the order {order!r}: it only replays the "
                f"bundled hand-written plans ({known}). "
                "Use a live model (--ollama URL --model NAME)"
            )
        reply = AIMessage(content=f"```asm\n{plan.rstrip()}\n```")
        return ChatResult(generations=[ChatGeneration(message=reply)])
