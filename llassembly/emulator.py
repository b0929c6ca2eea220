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

import math
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, TypeAlias, cast

from ._access import fail
from ._drive import adrive, drive
from ._steps import (
    DEFAULT_MAX_STACK_DEPTH,
    UNSET,
    CompiledProgram,
    _compile_steps,
    compile_program,
)
from .errors import (
    ExecutionError,
    InstructionBudgetExceeded,
    StackDepthExceeded,
    ToolCallBudgetExceeded,
    ToolExecutionError,
    UsageError,
    WallClockExceeded,
)
from .externs import Extern, check_sync_tools, externs_from
from .program import (
    EAX_INDEX,
    REGISTER_COUNT,
    Program,
    Value,
    register_index,
    register_name,
)

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
]

DEFAULT_MAX_INSTRUCTIONS = 1000
DEFAULT_MAX_TOOL_CALLS = 100
_CLOCK_EVERY = 256  # instructions between wall-clock checks

_FLAG_MODE_NAMES = ("unset", "ordered", "unordered")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # results pushed as they are (the rest: to_values)
_SNAPSHOT_NAMES = tuple(register_name(i) for i in range(1, REGISTER_COUNT))  # R0 is never saved


@dataclass(slots=True)
class MachineState:
    """Everything the machine knows; plain data.

    Attributes:
        pc: Index of the next instruction (``len(instructions)`` when finished).
        regs: Register slots (see :func:`~llassembly.program.register_index`).
        stack: The data stack, top last.
        calls: The return stack of ``CALL label``, top last.
        zf: Equal / zero flag.
        lt: Less-than flag.
        flag_mode: 0 unset, 1 ordered (numbers), 2 unordered (strings).
        executed: Instructions executed so far.
        tool_calls: Tool calls made so far.
        halted: The program has ended.
        pending: ``(instruction index, popped values)`` of a tool call awaiting its result.
        mem: The writable memory: data label (lower-cased) to its cells.
        answer: The lines the plan has said so far (``SAY``), in order.
    """

    pc: int = 0
    regs: list[Value] = field(default_factory=lambda: [0] * REGISTER_COUNT)
    stack: list[Value] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    zf: bool = False
    lt: bool = False
    flag_mode: int = UNSET
    executed: int = 0
    tool_calls: int = 0
    halted: bool = False
    pending: tuple[int, list[Value]] | None = None
    mem: dict[str, list[Value]] = field(default_factory=dict)
    answer: list[str] = field(default_factory=list)

    def snapshot(self) -> dict[str, Any]:
        """Return the state as a JSON- and msgpack-serialisable dict."""
        regs = self.regs[1:]
        # compress() keeps the truthy values in C; only an empty string is non-zero yet falsy.
        registers = dict(compress(zip(_SNAPSHOT_NAMES, regs, strict=True), regs))
        if "" in regs:
            registers.update((n, v) for n, v in zip(_SNAPSHOT_NAMES, regs, strict=True) if v == "")
        snap: dict[str, Any] = {
            "pc": self.pc,
            "registers": registers,
            "stack": list(self.stack),
            "return_stack": list(self.calls),
            "flags": {"zf": self.zf, "lt": self.lt, "mode": _FLAG_MODE_NAMES[self.flag_mode]},
            "executed": self.executed,
            "tool_calls": self.tool_calls,
            "halted": self.halted,
            "pending": None
            if self.pending is None
            else {"index": self.pending[0], "values": list(self.pending[1])},
        }
        if self.mem:  # only plans with memory carry it (older snapshots stay as they were)
            snap["memory"] = {key: list(cells) for key, cells in self.mem.items()}
        if self.answer:  # likewise, only plans that have said something carry an answer
            snap["answer"] = list(self.answer)
        return snap

    @classmethod
    def restore(cls, data: Mapping[str, Any]) -> MachineState:
        """Rebuild a state from :meth:`snapshot` output.

        Raises:
            UsageError: The dict is not a snapshot.
        """
        try:
            regs: list[Value] = [0] * REGISTER_COUNT
            for name, value in data["registers"].items():
                index = register_index(name)
                if index is None:
                    raise UsageError(f"snapshot names an unknown register {name!r}")
                regs[index] = value
            stack = list(data["stack"])
            pending = data["pending"]
            memory = {str(k): list(v) for k, v in (data.get("memory") or {}).items()}
            answer = list(data.get("answer") or ())
            if not all(type(line) is str for line in answer):
                raise UsageError("the snapshot's answer is not a list of strings")
            held = [
                *data["registers"].values(),
                *stack,
                *(pending["values"] if pending else ()),
                *(cell for cells in memory.values() for cell in cells),
            ]
            if not all(map(_is_value, held)):
                raise UsageError(
                    "the snapshot holds a value that is not a 64-bit int, finite float or string"
                )
            flags = data["flags"]
            return cls(
                pc=_count(data["pc"], "pc"),
                regs=regs,
                stack=stack,
                calls=[_count(x, "return address") for x in data["return_stack"]],
                zf=bool(flags["zf"]),
                lt=bool(flags["lt"]),
                flag_mode=_FLAG_MODE_NAMES.index(flags["mode"]),
                executed=_count(data["executed"], "executed"),
                tool_calls=_count(data["tool_calls"], "tool_calls"),
                halted=bool(data["halted"]),
                pending=None
                if pending is None
                else (_count(pending["index"], "pending index"), list(pending["values"])),
                mem=memory,
                answer=answer,
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise UsageError(f"not an emulator snapshot: {exc!r}"[:300]) from exc


def _count(value: Any, what: str) -> int:
    """A counter or index read from a snapshot: a non-negative int (not a bool, float, NaN)."""
    if type(value) is not int or not 0 <= value <= _INT_MAX:
        raise UsageError(f"not an emulator snapshot: {what} is {str(value)[:40]!r}")
    return value


def _is_value(value: Any) -> bool:
    """Whether ``value`` may live in a register or on the stack."""
    kind = type(value)
    if kind is str:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    return kind is float and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the plan wants made.

    Attributes:
        tool: The tool's name.
        args: Keyword arguments, converted to the tool's declared types.
        index: Index of the ``CALL`` instruction.
        line: Its line in the model's reply.
        source: Its text.
        number: 1 for the plan's first tool call, 2 for the second...
    """

    tool: str
    args: dict[str, Any]
    index: int
    line: int
    source: str
    number: int


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A tool call that was made and what it returned."""

    call: ToolCall
    result: Any


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a finished run leaves: non-zero registers, the stack, the calls made, counters,
    and the plan's answer (its ``SAY`` lines joined by newlines; ``""`` when it said none)."""

    registers: dict[str, Value]
    stack: list[Value]
    calls: list[CallRecord]
    instructions_executed: int
    tool_calls: int
    answer: str = ""


def tool_error(call: ToolCall, exc: Exception) -> BaseException:
    """What a tool's exception becomes: a :class:`ToolExecutionError` naming the tool and the
    line of this plan, with the original as its cause.

    Only an error already raised for this very call (same tool, same line) stays as it is.
    Anything else, including the library's own errors from inside the tool (a tool that runs a
    plan of its own), is the tool's failure: it must not escape ``on_tool_error`` or be
    reported at a line of another plan.
    """
    if (
        isinstance(exc, ExecutionError)
        and exc.line == call.line
        and getattr(exc, "tool", call.tool) == call.tool
    ):
        return exc
    error = ToolExecutionError(call.tool, exc, line=call.line, source=call.source)
    error.__cause__ = exc
    return error


ToolSpec: TypeAlias = Iterable[Any] | Mapping[str, Extern]


class Emulator:
    """Runs one verified plan within budgets.

    Args:
        program: A parsed program (or a :class:`CompiledProgram` to skip verifying again).
        tools: The tools the plan may call: LangChain tools, plain callables, or externs.
        max_instructions_to_exec: Most instructions one run may execute.
        max_tool_calls: Most tool calls one run may make.
        max_stack_depth: Most values on the data stack plus return addresses.
        max_seconds: Wall-clock limit for the run, or ``None``.
        state: A :class:`MachineState` or a :meth:`snapshot` dict to continue from.

    Raises:
        PlanRejected: The program fails verification (nothing has run).
        UsageError: A limit is not a positive number, or a tool cannot be adapted.
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
            if program.max_stack_depth != max_stack_depth:
                program = _compile_steps(program.program, program.externs, max_stack_depth)
            self.compiled = program
        else:
            externs = (
                tools if isinstance(tools, Mapping) else externs_from(cast(Iterable[Any], tools))
            )
            self.compiled = compile_program(program, externs, max_stack_depth=max_stack_depth)
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
        self._started: float | None = None
        self.history: list[CallRecord] = []

    # -- state ------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Return the machine state as plain data (see :meth:`MachineState.snapshot`)."""
        return self.state.snapshot()

    @property
    def finished(self) -> bool:
        """Whether the program has ended."""
        return self.state.halted

    def result(self) -> RunResult:
        """Return registers, stack, calls and counters as they are now."""
        st = self.state
        return RunResult(
            registers={register_name(i): v for i, v in enumerate(st.regs) if i and v != 0},
            stack=list(st.stack),
            calls=list(self.history),
            instructions_executed=st.executed,
            tool_calls=st.tool_calls,
            answer="\n".join(st.answer),
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
        if st.pending is None:
            raise UsageError("complete() called with no pending tool call; call advance() first")
        index = st.pending[0]
        extern = self.compiled.tools[index]
        if extern is None:
            raise UsageError("the pending call does not point at a tool CALL (bad snapshot?)")
        n_results = extern.n_results
        kind = type(result)
        if n_results == 1 and (kind is str or (kind is int and _INT_MIN <= result <= _INT_MAX)):
            values: tuple[Value, ...] = (result,)  # the common case: one string or 64-bit int
        else:
            ins = self.program.instructions[index]
            values = extern.to_values(result, line=ins.line, source=ins.text)
        depth = len(st.stack) + len(st.calls) + len(values)
        if depth > self.max_stack_depth:
            ins = self.program.instructions[index]
            raise StackDepthExceeded(self.max_stack_depth, depth, line=ins.line, source=ins.text)
        if index in self.compiled.eax_calls:  # its result is read in EAX (see _layout)
            st.regs[EAX_INDEX] = values[0]
        else:
            st.stack.extend(reversed(values))
        st.pending = None
        st.pc = index + 1

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
        return drive(self._recorded_calls(), call or self._call_directly, tool_error)

    async def arun(self, call: Callable[[ToolCall], Awaitable[Any]] | None = None) -> RunResult:
        """Async :meth:`run`: ``call`` is awaited for each tool call (default: the tool's own)."""
        return await adrive(self._recorded_calls(), call or self._acall_directly, tool_error)

    # -- internals --------------------------------------------------------------------------

    def _check_values(self) -> None:
        st = self.state
        values = [*st.regs, *st.stack, *(st.pending[1] if st.pending else ())]
        values += [cell for cells in st.mem.values() for cell in cells]
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
        # Convert before popping: a value that does not fit leaves the stack as it was.
        args = extern.convert_args(values, line=ins.line, source=ins.text)
        del stack[split:]
        st.tool_calls += 1
        st.pending = (pc, values)
        return ToolCall(extern.name, args, pc, ins.line, ins.text, st.tool_calls)

    def _request(self, pc: int, values: list[Value]) -> ToolCall:
        extern = self.compiled.tools[pc]
        ins = self.program.instructions[pc]
        if extern is None:
            raise UsageError(f"no tool CALL at instruction {pc} (bad snapshot?)")
        args = extern.convert_args(values, line=ins.line, source=ins.text)
        number = self.state.tool_calls + (0 if self.state.pending else 1)
        return ToolCall(extern.name, args, pc, ins.line, ins.text, number)
