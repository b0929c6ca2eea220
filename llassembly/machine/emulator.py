"""The machine that runs a verified plan.

The core is synchronous and pure: it never calls a tool itself. :meth:`Emulator.advance_batch`
runs instructions until the machine needs a result and returns the calls it issued; the caller
executes them (now, later, over several game frames, from async code) and hands the results to
:meth:`Emulator.complete_batch`. Without ``parallel_tools`` every batch holds one call
(:meth:`Emulator.advance` / :meth:`Emulator.complete`); :meth:`Emulator.run` and
:meth:`Emulator.arun` do the loop for you.

With ``parallel_tools`` the machine runs ahead of the calls of marked tools, their results
:class:`Pending` values until they come, and stops before the first instruction that would read one
(:func:`_read_check`; *Independent calls at once* in ``docs/language.md``). An error while calls are
outstanding is the state's :attr:`~MachineState.fault`, raised after their results are in: where the
sequential run raises it, so the plan means what it means run sequentially. The state is plain data
(:class:`MachineState`): an :meth:`Emulator.snapshot` given back as ``state=`` continues, mid-batch
included. The steps are compiled once (:mod:`llassembly.machine.steps`).

Example:
    >>> from llassembly import parse
    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> emu = Emulator(parse("PUSH 2\\nPUSH 3\\nCALL add\\nPOP R1"), [add])
    >>> emu.run().registers
    {'R1': 5}
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar

from llassembly import errors
from llassembly.analysis.dataflow import NO_SOURCES, place_parts
from llassembly.analysis.policies import DataFlowPolicy, check_names
from llassembly.analysis.queries import query_sources
from llassembly.compat import bubbling_errors, invalid_resume
from llassembly.language.instructions import EAX_INDEX, register_name
from llassembly.language.limits import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_STACK_DEPTH,
    DEFAULT_MAX_TOOL_CALLS,
    check_budgets,
    is_int64,
)
from llassembly.language.program import (
    NONE,
    Effects,
    Instruction,
    Mem,
    Name,
    Operand,
    Program,
    Reg,
    Value,
)
from llassembly.machine.access import Context, fail, getter, parts
from llassembly.machine.externs import Extern, ToolSpec, check_sync_tools, externs_of, program_of
from llassembly.machine.state import (
    ORDERED,
    CallRecord,
    MachineState,
    Pending,
    RunResult,
    Shadow,
    ToolCall,
)
from llassembly.machine.state import is_value as _is_value
from llassembly.machine.steps import CompiledProgram, compile_program, recompiled

_CLOCK_EVERY = 256  # instructions between wall-clock checks

ParallelTools: TypeAlias = "bool | Literal['read_only'] | Sequence[str]"
"""Which tools' calls may run together: all (``True``), none (``False``), those whose
metadata says they change nothing (``"read_only"``), or the tools named."""
READ_ONLY = "read_only"


@dataclass(frozen=True, slots=True)
class Failed:
    """The outcome of a call that gave the plan no value: ``error`` is why (what the tool
    raised, or the library's error for a call that was refused or could not be read)."""

    error: BaseException


Outcome: TypeAlias = "Any | Failed"
"""What a call gave: its raw result, or :class:`Failed`."""


class Emulator:
    """Runs one verified plan within budgets.

    Args:
        program: A parsed program (or a :class:`CompiledProgram` to skip verifying again).
        tools: The tools the plan may call: a list of LangChain tools, plain callables or externs,
            or a mapping of tool name to tool (see :data:`~llassembly.machine.externs.ToolSpec`).
        max_instructions_to_exec: Most instructions one run may execute.
        max_tool_calls: Most tool calls one run may make.
        max_stack_depth: Most values on the data stack plus return addresses (``None``: the
            limit a :class:`CompiledProgram` was compiled with, else 256).
        max_seconds: Wall-clock limit for the run, or ``None``.
        state: A :class:`MachineState` or a :meth:`snapshot` dict to continue from.
        parallel_tools: Tools whose calls may run together (``True`` for all): the machine
            runs ahead of their calls (:meth:`advance_batch`); the plan's meaning is the
            sequential one (see ``docs/language.md``, *Independent calls at once*).
        dataflow: Data-flow policies (see :func:`llassembly.only_from`): a call whose argument
            derives from a result a policy refuses is not made (``DataFlowRefused``). Empty:
            those a :class:`CompiledProgram` was compiled with (none for a parsed program).

    Raises:
        PlanRejected: The program fails verification (nothing has run).
        UsageError: A limit is not a positive number, a tool cannot be adapted, or a
            data-flow policy names a tool or an argument the tools do not have.
    """

    def __init__(
        self,
        program: Program | CompiledProgram,
        tools: ToolSpec = (),
        *,
        max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
        max_stack_depth: int | None = None,
        max_seconds: float | None = None,
        state: MachineState | Mapping[str, Any] | None = None,
        parallel_tools: ParallelTools = False,
        dataflow: Sequence[DataFlowPolicy] = (),
    ) -> None:
        if max_stack_depth is None:  # a compiled program keeps its own (not compiled again)
            own = program.max_stack_depth if isinstance(program, CompiledProgram) else None
            max_stack_depth = own or DEFAULT_MAX_STACK_DEPTH
        check_budgets(
            max_instructions_to_exec=max_instructions_to_exec,
            max_tool_calls=max_tool_calls,
            max_stack_depth=max_stack_depth,
        )
        if max_seconds is not None and (
            type(max_seconds) not in (int, float) or not max_seconds > 0
        ):
            raise errors.UsageError(f"max_seconds must be positive or None, got {max_seconds!r}")
        if isinstance(program, CompiledProgram):
            self.compiled = recompiled(program, max_stack_depth, tuple(dataflow))
        else:
            checked = program_of(program, "Emulator")
            self.compiled = compile_program(
                checked, externs_of(tools), max_stack_depth=max_stack_depth, dataflow=dataflow
            )
        self.program = self.compiled.program
        self.max_instructions_to_exec = max_instructions_to_exec
        self.max_tool_calls = max_tool_calls
        self.max_stack_depth = max_stack_depth
        self.max_seconds = max_seconds
        self.parallel_tools = check_parallel_tools(parallel_tools)
        self.marked = marked_calls(self.compiled, self.parallel_tools)
        """Indexes of the tool ``CALL``s that may run together."""
        self._tested = self.compiled.flow.tested
        self._reads = _read_checks(self.compiled) if self.marked else ()
        self._fault_error: errors.ExecutionError | None = None
        self._started: float | None = None
        self.history: list[CallRecord] = []
        self.state = self._initial_state(state)

    def _initial_state(self, state: MachineState | Mapping[str, Any] | None) -> MachineState:
        """The state to start from, checked to belong to this program (a stale or edited
        snapshot is refused); the registers a snapshot writes are settled here."""
        expected = self.compiled.layout.initial_memory()
        if state is None:
            state = MachineState(pc=self.program.entry, mem=expected)
        st = state if isinstance(state, MachineState) else MachineState.restore(state)
        if not all(map(_is_value, st.values())):
            raise errors.UsageError(
                "the state holds a value that is not a 64-bit int, finite float or string"
            )
        # The registers a snapshot reads: those the program may write (its graph's tracked
        # ones), and any the state given starts with (no instruction changes those others).
        self._registers = tuple(sorted({*self.compiled.flow.tracked, *st.holding()}))
        end = len(self.program.instructions)
        if not 0 <= st.pc <= end or any(not 0 <= c <= end for c in st.calls):
            raise errors.UsageError(f"the state points outside this program's {end} instructions")
        if st.pending is not None and self._tool_at(st.pending[0]) is None:
            raise errors.UsageError("the state's pending call is not a tool CALL of this program")
        if not st.mem and expected:  # a state built by hand before the plan had memory
            st.mem = expected
        if {k: len(v) for k, v in st.mem.items()} != {k: len(v) for k, v in expected.items()}:
            raise errors.UsageError("the state's memory does not match this program's data labels")
        results = {n: getattr(self._tool_at(i), "n_results", -1) for i, _v, n in st.outstanding}
        if len(results) < len(st.outstanding) or -1 in results.values():
            raise errors.UsageError(
                "the state's outstanding call is not a tool CALL of this program"
            )
        held = [v for place in st.places() for v in place if type(v) is Pending]
        if any(not 0 <= v.result < results.get(v.call, 0) for v in held):
            raise errors.UsageError("the state holds a pending value of no outstanding call")
        if st.fault is not None and not isinstance(st.fault.get("type"), str):
            raise errors.UsageError("the state's fault is not an error record")
        if self.compiled.dataflow is None:  # no step keeps it: a snapshot's would not fit
            st.provenance = None
            return st
        # Provenance, kept beside every value (a new shadow: no value derives from a result).
        shadow = st.provenance = st.provenance or Shadow(stack=[NO_SOURCES] * len(st.stack))
        if len(shadow.stack) != len(st.stack):
            raise errors.UsageError("the state's provenance does not fit its stack")
        for key, index in shadow.mem:
            if key not in st.mem or not 0 <= index < len(st.mem[key]):
                raise errors.UsageError(
                    f"the state's provenance names a cell {key}[{index}] it does not have"
                )
        return st

    # -- state ------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Return the machine state as plain data (see :meth:`MachineState.snapshot`)."""
        return self.state.snapshot(self._registers)

    @property
    def finished(self) -> bool:
        """Whether the program has ended."""
        return self.state.halted

    def result(self) -> RunResult:
        """Return registers, stack, calls and counters as they are now."""
        st = self.state
        return RunResult(
            registers={register_name(i): st.regs[i] for i in st.holding() if i},
            stack=list(st.stack),
            calls=list(self.history),
            instructions_executed=st.executed,
            tool_calls=st.tool_calls,
            answer="\n".join(st.answer),
            returned=st.returned,
        )

    # -- stepping ---------------------------------------------------------------------------

    def advance_batch(self, max_steps: int | None = None) -> list[ToolCall]:
        """Run until the machine needs a result; return the calls issued (``[]`` at the end).

        The machine runs ahead of marked calls (``parallel_tools``) while no instruction needs
        their results: the batch is every call issued (their arguments already off the stack),
        in program order, and may be run at once; without marks, one call. An outstanding
        batch is returned again (so a restored snapshot picks up where it stopped).

        Args:
            max_steps: Execute at most this many instructions (a tool CALL counts as one) until
                the first call of a batch, and return ``[]`` with :attr:`finished` still false
                if no call was reached. ``None`` runs until a call or the end.

        Raises:
            ExecutionError: A budget ran out or an instruction failed; the state stays at the
                failing instruction (with calls outstanding: only now, once their results are in).
        """
        st = self.state
        if st.outstanding or st.pending is not None:
            return [self.call_at(*slot) for slot in st.slots()]
        if st.fault is not None:
            error = self._fault_error or errors.error_of(st.fault)
            st.fault, self._fault_error = None, None
            raise error
        if st.halted:
            return []
        compiled, reads = self.compiled, self._reads
        steps, end, limit = compiled.steps, len(compiled.steps), self.max_instructions_to_exec
        timed = self.max_seconds is not None
        if timed and self._started is None:
            self._started = time.monotonic()
        pc, executed = st.pc, st.executed
        pause = sys.maxsize if max_steps is None else executed + max_steps
        batch: list[ToolCall] = []
        try:
            while pc < end:
                step = steps[pc]
                if batch:
                    if step is None and not self._joins(pc, batch[0].index):
                        break  # it waits for the outstanding calls
                    if step is not None and (check := reads[pc]) is not None and check(st):
                        break  # it would read a result not in yet
                elif executed >= pause:
                    return []  # paused after max_steps (the budget is checked next time)
                # With calls outstanding, an error is the state's fault, raised once their
                # results are in: where the sequential run raises it.
                try:
                    if executed >= limit:
                        raise self._exceeded(errors.InstructionBudgetExceeded, executed + 1, pc)
                    if timed and executed % _CLOCK_EVERY == 0:
                        self._check_clock(pc)
                    executed += 1
                    if step is not None:
                        pc = step(st, pc)
                        continue
                    if (call := self._begin_call(pc)) is None:
                        pc += 1  # a call the plan tests was refused: its failure is in
                        continue
                    batch.append(call)  # (its checks came before any change)
                except errors.ExecutionError as exc:
                    if not batch:
                        raise
                    st.fault, self._fault_error = dict(errors.failure_of(exc)), exc
                    break
                if st.pending is not None:
                    break  # issued last in its batch: it completes as a sequential call
                pc += 1
        finally:
            st.pc, st.executed = pc, executed
        if not batch:
            st.halted = True
        return batch

    def complete_batch(self, results: Sequence[Any]) -> None:
        """Give results to the batch's calls in program order (a prefix of it may be given; the rest
        stays outstanding). A :class:`Failed` outcome of a call the plan tests
        (:meth:`tests_failure`) sets the carry and the plan goes on; of any other call it is raised.

        Raises:
            UsageError: More results than outstanding calls.
            ExecutionError: A call the plan does not test failed (its error), or its result
                does not have the declared number of values.
            StackDepthExceeded: The last call's results do not fit on the stack.
        """
        st = self.state
        waiting = len(st.outstanding) + (st.pending is not None)
        if len(results) > waiting:
            if not waiting:
                raise errors.UsageError(
                    "no pending tool call waits for a result; advance the plan first"
                )
            raise errors.UsageError(f"got {len(results)} results for {waiting} outstanding calls")
        for result in results:
            if st.outstanding:  # a call run ahead is never one the plan tests
                index, _values, number = st.outstanding.pop(0)
                st.fill(number, self._values(index, result, False)[0])
            else:
                assert st.pending is not None  # counted above
                self._settle(st.pending[0], result)

    def _settle(self, index: int, result: Any) -> None:
        """The pending call at ``index`` done: its results pushed, then past its ``CALL``. One
        the plan tests sets the carry (LT) when it failed (its results NONE, its error's text in
        EAX) and clears it when it did not (EAX: its result by the EAX convention, else NONE)."""
        st, tested = self.state, index in self._tested
        values, error = self._values(index, result, tested)
        depth = len(st.stack) + len(st.calls) + len(values)
        if depth > self.max_stack_depth:
            raise self._exceeded(errors.StackDepthExceeded, depth, index)
        to_eax = self._put_results(index, values, tested=tested)
        if tested:
            if error is not None:  # EAX: the error's text
                st.regs[EAX_INDEX] = str(getattr(error, "detail", error))
            elif not to_eax:
                st.regs[EAX_INDEX] = NONE
            st.zf, st.lt, st.flag_mode = False, error is not None, ORDERED
        st.pending = None
        st.pc = index + 1

    def tests_failure(self) -> bool:
        """Whether the plan tests the failure of the call that waits for its outcome next (a
        ``JC``/``JNC`` right after its ``CALL``, see *Calls that may fail* in
        ``docs/language.md``): then :meth:`complete_batch` takes a :class:`Failed` outcome
        for it and the plan goes on, where any other failure stops the plan."""
        st = self.state  # (a call run ahead is never one the plan tests)
        return not st.outstanding and st.pending is not None and st.pending[0] in self._tested

    def advance(self, max_steps: int | None = None) -> ToolCall | None:
        """Run until the next tool call and return it, or ``None`` at the end: the batch of one of
        :meth:`advance_batch` (with ``max_steps``, also ``None`` when paused before a call).

        Raises:
            UsageError: ``parallel_tools`` issues calls as batches.
            ExecutionError: As for :meth:`advance_batch`.
        """
        if self.marked:
            raise errors.UsageError("parallel_tools issues calls as batches: use advance_batch()")
        return next(iter(self.advance_batch(max_steps)), None)

    def complete(self, result: Any) -> None:
        """Give the result of the call :meth:`advance` returned (see :meth:`complete_batch`).

        Raises:
            UsageError: ``parallel_tools`` issues calls as batches, or no call is pending.
        """
        if self.marked:
            raise errors.UsageError("parallel_tools issues calls as batches: use complete_batch()")
        self.complete_batch([result])

    def call_at(
        self,
        index: int,
        values: Sequence[Value],
        number: int,
        sources: Sequence[Any] | None = None,
    ) -> ToolCall:
        """The one place a call is built: the tool ``CALL`` at ``index`` with the popped
        ``values`` (plain data, as a snapshot holds them), numbered ``number``. ``sources``
        (the values' provenance) are given for a new call, not one rebuilt from a snapshot or a
        batch task's data: the data-flow policies are then checked on them first.

        Raises:
            UsageError: There is no tool ``CALL`` at ``index``.
            DataFlowRefused: A data-flow policy refuses an argument's sources.
            ToolArgumentError: A value does not fit its parameter (the tool's declared schema).
        """
        extern = self._tool_at(index)
        if extern is None:
            raise errors.UsageError(f"no tool CALL at instruction {index} (bad snapshot?)")
        ins = self.program.instructions[index]
        dataflow = self.compiled.dataflow
        if sources is not None and dataflow is not None:
            dataflow.check(index, ins, values, sources)
        args = extern.convert_args(values, line=ins.line, source=ins.text)
        return ToolCall(extern.name, args, index, ins.line, ins.text, number)

    def calls(self) -> Generator[ToolCall, Any, RunResult]:
        """Generator form: yields each :class:`ToolCall`, takes its result by ``send``.

        Example:
            >>> from llassembly import parse
            >>> def double(x: int) -> int:
            ...     return 2 * x
            >>> gen = Emulator(parse("PUSH 4\\nCALL double\\nPOP R1"), [double]).calls()
            >>> call = next(gen)
            >>> call.tool, call.args
            ('double', {'x': 4})
            >>> try:
            ...     gen.send(double(**call.args))
            ... except StopIteration as stop:
            ...     print(stop.value.registers)
            {'R1': 8}
        """
        while (request := self.advance()) is not None:
            result = yield request
            self._record(request, result)
        return self.result()

    def run(self, call: Callable[[ToolCall], Any] | None = None) -> RunResult:
        """Run to the end. ``call`` executes each tool call (default: call the tool directly);
        a batch's calls run at once on threads.

        Raises:
            UsageError: Without ``call``, the plan calls an async-only tool or one whose
                injected parameters only ``call`` can give; ``call`` is a coroutine function
                (nothing has run).
            ToolExecutionError: A tool raised (the original is its ``__cause__``).
            ExecutionError: A budget ran out or an instruction failed.
        """
        if inspect.iscoroutinefunction(call):
            raise errors.UsageError("run(call) takes a function; await arun(call) for an async one")
        if call is None:
            check_sync_tools(self.compiled.tools)
            self._check_injected()
        externs = self.compiled.externs
        given = call or (lambda r: externs[r.tool].call(r.args, line=r.line, source=r.source))

        def execute(request: ToolCall) -> Any:  # (a tool's own value may be awaitable: its value)
            if inspect.isawaitable(made := given(request)) and call is not None:
                if inspect.iscoroutine(made):
                    made.close()  # (never awaited: no warning)
                raise errors.UsageError("run(call): call gave an awaitable; await arun(call)")
            return made

        return drive(self._batches(), lambda batch: batch_results(batch, execute))

    async def arun(self, call: Callable[[ToolCall], Any] | None = None) -> RunResult:
        """Async :meth:`run`: ``call`` is awaited for each tool call, when what it returns is
        awaitable (default: the tool's own); a batch's calls are awaited together."""
        if call is None:
            self._check_injected()
        externs = self.compiled.externs
        given = call or (lambda r: externs[r.tool].acall(r.args, line=r.line, source=r.source))

        async def execute(request: ToolCall) -> Any:
            made = given(request)
            return await made if inspect.isawaitable(made) else made

        return await adrive(self._batches(), lambda batch: abatch_results(batch, execute))

    # -- internals --------------------------------------------------------------------------

    def _check_injected(self) -> None:
        """Refuse, before anything runs, tools whose injected parameters only ``call`` can give."""
        found = {f"{t.name!r} {t.uninjected}" for t in self.compiled.tools if t and t.uninjected}
        if found and not self.state.tool_calls:  # (a caller that made calls gives them)
            raise errors.UsageError(
                f"Emulator.run() cannot give the injected parameters of the tools "
                f"{'; '.join(sorted(found))}: nothing has run; add them to call.args in run(call), "
                "or run the plan with ToolsPlannerMiddleware or ToolsPlannerNode"
            )

    def _batches(self) -> Generator[list[ToolCall], list[Outcome], RunResult]:
        """Yields each batch, takes its outcomes by ``send`` and keeps each completed call in
        :attr:`history`. A failed call's results before it are kept; then its error is
        raised (a tool's exception as :func:`tool_error` words it)."""
        while batch := self.advance_batch():
            outcomes = yield batch
            for call, outcome in zip(batch, outcomes, strict=True):
                self._record(call, outcome)
        return self.result()

    def _record(self, call: ToolCall, result: Any) -> None:
        self.complete_batch([result])  # (calls() steps an unmarked machine: a batch of one)
        self.history.append(CallRecord(call, result))

    def _tool_at(self, index: int) -> Extern | None:
        tools = self.compiled.tools
        return tools[index] if 0 <= index < len(tools) else None

    def _joins(self, pc: int, first: int) -> bool:
        """Whether the tool ``CALL`` at ``pc`` joins the batch whose first call is at
        ``first``: it is marked, takes no pending value, and is a query if the batch's calls
        are (the agent path asks the query model itself and sends tools to the agent's tool
        node, so a batch holds one kind, and both paths give the same batches and messages)."""
        tools, n_params = self.compiled.tools, self.compiled.flow.stack_effect(pc)[0]
        waiting: list[Any] = self.state.stack[-n_params:] if n_params else []
        return (
            pc in self.marked
            and not any(type(v) is Pending for v in waiting)
            and tools[pc].query is tools[first].query  # type: ignore[union-attr]  # tool CALLs
        )

    def _values(
        self, index: int, result: Any, tested: bool
    ) -> tuple[tuple[Value, ...], BaseException | None]:
        """The values the call at ``index`` gives for ``result`` (the common case, one text or
        64-bit integer, without a conversion), and its error if it failed (a result it cannot
        read too): raised, unless the plan ``tested`` it; then its values are ``NONE``."""
        extern, ins = self.compiled.tools[index], self.program.instructions[index]
        assert extern is not None  # a state's waiting calls are checked when it is given
        error = result.error if isinstance(result, Failed) else None
        if error is None:
            if extern.n_results == 1 and (type(result) is str or is_int64(result)):
                return (result,), None
            try:
                return extern.to_values(result, line=ins.line, source=ins.text), None
            except errors.AsmRuntimeError as exc:  # this call's own error: tool_error keeps it
                error = exc
        if isinstance(error, Exception):  # worded alike on every path
            error = tool_error(ToolCall(extern.name, {}, index, ins.line, ins.text, 0), error)
        if not tested:
            raise error
        return (NONE,) * extern.n_results, error

    def _put_results(self, index: int, values: Sequence[Any], *, tested: bool = False) -> bool:
        """Put the results of the call at ``index`` where the plan reads them: in ``EAX`` by
        the EAX convention (then ``True``, see the cfg), else on the stack, the first on top;
        each derives from its tool."""
        st = self.state
        to_eax = index in self.compiled.flow.eax
        if to_eax:
            st.regs[EAX_INDEX] = values[0]
        else:
            st.stack.extend(reversed(values))
        if st.provenance is not None:  # shadow state: each result derives from its tool
            name = self.compiled.tools[index].name  # type: ignore[union-attr]  # a tool CALL
            st.provenance.results(name, len(values), to_eax, tested=tested)
        return to_eax

    def _begin_call(self, pc: int) -> ToolCall | None:
        """Make the tool ``CALL`` at ``pc``: its arguments popped, it is pending, or issued
        ahead when it is marked, the plan does not test it next (it completes first) and its
        results fit on the stack (they are :class:`Pending` values until it completes).
        ``None``: the plan tests it and its arguments were refused, which is its failure."""
        st = self.state
        extern, ins = self.compiled.tools[pc], self.program.instructions[pc]
        assert extern is not None  # steps and tools are built together
        if st.tool_calls >= self.max_tool_calls:
            raise self._exceeded(errors.ToolCallBudgetExceeded, st.tool_calls + 1, pc)
        self._check_clock(pc)
        stack, count = st.stack, self.compiled.flow.stack_effect(pc)[0]  # CALL tool, N: N
        split = len(stack) - count
        if split < 0:
            raise fail(
                ins,
                f"CALL {extern.name} needs {count} values on the stack, found {len(stack)}",
                plain=True,
            )
        values = stack[split:]
        shadow = st.provenance  # check and convert before popping: a refusal changes nothing
        sources = shadow.stack[split:] if shadow is not None else None
        try:
            call: ToolCall | None = self.call_at(pc, values, st.tool_calls + 1, sources)
        except (errors.ToolArgumentError, errors.DataFlowRefused) as exc:
            if pc not in self._tested:
                raise
            call, refused = None, exc
        del stack[split:]
        if shadow is not None:
            if extern.query:  # a model reads the arguments: its answer derives from them
                shadow.query = query_sources(NO_SOURCES.union(*shadow.stack[split:]))
            del shadow.stack[split:]
        if call is None:
            self._settle(pc, Failed(refused))
            if shadow is not None and sources is not None:  # EAX says why, quoting the
                quoted = NO_SOURCES.union(*sources)  # arguments: it (and the flags) derive
                shadow.put(EAX_INDEX, shadow.regs.get(EAX_INDEX, NO_SOURCES) | quoted)
                shadow.flags |= quoted  # from them too; its results from its tool alone
            return None
        st.tool_calls += 1
        depth = len(st.stack) + len(st.calls) + extern.n_results
        if pc not in self.marked or pc in self._tested or depth > self.max_stack_depth:
            st.pending = (pc, values)
        else:
            st.outstanding.append((pc, values, call.number))
            self._put_results(pc, [Pending(call.number, k) for k in range(extern.n_results)])
        return call

    def _check_clock(self, pc: int) -> None:
        """Refuse to go on past ``max_seconds`` from the run's first instruction."""
        if self.max_seconds is None or self._started is None:
            return
        elapsed = time.monotonic() - self._started
        if elapsed > self.max_seconds:
            raise self._exceeded(errors.WallClockExceeded, round(elapsed, 3), pc)

    def _exceeded(
        self, error: type[errors.BudgetExceeded], reached: float, pc: int
    ) -> errors.BudgetExceeded:
        """The ``error`` of a budget run out at the instruction at ``pc``: its limit is the setting
        ``error.budget`` names (``max_tool_calls``...), ``reached`` what the run would reach."""
        ins = self.program.instructions[pc]
        return error(getattr(self, error.budget), reached, line=ins.line, source=ins.text)


# -- which calls may run together --------------------------------------------------------------


def check_parallel_tools(value: Any) -> bool | Literal["read_only"] | tuple[str, ...]:
    """``parallel_tools`` as stored: ``True``/``False``, ``"read_only"`` or a tuple of names.

    Raises:
        UsageError: It is none of these.
    """
    if isinstance(value, bool) or value == READ_ONLY:
        return value  # type: ignore[no-any-return]  # a bool or "read_only"
    listed = isinstance(value, Sequence | frozenset | set) and not isinstance(value, str)
    if not listed or not all(isinstance(n, str) for n in value):
        raise errors.UsageError(
            f"parallel_tools must be True, False, 'read_only' or tool names, got {value!r}"
        )
    return tuple(value)


def marked_calls(compiled: CompiledProgram, parallel_tools: ParallelTools) -> frozenset[int]:
    """Indexes of the tool ``CALL``s that may run together (their tool is marked). A list
    marks the tools it names; ``"read_only"`` those that say they change nothing (a LangChain
    tool whose ``metadata`` has ``readOnlyHint: True``, MCP's tool annotation, which
    ``langchain-mcp-adapters`` copies into its metadata) and a query (``query_text``)."""

    def marked(extern: Extern) -> bool:
        if parallel_tools != READ_ONLY:
            return parallel_tools is True or extern.name in parallel_tools  # type: ignore[operator]
        metadata = getattr(extern.tool, "metadata", None)
        said = isinstance(metadata, Mapping) and metadata.get("readOnlyHint") is True
        return extern.query or said

    if isinstance(parallel_tools, tuple):  # (a misspelt name would mark nothing, unsaid)
        check_names("parallel_tools", compiled.externs, parallel_tools)
    if not parallel_tools:
        return frozenset()
    return frozenset(pc for pc, t in enumerate(compiled.tools) if t is not None and marked(t))


# -- what an instruction run ahead reads --------------------------------------------------------
#
# The rule (docs/language.md, *Independent calls at once*) comes from the instruction table
# (``effects``), never from a list of opcodes: a value an instruction only copies
# (``Effects.copies``) from a plain place to a plain place moves, pending or not; every other
# value it uses is read, and a RET that ends the plan, like the end itself, reads everything.

_Check: TypeAlias = "Callable[[MachineState], bool]"
_READS_KEY = "pending reads"


def _read_checks(compiled: CompiledProgram) -> tuple[_Check | None, ...]:
    """Per instruction, the test "would it read a pending value now?" (``None``: it reads
    none, or it is a tool ``CALL``, which the machine checks itself); built once per program."""
    if (found := compiled.cache.get(_READS_KEY)) is None:
        program, flow, steps = compiled.program, compiled.flow, compiled.steps
        ctx = Context(program, flow.end, compiled.max_stack_depth, compiled.layout)
        found = compiled.cache[_READS_KEY] = tuple(
            None if step is None else _read_check(ins, fx, ctx)
            for ins, fx, step in zip(program.instructions, flow.effects, steps, strict=True)
        )
    return found


def _plain(operand: Operand, ctx: Context) -> bool:
    """A place holding one value as it is: a register, a memory cell, a one-cell label."""
    if isinstance(operand, Name):
        label = ctx.layout.labels.get(operand.name.lower())
        return label is not None and len(label.cells) == 1
    return isinstance(operand, Reg | Mem)


def _read_check(ins: Instruction, fx: Effects, ctx: Context) -> _Check | None:
    if fx.info.flow == "return":  # a RET that ends the plan reads what the plan leaves
        return lambda st: not st.calls
    operands, copies = ins.operands, fx.copies
    # Positions whose value is only copied from a plain place to plain places.
    moved = {r for _w, r in copies if r != Effects.STACK and _plain(operands[r], ctx)}
    moved -= {r for w, r in copies if w != Effects.STACK and not _plain(operands[w], ctx)}
    pops_into_place = any(r == Effects.STACK and _plain(operands[w], ctx) for w, r in copies)
    read: list[Operand] = []
    for position, operand in enumerate(operands):
        # A place moved to or from, or written, reads what finds it: a cell's address, a
        # path's base and keys (a part written: the whole text is read and built again).
        read_whole = position in fx.reads and position not in moved
        read += (operand,) if read_whole else place_parts(operand)
    registers, found_cells, rows = parts(read, ctx)
    named = tuple(sorted({*registers, *fx.implicit_reads} - {0}))  # R0 always reads 0
    cells: list[Callable[[MachineState], Any]] = [getter(c, ctx, ins) for c in found_cells]
    reads_top = fx.info.pops > 0 and not pops_into_place
    if not (named or cells or rows or reads_top):
        return None

    def check(st: MachineState) -> bool:
        regs: list[Any] = st.regs
        if any(type(regs[i]) is Pending for i in named):
            return True  # (registers first: an address needs them)
        stack: list[Any] = st.stack
        if reads_top and stack and type(stack[-1]) is Pending:
            return True
        for cell in cells:
            try:
                if type(cell(st)) is Pending:
                    return True
            except errors.ExecutionError:
                return False  # the instruction fails there itself, as sequentially
        mem: dict[str, list[Any]] = st.mem
        return any(type(v) is Pending for key in rows for v in mem[key])

    return check


# -- running calls: sync and async bodies written once -------------------------------------------

_Req = TypeVar("_Req")
_Ret = TypeVar("_Ret")


def tool_error(call: ToolCall, exc: Exception) -> errors.ExecutionError:
    """What a tool's exception becomes: a :class:`ToolExecutionError` naming the tool and the
    line of this plan, with the original as its cause.

    Only an error already raised for this very call (its line and instruction, and its tool when
    it names one) is kept.
    Anything else, the library's own errors from inside the tool included (a tool that runs a
    plan of its own, whatever its lines), is the tool's failure: it must not escape
    ``on_tool_error``, be reported at another plan's line, or word the plan's own error.
    """
    own = (call.line, call.source, call.tool)
    if (
        isinstance(exc, errors.ExecutionError)
        and (exc.line, exc.source, getattr(exc, "tool", call.tool)) == own
    ):
        return exc
    error = errors.ToolExecutionError(call.tool, exc, line=call.line, source=call.source)
    error.__cause__ = exc
    return error


def drive(body: Generator[_Req, Any, _Ret], execute: Callable[[_Req], Any]) -> _Ret:
    """Run a sans-IO ``body`` (a generator that yields requests and receives their results)
    to its return value, answering each request with ``execute``: :func:`adrive`'s loop, run
    without an event loop (nothing in it waits, so it ends at its first step)."""

    async def now(request: _Req) -> Any:
        return execute(request)

    try:
        adrive(body, now).send(None)
    except StopIteration as stop:
        value: _Ret = stop.value
        return value
    raise RuntimeError("drive: the body awaited")  # pragma: no cover - nothing in it awaits


async def adrive(
    body: Generator[_Req, Any, _Ret], execute: Callable[[_Req], Awaitable[Any]]
) -> _Ret:
    """Async :func:`drive`: each request is awaited. A failing request is thrown back into the
    body, except LangGraph's interrupts, which always propagate untouched."""
    try:
        request = next(body)
        while True:
            try:
                result = await execute(request)
            except bubbling_errors():
                body.close()
                raise
            except Exception as exc:
                request = body.throw(exc)
                continue
            request = body.send(result)
    except StopIteration as stop:
        value: _Ret = stop.value
        return value


def batch_results(batch: Sequence[ToolCall], execute: Callable[[ToolCall], Any]) -> list[Outcome]:
    """Run a batch's calls at once on threads (one call runs on the caller's thread); each
    outcome is the result or :class:`Failed`. A LangGraph interrupt propagates."""

    def one(call: ToolCall) -> Outcome:
        try:
            return execute(call)
        except bubbling_errors():
            raise
        except Exception as exc:
            if invalid_resume(exc):  # an answer an interrupt refused: the run's failure
                raise
            return Failed(exc)

    if len(batch) == 1:
        return [one(batch[0])]
    with ThreadPoolExecutor(max_workers=len(batch)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, one, call) for call in batch]
        return [f.result() for f in futures]


async def abatch_results(
    batch: Sequence[ToolCall], execute: Callable[[ToolCall], Awaitable[Any]]
) -> list[Outcome]:
    """Async :func:`batch_results`: the calls are awaited together (``asyncio.gather``); an
    interrupt propagates once every call has ended, as LangGraph waits for a step's tasks."""

    async def one(call: ToolCall) -> Outcome:
        try:
            return await execute(call)
        except bubbling_errors() as exc:
            return _Bubbling(exc)  # (raised once every call has ended)
        except Exception as exc:  # (an answer an interrupt refused: the run's failure too)
            return _Bubbling(exc) if invalid_resume(exc) else Failed(exc)

    outcomes = await asyncio.gather(*(one(call) for call in batch))
    for outcome in outcomes:
        if isinstance(outcome, _Bubbling):
            raise outcome.error
    return outcomes


@dataclass(frozen=True)
class _Bubbling:
    """A batch call's interrupt, or an answer an interrupt refused (see :func:`abatch_results`)."""

    error: BaseException
