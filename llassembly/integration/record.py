"""The typed records of a planner turn: its state, a failure, a call the plan waits on.

Everything here is plain data (``TypedDict``s of strings, numbers, lists and dicts), so a turn is
checkpointed by any LangGraph saver and continues in another process. The one turn state machine
(:mod:`llassembly.integration.turn`) reads and writes :class:`TurnRecord`; the agent path keeps it
in the agent's private state under :data:`KEY`, the planner nodes' turn graph in its own state.
"""

# No ``from __future__ import annotations``: the TypedDicts read ``NotRequired`` at run time.
from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypeAlias, cast

from typing_extensions import TypedDict

from llassembly.errors import CallNotRun, Failure, RepairsExhausted
from llassembly.language.program import Value
from llassembly.machine.state import ToolCall

KEY: Final = "llassembly"
"""The one key the library writes into other people's records: the agent state's private
planner record, the ``response_metadata`` of the messages a turn adds, the custom stream
events and the artifact of a failed call."""

NOT_APPROVED: Final = "PlanNotApproved"
"""The ``type`` of the failure of a plan a reviewer rejected (nothing of it ran)."""
CALL_REFUSED: Final = CallNotRun.__name__
"""The ``type`` of the failure of a call that was not run because a person or a middleware
decided so (a reviewer rejected it, a limit refused it): a decision, not an error."""
NOTHING_RAN: Final = (NOT_APPROVED, "RepairsExhausted")
"""Failures after which nothing of the plan ran."""


def tag_of(message: Any) -> Mapping[str, Any]:
    """A message's ``response_metadata["llassembly"]`` (empty when it has none)."""
    tag = message.response_metadata.get(KEY)
    return tag if isinstance(tag, Mapping) else {}


class PendingCall(TypedDict):
    """A call the plan waits on (agent path): its tool-call id and where it is in the plan."""

    id: str
    tool: str
    index: int
    line: int
    source: str
    number: int


def pending_call(call: ToolCall, call_id: str) -> PendingCall:
    """The record of a call the plan makes now, under its tool-call id."""
    where = {key: getattr(call, key) for key in PendingCall.__annotations__ if key != "id"}
    return cast(PendingCall, {"id": call_id, **where})


def call_of(pending: PendingCall, args: Mapping[str, Any]) -> ToolCall:
    """The call a :class:`PendingCall` records, with ``args`` (as the tool node got them)."""
    where: Any = {key: value for key, value in pending.items() if key != "id"}
    return ToolCall(args=dict(args), **where)


class Refusal(TypedDict):
    """A query's answer that could not be used, and why (kept to ask once more)."""

    answer: str
    problem: str


class QueryDue(TypedDict):
    """A query of the batch the plan waits on (agent path): the call, the answers refused so
    far, and once settled its value or why it failed (so a resumed turn never asks again)."""

    call: PendingCall
    refused: list[Refusal]
    value: NotRequired[Value]
    failure: NotRequired[Failure]


def settled(due: QueryDue) -> bool:
    """Whether a query has its value, or has failed."""
    return "value" in due or "failure" in due


class Approval(TypedDict):
    """A plan-approval request and where it stands: ``state`` is ``"awaiting"`` (a person is
    asked) or ``"approved"`` (the turn's current plan runs with a person's approval)."""

    state: Literal["awaiting", "approved"]
    request: NotRequired[dict[str, Any]]


class Draft(TypedDict):
    """A reply the checks refused: its text and its problems (each with line and caret)."""

    draft: str
    problems: list[str]


Status: TypeAlias = Literal["answered", "finished", "stopped", "refused", "rejected"]
"""How a turn ended: the model ``answered`` in words (no plan); a plan ran and ``finished``; a
plan ``stopped`` (a tool failed, a budget ran out, a call was refused); no plan passed the
checks (``refused``: the repairs ran out); a person ``rejected`` the plan."""


class TurnResult(TypedDict):
    """What the message that ends a turn records in ``response_metadata["llassembly"]``,
    after every kind of turn (a plain answer included): what an application acts on.

    Attributes:
        kind: ``"answer"`` (the turn's other messages are ``"plan"``, ``"call"``, ...).
        status: How the turn ended (:data:`Status`).
        model_calls: Model calls the turn made (plans, repairs, queries, the final answer).
        repairs: Replies refused by the checks and repaired.
        replans: New plans after a failure (``on_tool_error="replan"``).
        tool_calls: Tool calls the plans completed.
        instructions: Instructions the plans ran.
        registers: The registers the last plan left (those not zero).
        answer: What the plan said (its ``SAY`` lines), else what its ``RET`` returned, or ``None``.
        returned: The value its top-level ``RET`` returned, or ``None``.
        granularity: The planner's ``granularity``.
        execution: The planner's ``execution``.
        drafts: The replies the checks refused this turn, with their problems.
        error: Why the plan stopped (line, tool, exception type and text, problems...).
        summary: With a final model call (``final_answer="model"``): the text the turn would
            have ended with without it.
    """

    kind: Literal["answer"]
    status: Status
    model_calls: int
    repairs: int
    replans: int
    tool_calls: int
    instructions: int
    registers: dict[str, Any]
    answer: str | None
    returned: Any
    granularity: str
    execution: str
    drafts: list[Draft]
    error: NotRequired[Failure]
    summary: NotRequired[str]


class TurnRecord(TypedDict):
    """The state of one planner turn.

    Attributes:
        phase: Where the turn is (what it waits for: :func:`due`).
        plan: The text of the plan that runs (``None`` before one is accepted).
        plan_number: 1 for the turn's first plan, 2 after a replan...
        prefixes: The tool-call id prefix of each plan of the turn (the current plan's last).
        machine: The machine's snapshot (``None`` before the plan starts).
        pending: The calls the plan waits on, in program order (agent path).
        drafts: The refused drafts of the plan being written, each with its repair request.
        failure: Why the current plan stopped (``None`` while it runs or when it finished).
        model_calls: Model calls made in the turn.
        repairs: Plans fixed after a rejection.
        replans: New plans after a failure.
        executed: Instructions run by the turn's earlier plans.
        tool_calls: Tool calls the turn's plans completed.
        alongside: Of those, the calls of a batch that completed after the call that stopped
            the plan (run at the same time with ``parallel_tools``; their results not used).
        approval: A plan-approval request and where it stands.
        transient: Ids of messages a step added only to show progress (a rejected draft, a
            note that a new plan is asked for); the next step takes them out.
        anchor: Id of the last message the turn added (``None`` once a new run starts,
            which starts a new turn); the agent's loop comes back for the turn's next step
            only while it is the latest.
        raise_failure: Under ``on_tool_error="raise"``: the failure is raised once the
            turn's messages are saved.
        lag: How far the agent's model-call counters are held below the real count.
        queries: The batch of queries the plan waits on (agent path; empty when none).
        rejected: The replies the checks refused this turn, with their problems.
        graph: The options that shape the plan graph the plan runs as (``granularity``,
            ``parallel_tools``), which a resume must have (none: not one).
        sent_back: :attr:`anchor` when the agent was last sent back to the model node for
            the turn's next step (still the anchor: the model node has not run since).
        agent: The name the agent gives its model's messages (``create_agent(name=...)``),
            read off the model's replies: the planner's own messages get it too.
    """

    phase: Literal["idle", "planning", "approval", "running", "answering", "done"]
    plan: str | None
    plan_number: int
    prefixes: list[str]
    machine: dict[str, Any] | None
    pending: list[PendingCall]
    drafts: list[dict[str, str]]
    failure: Failure | None
    model_calls: int
    repairs: int
    replans: int
    executed: int
    tool_calls: int
    alongside: NotRequired[int]
    approval: Approval | None
    transient: list[str]
    anchor: str | None
    raise_failure: bool
    lag: int
    queries: NotRequired[list[QueryDue]]
    rejected: NotRequired[list[Draft]]
    graph: NotRequired[str]
    sent_back: NotRequired[str | None]
    agent: NotRequired[str | None]


def new_record() -> TurnRecord:
    """The record of a turn that has not asked anything yet."""
    return TurnRecord(
        phase="idle",
        plan=None,
        plan_number=0,
        prefixes=[],
        machine=None,
        pending=[],
        drafts=[],
        failure=None,
        model_calls=0,
        repairs=0,
        replans=0,
        executed=0,
        tool_calls=0,
        approval=None,
        transient=[],
        anchor=None,
        raise_failure=False,
        lag=0,
        queries=[],
        rejected=[],
    )


def record_of(state: Any) -> TurnRecord | None:
    """The planner's record in an agent state, or ``None``."""
    record = state.get(KEY) if isinstance(state, Mapping) else None
    return record if isinstance(record, dict) and "phase" in record else None  # type: ignore[return-value]


def prefix_of(record: TurnRecord) -> str:
    """What the tool-call ids of the turn's current plan start with (the last of its plans')."""
    return record["prefixes"][-1]


# -- what is due next ---------------------------------------------------------------------------

Due: TypeAlias = Literal["plan", "answer", "person", "results", "queries", "run", "nothing"]


def due(record: TurnRecord) -> Due:
    """What the turn waits for, read from its phase (the one place that reads it): a model call
    for a ``plan`` or the final ``answer``, a ``person``'s decision, the ``results`` of the
    calls it sent out (agent path), the query model's answers to its ``queries``, the machine
    to ``run`` on (a plan graph to run the plan), or ``nothing`` (the turn is over)."""
    if (phase := record["phase"]) != "running":
        return _WAITS.get(phase, "nothing")
    if record["pending"]:
        return "results"
    return "queries" if any(not settled(q) for q in record.get("queries") or ()) else "run"


_WAITS: Final[dict[str, Due]] = {"planning": "plan", "answering": "answer", "approval": "person"}


# -- failures of a plan that never ran ------------------------------------------------------------


def plan_failure(error: RepairsExhausted) -> Failure:
    """The failure of a turn whose model wrote no valid plan (nothing of it ran)."""
    first = error.diagnostics[0] if error.diagnostics else None
    return Failure(
        type="RepairsExhausted",
        message=str(error),
        detail=error.summary,
        line=first.line if first else 0,
        source=first.source if first else "",
        attempts=error.attempts,
        problems=[d.render() for d in error.diagnostics[:5]],
    )


def rejection_failure(message: str) -> Failure:
    """The failure of a plan a reviewer rejected (nothing of it ran)."""
    text = f"a reviewer rejected the plan: {message.strip() or 'no reason given'}"
    return Failure(type=NOT_APPROVED, message=text, detail=text, line=0, source="")
