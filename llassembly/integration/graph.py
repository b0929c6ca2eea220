"""Graph compiler: a verified program becomes a LangGraph ``StateGraph``.

Three granularities, same tool calls, messages and final state:

* ``"instruction"``: a node per instruction (the LLAssembly way). Jumps, ``CALL label`` and
  ``RET`` are conditional edges labelled *taken* / *not taken*. Best for drawing and stepping;
  one LangGraph superstep per instruction.
* ``"block"`` (default): a node per *call step*: the pure instructions from a resume point
  (the entry, or just after a tool ``CALL``) up to and including the next tool ``CALL``,
  jumps followed inside the step. Every completed tool call ends a superstep, so every completed
  call is checkpointed, at one superstep per call.
* ``"program"``: one node runs the whole plan. Fastest; no checkpoint between calls.

With ``parallel_tools``, at ``"block"`` and ``"instruction"`` a batch of several calls runs as
one LangGraph task per call (``Send`` to the ``call`` node, all in one superstep, so at once);
the ``join`` node then gives their results to the machine in program order, records the batch's
messages and runs on. When a call of a batch interrupts, LangGraph keeps what the calls that
completed wrote, so a resume runs only the interrupted one again. A node makes at most one
round of calls (one call, or one batch), so every completed call is checkpointed before the
next starts.

The graph state is plain data (:class:`PlanState`): the emulator snapshot, the messages made so
far, and a failure record. Everything that belongs to one run (how to execute a tool, the
call-id prefix) travels in the config under :data:`RUN_KEY`, so a graph is compiled once per
program and reused by every run.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, TypedDict

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig

# LangGraph's own node wrapper: one node with a sync and an async body, no thread hop for sync
# bodies under ainvoke and no extra tracing run per node (langchain's agent nodes use it too).
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send

from llassembly.errors import (
    ExecutionError,
    UsageError,
)
from llassembly.integration.batches import (
    CallInput,
    CallOutcome,
    call_outcome,
    gathered,
    take_batch,
)
from llassembly.integration.graphshape import PlanShape
from llassembly.integration.messages import call_messages, result_text
from llassembly.integration.node import Node
from llassembly.integration.query import answered_value
from llassembly.integration.record import Failure, execution_failure
from llassembly.integration.results import refusal_tag, value_tag
from llassembly.machine.ahead import (
    Outcome,
    ParallelTools,
    abatch_results,
    batch_results,
    batch_slots,
    call_request,
    check_parallel_tools,
    marked_calls,
)
from llassembly.machine.drive import (
    adrive,
    drive,
)
from llassembly.machine.emulator import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_TOOL_CALLS,
    CompiledProgram,
    Emulator,
    ToolCall,
    tool_error,
)

__all__ = [
    "GRANULARITIES",
    "RUN_KEY",
    "Granularity",
    "PlanGraph",
    "PlanRun",
    "PlanState",
]

Granularity: TypeAlias = Literal["block", "instruction", "program"]
GRANULARITIES: tuple[Granularity, ...] = ("block", "instruction", "program")
RUN_KEY = "llassembly_run"


_OWN_POOL = "llassembly_pool"  # config_for set max_concurrency (the tools do not get it)
_CALL, _JOIN = "call", "join"  # the nodes of a batch run as one task per call (see _node)


class _NodeInput(TypedDict, total=False):
    """What a plan node reads: the machine and a batch's results (not the growing message
    list)."""

    machine: dict[str, Any]
    results: list[CallOutcome] | None


class PlanState(TypedDict, total=False):
    """The plan sub-graph's state: plain, msgpack-serialisable data."""

    machine: dict[str, Any]
    messages: Annotated[list[AnyMessage], operator.add]
    failure: Failure | None
    results: Annotated[list[CallOutcome] | None, gathered]


@dataclass
class PlanRun:
    """What one run of a plan graph needs from its caller.

    Attributes:
        execute: Runs one tool call with the node's config and returns the raw result.
        aexecute: The same, awaited (used under ``ainvoke``).
        call_id_prefix: Tool-call ids are ``prefix + call number``; unique per plan run.
        record_messages: Add an ``AIMessage``/``ToolMessage`` pair per executed call.
        error: Set to the live exception when the run fails (state keeps a plain record).
        call_errors: The live exception of each failed call of a batch, by call number, until
            the ``join`` raises it (rebuilt from its record when it is gone).
    """

    execute: Callable[[ToolCall, RunnableConfig], Any]
    aexecute: Callable[[ToolCall, RunnableConfig], Awaitable[Any]]
    call_id_prefix: str = "asm_"
    record_messages: bool = True
    error: ExecutionError | None = field(default=None, repr=False)
    call_errors: dict[int, ExecutionError] = field(default_factory=dict, repr=False)


class PlanGraph:
    """A program compiled into a LangGraph graph at one granularity; reusable across runs.

    Args:
        compiled: The verified, compiled program.
        granularity: ``"block"``, ``"instruction"`` or ``"program"``.
        max_instructions_to_exec: Instruction budget of each run.
        max_tool_calls: Tool-call budget of each run.
        parallel_tools: Tools whose calls may run together (see ``llassembly._ahead``): a
            batch of calls runs at once, as a task per call (at ``"program"``: on threads, or
            with ``asyncio.gather`` under ``ainvoke``).

    Example:
        >>> from llassembly.parser import parse
        >>> from llassembly.emulator import compile_program
        >>> from llassembly.externs import externs_from
        >>> def inc(x: int) -> int:
        ...     return x + 1
        >>> prog = compile_program(parse("PUSH 1\\nCALL inc\\nPOP R1"), externs_from([inc]),
        ...                        max_stack_depth=16)
        >>> "CALL inc" in PlanGraph(prog, "instruction").draw_mermaid()
        True
    """

    def __init__(
        self,
        compiled: CompiledProgram,
        granularity: Granularity = "block",
        *,
        max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
        parallel_tools: ParallelTools = False,
    ) -> None:
        if granularity not in GRANULARITIES:
            raise UsageError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
        self.compiled = compiled
        self.granularity = granularity
        self.max_instructions_to_exec = max_instructions_to_exec
        self.max_tool_calls = max_tool_calls
        self._max_steps = 1 if granularity == "instruction" else None
        self._one_call = granularity != "program"
        self._labels: dict[str, str] = {}
        self._shape = PlanShape(compiled, granularity)
        self.parallel_tools = parallel_tools
        self._batched = bool(marked_calls(compiled, check_parallel_tools(parallel_tools)))
        # Batches run as a task per call (checkpointed one by one) except at "program".
        self._dispatching = self._batched and self._one_call
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = self._build()

    # -- running ----------------------------------------------------------------------------

    def initial_state(self, machine: dict[str, Any] | None = None) -> PlanState:
        """The input for a fresh run (or one continuing from an emulator snapshot)."""
        if machine is None:
            machine = Emulator(self.compiled).snapshot()
        return {"machine": machine, "messages": [], "failure": None}

    def config_for(self, run: PlanRun, config: RunnableConfig | None = None) -> RunnableConfig:
        """The config to invoke the graph with: ``config`` plus the run and a recursion limit."""
        base: RunnableConfig = dict(config or {})  # type: ignore[assignment]
        configurable = {**base.get("configurable", {}), RUN_KEY: run}
        steps = (
            self.max_instructions_to_exec
            if self.granularity == "instruction"
            else self.max_tool_calls
        )
        # A batch adds a superstep for its calls and one for the join; a call whose node
        # ends where no node starts adds the join.
        limit = (2 * steps if self._dispatching else steps) + 2
        out: RunnableConfig = {**base, "configurable": configurable, "recursion_limit": limit}
        if self._dispatching and base.get("max_concurrency") is None:
            # LangGraph runs a step's tasks on min(32, cpus + 4) threads unless told: let a
            # whole batch (at most the tool-call budget) run at once, as the caller set no
            # bound. The tools themselves get the caller's config (see _call_node).
            out["max_concurrency"] = self.max_tool_calls
            configurable[_OWN_POOL] = True
        return out

    def _emulator(self, state: _NodeInput, parallel_tools: ParallelTools = False) -> Emulator:
        """The machine of ``state``, under this graph's budgets."""
        return Emulator(
            self.compiled,
            max_instructions_to_exec=self.max_instructions_to_exec,
            max_tool_calls=self.max_tool_calls,
            max_stack_depth=self.compiled.max_stack_depth,
            state=state["machine"],
            parallel_tools=parallel_tools,
        )

    def _body(self, state: _NodeInput, run: PlanRun) -> Generator[ToolCall, Any, PlanState]:
        """One node's work, written once for sync and async: yields each tool call."""
        emulator = self._emulator(state)
        messages: list[AnyMessage] = []
        failure: Failure | None = None
        call: ToolCall | None = None
        try:
            while True:
                call = emulator.advance(self._max_steps)
                if call is None:
                    break
                result, noted = answered_value((yield call))  # a query's: its value
                emulator.complete(result)
                if run.record_messages:
                    call_id = f"{run.call_id_prefix}{call.number}"
                    text = result_text(result)
                    tag = value_tag(self.compiled.externs[call.tool], result, text, _where(call))
                    messages.extend(call_messages(call, text, call_id, tag={**tag, **noted}))
                call = None
                if self._one_call:
                    break
        except ExecutionError as exc:
            run.error = exc
            failure = execution_failure(exc)
            if call is not None and run.record_messages:
                call_id = f"{run.call_id_prefix}{call.number}"
                messages.extend(
                    call_messages(call, str(exc), call_id, error=True, tag=refusal_tag(exc))
                )
        if failure is None and emulator.state.pc >= len(self.compiled.steps):
            emulator.advance()  # a CALL was the last instruction: record that the plan ended
        return _update(emulator, messages, failure)

    def _batch_body(
        self, state: _NodeInput, run: PlanRun
    ) -> Generator[list[ToolCall], list[Outcome], tuple[PlanState, list[CallInput]]]:
        """:meth:`_body` for a plan with marked tools: yields each batch of calls run at once.

        Returns the update and the calls to run as a task each (none when empty). At
        ``"block"`` and ``"instruction"`` a node first takes the results of the batch its
        machine waits on (written by the ``call`` tasks), then makes at most one round of
        calls: one call it runs itself, or a batch it hands back. Results are given in program
        order; a failed call keeps the results before it. The batch is recorded as one
        ``AIMessage`` and a ``ToolMessage`` per call.
        """
        emulator = self._emulator(state, self.parallel_tools)
        messages: list[AnyMessage] = []
        failure: Failure | None = None
        dispatch: list[CallInput] = []
        record = (messages, run.call_id_prefix) if run.record_messages else None
        try:
            st = emulator.state
            if self._dispatching and (st.outstanding or st.pending is not None):
                batch = emulator.advance_batch()  # the batch the call tasks ran
                found = {r["number"]: r for r in state.get("results") or []}
                # (Without every result, as from a snapshot taken mid-batch, the batch is
                # handed out again below.)
                if all(c.number in found for c in batch):
                    outcomes = [found[c.number] for c in batch]
                    take_batch(emulator, batch, outcomes, run.call_errors, record)
            while True:
                batch = emulator.advance_batch(self._max_steps)
                if not batch:
                    break
                if self._dispatching and len(batch) > 1:
                    dispatch = [
                        CallInput(index=index, values=values, number=number)
                        for index, values, number in batch_slots(emulator.state)
                    ]
                    break
                raw = yield batch
                outcomes = [
                    call_outcome(self.compiled.externs, c, o, run.call_errors)
                    for c, o in zip(batch, raw, strict=True)
                ]
                take_batch(emulator, batch, outcomes, run.call_errors, record)
                if self._one_call:
                    break
        except ExecutionError as exc:
            run.error = exc
            failure = execution_failure(exc)
        if failure is None and not dispatch and emulator.state.pc >= len(self.compiled.steps):
            emulator.advance_batch()  # a CALL was the last instruction: record that the plan ended
        update = _update(emulator, messages, failure)
        if self._dispatching:
            update["results"] = None  # taken: empty the channel for the next batch
        return update, dispatch

    def _node(self, names: dict[int, str]) -> Node:
        """A node: run its part of the plan, then go to the node at the new pc (or the end).

        Nodes route with ``Command(goto=...)`` rather than conditional edges: the next node
        follows from the machine's pc, and a router would read the whole state each step.
        A batch goes to a ``call`` task per call (``Send``); where no node starts at the
        machine's pc (it ran ahead of a call), the ``join`` node runs on from there.
        """

        def finish(update: PlanState, dispatch: Sequence[CallInput] = ()) -> Command[Any]:
            machine = update["machine"]
            if dispatch:
                return Command(update=update, goto=[Send(_CALL, call) for call in dispatch])
            if update.get("failure") or machine["halted"]:
                return Command(update=update, goto=END)
            target = names.get(machine["pc"])
            if target is None and self._dispatching:
                target = _JOIN
            if target is None:  # pragma: no cover - every resume point is a node
                raise UsageError(f"plan graph has no node for pc {machine['pc']}")
            return Command(update=update, goto=target)

        def sync(state: _NodeInput, config: RunnableConfig) -> Command[Any]:
            run: PlanRun = config["configurable"][RUN_KEY]
            config = _tools_config(config)
            if self._batched:
                batches = self._batch_body(state, run)
                execute = lambda c: run.execute(c, config)  # noqa: E731
                return finish(*drive(batches, lambda batch: batch_results(batch, execute)))
            body = self._body(state, run)
            return finish(drive(body, lambda c: run.execute(c, config), tool_error))

        async def asynchronous(state: _NodeInput, config: RunnableConfig) -> Command[Any]:
            run: PlanRun = config["configurable"][RUN_KEY]
            config = _tools_config(config)
            if self._batched:
                batches = self._batch_body(state, run)
                aexecute = lambda c: run.aexecute(c, config)  # noqa: E731
                return finish(*await adrive(batches, lambda b: abatch_results(b, aexecute)))
            body = self._body(state, run)
            return finish(await adrive(body, lambda c: run.aexecute(c, config), tool_error))

        return Node(sync, asynchronous)

    def _call_node(self) -> Node:
        """The task that runs one call of a batch and writes its outcome as plain data.

        An interrupt in the call propagates: LangGraph keeps what the batch's other tasks
        wrote and runs only this one again on resume.
        """

        externs = self.compiled.externs

        def request(payload: CallInput) -> ToolCall:
            return call_request(
                self.compiled, payload["index"], payload["values"], payload["number"]
            )

        def sync(payload: CallInput, config: RunnableConfig) -> PlanState:
            run: PlanRun = config["configurable"][RUN_KEY]
            config = _tools_config(config)
            call = request(payload)
            [outcome] = batch_results([call], lambda c: run.execute(c, config))
            return {"results": [call_outcome(externs, call, outcome, run.call_errors)]}

        async def asynchronous(payload: CallInput, config: RunnableConfig) -> PlanState:
            run: PlanRun = config["configurable"][RUN_KEY]
            config = _tools_config(config)
            call = request(payload)
            [outcome] = await abatch_results([call], lambda c: run.aexecute(c, config))
            return {"results": [call_outcome(externs, call, outcome, run.call_errors)]}

        return Node(sync, asynchronous)

    # -- building ---------------------------------------------------------------------------

    def _build(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(PlanState)
        program = self.compiled.program
        if self.granularity == "program" or program.entry >= len(program.instructions):
            builder.add_node("run", self._node({}), input_schema=_NodeInput, destinations=(END,))
            builder.add_edge(START, "run")
            self._labels["run"] = f"run the whole plan ({len(program.instructions)} instructions)"
            return builder.compile()
        shape = self._shape
        starts = shape.node_starts()
        names = {pc: f"i{pc}" if self.granularity == "instruction" else f"s{pc}" for pc in starts}
        for pc in starts:
            destinations: dict[str, str] = {}
            # Destinations only draw the graph (nodes route with Command(goto=...)); a node
            # whose successors cannot be listed within the bounds is drawn with its end edge
            # only, so building stays linear in the plan's size whatever its shape.
            for label, target in shape.successors(pc) or [("", None)]:
                destinations.setdefault(END if target is None else names[target], label)
            if self._dispatching:
                destinations.setdefault(_CALL, "")
                destinations.setdefault(_JOIN, "")
            builder.add_node(
                names[pc], self._node(names), input_schema=_NodeInput, destinations=destinations
            )
            self._labels[names[pc]] = shape.describe(pc)
        if self._dispatching:
            # A task per call of a batch; the join takes their results, then runs on.
            builder.add_node(_CALL, self._call_node(), input_schema=CallInput)
            joins: dict[str, str] = {n: "" for n in [*names.values(), _CALL, _JOIN, END]}
            builder.add_node(_JOIN, self._node(names), input_schema=_NodeInput, destinations=joins)
            builder.add_edge(_CALL, _JOIN)
            self._labels[_CALL] = "one call of a batch"
            self._labels[_JOIN] = "take the batch's results and run on"
        builder.add_edge(START, names[program.entry])
        return builder.compile()

    def draw_mermaid(self) -> str:
        """Mermaid text of the plan: instruction text on nodes, taken / not taken on jumps."""
        drawable = self.graph.get_graph()
        for node_id, label in self._labels.items():
            node = drawable.nodes.get(node_id)
            if node is not None:
                text = label.replace(":", " ").replace('"', "'")
                drawable.nodes[node_id] = (
                    node.copy(name=text) if hasattr(node, "copy") else node._replace(name=text)
                )
        return drawable.draw_mermaid()


def _tools_config(config: RunnableConfig) -> RunnableConfig:
    """The config the tools get: the node's, without the ``max_concurrency`` that
    :meth:`PlanGraph.config_for` set for the graph's own tasks."""
    if not config["configurable"].get(_OWN_POOL):
        return config
    return {k: v for k, v in config.items() if k != "max_concurrency"}  # type: ignore[return-value]


def _where(call: ToolCall) -> dict[str, Any]:
    return {"line": call.line, "source": call.source}


def _update(emulator: Emulator, messages: list[AnyMessage], failure: Failure | None) -> PlanState:
    """What a plan node writes: the machine, the calls' messages and a failure, if any."""
    update: PlanState = {"machine": emulator.snapshot()}
    if messages:
        update["messages"] = messages
    if failure is not None:
        update["failure"] = failure
    return update
