"""A planner's options and what it keeps between turns: adapted tools, prompts, checked plans.

One :class:`Planner` per ``ToolsPlannerMiddleware`` / planner node / :func:`~llassembly.plan`
call. It checks a model's reply the one way every path does (parse, verify with its size
limit, policies, tool names in the options) and caches what a plan costs to build: its
compiled program, its summary, its plan graph. Everything cached is bounded and keyed by the
very objects it was built for, so agents built per request with new tools do not grow it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from langchain_core.tools import BaseTool, StructuredTool

from llassembly.analysis.policies import check_policies, dataflow_policies
from llassembly.analysis.summary import PlanSummary, summarize
from llassembly.analysis.toolset import given_tools
from llassembly.compat import direct_function, recording_tool
from llassembly.errors import PlanRejected, UsageError
from llassembly.integration.approval import approval_request
from llassembly.integration.graph import PlanGraph
from llassembly.integration.options import PlannerOptions, check_tool_names, run_budgets
from llassembly.integration.prompt import build_system_prompt
from llassembly.integration.query import add_query
from llassembly.language.parser import parse
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import Extern, ToolSpec, externs_from
from llassembly.machine.steps import CompiledProgram, compile_program

_CACHE_SIZE = 256
_K = TypeVar("_K")
_V = TypeVar("_V")


class Lru(OrderedDict[_K, tuple[Any, _V]]):
    """A dict that keeps its newest :data:`_CACHE_SIZE` entries, each beside the ``owner`` of
    the objects its key names by id (kept alive: no id in a kept key is ever another's). One
    planner serves every thread: two may build one value; neither fails on the other's drop."""

    def cached(self, key: _K, owner: Any, build: Callable[[], _V]) -> _V:
        """The value kept under ``key``, else ``build()``, kept beside ``owner``."""
        if (found := self.get(key)) is not None:
            with contextlib.suppress(KeyError):  # (another thread may have just dropped it)
                self.move_to_end(key)
            return found[1]
        value = build()
        self[key] = (owner, value)
        if len(self) > _CACHE_SIZE:
            with contextlib.suppress(KeyError):
                self.popitem(last=False)
        return value


class Planner:
    """The options of one planner (``options``, kept as given) and its caches."""

    def __init__(self, options: PlannerOptions) -> None:
        self.options = options
        # What a run of a plan takes from the options: its budgets, the calls run together.
        self._run = {**run_budgets(options), "parallel_tools": options.parallel_tools}
        self._externs: Lru[tuple[Any, ...], dict[str, Extern]] = Lru()
        self._compiled: Lru[tuple[Any, ...], CompiledProgram] = Lru()
        self._summaries: Lru[tuple[Any, ...], PlanSummary] = Lru()
        self._prompts: Lru[tuple[int, str], str] = Lru()
        self._graphs: Lru[tuple[Any, ...], PlanGraph] = Lru()
        self._live: Lru[int, Emulator] = Lru()
        self._single: Lru[int, Extern | None] = Lru()
        self._recording: Lru[int, BaseTool] = Lru()
        self._direct: Lru[tuple[int, bool], Callable[..., Any] | None] = Lru()

    # -- tools ------------------------------------------------------------------------------

    def externs_for(self, tools: ToolSpec, *, offered: bool = False) -> dict[str, Extern]:
        """The tools as plans call them, adapted once per distinct list or mapping (same
        objects; see :data:`~llassembly.machine.externs.ToolSpec`). ``offered``: they are
        those of one model request (see :func:`~.options.check_tool_names`).

        Raises:
            UsageError: ``tools`` is no list or mapping of tools (a ``TypeError`` too), a tool
                cannot be adapted, or an option names a tool that is not among them.
        """
        given = given_tools(tools)
        key: tuple[Any, ...] = (
            offered,
            *(
                ((name, id(tool)) for name, tool in given.items())
                if isinstance(given, Mapping)
                else map(id, given)
            ),
        )
        return self._externs.cached(key, given, lambda: self._adapted(given, offered))

    def _adapted(self, given: Any, offered: bool) -> dict[str, Extern]:
        externs = externs_from(given)
        if self.options.execution == "graph":  # a plan graph runs each call as a tool
            externs = {name: _as_tool(extern) for name, extern in externs.items()}
        if self.options.queries:
            add_query(externs, "queries=True")
        check_tool_names(self.options, externs, offered=offered)
        return externs

    def system_prompt(self, externs: Mapping[str, Extern], context: str) -> str:
        """The planner's system prompt for these tools and the caller's context (cached)."""
        build = functools.partial(build_system_prompt, externs, context, self.options.prompt_path)
        return self._prompts.cached((id(externs), context), externs, build)

    # -- plans ------------------------------------------------------------------------------

    def check(self, text: str, externs: Mapping[str, Extern]) -> Program | PlainAnswer:
        """Parse, verify and check a reply against the policies.

        Raises:
            PlanError: The reply is no valid plan (the problems name their lines).
        """
        parsed = parse(text)
        if isinstance(parsed, Program):
            self.compiled(text, externs, parsed)  # verifies: size first, then every check
            policy = self.options.plan_policy
            if policy and (problems := check_policies(policy, self.summary(text, externs), parsed)):
                raise PlanRejected(problems)
        return parsed

    def compiled(
        self, text: str, externs: Mapping[str, Extern], program: Program | None = None
    ) -> CompiledProgram:
        """The verified, compiled program of ``text`` (a plan is compiled once).

        Raises:
            PlanRejected: It does not verify with these tools.
            UsageError: ``text`` holds no program.
        """

        def build() -> CompiledProgram:
            parsed = parse(text) if program is None else program
            if not isinstance(parsed, Program):
                raise UsageError("the stored plan is no longer a program")
            return compile_program(
                parsed,
                externs,
                max_stack_depth=self.options.max_stack_depth,
                dataflow=tuple(  # checked as the plan runs; of the tools it may call
                    dataclasses.replace(p, sources=tuple(s for s in p.sources if s in externs))
                    for p in dataflow_policies(self.options.plan_policy)
                    if p.tool in externs
                ),
            )

        key = (text, id(externs), self.options.max_stack_depth)
        return self._compiled.cached(key, externs, build)

    def emulator(
        self, text: str, externs: Mapping[str, Extern], state: Mapping[str, Any] | None
    ) -> Emulator:
        """The machine of a verified plan under this planner's budgets, from ``state`` (a
        snapshot) or from its start: the live machine :meth:`keep` kept when ``state`` is the
        very snapshot it wrote (the next step of the same run), else restored from it."""
        compiled = self.compiled(text, externs)
        # taken: a step that fails leaves none
        found = None if state is None else self._live.pop(id(state), None)
        if found is not None and found[0] is state and found[1].compiled is compiled:
            return found[1]
        return Emulator(compiled, state=state, **self._run_with(externs))

    def keep(self, emulator: Emulator) -> dict[str, Any]:
        """The snapshot of ``emulator``, the machine kept for the step that goes on from it
        (see :meth:`emulator`)."""
        snapshot = emulator.snapshot()
        self._live.cached(id(snapshot), snapshot, lambda: emulator)
        return snapshot

    def summary(self, text: str, externs: Mapping[str, Extern]) -> PlanSummary:
        """The summary of a verified plan against this planner's budgets (built once)."""
        program = self.compiled(text, externs).program
        build = functools.partial(summarize, program, externs, **run_budgets(self.options))
        return self._summaries.cached((text, id(externs)), externs, build)

    def plan_graph(self, text: str, externs: Mapping[str, Extern]) -> PlanGraph:
        """The plan graph of a verified plan, at this planner's granularity (built once)."""
        return self._graphs.cached(
            (text, id(externs)),
            externs,
            lambda: PlanGraph(
                self.compiled(text, externs), self.options.granularity, **self._run_with(externs)
            ),
        )

    def _run_with(self, externs: Mapping[str, Extern]) -> dict[str, Any]:
        """What a run of a plan calling ``externs`` takes from the options: its budgets, and
        ``parallel_tools`` among ``externs`` (a model request may offer fewer tools than it
        names: see :func:`~.options.check_tool_names`)."""
        named = self.options.parallel_tools
        if not isinstance(named, tuple) or all(n in externs for n in named):
            return self._run
        return {**self._run, "parallel_tools": tuple(n for n in named if n in externs)}

    def recording_tool_of(self, tool: BaseTool) -> BaseTool:
        """The copy of an agent's tool that notes its return value (built once per tool; see
        :func:`llassembly.compat.recording_tool`)."""
        return self._recording.cached(id(tool), tool, lambda: recording_tool(tool))

    def direct_of(self, tool: BaseTool, asynchronous: bool) -> Callable[..., Any] | None:
        """The function of ``tool`` to call directly (built once per tool; see
        :func:`llassembly.compat.direct_function`), or ``None``."""
        build = functools.partial(direct_function, tool, asynchronous=asynchronous)
        return self._direct.cached((id(tool), asynchronous), tool, build)

    def extern_of(self, tool: Any) -> Extern | None:
        """The extern of one of the agent's tools (for reading its results), or ``None`` when
        it cannot be adapted."""

        def build() -> Extern | None:
            try:
                return next(iter(externs_from([tool]).values()))
            except UsageError:
                return None

        return self._single.cached(id(tool), tool, build)

    def approval(self, text: str, externs: Mapping[str, Extern]) -> dict[str, Any] | None:
        """The approval request for a verified plan, or ``None`` when it needs none."""
        approve = self.options.approve_plan
        return approval_request(approve, text, self.summary(text, externs)) if approve else None


def _as_tool(extern: Extern) -> Extern:
    """``extern`` with the LangChain tool a plain function becomes (as ``create_agent`` makes
    one of a function), so that its calls take the one tool path."""
    func = extern.func
    if func is None or extern.tool is not None or extern.query:
        return extern
    asynchronous = extern.async_only
    tool = StructuredTool.from_function(
        func=None if asynchronous else func,
        coroutine=func if asynchronous else None,
        name=extern.name,
        description=extern.description or extern.name,
    )
    return dataclasses.replace(extern, tool=tool, func=None)
