"""Worst cases: what hostile replies and hostile tool results cost, in time and peak memory.

Two tables, every figure bounded by :data:`TIME_LIMIT_S` and :data:`MEMORY_LIMIT_MB`:

1. **Replies**: hand-made shapes that each stress one part of the pipeline, at 16 KB, 64 KB and
   1 MB, through what the planner does before any tool runs (parse and verify; the agent
   path's compiled program, or the graph path's plan graph at each granularity) and the repair
   request sent back when the reply is refused. Printed per shape: wall time per size, the
   growth exponent between the two largest sizes (1.0 is linear), peak traced memory and the
   repair request's length (at most 8 KB).
2. **Issue 24**: the worst case of each bound, end to end on the engine (parse, verify,
   compile, run) unless the row says otherwise: spaces in ``[...]``, ``SAY`` placeholders, the
   answer's length, rows read whole, nested and huge tool results, the approval summary of a
   31 KB plan with a policy, and ``CALL [rax]``-style operands for the verifier. The outcome
   column says whether the input was handled, refused with the library's own error, or
   crashed (an exception that is not the library's: flagged, see the summary line).

Exits with status 1 when a figure goes over its bound (``python -m benchmarks`` too, after
printing). Writes nothing. Every reply and tool here is hand-made; nothing is recorded.

Run: ``python -m benchmarks.bench_hostile [--quick]`` (``--quick``: 16 KB and 64 KB replies,
the agent path, and smaller worst cases).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from llassembly import (
    Emulator,
    ToolsPlannerMiddleware,
    check,
    compile_program,
    externs_from,
    parse_program,
    summarize,
)
from llassembly.analysis.policies import check_policies, max_calls, not_in_loop
from llassembly.errors import LLAssemblyError, PlanError
from llassembly.integration.messages import repair_request
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.language.limits import MAX_DATA_TEXT_CHARS

SIZES = (16_000, 64_000, 1_000_000)
TIME_LIMIT_S = 2.0
MEMORY_LIMIT_MB = 300.0
REPAIR_LIMIT = 8192


def get() -> int:
    """A reading."""
    return 1


def put(x: int) -> None:
    """Store x."""


def pay(amount: int) -> str:
    """Pay an amount."""
    return "paid"


TOOLS: list[Any] = [get, put, pay]
EXTERNS = externs_from(TOOLS)


def _fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    text = head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail
    if "{i}" in text:  # number the labels so each is defined once
        parts = text.split("{i}")
        text = "".join(f"{p}{i // 2}" if i < len(parts) - 1 else p for i, p in enumerate(parts))
    return text


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# -- 1. replies -----------------------------------------------------------------------------------

REPLIES: dict[str, Callable[[int], str]] = {
    # RET fans out to every call site: the graph compiler's old quadratic case.
    "call sites": lambda n: _fill(
        "CALL sub\nCALL get\nPOP R1\n", n, "```asm\n", "HLT\nsub: NOP\nRET\n```"
    ),
    # One token of digits that is no number: the number pattern's old backtracking case.
    "digit run": lambda n: "```asm\nPUSH " + "1" * (n - 20) + "x\n```",
    # Numbers of a megabyte: hexadecimal, decimal with a fraction, a long exponent.
    "huge numbers": lambda n: (
        f"```asm\nPUSH 0x{'f' * (n // 3)}\nPUSH 1{'1' * (n // 3)}.5\n"
        f"PUSH 1e{'9' * (n // 3 - 40)}\n```"
    ),
    # Every label defined again: one diagnostic each, the old 450 MB repair request.
    "labels": lambda n: _fill("a: ", n, "```asm\n", "NOP\n```"),
    # Many lines of prose around a little code, with think tags: choosing the code lines.
    "prose": lambda n: _fill(
        "Well, <think>maybe</think> we push it; then we call.\n", n, "", "PUSH 1\nCALL put\n"
    ),
    # The most lines a reply can have, each a short instruction (past them it is refused).
    "many lines": lambda n: _fill("MOV R1, [t + ESI*4]\n", n, "```asm\nt dd 1, 2\n", "```"),
    # Spaces inside [...]: the memory operand's old quadratic case.
    "spaces in [ ]": lambda n: "```asm\nMOV R1, [x" + " " * (n - 30) + "y]\nHLT\n```",
    # Deep brackets in an operand, and deep JSON in data.
    "deep brackets": lambda n: "```asm\nMOV R1, " + "[" * (n // 2 - 20) + "x" + "]" * (n // 2),
    "nested data": lambda n: "section .data\nx db " + "[" * (n - 60) + "\nsection .text\nHLT",
    # A data row of more values than a plan may hold, and text repeated past its limit.
    "data cells": lambda n: "```asm\nsection .data\nx dd " + "1, " * (n // 3 - 20) + "1\n```",
    "times text": lambda n: "```asm\nx times 65536 db '" + "a" * (n - 40) + "'\n```",
    # A SAY with a placeholder every four characters.
    "placeholders": lambda n: '```asm\nSAY "' + "{R1}" * (n // 4 - 5) + '"\n```',
    # A long string of escapes and of characters beyond ASCII, in code and in prose.
    "long string": lambda n: '```asm\nPUSH "' + 'ab\\"\\\\c' * (n // 7 - 3) + '"\nCALL put\n```',
    "unicode": lambda n: _fill("Ünïcødé 漢字 🙂 ", n, "", "\nPUSH 'é漢🙂'\nCALL put\n"),
    # Branches and loops for the verifier: many labels and conditional jumps.
    "branches": lambda n: _fill(
        "CALL get\nPOP R1\nCMP R1, 3\nJL l{i}\nPUSH R1\nCALL put\nl{i}: NOP\n",
        n,
        "```asm\n",
        "HLT\n```",
    ),
}
PATHS = (("agent", "block"), ("graph", "block"), ("graph", "instruction"))


def _prepare(text: str, execution: str, granularity: str) -> str:
    """Parse, verify and build what a run needs; return ``"ok"`` or the repair request."""
    options = PlannerOptions(execution=execution, granularity=granularity)  # type: ignore[arg-type]
    turn = Planner(options)
    externs = turn.externs_for(TOOLS)
    try:
        turn.check(text, externs)
    except PlanError as error:
        return repair_request(error)
    return "ok"


def _timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """``run()``'s value, its wall time (an untraced run) and its peak traced memory in MB."""
    gc.collect()
    start = time.perf_counter()
    value = run()
    seconds = time.perf_counter() - start
    gc.collect()
    tracemalloc.start()
    try:
        run()
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    return value, seconds, peak


def replies_table(quick: bool) -> tuple[dict[str, float], list[str]]:
    """Print table 1; return its worst figures and the rows over a bound."""
    over: list[str] = []
    sizes = SIZES[:2] if quick else SIZES
    paths = PATHS[:1] if quick else PATHS
    worst = {"seconds": 0.0, "peak_mb": 0.0, "repair": 0.0, "exponent": 0.0}
    print("1. hostile replies: parse + verify + what the run needs, before any tool runs")
    head = "  ".join(f"{s // 1000:>7} KB" for s in sizes)
    print(f"  {'reply':<14} {'path':<18} {head}   growth  peak    outcome at the largest")
    for name, build in REPLIES.items():
        for execution, granularity in paths:
            rows = []
            for size in sizes:
                text = build(size)
                prepare = functools.partial(_prepare, text, execution, granularity)
                outcome, seconds, peak = _timed(prepare)
                repair = 0 if outcome == "ok" else len(outcome)
                rows.append((len(text), seconds, peak, repair))
            (small, t_small, *_), (large, t_large, peak, repair) = rows[-2], rows[-1]
            exponent = math.log(max(t_large, 1e-4) / max(t_small, 1e-4)) / math.log(large / small)
            path = execution if execution == "agent" else f"graph/{granularity}"
            cells = "  ".join(f"{r[1]:6.3f} s" for r in rows)
            note = f"refused, repair {repair} chars" if repair else "accepted"
            flag = ""
            bounds = (TIME_LIMIT_S, MEMORY_LIMIT_MB, REPAIR_LIMIT)
            if any(f > b for r in rows for f, b in zip(r[1:], bounds, strict=True)):
                over.append(f"{name} ({path})")
                flag = "  OVER THE BOUND"
            print(
                f"  {name:<14} {path:<18} {cells}   n^{exponent:.2f}  {peak:5.1f} MB  {note}{flag}"
            )
            worst["seconds"] = max(worst["seconds"], *(r[1] for r in rows))
            worst["peak_mb"] = max(worst["peak_mb"], *(r[2] for r in rows))
            worst["repair"] = max(worst["repair"], *(r[3] for r in rows))
            if t_large > 0.05:  # below that, timer noise decides the exponent
                worst["exponent"] = max(worst["exponent"], exponent)
    print(
        f"  worst: {worst['seconds']:.2f} s, {worst['peak_mb']:.0f} MB, repair request "
        f"{worst['repair']:.0f} chars (≤ {REPAIR_LIMIT}), growth n^{worst['exponent']:.2f}"
    )
    return worst, over


# -- 2. the worst case of each bound of issue 24 --------------------------------------------------


def _engine(text: str, tools: list[Any] | None = None, **budgets: Any) -> Callable[[], Any]:
    """Parse, verify, compile and run ``text`` on the engine."""

    def run() -> Any:
        parsed = parse_program(text)
        compiled = compile_program(parsed, externs_from(tools or TOOLS), max_stack_depth=256)
        return Emulator(compiled, **budgets).run()

    return run


def _returning(result: Any) -> list[Any]:
    def fetch() -> Any:
        """Return the hostile result."""
        return result

    return [fetch]


class _Plan(BaseChatModel):
    """Replies with one plan, whatever it is asked (a benchmark double)."""

    plan: str

    @property
    def _llm_type(self) -> str:
        return "one plan"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.plan))])


def _graph_path(result: Any) -> Callable[[], Any]:
    """One turn on the graph path (create_agent + the middleware) whose tool returns
    ``result``: the integration's conversion and message text of it."""

    @tool
    def fetch() -> Any:
        """Return the hostile result."""
        return result

    def run() -> Any:
        model = _Plan(plan="```asm\nCALL fetch\nPOP R1\n```")
        planner = ToolsPlannerMiddleware(execution="graph")
        app = create_agent(model, tools=[fetch], middleware=[planner])
        return app.invoke({"messages": [HumanMessage("go")]})

    return run


def _summary(size: int) -> Callable[[], Any]:
    """The approval summary of a plan of ``size`` bytes and two policies: many call sites of
    one subroutine (the slowest shape measured for the summary)."""
    text = _fill("CALL s\nPUSH 1\nCALL pay\n", size, "", "HLT\ns: CALL get\nPOP R1\nRET\n")
    program = parse_program(text)

    def run() -> Any:
        summary = summarize(program, EXTERNS)
        return check_policies([max_calls({"pay": 3}), not_in_loop("pay")], summary, program)

    return run


def _checked(text: str) -> Callable[[], Any]:
    """A plan checked, then summarised (what approval and policies do before a run)."""
    program = parse_program(text)

    def run() -> Any:
        check(program, EXTERNS)
        return summarize(program, EXTERNS)

    return run


def _reads(size: int) -> dict[str, Callable[[], Any]]:
    """Plans that read one label many times: a read-only row of 4000 texts, a JSON text near
    ``size`` bytes, a subroutine whose text fills 200 placeholders from a row, CALLed from 100
    lines (each read once joined every cell, parsed the text again, scanned it again)."""
    texts = ", ".join(f"'{i:060d}'" for i in range(4000))
    row = f"section .rodata\nrow dd {texts}\nsection .text\n"
    row += "".join(f"MOV R{1 + i % 7}, row[1]\n" for i in range(3000))
    keys = max(size // 250, 1)
    big = json.dumps({f"k{i}": "v" * 200 for i in range(keys)})
    label = f"section .rodata\nbig db '{big}'\nsection .text\n"
    label += "".join(f"MOV R{1 + i % 7}, big.k{i % keys}\n" for i in range(4000))
    fills = "section .rodata\nrow times 4000 dd 7\nsection .text\n"
    fills += "CALL s\n" * 100 + 'HLT\ns: PUSH "' + "{row[1]}" * 200 + '"\nCALL put\nRET'
    return {
        "summary: a 4000-text row read 3000 times": _checked(row),
        f"check + summary: {len(big) // 1000} KB JSON read 4000 times": _checked(label),
        "summary: 200 fills x 100 CALL sites": _checked(fills),
    }


def _row_plan(width: int, changing: bool) -> str:
    """A plan that reads a writable row of 4095 cells whole in a loop until the instruction
    budget runs out (``changing``: one cell written each round, so each read builds new text,
    and every text is kept on the stack until it is full)."""
    data = f"section .data\nrow times 4095 dd text\ntext db '{'x' * width}'\nsection .text\n"
    body = "MOV [row], ECX\nMOV R1, row\nPUSH R1\n" if changing else "MOV R1, row\n"
    return data + "MOV [row + 4], 'y'\nMOV ECX, 1000000\nagain: " + body + "LOOP again"


def issue_cases(quick: bool) -> dict[str, tuple[str, Callable[[], Any]]]:
    """Each case: what is measured, and the operation."""
    big = 64_000 if quick else 1_000_000
    size, plan = ("64 KB", 8) if quick else ("1 MB", 31)
    width = MAX_DATA_TEXT_CHARS // 4096 - 4  # a row whose text is just within the limit
    rows, changing = _row_plan(width, changing=False), _row_plan(width, changing=True)
    doubling = "section .data\nrow dd 1, 'ab'\nsection .text\nMOV ECX, 200\n"
    doubling += "again: MOV R1, row\nMOV [row], R1\nLOOP again"
    says = "MOV R1, ''\nMOV ECX, 1000000\nagain: SAY \"" + "{R1}" * 256 + '"\nLOOP again'
    lines = "MOV ECX, 1000000\nagain: SAY 'a line'\nLOOP again"
    deep, deeper = _deep(5000), _deep(10**5)
    junk = _fill("CALL [rax]\nJMP [x]\nJE [rax + 4]\nLOOP [x]\nCALL [x + ESI*4]\n", 64_000)
    return {
        "[ ] spaces, 64 KB": ("engine", _engine("MOV R1, [x" + " " * 64_000 + "y]")),
        "[ ] spaces, 1 MB": ("engine", _engine("MOV R1, [x" + " " * 1_000_000 + "y]")),
        f"SAY placeholders, {size}": ("engine", _engine('SAY "' + "{R1}" * (big // 4) + '"')),
        f"SAY 256 placeholders in {size} of text": (
            "engine",
            _engine('SAY "' + "{R1}" * 256 + "x" * (big - 1100) + '"'),
        ),
        "SAY 256 placeholders x budget": ("engine", _engine(says)),
        "SAY lines to the answer limit": ("engine", _engine(lines, max_instructions_to_exec=10**5)),
        "row read whole, unchanged": ("engine", _engine(rows)),
        "row read whole, new each round": ("engine", _engine(changing)),
        "row reading its own text": ("engine", _engine(doubling)),
        "nested list result, 5000 deep": ("engine", _engine("CALL fetch", _returning(deep))),
        "nested list result, 10^5 deep": ("engine", _engine("CALL fetch", _returning(deeper))),
        "1 MB text result, 200 reads": (
            "engine",
            _engine(
                "CALL fetch\nPOP R1\nMOV ECX, 200\nagain: PUSH R1\nPOP R2\nLOOP again",
                _returning("é" * 1_000_000),
            ),
        ),
        "dict result of 10^5 keys": (
            "engine",
            _engine("CALL fetch", _returning({f"k{i}": i for i in range(100_000)})),
        ),
        "nested list result, 600 deep": ("graph path", _graph_path(_deep(600))),
        f"summary + policies, {plan} KB plan": ("summarize", _summary(plan * 1000)),
        **{name: ("summarize", run) for name, run in _reads(big).items()},
        "CALL [rax]-style operands, 64 KB": ("engine", _engine(junk)),
    }


def _outcome(run: Callable[[], Any]) -> str:
    try:
        run()
    except LLAssemblyError as error:
        return f"refused: {type(error).__name__}"
    except Exception as error:  # measured, not hidden: a crash is reported as such
        return f"CRASH {type(error).__name__}"
    return "handled"


def issue_table(quick: bool) -> tuple[dict[str, float], list[str], list[str]]:
    print("2. issue 24: the worst case of each bound")
    print(f"  {'case':<36} {'measures':<11} {'time':>8} {'peak':>9}  outcome")
    worst = {"seconds": 0.0, "peak_mb": 0.0}
    over: list[str] = []
    crashes: list[str] = []
    for name, (where, run) in issue_cases(quick).items():
        outcome, seconds, peak = _timed(lambda run=run: _outcome(run))  # type: ignore[misc]
        flag = ""
        if seconds > TIME_LIMIT_S or peak > MEMORY_LIMIT_MB:
            over.append(name)
            flag = "  OVER THE BOUND"
        if outcome.startswith("CRASH"):
            crashes.append(f"{name} ({outcome[6:]})")
        print(f"  {name:<36} {where:<11} {seconds:6.3f} s {peak:6.1f} MB  {outcome}{flag}")
        worst["seconds"] = max(worst["seconds"], seconds)
        worst["peak_mb"] = max(worst["peak_mb"], peak)
    return worst, over, crashes


def main(quick: bool = False) -> dict[str, float]:
    """Measure and print both tables; return the worst figures. Exits with status 1 when a
    figure goes over its bound."""
    replies, over = replies_table(quick)
    issue, over_issue, crashes = issue_table(quick)
    over += over_issue
    seconds = max(replies["seconds"], issue["seconds"])
    peak = max(replies["peak_mb"], issue["peak_mb"])
    print(
        f"  worst: {seconds:.2f} s (bound {TIME_LIMIT_S} s), {peak:.0f} MB (bound "
        f"{MEMORY_LIMIT_MB:.0f} MB); over the bound: {', '.join(over) or 'none'}"
    )
    if crashes:
        print(f"  not the library's own error (crashed): {'; '.join(crashes)}")
    sys.stdout.flush()
    if over:
        raise SystemExit(f"bench_hostile: over the bound: {', '.join(over)}")
    return {
        "hostile_seconds": seconds,
        "hostile_peak_mb": peak,
        "hostile_repair": replies["repair"],
        "hostile_exponent": replies["exponent"],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, the agent path")
    main(quick=parser.parse_args().quick)
