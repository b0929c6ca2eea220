"""The benchmark task suite: tasks a user would hand an agent, each with tools and a plan.

Every plan here is hand-written (not a model's output): it is what a planner model answers for
the task, and the same for every run, so the figures compare the *execution strategies*, not
models. The tool-calling baseline replays, one call per model turn, exactly the tool calls the
plan made, which is what a ReAct model would have to do: each call depends on the previous
result (conditions, loops), so none can be batched.

Tools do no waiting themselves: ``benchmarks/run.py`` adds the simulated tool latency with the
same ``wrap_tool_call`` middleware around every call of both strategies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from llassembly_demo.replay import bundled_plans
from llassembly_demo.run import bundled_scenario
from llassembly_demo.tools import UNIT_TOOLS, UnitContext

Setup = tuple[list[BaseTool], dict[str, Any], Any]
"""A fresh run's tools, the world they act on (for the check) and the agent's context."""


@dataclass
class Task:
    """One benchmark task: an order, a fresh setup per run, the planner's plan and a check."""

    name: str
    order: str
    plan: str
    setup: Callable[[], Setup]
    expected: Callable[[dict[str, Any]], bool] = field(default=lambda world: True)


# -- weather over several cities, with a condition --------------------------------------------

_CITIES = {"Paris": 21, "Oslo": 4, "Cairo": 33, "Lima": 18, "Rome": 26, "Quito": 14}


def _weather() -> Setup:
    world: dict[str, Any] = {"notified": []}

    @tool
    def get_temperature(city: str) -> int:
        """Today's temperature in a city, in degrees Celsius."""
        return _CITIES.get(city, 0)

    @tool
    def notify(city: str, temperature: int) -> None:
        """Tell the user a city is warm."""
        world["notified"].append((city, temperature))

    return [get_temperature, notify], world, None


_WEATHER_PLAN = """```asm
section .data
    c1 db "Paris", 0
    c2 db "Oslo", 0
    c3 db "Cairo", 0
    c4 db "Lima", 0
    c5 db "Rome", 0
    c6 db "Quito", 0
section .text
    PUSH c1
    CALL check
    PUSH c2
    CALL check
    PUSH c3
    CALL check
    PUSH c4
    CALL check
    PUSH c5
    CALL check
    PUSH c6
    CALL check
    HLT
check:                      ; city on the stack
    POP R1
    PUSH R1
    CALL get_temperature
    POP R2
    CMP R2, 20
    JLE cool
    PUSH R1
    PUSH R2
    CALL notify
cool:
    RET
```"""


# -- poll a job until it is done, then fetch the result ----------------------------------------


def _poll() -> Setup:
    world: dict[str, Any] = {"progress": 0, "fetched": False}

    @tool
    def start_job(name: str) -> int:
        """Start a job; returns its id."""
        return 7

    @tool
    def job_progress(job_id: int) -> int:
        """Percent done of a job (advances 10% per check)."""
        world["progress"] = min(100, world["progress"] + 10)
        return int(world["progress"])

    @tool
    def fetch_result(job_id: int) -> str:
        """The result of a finished job."""
        world["fetched"] = True
        return "report.pdf"

    return [start_job, job_progress, fetch_result], world, None


_POLL_PLAN = """```asm
    PUSH "nightly-report"
    CALL start_job
    POP R1                  ; job id
wait:
    PUSH R1
    CALL job_progress
    POP R2
    CMP R2, 100
    JL wait
    PUSH R1
    CALL fetch_result
    POP R3
```"""


# -- string and pydantic-model arguments ------------------------------------------------------


class Ticket(BaseModel):
    """A support ticket."""

    title: str
    priority: int


def _tickets() -> Setup:
    world: dict[str, Any] = {"tickets": {}, "comments": []}

    @tool
    def open_ticket(ticket: Ticket) -> int:
        """Open a ticket; returns its id."""
        number = len(world["tickets"]) + 1
        world["tickets"][number] = ticket.model_dump() | {"open": True}
        return number

    @tool
    def add_comment(ticket_id: int, text: str) -> None:
        """Comment on a ticket."""
        world["comments"].append((ticket_id, text))

    @tool
    def close_ticket(ticket_id: int) -> None:
        """Close a ticket."""
        world["tickets"][ticket_id]["open"] = False

    return [open_ticket, add_comment, close_ticket], world, None


_TICKETS_PLAN = """```asm
    PUSH '{"title": "Printer on fire", "priority": 1}'
    CALL open_ticket
    POP R1
    PUSH R1
    PUSH "Facilities notified."
    CALL add_comment
    PUSH R1
    PUSH "Extinguisher used."
    CALL add_comment
    PUSH R1
    PUSH "Printer replaced."
    CALL add_comment
    PUSH R1
    CALL close_ticket
```"""


# -- restock with a subroutine -----------------------------------------------------------------

_STOCK = {"apples": 3, "pears": 12, "plums": 0, "figs": 8, "kiwis": 1}


def _restock() -> Setup:
    world: dict[str, Any] = {"stock": dict(_STOCK), "orders": []}

    @tool
    def stock_of(item: str) -> int:
        """Units of an item in stock."""
        return int(world["stock"][item])

    @tool
    def order(item: str, units: int) -> None:
        """Order units of an item."""
        world["orders"].append((item, units))
        world["stock"][item] += units

    return [stock_of, order], world, None


_RESTOCK_PLAN = """```asm
    PUSH "apples"
    CALL restock
    PUSH "pears"
    CALL restock
    PUSH "plums"
    CALL restock
    PUSH "figs"
    CALL restock
    PUSH "kiwis"
    CALL restock
    HLT
restock:                    ; item on the stack: order 10 when fewer than 5 are left
    POP R1
    PUSH R1
    CALL stock_of
    POP R2
    CMP R2, 5
    JGE enough
    PUSH R1
    PUSH 10
    CALL order
enough:
    RET
```"""


# -- drain a queue until it is empty -----------------------------------------------------------


def _queue() -> Setup:
    world: dict[str, Any] = {"queue": [f"job-{i}" for i in range(8)], "done": []}

    @tool
    def next_task() -> str:
        """The next task in the queue, or "" when it is empty."""
        return world["queue"].pop(0) if world["queue"] else ""

    @tool
    def process(task: str) -> None:
        """Process one task."""
        world["done"].append(task)

    return [next_task, process], world, None


_QUEUE_PLAN = """```asm
loop:
    CALL next_task
    POP R1
    CMP R1, ""
    JE empty
    PUSH R1
    CALL process
    JMP loop
empty:
    HLT
```"""


# -- the NPC orders of the demo, one unit at a time on the demo's map ----------------------------


def _npc(unit_id: int) -> Callable[[], Setup]:
    def setup() -> Setup:
        world, _ = bundled_scenario()
        return list(UNIT_TOOLS), {"world": world, "unit": unit_id}, UnitContext(world, unit_id)

    return setup


def _npc_tasks() -> list[Task]:
    plans = bundled_plans()  # sorted: unit 1 march, unit 2 hunter, unit 3 guard
    checks: list[Callable[[dict[str, Any]], bool]] = [
        lambda w: w["world"].position_of(1) == (7, 7),
        lambda w: not w["world"].enemies and w["world"].position_of(2) == (4, 4),
        lambda w: w["world"].position_of(3) == (10, 1),
    ]
    return [
        Task(
            f"npc_{plan.name.split('_')[1].removesuffix('.asm')}",
            plan.order,
            plan.text,
            _npc(number),
            check,
        )
        for number, (plan, check) in enumerate(zip(plans, checks, strict=True), start=1)
    ]


TASKS: list[Task] = [
    *_npc_tasks(),
    Task(
        "weather",
        "Which of these six cities are warmer than 20 °C? Notify me of each.",
        _WEATHER_PLAN,
        _weather,
        lambda w: len(w["notified"]) == 3,
    ),
    Task(
        "poll",
        "Start the nightly report and fetch it when it is done.",
        _POLL_PLAN,
        _poll,
        lambda w: w["fetched"],
    ),
    Task(
        "ticket",
        "Open a P1 ticket for the printer fire, log three comments, close it.",
        _TICKETS_PLAN,
        _tickets,
        lambda w: len(w["comments"]) == 3,
    ),
    Task(
        "restock",
        "Order 10 of every fruit with fewer than 5 in stock.",
        _RESTOCK_PLAN,
        _restock,
        lambda w: len(w["orders"]) == 3,
    ),
    Task(
        "queue",
        "Process every task in the queue.",
        _QUEUE_PLAN,
        _queue,
        lambda w: len(w["done"]) == 8,
    ),
]
