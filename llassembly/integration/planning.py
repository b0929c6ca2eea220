"""Get a verified plan from a model now; run it later, or step it from a game loop.

:func:`plan` asks a chat model for one plan with the prompt and the repair loop of the planner
middleware and nodes; nothing runs. :meth:`Plan.emulator` makes a machine that runs it when the
caller wants, all at once or one tool call at a time (a game loop: plan an NPC's order once,
then let it act one call per frame).

Example:
    >>> from langchain_core.language_models import GenericFakeChatModel
    >>> from langchain_core.messages import AIMessage
    >>> def double(x: int) -> int:
    ...     '''Twice x.'''
    ...     return 2 * x
    >>> model = GenericFakeChatModel(messages=iter([AIMessage("PUSH 4\\nCALL double\\nPOP R1")]))
    >>> found = plan(model, [double], "Double 4.")
    >>> emulator = found.emulator()
    >>> call = emulator.advance()            # pure instructions up to the next CALL
    >>> call.tool, call.args
    ('double', {'x': 4})
    >>> emulator.complete(double(**call.args))
    >>> emulator.advance() is None, emulator.result().registers
    (True, {'R1': 8})
"""

from __future__ import annotations

import functools
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from langchain_core.language_models import LanguageModelLike
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from llassembly.analysis.policies import PlanPolicy
from llassembly.analysis.summary import PlanSummary, summarize
from llassembly.errors import UsageError
from llassembly.integration.graph import Granularity, PlanGraph
from llassembly.integration.messages import answered, planner_view, split_system
from llassembly.integration.options import BUDGETS, PlannerOptions, document_options, run_budgets
from llassembly.integration.planner import Planner
from llassembly.integration.turn import AskModel, Begin, Received, TurnView, step
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator, ParallelTools, adrive, drive
from llassembly.machine.externs import Extern, ToolSpec
from llassembly.machine.state import MachineState
from llassembly.machine.steps import CompiledProgram

Request: TypeAlias = str | Sequence[BaseMessage]
"""What the model is asked: a question, or messages (system messages become the prompt's
context, as in the planner nodes; the rest is the conversation)."""


@dataclass(frozen=True, eq=False)
class Plan:
    """A model's verified plan (or its answer in words), ready to run whenever you want.

    Attributes:
        reply: The model's last reply: the plan, or the answer in words.
        compiled: The verified, compiled program; ``None`` when the model answered in words.
        externs: The tools as the plan calls them, by name (``externs[call.tool]`` is the tool
            of a :class:`~llassembly.ToolCall`).
        model_calls: Model calls made: 1, plus one per repair.
        max_instructions_to_exec: Instruction budget of :meth:`emulator` and :meth:`summary`.
        max_tool_calls: Tool-call budget of :meth:`emulator` and :meth:`summary`.
        max_stack_depth: Stack budget the program was compiled for.
    """

    reply: AIMessage
    compiled: CompiledProgram | None
    externs: Mapping[str, Extern]
    model_calls: int
    max_instructions_to_exec: int = PlannerOptions.max_instructions_to_exec
    max_tool_calls: int = PlannerOptions.max_tool_calls
    max_stack_depth: int = PlannerOptions.max_stack_depth

    @property
    def text(self) -> str:
        """The reply's text (the plan as the model wrote it, or its answer)."""
        return self.reply.text

    @property
    def is_program(self) -> bool:
        """Whether the model wrote a plan (``False``: it answered in words)."""
        return self.compiled is not None

    @property
    def program(self) -> Program | None:
        """The parsed plan, or ``None`` when the model answered in words."""
        return None if self.compiled is None else self.compiled.program

    @property
    def parsed(self) -> Program | PlainAnswer:
        """The reply as :func:`~llassembly.parse` reads it: a program or a plain answer."""
        return PlainAnswer(self.text) if self.compiled is None else self.compiled.program

    @property
    def repairs(self) -> int:
        """How many times the model fixed its plan."""
        return self.model_calls - 1

    def _compiled(self) -> CompiledProgram:
        if self.compiled is None:
            raise UsageError(f"the model answered in words, not with a plan: {self.text[:200]!r}")
        return self.compiled

    def emulator(
        self,
        *,
        max_instructions_to_exec: int | None = None,
        max_tool_calls: int | None = None,
        max_stack_depth: int | None = None,
        max_seconds: float | None = None,
        state: MachineState | Mapping[str, Any] | None = None,
        parallel_tools: ParallelTools = False,
    ) -> Emulator:
        """A new machine at the plan's start (or at ``state``); a budget left out is the plan's.

        Tools that take a ``runtime: ToolRuntime`` need it from the caller: run such calls
        yourself (``advance``/``complete``, or ``run(call)``) and add it to ``call.args``.

        Raises:
            UsageError: The model answered in words, a budget is not a positive integer, or
                ``state`` does not belong to this plan.
        """
        given = {name: value for name, value in locals().items() if name != "self"}
        left_out = {b: getattr(self, b) for b in BUDGETS if given[b] is None}
        return Emulator(self._compiled(), **(given | left_out))

    def summary(self) -> PlanSummary:
        """What the plan can do, per tool, against its budgets (see :func:`~llassembly.summarize`).

        Raises:
            UsageError: The model answered in words.
        """
        return summarize(self._compiled().program, self.externs, **run_budgets(self))

    def graph(self, granularity: Granularity = "block") -> PlanGraph:
        """The plan as a LangGraph graph (``draw_mermaid()`` draws it); loads LangGraph.

        Raises:
            UsageError: The model answered in words, or ``granularity`` is unknown.
        """
        return PlanGraph(self._compiled(), granularity, **run_budgets(self))


@document_options
def plan(
    model: LanguageModelLike,
    tools: ToolSpec,
    request: Request,
    *,
    max_repairs: int = PlannerOptions.max_repairs,
    prompt_path: str | Path | None = PlannerOptions.prompt_path,
    plan_policy: Sequence[PlanPolicy] = PlannerOptions.plan_policy,
    max_instructions_to_exec: int = PlannerOptions.max_instructions_to_exec,
    max_tool_calls: int = PlannerOptions.max_tool_calls,
    max_stack_depth: int = PlannerOptions.max_stack_depth,
    config: RunnableConfig | None = None,
) -> Plan:
    """Ask ``model`` for a plan that calls ``tools``, repairing it until it verifies. Nothing runs.

    Args:
        model: Any chat model (or runnable taking messages and returning an ``AIMessage``).
        tools: The tools the plan may call (see :data:`~llassembly.machine.externs.ToolSpec`).
        request: A question, or messages; system messages become the prompt's context.
        (every planner option)
        config: Passed to ``model.invoke`` (callbacks, tags, tracing).

    Returns:
        The verified plan, or the model's answer in words (:attr:`Plan.is_program` is false).

    Raises:
        RepairsExhausted: No valid plan after ``max_repairs`` repairs (it holds the last
            problems and the number of attempts).
        UsageError: An option is out of range, a tool cannot be adapted, or ``request`` holds
            nothing but system messages.
        Exception: Whatever the model raises, as it is.
    """
    return drive(_drafts(locals()), lambda messages: model.invoke(messages, config))


async def aplan(
    model: LanguageModelLike,
    tools: ToolSpec,
    request: Request,
    *,
    max_repairs: int = PlannerOptions.max_repairs,
    prompt_path: str | Path | None = PlannerOptions.prompt_path,
    plan_policy: Sequence[PlanPolicy] = PlannerOptions.plan_policy,
    max_instructions_to_exec: int = PlannerOptions.max_instructions_to_exec,
    max_tool_calls: int = PlannerOptions.max_tool_calls,
    max_stack_depth: int = PlannerOptions.max_stack_depth,
    config: RunnableConfig | None = None,
) -> Plan:
    """Async :func:`plan`: the model is called with ``ainvoke``. Same arguments and errors."""
    return await adrive(_drafts(locals()), lambda messages: model.ainvoke(messages, config))


def _drafts(arguments: Mapping[str, Any]) -> Generator[list[BaseMessage], Any, Plan]:
    """The turn's planning part for :func:`plan`'s ``arguments``, as every planner runs it (sans-IO:
    yields model requests): ask and repair until a plan verifies or the model answers in words."""
    request = arguments["request"]
    messages = [HumanMessage(request)] if isinstance(request, str) else list(request)
    context, conversation = split_system(messages)
    if not conversation:
        raise UsageError("nothing to plan: the request holds no question or message")
    # "raise": a model that writes no valid plan raises RepairsExhausted.
    options = PlannerOptions.from_arguments({**arguments, "on_tool_error": "raise"})
    try:  # a planner per distinct options, kept (it caches tools, prompts and compiled plans)
        planner = _cached_planner(options)
    except TypeError:  # an unhashable policy: a planner of its own
        planner = Planner(options)
    externs = planner.externs_for(arguments["tools"])
    system = SystemMessage(planner.system_prompt(externs, context))
    view = TurnView(planner, externs, conversation, graph=True)
    current = step(None, Begin(), view)
    seen = planner_view(conversation, results=planner.options.planner_sees_results)
    while isinstance(current.action, AskModel):
        reply = yield [system, *seen, *current.action.extra]
        current = step(current.record, Received(answered(reply).reply), view)
    reply = next(m for m in current.messages if isinstance(m, AIMessage))
    compiled = planner.compiled(reply.text, externs) if current.record["plan"] else None
    budgets = {b: getattr(planner.options, b) for b in BUDGETS}
    return Plan(reply, compiled, externs, current.record["model_calls"], **budgets)


_cached_planner = functools.lru_cache(maxsize=32)(Planner)
