"""Running a whole plan as a nested plan graph (the planner nodes, and the middleware's
``execution="graph"``): the :class:`~llassembly.integration.turn.RunPlan` action.

The plan graph shares the caller's checkpointer (it runs inside the caller's node, with the
node's config), so on resume after an interrupt in a tool, the calls that completed are not
run again.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from llassembly.integration.graph import PlanGraph
from llassembly.integration.planner import Planner
from llassembly.integration.tools import ToolContext, make_plan_run
from llassembly.integration.turn import PlanRan, RunPlan
from llassembly.machine.externs import check_sync_tools

__all__ = ["arun_plan", "run_plan"]


def _prepared(
    planner: Planner, run: RunPlan, tools: ToolContext, config: RunnableConfig
) -> tuple[PlanGraph, Any, RunnableConfig]:
    graph = planner.plan_graph(run.plan, tools.externs)
    plan_run = make_plan_run(tools, run.prefix, planner.options.tool_middleware)
    return graph, plan_run, graph.config_for(plan_run, config)


def _ran(result: dict[str, Any], plan_run: Any) -> PlanRan:
    return PlanRan(
        result["machine"], result.get("failure"), list(result.get("messages", [])), plan_run.error
    )


def run_plan(
    planner: Planner,
    run: RunPlan,
    tools: ToolContext,
    config: RunnableConfig,
    *,
    synchronous: bool = True,
) -> PlanRan:
    """Run the plan to its end (or failure) with ``invoke``.

    Raises:
        UsageError: The plan calls async-only tools (nothing has run).
    """
    graph, plan_run, plan_config = _prepared(planner, run, tools, config)
    if synchronous:
        compiled = graph.compiled
        check_sync_tools((t.name for t in compiled.tools if t), compiled.externs)
    return _ran(graph.graph.invoke(graph.initial_state(), plan_config), plan_run)


async def arun_plan(
    planner: Planner, run: RunPlan, tools: ToolContext, config: RunnableConfig
) -> PlanRan:
    """Run the plan to its end (or failure) with ``ainvoke``."""
    graph, plan_run, plan_config = _prepared(planner, run, tools, config)
    return _ran(await graph.graph.ainvoke(graph.initial_state(), plan_config), plan_run)
