"""Plan policies: rules a plan must follow before it may run, checked on its summary.

A policy is any callable that takes the plan's :class:`~llassembly.summary.PlanSummary` and
its :class:`~llassembly.program.Program` and returns the problems it finds (an empty list when
the plan is fine). A problem is a string, or a :class:`~llassembly.errors.Diagnostic` to point
at a line. Give policies to the planner as ``plan_policy=[...]``: a plan with problems is
refused before anything runs and the problems go back to the model as a repair request
(within ``max_repairs``), exactly like a plan the verifier refuses.

Example:
    >>> from llassembly import ToolsPlannerMiddleware
    >>> from llassembly.policies import max_calls, not_in_loop
    >>> planner = ToolsPlannerMiddleware(
    ...     plan_policy=[max_calls({"send_email": 3}), not_in_loop("delete_file")]
    ... )

Writing one: read the summary (``summary.tool(name)`` gives a tool's fewest and most calls,
whether a call sits in a loop or behind a condition, and its constant arguments per call
site) and return sentences written for the model that will fix the plan::

    def only_our_domain(summary, program):
        use = summary.tool("send_email")
        if use is None:
            return []
        return [
            f"line {site.line}: send_email may only write to @example.com addresses, as a "
            "constant string"
            for site in use.sites
            if not (site.arguments[0].constant and str(site.arguments[0].value).endswith(
                "@example.com"))
        ]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from llassembly.analysis.summary import (
    PlanSummary,
    ToolUse,
)
from llassembly.errors import (
    Diagnostic,
    UsageError,
)
from llassembly.language.program import Program

__all__ = ["PlanPolicy", "check_policies", "max_calls", "not_in_loop"]

PlanPolicy = Callable[[PlanSummary, Program], Iterable[str | Diagnostic]]
"""A rule: ``(summary, program) -> problems`` (strings or diagnostics; none when fine)."""


def _site_diagnostic(program: Program, use: ToolUse, index: int, message: str) -> Diagnostic:
    site = use.sites[index]
    return Diagnostic(site.line, 1, message, program.source_of(site.line))


def max_calls(limits: Mapping[str, int]) -> PlanPolicy:
    """A policy: tool ``name`` may be called at most ``limits[name]`` times on any path.

    A call inside a loop whose trip count is not known can run any number of times, so it
    goes over every limit.

    Raises:
        UsageError: A limit is not a non-negative integer.
    """
    for name, limit in limits.items():
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise UsageError(f"max_calls: the limit for {name!r} must be an integer >= 0")
    wanted = dict(limits)

    def policy(summary: PlanSummary, program: Program) -> list[str | Diagnostic]:
        problems: list[str | Diagnostic] = []
        for name, limit in wanted.items():
            use = summary.tool(name)
            if use is None or (use.max_calls is not None and use.max_calls <= limit):
                continue
            if use.max_calls is None:
                how = "an unknown number of times (a CALL in a loop)"
            else:
                how = f"up to {use.max_calls} times"
            message = (
                f"{name} may be called at most {limit} time{'s' if limit != 1 else ''} per "
                f"plan, but this plan can call it {how}; call it fewer times, outside loops"
            )
            problems.append(_site_diagnostic(program, use, 0, message))
        return problems

    policy.tool_names = tuple(wanted)  # type: ignore[attr-defined]  # checked by the planner
    return policy


def not_in_loop(*tools: str) -> PlanPolicy:
    """A policy: these tools may not be called inside a loop.

    Raises:
        UsageError: No tool name was given.
    """
    if not tools:
        raise UsageError("not_in_loop needs at least one tool name")
    names = tuple(tools)

    def policy(summary: PlanSummary, program: Program) -> list[str | Diagnostic]:
        problems: list[str | Diagnostic] = []
        for name in names:
            use = summary.tool(name)
            if use is None:
                continue
            for index, site in enumerate(use.sites):
                if site.in_loop:
                    message = (
                        f"{name} must not be called inside a loop; call it once, after the "
                        "loop, with what the loop found"
                    )
                    problems.append(_site_diagnostic(program, use, index, message))
        return problems

    policy.tool_names = names  # type: ignore[attr-defined]  # checked by the planner
    return policy


def check_policies(
    policies: Sequence[PlanPolicy], summary: PlanSummary, program: Program
) -> tuple[Diagnostic, ...]:
    """Every problem the policies find, as diagnostics (a string points at no line)."""
    found: list[Diagnostic] = []
    first = program.instructions[0].line if program.instructions else 1
    for policy in policies:
        for problem in policy(summary, program):
            if isinstance(problem, Diagnostic):
                found.append(problem)
            else:
                found.append(Diagnostic(first, 1, f"plan policy: {problem}"))
    return tuple(found)
