"""Plan approval: one human decision about the whole plan, before its first call.

With ``approve_plan`` the planner pauses (``interrupt()``) once a plan is checked, before anything
runs; see ``docs/approval.md`` for the request and the decisions. :func:`unless_plan_approved`
keeps ``HumanInTheLoopMiddleware`` from asking again about the calls of an approved plan.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from langchain_core.messages import HumanMessage

from llassembly.errors import UsageError
from llassembly.integration.record import record_of

if TYPE_CHECKING:
    from llassembly.analysis.summary import PlanSummary
    from llassembly.language.program import Program


APPROVAL_DECISIONS: Final = ("approve", "edit", "reject")
"""The decisions a plan-approval request allows."""


def approval_option(value: bool | Sequence[str]) -> bool | tuple[str, ...]:
    """The ``approve_plan`` option as ``PlannerOptions`` keeps it.

    Raises:
        UsageError: A single string was given instead of a list of tool names.
    """
    if isinstance(value, str):
        raise UsageError(f"approve_plan takes True, False or a list of tool names, not {value!r}")
    return value if isinstance(value, bool) else tuple(value)


def approval_request(
    approve_plan: bool | tuple[str, ...], plan: str, summary: PlanSummary
) -> dict[str, Any] | None:
    """The interrupt value asking a person to approve a plan (JSON-serialisable; its keys are
    in ``docs/approval.md``), or ``None`` when ``approve_plan`` does not ask for it (``True``:
    a plan that calls any tool)."""
    named = approve_plan is True or any(summary.tool(n) is not None for n in approve_plan or ())
    if not (named and summary.tools):
        return None
    return {
        "type": "plan_approval",
        "plan": plan,
        "summary": summary.to_dict(),
        "description": summary.render(),
        "allowed_decisions": list(APPROVAL_DECISIONS),
        "problems": [],
    }


def read_decision(value: Any) -> dict[str, Any]:
    """Check a resume value and return the decision (``{"decisions": [d]}`` is taken too).

    Raises:
        UsageError: The value is not one of the allowed decisions.
    """
    if isinstance(value, Mapping) and "type" not in value and "decisions" in value:
        decisions = value["decisions"]
        if isinstance(decisions, list) and len(decisions) == 1:
            value = decisions[0]
    if not isinstance(value, Mapping) or value.get("type") not in APPROVAL_DECISIONS:
        raise UsageError(
            "a plan approval is answered with Command(resume={'type': 'approve'}), "
            "{'type': 'edit', 'plan': '...'} or {'type': 'reject', 'message': '...'}; "
            f"got {value!r}"
        )
    decision = dict(value)
    if decision["type"] == "edit" and not isinstance(decision.get("plan"), str):
        raise UsageError("an 'edit' plan-approval decision needs the new plan text as 'plan'")
    if decision["type"] == "reject" and not isinstance(decision.get("message", ""), str):
        raise UsageError("the 'message' of a 'reject' decision must be text")
    return decision


def plan_code(program: Program) -> str:
    """The lines of a plan the parser read, without a reviewer's prose and fences: the plan
    that runs after an edit, whose lines a failure's line counts, as :func:`edit_note` shows."""
    return "\n".join(program.source_of(line) for line in program.code_lines)


def edit_note(code: str) -> HumanMessage:
    """The message recording that a reviewer replaced the plan (shown to later models): its
    code (:func:`plan_code`) in one fenced block, its fence longer than any run of backticks
    inside."""
    fence = "`" * max(3, 1 + max(map(len, re.findall("`+", code)), default=0))
    return HumanMessage(
        "A reviewer replaced the plan before it ran; this plan runs instead:\n"
        f"{fence}asm\n{code}\n{fence}",
        name="plan_reviewer",
    )


# -- HumanInTheLoopMiddleware: no second question for an approved plan's calls ------------------


def plan_call_approved(request: Any) -> bool:
    """Whether a tool-call request is a call of the running plan that a person approved.

    ``request`` is the ``ToolCallRequest`` ``HumanInTheLoopMiddleware`` gives its ``when``
    predicates (in both its modes it carries the agent state).
    """
    record = record_of(getattr(request, "state", None))
    if record is None or record["approval"] is None or record["approval"]["state"] != "approved":
        return False
    call_id = (getattr(request, "tool_call", None) or {}).get("id")
    return bool(call_id) and any(p["id"] == call_id for p in record["pending"])


def unless_plan_approved(interrupt_on: Mapping[str, Any]) -> dict[str, Any]:
    """A ``HumanInTheLoopMiddleware(interrupt_on=...)`` mapping that asks about a tool call
    as before, except for the calls of a plan a person has already approved.

    Each entry keeps its decisions and description; its ``when`` predicate (if any) still
    decides for every other call. ``True`` becomes all of LangChain's decisions.

    Example:
        >>> from langchain.agents.middleware import HumanInTheLoopMiddleware
        >>> hitl = HumanInTheLoopMiddleware(
        ...     interrupt_on=unless_plan_approved({"send_email": True})
        ... )
    """
    out: dict[str, Any] = {}
    for name, config in interrupt_on.items():
        if config is True:
            config = {"allowed_decisions": ["approve", "edit", "reject", "respond"]}
        if config is not False and not isinstance(config, Mapping):
            raise UsageError(f"interrupt_on[{name!r}] must be True, False or a config dict")
        out[name] = config and {**config, "when": _skipping(config.get("when"))}
    return out


def _skipping(inner: Callable[[Any], bool] | None) -> Callable[[Any], bool]:
    def when(request: Any) -> bool:
        return not plan_call_approved(request) and (inner is None or bool(inner(request)))

    return when
