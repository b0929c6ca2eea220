"""Plan policies: rules a plan must follow before it may run, checked on its summary.

A policy is any callable ``(summary, program) -> problems`` (strings, or
:class:`~llassembly.errors.Diagnostic` to point at a line; none when the plan is fine), given
to the planner as ``plan_policy=[...]``: a plan with problems is refused before anything runs
and goes back to the model as a repair request, like one the verifier refuses. How to write
one: "Policies" in ``docs/approval.md``; the data-flow policies (:func:`only_from`,
:func:`never_from`), checked again by the machine before each call: ``docs/dataflow.md``.

Example:
    >>> from llassembly import ToolsPlannerMiddleware
    >>> from llassembly import max_calls, not_in_loop
    >>> planner = ToolsPlannerMiddleware(
    ...     plan_policy=[max_calls({"send_email": 3}), not_in_loop("delete_file")]
    ... )
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llassembly.analysis.summary import CallSite, PlanSummary, ToolUse
from llassembly.errors import Diagnostic, UsageError, plural
from llassembly.language.program import Program, param_names

PlanPolicy = Callable[[PlanSummary, Program], Iterable[str | Diagnostic]]
"""A rule: ``(summary, program) -> problems`` (strings or diagnostics; none when fine)."""


def check_names(
    subject: str,
    tools: Mapping[str, Any],
    names: Iterable[str] = (),
    arguments: Iterable[tuple[str, str]] = (),
) -> None:
    """Refuse a rule or option (``subject``) that names a tool ``tools`` lack, or an argument
    (``(tool, argument)``) its tool does not take, since a misspelt name would switch it off
    without a word: a ``UsageError`` offers a name differing only in case, or the closest."""
    for _, problem in name_problems(subject, tools, names, arguments):
        raise UsageError(problem)


def name_problems(
    subject: str,
    tools: Mapping[str, Any],
    names: Iterable[str] = (),
    arguments: Iterable[tuple[str, str]] = (),
    lacking: str = "is not among the tools",
) -> Iterator[tuple[bool, str]]:
    """Each name of :func:`check_names`'s that ``tools`` lack, as ``(sure, message)``: ``sure``
    for an argument (of a tool ``tools`` have) and for a tool whose name one of them has but
    for case, unlike a tool they are only ``lacking``."""
    wanted = itertools.chain(
        (("tool", name, list(tools), "") for name in names),
        (("argument", a, param_names(tools[t]), t) for t, a in arguments if t in tools),
    )
    for kind, name, known, of in wanted:
        if name in known:
            continue
        same = [k for k in known if k.lower() == name.lower()]
        close = same or difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        missing, listed = (f"{of} does not take", "its arguments") if of else (lacking, _LISTED)
        where, shown = f" of {of}" if of else "", ", ".join(sorted(known)[:20]) or "none"
        said = f"{subject} names the {kind} {name!r}{where}, which {missing}{hint}"
        yield bool(of or same), f"{said} ({listed}: {shown})"


_LISTED = "tool names match exactly; the tools"


def _site_policy(
    label: str,
    names: tuple[str, ...],
    refusals: Callable[[str, ToolUse], Iterable[tuple[CallSite, str]]],
) -> PlanPolicy:
    """A policy (called ``label`` in messages): ``refusals(name, use)`` gives each call site
    of tool ``name`` it refuses, with why (the planner checks ``tool_names`` against its
    tools)."""

    def policy(summary: PlanSummary, program: Program) -> list[str | Diagnostic]:
        return [
            _at_call(program, site.line, message)
            for name in names
            if (use := summary.tool(name)) is not None
            for site, message in refusals(name, use)
        ]

    policy.tool_names = names  # type: ignore[attr-defined]
    policy.__qualname__ = label
    return policy


def max_calls(limits: Mapping[str, int]) -> PlanPolicy:
    """A policy: tool ``name`` may be called at most ``limits[name]`` times on any path.

    A call in a loop of unknown trip count can run any number of times, so it goes over every limit.

    Raises:
        UsageError: A limit is not a non-negative integer.
    """
    for name, limit in limits.items():
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise UsageError(f"max_calls: the limit for {name!r} must be an integer >= 0")
    wanted = dict(limits)

    def over(name: str, use: ToolUse) -> Iterable[tuple[CallSite, str]]:
        limit, most = wanted[name], use.max_calls
        if most is None or most > limit:
            loop = "an unknown number of times (a CALL in a loop)"
            how = loop if most is None else f"up to {most} times"
            message = (
                f"{name} may be called at most {plural(limit, 'time')} per "
                f"plan, but this plan can call it {how}; call it fewer times, outside loops"
            )
            yield use.sites[0], message

    return _site_policy(f"max_calls({wanted!r})", tuple(wanted), over)


def not_in_loop(*tools: str) -> PlanPolicy:
    """A policy: these tools may not be called inside a loop.

    Raises:
        UsageError: No tool name was given.
    """
    if not tools:
        raise UsageError("not_in_loop needs at least one tool name")

    def looped(name: str, use: ToolUse) -> list[tuple[CallSite, str]]:
        message = (
            f"{name} must not be called inside a loop; call it once, after the loop, with what "
            "the loop found"
        )
        return [(site, message) for site in use.sites if site.in_loop]

    return _site_policy(f"not_in_loop{tools!r}", tuple(tools), looped)


def _at_call(program: Program, line: int, message: str) -> Diagnostic:
    """A problem of the ``CALL`` on ``line``, the caret under its mnemonic."""
    column = next((ins.column for ins in program.instructions if ins.line == line), 1)
    return Diagnostic(line, column, message, program.source_of(line))


def check_policies(
    policies: Sequence[PlanPolicy], summary: PlanSummary, program: Program
) -> tuple[Diagnostic, ...]:
    """Every problem the policies find, as diagnostics (a string points at no line: line 0)."""
    return tuple(
        found if isinstance(found, Diagnostic) else Diagnostic(0, 0, f"plan policy: {found}")
        for policy in policies
        for found in policy(summary, program)
    )


# -- data-flow policies --------------------------------------------------------------------------


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True)
class DataFlowPolicy:
    """Which tools' results one argument of one tool may come from (see :func:`only_from` and
    :func:`never_from`, which build it).

    It is a plan policy (give it in ``plan_policy``): called with a plan's summary it refuses a
    call whose argument comes from a forbidden result on *every* run that makes the call. The
    machine checks the rest before each call runs, on the sources the values really carry.

    Attributes:
        tool: The tool whose argument it guards.
        argument: The argument (a parameter of ``tool``).
        sources: The tools it names.
        allow: ``True``: the argument may come only from these tools' results (and from values
            written in the plan); ``False``: never from these tools' results.
    """

    tool: str
    argument: str
    sources: tuple[str, ...]
    allow: bool

    def __str__(self) -> str:
        maker = "only_from" if self.allow else "never_from"
        return f"{maker}({self.tool!r}, {self.argument!r}, {list(self.sources)!r})"

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Every tool it names (checked against the planner's tools)."""
        return (self.tool, *(s for s in self.sources if s != self.tool))

    @property
    def tool_arguments(self) -> tuple[tuple[str, str], ...]:
        """The ``(tool, argument)`` it guards (checked against the tool's parameters)."""
        return ((self.tool, self.argument),)

    def refused(self, sources: Iterable[str]) -> tuple[str, ...]:
        """The tools among ``sources`` (those a value derives from) that it refuses, sorted:
        those it lists when it forbids them, those it does not list when it allows them."""
        return tuple(sorted(s for s in set(sources) if (s in self.sources) is not self.allow))

    def rule(self) -> str:
        """What it asks, as a clause: ``"lets it come only from list_contacts or from values
        written in the plan"``."""
        if not self.allow:
            return f"forbids it to come from {_names(self.sources)}"
        if not self.sources:
            return "lets it come only from values written in the plan"
        return f"lets it come only from {_names(self.sources)} or from values written in the plan"

    def __call__(self, summary: PlanSummary, program: Program) -> list[str | Diagnostic]:
        """The calls whose argument comes from a refused result on every run (see
        :class:`~llassembly.analysis.summary.Argument`)."""
        use = summary.tool(self.tool)
        return [
            _at_call(program, site.line, self._refusal(bad))
            for site in (use.sites if use else ())
            for argument in site.arguments
            if argument.name == self.argument and (bad := self.refused(argument.certain))
        ]

    def _refusal(self, bad: Sequence[str]) -> str:
        fix = (
            f"take {self.argument} from {_names(self.sources)} or write it in the plan"
            if self.allow and self.sources
            else f"do not pass what {_names(bad)} returned as {self.argument}"
        )
        return (
            f"{self.tool}'s argument {self.argument!r} comes from the result of {_names(bad)} "
            f"on every run that reaches this call, and a data-flow policy {self.rule()}: {fix}"
        )


def _policy(tool: str, argument: str, sources: Iterable[str], allow: bool) -> DataFlowPolicy:
    maker = "only_from" if allow else "never_from"
    if not isinstance(tool, str) or not tool or not isinstance(argument, str) or not argument:
        raise UsageError(
            f"{maker} takes a tool name and an argument name, got {tool!r}, {argument!r}"
        )
    if isinstance(sources, str):
        raise UsageError(f"{maker} takes a list of tool names, not the string {sources!r}")
    names = tuple(dict.fromkeys(sources))
    if not all(isinstance(n, str) and n for n in names):
        raise UsageError(f"{maker}: the sources must be tool names, got {names!r}")
    if not allow and not names:
        raise UsageError("never_from needs at least one tool whose results are forbidden")
    return DataFlowPolicy(tool, argument, names, allow)


def only_from(tool: str, argument: str, sources: Iterable[str] = ()) -> DataFlowPolicy:
    """A data-flow policy: ``tool``'s ``argument`` may come only from the results of the tools in
    ``sources``, or from values written in the plan (literals, data labels, and anything
    computed from them alone).

    A value passed through another tool comes from that tool: an allow-list holds whatever the
    tools in between do. Give it in ``plan_policy``; the tool and argument names are checked
    against the planner's tools when it is built.

    Example:
        >>> rule = only_from("send_email", "to", ["list_contacts"])
        >>> rule.refused({"list_contacts"}), rule.refused({"list_contacts", "read_inbox"})
        ((), ('read_inbox',))

    Raises:
        UsageError: A name is not a non-empty string, or ``sources`` is a single string.
    """
    return _policy(tool, argument, sources, allow=True)


def never_from(tool: str, argument: str, sources: Iterable[str]) -> DataFlowPolicy:
    """A data-flow policy: ``tool``'s ``argument`` may never come from the results of the tools
    in ``sources``.

    A deny-list: a value passed through a tool not listed comes from that tool, so list every
    tool whose results may carry the data (or use :func:`only_from`).

    Example:
        >>> rule = never_from("transfer", "account", ["read_email"])
        >>> rule.refused({"read_email", "list_payees"}), rule.refused(set())
        (('read_email',), ())

    Raises:
        UsageError: A name is not a non-empty string, or no source is given.
    """
    return _policy(tool, argument, sources, allow=False)


def dataflow_policies(policies: Iterable[object]) -> tuple[DataFlowPolicy, ...]:
    """The data-flow policies among plan policies (what the machine checks at run time)."""
    return tuple(p for p in policies if isinstance(p, DataFlowPolicy))
