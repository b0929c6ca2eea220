"""Independent calls at once: the machine runs ahead of tool calls marked ``parallel_tools``.

When a marked tool ``CALL`` is reached, its arguments are popped and the call is issued; its
results are :class:`~llassembly.machine.state.Pending` values where the sequential run would put
them (on the stack, or in ``EAX`` by the EAX convention), and the machine goes on. A pending
value moves like any value (``POP``, ``MOV``, ``PUSH``, into memory); the machine stops before
the first instruction that would *read* one (the rule is :mod:`llassembly.machine.pending`'s),
and before:

* a tool ``CALL`` of an unmarked tool (its side effects keep their order: it waits for every
  outstanding call);
* the end of the plan;
* a budget (instructions, tool calls, wall clock) that runs out: the error is raised once the
  outstanding calls have completed, as the sequential run raises it after them.

A marked call whose results would not fit on the stack is issued last in its batch, with no
pending value: it completes as a sequential call. An instruction failing while calls are
outstanding is remembered (:attr:`MachineState.fault`) and raised after their results are in,
so errors surface exactly where the sequential run raises them. Results are given in program
order and fill every place their pending values went; the plan's meaning is the sequential
meaning. Everything here is plain data, so a snapshot taken mid-batch resumes anywhere.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from llassembly import errors
from llassembly.analysis.dataflow import Sources
from llassembly.errors import (
    AsmRuntimeError,
    ExecutionError,
    InstructionBudgetExceeded,
    UsageError,
)
from llassembly.language.instructions import EAX_INDEX
from llassembly.language.program import Value
from llassembly.machine.drive import bubbling
from llassembly.machine.pending import Check, check_pending, fill
from llassembly.machine.state import (
    CallRecord,
    MachineState,
    Pending,
    RunResult,
    ToolCall,
)

if TYPE_CHECKING:
    from llassembly.machine.externs import Extern
    from llassembly.machine.steps import CompiledProgram

__all__ = [
    "READ_ONLY",
    "Failed",
    "Machine",
    "ParallelTools",
    "abatch_results",
    "advance_batch",
    "batch_results",
    "batch_slots",
    "batched_calls",
    "call_request",
    "check_parallel_tools",
    "complete_batch",
    "marked_calls",
    "read_only",
]

ParallelTools: TypeAlias = "bool | Literal['read_only'] | Sequence[str]"
READ_ONLY = "read_only"
"""``parallel_tools`` for the tools whose metadata says they change nothing (see
:func:`read_only`)."""
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Failed:
    """A call of a batch that raised: ``error`` is what it raised."""

    error: BaseException


def check_parallel_tools(value: Any) -> bool | Literal["read_only"] | tuple[str, ...]:
    """``parallel_tools`` as stored: ``True``/``False``, ``"read_only"`` or a tuple of tool
    names.

    Raises:
        UsageError: It is none of these.
    """
    if isinstance(value, bool) or value == READ_ONLY:
        return value  # type: ignore[no-any-return]  # a bool or "read_only"
    wrong = f"parallel_tools must be True, False, 'read_only' or tool names, got {value!r}"
    if isinstance(value, str) or not isinstance(value, Sequence | frozenset | set):
        raise UsageError(wrong)
    names = tuple(value)
    if not all(isinstance(n, str) for n in names):
        raise UsageError(wrong)
    return names


def read_only(extern: Extern) -> bool:
    """Whether a tool says it changes nothing: a LangChain tool whose ``metadata`` has
    ``readOnlyHint: True`` (MCP's tool annotation; ``langchain-mcp-adapters`` copies a tool's
    annotations into its metadata)."""
    metadata = getattr(extern.tool, "metadata", None)
    return isinstance(metadata, Mapping) and metadata.get("readOnlyHint") is True


def marked_calls(compiled: CompiledProgram, parallel_tools: ParallelTools) -> frozenset[int]:
    """Indexes of the tool ``CALL``s that may run together (their tool is marked). A query
    (``query_text``) changes nothing, so ``"read_only"`` marks it too; a list marks it when it
    names it."""
    if parallel_tools is False or not parallel_tools:
        return frozenset()
    if parallel_tools == READ_ONLY:
        return frozenset(
            pc for pc, t in enumerate(compiled.tools) if t and (t.query or read_only(t))
        )
    names = None if parallel_tools is True else set(parallel_tools)
    return frozenset(
        pc
        for pc, tool in enumerate(compiled.tools)
        if tool is not None and (names is None or tool.name in names)
    )


# -- faults: an instruction that failed while calls were outstanding, as plain data ------------


def fault_record(exc: ExecutionError) -> dict[str, Any]:
    """A failed instruction's error as plain data (rebuilt by :func:`fault_error`)."""
    record: dict[str, Any] = {
        "type": type(exc).__name__,
        "detail": exc.detail,
        "line": exc.line,
        "source": exc.source,
    }
    for attr in ("limit", "reached"):
        if hasattr(exc, attr):
            record[attr] = getattr(exc, attr)
    return record


def fault_error(record: Mapping[str, Any]) -> ExecutionError:
    """The error a :func:`fault_record` describes."""
    line, source = int(record.get("line", 0)), str(record.get("source", ""))
    kind = getattr(errors, str(record.get("type")), None)
    if (
        isinstance(kind, type)
        and issubclass(kind, errors.BudgetExceeded)
        and "limit" in record
        and "reached" in record
    ):
        return kind(record["limit"], record["reached"], line=line, source=source)
    if kind is AsmRuntimeError or kind is None:
        return AsmRuntimeError(str(record.get("detail", "")), line=line, source=source)
    return ExecutionError(str(record.get("detail", "")), line=line, source=source)


def check_outstanding(compiled: CompiledProgram, st: MachineState) -> None:
    """Refuse outstanding calls that are not this program's, or pending values that are not
    theirs."""
    tools, end = compiled.tools, len(compiled.tools)
    results: dict[int, int] = {}
    for index, _values, number in st.outstanding:
        tool = tools[index] if 0 <= index < end else None
        if tool is None or number in results:
            raise UsageError("the state's outstanding call is not a tool CALL of this program")
        results[number] = tool.n_results
    check_pending(st, results)
    if st.fault is not None and not isinstance(st.fault.get("type"), str):
        raise UsageError("the state's fault is not an error record")


class Machine(Protocol):
    """What running ahead needs of the machine (an ``llassembly.emulator.Emulator``)."""

    state: MachineState
    compiled: CompiledProgram
    marked: frozenset[int]
    history: list[CallRecord]
    max_instructions_to_exec: int
    max_stack_depth: int
    _reads: tuple[Check | None, ...]
    _fault_error: ExecutionError | None

    def result(self) -> RunResult: ...
    def complete(self, result: Any) -> None: ...
    def advance_batch(self, max_steps: int | None = None) -> list[ToolCall]: ...
    def complete_batch(self, results: Sequence[Any]) -> None: ...
    def _deadline(self) -> float | None: ...
    def _check_clock(self, deadline: float, pc: int) -> None: ...
    def _begin_call(self, pc: int) -> ToolCall: ...
    def _request(self, pc: int, values: list[Value]) -> ToolCall: ...


# -- the engine --------------------------------------------------------------------------------


def call_request(
    compiled: CompiledProgram,
    index: int,
    values: Sequence[Value],
    number: int,
    sources: Sequence[Sources] | None = None,
) -> ToolCall:
    """The call the tool ``CALL`` at ``index`` makes with the popped ``values`` (plain data, as
    a snapshot holds them), numbered ``number``: the one place a tool call is built.

    ``sources`` are the values' provenance when the call is first made (the machine's
    ``_begin_call``): the program's data-flow policies are checked on them here, before
    anything else. A call built again from a snapshot (pending, outstanding, a batch's task)
    was checked when it was made and passes none.

    Raises:
        UsageError: There is no tool ``CALL`` at ``index``.
        DataFlowRefused: A data-flow policy refuses an argument's sources.
        ToolArgumentError: A value does not fit its parameter.
    """
    extern = compiled.tools[index] if 0 <= index < len(compiled.tools) else None
    if extern is None:
        raise UsageError(f"no tool CALL at instruction {index} (bad snapshot?)")
    ins = compiled.program.instructions[index]
    if sources is not None and compiled.dataflow is not None:
        compiled.dataflow.check(index, ins, values, sources)
    args = extern.convert_args(values, line=ins.line, source=ins.text)
    return ToolCall(extern.name, args, index, ins.line, ins.text, number)


def batch_slots(st: MachineState) -> list[tuple[int, list[Value], int]]:
    """``(index, values, number)`` of each call of the outstanding batch, in program order (the
    plain data :func:`call_request` rebuilds each call from)."""
    slots = [(index, list(values), number) for index, values, number in st.outstanding]
    if st.pending is not None:
        slots.append((st.pending[0], list(st.pending[1]), st.tool_calls))
    return slots


def _requests(emu: Machine) -> list[ToolCall]:
    """The outstanding batch again (a restored snapshot picks up where it stopped)."""
    return [call_request(emu.compiled, *slot) for slot in batch_slots(emu.state)]


def advance_batch(emu: Machine, max_steps: int | None = None) -> list[ToolCall]:
    """See :meth:`Emulator.advance_batch`."""
    st = emu.state
    if st.outstanding or st.pending is not None:
        return _requests(emu)
    if st.fault is not None:
        error = emu._fault_error or fault_error(st.fault)
        st.fault, emu._fault_error = None, None
        raise error
    if st.halted:
        return []
    compiled, marked, reads = emu.compiled, emu.marked, emu._reads
    steps, tools, eax = compiled.steps, compiled.tools, compiled.eax_calls
    end, limit, max_depth = len(steps), emu.max_instructions_to_exec, emu.max_stack_depth
    deadline = emu._deadline()
    pc, executed = st.pc, st.executed
    pause = limit if max_steps is None else executed + max_steps
    stack: list[Any] = st.stack
    batch: list[ToolCall] = []
    try:
        while pc < end:
            if executed >= limit or (executed >= pause and not batch):
                if batch:
                    break  # the budget error comes after the batch's results, as sequentially
                if max_steps is not None and executed >= pause:
                    return []  # paused after max_steps (the budget is checked next time)
                ins = compiled.program.instructions[pc]
                raise InstructionBudgetExceeded(limit, executed + 1, line=ins.line, source=ins.text)
            if deadline is not None and executed % 256 == 0:
                try:
                    emu._check_clock(deadline, pc)
                except ExecutionError:
                    if not batch:
                        raise
                    break  # raised again once the batch's results are in
            step = steps[pc]
            if step is None:
                extern = tools[pc]
                n_params = len(extern.params) if extern is not None else 0
                if batch and (
                    pc not in marked
                    or (n_params and any(type(v) is Pending for v in stack[-n_params:]))
                    or _is_query(extern) is not _is_query(tools[batch[0].index])
                ):
                    break  # waits for the outstanding calls (queries and tools apart)
                executed += 1
                try:
                    call = emu._begin_call(pc)  # its checks come before it changes anything
                except ExecutionError:
                    if not batch:
                        raise
                    executed -= 1  # raised again once the batch's results are in
                    break
                batch.append(call)
                n_results = extern.n_results if extern is not None else 0
                depth = len(stack) + len(st.calls) + n_results
                if pc not in marked or depth > max_depth:
                    break  # issued last in its batch: it completes as a sequential call
                values: list[Value] = st.pending[1] if st.pending is not None else []
                st.pending = None
                st.outstanding.append((pc, values, call.number))
                results: list[Any] = [Pending(call.number, k) for k in range(n_results)]
                if pc in eax:  # its one result is read in EAX (the EAX convention)
                    st.regs[EAX_INDEX] = results[0]
                else:
                    stack.extend(reversed(results))  # the first result on top
                if st.provenance is not None and extern is not None:  # each result: its tool
                    st.provenance.results(extern.name, n_results, pc in eax)
                pc += 1
                continue
            if batch and (check := reads[pc]) is not None and check(st):
                break  # it would read a result not in yet
            executed += 1
            try:
                pc = step(st, pc)
            except ExecutionError as exc:
                if not batch:
                    raise
                st.fault, emu._fault_error = fault_record(exc), exc
                break
    finally:
        st.pc, st.executed = pc, executed
    if not batch:
        st.halted = True
    return batch


def _is_query(extern: Extern | None) -> bool:
    """Whether a call is a query: a batch holds queries only or tools only, since the agent
    path asks the query model itself and sends tools to the agent's tool node (so both
    paths give the same batches, and the same messages)."""
    return extern is not None and extern.query


def _values_of(emu: Machine, index: int, result: Any) -> tuple[Value, ...]:
    extern = emu.compiled.tools[index]
    if extern is None:
        raise UsageError("an outstanding call does not point at a tool CALL (bad snapshot?)")
    kind = type(result)
    if extern.n_results == 1 and (kind is str or (kind is int and _INT_MIN <= result <= _INT_MAX)):
        return (result,)
    ins = emu.compiled.program.instructions[index]
    return extern.to_values(result, line=ins.line, source=ins.text)


def complete_batch(emu: Machine, results: Sequence[Any]) -> None:
    """See :meth:`Emulator.complete_batch`."""
    st = emu.state
    if len(results) > len(st.outstanding) + (st.pending is not None):
        raise UsageError(
            f"complete_batch() got {len(results)} results for "
            f"{len(st.outstanding) + (st.pending is not None)} outstanding calls"
        )
    for result in results:
        if not st.outstanding:
            emu.complete(result)
            continue
        index, _values, number = st.outstanding[0]
        fill(st, number, _values_of(emu, index, result))
        del st.outstanding[0]


# -- running batches ----------------------------------------------------------------------------


Outcome: TypeAlias = "Any | Failed"


def batched_calls(
    emu: Machine, wrap_error: Callable[[ToolCall, Exception], BaseException]
) -> Generator[list[ToolCall], list[Outcome], RunResult]:
    """The batch form of ``Emulator.calls``: yields each batch, takes its outcomes by ``send``
    and keeps each completed call in ``emu.history``. A failed call's results before it are
    kept; then its error is raised (wrapped by ``wrap_error``)."""
    batch = emu.advance_batch()
    while batch:
        outcomes = yield batch
        done: list[Any] = []
        failed: tuple[ToolCall, BaseException] | None = None
        for call, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Failed):
                failed = (call, outcome.error)
                break
            done.append(outcome)
        records: list[CallRecord] = []
        for call, result in zip(batch, done, strict=False):
            emu.complete_batch([result])
            records.append(CallRecord(call, result))
            emu.history.append(records[-1])
        if failed is not None:
            error = failed[1]
            if isinstance(error, Exception):
                raise wrap_error(failed[0], error) from error
            raise error
        batch = emu.advance_batch()
    return emu.result()


def batch_results(batch: Sequence[ToolCall], execute: Callable[[ToolCall], Any]) -> list[Outcome]:
    """Run a batch's calls at once on threads (one call runs on the caller's thread); each
    outcome is the result or :class:`Failed`. A LangGraph interrupt propagates."""

    def one(call: ToolCall) -> Outcome:
        try:
            return execute(call)
        except bubbling():
            raise
        except Exception as exc:
            return Failed(exc)

    if len(batch) == 1:
        return [one(batch[0])]
    with ThreadPoolExecutor(max_workers=len(batch)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, one, call) for call in batch]
        return [f.result() for f in futures]


async def abatch_results(
    batch: Sequence[ToolCall], execute: Callable[[ToolCall], Awaitable[Any]]
) -> list[Outcome]:
    """Async :func:`batch_results`: the calls are awaited together (``asyncio.gather``)."""

    async def one(call: ToolCall) -> Outcome:
        try:
            return await execute(call)
        except bubbling():
            raise
        except Exception as exc:
            return Failed(exc)

    return list(await asyncio.gather(*(one(call) for call in batch)))
