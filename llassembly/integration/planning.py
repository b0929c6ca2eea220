"""Get a verified plan from a model now; run it later, or step it from a game loop.

:func:`plan` (and :func:`aplan`) asks a chat model for one plan with the same prompt and the
same repair loop as :class:`~llassembly.ToolsPlannerMiddleware` and the planner nodes: a reply
that does not parse, verify or pass the policies goes back to the model with every problem
listed, up to ``max_repairs`` times. Nothing runs. The :class:`Plan` it returns holds the
model's reply and the verified, compiled program; :meth:`Plan.emulator` makes a machine that
runs it whenever the caller wants: all at once (:meth:`~llassembly.Emulator.run`), or one tool
call at a time (:meth:`~llassembly.Emulator.advance` / :meth:`~llassembly.Emulator.complete`),
which is what a game loop needs: plan an NPC's order once, then let it act one call per frame.

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
from typing import TYPE_CHECKING, Any, TypeAlias

from langchain_core.language_models import LanguageModelLike
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from llassembly.analysis.summary import PlanSummary, summarize
from llassembly.errors import UsageError
from llassembly.integration.options import PlannerOptions
from llassembly.language.limits import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_STACK_DEPTH,
    DEFAULT_MAX_TOOL_CALLS,
)
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import Extern, ToolSpec
from llassembly.machine.state import MachineState
from llassembly.machine.steps import CompiledProgram

if TYPE_CHECKING:  # the planner and the plan graph load LangGraph: only when first used
    from llassembly.analysis.policies import PlanPolicy
    from llassembly.integration.graph import Granularity, PlanGraph
    from llassembly.integration.planner import Planner
    from llassembly.machine.emulator import ParallelTools


Request: TypeAlias = str | Sequence[BaseMessage]
"""What the model is asked: a question, or messages (system messages become the prompt's
context, as in the planner nodes; the rest is the conversation)."""

Tools: TypeAlias = ToolSpec
"""The tools argument, as every public function takes it (a list or a mapping of tools)."""


@dataclass(frozen=True, eq=False)
class Plan:
    """A model's verified plan (or its answer in words), ready to run whenever you want.

    Attributes:
        reply: The model's last reply: the plan, or the answer in words.
        compiled: The verified, compiled program; ``None`` when the model answered in words.
        externs: The tools as the plan calls them, by name (``externs[call.tool]`` is the tool
            of a :class:`~llassembly.ToolCall`).
        model_calls: Model calls made: 1, plus one per repair.
        max_instructions_to_exec: Instruction budget of :meth:`emulator` (and of
            :meth:`summary`).
        max_tool_calls: Tool-call budget of :meth:`emulator` (and of :meth:`summary`).
        max_stack_depth: Stack budget the program was compiled for.
    """

    reply: AIMessage
    compiled: CompiledProgram | None
    externs: Mapping[str, Extern]
    model_calls: int
    max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH

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

        def given(value: int | None, default: int) -> int:
            return default if value is None else value

        return Emulator(
            self._compiled(),
            max_instructions_to_exec=given(max_instructions_to_exec, self.max_instructions_to_exec),
            max_tool_calls=given(max_tool_calls, self.max_tool_calls),
            max_stack_depth=given(max_stack_depth, self.max_stack_depth),
            max_seconds=max_seconds,
            state=state,
            parallel_tools=parallel_tools,
        )

    def summary(self) -> PlanSummary:
        """What the plan can do, per tool, against its budgets (see :func:`~llassembly.summarize`).

        Raises:
            UsageError: The model answered in words.
        """
        compiled = self._compiled()
        return summarize(
            compiled.program,
            self.externs,
            max_instructions_to_exec=self.max_instructions_to_exec,
            max_tool_calls=self.max_tool_calls,
        )

    def graph(self, granularity: Granularity = "block") -> PlanGraph:
        """The plan as a LangGraph graph (``draw_mermaid()`` draws it); loads LangGraph.

        Raises:
            UsageError: The model answered in words, or ``granularity`` is unknown.
        """
        from llassembly.integration.graph import PlanGraph

        return PlanGraph(
            self._compiled(),
            granularity,
            max_instructions_to_exec=self.max_instructions_to_exec,
            max_tool_calls=self.max_tool_calls,
        )


def plan(
    model: LanguageModelLike,
    tools: Tools,
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
        tools: The tools the plan may call: a list of LangChain tools or typed functions,
            or a mapping of tool name to tool (see :data:`~llassembly.machine.externs.ToolSpec`).
        request: A question, or messages; system messages become the prompt's context.
        max_repairs: Times the model may fix a plan that does not parse, verify or pass
            ``plan_policy``.
        prompt_path: A template replacing the built-in prompt (``{context}``,
            ``{extern_functions}``).
        plan_policy: Rules ``(summary, program) -> problems`` the plan must pass (see
            :mod:`llassembly.policies`).
        max_instructions_to_exec: Instruction budget of the plan's machine.
        max_tool_calls: Tool-call budget of the plan's machine.
        max_stack_depth: Stack budget of the plan's machine.
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
    from llassembly.integration.messages import model_reply
    from llassembly.machine.emulator import drive

    planner, externs, system, conversation = _prepare(
        tools,
        request,
        max_repairs=max_repairs,
        prompt_path=prompt_path,
        plan_policy=plan_policy,
        max_instructions_to_exec=max_instructions_to_exec,
        max_tool_calls=max_tool_calls,
        max_stack_depth=max_stack_depth,
    )
    body = _drafts(planner, externs, system, conversation)
    return drive(body, lambda messages: model_reply(model.invoke(messages, config)))


async def aplan(
    model: LanguageModelLike,
    tools: Tools,
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
    from llassembly.integration.messages import model_reply
    from llassembly.machine.emulator import adrive

    planner, externs, system, conversation = _prepare(
        tools,
        request,
        max_repairs=max_repairs,
        prompt_path=prompt_path,
        plan_policy=plan_policy,
        max_instructions_to_exec=max_instructions_to_exec,
        max_tool_calls=max_tool_calls,
        max_stack_depth=max_stack_depth,
    )

    async def ask(messages: list[BaseMessage]) -> AIMessage:
        return model_reply(await model.ainvoke(messages, config))

    return await adrive(_drafts(planner, externs, system, conversation), ask)


def _drafts(
    planner: Planner,
    externs: Mapping[str, Extern],
    system: SystemMessage,
    conversation: list[BaseMessage],
) -> Generator[list[BaseMessage], AIMessage, Plan]:
    """The turn's planning part, as every planner runs it (sans-IO: yields model requests):
    ask, repair, until a plan verifies or the model answers in words."""
    from llassembly.integration.messages import planner_view
    from llassembly.integration.turn import AskModel, Begin, Replied, TurnView, step

    view = TurnView(planner, externs, conversation, graph=True)
    current = step(None, Begin(), view)
    while isinstance(current.action, AskModel):
        seen = planner_view(conversation, results=planner.options.planner_sees_results)
        reply = yield [system, *seen, *current.action.extra]
        current = step(current.record, Replied(reply), view)
    record = current.record
    reply = next(m for m in current.messages if isinstance(m, AIMessage))
    opts = planner.options
    return Plan(
        reply=reply,
        compiled=planner.compiled(reply.text, externs) if record["plan"] else None,
        externs=externs,
        model_calls=record["model_calls"],
        max_instructions_to_exec=opts.max_instructions_to_exec,
        max_tool_calls=opts.max_tool_calls,
        max_stack_depth=opts.max_stack_depth,
    )


def _prepare(
    tools: Tools, request: Request, **options: Any
) -> tuple[Planner, dict[str, Extern], SystemMessage, list[BaseMessage]]:
    """The planner for ``options``, the adapted tools, the system prompt and the
    conversation the model is asked about."""
    from llassembly.integration.messages import split_system

    messages = [HumanMessage(request)] if isinstance(request, str) else list(request)
    context, conversation = split_system(messages)
    if not conversation:
        raise UsageError("nothing to plan: the request holds no question or message")
    options["plan_policy"] = tuple(options["plan_policy"])
    # "agent": tools may take injected parameters (whoever runs the calls supplies them);
    # "raise": a model that writes no valid plan raises RepairsExhausted.
    planner = _planner(PlannerOptions(execution="agent", on_tool_error="raise", **options))
    externs = planner.externs_for(tools)
    return planner, externs, SystemMessage(planner.system_prompt(externs, context)), conversation


def _planner(options: PlannerOptions) -> Planner:
    """A planner per distinct options, kept (it caches tools, prompts and compiled plans)."""
    try:
        return _cached_planner(options)
    except TypeError:  # an unhashable policy: a planner of its own
        from llassembly.integration.planner import Planner

        return Planner(options)


@functools.lru_cache(maxsize=32)
def _cached_planner(options: PlannerOptions) -> Planner:
    from llassembly.integration.planner import Planner

    return Planner(options)
