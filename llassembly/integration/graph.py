"""Graph compiler: a verified program becomes a LangGraph ``StateGraph`` (the graph path).

``granularity`` says what one node runs, and with ``parallel_tools`` a batch of calls runs as
one ``call`` task each, joined by the ``join`` node (see ``docs/durability.md``). Every call
takes the one tool path (:mod:`llassembly.integration.calls`). The state is plain data
(:class:`PlanState`); what belongs to one run travels in the config under :data:`RUN_KEY`, so a
graph is compiled once per program.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, TypedDict

from langchain_core.messages import AnyMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send

from llassembly.compat import unobserved
from llassembly.errors import ExecutionError, Failure, UsageError, failure_of
from llassembly.integration import calls
from llassembly.integration.query import invoker, query_steps
from llassembly.integration.record import KEY
from llassembly.language.limits import DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_TOOL_CALLS
from llassembly.machine.emulator import (
    Emulator,
    Failed,
    Outcome,
    ParallelTools,
    abatch_results,
    adrive,
    batch_results,
    check_parallel_tools,
    drive,
    marked_calls,
)
from llassembly.machine.externs import check_sync_tools
from llassembly.machine.state import ToolCall
from llassembly.machine.steps import CompiledProgram

Granularity: TypeAlias = Literal["block", "instruction", "program"]
GRANULARITIES: tuple[Granularity, ...] = ("block", "instruction", "program")
RUN_KEY = "llassembly_run"

_OWN_POOL = "llassembly_pool"  # config_for set max_concurrency (the tools do not get it)
_CALL, _JOIN = "call", "join"  # the nodes of a batch run as one task per call (see _call)
_MAX_DESTINATIONS = 64  # most drawn edges out of one node
_MAX_WALK = 512  # most instructions walked to find where one block node can go


def _gathered(
    old: list[ToolMessage] | None, new: list[ToolMessage] | None
) -> list[ToolMessage] | None:
    """The reducer of the ``results`` channel: each ``call`` task adds its call's message;
    ``None`` empties it (the join writes it once the batch is taken)."""
    return None if new is None else [*(old or []), *new]


class CallInput(TypedDict):
    """What a ``call`` task gets (its ``Send``): where the call is and its argument values, as
    the machine holds them (:meth:`~llassembly.machine.emulator.Emulator.call_at` rebuilds it)."""

    index: int
    values: list[Any]
    number: int


class _NodeInput(TypedDict, total=False):
    """What a plan node reads: the machine and a batch's results (not the growing message list)."""

    machine: dict[str, Any]
    results: list[ToolMessage] | None


class PlanState(TypedDict, total=False):
    """The plan sub-graph's state: plain, msgpack-serialisable data."""

    machine: dict[str, Any]
    messages: Annotated[list[AnyMessage], operator.add]
    failure: Failure | None
    results: Annotated[list[ToolMessage] | None, _gathered]


@dataclass
class PlanRun:
    """What one run of a plan graph needs from its caller.

    Attributes:
        execute: Runs one tool call with the node's config: returns its ``ToolMessage`` (or
            ``Command``) as the planner's tool path makes it, or the tool's raw result; an
            awaitable of it when its third argument (``asynchronous``) is true (``ainvoke``).
        call_id_prefix: Tool-call ids are ``prefix + call number``; unique per plan run.
        announce: Called with each executed call and its message, as it completes.
        error: Set to the live exception when the run fails (state keeps a plain record).
        errors: The live exception of each failed call, by call id, until the plan raises it
            (rebuilt from its record when it is gone).
        hand_off: Stop before a batch of ``return_direct`` calls (for the agent's tool node).
    """

    execute: Callable[[ToolCall, RunnableConfig, bool], Any]
    call_id_prefix: str = "asm_"
    announce: Callable[[ToolCall, ToolMessage], None] | None = None
    error: ExecutionError | None = field(default=None, repr=False)
    errors: dict[str, ExecutionError] = field(default_factory=dict, repr=False)
    hand_off: bool = False
    # The machine a node left, with the snapshot it wrote: the next node of the same run
    # reads that very snapshot and goes on with the live machine instead of restoring it.
    machine: tuple[dict[str, Any], Emulator] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class PlanRan:
    """A plan graph ran the plan to its end, to its failure (``error`` is the live exception,
    for a driver that raises it), or to results that end the run (``ended``: see ``ends_run``)."""

    machine: dict[str, Any]
    failure: Failure | None
    messages: Sequence[AnyMessage] = ()
    error: ExecutionError | None = None
    ended: bool = False


class PlanGraph:
    """A program compiled into a LangGraph graph at one granularity; reusable across runs.

    Args:
        compiled: The verified, compiled program.
        granularity: ``"block"``, ``"instruction"`` or ``"program"``.
        max_instructions_to_exec: Instruction budget of each run.
        max_tool_calls: Tool-call budget of each run.
        parallel_tools: Tools whose calls may run together (see ``docs/durability.md``).

    Example:
        >>> from llassembly import compile_program, externs_from, parse
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
        self.parallel_tools = check_parallel_tools(parallel_tools)
        self._max_steps = 1 if granularity == "instruction" else None
        self._one_call = granularity != "program"
        self._labels: dict[str, str] = {}
        self._names: dict[int, str] = {}  # the node starting at each pc
        # Batches run as a task per call (checkpointed one by one) except at "program".
        self._dispatching = self._one_call and bool(marked_calls(compiled, self.parallel_tools))
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = self._build()

    # -- running ------------------------------------------------------------------------------

    def initial_state(self, machine: dict[str, Any] | None = None) -> PlanState:
        """The input for a fresh run (or one continuing from an emulator snapshot)."""
        machine = Emulator(self.compiled).snapshot() if machine is None else machine
        return {"machine": machine, "messages": [], "failure": None}

    def config_for(self, run: PlanRun, config: RunnableConfig | None = None) -> RunnableConfig:
        """The config to invoke the graph with: ``config`` plus the run and a recursion limit."""
        base = config or {}
        configurable = {**base.get("configurable", {}), RUN_KEY: run}
        steps = self.max_instructions_to_exec if self._max_steps else self.max_tool_calls
        # A batch adds a superstep for its calls and one for the join; a call whose node
        # ends where no node starts adds the join.
        limit = (2 * steps if self._dispatching else steps) + 2
        out: RunnableConfig = {**base, "configurable": configurable, "recursion_limit": limit}
        if self._dispatching and base.get("max_concurrency") is None:
            # LangGraph runs a step's tasks on min(32, cpus + 4) threads unless told: let a
            # whole batch (at most the tool-call budget) run at once (the tools: see _serve).
            out["max_concurrency"] = self.max_tool_calls
            configurable[_OWN_POOL] = True
        return out

    def _emulator(self, state: _NodeInput, run: PlanRun) -> Emulator:
        """The machine of ``state``: the run's live one (see ``PlanRun.machine``), else restored
        from the snapshot (a resume, a retried node)."""
        cached, run.machine = run.machine, None  # a node that fails leaves no machine behind
        if cached is not None and cached[0] is state["machine"]:
            return cached[1]
        return Emulator(
            self.compiled,
            max_instructions_to_exec=self.max_instructions_to_exec,
            max_tool_calls=self.max_tool_calls,
            state=state["machine"],
            parallel_tools=self.parallel_tools,
        )

    def _node(
        self, state: _NodeInput, config: RunnableConfig
    ) -> Generator[list[ToolCall], list[Outcome], Command[Any]]:
        """One node's work, written once for sync and async: yields each batch of calls
        (one call without ``parallel_tools``), takes their outcomes, then goes to the node at
        the new pc (or the end).

        At ``"block"`` and ``"instruction"`` a node first takes the results of the batch its
        machine waits on (written by the ``call`` tasks), then makes at most one round of calls:
        one call it runs itself, or a batch it hands out to a ``call`` task per call (``Send``);
        where no node starts at the machine's pc (it ran ahead of a call), the ``join`` node runs
        on from there. Nodes route with ``Command(goto=...)`` rather than conditional edges: the
        next node follows from the machine's pc, and a router would read the whole state each step.
        """
        run: PlanRun = config["configurable"][RUN_KEY]
        emulator = self._emulator(state, run)
        messages: list[AnyMessage] = []
        failure: Failure | None = None
        dispatch: list[Send] = []
        try:
            st = emulator.state
            if self._dispatching and (st.outstanding or st.pending is not None):
                batch = emulator.advance_batch()  # the batch the call tasks ran
                found = {m.tool_call_id: m for m in state.get("results") or []}
                ids = [calls.call_id(run.call_id_prefix, c.number) for c in batch]
                # (Without every result, as from a snapshot taken mid-batch, the batch is
                # handed out again below.)
                if all(i in found for i in ids):
                    self._take(emulator, run, batch, [found[i] for i in ids], messages)
            while not calls.ends_run(messages):
                batch = emulator.advance_batch(self._max_steps)
                externs = self.compiled.externs
                if not batch or (  # (see hand_off)
                    run.hand_off
                    and all(getattr(externs[c.tool].tool, "return_direct", 0) for c in batch)
                ):
                    break
                if self._dispatching and len(batch) > 1:
                    dispatch = [
                        Send(_CALL, CallInput(index=index, values=values, number=number))
                        for index, values, number in emulator.state.slots()
                    ]
                    break
                outcomes = yield batch
                results = [self._message(run, c, o) for c, o in zip(batch, outcomes, strict=True)]
                self._take(emulator, run, batch, results, messages)
                if self._one_call:
                    break
        except ExecutionError as exc:
            run.error = exc
            failure = failure_of(exc)
        if failure is None and not dispatch and emulator.state.pc >= len(self.compiled.steps):
            emulator.advance_batch()  # a CALL was the last instruction: record that the plan ended
        machine = emulator.snapshot()
        update: PlanState = {"machine": machine}
        if messages:
            update["messages"] = messages
        if failure is not None:
            update["failure"] = failure
        else:
            run.machine = (machine, emulator)
        if self._dispatching:
            update["results"] = None  # taken: empty the channel for the next batch
        waits = machine["pending"] is not None or machine.get("outstanding")
        if dispatch or failure is not None or machine["halted"] or waits:
            return Command(update=update, goto=dispatch or END)  # (a batch handed out waits)
        target = self._names.get(machine["pc"]) or (_JOIN if self._dispatching else None)
        if target is None:  # pragma: no cover - every resume point is a node
            raise UsageError(f"plan graph has no node for pc {machine['pc']}")
        return Command(update=update, goto=target)

    def _take(
        self,
        emulator: Emulator,
        run: PlanRun,
        batch: list[ToolCall],
        results: Sequence[ToolMessage],
        messages: list[AnyMessage],
    ) -> None:
        """Give a batch's results to the machine in program order, recording the batch's
        ``AIMessage`` and each call's ``ToolMessage`` (the plan stops at results that end the run).

        Raises:
            ExecutionError: A call failed (its live error, else rebuilt from its message);
                the results before it were given.
        """
        externs = self.compiled.externs
        query = externs[batch[0].tool].query
        messages += [calls.call_request(batch, run.call_id_prefix, query=query), *results]
        if calls.ends_run(results):
            return
        for call, message in zip(batch, results, strict=True):
            outcome = calls.outcome_of(externs.get(call.tool), message, call)
            if isinstance(outcome, Failed) and not emulator.tests_failure():
                live = run.errors.pop(calls.call_id(run.call_id_prefix, call.number), None)
                raise live or outcome.error  # (outcome_of reads every failure as an ExecutionError)
            emulator.complete_batch([outcome])

    def _message(self, run: PlanRun, call: ToolCall, outcome: Outcome) -> ToolMessage:
        """A call's outcome as its ``ToolMessage`` (a failure kept live in ``run.errors``),
        announced on the caller's stream."""
        if isinstance(outcome, Failed):
            if not isinstance(outcome.error, Exception):
                raise outcome.error
            message = calls.raised_message(run.errors, call, run.call_id_prefix, outcome.error)
        else:
            extern = self.compiled.externs[call.tool]
            message = calls.as_message(extern, call, run.call_id_prefix, outcome)
        if run.announce is not None:
            run.announce(call, message)
        return message

    def _call(
        self, payload: CallInput, config: RunnableConfig
    ) -> Generator[list[ToolCall], list[Outcome], PlanState]:
        """The task that runs one call of a batch and writes its message.

        An interrupt in the call propagates: LangGraph keeps what the batch's other tasks
        wrote and runs only this one again on resume.
        """
        call = Emulator(self.compiled).call_at(**payload)  # only builds the call: reads no state
        [outcome] = yield [call]
        return {"results": [self._message(config["configurable"][RUN_KEY], call, outcome)]}

    # -- building -------------------------------------------------------------------------------

    def _build(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        builder: StateGraph[Any, Any, Any, Any] = StateGraph(PlanState)
        program = self.compiled.program
        count = len(program.instructions)
        if self.granularity == "program" or program.entry >= count:
            self._names = {program.entry: "run"}
        elif self.granularity == "instruction":
            self._names = {pc: f"i{pc}" for pc in range(count)}
        else:
            starts = {program.entry, *(i + 1 for i in self.compiled.flow.tools)}
            self._names = {pc: f"s{pc}" for pc in sorted(starts) if pc < count}
        node = Node(self._node, _serve)
        for pc, name in self._names.items():
            self._labels[name], successors = self._drawn(pc)
            # Destinations only draw the graph (nodes route with Command(goto=...)).
            destinations: dict[str, str] = {}
            for label, target in successors:
                destinations.setdefault(END if target is None else self._names[target], label)
            if self._dispatching:
                destinations |= {_CALL: "", _JOIN: ""}
            builder.add_node(name, node, input_schema=_NodeInput, destinations=destinations)
        if self._dispatching:
            # A task per call of a batch; the join takes their results, then runs on.
            builder.add_node(_CALL, Node(self._call, _serve), input_schema=CallInput)
            joins = dict.fromkeys([*self._names.values(), _CALL, _JOIN, END], "")
            builder.add_node(_JOIN, node, input_schema=_NodeInput, destinations=joins)
            builder.add_edge(_CALL, _JOIN)
            self._labels[_CALL] = "one call of a batch"
            self._labels[_JOIN] = "take the batch's results and run on"
        builder.add_edge(START, self._names[program.entry])
        return builder.compile()

    def draw_mermaid(self) -> str:
        """Mermaid text of the plan: instruction text on nodes, taken / not taken on jumps."""
        drawable = self.graph.get_graph()
        for node_id, label in self._labels.items():
            if node_id in drawable.nodes:
                text = label.replace(":", " ").replace('"', "'")
                drawable.nodes[node_id] = drawable.nodes[node_id].copy(name=text)
        return drawable.draw_mermaid()

    # -- the graph's shape: where each node can go (for drawing; every walk is bounded, so
    # -- building stays linear in the plan's size whatever its shape) -----------------------

    def _drawn(self, pc: int) -> tuple[str, list[tuple[str, int | None]]]:
        """The label of the node starting at ``pc`` and its labelled successors (``None``: the
        end); one whose successors are more than the drawing bounds allow is drawn with its
        end edge only."""
        instructions = self.compiled.program.instructions

        def text(i: int) -> str:
            return f"L{instructions[i].line} {instructions[i]}"

        end: list[tuple[str, int | None]] = [("", None)]
        if self._names[pc] == "run":
            return f"run the whole plan ({len(instructions)} instructions)", end
        if self.granularity == "instruction":
            edges = self._edges(pc)
            return text(pc), edges if len(edges) <= _MAX_DESTINATIONS else end
        found = self._reachable_calls(pc)
        if found is None:
            return f"from L{instructions[pc].line} to one of many tool calls", end
        ends = " | ".join(map(text, sorted(found)))
        label = f"from L{instructions[pc].line}" + (f" to {ends}" if ends else " to the end")
        return label, [("", i + 1) for i in sorted(found) if i + 1 < len(instructions)] + end

    def _edges(self, pc: int) -> list[tuple[str, int | None]]:
        """Control-flow successors of one instruction, labelled; ``None`` means the end (a
        failure also ends the graph, so every node can reach the end)."""
        flow = self.compiled.flow
        kind = flow.effects[pc].info.flow
        ends = (*flow.return_sites, flow.end) if kind == "return" else flow.successors[pc]
        out = [index if index < flow.end else None for index in ends]
        if kind == "branch":
            return [("taken", out[0]), ("not taken", out[1])]
        return [("", target) for target in dict.fromkeys(out or [None])]

    def _reachable_calls(self, pc: int) -> set[int] | None:
        """Tool CALLs reachable from ``pc`` through pure instructions, or ``None`` when the
        walk exceeds its bounds (the drawing then shows fewer edges)."""
        seen, found, todo = set[int](), set[int](), [pc]
        while todo:
            index = todo.pop()
            if index in seen:
                continue
            seen.add(index)
            if len(seen) > _MAX_WALK or len(found) > _MAX_DESTINATIONS:
                return None
            if index in self.compiled.flow.tools:
                found.add(index)
                continue
            todo.extend(t for _, t in self._edges(index) if t is not None)
        return found


def _serve(config: RunnableConfig, asynchronous: bool) -> Callable[[list[ToolCall]], Any]:
    """Runs a plan node's batch of calls at once with the run's ``execute`` (on threads, or
    awaited with ``asyncio.gather``); the tools get the node's config, without the
    ``max_concurrency`` that :meth:`PlanGraph.config_for` set for the graph's own tasks."""
    run, tools = config["configurable"][RUN_KEY], config
    if config["configurable"].get(_OWN_POOL):
        tools = {k: v for k, v in config.items() if k != "max_concurrency"}  # type: ignore[assignment]
    results = abatch_results if asynchronous else batch_results
    return lambda batch: results(batch, lambda call: run.execute(call, tools, asynchronous))


class Node(Runnable[Any, Any]):
    """A graph node written once for sync and async: ``body(input, config)`` is a sans-IO
    generator (see :func:`~llassembly.machine.emulator.drive`) whose requests
    ``serve(config, asynchronous)`` answers (awaited on ``ainvoke``).

    LangGraph wraps a plain function given to ``add_node`` so that ``ainvoke`` runs it on a
    thread; the planner's nodes need their own async body (the model and the tools are
    awaited), and no run of their own in traces (the model and tool runs nest under the
    graph's node run), as LangGraph's own two-bodied nodes do.
    """

    def __init__(
        self,
        body: Callable[[Any, RunnableConfig], Generator[Any, Any, Any]],
        serve: Callable[[RunnableConfig, bool], Callable[[Any], Any]],
    ) -> None:
        self.body, self.serve = body, serve
        self.name = getattr(body, "__name__", None) or "Node"

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config = ensure_config(config)
        return drive(self.body(input, config), self.serve(config, False))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        config = ensure_config(config)
        return await adrive(self.body(input, config), self.serve(config, True))


# -- a planner's plan, run as a plan graph ---------------------------------------------------


def _query_call(ctx: calls.CallContext, call: ToolCall) -> Generator[Any, Any, ToolMessage]:
    """A query run as a plan call, sans-IO: its answer as its ``ToolMessage``."""
    if ctx.query_model is None:  # pragma: no cover - every driver gives one with queries on
        raise UsageError("the plan makes a query, but no query model was given")
    cid = calls.call_id(ctx.prefix, call.number)
    value, attempts = yield from query_steps(ctx.query_model, call, cid)
    return calls.query_message(call, ctx.prefix, attempts, value=value)


def run_plan(plan: str, ctx: calls.CallContext, config: RunnableConfig, asynchronous: bool) -> Any:
    """Run the plan graph of ``ctx.planner``'s verified ``plan`` to its :class:`PlanRan` end
    (or failure) with ``invoke`` (``ainvoke``, awaitable, when ``asynchronous``); it shares the
    caller's checkpointer (it runs inside the caller's node, with the node's config), so on
    resume after an interrupt in a tool, the calls that completed are not run again.

    Raises:
        UsageError: The plan calls async-only tools, run with ``invoke`` (nothing has run).
    """
    graph: PlanGraph = ctx.planner.plan_graph(plan, ctx.externs)
    calls.check_tool_middleware(ctx.planner.options.tool_middleware, asynchronous)
    if asynchronous:
        return adrive(_running(graph, ctx, config), lambda asked: graph.graph.ainvoke(*asked))
    check_sync_tools(graph.compiled.tools)
    return drive(_running(graph, ctx, config), lambda asked: graph.graph.invoke(*asked))


def _running(
    graph: PlanGraph, ctx: calls.CallContext, config: RunnableConfig
) -> Generator[tuple[PlanState, RunnableConfig], Any, PlanRan]:
    """A planner's plan run as its plan graph, sans-IO (yields the graph's input and config):
    each call through the one tool path (its ``ToolRuntime``, the planner's
    ``tool_middleware``), each query asked of the query model, each completed call announced
    on the caller's custom stream, if any (``stream_mode="custom"``, under ``"llassembly"``:
    the call, and its ``"result"`` or ``"error"`` text)."""
    ctx.observed = not unobserved(config)
    writer: Any = getattr(ctx.runtime, "stream_writer", None)

    def execute(call: ToolCall, node_config: RunnableConfig, asynchronous: bool) -> Any:
        if ctx.externs[call.tool].query:  # a model answers it, not a tool
            asked = _query_call(ctx, call)
            return (adrive if asynchronous else drive)(asked, invoker(node_config, asynchronous))
        handler = calls.invoke_tool(ctx, call, node_config, asynchronous=asynchronous)
        request = calls.tool_request(ctx, call, node_config)
        return calls.run_call(ctx, call, request, handler, asynchronous)

    def announce(call: ToolCall, message: ToolMessage) -> None:
        shown = {
            "id": calls.call_id(ctx.prefix, call.number),
            "tool": call.tool,
            "args": calls.jsonable(call.args, as_read=True),
            "line": call.line,
            "source": call.source,
            "number": call.number,
        }
        kind = "error" if message.status == "error" else "result"
        writer({KEY: {"call": shown, kind: calls.message_text(message)}})

    announced = announce if writer is not None else None
    run = PlanRun(execute, ctx.prefix, announced, errors=ctx.errors, hand_off=ctx.hand_off)
    result = yield graph.initial_state(), graph.config_for(run, config)
    said = list(result.get("messages", []))
    return PlanRan(result["machine"], result.get("failure"), said, run.error, calls.ends_run(said))
