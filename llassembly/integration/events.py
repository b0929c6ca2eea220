"""What the turn state machine (:mod:`llassembly.integration.turn`) takes and gives.

Events (what happened): :class:`Begin`, :class:`Proceed`, :class:`Replied`, :class:`Decided`,
:class:`Returned`, :class:`Queried`, :class:`PlanRan`, :class:`Answered`. Actions (what its
driver does next): :class:`AskModel`, :class:`AskAnswer`, :class:`AskPerson`,
:class:`AskQuery`, :class:`RunCalls`, :class:`RunPlan`, :class:`Finish`. A :class:`Step` is
the new record, the messages the turn adds now, and the action; a :class:`TurnView` what a
step may read besides the record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage

from llassembly.errors import ExecutionError
from llassembly.integration.final import Answered, AnswerRequest
from llassembly.integration.planner import Planner
from llassembly.integration.query import QueryRequest
from llassembly.integration.record import Failure, TurnRecord
from llassembly.machine.emulator import ToolCall
from llassembly.machine.externs import Extern
from llassembly.machine.query import Reply

__all__ = [
    "Action",
    "Answered",
    "AskAnswer",
    "AskModel",
    "AskPerson",
    "AskQuery",
    "Begin",
    "Decided",
    "Event",
    "Finish",
    "PlanRan",
    "Proceed",
    "Queried",
    "Replied",
    "Returned",
    "RunCalls",
    "RunPlan",
    "Step",
    "TurnView",
]

# -- events ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Begin:
    """A new turn starts (nothing of an earlier turn is carried on)."""


@dataclass(frozen=True)
class Proceed:
    """Do what the record says is due (a model call the last step could not make itself)."""


@dataclass(frozen=True)
class Replied:
    """The model answered a planning request (a plan, a repair or a new plan)."""

    reply: AIMessage


@dataclass(frozen=True)
class Decided:
    """A person answered the plan-approval request (a checked decision, see
    :func:`~llassembly.integration.approval.read_decision`)."""

    decision: Mapping[str, Any]


@dataclass(frozen=True)
class Returned:
    """The outcomes of the calls the plan waits on, in program order: what the tool returned
    (read by :meth:`~llassembly.machine.externs.Extern.to_values`) or :class:`Failed`."""

    outcomes: Sequence[Any]


@dataclass(frozen=True)
class Queried:
    """The query model answered the queries it was asked, one reply each in the order asked
    (a reply whose model raised says so: ``reply.error``)."""

    replies: tuple[Reply, ...]


@dataclass(frozen=True)
class PlanRan:
    """A plan graph ran the plan to its end, or to its failure (``error`` is the live
    exception, for a driver that raises it)."""

    machine: dict[str, Any]
    failure: Failure | None
    messages: Sequence[AnyMessage] = ()
    error: ExecutionError | None = None


Event: TypeAlias = Begin | Proceed | Replied | Decided | Returned | Queried | PlanRan | Answered

# -- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AskModel:
    """Ask the planner model: the conversation (as :func:`planner_view` shows it), then
    ``extra``; the reply comes back as :class:`Replied`."""

    extra: list[BaseMessage]


@dataclass(frozen=True)
class AskAnswer:
    """The final model call (``final_answer="model"``, or a structured response the plan's
    answer did not give); its result comes back as :class:`Answered`."""

    messages: AnswerRequest


@dataclass(frozen=True)
class AskPerson:
    """Pause for a person's decision on the plan; it comes back as :class:`Decided`."""

    request: dict[str, Any]


@dataclass(frozen=True)
class AskQuery:
    """Ask the query model, with no tools, the plan's queries (agent path), all at once: each
    request holds all its model call may see; the replies come back as :class:`Queried`."""

    requests: tuple[QueryRequest, ...]


@dataclass(frozen=True)
class RunCalls:
    """Run these calls (agent path): ``message`` carries them as tool calls; their outcomes
    come back as :class:`Returned`."""

    calls: list[ToolCall]
    message: AIMessage


@dataclass(frozen=True)
class RunPlan:
    """Run ``plan`` as a plan graph, its calls' ids starting with ``prefix``; it comes back as
    :class:`PlanRan`."""

    plan: str
    prefix: str


@dataclass(frozen=True)
class Finish:
    """The turn is over. ``raise_failure`` is the failure to raise (``on_tool_error="raise"``)
    once the messages are saved; ``structured`` the agent's structured response."""

    structured: Any = None
    raise_failure: Failure | None = None


Action: TypeAlias = AskModel | AskAnswer | AskPerson | AskQuery | RunCalls | RunPlan | Finish


@dataclass
class Step:
    """What :func:`step` decided: the new record, the messages the turn adds now, the action."""

    record: TurnRecord
    action: Action
    messages: list[AnyMessage] = field(default_factory=list)


@dataclass(frozen=True)
class TurnView:
    """What a step may read besides the record (given by its driver, never stored).

    Attributes:
        planner: The planner's options and caches.
        externs: The tools plans may call.
        messages: The conversation as the driver has it now (the turn's own messages so far
            included; system messages are left out where a model is asked).
        graph: Plans run as plan graphs (:class:`RunPlan`) instead of call by call.
        response_format: The agent's ``response_format`` (``None`` without one).
        answer_in_turn: The final model call is made by the turn (always, but on the agent
            path with no response format... see :func:`needs_model`).
    """

    planner: Planner
    externs: Mapping[str, Extern]
    messages: Sequence[BaseMessage] = ()
    graph: bool = False
    response_format: Any = None
