"""The planner turn shared by the middleware and the LangGraph nodes.

A *turn* is: ask the model for a plan (repairing it when it does not parse or verify), run it
as a nested plan graph, and, when it fails and the policy says ``"replan"``, ask the model again
with the results so far. The turn itself is a small LangGraph graph (``plan`` → ``execute`` ⇄
``replan``) invoked inside the caller's node, so a model call that already happened and a tool
call that already completed are checkpointed and never repeated on resume.

Everything that belongs to one invocation (the model caller, the agent state and runtime for
``ToolRuntime``, the tools) travels in the config under :data:`TURN_KEY`; the compiled turn
graph and the compiled plan graphs are shared by every run.
"""

from __future__ import annotations

import hashlib
import operator
from collections import OrderedDict
from collections.abc import Generator, Hashable, Mapping, Sequence
from typing import Annotated, Any, Final, Literal, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from llassembly.analysis.policies import check_policies
from llassembly.analysis.summary import (
    PlanSummary,
    summarize,
)
from llassembly.errors import (
    Diagnostic,
    PlanError,
    PlanRejected,
    RepairsExhausted,
    UsageError,
)
from llassembly.integration.approval import (
    approval_request,
    ask_approval,
    edit_note,
    needs_approval,
)
from llassembly.integration.final import (
    answer_node,
    needs_model,
)
from llassembly.integration.graph import (
    PlanGraph,
    PlanRun,
)
from llassembly.integration.messages import (
    MAX_REPAIR_REQUEST_CHARS,
    final_message,
    model_reply,
    native_calls_error,
    plan_failure,
    planner_view,
    repair_request,
    replan_request,
    turn_messages,
    without_native_calls,
)
from llassembly.integration.node import Node
from llassembly.integration.options import (
    EXECUTIONS,
    ON_TOOL_ERROR,
    Execution,
    FinalAnswer,
    OnToolError,
    PlannerOptions,
)
from llassembly.integration.prompt import build_system_prompt
from llassembly.integration.tools import (
    TurnRun,
    make_plan_run,
    unobserved,
)
from llassembly.language.parser import parse
from llassembly.language.program import (
    PlainAnswer,
    Program,
)
from llassembly.machine.drive import (
    adrive,
    drive,
)
from llassembly.machine.emulator import (
    CompiledProgram,
    compile_program,
)
from llassembly.machine.externs import (
    Extern,
    check_sync_tools,
    externs_from,
)

__all__ = [
    "EXECUTIONS",
    "MAX_PLAN_INSTRUCTIONS",
    "MAX_REPAIR_REQUEST_CHARS",
    "ON_TOOL_ERROR",
    "TURN_KEY",
    "Execution",
    "FinalAnswer",
    "OnToolError",
    "PlannerOptions",
    "Turn",
    "TurnRun",
    "final_message",
    "model_reply",
    "planner_view",
    "repair_request",
    "short_hash",
    "turn_messages",
]

TURN_KEY = "llassembly_turn"
DONE: Final = "__end__"
"""What a routing function returns to end the turn (mapped to LangGraph's ``END``)."""
_CACHE_SIZE = 256


class TurnState(TypedDict, total=False):
    """State of one planner turn (plain data)."""

    conversation: list[AnyMessage]
    plan: str | None
    plan_number: int
    call_prefix: str
    new_messages: Annotated[list[AnyMessage], operator.add]
    model_calls: int
    repairs: int
    replans: int
    machine: dict[str, Any] | None
    failure: dict[str, Any] | None
    executed: int
    tool_calls: int
    approval: dict[str, Any] | None
    answer_in_turn: bool
    final_reply: AIMessage | None


def short_hash(text: str) -> str:
    """Six hex digits identifying ``text`` (for short, stable tool-call ids)."""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=3).hexdigest()


MAX_PLAN_INSTRUCTIONS = 4096
"""Most instructions a plan written by the model may have (loops and subroutines keep real
plans far below it); a longer one is refused before it is checked further or compiled."""


def _check_size(program: Program) -> None:
    count = len(program.instructions)
    if count > MAX_PLAN_INSTRUCTIONS:
        first = program.instructions[MAX_PLAN_INSTRUCTIONS]
        problem = Diagnostic(
            first.line,
            1,
            f"the plan has {count} instructions; at most {MAX_PLAN_INSTRUCTIONS} are accepted: "
            "repeat work with a loop or a subroutine instead of writing it out",
        )
        raise PlanRejected((problem,))


class Turn:
    """The planner turn graph plus the caches it needs. One per planner instance.

    Args:
        options: The planner options.
    """

    def __init__(self, options: PlannerOptions) -> None:
        self.options = options
        self._plans: OrderedDict[tuple[Any, ...], PlanGraph] = OrderedDict()
        self._compiled: OrderedDict[tuple[Any, ...], CompiledProgram] = OrderedDict()
        self._externs: OrderedDict[tuple[int, ...], dict[str, Extern]] = OrderedDict()
        self._requests: OrderedDict[tuple[int, ...], tuple[tuple[Any, ...], dict[str, Extern]]] = (
            OrderedDict()
        )
        # The entry keeps the externs it was built for, so a recycled id never hits it.
        self._prompts: dict[tuple[int, str], tuple[Mapping[str, Extern], str]] = {}
        self.graph = self._build()

    # -- caches -----------------------------------------------------------------------------

    def externs_for(self, tools: Sequence[Any]) -> dict[str, Extern]:
        """Adapt ``tools`` once per distinct tool list and reuse the result."""
        key = tuple(id(t) for t in tools)
        cached = self._externs.get(key)
        if cached is not None:  # the entry keeps its tools alive: their ids are not reused
            self._externs.move_to_end(key)
        else:
            cached = externs_from(tools)
            for extern in cached.values():
                other = [n for n in extern.injected if n != extern.runtime_param]
                # On the agent path the agent's tool node injects every parameter itself.
                if other and self.options.execution != "agent":
                    raise UsageError(
                        f"tool {extern.name!r} has injected parameters {other}: plans give "
                        "tools their context through a `runtime: ToolRuntime` parameter "
                        "(state, store, context, tool_call_id)"
                    )
            self._externs[key] = cached
            # Bounded: an agent built per request with new tools must not grow this forever.
            if len(self._externs) > _CACHE_SIZE:
                self._externs.popitem(last=False)
        return cached

    def request_externs(self, tools: Sequence[Any]) -> dict[str, Extern]:
        """:meth:`externs_for` the ``BaseTool`` s among a model request's tools (the same list
        is offered at every step of a plan: looked up by its tools, without sorting them out
        again)."""
        key = tuple(map(id, tools))
        found = self._requests.get(key)
        if found is None:  # the entry keeps its tools alive: their ids are not reused
            found = (tuple(tools), self.externs_for([t for t in tools if isinstance(t, BaseTool)]))
            self._requests[key] = found
            if len(self._requests) > _CACHE_SIZE:
                self._requests.popitem(last=False)
        return found[1]

    def system_prompt(self, externs: Mapping[str, Extern], context: str) -> str:
        """Build (once per tools and context) the planner's system prompt."""
        key = (id(externs), context)
        found = self._prompts.get(key)
        if found is not None and found[0] is externs:
            return found[1]
        prompt = build_system_prompt(externs, context, self.options.prompt_path)
        if len(self._prompts) > _CACHE_SIZE:
            self._prompts.clear()
        self._prompts[key] = (externs, prompt)
        return prompt

    def check(self, text: str, externs: Mapping[str, Extern]) -> Program | PlainAnswer:
        """Parse, verify and check a reply against the policies. Raises :class:`PlanError`."""
        parsed = parse(text)
        if isinstance(parsed, Program):
            _check_size(parsed)
            if self.options.execution == "agent":
                self.compiled(text, externs, parsed)
            else:
                self.plan_graph(text, parsed, externs)
            if self.options.plan_policy:
                problems = check_policies(
                    self.options.plan_policy, self.summary(text, externs), parsed
                )
                if problems:
                    raise PlanRejected(problems)
        return parsed

    def summary(self, text: str, externs: Mapping[str, Extern]) -> PlanSummary:
        """The summary of a verified plan, against this planner's budgets."""
        return summarize(
            self.compiled(text, externs).program,
            externs,
            max_instructions_to_exec=self.options.max_instructions_to_exec,
            max_tool_calls=self.options.max_tool_calls,
        )

    def approval(self, text: str, externs: Mapping[str, Extern]) -> dict[str, Any] | None:
        """The approval request for a verified plan, or ``None`` when it needs none."""
        if not self.options.approve_plan:
            return None
        summary = self.summary(text, externs)
        if not needs_approval(self.options.approve_plan, summary):
            return None
        return approval_request(text, summary)

    def compiled(
        self, text: str, externs: Mapping[str, Extern], program: Program | None = None
    ) -> CompiledProgram:
        """The verified, compiled program for ``text`` (cached: a plan is compiled once)."""
        key = (text, id(externs), self.options.max_stack_depth)
        found = self._compiled.get(key)
        if found is not None:
            self._compiled.move_to_end(key)
            return found
        if program is None:
            parsed = parse(text)
            if not isinstance(parsed, Program):
                raise UsageError("the stored plan is no longer a program")
            program = parsed
        found = compile_program(program, externs, max_stack_depth=self.options.max_stack_depth)
        self._compiled[key] = found
        if len(self._compiled) > _CACHE_SIZE:
            self._compiled.popitem(last=False)
        return found

    def plan_graph(
        self, text: str, program: Program | None, externs: Mapping[str, Extern]
    ) -> PlanGraph:
        """The compiled plan graph for ``text`` (cached: a program is compiled once)."""
        opts = self.options
        key: tuple[Any, ...] = (text, id(externs), opts.granularity)
        key += (opts.max_instructions_to_exec, opts.parallel_tools)
        graph = self._plans.get(key)
        if graph is not None:
            self._plans.move_to_end(key)
            return graph
        compiled = self.compiled(text, externs, program)
        graph = PlanGraph(
            compiled,
            opts.granularity,
            max_instructions_to_exec=opts.max_instructions_to_exec,
            max_tool_calls=opts.max_tool_calls,
            parallel_tools=opts.parallel_tools,
        )
        self._plans[key] = graph
        if len(self._plans) > _CACHE_SIZE:
            self._plans.popitem(last=False)
        return graph

    # -- the model side ---------------------------------------------------------------------

    def draft(
        self, conversation: list[BaseMessage], externs: Mapping[str, Extern]
    ) -> Generator[list[BaseMessage], AIMessage, tuple[AIMessage, bool, int]]:
        """Ask for a plan until it parses and verifies (sans-IO: yields model requests).

        Returns:
            ``(reply, is_program, model_calls)``.

        Raises:
            RepairsExhausted: No valid plan after ``max_repairs`` repairs.
        """
        messages = planner_view(conversation)
        attempts = self.options.max_repairs + 1
        for attempt in range(1, attempts + 1):
            reply, native = without_native_calls((yield messages))
            try:
                if native and not reply.text.strip():
                    raise native_calls_error(native)
                parsed = self.check(reply.text, externs)
                if native and isinstance(parsed, PlainAnswer):
                    raise native_calls_error(native)
            except PlanError as error:
                if attempt == attempts:
                    raise RepairsExhausted(attempt, error) from error
                messages = [*messages, reply, HumanMessage(repair_request(error))]
                continue
            return reply, isinstance(parsed, Program), attempt
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the tool side ----------------------------------------------------------------------

    def plan_run(self, run: TurnRun, prefix: str) -> PlanRun:
        """A :class:`PlanRun` that executes calls with ``ToolRuntime`` and tool middleware."""
        # The calls are always recorded: a replan shows the model the calls that completed,
        # and the final message lists them (turn_messages drops them when the caller keeps
        # only the plan and the final message).
        return make_plan_run(run, prefix, self.options.tool_middleware, True)

    # -- the turn graph ---------------------------------------------------------------------

    def _build(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(TurnState)
        builder.add_node("plan", self._model_node(replan=False))
        builder.add_node("execute", Node(self._execute, self._aexecute))
        builder.add_node("replan", self._model_node(replan=True))
        builder.add_node("answer", answer_node(TURN_KEY))
        steps: dict[Hashable, str] = {
            "plan": "plan",
            "replan": "replan",
            "execute": "execute",
            "approve": "approve",
            "answer": "answer",
            DONE: END,
        }
        builder.add_node("approve", Node(self._approve))
        builder.add_conditional_edges("approve", self._after_approve, steps)
        builder.add_conditional_edges(START, _start, steps)
        builder.add_conditional_edges("plan", _after_plan, steps)
        builder.add_conditional_edges("replan", _after_plan, steps)
        builder.add_conditional_edges(
            "execute", self._after_execute, {"replan": "replan", "answer": "answer", DONE: END}
        )
        builder.add_edge("answer", END)
        return builder.compile()

    def _model_node(self, *, replan: bool) -> Node:
        def body(
            state: TurnState, run: TurnRun
        ) -> Generator[list[BaseMessage], AIMessage, TurnState]:
            conversation: list[BaseMessage] = [*state.get("conversation", [])]
            if replan:
                conversation += state.get("new_messages", [])
                conversation.append(HumanMessage(replan_request(state.get("failure") or {})))
            try:
                reply, is_program, calls = yield from self.draft(conversation, run.externs)
            except RepairsExhausted as error:
                if self.options.on_tool_error == "raise":
                    raise
                # Under "stop" and "replan" the turn ends with a message that keeps every
                # completed call (a replan's failed attempt must not lose plan 1's calls).
                return {
                    "plan": None,
                    "failure": plan_failure(error),
                    "model_calls": state.get("model_calls", 0) + error.attempts,
                    "repairs": state.get("repairs", 0) + error.attempts - 1,
                    **({"replans": state.get("replans", 0) + 1} if replan else {}),
                }
            number = state.get("plan_number", 0) + 1
            update: TurnState = {
                "approval": self.approval(reply.text, run.externs) if is_program else None,
                "plan": reply.text if is_program else None,
                "plan_number": number,
                "call_prefix": f"asm{short_hash(reply.text + str(reply.id))}_{number}_",
                "new_messages": [reply],
                "model_calls": state.get("model_calls", 0) + calls,
                "repairs": state.get("repairs", 0) + calls - 1,
                # Asked again after a failure, a model that answers in words leaves the
                # failure on record (the turn is "stopped", after its answer).
                "failure": None if is_program or not replan else state.get("failure"),
            }
            if replan:
                update["replans"] = state.get("replans", 0) + 1
            return update

        def sync(state: TurnState, config: RunnableConfig) -> TurnState:
            run: TurnRun = config["configurable"][TURN_KEY]
            if run.call_model is None:
                raise UsageError("this planner has no synchronous model; use the async entry point")
            model = run.call_model
            return drive(body(state, run), lambda msgs: model([*_system(run), *msgs]))

        async def asynchronous(state: TurnState, config: RunnableConfig) -> TurnState:
            run: TurnRun = config["configurable"][TURN_KEY]
            if run.acall_model is None:
                raise UsageError("this planner has no async model")
            model = run.acall_model
            return await adrive(body(state, run), lambda msgs: model([*_system(run), *msgs]))

        return Node(sync, asynchronous)

    def _plan_input(
        self, state: TurnState, run: TurnRun, config: RunnableConfig
    ) -> tuple[PlanGraph, Any, RunnableConfig]:
        text = state.get("plan") or ""
        graph = self.plan_graph(text, None, run.externs)
        plan_run = self.plan_run(run, state.get("call_prefix") or f"asm{short_hash(text)}_")
        if unobserved(config):
            # No handler listens: an empty callback manager still costs a child manager and a
            # metadata merge per superstep, so the plan graph runs without one.
            config = {**config, "callbacks": None}
        return graph, graph.initial_state(), graph.config_for(plan_run, config)

    def _plan_update(
        self, state: TurnState, run: TurnRun, result: Mapping[str, Any], plan_run: PlanRun
    ) -> TurnState:
        machine = result["machine"]
        if plan_run.error is not None:
            run.error = plan_run.error
        return {
            "machine": machine,
            "failure": result.get("failure"),
            "new_messages": list(result.get("messages", [])),
            "executed": state.get("executed", 0) + machine["executed"],
            "tool_calls": state.get("tool_calls", 0) + machine["tool_calls"],
        }

    def _execute(self, state: TurnState, config: RunnableConfig) -> TurnState:
        run: TurnRun = config["configurable"][TURN_KEY]
        graph, initial, plan_config = self._plan_input(state, run, config)
        check_sync_tools(_called(graph.compiled), graph.compiled.externs)
        result = graph.graph.invoke(initial, plan_config)
        return self._plan_update(state, run, result, plan_config["configurable"]["llassembly_run"])

    async def _aexecute(self, state: TurnState, config: RunnableConfig) -> TurnState:
        run: TurnRun = config["configurable"][TURN_KEY]
        graph, initial, plan_config = self._plan_input(state, run, config)
        result = await graph.graph.ainvoke(initial, plan_config)
        return self._plan_update(state, run, result, plan_config["configurable"]["llassembly_run"])

    def _approve(self, state: TurnState, config: RunnableConfig) -> TurnState:
        """Ask a person to approve the plan (see ``llassembly._approval``)."""
        run: TurnRun = config["configurable"][TURN_KEY]
        request = state.get("approval") or {}
        kind, result = ask_approval(request, lambda text: self.check(text, run.externs))
        if kind == "approve":
            return {"approval": None}
        if kind == "reject":
            return {"approval": None, "plan": None, "failure": result}
        number = state.get("plan_number", 1)
        return {
            "approval": None,
            "plan": result,
            "call_prefix": f"asm{short_hash(result)}_{number}_",
            "new_messages": [edit_note(result)],
        }

    def _after_approve(self, state: TurnState) -> Literal["execute", "replan", "answer", "__end__"]:
        if state.get("plan"):
            return "execute"
        return self._after_execute(state)

    def _after_execute(self, state: TurnState) -> Literal["replan", "answer", "__end__"]:
        opts = self.options
        failure = state.get("failure")
        replans_left = state.get("replans", 0) < opts.max_replans
        if failure and opts.on_tool_error == "replan" and replans_left:
            return "replan"
        raising = opts.on_tool_error == "raise"
        if state.get("answer_in_turn") and needs_model(
            opts.final_answer, failure, raising, None, None
        ):
            return "answer"
        return DONE

    def config_for(self, run: TurnRun, config: RunnableConfig | None) -> RunnableConfig:
        """The config to invoke the turn graph with (the caller's plus the run)."""
        base: dict[str, Any] = dict(config or {})
        configurable = {**base.get("configurable", {}), TURN_KEY: run}
        return {**base, "configurable": configurable}  # type: ignore[typeddict-item]


def _called(compiled: CompiledProgram) -> list[str]:
    """Names of the tools a compiled plan calls."""
    return [t.name for t in compiled.tools if t is not None]


def _start(state: TurnState) -> Literal["approve", "execute", "plan"]:
    if state.get("plan"):
        return "approve" if state.get("approval") else "execute"
    return "plan"


def _after_plan(state: TurnState) -> Literal["approve", "execute", "__end__"]:
    if state.get("plan"):
        return "approve" if state.get("approval") else "execute"
    return DONE


def _system(run: TurnRun) -> list[BaseMessage]:
    return [SystemMessage(run.system_prompt)]
