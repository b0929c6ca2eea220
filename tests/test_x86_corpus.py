"""A corpus of plans written the way models write x86 when asked for "an assembly program that
calls these tools": ``[name]`` variables in ``.data``, tables of string labels indexed by
``[table + esi*4]``, ``TEST``/``XOR``/``NEG``/``LEA``/shifts, ``SETcc``/``CMOVcc``, SSE floats,
``LOOP`` with ``ECX``, ``DIV`` for averages and the cdecl habit of reading a tool's result in
``EAX`` right after the ``CALL``.

Each plan runs against small typed tools that record their calls; the expected calls, registers
and memory were worked out by hand from the plan and the tools. The last part holds plans that
misuse memory or mix the two conventions for a tool's result, which are refused before they run
with a message that says what to write instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from llassembly.analysis.verifier import check
from llassembly.errors import PlanRejected
from llassembly.language.parser import parse
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import externs_from

Calls = list[tuple[Any, ...]]
Kit = Callable[[Calls], list[Callable[..., Any]]]


@dataclass(frozen=True)
class Case:
    """One plan, the world it runs in and what it must do there.

    Attributes:
        plan: The plan as a model writes it.
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

HEATER_WHEN_COLD = """
; Turn the heater up when it is colder than 18 degrees in Paris.
section .data
    city db "Paris", 0

section .text
global _start
_start:
    push city
    call get_temperature      ; result in eax
    cmp eax, 18
    jge warm_enough
    push 3
    call set_heater
    jmp done
warm_enough:
    push 0
    call set_heater
done:
    hlt
"""

WARMEST_CITY = """
section .rodata
    cities  dd paris, oslo, cairo, lima
    paris   db "Paris", 0
    oslo    db "Oslo", 0
    cairo   db "Cairo", 0
    lima    db "Lima", 0
    NUM_CITIES equ 4

section .data
    best_temp  dq -1000.0
    best_city  dd 0

section .text
global _start
_start:
    xor esi, esi                    ; i = 0
.loop:
    push dword [cities + esi*4]
    call get_temperature
    movd xmm0, eax                  ; the temperature
    comiss xmm0, dword [best_temp]
    jbe .next                       ; not warmer
    movss dword [best_temp], xmm0
    mov ebx, [cities + esi*4]
    mov [best_city], ebx
.next:
    inc esi
    cmp esi, NUM_CITIES
    jl .loop
    push dword [best_city]
    call announce
    ret
"""

AVERAGE_SCORE = """
; Average exam score of the class, rounded down
section .rodata
    students dd ann, bob, cy, dee
    ann db "Ann", 0
    bob db "Bob", 0
    cy  db "Cy", 0
    dee db "Dee", 0

section .bss
    total   resd 1
    average resd 1

section .text
global _start
_start:
    mov ecx, 4
.next:
    push ecx                              ; keep the counter across the call
    push dword [students + ecx*4 - 4]
    call get_score
    add [total], eax
    pop ecx
    loop .next

    mov eax, [total]
    xor edx, edx
    mov ecx, 4
    div ecx                               ; eax = total / 4, edx = remainder
    mov [average], eax
    push eax
    call report_average
    hlt
"""

THERMOSTAT_LEVEL = """
; heater level = whole degrees below the target, between 0 and 5
section .data
    target    dq 21.0
    max_level dd 5
section .rodata
    home db "Home", 0
section .text
_start:
    push home
    call get_temperature
    movq xmm1, rax                ; current temperature
    movsd xmm0, qword [target]
    subsd xmm0, xmm1              ; degrees missing
    cvttsd2si eax, xmm0
    test eax, eax
    jns .positive
    xor eax, eax                  ; warm enough: off
.positive:
    cmp eax, dword [max_level]
    jle .set
    mov eax, dword [max_level]
.set:
    push eax
    call set_heater
    hlt
"""

RESTOCK_LOW_ITEMS = """
; Order up to 20 units of every item below the threshold
section .rodata
    items     dd apples, pears, milk
    apples    db "apples", 0
    pears     db "pears", 0
    milk      db "milk", 0
    threshold dd 10
section .data
    ordered   dd 0
section .text
    xor esi, esi
check_item:
    push dword [items + esi*4]
    call get_stock
    cmp eax, [threshold]
    jae enough
    mov ebx, 20
    sub ebx, eax                  ; units missing
    push dword [items + esi*4]
    push ebx
    call order
    inc dword [ordered]
enough:
    inc esi
    cmp esi, 3
    jb check_item
"""

RESTOCK_IN_CASES = """
section .data
    item      db "coffee", 0
    stock     dd 0
    target    dd 10
    case_size dd 6
section .text
global main
main:
    push item
    call get_stock
    pop dword [stock]
    cmp dword [stock], 5
    jb reorder
    ret
reorder:
    mov eax, [target]
    sub eax, [stock]               ; units missing
    lea eax, [eax + 5]             ; round up to whole cases
    xor edx, edx
    mov ecx, [case_size]
    div ecx
    push item
    push eax
    call order
    ret
"""

INVOICE_REMINDERS = """
; Remind the customers of every invoice over 100.00
section .data
    limit dq 100.0
    sent  dd 0
section .bss
    ids resd 3
section .text
_start:
    call list_invoices
    pop dword [ids]
    pop dword [ids + 4]
    pop dword [ids + 8]
    xor esi, esi
.check:
    push dword [ids + esi*4]
    call get_invoice_total
    movq xmm0, rax
    ucomisd xmm0, qword [limit]
    jbe .skip
    push dword [ids + esi*4]
    call send_reminder
    inc dword [sent]
.skip:
    inc esi
    cmp esi, 3
    jne .check
    hlt
"""

INVOICE_TOTALS = """
section .data
    ids dd 101, 102, 103, 104
section .text
global _start
_start:
    pxor xmm0, xmm0                 ; sum = 0.0
    mov ecx, 4
.sum:
    push ecx
    push dword [ids + ecx*4 - 4]
    call get_invoice_total
    movq xmm1, rax
    addsd xmm0, xmm1
    pop ecx
    loop .sum

    movsd xmm2, xmm0
    mov eax, 4
    cvtsi2sd xmm3, eax
    divsd xmm2, xmm3                ; average
    movq rax, xmm0
    push rax
    movq rax, xmm2
    push rax
    call report_totals
    hlt
"""

POLL_JOB_BY_WORD = """
; start the export, wait until it is done (at most 10 polls), then download it
section .text
    call start_job
    pop r1
    mov result_id, r1
    mov attempts, 0
poll:
    push result_id
    call job_status
    cmp eax, "done"
    je finished
    inc attempts
    cmp attempts, 10
    jl poll
    hlt
finished:
    push result_id
    call download
"""

POLL_JOB_BY_CODE = """
section .data
    job dd 0
    msg_done    db "job finished", 0
    msg_failed  db "job failed", 0
    msg_timeout db "job timed out", 0
section .text
_start:
    call start_job
    mov [job], eax
    mov ecx, 5                    ; polls left
.poll:
    push dword [job]
    call job_status
    test eax, eax
    js .failed                    ; -1: failed
    jnz .done                     ; 1: done
    dec ecx
    jnz .poll
    push msg_timeout
    jmp .tell
.failed:
    push msg_failed
    jmp .tell
.done:
    push dword [job]
    call download
    push msg_done
.tell:
    call notify
    hlt
"""

NPC_PATROL = """
; walk the patrol route, skipping the waypoint the NPC already stands on
section .rodata
    route_x dd 2, 8, 8, 2
    route_y dd 2, 2, 8, 8
section .data
    x     dd 0
    y     dd 0
    moves dd 0
section .text
_start:
    call get_position
    pop dword [x]
    pop dword [y]
    xor esi, esi
next_point:
    mov eax, [route_x + esi*4]
    mov ebx, [route_y + esi*4]
    cmp eax, [x]
    jne go
    cmp ebx, [y]
    je arrived
go:
    push eax
    push ebx
    call move_to
    mov [x], eax
    mov [y], ebx
    inc dword [moves]
arrived:
    inc esi
    cmp esi, 4
    jb next_point
    hlt
"""

NPC_HALFWAY = """
; Move the NPC half-way towards the target; remember the distance
section .rodata
    target_x dd 2
    target_y dd 8
section .bss
    distance resd 1
section .text
_start:
    call get_position
    pop esi                       ; x
    pop edi                       ; y
    mov eax, [target_x]
    sub eax, esi                  ; dx
    mov ebx, [target_y]
    sub ebx, edi                  ; dy
    mov ecx, eax
    test ecx, ecx
    jns .dx_ok
    neg ecx                       ; |dx|
.dx_ok:
    mov edx, ebx
    test edx, edx
    jns .dy_ok
    neg edx                       ; |dy|
.dy_ok:
    add ecx, edx
    mov [distance], ecx
    cmp ecx, 1
    jle .close
    sar eax, 1                    ; half the way
    sar ebx, 1
    add esi, eax
    add edi, ebx
    push esi
    push edi
    call move_to
.close:
    hlt
"""

BINARY_SEARCH_MEMORY = """
; guess the number between 1 and 100
section .data
    lo    dd 1
    hi    dd 100
    tries dd 0
section .bss
    mid   resd 1
section .text
global _start
_start:
.search:
    mov eax, [lo]
    add eax, [hi]
    shr eax, 1                ; mid = (lo + hi) / 2
    mov [mid], eax
    push eax
    call guess
    inc dword [tries]
    test eax, eax
    jz .found
    js .too_low
    mov ebx, [mid]            ; too high: hi = mid - 1
    dec ebx
    mov [hi], ebx
    jmp .search
.too_low:
    mov ebx, [mid]
    lea ebx, [ebx + 1]        ; lo = mid + 1
    mov [lo], ebx
    jmp .search
.found:
    hlt
"""

BINARY_SEARCH_REGISTERS = """
section .bss
    answer resd 1
section .text
    mov ebx, 1                ; lo
    mov ecx, 1000             ; hi
.loop:
    cmp ebx, ecx
    jg .not_found
    lea edi, [ebx + ecx]
    sar edi, 1                ; mid
    push edi
    call guess
    cmp eax, 0
    je .found
    jl .higher                ; mid was too low
    lea ecx, [edi - 1]
    jmp .loop
.higher:
    lea ebx, [edi + 1]
    jmp .loop
.found:
    mov [answer], edi
    hlt
.not_found:
    mov dword [answer], -1
    hlt
"""

CHEAPEST_SUPPLIER = """
section .rodata
    suppliers dd acme, bolt, core, dyna
    acme db "Acme", 0
    bolt db "Bolt", 0
    core db "Core", 0
    dyna db "Dyna", 0
section .data
    confirmation dd 0
section .text
_start:
    mov ebx, 0x7fffffff           ; best price so far
    xor edi, edi                  ; best supplier
    xor esi, esi
.next:
    push dword [suppliers + esi*4]
    call get_price
    cmp eax, ebx
    cmovl ebx, eax
    cmovl edi, esi
    inc esi
    cmp esi, 4
    jb .next
    push dword [suppliers + edi*4]
    push ebx
    call place_order
    mov [confirmation], eax
    hlt
"""

HIGHEST_READING = """
section .rodata
    sensors dd s_boiler, s_pump, s_tank
    s_boiler db "boiler", 0
    s_pump   db "pump", 0
    s_tank   db "tank", 0
section .data
    max_val dd -1
    max_idx dd 0
section .text
    mov esi, 0
read_next:
    push dword [sensors + esi*4]
    call read_sensor
    cmp eax, [max_val]
    jle not_higher
    mov [max_val], eax
    mov [max_idx], esi
not_higher:
    inc esi
    cmp esi, 3
    jl read_next

    mov edi, [max_idx]
    push dword [sensors + edi*4]
    cmp dword [max_val], 40
    setg al                       ; alarm when the highest reading is over 40
    movzx eax, al
    push eax
    call set_alarm
"""

COUNT_FROST = """
; how many cities are below zero?
section .rodata
    cities dd oslo, paris, helsinki, rome
    oslo     db "Oslo", 0
    paris    db "Paris", 0
    helsinki db "Helsinki", 0
    rome     db "Rome", 0
    zero     dd 0.0
section .data
    cold dd 0
section .text
_start:
    mov ecx, 4
.city:
    push ecx
    push dword [cities + ecx*4 - 4]
    call get_temperature
    movd xmm0, eax
    comiss xmm0, [zero]
    jae .not_cold
    inc dword [cold]
.not_cold:
    pop ecx
    loop .city
    push dword [cold]
    call report_count
    hlt
"""

FROST_SUBROUTINE = """
section .data
    frost_count dd 0
    oslo db "Oslo", 0
    rome db "Rome", 0
section .text
global _start
_start:
    mov esi, oslo
    call check_city
    mov esi, rome
    call check_city
    push dword [frost_count]
    call report_count
    hlt

check_city:               ; esi = city name
    push esi
    call get_temperature
    cmp eax, 0
    jge .done
    inc dword [frost_count]
.done:
    ret
"""

SERVICE_HEALTH = """
; page on-call for every unhealthy service and log which ones failed
section .rodata
    names    dd web, database, cache
    web      db "web", 0
    database db "db", 0
    cache   db "cache", 0
    healthy db "ok", 0
section .data
    failed_mask dd 0
section .text
    xor esi, esi
check:
    push dword [names + esi*4]
    call get_status
    cmp eax, healthy
    je fine
    push dword [names + esi*4]
    call page_oncall
    mov ecx, esi
    mov ebx, 1
    shl ebx, cl                   ; bit for this service
    or [failed_mask], ebx
fine:
    inc esi
    cmp esi, 3
    jne check
    cmp dword [failed_mask], 0
    je all_ok
    push dword [failed_mask]
    call log_mask
all_ok:
    hlt
"""

FAHRENHEIT_DISPLAY = """
section .rodata
    city        db "Oslo", 0
    nine_fifths dd 1.8
    thirty_two  dd 32.0
    fifty       dd 50.0
section .text
    push city
    call get_temperature
    movd xmm0, eax
    mulss xmm0, [nine_fifths]
    addss xmm0, [thirty_two]      ; degrees Fahrenheit
    cvtss2si eax, xmm0
    push eax
    call set_display
    comiss xmm0, [fifty]
    jnb .done                     ; 50 F or more: no heating
    push 2
    call set_heater
.done:
    hlt
"""

BOOK_CHEAPER_CARRIER = """
section .rodata
    north db "North", 0
    south db "South", 0
section .text
    push north
    call get_quote
    mov ebx, eax                  ; north's price
    push south
    call get_quote
    mov ecx, eax                  ; south's price
    mov esi, north
    mov edi, south
    cmp ebx, ecx
    jle .book
    xchg ebx, ecx                 ; cheaper one first
    xchg esi, edi
.book:
    push esi
    push ebx
    call book
    hlt
"""

CLEANING_DAYS = """
; schedule cleaning on the days the shop is closed (bit 0 = Monday)
section .data
    open_mask dd 0
section .text
    xor esi, esi
.day:
    push esi
    call is_open
    test eax, eax
    jz .closed
    mov ecx, esi
    mov ebx, 1
    shl ebx, cl
    or dword [open_mask], ebx
.closed:
    inc esi
    cmp esi, 7
    jb .day
    mov eax, [open_mask]
    not eax
    and eax, 0x7F                 ; the seven days only
    push eax
    call set_schedule
"""

LOW_STOCK_FLAGS = """
section .rodata
    items  dd bolts, nuts, screws
    bolts  db "bolts", 0
    nuts   db "nuts", 0
    screws db "screws", 0
section .bss
    low resd 3                    ; 1 where the item runs low
section .text
    xor esi, esi
    xor edi, edi                  ; how many run low
scan:
    push dword [items + esi*4]
    call get_stock
    cmp eax, 50
    setl bl
    movzx ebx, bl
    mov [low + esi*4], ebx
    add edi, ebx
    inc esi
    cmp esi, 3
    jl scan
    test edi, edi
    jz done
    push edi
    call notify_low
done:
    hlt
"""

INSTALLMENTS = """
; spread a debt over three monthly payments, the remainder in the first one
section .rodata
    account db "ACC-17", 0
    months  equ 3
section .data
    due dd 0
section .text
global _start
_start:
    push account
    call get_balance
    test eax, eax
    jns .nothing_due              ; nothing owed
    neg eax
    mov [due], eax
    mov ebx, [due]
    idiv ebx, months              ; each payment
    mov edx, [due]
    mod edx, months               ; what is left over
    add edx, ebx                  ; the first payment takes it
    mov ecx, months
.pay:
    push edx
    call schedule_payment
    mov edx, ebx
    loop .pay
.nothing_due:
    hlt
"""


def temps(**by_city: float) -> Kit:
    return weather(by_city)


CASES: dict[str, Case] = {
    # CALL then CMP EAX, 18 (the cdecl habit), JGE, a .data string pushed by name
    "heater_when_cold": Case(
        HEATER_WHEN_COLD,
        temps(Paris=14.5),
        [("get_temperature", "Paris"), ("set_heater", 3)],
        {"EAX": 14.5},
    ),
    "heater_when_warm": Case(
        HEATER_WHEN_COLD,
        temps(Paris=18.0),
        [("get_temperature", "Paris"), ("set_heater", 0)],
        {"EAX": 18.0},
    ),
    # a dd table of string labels indexed by [cities + esi*4], MOVD/COMISS/MOVSS on xmm, JBE
    "warmest_city": Case(
        WARMEST_CITY,
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
        AVERAGE_SCORE,
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
        THERMOSTAT_LEVEL,
        temps(Home=16.4),
        [("get_temperature", "Home"), ("set_heater", 4)],
        {"EAX": 4, "XMM1": 16.4},
    ),
    "thermostat_warm": Case(
        THERMOSTAT_LEVEL,
        temps(Home=23.5),
        [("get_temperature", "Home"), ("set_heater", 0)],
        {"EAX": 0},
    ),
    "thermostat_capped": Case(
        THERMOSTAT_LEVEL,
        temps(Home=10.0),
        [("get_temperature", "Home"), ("set_heater", 5)],
        {"EAX": 5},
    ),
    # CMP EAX, [threshold] / JAE, SUB from a constant, INC dword [ordered], JB to loop
    "restock_low_items": Case(
        RESTOCK_LOW_ITEMS,
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
        RESTOCK_IN_CASES,
        shop({"coffee": 3}),
        [("get_stock", "coffee"), ("order", "coffee", 2)],
        {"EAX": 2, "EDX": 0, "ECX": 6},
        {"stock": [3]},
    ),
    "restock_not_needed": Case(
        RESTOCK_IN_CASES,
        shop({"coffee": 8}),
        [("get_stock", "coffee")],
        {"EAX": 0},
        {"stock": [8]},
    ),
    # a tuple result POPed into [ids], [ids + 4], [ids + 8]; UCOMISD with a qword limit
    "invoice_reminders": Case(
        INVOICE_REMINDERS,
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
        INVOICE_TOTALS,
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
        POLL_JOB_BY_WORD,
        jobs(["queued", "running", "running", "done"]),
        [("start_job",)] + [("job_status", 42)] * 4 + [("download", 42)],
        {"R1": 42, "EAX": "done"},
        {"result_id": [42], "attempts": [3]},
    ),
    "poll_job_gives_up": Case(
        POLL_JOB_BY_WORD,
        jobs(["running"]),
        [("start_job",)] + [("job_status", 42)] * 10,
        {"R1": 42, "EAX": "running"},
        {"result_id": [42], "attempts": [10]},
    ),
    # MOV [job], EAX; TEST EAX, EAX then JS (failed) and JNZ (done); DEC ECX / JNZ
    "poll_code_done": Case(
        POLL_JOB_BY_CODE,
        jobs([0, 0, 1]),
        [("start_job",)]
        + [("job_status", 42)] * 3
        + [("download", 42), ("notify", "job finished")],
        {"ECX": 3, "EAX": 1},
        {"job": [42]},
    ),
    "poll_code_failed": Case(
        POLL_JOB_BY_CODE,
        jobs([0, -1]),
        [("start_job",), ("job_status", 42), ("job_status", 42), ("notify", "job failed")],
        {"ECX": 4, "EAX": -1},
    ),
    "poll_code_timeout": Case(
        POLL_JOB_BY_CODE,
        jobs([0]),
        [("start_job",)] + [("job_status", 42)] * 5 + [("notify", "job timed out")],
        {"ECX": 0, "EAX": 0},
    ),
    # a tuple position POPed into [x], [y]; route_x/route_y tables; CMP reg, [x]; JB
    "npc_patrol": Case(
        NPC_PATROL,
        npc((2, 2)),
        [("get_position",), ("move_to", 8, 2), ("move_to", 8, 8), ("move_to", 2, 8)],
        {"ESI": 4},
        {"x": [2], "y": [8], "moves": [3]},
    ),
    "npc_patrol_from_elsewhere": Case(
        NPC_PATROL,
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
        NPC_HALFWAY,
        npc((9, 4)),
        [("get_position",), ("move_to", 5, 6)],
        {"ESI": 5, "EDI": 6, "EAX": -4, "EBX": 2, "ECX": 11, "EDX": 4},
        {"distance": [11]},
    ),
    "npc_already_there": Case(
        NPC_HALFWAY,
        npc((2, 8)),
        [("get_position",)],
        {"ESI": 2, "EDI": 8, "ECX": 0},
        {"distance": [0]},
    ),
    # binary search over [lo]/[hi]: SHR to halve, TEST/JZ/JS on the answer, LEA r, [r + 1]
    "binary_search_memory": Case(
        BINARY_SEARCH_MEMORY,
        guessing(37),
        [("guess", 50), ("guess", 25), ("guess", 37)],
        {"EAX": 0},
        {"lo": [26], "hi": [49], "tries": [3], "mid": [37]},
    ),
    "binary_search_memory_top": Case(
        BINARY_SEARCH_MEMORY,
        guessing(100),
        [("guess", n) for n in (50, 75, 88, 94, 97, 99, 100)],
        {"EAX": 0},
        {"lo": [100], "hi": [100], "tries": [7], "mid": [100]},
    ),
    # binary search in registers: LEA EDI, [EBX + ECX], SAR, CMP EAX, 0 / JE / JL
    "binary_search_registers": Case(
        BINARY_SEARCH_REGISTERS,
        guessing(733),
        [("guess", n) for n in (500, 750, 625, 687, 718, 734, 726, 730, 732, 733)],
        {"EDI": 733, "EBX": 733, "ECX": 733},
        {"answer": [733]},
    ),
    "binary_search_registers_no_answer": Case(
        BINARY_SEARCH_REGISTERS,
        guessing(None),
        [("guess", n) for n in (500, 250, 125, 62, 31, 15, 7, 3, 1)],
        {"EBX": 1, "ECX": 0, "EDI": 1},
        {"answer": [-1]},
    ),
    # the cheapest of a list: CMOVL twice after one CMP, a string result stored by MOV [c], EAX
    "cheapest_supplier": Case(
        CHEAPEST_SUPPLIER,
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
        HIGHEST_READING,
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
        HIGHEST_READING,
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
        COUNT_FROST,
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
        FROST_SUBROUTINE,
        temps(Oslo=-3.5, Rome=11.0),
        [("get_temperature", "Oslo"), ("get_temperature", "Rome"), ("report_count", 1)],
        {"ESI": "Rome", "EAX": 11.0},
        {"frost_count": [1]},
    ),
    # string checks: CMP EAX, healthy (a string label); SHL EBX, CL and OR into a bit mask
    "service_health": Case(
        SERVICE_HEALTH,
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
        SERVICE_HEALTH,
        services({"web": "ok", "db": "ok", "cache": "ok"}),
        [("get_status", "web"), ("get_status", "db"), ("get_status", "cache")],
        {"ESI": 3, "EBX": 0},
        {"failed_mask": [0]},
    ),
    # MULSS/ADDSS with .rodata floats, CVTSS2SI, COMISS then JNB
    "fahrenheit_mild": Case(
        FAHRENHEIT_DISPLAY,
        temps(Oslo=10.0),
        [("get_temperature", "Oslo"), ("set_display", 50)],
        {"EAX": 50, "XMM0": 50.0},
    ),
    "fahrenheit_cold": Case(
        FAHRENHEIT_DISPLAY,
        temps(Oslo=-5.0),
        [("get_temperature", "Oslo"), ("set_display", 23), ("set_heater", 2)],
        {"EAX": 23, "XMM0": 23.0},
    ),
    # two results kept in registers, XCHG to put the cheaper first
    "cheaper_carrier_swapped": Case(
        BOOK_CHEAPER_CARRIER,
        suppliers({"North": 340, "South": 295}),
        [("get_quote", "North"), ("get_quote", "South"), ("book", "South", 295)],
        {"EBX": 295, "ECX": 340, "ESI": "South", "EDI": "North"},
    ),
    "cheaper_carrier_in_order": Case(
        BOOK_CHEAPER_CARRIER,
        suppliers({"North": 250, "South": 295}),
        [("get_quote", "North"), ("get_quote", "South"), ("book", "North", 250)],
        {"EBX": 250, "ECX": 295, "ESI": "North", "EDI": "South"},
    ),
    # a bool result tested with TEST EAX, EAX; SHL/OR into dword [open_mask]; NOT and AND
    "cleaning_days": Case(
        CLEANING_DAYS,
        opening_days({0, 1, 2, 3, 4}),
        [("is_open", day) for day in range(7)] + [("set_schedule", 96)],
        {"EAX": 96, "ESI": 7, "EBX": 16, "ECX": 4},
        {"open_mask": [31]},
    ),
    "cleaning_days_saturday_shop": Case(
        CLEANING_DAYS,
        opening_days({5}),
        [("is_open", day) for day in range(7)] + [("set_schedule", 95)],
        {"EAX": 95, "ESI": 7, "EBX": 32, "ECX": 5},
        {"open_mask": [32]},
    ),
    # SETL BL / MOVZX into an array [low + esi*4] in .bss, a count in EDI, TEST EDI, EDI
    "low_stock_flags": Case(
        LOW_STOCK_FLAGS,
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
        LOW_STOCK_FLAGS,
        shop({"bolts": 50, "nuts": 75, "screws": 90}),
        [("get_stock", "bolts"), ("get_stock", "nuts"), ("get_stock", "screws")],
        {"EDI": 0, "EBX": 0, "ESI": 3},
        {"low": [0, 0, 0]},
    ),
    # NEG a debt, IDIV and MOD by an equ constant, LOOP over the payments
    "installments": Case(
        INSTALLMENTS,
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
        INSTALLMENTS,
        bank(-300),
        [("get_balance", "ACC-17")] + [("schedule_payment", 100)] * 3,
        {"EAX": 300, "EBX": 100, "EDX": 100},
        {"due": [300]},
    ),
    "installments_nothing_due": Case(
        INSTALLMENTS,
        bank(40),
        [("get_balance", "ACC-17")],
        {"EAX": 40, "EBX": 0},
        {"due": [0]},
    ),
}

PLANS = {
    HEATER_WHEN_COLD,
    WARMEST_CITY,
    AVERAGE_SCORE,
    THERMOSTAT_LEVEL,
    RESTOCK_LOW_ITEMS,
    RESTOCK_IN_CASES,
    INVOICE_REMINDERS,
    INVOICE_TOTALS,
    POLL_JOB_BY_WORD,
    POLL_JOB_BY_CODE,
    NPC_PATROL,
    NPC_HALFWAY,
    BINARY_SEARCH_MEMORY,
    BINARY_SEARCH_REGISTERS,
    CHEAPEST_SUPPLIER,
    HIGHEST_READING,
    COUNT_FROST,
    FROST_SUBROUTINE,
    SERVICE_HEALTH,
    FAHRENHEIT_DISPLAY,
    BOOK_CHEAPER_CARRIER,
    CLEANING_DAYS,
    LOW_STOCK_FLAGS,
    INSTALLMENTS,
}


def program(source: str) -> Program:
    parsed = parse(source)
    assert isinstance(parsed, Program), parsed
    return parsed


def test_the_corpus_has_every_plan_and_only_those() -> None:
    assert len(PLANS) == 24
    assert {case.plan for case in CASES.values()} == PLANS


@pytest.mark.parametrize("name", list(CASES))
def test_a_plan_parses_verifies_and_runs_to_the_right_result(name: str) -> None:
    case = CASES[name]
    calls: Calls = []
    tools = case.tools(calls)
    plan = program(case.plan)
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

REJECTED: dict[str, tuple[str, Kit, list[str]]] = {
    # the result read in EAX (cdecl) and then POPed as well (the stack convention)
    "result_in_eax_and_popped": (
        """
section .rodata
    city db "Paris", 0
section .text
    push city
    call get_temperature
    cmp eax, 18               ; result in eax
    pop ebx                   ; and the result again?
    jl cold
    hlt
cold:
    push 3
    call set_heater
""",
        temps(Paris=12.0),
        ["line 8", "result of CALL get_temperature (line 6) is read in EAX on line 7", "POP"],
    ),
    # a setting kept in .rodata and then changed
    "write_to_rodata": (
        """
section .rodata
    threshold dd 10
section .text
    push "apples"
    call get_stock
    mov dword [threshold], 5
    cmp eax, [threshold]
""",
        shop({"apples": 3}),
        ["line 7", "read-only data", "section .data"],
    ),
    # the fifth waypoint of a four-point route
    "route_out_of_bounds": (
        """
section .data
    route_x dd 2, 8, 8, 2
    route_y dd 2, 2, 8, 8
section .text
    push dword [route_x + 16]
    push dword [route_y + 16]
    call move_to
""",
        npc((0, 0)),
        ["line 6", "reads cell 4 of route_x", "line 7", "route_y"],
    ),
    # the best city is only set when a city is warm enough, then always announced
    "variable_read_before_written": (
        """
    push "Cairo"
    call get_temperature
    cmp eax, 25
    jl no_record
    mov best_city, "Cairo"
no_record:
    push best_city
    call announce
""",
        temps(Cairo=30.0),
        ["line 8", "best_city is read here before it is written on some path", "MOV best_city"],
    ),
    # MOV ESI, cities copies the table's value in this language; the address wants LEA
    "table_address_by_mov": (
        """
section .rodata
    cities dd paris, oslo
    paris db "Paris", 0
    oslo db "Oslo", 0
section .text
    mov esi, cities
    mov ecx, 1
    push dword [esi + ecx*4]
    call get_temperature
""",
        temps(Oslo=3.0),
        ["line 9", "holds a string", "LEA ESI, [label]"],
    ),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_a_misused_plan_is_refused_before_any_tool_runs(name: str) -> None:
    source, kit, phrases = REJECTED[name]
    calls: Calls = []
    with pytest.raises(PlanRejected) as info:
        Emulator(program(source), kit(calls))
    message = str(info.value)
    for phrase in phrases:
        assert phrase in message
    assert calls == []
