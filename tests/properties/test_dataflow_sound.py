"""Provenance is sound: what the summary says of the data flows holds on every run, and a value
whose sources do not name a tool does not change when that tool's results do.

Random plans that verify (:mod:`sound_plans`: branches, loops, subroutines, the EAX convention,
registers saved on the stack, memory, ``SETcc``/``CMOVcc``, paths, templates, text), with more
of what provenance follows put in at random places (cells written and read through an index
register or an address, the flags chosen into a register, values moved through memory and the
stack), and every register passed to a tool at the end (so the summary's flows of each are
checked), run with random tool results under data-flow policies that refuse nothing, one
instruction at a time. For each call the sources of its arguments are read off the machine's
shadow just before the ``CALL``, and:

* **the summary is sound**: each argument's sources on the run lie within the summary's
  ``sources`` for that call site and hold its ``certain`` ones;
* **the machine is sound** (non-interference along a path): the run is made again with other
  results for one tool ``T`` (the other tools' results unchanged). When both runs take the same
  path (the same instructions in the same order: control dependence is not followed, by
  design), every argument and every register whose value differs between the two names ``T``
  among its sources in one of them.

The seed is fixed; 300 plans are tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from sound_plans import EXTERNS, INTS, RESULTS, RUN_LIMITS, SOUND_LIMITS, plans

from llassembly import check, only_from, summarize
from llassembly.analysis.constants import same_value
from llassembly.errors import LLAssemblyError
from llassembly.language.parser import parse
from llassembly.language.program import Program, Value
from llassembly.machine.emulator import Emulator

PLANS_TRIED = 300
_SOUND = settings(
    max_examples=PLANS_TRIED,
    derandomize=True,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
# A policy on every argument that allows every tool: the machine keeps provenance, and
# refuses nothing.
EVERY_TOOL = list(EXTERNS)
NOTHING_REFUSED = [
    only_from(name, str(param.name), EVERY_TOOL)
    for name, extern in EXTERNS.items()
    for param in extern.params
]


_int = st.sampled_from(INTS)
_cell = st.integers(0, 2)


@st.composite
def _moves(draw: st.DrawFn) -> list[str]:
    """Lines provenance follows, on the integer registers (``EDI``: no plan uses it)."""
    r, s, t = draw(_int), draw(_int), draw(_int)
    return draw(
        st.sampled_from(
            [
                [f"MOV EDI, {draw(_cell)}", f"MOV [row + EDI*4], {r}"],
                [f"MOV EDI, {r}", "AND EDI, 1", f"MOV [row + EDI*4], {s}"],
                [f"MOV EDI, {draw(_cell)}", f"MOV {r}, [row + EDI*4]"],
                ["LEA EDI, [row]", f"MOV [EDI + {4 * draw(_cell)}], {r}"],
                ["LEA EDI, [row]", f"MOV {r}, [EDI + {4 * draw(_cell)}]"],
                [f"CMP {r}, {s}", f"SETL {t}"],
                [f"CMP {r}, {s}", f"CMOVGE {t}, {s}"],
                [f"PUSH {r}", "POP [x]"],
                [f"XCHG {r}, [x]"],
                [f"MOV {r}, [row + 8]"],
            ]
        )
    )


@st.composite
def probed_plans(draw: st.DrawFn) -> str:
    """A plan of :func:`sound_plans.plans` with :func:`_moves` put in its main code, and every
    register passed to ``put`` (integers) or ``send`` (text) before its ``HLT``."""
    text = draw(plans())
    head, tail = text.split("    HLT\n", 1)
    lines = head.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    MOV R6,")) + 1
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(start, len(lines)))
        lines[at:at] = [f"    {line}" for line in draw(_moves())]
    probes = [f"    PUSH {r}\n    CALL put" for r in INTS]
    probes += [f"    PUSH {r}\n    PUSH 1\n    CALL send" for r in ("R7", "R8")]
    return "\n".join([*lines, *probes, "    HLT", tail])


@dataclass
class Run:
    """One run: the instructions it ran, each call's ``(CALL index, argument values, their
    sources)``, and the registers and their sources at the end."""

    trace: list[int] = field(default_factory=list)
    calls: list[tuple[int, list[Value], list[frozenset[str]]]] = field(default_factory=list)
    registers: list[Value] = field(default_factory=list)
    sources: dict[int, frozenset[str]] = field(default_factory=dict)


def run(program: Program, results: dict[int, Any]) -> Run:
    """Run ``program``, call ``n`` getting ``results[n]``; stop where the run stops."""
    emu = Emulator(program, EXTERNS, dataflow=NOTHING_REFUSED, **RUN_LIMITS)
    st_, done = emu.state, Run()
    shadow = st_.provenance
    assert shadow is not None
    try:
        while not emu.finished:
            pc = st_.pc
            done.trace.append(pc)
            tool = emu.compiled.tools[pc] if pc < len(emu.compiled.tools) else None
            arity = emu.compiled.flow.stack_effect(pc)[0] if tool is not None else 0  # type: ignore[union-attr]
            values = st_.stack[len(st_.stack) - arity :] if arity else []
            sources = shadow.stack[len(shadow.stack) - arity :] if arity else []
            assert len(shadow.stack) == len(st_.stack)
            call = emu.advance(1)
            if call is not None:
                done.calls.append((pc, list(values), list(sources)))
                emu.complete(results[call.number])
    except LLAssemblyError:  # a budget ran out, or an instruction failed: both runs alike
        pass
    done.registers = list(st_.regs)
    done.sources = dict(shadow.regs)
    return done


def draw_results(program: Program, data: st.DataObject, label: str) -> dict[int, Any]:
    """Results for the calls of a first run, drawn as the run asks for them."""
    results: dict[int, Any] = {}
    emu = Emulator(program, EXTERNS, **RUN_LIMITS)
    try:
        while (call := emu.advance()) is not None:
            drawn = RESULTS[call.tool] if call.tool in RESULTS else st.none()
            results[call.number] = data.draw(drawn, label=f"{label} {call.number}")
            emu.complete(results[call.number])
    except LLAssemblyError:
        pass
    return results


def tools_of(program: Program, results: dict[int, Any]) -> dict[int, str]:
    """The tool of each call number, on the run with these results."""
    emu = Emulator(program, EXTERNS, **RUN_LIMITS)
    called: dict[int, str] = {}
    try:
        while (call := emu.advance()) is not None:
            called[call.number] = call.tool
            emu.complete(results[call.number])
    except LLAssemblyError:
        pass
    return called


@_SOUND
@given(probed_plans(), st.data())
def test_provenance_is_sound_against_the_summary_and_against_other_results(
    text: str, data: st.DataObject
) -> None:
    program = parse(text)
    assert isinstance(program, Program)
    assume(check(program, EXTERNS) == ())  # a line put in may make a plan the verifier refuses
    first = draw_results(program, data, "result")
    one = run(program, first)

    # The summary's flows hold on this run.
    summary = summarize(program, EXTERNS, **SOUND_LIMITS)
    if summary.flows_known:
        lines = {program.instructions[pc].line for pc, _, _ in one.calls}
        sites = {s.line: s for use in summary.tools for s in use.sites if s.line in lines}
        for pc, _, sources in one.calls:
            site = sites[program.instructions[pc].line]
            for argument, held in zip(site.arguments, sources, strict=False):  # N pushed
                assert held <= set(argument.sources), (site.line, argument, held)
                assert set(argument.certain) <= held, (site.line, argument, held)

    # Other results for one tool: what changes names it, along the same path.
    called = tools_of(program, first)
    varied = sorted({called[n] for n in first if called[n] in RESULTS})
    if not varied:
        return
    tool = data.draw(st.sampled_from(varied), label="tool varied")
    second = {
        n: data.draw(RESULTS[tool], label=f"other {n}") if called[n] == tool else result
        for n, result in first.items()
    }
    two = run(program, second)
    event("the same path" if one.trace == two.trace else "another path")
    if one.trace != two.trace:
        return  # another path: control dependence is not followed
    for (pc, values_1, sources_1), (_, values_2, sources_2) in zip(
        one.calls, two.calls, strict=True
    ):
        for a, b, s1, s2 in zip(values_1, values_2, sources_1, sources_2, strict=True):
            if not same_value(a, b):
                assert tool in s1 | s2, (program.instructions[pc].line, a, b, s1, s2)
    for reg, (a, b) in enumerate(zip(one.registers, two.registers, strict=True)):
        if reg and not same_value(a, b):  # (R0 reads 0 whatever its slot holds)
            held = one.sources.get(reg, frozenset()) | two.sources.get(reg, frozenset())
            assert tool in held, (reg, a, b, held)
