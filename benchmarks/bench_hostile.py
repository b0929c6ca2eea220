"""Worst cases: what a hostile reply costs before any tool runs.

Each case builds a model reply of about 10 KB, 100 KB and 1 MB (hand-made shapes that stress
one part of the pipeline each) and measures, in one run, what the planner does with it: parse
and verify (the agent path's compiled program, or the graph path's plan graph at each
granularity), and the repair request sent back when it is refused. Printed per case and size:
wall time, peak traced memory, the growth exponent between sizes (1.0 is linear; n·log n is
about 1.1), and the repair request's length.

Targets (issue "hostile plans"): every reply up to 1 MB in under 2 s and 300 MB, time growing no
worse than n·log n, repair requests at most 8 KB.

Run: ``python -m benchmarks.bench_hostile [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from llassembly.errors import PlanError
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.integration.views import repair_request

SIZES = (10_000, 100_000, 1_000_000)
TIME_LIMIT_S = 2.0
MEMORY_LIMIT_MB = 300.0
REPAIR_LIMIT = 8192


def get() -> int:
    """A reading."""
    return 1


def put(x: int) -> None:
    """Store x."""


def _fill(unit: str, size: int, head: str = "", tail: str = "") -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


CASES: dict[str, Callable[[int], str]] = {
    # RET fans out to every call site: the graph compiler's old quadratic case.
    "call sites": lambda n: _fill(
        "CALL sub\nCALL get\nPOP R1\n", n, "```asm\n", "HLT\nsub: NOP\nRET\n```"
    ),
    # One token of digits that is no number: the number pattern's old backtracking case.
    "digit run": lambda n: "```asm\nPUSH " + "1" * (n - 20) + "x\n```",
    # Every label defined again: one diagnostic each, the old 450 MB repair request.
    "labels": lambda n: _fill("a: ", n, "```asm\n", "NOP\n```"),
    # Many lines of prose around a little code, with think tags: choosing the code lines.
    "prose": lambda n: _fill(
        "Well, <think>maybe</think> we push it; then we call.\n", n, "", "PUSH 1\nCALL put\n"
    ),
    # Deep JSON in data.
    "nested data": lambda n: "section .data\nx db " + "[" * (n - 60) + "\nsection .text\nHLT",
    # Branches and loops for the verifier: many labels and conditional jumps.
    "branches": lambda n: _fill(
        "CALL get\nPOP R1\nCMP R1, 3\nJL l{i}\nPUSH R1\nCALL put\nl{i}: NOP\n",
        n,
        "```asm\n",
        "HLT\n```",
    ),
}


def _reply(case: str, size: int) -> str:
    text = CASES[case](size)
    if "{i}" in text:  # number the labels so each is defined once
        parts = text.split("{i}")
        text = "".join(f"{p}{i // 2}" if i < len(parts) - 1 else p for i, p in enumerate(parts))
    return text


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


TOOLS: list[Any] = [get, put]
PATHS = (("agent", "block"), ("graph", "block"), ("graph", "instruction"))


def measure(case: str, size: int, execution: str, granularity: str) -> dict[str, Any]:
    text = _reply(case, size)
    gc.collect()
    start = time.perf_counter()
    outcome = _prepare(text, execution, granularity)
    seconds = time.perf_counter() - start
    gc.collect()
    tracemalloc.start()
    _prepare(text, execution, granularity)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return {
        "bytes": len(text),
        "seconds": seconds,
        "peak_mb": peak,
        "repair": 0 if outcome == "ok" else len(outcome),
        "refused": outcome != "ok",
    }


def main(quick: bool = False) -> dict[str, float]:
    """Measure every case; print the table and the worst figures; return the worst figures."""
    sizes = SIZES[:2] if quick else SIZES
    worst = {"seconds": 0.0, "peak_mb": 0.0, "repair": 0.0, "exponent": 0.0}
    print("hostile replies: parse + verify + what the run needs, before any tool runs")
    print(f"  {'case':<12} {'path':<18} " + "  ".join(f"{s // 1000:>7} KB" for s in sizes))
    for case in CASES:
        for execution, granularity in PATHS:
            rows = [measure(case, size, execution, granularity) for size in sizes]
            cells = "  ".join(f"{r['seconds']:6.3f} s" for r in rows)
            exponent = math.log(
                max(rows[-1]["seconds"], 1e-4) / max(rows[-2]["seconds"], 1e-4)
            ) / math.log(rows[-1]["bytes"] / rows[-2]["bytes"])
            last = rows[-1]
            note = f"refused, repair {last['repair']} chars" if last["refused"] else "accepted"
            path = execution if execution == "agent" else f"graph/{granularity}"
            print(
                f"  {case:<12} {path:<18} {cells}   growth n^{exponent:.2f}   "
                f"peak {last['peak_mb']:.1f} MB   {note}"
            )
            worst["seconds"] = max(worst["seconds"], *(r["seconds"] for r in rows))
            worst["peak_mb"] = max(worst["peak_mb"], *(r["peak_mb"] for r in rows))
            worst["repair"] = max(worst["repair"], *(r["repair"] for r in rows))
            if rows[-1]["seconds"] > 0.05:  # below that, timer noise decides the exponent
                worst["exponent"] = max(worst["exponent"], exponent)
    print(
        f"  worst: {worst['seconds']:.2f} s (target < {TIME_LIMIT_S} s), "
        f"{worst['peak_mb']:.0f} MB (target < {MEMORY_LIMIT_MB:.0f} MB), "
        f"repair request {worst['repair']:.0f} chars (target ≤ {REPAIR_LIMIT}), "
        f"growth n^{worst['exponent']:.2f} at the largest size (n·log n ≈ n^1.1)"
    )
    sys.stdout.flush()
    return {f"hostile_{k}": v for k, v in worst.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 KB and 100 KB only")
    main(quick=parser.parse_args().quick)
