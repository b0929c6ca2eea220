"""The machine that runs a verified plan.

The core is synchronous and pure: it never calls a tool itself. :meth:`Emulator.advance` runs
instructions until the next tool call and returns a :class:`ToolCall`; the caller executes it
(now, later, over several game frames, from async code) and hands the result to
:meth:`Emulator.complete`. :meth:`Emulator.run` and :meth:`Emulator.arun` do that loop for you.

State is plain data (:class:`MachineState`); :meth:`Emulator.snapshot` gives a JSON-ready dict
and ``Emulator(..., state=snapshot)`` continues from it.

Speed: every instruction is compiled once into a small closure (one compiler per opcode, see
``llassembly._steps``), so the step loop is a list index and a call.

Example:
    >>> from llassembly.parser import parse
    >>> def add(a: int, b: int) -> int:
    ...     return a + b
    >>> emu = Emulator(parse("PUSH 2\\nPUSH 3\\nCALL add\\nPOP R1"), [add])
    >>> emu.run().registers
    {'R1': 5}
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any

from llassembly.analysis.policies import DataFlowPolicy
from llassembly.errors import (
    ExecutionError,
    InstructionBudgetExceeded,
    StackDepthExceeded,
    ToolCallBudgetExceeded,
    UsageError,
    WallClockExceeded,
)
from llassembly.language.instructions import EAX_INDEX, register_index, register_name
from llassembly.language.limits import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_STACK_DEPTH,
    DEFAULT_MAX_TOOL_CALLS,
    INT_MAX,
    INT_MIN,
)
from llassembly.language.program import (
    Program,
    Value,
)
from llassembly.machine import ahead as _ahead
from llassembly.machine import provenance as _provenance
from llassembly.machine.access import fail
from llassembly.machine.ahead import ParallelTools, call_request
from llassembly.machine.drive import (
    adrive,
    drive,
    tool_error,
)
from llassembly.machine.externs import (
    ToolSpec,
    check_sync_tools,
    externs_of,
)
from llassembly.machine.pending import read_checks
from llassembly.machine.state import (
    CallRecord,
    MachineState,
    Pending,
    RunResult,
    ToolCall,
)
from llassembly.machine.state import is_value as _is_value
from llassembly.machine.steps import (
    CompiledProgram,
    compile_program,
    recompiled,
)
from llassembly.machine.toolset import program_of

__all__ = [
    "DEFAULT_MAX_INSTRUCTIONS",
    "DEFAULT_MAX_STACK_DEPTH",
    "DEFAULT_MAX_TOOL_CALLS",
    "CallRecord",
    "CompiledProgram",
    "Emulator",
    "MachineState",
    "RunResult",
    "ToolCall",
    "compile_program",
    "tool_error",
]

_CLOCK_EVERY = 256  # instructions between wall-clock checks


class Emulator:
    """Runs one verified plan within budgets.

    Args:
        program: A parsed program (or a :class:`CompiledProgram` to skip verifying again).
        tools: The tools the plan may call: a list of LangChain tools, plain callables or
            externs, or a mapping of tool name to tool (see
            :data:`~llassembly.machine.externs.ToolSpec`).
        max_instructions_to_exec: Most instructions one run may execute.
        max_tool_calls: Most tool calls one run may make.
        max_stack_depth: Most values on the data stack plus return addresses.
        max_seconds: Wall-clock limit for the run, or ``None``.
        state: A :class:`MachineState` or a :meth:`snapshot` dict to continue from.
        parallel_tools: Tools whose calls may run together (``True`` for all): the machine
            runs ahead of their calls (:meth:`advance_batch`); the plan's meaning is the
            sequential one (see ``docs/language.md``, *Independent calls at once*).
        dataflow: Data-flow policies (``llassembly.policies``): a call whose argument derives
            from a result a policy refuses is not made (``DataFlowRefused``). Empty: those a
            :class:`CompiledProgram` was compiled with (none for a parsed program).

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
        max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
        max_seconds: float | None = None,
        state: MachineState | Mapping[str, Any] | None = None,
        parallel_tools: ParallelTools = False,
        dataflow: Sequence[DataFlowPolicy] = (),
    ) -> None:
        for label, limit in (
            ("max_instructions_to_exec", max_instructions_to_exec),
            ("max_tool_calls", max_tool_calls),
            ("max_stack_depth", max_stack_depth),
        ):
            if type(limit) is not int or limit < 1:  # bool is an int, but not a limit
                raise UsageError(f"{label} must be a positive integer, got {limit!r}")
        if max_seconds is not None and (
            type(max_seconds) not in (int, float) or not max_seconds > 0
        ):
            raise UsageError(f"max_seconds must be positive or None, got {max_seconds!r}")
        if isinstance(program, CompiledProgram):
            self.compiled = recompiled(program, max_stack_depth, tuple(dataflow))
        else:
            checked = program_of(program, "Emulator")
            externs = externs_of(tools)
            self.compiled = compile_program(
                checked, externs, max_stack_depth=max_stack_depth, dataflow=dataflow
            )
        self.program = self.compiled.program
        self.max_instructions_to_exec = max_instructions_to_exec
        self.max_tool_calls = max_tool_calls
        self.max_stack_depth = max_stack_depth
        self.max_seconds = max_seconds
        if state is None:
            self.state = MachineState(pc=self.program.entry, mem=self.compiled.initial_memory())
        elif isinstance(state, MachineState):
            self.state = state
            self._check_values()
        else:
            self.state = MachineState.restore(state)  # checks the values it reads
        self._check_state()
        if self.compiled.dataflow is not None:  # provenance: kept beside every value
            _provenance.attach(self.state)
        else:  # no step keeps it: what a snapshot brought would no longer fit the values
            self.state.provenance = None
        # The registers a snapshot reads: those the program may write, and any a given
        # state starts with (no instruction changes those others).
        self._registers = self.compiled.registers
        given: set[int] = set()  # a snapshot names the registers it holds
        if state is not None:
            given = (
                set(self.state.holding())
                if not isinstance(state, Mapping)
                else {i for i in map(register_index, map(str, state["registers"])) if i is not None}
            )
        if not given <= set(self._registers):
            self._registers = tuple(sorted({*self._registers, *given}))
        self._started: float | None = None
        self.history: list[CallRecord] = []
        self.parallel_tools = _ahead.check_parallel_tools(parallel_tools)
        self.marked = _ahead.marked_calls(self.compiled, self.parallel_tools)
        """Indexes of the tool ``CALL``s that may run together."""
        self._reads = read_checks(self.compiled) if self.marked else ()
        self._fault_error: ExecutionError | None = None

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
        regs = st.regs
        return RunResult(
            # Every register but those holding the integer 0, as in a snapshot: 0.0, -0.0
            # and "" are values.
            registers={register_name(i): regs[i] for i in st.holding() if i},
            stack=list(st.stack),
            calls=list(self.history),
            instructions_executed=st.executed,
            tool_calls=st.tool_calls,
            answer="\n".join(st.answer),
            returned=st.returned,
        )

    # -- stepping ---------------------------------------------------------------------------

    def advance(self, max_steps: int | None = None) -> ToolCall | None:
        """Run until the next tool call and return it, or return ``None`` when the plan ends.

        The call's arguments are already taken off the stack; give its result to
        :meth:`complete` before advancing again. If a call is already pending, it is
        returned again (so a restored snapshot picks up where it stopped).

        Args:
            max_steps: Execute at most this many instructions (a tool CALL counts as one)
                and return ``None`` with :attr:`finished` still false if no call was reached.
                ``None`` runs until a call or the end.

        Raises:
            ExecutionError: A budget ran out or an instruction failed; the state stays at
                the failing instruction.
        """
        st = self.state
        if st.outstanding or st.fault is not None:
            raise UsageError("calls were issued as a batch: use advance_batch()/complete_batch()")
        if st.pending is not None:
            return self._request(st.pending[0], st.pending[1])
        if st.halted:
            return None
        steps = self.compiled.steps
        end, limit = len(steps), self.max_instructions_to_exec
        deadline = self._deadline()
        pc, executed = st.pc, st.executed
        pause = limit if max_steps is None else executed + max_steps
        stop = min(limit, pause)
        try:
            while pc < end:
                if executed >= stop:
                    if max_steps is not None and executed >= pause:
                        return None  # paused after max_steps (the budget is checked next time)
                    ins = self.program.instructions[pc]
                    raise InstructionBudgetExceeded(
                        limit, executed + 1, line=ins.line, source=ins.text
                    )
                if deadline is not None and executed % _CLOCK_EVERY == 0:
                    self._check_clock(deadline, pc)
                executed += 1
                step = steps[pc]
                if step is None:
                    return self._begin_call(pc)
                pc = step(st, pc)
        finally:
            st.pc, st.executed = pc, executed
        st.halted = True
        return None

    def complete(self, result: Any) -> None:
        """Push the pending call's ``result`` (converted to values) and move past the CALL.

        Raises:
            UsageError: No call is pending.
            AsmRuntimeError: The result does not have the declared number of values.
            StackDepthExceeded: The results do not fit on the stack.
        """
        st = self.state
        if st.pending is None or st.outstanding:
            if st.outstanding:
                raise UsageError("calls were issued as a batch: use complete_batch()")
            raise UsageError("complete() called with no pending tool call; call advance() first")
        index = st.pending[0]
        extern = self.compiled.tools[index]
        if extern is None:
            raise UsageError("the pending call does not point at a tool CALL (bad snapshot?)")
        n_results = extern.n_results
        kind = type(result)
        if n_results == 1 and (kind is str or (kind is int and INT_MIN <= result <= INT_MAX)):
            values: tuple[Value, ...] = (result,)  # the common case: one string or 64-bit int
        else:
            ins = self.program.instructions[index]
            values = extern.to_values(result, line=ins.line, source=ins.text)
        depth = len(st.stack) + len(st.calls) + len(values)
        if depth > self.max_stack_depth:
            ins = self.program.instructions[index]
            raise StackDepthExceeded(self.max_stack_depth, depth, line=ins.line, source=ins.text)
        to_eax = index in self.compiled.eax_calls  # its result is read in EAX (see the cfg)
        if to_eax:
            st.regs[EAX_INDEX] = values[0]
        else:
            st.stack.extend(reversed(values))
        if st.provenance is not None:  # shadow state: each result derives from its tool
            st.provenance.results(extern.name, len(values), to_eax)
        st.pending = None
        st.pc = index + 1

    def advance_batch(self, max_steps: int | None = None) -> list[ToolCall]:
        """Run until the machine needs a result; return the calls issued (``[]`` at the end).

        Marked calls (``parallel_tools``) are issued and the machine runs ahead of them
        while no instruction needs their results; the batch is every call issued, in
        program order, and may be run at once. Without marks, each batch is one call, as
        :meth:`advance` returns it. An outstanding batch is returned again (so a restored
        snapshot picks up where it stopped).

        Args:
            max_steps: As for :meth:`advance`, until the first call of a batch (once a call is
                issued, the machine runs ahead to where it must wait).

        Raises:
            ExecutionError: A budget ran out or an instruction failed (when calls were
                outstanding, only now, after their results were given).
        """
        return _ahead.advance_batch(self, max_steps)

    def complete_batch(self, results: Sequence[Any]) -> None:
        """Give results to the batch's calls in program order (a prefix of it may be given;
        the rest stays outstanding). Each result is checked as :meth:`complete` checks it.

        Raises:
            UsageError: More results than outstanding calls.
            AsmRuntimeError: A result does not have the declared number of values.
            StackDepthExceeded: The last call's results do not fit on the stack.
        """
        _ahead.complete_batch(self, results)

    def calls(self) -> Generator[ToolCall, Any, RunResult]:
        """Generator form: yields each :class:`ToolCall`, takes its result by ``send``.

        Example:
            >>> from llassembly.parser import parse
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
        return (yield from self._recorded_calls())

    def run(self, call: Callable[[ToolCall], Any] | None = None) -> RunResult:
        """Run to the end. ``call`` executes each tool call (default: call the tool directly).

        Raises:
            UsageError: Without ``call``, the plan calls an async-only tool (nothing has run).
            ToolExecutionError: A tool raised (the original is its ``__cause__``).
            ExecutionError: A budget ran out or an instruction failed.
        """
        if call is None:
            check_sync_tools(
                (t.name for t in self.compiled.tools if t is not None), self.compiled.externs
            )
        execute = call or self._call_directly
        if self.marked:  # a batch's calls run at once on threads
            body = _ahead.batched_calls(self, tool_error)
            return drive(body, lambda batch: _ahead.batch_results(batch, execute))
        return drive(self._recorded_calls(), execute, tool_error)

    async def arun(self, call: Callable[[ToolCall], Awaitable[Any]] | None = None) -> RunResult:
        """Async :meth:`run`: ``call`` is awaited for each tool call (default: the tool's own);
        a batch's calls are awaited together."""
        execute = call or self._acall_directly
        if self.marked:
            body = _ahead.batched_calls(self, tool_error)
            return await adrive(body, lambda batch: _ahead.abatch_results(batch, execute))
        return await adrive(self._recorded_calls(), execute, tool_error)

    # -- internals --------------------------------------------------------------------------

    def _check_values(self) -> None:
        st = self.state
        held: list[Any] = [*st.regs, *st.stack, *(c for cells in st.mem.values() for c in cells)]
        values = [v for v in held if type(v) is not Pending]  # checked by _check_state
        values += [
            *(st.pending[1] if st.pending else ()),
            *(v for o in st.outstanding for v in o[1]),
        ]
        if not all(map(_is_value, values)):
            raise UsageError(
                "the state holds a value that is not a 64-bit int, finite float or string"
            )

    def _check_state(self) -> None:
        """Refuse a state that does not belong to this program (a stale or edited snapshot)."""
        st, end = self.state, len(self.program.instructions)
        if not 0 <= st.pc <= end or any(not 0 <= c <= end for c in st.calls):
            raise UsageError(f"the state points outside this program's {end} instructions")
        if st.pending is not None and not (
            0 <= st.pending[0] < end and self.compiled.tools[st.pending[0]] is not None
        ):
            raise UsageError("the state's pending call is not a tool CALL of this program")
        expected = self.compiled.initial_memory()
        if not st.mem and expected:  # a state built by hand before the plan had memory
            st.mem = expected
        if st.outstanding or st.fault is not None:
            _ahead.check_outstanding(self.compiled, st)
        if {k: len(v) for k, v in st.mem.items()} != {k: len(v) for k, v in expected.items()}:
            raise UsageError("the state's memory does not match this program's data labels")

    def _recorded_calls(self) -> Generator[ToolCall, Any, RunResult]:
        """:meth:`calls` that also keeps each call and its result in :attr:`history`."""
        request = self.advance()
        while request is not None:
            result = yield request
            self.complete(result)
            self.history.append(CallRecord(request, result))
            request = self.advance()
        return self.result()

    def _call_directly(self, request: ToolCall) -> Any:
        return self.compiled.externs[request.tool].call(request.args)

    async def _acall_directly(self, request: ToolCall) -> Any:
        return await self.compiled.externs[request.tool].acall(request.args)

    def _deadline(self) -> float | None:
        if self.max_seconds is None:
            return None
        if self._started is None:
            self._started = time.monotonic()
        return self._started + self.max_seconds

    def _check_clock(self, deadline: float, pc: int) -> None:
        now = time.monotonic()
        if now > deadline and self.max_seconds is not None and self._started is not None:
            ins = self.program.instructions[pc]
            raise WallClockExceeded(
                self.max_seconds, round(now - self._started, 3), line=ins.line, source=ins.text
            )

    def _begin_call(self, pc: int) -> ToolCall:
        st = self.state
        extern = self.compiled.tools[pc]
        ins = self.program.instructions[pc]
        if extern is None:  # pragma: no cover - steps and tools are built together
            raise UsageError("internal error: tool call without a tool")
        if st.tool_calls >= self.max_tool_calls:
            raise ToolCallBudgetExceeded(
                self.max_tool_calls, st.tool_calls + 1, line=ins.line, source=ins.text
            )
        if self.max_seconds is not None and self._started is not None:
            self._check_clock(self._started + self.max_seconds, pc)
        stack = st.stack
        split = len(stack) - len(extern.params)
        if split < 0:
            raise fail(
                ins,
                f"CALL {extern.name} needs {len(extern.params)} values on the stack, "
                f"found {len(stack)}",
            )
        values = stack[split:]
        shadow = st.provenance  # check and convert before popping: a refusal changes nothing
        sources = shadow.stack[split:] if shadow is not None else None
        call = call_request(self.compiled, pc, values, st.tool_calls + 1, sources)
        del stack[split:]
        if shadow is not None:
            if extern.query:  # a model reads the arguments: its answer derives from them
                shadow.asked(shadow.stack[split:])
            del shadow.stack[split:]
        st.tool_calls += 1
        st.pending = (pc, values)
        return call

    def _request(self, pc: int, values: list[Value]) -> ToolCall:
        """The pending call again (it was checked when it was made)."""
        number = self.state.tool_calls + (0 if self.state.pending else 1)
        return call_request(self.compiled, pc, values, number)
