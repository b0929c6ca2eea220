"""What users gain: model round trips, end-to-end latency, the token bill, concurrency, overhead.

One run measures the planner (``create_agent`` + ``ToolsPlannerMiddleware``: one plan per
task) side by side with the alternative a user would pick instead (a plain ``create_agent``
tool-calling loop making the same tool calls, one per model turn), so the ratios hold on any
machine. Models are scripted (hand-written plans and replayed tool calls, see
``benchmarks/tasks.py``) and sleep a simulated latency; tools sleep a simulated latency too.

Run: ``python -m benchmarks [--quick] [--model-latency 0.8] [--tool-latency 0.02]
[--postgres DSN] [--out DIR | --publish]``. The report is printed; it is written only to
``--out DIR``, or to ``benchmarks/results/`` (the published figures, tracked) with
``--publish``. The workers figures need PostgreSQL (``--postgres`` or ``LLASSEMBLY_POSTGRES``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import statistics
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import AToolsPlannerNode, ToolsPlannerMiddleware

from . import (
    bench_agent_path,
    bench_dataflow,
    bench_emulator,
    bench_hostile,
    bench_integration,
    bench_overlap,
    bench_parallel,
    bench_tokens,
    bench_workers,
)
from .tasks import TASKS, Task


class ScriptedModel(BaseChatModel):
    """Replies with scripted messages after a simulated latency (a benchmark double)."""

    replies: list[AIMessage]
    latency: float = 0.0
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _next(self) -> ChatResult:
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        time.sleep(self.latency)
        return self._next()

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        await asyncio.sleep(self.latency)
        return self._next()


@dataclass
class TaskResult:
    """Both strategies on one task."""

    name: str
    tool_calls: int
    planner_model_calls: int
    loop_model_calls: int
    planner_seconds: float
    loop_seconds: float


class ToolLatency(AgentMiddleware[Any, Any]):
    """Waits ``seconds`` before every tool call: the simulated tool latency, the same agent
    middleware for the tool-calling loop and for plans (whose calls run in the agent's tool
    node)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        time.sleep(self.seconds)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        await asyncio.sleep(self.seconds)
        return await handler(request)


async def _run_task(task: Task, model_latency: float, tool_latency: float) -> TaskResult:
    latency = [ToolLatency(tool_latency)] if tool_latency > 0 else []
    # The planner: one plan, run by the library.
    tools, world, context = task.setup()
    planner_model = ScriptedModel(replies=[AIMessage(task.plan)], latency=model_latency)
    # On the agent path the plan's calls go through the agent's tool node, so the simulated
    # latency is the same agent middleware as for the loop.
    planner = ToolsPlannerMiddleware(max_instructions_to_exec=5000)
    agent = create_agent(planner_model, tools=tools, middleware=[planner, *latency])
    request = {"messages": [HumanMessage(task.order)]}
    start = time.perf_counter()
    result = await agent.ainvoke(request, context=context)
    planner_seconds = time.perf_counter() - start
    final = result["messages"][-1].response_metadata["llassembly"]
    if final["status"] != "finished" or not task.expected(world):
        raise RuntimeError(f"task {task.name}: the plan did not do the job: {final}")
    calls = [c for m in result["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]

    # The tool-calling loop: the same calls, one per model turn, then a final answer.
    tools, world, context = task.setup()
    replies = [AIMessage("", tool_calls=[{**c, "id": f"call_{i}"}]) for i, c in enumerate(calls)]
    loop_model = ScriptedModel(replies=[*replies, AIMessage("Done.")], latency=model_latency)
    loop_agent = create_agent(loop_model, tools=tools, middleware=latency)
    start = time.perf_counter()
    await loop_agent.ainvoke(request, context=context)
    loop_seconds = time.perf_counter() - start
    if not task.expected(world):
        raise RuntimeError(f"task {task.name}: the tool-calling loop did not do the job")
    return TaskResult(
        task.name,
        len(calls),
        planner_model.calls,
        loop_model.calls,
        planner_seconds,
        loop_seconds,
    )


async def suite(
    tasks: Sequence[Task], model_latency: float, tool_latency: float
) -> list[TaskResult]:
    """Run every task with both strategies (tasks concurrently; each timed on its own)."""
    return list(await asyncio.gather(*(_run_task(t, model_latency, tool_latency) for t in tasks)))


# -- concurrency -------------------------------------------------------------------------------

_PING_PLAN = """```asm
    MOV R1, 0
again:
    PUSH R1
    CALL ping
    POP R1
    CMP R1, 5
    JL again
```"""


@tool
async def ping(x: int) -> int:
    """Wait 10 ms, return x + 1."""
    await asyncio.sleep(0.01)
    return x + 1


def _ping_graph() -> Any:
    model = ScriptedModel(replies=[AIMessage(_PING_PLAN)])
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("planner", AToolsPlannerNode(model, tools=[ping]))
    builder.add_edge(START, "planner")
    builder.add_edge("planner", END)
    return builder.compile()


async def _plans(graph: Any, n: int) -> None:
    request = {"messages": [HumanMessage("ping five times")]}
    results = await asyncio.gather(*(graph.ainvoke(request) for _ in range(n)))
    if any(r["messages"][-1].response_metadata["llassembly"]["tool_calls"] != 5 for r in results):
        raise RuntimeError("a concurrent plan did not finish")


def concurrency(levels: Sequence[int]) -> list[dict[str, float]]:
    """Wall time, plans per second and peak memory per plan for N concurrent plans."""
    graph = _ping_graph()
    asyncio.run(_plans(graph, 3))  # warm up: compile the plan, import lazily loaded parts
    one_wall, one_cpu = asyncio.run(_one_plan(graph, 20))
    rows = []
    for n in levels:
        # Small N run in a fraction of a second, where one hiccup of a shared machine shows:
        # take the median of three runs there, as for the one-plan figures.
        wall = statistics.median(_timed(graph, n)[0] for _ in range(3 if n <= 100 else 1))
        rows.append(
            {
                "n": n,
                "wall_s": wall,
                "plans_per_s": n / wall,
                "bound_s": 1.25 * max(one_wall, n * one_cpu),
                "one_plan_wall_s": one_wall,
                "one_plan_cpu_s": one_cpu,
                "peak_kb_per_plan": _peak_kb(graph, n) / n,
            }
        )
    return rows


async def _one_plan(graph: Any, runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of one plan run alone, ``runs`` times in one event loop."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        await _plans(graph, 1)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def _timed(graph: Any, n: int) -> tuple[float, float]:
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(_plans(graph, n))
    return time.perf_counter() - start, time.process_time() - cpu


def _peak_kb(graph: Any, n: int) -> float:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    asyncio.run(_plans(graph, n))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / 1024


# -- report ------------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report(
    results: Sequence[TaskResult],
    conc: Sequence[dict[str, float]],
    overhead: dict[str, float],
    args: argparse.Namespace,
    workers: Sequence[dict[str, Any]] = (),
    tokens: dict[str, Any] | None = None,
    dataflow: dict[str, dict[str, float]] | None = None,
) -> str:
    """The whole report as Markdown."""
    trips = [r.loop_model_calls / r.planner_model_calls for r in results]
    speedups = [r.loop_seconds / r.planner_seconds for r in results]
    out = [
        "## Model round trips and latency",
        f"Simulated latency: model {args.model_latency * 1000:.0f} ms per call, tool "
        f"{args.tool_latency * 1000:.0f} ms per call. Planner = `create_agent` + "
        "`ToolsPlannerMiddleware`; loop = plain `create_agent` making the same tool calls, "
        "one per model turn.",
        "",
        _table(
            [
                "task",
                "tool calls",
                "model calls: planner",
                "model calls: loop",
                "fewer calls",
                "seconds: planner",
                "seconds: loop",
                "speed-up",
            ],
            [
                [
                    r.name,
                    str(r.tool_calls),
                    str(r.planner_model_calls),
                    str(r.loop_model_calls),
                    f"{t:.1f}×",
                    f"{r.planner_seconds:.2f}",
                    f"{r.loop_seconds:.2f}",
                    f"{s:.1f}×",
                ]
                for r, t, s in zip(results, trips, speedups, strict=True)
            ],
        ),
        "",
        f"Average over the suite: **{statistics.mean(trips):.1f}× fewer model calls** "
        f"(target ≥ 5×), **{statistics.mean(speedups):.1f}× lower latency** (target ≥ 4×).",
        "",
        "## Concurrency",
        "N plans at once through `AToolsPlannerNode`, each plan 5 async tool calls of 10 ms. "
        "Bound = 1.25 × max(one plan's wall time, N × one plan's CPU time).",
        "",
        _table(
            ["N", "wall s", "plans/s", "bound s", "within bound", "peak KB per plan"],
            [
                [
                    str(int(c["n"])),
                    f"{c['wall_s']:.3f}",
                    f"{c['plans_per_s']:.0f}",
                    f"{c['bound_s']:.3f}",
                    "yes" if c["wall_s"] <= c["bound_s"] else "**no**",
                    f"{c['peak_kb_per_plan']:.0f}",
                ]
                for c in conc
            ],
        ),
        "",
        "![Concurrency: wall time (blue) and bound (red) in seconds against N, log-log, "
        "one grid line per decade](latest.png)",
        "",
        f"One plan alone: {conc[0]['one_plan_wall_s'] * 1000:.1f} ms wall, "
        f"{conc[0]['one_plan_cpu_s'] * 1000:.2f} ms CPU. Target: ≤ 200 KB per plan at N = 1000.",
        "",
        "## Overhead",
        _table(
            ["figure", "value", "target"],
            [
                [
                    "µs per pure instruction (emulator)",
                    f"{overhead['us_per_instruction']:.2f}",
                    "≤ 2",
                ],
                [
                    "µs emulator overhead per tool call",
                    f"{overhead['us_tool_call_overhead']:.2f}",
                    "≤ 10",
                ],
                [
                    "graph path, per tool call, program granularity",
                    f"{overhead['program_per_call_ratio']:.2f}× bare invoke",
                    "≤ 2×",
                ],
                [
                    "graph path, per tool call, block granularity",
                    f"{overhead['block_per_call_ratio']:.2f}× bare invoke",
                    "≤ 3×",
                ],
                [
                    "agent path, per tool call at 25 calls",
                    f"{overhead['agent_vs_loop_25']:.2f}× plain tool-calling loop "
                    f"(per process {overhead['agent_vs_loop_25_lowest']:.2f}–"
                    f"{overhead['agent_vs_loop_25_highest']:.2f}×; "
                    f"{overhead['agent_path_25_us']:.0f} µs)",
                    "≤ 1.15×",
                ],
                [
                    "agent path, per tool call at 200 calls",
                    f"{overhead['agent_vs_loop_200']:.2f}× plain tool-calling loop "
                    f"(per process {overhead['agent_vs_loop_200_lowest']:.2f}–"
                    f"{overhead['agent_vs_loop_200_highest']:.2f}×; "
                    f"{overhead['agent_path_200_us']:.0f} µs)",
                    "≤ 1.15×",
                ],
                [
                    "agent path, per call at 200 calls / at 25",
                    f"{overhead['agent_path_flatness']:.2f}× (the loop: "
                    f"{overhead['tool_loop_flatness']:.2f}×)",
                    "≤ 1.3×",
                ],
                [
                    "hostile reply ≤ 1 MB: worst time to parse, verify, prepare",
                    f"{overhead['hostile_seconds']:.2f} s, "
                    f"{overhead['hostile_peak_mb']:.0f} MB peak",
                    "< 2 s, < 300 MB",
                ],
                [
                    "hostile reply: longest repair request",
                    f"{overhead['hostile_repair']:.0f} chars",
                    "≤ 8192",
                ],
                [
                    "per instruction, instruction granularity",
                    f"{overhead['instruction_per_instruction_ratio']:.2f}× empty superstep",
                    "≤ 1.3×",
                ],
            ],
        ),
        "",
        *_parallel_section(overhead),
        *_overlap_section(overhead),
        *_dataflow_section(dataflow),
        *_workers_section(workers),
        *_tokens_section(tokens),
        f"Machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} ({_cores()} cores). "
        f"Command: `python -m benchmarks{' --quick' if args.quick else ' --publish'}`.",
    ]
    return "\n".join(out) + "\n"


def _parallel_section(figures: dict[str, float]) -> list[str]:
    if "parallel_loop_s" not in figures:
        return []
    return ["## Independent calls at once (`parallel_tools`)", bench_parallel.table(figures), ""]


def _overlap_section(figures: dict[str, float]) -> list[str]:
    if "overlap_tool_latency_s" not in figures:
        return []
    return ["## Pending results: the plans models write overlap", bench_overlap.table(figures), ""]


def _dataflow_section(figures: dict[str, dict[str, float]] | None) -> list[str]:
    if not figures:
        return []
    return ["## Data-flow policies: what provenance costs", bench_dataflow.report(figures), ""]


def _workers_section(rows: Sequence[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    return [
        "## Durable plans: worker processes and savers",
        f"Each plan {rows[0]['calls']} tool calls on the agent path, every step saved before "
        'the next (`durability="sync"`); PostgreSQL workers take threads from a queue table '
        "(`examples/workers.py`). Checkpoint cost = time inside the saver / tool calls.",
        "",
        _table(
            ["saver", "worker processes", "plans", "plans/s", "checkpoint ms per tool call"],
            [
                [
                    r["saver"],
                    str(r["workers"]),
                    str(r["plans"]),
                    f"{r['plans_per_s']:.1f}",
                    f"{r['checkpoint_ms_per_call']:.2f}",
                ]
                for r in rows
            ],
        ),
        "",
    ]


def _tokens_section(tokens: dict[str, Any] | None) -> list[str]:
    if not tokens:
        return []
    return [
        "## The token bill",
        "The same order (a walk of N dependent calls) by a plain `create_agent` tool-calling "
        "loop and by one plan (`benchmarks/bench_tokens.py`): every model request and reply "
        "as sent, counted.",
        "",
        bench_tokens.report(tokens["rows"], tokens["prompt"]),
        "",
        *([bench_tokens.reading_table(tokens["reading"]), ""] if tokens.get("reading") else []),
    ]


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the report and write it to ``--out``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="short smoke run (CI)")
    parser.add_argument("--model-latency", type=float, default=0.8, help="seconds per model call")
    parser.add_argument("--tool-latency", type=float, default=0.02, help="seconds per tool call")
    parser.add_argument(
        "--out", type=Path, default=None, help="also write latest.md and latest.png to this folder"
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="write the published figures to benchmarks/results/ (tracked files)",
    )
    parser.add_argument(
        "--postgres",
        default=None,
        help="PostgreSQL server for the workers benchmark (default: $LLASSEMBLY_POSTGRES)",
    )
    args = parser.parse_args(argv)
    if args.publish:
        if args.quick:
            parser.error("--publish writes the published figures: run without --quick")
        if not (args.postgres or bench_workers.postgres_from_env()):
            parser.error("--publish needs PostgreSQL for the workers figures: give --postgres")
        args.out = Path(__file__).parent / "results"
    if args.quick:
        args.model_latency, args.tool_latency = args.model_latency / 40, args.tool_latency / 4
    started = time.perf_counter()
    # Overhead first: the 1000-plan run leaves a large heap behind that slows what follows.
    overhead = {
        **bench_emulator.main(quick=args.quick),
        **bench_integration.main(quick=args.quick),
        **bench_agent_path.main(quick=args.quick),
        **bench_hostile.main(quick=args.quick),
        **bench_parallel.main(quick=args.quick),
        **bench_overlap.main(quick=args.quick),
    }
    dataflow = bench_dataflow.main(quick=args.quick)
    workers = bench_workers.main(quick=args.quick, postgres=args.postgres)
    tokens = bench_tokens.main(quick=args.quick)
    results = asyncio.run(suite(TASKS, args.model_latency, args.tool_latency))
    levels = (1, 10, 100) if args.quick else (1, 10, 100, 1000)
    conc = concurrency(levels)
    text = report(results, conc, overhead, args, workers, tokens, dataflow)
    print(text)
    if args.out is None:
        print(f"not written (use --out DIR or --publish) ({time.perf_counter() - started:.0f} s)")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.md").write_text(text, encoding="utf-8")
    _chart(conc, args.out / "latest.png")
    print(
        f"written: {args.out / 'latest.md'}, {args.out / 'latest.png'} "
        f"({time.perf_counter() - started:.0f} s)"
    )
    return 0


def _chart(conc: Sequence[dict[str, float]], path: Path) -> None:
    """Concurrency curve: wall time and bound against N (log-log)."""
    from .chart import line_chart

    line_chart(
        path,
        [
            ("wall time", [(c["n"], c["wall_s"]) for c in conc], (40, 110, 220)),
            ("bound", [(c["n"], c["bound_s"]) for c in conc], (220, 80, 60)),
        ],
    )
