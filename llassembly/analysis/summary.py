"""Plan summary: what a plan may do, worked out from its control flow before any tool runs.

Per tool, the fewest and most calls, the arguments that are the same constant on every run,
whether a call sits in a loop or behind a condition, the tools whose results each argument can
come from, and the worst-case counts against the budgets ("What a plan can do" in
``docs/approval.md``). The counts come from the paths (:mod:`llassembly.analysis.paths`), the
constants from running the machine's own steps on what is known
(:mod:`llassembly.analysis.constants`), the flows from :mod:`llassembly.analysis.dataflow`;
control flow the paths cannot follow within their limits makes every maximum unbounded.

Example:
    >>> from llassembly import externs_from
    >>> from llassembly import parse
    >>> def ping(x: int) -> int:
    ...     return x + 1
    >>> plan = parse("MOV R1, 2\\nADD R1, 3\\nPUSH R1\\nCALL ping\\nPOP R1")
    >>> summary = summarize(plan, externs_from([ping]))
    >>> use = summary.tool("ping")
    >>> (use.min_calls, use.max_calls, use.arguments[0].value)
    (1, 1, 5)
"""

from __future__ import annotations

import functools
import json
import unicodedata
from collections.abc import Container, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from llassembly.analysis.cfg import control_flow, layout_of
from llassembly.analysis.constants import UNKNOWN, Abstract, Semantics, constants, join
from llassembly.analysis.dataflow import NO_SOURCES, Flow, argument_flows
from llassembly.analysis.paths import paths_of
from llassembly.analysis.queries import is_query, query_site, site_line
from llassembly.analysis.toolset import tool_shapes
from llassembly.errors import plural
from llassembly.language.limits import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_TOOL_CALLS,
    check_budgets,
)
from llassembly.language.program import NONE, Program, ToolShape, Value, param_names


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of a tool call, by parameter.

    Attributes:
        name: The parameter's name.
        constant: The argument is the same constant on every path reaching the call.
        value: That constant (``None`` when the argument is computed).
        sources: The tools whose results it may derive from on some run, sorted (empty: it
            is made of values written in the plan alone).
        certain: Those it derives from on every run that makes the call.
        answers: The lines of the queries (``CALL query_text``) whose answer may reach it, sorted.
        optional: The tool has a default for it, so ``NONE`` leaves it out: a computed
            argument may be left out on some runs.
    """

    name: str
    constant: bool
    value: Value = None
    sources: tuple[str, ...] = ()
    certain: tuple[str, ...] = ()
    answers: tuple[int, ...] = ()
    optional: bool = False

    def shown(self) -> str:
        """``name="value"``, ``name=<computed>`` (``<computed, or left out: ...>`` when it
        may be ``NONE`` and the tool has a default)."""
        if not self.constant:
            left_out = ", or left out: the tool's default" if self.optional else ""
            return f"{self.name}=<computed{left_out}>"
        if self.value is NONE:  # (a tool with no default for it is given None)
            given = "left out: the tool's default" if self.optional else "None: no value"
            return f"{self.name}=NONE ({given})"
        return f"{self.name}={json.dumps(self.value, ensure_ascii=False)}"


@dataclass(frozen=True, slots=True)
class CallSite:
    """One ``CALL tool`` line that some path reaches.

    Attributes:
        line: Line of the ``CALL`` in the plan text.
        source: The instruction as written.
        arguments: The arguments it passes, one per parameter in order.
        in_loop: The call sits inside a loop (it may run any number of times).
        conditional: Some path ends the plan without running this line.
    """

    line: int
    source: str
    arguments: tuple[Argument, ...]
    in_loop: bool
    conditional: bool


@dataclass(frozen=True, slots=True)
class ToolUse:
    """What a plan may do with one tool.

    Attributes:
        name: The tool's name.
        min_calls: Fewest calls on any path that reaches the end of the plan (a run that
            stops early, because a tool failed or a budget ran out, may make fewer).
        max_calls: Most calls on any path, or ``None`` when a call sits in a loop.
        in_loop: Some call of the tool sits inside a loop.
        conditional: Some path ends the plan without calling the tool.
        arguments: Per parameter, the argument when it is the same constant at every call
            site on every path, else computed.
        sites: Every ``CALL`` of the tool some path reaches, in line order.
        query: It is the built-in query (``query_text``): a model reads a text for the plan.
    """

    name: str
    min_calls: int
    max_calls: int | None
    in_loop: bool
    conditional: bool
    arguments: tuple[Argument, ...]
    sites: tuple[CallSite, ...]
    query: bool = False


@dataclass(frozen=True, slots=True)
class PlanSummary:
    """What a plan may do, known before any tool runs (see :func:`summarize`).

    Attributes:
        tools: One entry per tool some path calls, in order of first call line.
        min_tool_calls: Fewest tool calls on a path that reaches the end of the plan.
        max_tool_calls: Most tool calls on any path (``None``: unbounded).
        max_instructions: Most instructions on any path (``None``: unbounded).
        instruction_budget: The ``max_instructions_to_exec`` budget the run will have.
        tool_call_budget: The ``max_tool_calls`` budget the run will have.
        ends: Some path reaches the end of the plan (otherwise only a budget stops it).
        complete: The analysis followed every path; when false every maximum is ``None``.
        flows_known: The data flows were worked out; when false every computed argument's
            ``sources`` are all the tools the plan calls (the run checks each call anyway).
    """

    tools: tuple[ToolUse, ...]
    min_tool_calls: int
    max_tool_calls: int | None
    max_instructions: int | None
    instruction_budget: int
    tool_call_budget: int
    ends: bool
    complete: bool
    flows_known: bool = True

    def tool(self, name: str) -> ToolUse | None:
        """The use of tool ``name``, or ``None`` when no path calls it."""
        return next((use for use in self.tools if use.name == name), None)

    @property
    def within_budgets(self) -> bool:
        """Every path ends within the instruction and tool-call budgets."""
        return (
            self.max_instructions is not None
            and self.max_instructions <= self.instruction_budget
            and self.max_tool_calls is not None
            and self.max_tool_calls <= self.tool_call_budget
        )

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON-serialisable plain data (``None`` stands for unbounded)."""
        data: dict[str, Any] = json.loads(json.dumps(asdict(self)))  # tuples become lists
        data["budgets"] = {
            "max_instructions_to_exec": data.pop("instruction_budget"),
            "max_tool_calls": data.pop("tool_call_budget"),
        }
        data["within_budgets"] = self.within_budgets
        return data

    def render(self) -> str:
        """The summary as text for a person deciding whether the plan may run."""
        out = ["What this plan can do:"] if self.tools else ["This plan calls no tool."]
        width = max((len(use.name) for use in self.tools), default=0)
        for use in self.tools:
            calls = _calls(use.min_calls, use.max_calls)
            out.append(f"  {use.name:<{width}}  {calls}{_notes(use)}")
            for site in use.sites:
                args = ", ".join(a.shown() for a in site.arguments)
                out.append(f"      line {site.line}: {use.name}({args}){_notes(site)}")
        total = _calls(self.min_tool_calls, self.max_tool_calls)
        out.append(f"Tool calls in all: {total} (budget {self.tool_call_budget})")
        most = self.max_instructions
        instructions = "unbounded" if most is None else f"at most {most}"
        out.append(f"Instructions: {instructions} (budget {self.instruction_budget})")
        if not self.ends:
            out.append("No path reaches the end of the plan: only a budget stops it.")
        elif self.max_instructions is None or self.max_tool_calls is None:
            out.append("A loop has no bound known before the run: the budgets stop it.")
        elif not self.within_budgets:
            out.append("Some paths can go over a budget: the run stops there.")
        if not self.complete:
            out.append("The analysis could not follow every path; maxima are unbounded.")
        return _visible("\n".join(out + _flows(self) + _queries(self)))


def _visible(text: str) -> str:
    """``text`` with the characters that change how text shows, not what it says (a
    right-to-left override, a zero-width space, a line separator, a control character, one
    that shows as nothing), escaped: ``\\u202e``."""
    return "".join(_escaped(c) if _hiding(c) else c for c in text)


def _escaped(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def _hiding(c: str) -> bool:
    if unicodedata.category(c) in ("Cf", "Zl", "Zp", "Cc"):
        return c not in "\n"  # (the summary's own lines)
    return any(low <= ord(c) <= high for low, high in _IGNORABLE)


_IGNORABLE: Final = (  # Unicode's default-ignorable code points that are not of category Cf
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)


def _calls(low: int, high: int | None) -> str:
    top = "unbounded" if high is None else high
    return plural(low, "call") if high == low else f"{low} to {top} calls"


def _flows(summary: PlanSummary) -> list[str]:
    """The data-flow lines of :meth:`PlanSummary.render`: which results reach which
    arguments (none when no argument comes from a result)."""
    if not summary.flows_known:
        return [
            "Data flows: not worked out (the plan is too large to follow); any argument may "
            "come from any result, and each call is checked as the plan runs."
        ]
    lines = [
        f"  line {site.line}: {use.name}.{arg.name} <- "
        + ", ".join(n if n in arg.certain else f"{n} (on some runs)" for n in arg.sources)
        for use in summary.tools
        for site in use.sites
        for arg in site.arguments
        if arg.sources
    ]
    return ["Data flows (the tool results each argument can come from):", *lines] if lines else []


def _queries(summary: PlanSummary) -> list[str]:
    """The query lines of :meth:`PlanSummary.render`: per query, what its model reads and
    which arguments its answer can reach."""
    lines = []
    for use in (u for u in summary.tools if u.query):
        for site in use.sites:
            read = {name for arg in site.arguments for name in arg.sources} - {use.name}
            shown = [f"{name}'s result" for name in sorted(read)]
            answers = sorted({line for arg in site.arguments for line in arg.answers})
            shown += [f"the answer of line {line}" for line in answers]
            reaches = [
                f"{other.name}.{arg.name} (line {there.line})"
                for other in summary.tools
                for there in other.sites
                for arg in there.arguments
                if site.line in arg.answers
            ]
            lines.append(
                f"  line {site.line}: reads {', '.join(shown) or 'text written in the plan'}; "
                f"its answer reaches {', '.join(reaches) or 'no tool call'}"
            )
    return ["Queries (a model with no tools reads a text for the plan):", *lines] if lines else []


def _notes(of: ToolUse | CallSite) -> str:
    notes = [n for n, on in (("in a loop", of.in_loop), ("conditional", of.conditional)) if on]
    return f"  ({', '.join(notes)})" if notes else ""


# -- summarising ----------------------------------------------------------------------------------

_State = tuple[tuple[Abstract, ...], tuple[Flow, ...] | None]  # a CALL's arguments, their flows


def summarize(
    program: Program,
    tools: Mapping[str, ToolShape] | Iterable[ToolShape],
    *,
    max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    semantics: Semantics | None = None,
) -> PlanSummary:
    """Work out what ``program`` may do, without running anything.

    Meant for a plan that verifies (:func:`llassembly.verify`); on any other it still returns,
    with every maximum unbounded where its control flow cannot be followed.

    Args:
        program: The parsed plan.
        tools: The tools the plan may call, by name or as a list (see
            :func:`llassembly.analysis.verifier.check`).
        max_instructions_to_exec: The instruction budget the run will have.
        max_tool_calls: The tool-call budget the run will have.
        semantics: How instructions run on known values (default: the machine's own steps,
            see :func:`llassembly.analysis.constants.install_semantics`).

    Raises:
        UsageError: A budget is not a positive integer.
    """
    check_budgets(max_instructions_to_exec=max_instructions_to_exec, max_tool_calls=max_tool_calls)
    by_name = tool_shapes(tools)
    flow = control_flow(program, by_name)
    paths, layout = paths_of(flow), layout_of(program, by_name)
    stacks = constants(paths, layout, semantics)
    queries = {program.instructions[pc].line for pc, t in flow.tools.items() if is_query(t)}
    flows = argument_flows(paths, layout)
    anything = {tool.name for tool in flow.tools.values()} | {query_site(n) for n in queries}
    by_site: dict[int, list[_State]] = {}  # what a reached tool CALL is given, per state
    for number, (pc, _) in enumerate(paths.states):
        if pc in flow.tools:
            pushed, stack = flow.stack_effect(pc)[0], stacks(number) if stacks else ()
            top = stack[len(stack) - pushed :] if len(stack) >= pushed else (UNKNOWN,) * pushed
            by_site.setdefault(pc, []).append((top, flows(number) if flows else None))
    ends = paths.ends
    always = paths.always(by_site) if ends else frozenset()
    looped = {paths.states[number][0] for number in paths.looped}

    def count(pcs: Container[int]) -> tuple[int, int | None]:
        weight = [int(pc in pcs) for pc, _ in paths.states]
        return paths.fewest(weight) or 0, paths.longest(weight)

    sites: dict[str, list[CallSite]] = {}  # by tool, in order of first call line
    for pc, states in sorted(by_site.items()):
        ins, tool = program.instructions[pc], flow.tools[pc]
        arguments = _arguments(tool, states, anything)
        site = CallSite(ins.line, ins.text, arguments, pc in looped, ends and pc not in always)
        sites.setdefault(tool.name, []).append(site)
    uses = []
    for name, found in sites.items():
        pcs = [pc for pc in by_site if flow.tools[pc].name == name]
        low, high = count(pcs)
        tool = flow.tools[pcs[0]]
        args = _arguments(tool, [state for pc in pcs for state in by_site[pc]], anything)
        in_loop, query = any(s.in_loop for s in found), is_query(tool)
        uses.append(ToolUse(name, low, high, in_loop, ends and not low, args, (*found,), query))
    low_calls, high_calls = count(by_site)
    return PlanSummary(
        tools=tuple(uses),
        min_tool_calls=low_calls,
        max_tool_calls=high_calls,
        max_instructions=paths.longest([1] * len(paths.states)),
        instruction_budget=max_instructions_to_exec,
        tool_call_budget=max_tool_calls,
        ends=ends,
        complete=paths.complete,
        flows_known=flows is not None,
    )


def _arguments(tool: ToolShape, states: list[_State], anything: set[str]) -> tuple[Argument, ...]:
    """The arguments of calls of ``tool`` over ``states``, per parameter: the constant when
    every state passes the same, the sources of any and those certain in each. A state gives
    the values pushed (the rest are left out) and their flows, ``None`` when those are not
    known: a computed argument may then derive from ``anything``."""
    out = []
    for i, (param, name) in enumerate(zip(tool.params, param_names(tool), strict=True)):
        # what each state passes (CALL tool, N: the rest left out), and the flows it knows
        value = functools.reduce(join, [v[i] if i < len(v) else NONE for v, _ in states])
        pairs = [f[i] if f and i < len(f) else (NO_SOURCES, NO_SOURCES) for _, f in states]
        may: set[str] = set().union(*(sources for sources, _ in pairs))
        must = frozenset.intersection(*(certain for _, certain in pairs))
        if value is UNKNOWN and states[0][1] is None:
            may = set(anything)
        answers = {line for name in may if (line := site_line(name)) is not None}
        out.append(
            Argument(
                name,
                value is not UNKNOWN,
                None if value is UNKNOWN else value,  # type: ignore[arg-type]
                tuple(sorted(n for n in may if site_line(n) is None)),
                tuple(sorted(n for n in must if site_line(n) is None)),
                tuple(sorted(answers)),
                bool(getattr(param, "has_default", False)),
            )
        )
    return tuple(out)
