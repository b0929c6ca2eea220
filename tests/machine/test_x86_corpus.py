"""A corpus of plans written the way models write x86 when asked for "an assembly program that
calls these tools": ``[name]`` variables in ``.data``, tables of string labels indexed by
``[table + esi*4]``, ``TEST``/``XOR``/``NEG``/``LEA``/shifts, ``SETcc``/``CMOVcc``, SSE floats,
``LOOP`` with ``ECX``, ``DIV`` for averages and the cdecl habit of reading a tool's result in
``EAX`` right after the ``CALL``.

Each plan runs against small typed tools that record their calls; the expected calls, registers
and memory were worked out by hand from the plan and the tools. The plans themselves are data, one
file each in ``tests/data/x86_corpus/``. The last part holds plans (in ``refused/``) that
misuse memory or mix the two conventions for a tool's result, which are refused before they run
with a message that says what to write instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import TESTS

from llassembly.analysis.verifier import check
from llassembly.errors import PlanRejected
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from

CORPUS = TESTS / "data" / "x86_corpus"
Calls = list[tuple[Any, ...]]
Kit = Callable[[Calls], list[Callable[..., Any]]]


@dataclass(frozen=True)
class Case:
    """One plan, the world it runs in and what it must do there.

    Attributes:
        plan: The name of the plan in the corpus (``tests/data/x86_corpus/``), as a model
            wrote it.
        tools: Builds the tools, each recording its calls in the list it is given.
        calls: Every tool call, in order: the tool's name, then its arguments.
        registers: Registers to check (one that is absent from the result reads 0).
        memory: Writable data labels and variables to check, each as its list of cells.
        stack: The data stack when the plan ends.
    """

    plan: str
    tools: Kit
    calls: Calls
    registers: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, list[Any]] = field(default_factory=dict)
    stack: list[Any] = field(default_factory=list)


def statuses(values: list[Any]) -> Callable[[], Any]:
    """The answers of a tool polled again and again, the last one repeated."""
    queue: Iterator[Any] = iter(values)
    last: list[Any] = [None]

    def answer() -> Any:
        last[0] = next(queue, last[0])
        return last[0]

    return answer


# -- tool sets ---------------------------------------------------------------------------------


def weather(temps: dict[str, float]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_temperature(city: str) -> float:
            """The temperature in a city now, in degrees Celsius."""
            calls.append(("get_temperature", city))
            return temps[city]

        def set_heater(level: int) -> None:
            """Set the heater to a level from 0 (off) to 5."""
            calls.append(("set_heater", level))

        def announce(city: str) -> None:
            """Announce a city."""
            calls.append(("announce", city))

        def report_count(n: int) -> None:
            """Report a count."""
            calls.append(("report_count", n))

        def set_display(value: int) -> None:
            """Show a whole number on the display."""
            calls.append(("set_display", value))

        return [get_temperature, set_heater, announce, report_count, set_display]

    return kit


def scores(table: dict[str, int]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_score(student: str) -> int:
            """A student's exam score."""
            calls.append(("get_score", student))
            return table[student]

        def report_average(average: int) -> None:
            """Publish the class average."""
            calls.append(("report_average", average))

        return [get_score, report_average]

    return kit


def shop(stock: dict[str, int]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_stock(item: str) -> int:
            """Units of an item in stock."""
            calls.append(("get_stock", item))
            return stock[item]

        def order(item: str, qty: int) -> None:
            """Order qty units (or cases) of an item."""
            calls.append(("order", item, qty))

        def notify_low(count: int) -> None:
            """Tell the manager how many items run low."""
            calls.append(("notify_low", count))

        return [get_stock, order, notify_low]

    return kit


def invoices(totals: dict[int, float]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def list_invoices() -> tuple[int, int, int]:
            """The ids of the open invoices."""
            calls.append(("list_invoices",))
            first, second, third, *_ = totals
            return first, second, third

        def get_invoice_total(invoice_id: int) -> float:
            """The amount due on an invoice."""
            calls.append(("get_invoice_total", invoice_id))
            return totals[invoice_id]

        def send_reminder(invoice_id: int) -> None:
            """Send a payment reminder for an invoice."""
            calls.append(("send_reminder", invoice_id))

        def report_totals(total: float, average: float) -> None:
            """Report the sum and the mean of the amounts due."""
            calls.append(("report_totals", total, average))

        return [list_invoices, get_invoice_total, send_reminder, report_totals]

    return kit


def jobs(answers: list[Any]) -> Kit:
    """A job whose status is a word ("running", "done") or, with numbers, 0 while it runs,
    1 when done and -1 when it failed."""

    def kit(calls: Calls) -> list[Callable[..., Any]]:
        status = statuses(answers)

        def start_job() -> int:
            """Start the export job and return its id."""
            calls.append(("start_job",))
            return 42

        def job_word(job_id: int) -> str:
            calls.append(("job_status", job_id))
            return str(status())

        def job_code(job_id: int) -> int:
            calls.append(("job_status", job_id))
            return int(status())

        job_status = job_word if isinstance(answers[0], str) else job_code
        job_status.__name__ = "job_status"

        def download(job_id: int) -> None:
            """Download a finished job's output."""
            calls.append(("download", job_id))

        def notify(message: str) -> None:
            """Send a message to the operator."""
            calls.append(("notify", message))

        return [start_job, job_status, download, notify]

    return kit


def npc(start: tuple[int, int]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_position() -> tuple[int, int]:
            """The NPC's (x, y) on the map."""
            calls.append(("get_position",))
            return start

        def move_to(x: int, y: int) -> None:
            """Walk the NPC to (x, y)."""
            calls.append(("move_to", x, y))

        return [get_position, move_to]

    return kit


def guessing(secret: int | None) -> Kit:
    """``guess(n)`` answers -1 when n is too low, 1 when too high, 0 when right; with no
    secret it says "too high" to everything."""

    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def guess(n: int) -> int:
            """Try a number."""
            calls.append(("guess", n))
            if secret is None or n > secret:
                return 1
            return -1 if n < secret else 0

        return [guess]

    return kit


def suppliers(prices: dict[str, int]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_price(supplier: str) -> int:
            """A supplier's price for the part, in cents."""
            calls.append(("get_price", supplier))
            return prices[supplier]

        def place_order(supplier: str, price: int) -> str:
            """Order from a supplier; returns the purchase order number."""
            calls.append(("place_order", supplier, price))
            return f"PO-{supplier}-{price}"

        def get_quote(carrier: str) -> int:
            """A carrier's quote for the shipment."""
            calls.append(("get_quote", carrier))
            return prices[carrier]

        def book(carrier: str, price: int) -> None:
            """Book a carrier."""
            calls.append(("book", carrier, price))

        return [get_price, place_order, get_quote, book]

    return kit


def sensors(readings: dict[str, int]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def read_sensor(name: str) -> int:
            """A sensor's reading."""
            calls.append(("read_sensor", name))
            return readings[name]

        def set_alarm(sensor: str, on: int) -> None:
            """Switch the alarm for a sensor on (1) or off (0)."""
            calls.append(("set_alarm", sensor, on))

        return [read_sensor, set_alarm]

    return kit


def services(status: dict[str, str]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_status(service: str) -> str:
            """A service's health: "ok" or what is wrong."""
            calls.append(("get_status", service))
            return status[service]

        def page_oncall(service: str) -> None:
            """Page the engineer on call about a service."""
            calls.append(("page_oncall", service))

        def log_mask(mask: int) -> None:
            """Log a bit mask of failing services."""
            calls.append(("log_mask", mask))

        return [get_status, page_oncall, log_mask]

    return kit


def opening_days(open_days: set[int]) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def is_open(day: int) -> bool:
            """Whether the shop opens on a weekday (0 is Monday)."""
            calls.append(("is_open", day))
            return day in open_days

        def set_schedule(mask: int) -> None:
            """Schedule cleaning on the days set in the mask (bit 0 is Monday)."""
            calls.append(("set_schedule", mask))

        return [is_open, set_schedule]

    return kit


def bank(balance: int) -> Kit:
    def kit(calls: Calls) -> list[Callable[..., Any]]:
        def get_balance(account: str) -> int:
            """An account's balance in euros (negative when money is owed)."""
            calls.append(("get_balance", account))
            return balance

        def schedule_payment(amount: int) -> None:
            """Schedule a monthly payment."""
            calls.append(("schedule_payment", amount))

        return [get_balance, schedule_payment]

    return kit


# -- the corpus --------------------------------------------------------------------------------


def temps(**by_city: float) -> Kit:
    return weather(by_city)


CASES: dict[str, Case] = {
    # CALL then CMP EAX, 18 (the cdecl habit), JGE, a .data string pushed by name
    "heater_when_cold": Case(
        "heater_when_cold",
        temps(Paris=14.5),
        [("get_temperature", "Paris"), ("set_heater", 3)],
        {"EAX": 14.5},
    ),
    "heater_when_warm": Case(
        "heater_when_cold",
        temps(Paris=18.0),
        [("get_temperature", "Paris"), ("set_heater", 0)],
        {"EAX": 18.0},
    ),
    # a dd table of string labels indexed by [cities + esi*4], MOVD/COMISS/MOVSS on xmm, JBE
    "warmest_city": Case(
        "warmest_city",
        temps(Paris=17.5, Oslo=3.0, Cairo=31.5, Lima=19.0),
        [
            ("get_temperature", "Paris"),
            ("get_temperature", "Oslo"),
            ("get_temperature", "Cairo"),
            ("get_temperature", "Lima"),
            ("announce", "Cairo"),
        ],
        {"ESI": 4, "XMM0": 19.0, "EBX": "Cairo"},
        {"best_temp": [31.5], "best_city": ["Cairo"]},
    ),
    # LOOP over [students + ecx*4 - 4], ECX saved around the call, ADD [total], EAX, DIV ECX
    "average_score": Case(
        "average_score",
        scores({"Ann": 81, "Bob": 92, "Cy": 77, "Dee": 88}),
        [
            ("get_score", "Dee"),
            ("get_score", "Cy"),
            ("get_score", "Bob"),
            ("get_score", "Ann"),
            ("report_average", 84),
        ],
        {"EAX": 84, "EDX": 2, "ECX": 4},
        {"total": [338], "average": [84]},
    ),
    # MOVQ/MOVSD/SUBSD/CVTTSD2SI, TEST + JNS, XOR to clear, a cap read from [max_level]
    "thermostat_some_heat": Case(
        "thermostat_level",
        temps(Home=16.4),
        [("get_temperature", "Home"), ("set_heater", 4)],
        {"EAX": 4, "XMM1": 16.4},
    ),
    "thermostat_warm": Case(
        "thermostat_level",
        temps(Home=23.5),
        [("get_temperature", "Home"), ("set_heater", 0)],
        {"EAX": 0},
    ),
    "thermostat_capped": Case(
        "thermostat_level",
        temps(Home=10.0),
        [("get_temperature", "Home"), ("set_heater", 5)],
        {"EAX": 5},
    ),
    # CMP EAX, [threshold] / JAE, SUB from a constant, INC dword [ordered], JB to loop
    "restock_low_items": Case(
        "restock_low_items",
        shop({"apples": 4, "pears": 12, "milk": 0}),
        [
            ("get_stock", "apples"),
            ("order", "apples", 16),
            ("get_stock", "pears"),
            ("get_stock", "milk"),
            ("order", "milk", 20),
        ],
        {"ESI": 3, "EBX": 20},
        {"ordered": [2]},
    ),
    # POP dword [stock], CMP dword [stock], 5 / JB, LEA to round up, DIV ECX, global main
    "restock_in_cases": Case(
        "restock_in_cases",
        shop({"coffee": 3}),
        [("get_stock", "coffee"), ("order", "coffee", 2)],
        {"EAX": 2, "EDX": 0, "ECX": 6},
        {"stock": [3]},
    ),
    "restock_not_needed": Case(
        "restock_in_cases",
        shop({"coffee": 8}),
        [("get_stock", "coffee")],
        {"EAX": 0},
        {"stock": [8]},
    ),
    # a tuple result POPed into [ids], [ids + 4], [ids + 8]; UCOMISD with a qword limit
    "invoice_reminders": Case(
        "invoice_reminders",
        invoices({101: 250.0, 102: 80.5, 103: 100.0}),
        [
            ("list_invoices",),
            ("get_invoice_total", 101),
            ("send_reminder", 101),
            ("get_invoice_total", 102),
            ("get_invoice_total", 103),
        ],
        {"ESI": 3, "XMM0": 100.0},
        {"ids": [101, 102, 103], "sent": [1]},
    ),
    # PXOR to zero, ADDSD in a LOOP, CVTSI2SD and DIVSD for the mean, floats pushed from RAX
    "invoice_totals": Case(
        "invoice_totals",
        invoices({101: 250.0, 102: 80.5, 103: 100.0, 104: 19.5}),
        [
            ("get_invoice_total", 104),
            ("get_invoice_total", 103),
            ("get_invoice_total", 102),
            ("get_invoice_total", 101),
            ("report_totals", 450.0, 112.5),
        ],
        {"XMM0": 450.0, "XMM2": 112.5, "XMM3": 4.0, "ECX": 0, "EAX": 112.5},
    ),
    # undeclared variables: MOV result_id, R1 then PUSH result_id; CMP EAX, "done"
    "poll_job_until_done": Case(
        "poll_job_by_word",
        jobs(["queued", "running", "running", "done"]),
        [("start_job",)] + [("job_status", 42)] * 4 + [("download", 42)],
        {"R1": 42, "EAX": "done"},
        {"result_id": [42], "attempts": [3]},
    ),
    "poll_job_gives_up": Case(
        "poll_job_by_word",
        jobs(["running"]),
        [("start_job",)] + [("job_status", 42)] * 10,
        {"R1": 42, "EAX": "running"},
        {"result_id": [42], "attempts": [10]},
    ),
    # MOV [job], EAX; TEST EAX, EAX then JS (failed) and JNZ (done); DEC ECX / JNZ
    "poll_code_done": Case(
        "poll_job_by_code",
        jobs([0, 0, 1]),
        [("start_job",)]
        + [("job_status", 42)] * 3
        + [("download", 42), ("notify", "job finished")],
        {"ECX": 3, "EAX": 1},
        {"job": [42]},
    ),
    "poll_code_failed": Case(
        "poll_job_by_code",
        jobs([0, -1]),
        [("start_job",), ("job_status", 42), ("job_status", 42), ("notify", "job failed")],
        {"ECX": 4, "EAX": -1},
    ),
    "poll_code_timeout": Case(
        "poll_job_by_code",
        jobs([0]),
        [("start_job",)] + [("job_status", 42)] * 5 + [("notify", "job timed out")],
        {"ECX": 0, "EAX": 0},
    ),
    # a tuple position POPed into [x], [y]; route_x/route_y tables; CMP reg, [x]; JB
    "npc_patrol": Case(
        "npc_patrol",
        npc((2, 2)),
        [("get_position",), ("move_to", 8, 2), ("move_to", 8, 8), ("move_to", 2, 8)],
        {"ESI": 4},
        {"x": [2], "y": [8], "moves": [3]},
    ),
    "npc_patrol_from_elsewhere": Case(
        "npc_patrol",
        npc((5, 5)),
        [
            ("get_position",),
            ("move_to", 2, 2),
            ("move_to", 8, 2),
            ("move_to", 8, 8),
            ("move_to", 2, 8),
        ],
        {"ESI": 4},
        {"x": [2], "y": [8], "moves": [4]},
    ),
    # NEG for absolute values, SAR to halve a negative step (rounds down, as x86 does)
    "npc_halfway": Case(
        "npc_halfway",
        npc((9, 4)),
        [("get_position",), ("move_to", 5, 6)],
        {"ESI": 5, "EDI": 6, "EAX": -4, "EBX": 2, "ECX": 11, "EDX": 4},
        {"distance": [11]},
    ),
    "npc_already_there": Case(
        "npc_halfway",
        npc((2, 8)),
        [("get_position",)],
        {"ESI": 2, "EDI": 8, "ECX": 0},
        {"distance": [0]},
    ),
    # binary search over [lo]/[hi]: SHR to halve, TEST/JZ/JS on the answer, LEA r, [r + 1]
    "binary_search_memory": Case(
        "binary_search_memory",
        guessing(37),
        [("guess", 50), ("guess", 25), ("guess", 37)],
        {"EAX": 0},
        {"lo": [26], "hi": [49], "tries": [3], "mid": [37]},
    ),
    "binary_search_memory_top": Case(
        "binary_search_memory",
        guessing(100),
        [("guess", n) for n in (50, 75, 88, 94, 97, 99, 100)],
        {"EAX": 0},
        {"lo": [100], "hi": [100], "tries": [7], "mid": [100]},
    ),
    # binary search in registers: LEA EDI, [EBX + ECX], SAR, CMP EAX, 0 / JE / JL
    "binary_search_registers": Case(
        "binary_search_registers",
        guessing(733),
        [("guess", n) for n in (500, 750, 625, 687, 718, 734, 726, 730, 732, 733)],
        {"EDI": 733, "EBX": 733, "ECX": 733},
        {"answer": [733]},
    ),
    "binary_search_registers_no_answer": Case(
        "binary_search_registers",
        guessing(None),
        [("guess", n) for n in (500, 250, 125, 62, 31, 15, 7, 3, 1)],
        {"EBX": 1, "ECX": 0, "EDI": 1},
        {"answer": [-1]},
    ),
    # the cheapest of a list: CMOVL twice after one CMP, a string result stored by MOV [c], EAX
    "cheapest_supplier": Case(
        "cheapest_supplier",
        suppliers({"Acme": 120, "Bolt": 95, "Core": 110, "Dyna": 95}),
        [
            ("get_price", "Acme"),
            ("get_price", "Bolt"),
            ("get_price", "Core"),
            ("get_price", "Dyna"),
            ("place_order", "Bolt", 95),
        ],
        {"EBX": 95, "EDI": 1, "ESI": 4, "EAX": "PO-Bolt-95"},
        {"confirmation": ["PO-Bolt-95"]},
    ),
    # the highest reading kept in [max_val]/[max_idx]; SETG AL / MOVZX to pass a 0/1 flag
    "highest_reading_alarm": Case(
        "highest_reading",
        sensors({"boiler": 38, "pump": 45, "tank": 30}),
        [
            ("read_sensor", "boiler"),
            ("read_sensor", "pump"),
            ("read_sensor", "tank"),
            ("set_alarm", "pump", 1),
        ],
        {"EAX": 1, "EDI": 1},
        {"max_val": [45], "max_idx": [1]},
    ),
    "highest_reading_no_alarm": Case(
        "highest_reading",
        sensors({"boiler": 12, "pump": 40, "tank": 33}),
        [
            ("read_sensor", "boiler"),
            ("read_sensor", "pump"),
            ("read_sensor", "tank"),
            ("set_alarm", "pump", 0),
        ],
        {"EAX": 0, "EDI": 1},
        {"max_val": [40], "max_idx": [1]},
    ),
    # counting in a LOOP: COMISS against a 0.0 in .rodata, JAE, INC dword [cold]
    "count_frost": Case(
        "count_frost",
        temps(Oslo=-3.5, Paris=4.0, Helsinki=-12.0, Rome=11.0),
        [
            ("get_temperature", "Rome"),
            ("get_temperature", "Helsinki"),
            ("get_temperature", "Paris"),
            ("get_temperature", "Oslo"),
            ("report_count", 2),
        ],
        {"ECX": 0, "XMM0": -3.5},
        {"cold": [2]},
    ),
    # a subroutine taking its argument in ESI, CALL get_temperature inside it, RET
    "frost_subroutine": Case(
        "frost_subroutine",
        temps(Oslo=-3.5, Rome=11.0),
        [("get_temperature", "Oslo"), ("get_temperature", "Rome"), ("report_count", 1)],
        {"ESI": "Rome", "EAX": 11.0},
        {"frost_count": [1]},
    ),
    # string checks: CMP EAX, healthy (a string label); SHL EBX, CL and OR into a bit mask
    "service_health": Case(
        "service_health",
        services({"web": "ok", "db": "degraded", "cache": "ok"}),
        [
            ("get_status", "web"),
            ("get_status", "db"),
            ("page_oncall", "db"),
            ("get_status", "cache"),
            ("log_mask", 2),
        ],
        {"ESI": 3, "EBX": 2, "ECX": 1, "EAX": "ok"},
        {"failed_mask": [2]},
    ),
    "service_health_all_ok": Case(
        "service_health",
        services({"web": "ok", "db": "ok", "cache": "ok"}),
        [("get_status", "web"), ("get_status", "db"), ("get_status", "cache")],
        {"ESI": 3, "EBX": 0},
        {"failed_mask": [0]},
    ),
    # MULSS/ADDSS with .rodata floats, CVTSS2SI, COMISS then JNB
    "fahrenheit_mild": Case(
        "fahrenheit_display",
        temps(Oslo=10.0),
        [("get_temperature", "Oslo"), ("set_display", 50)],
        {"EAX": 50, "XMM0": 50.0},
    ),
    "fahrenheit_cold": Case(
        "fahrenheit_display",
        temps(Oslo=-5.0),
        [("get_temperature", "Oslo"), ("set_display", 23), ("set_heater", 2)],
        {"EAX": 23, "XMM0": 23.0},
    ),
    # two results kept in registers, XCHG to put the cheaper first
    "cheaper_carrier_swapped": Case(
        "book_cheaper_carrier",
        suppliers({"North": 340, "South": 295}),
        [("get_quote", "North"), ("get_quote", "South"), ("book", "South", 295)],
        {"EBX": 295, "ECX": 340, "ESI": "South", "EDI": "North"},
    ),
    "cheaper_carrier_in_order": Case(
        "book_cheaper_carrier",
        suppliers({"North": 250, "South": 295}),
        [("get_quote", "North"), ("get_quote", "South"), ("book", "North", 250)],
        {"EBX": 250, "ECX": 295, "ESI": "North", "EDI": "South"},
    ),
    # a bool result tested with TEST EAX, EAX; SHL/OR into dword [open_mask]; NOT and AND
    "cleaning_days": Case(
        "cleaning_days",
        opening_days({0, 1, 2, 3, 4}),
        [("is_open", day) for day in range(7)] + [("set_schedule", 96)],
        {"EAX": 96, "ESI": 7, "EBX": 16, "ECX": 4},
        {"open_mask": [31]},
    ),
    "cleaning_days_saturday_shop": Case(
        "cleaning_days",
        opening_days({5}),
        [("is_open", day) for day in range(7)] + [("set_schedule", 95)],
        {"EAX": 95, "ESI": 7, "EBX": 32, "ECX": 5},
        {"open_mask": [32]},
    ),
    # SETL BL / MOVZX into an array [low + esi*4] in .bss, a count in EDI, TEST EDI, EDI
    "low_stock_flags": Case(
        "low_stock_flags",
        shop({"bolts": 20, "nuts": 75, "screws": 49}),
        [
            ("get_stock", "bolts"),
            ("get_stock", "nuts"),
            ("get_stock", "screws"),
            ("notify_low", 2),
        ],
        {"EDI": 2, "EBX": 1, "ESI": 3},
        {"low": [1, 0, 1]},
    ),
    "low_stock_flags_none": Case(
        "low_stock_flags",
        shop({"bolts": 50, "nuts": 75, "screws": 90}),
        [("get_stock", "bolts"), ("get_stock", "nuts"), ("get_stock", "screws")],
        {"EDI": 0, "EBX": 0, "ESI": 3},
        {"low": [0, 0, 0]},
    ),
    # NEG a debt, IDIV and MOD by an equ constant, LOOP over the payments
    "installments": Case(
        "installments",
        bank(-250),
        [
            ("get_balance", "ACC-17"),
            ("schedule_payment", 84),
            ("schedule_payment", 83),
            ("schedule_payment", 83),
        ],
        {"EAX": 250, "EBX": 83, "EDX": 83, "ECX": 0},
        {"due": [250]},
    ),
    "installments_even": Case(
        "installments",
        bank(-300),
        [("get_balance", "ACC-17")] + [("schedule_payment", 100)] * 3,
        {"EAX": 300, "EBX": 100, "EDX": 100},
        {"due": [300]},
    ),
    "installments_nothing_due": Case(
        "installments",
        bank(40),
        [("get_balance", "ACC-17")],
        {"EAX": 40, "EBX": 0},
        {"due": [0]},
    ),
}


def program(source: str) -> Program:
    parsed = parse(source)
    assert isinstance(parsed, Program), parsed
    return parsed


def corpus(name: str) -> str:
    """A plan of the corpus, as a model wrote it (``tests/data/x86_corpus/NAME.asm``)."""
    return (CORPUS / f"{name}.asm").read_text(encoding="utf-8")


def test_the_corpus_has_every_plan_and_only_those() -> None:
    files = {path.stem for path in CORPUS.glob("*.asm")}
    assert len(files) == 24
    assert {case.plan for case in CASES.values()} == files
    refused = {path.stem for path in (CORPUS / "refused").glob("*.asm")}
    assert refused == set(REJECTED)


@pytest.mark.parametrize("name", list(CASES))
def test_a_plan_parses_verifies_and_runs_to_the_right_result(name: str) -> None:
    case = CASES[name]
    calls: Calls = []
    tools = case.tools(calls)
    plan = program(corpus(case.plan))
    assert check(plan, externs_from(tools)) == ()
    emu = Emulator(plan, tools)
    result = emu.run()
    assert calls == case.calls
    assert [record.call.tool for record in result.calls] == [call[0] for call in case.calls]
    for register, value in case.registers.items():
        assert result.registers.get(register, 0) == value, register
    for label, cells in case.memory.items():
        assert emu.state.mem[label] == cells, label
    assert result.stack == case.stack


# -- plans refused before they run ---------------------------------------------------------------

REJECTED: dict[str, tuple[Kit, list[str]]] = {  # the plans: data/x86_corpus/refused/
    # the result read in EAX (cdecl) and then POPed as well (the stack convention)
    "result_in_eax_and_popped": (
        temps(Paris=12.0),
        ["line 7", "result of CALL get_temperature (line 5) is read in EAX on line 6", "POP"],
    ),
    # a setting kept in .rodata and then changed
    "write_to_rodata": (
        shop({"apples": 3}),
        ["line 6", "read-only data", "section .data"],
    ),
    # the fifth waypoint of a four-point route
    "route_out_of_bounds": (
        npc((0, 0)),
        ["line 5", "reads cell 4 of route_x", "line 6", "route_y"],
    ),
    # the best city is only set when a city is warm enough, then always announced
    "variable_read_before_written": (
        temps(Cairo=30.0),
        ["line 7", "best_city is read here before it is written on some path", "MOV best_city"],
    ),
    # MOV ESI, cities copies the table's value in this language; the address wants LEA
    "table_address_by_mov": (
        temps(Oslo=3.0),
        ["line 8", "holds a string", "LEA ESI, [label]"],
    ),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_a_misused_plan_is_refused_before_any_tool_runs(name: str) -> None:
    kit, phrases = REJECTED[name]
    source = corpus(f"refused/{name}")
    calls: Calls = []
    with pytest.raises(PlanRejected) as info:
        Emulator(program(source), kit(calls))
    message = str(info.value)
    for phrase in phrases:
        assert phrase in message
    assert calls == []
