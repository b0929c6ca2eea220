"""Everyday orders over tools shaped like real APIs: a bank, a CRM and a calendar.

The tools (``use_cases/apis.py``) return pydantic records (money as ``Decimal``), a paginated
``TypedDict`` with a cursor, dataclasses holding lists; they take records back and have
optional parameters. Each order's plan was WRITTEN BY HAND the way a model writes one from the
system prompt alone (the prompt these tools get is checked to teach every feature the plans
use), then run through ``create_agent`` + ``ToolsPlannerMiddleware`` on the agent path and the
graph path, and checked against the office it acted on: the exact calls, what changed, and
the answer the turn ends with. None of the replies is a recording of a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from conftest import asm
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from use_cases.apis import API_TOOLS, Office, office

from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.prompt import build_system_prompt
from llassembly.integration.record import KEY
from llassembly.machine.externs import externs_from

SYSTEM = "You are an office assistant with the user's bank account, contacts and calendar."


@dataclass(frozen=True)
class Order:
    """What the user asked, the plan a model writes for it, and what must come of it."""

    human: str
    plan: str
    calls: list[tuple[Any, ...]]
    answer: str


ORDERS: dict[str, Order] = {}

ORDERS["spent in a month"] = Order(
    "How much did I spend in March 2024?",
    """
; spending = the bookings of March with a negative amount
    PUSH "2024-03"          ; month
    PUSH NONE               ; counterparty: all
    CALL list_transactions
    POP R1
    LEN R2, R1
    MOV ESI, 0
    MOV xmm0, 0.0           ; total spent
next:
    CMP ESI, R2
    JGE done
    NUM R3, R1[ESI].amount  ; amount is decimal text
    CMP R3, 0
    JGE skip                ; money in
    SUBSD xmm0, R3          ; minus a negative amount
skip:
    INC ESI
    JMP next
done:
    SAY "You spent {xmm0:,.2f} EUR in March 2024."
""",
    [("list_transactions", "2024-03", None)],
    "You spent 79.34 EUR in March 2024.",
)

ORDERS["refund a payment"] = Order(
    "Refund the last payment Carol Diaz sent me.",
    """
    PUSH NONE                ; month
    PUSH "Carol Diaz"        ; counterparty
    CALL list_transactions
    POP R1
    LEN R2, R1
    CMP R2, 0
    JE none_found
    MOV R3, R1[-1]           ; oldest first: the last one is the newest
    NUM R4, R3.amount
    CMP R4, 0
    JLE none_found           ; not money she sent
    PUSH R3.iban
    PUSH R4
    PUSH "Refund: {R3.subject}"
    CALL send_money
    POP R5
    SAY "Sent {R4:.2f} EUR back to {R3.counterparty} ({R5.status})."
    HLT
none_found:
    SAY "I found no payment from Carol Diaz."
""",
    [
        ("list_transactions", None, "Carol Diaz"),
        ("send_money", "DE89 3704 0044 0532 0130 06", 23.5, "Refund: Dinner share"),
    ],
    "Sent 23.50 EUR back to Carol Diaz (booked).",
)

ORDERS["paid to a company, any spelling"] = Order(
    "How much have I paid Spotify in total?",
    """
    PUSH NONE
    PUSH NONE
    CALL list_transactions
    POP R1
    LEN R2, R1
    MOV ESI, 0
    MOV R6, 0                ; total
    MOV R7, 0                ; payments
loop:
    CMP ESI, R2
    JGE done
    LOWER R3, R1[ESI].counterparty
    FIND R4, R3, "spotify"
    CMP R4, 0
    JL skip
    NUM R5, R1[ESI].amount
    SUB R6, R5               ; payments are negative
    INC R7
skip:
    INC ESI
    JMP loop
done:
    SAY "You paid Spotify {R6:.2f} EUR in total ({R7} payments)."
""",
    [("list_transactions", None, None)],
    "You paid Spotify 33.98 EUR in total (3 payments).",
)

ORDERS["every page of a search"] = Order(
    "List the emails of everyone who works at Acme.",
    """
    MOV R7, NONE             ; cursor: first page
    MOV R8, 0                ; found
page:
    PUSH "Acme"
    PUSH R7
    CALL search_contacts
    POP R1
    LEN R2, R1.contacts
    MOV ESI, 0
each:
    CMP ESI, R2
    JGE next_page
    MOV R3, R1.contacts[ESI]
    CMP R3.company, "Acme"   ; the query also finds names holding "acme"
    JNE skip
    SAY "{R3.name}: {R3.email}"
    INC R8
skip:
    INC ESI
    JMP each
next_page:
    MOV R7, R1.next_cursor
    CMP R7, NONE
    JNE page
    SAY "{R8} people at Acme."
""",
    [("search_contacts", "Acme", None), ("search_contacts", "Acme", "2")],
    "Ann Lee: ann@acme.com\nBob Stone: bob@acme.com\nDan Acker: dan@acme.com\n3 people at Acme.",
)

ORDERS["a record changed and passed back"] = Order(
    "Tag Ann Lee as a VIP.",
    """
    PUSH "Ann Lee"
    PUSH NONE
    CALL search_contacts
    POP R1
    LEN R2, R1.contacts
    CMP R2, 0
    JE missing
    MOV R3, R1.contacts[0]
    LEN R4, R3.tags
    MOV R3.tags[R4], "vip"   ; add at the end
    PUSH R3
    CALL update_contact
    POP R5
    SAY "{R5.name} is now tagged {R5.tags}."
    HLT
missing:
    SAY "No contact named Ann Lee."
""",
    [
        ("search_contacts", "Ann Lee", None),
        (
            "update_contact",
            {
                "id": 1,
                "name": "Ann Lee",
                "email": "ann@acme.com",
                "company": "Acme",
                "phone": None,
                "tags": ["lead", "vip"],
            },
        ),
    ],
    'Ann Lee is now tagged ["lead","vip"].',
)

ORDERS["a field compared in a branch"] = Order(
    "Cancel my meetings on 2024-03-05 that last more than an hour.",
    """
    PUSH "2024-03-05"
    CALL list_events
    POP R1
    LEN R2, R1
    MOV ESI, 0
    MOV R6, 0
check:
    CMP ESI, R2
    JGE done
    CMP R1[ESI].minutes, 60
    JLE keep
    PUSH R1[ESI].id
    CALL cancel_event
    SAY "Cancelled {R1[ESI].title} ({R1[ESI].minutes} min)."
    INC R6
keep:
    INC ESI
    JMP check
done:
    SAY "{R6} meetings cancelled."
""",
    [("list_events", "2024-03-05"), ("cancel_event", 11), ("cancel_event", 12)],
    "Cancelled Budget review (90 min).\nCancelled Offsite planning (120 min).\n"
    "2 meetings cancelled.",
)

ORDERS["a list inside a record"] = Order(
    "Send everyone in the budget review on 2024-03-05 a reminder with its start time.",
    """
    PUSH "2024-03-05"
    CALL list_events
    POP R1
    LEN R2, R1
    MOV ESI, 0
find:
    CMP ESI, R2
    JGE not_found
    CMPI R1[ESI].title, "budget review"
    JE found
    INC ESI
    JMP find
found:
    MOV R3, R1[ESI]
    SUBSTR R4, R3.start, 11, 5          ; HH:MM
    LEN R5, R3.attendees
    MOV EDI, 0
mail:
    CMP EDI, R5
    JGE sent
    PUSH R3.attendees[EDI]
    PUSH "Reminder: {R3.title} at {R4}"
    PUSH "Hi, the {R3.title} starts at {R4} and takes {R3.minutes} minutes."
    CALL send_email
    INC EDI
    JMP mail
sent:
    SAY "Reminded {R5} attendee(s) of the {R3.title} at {R4}."
    HLT
not_found:
    SAY "No budget review on 2024-03-05."
""",
    [
        ("list_events", "2024-03-05"),
        (
            "send_email",
            "carol@initech.com",
            "Reminder: Budget review at 14:00",
            "Hi, the Budget review starts at 14:00 and takes 90 minutes.",
        ),
    ],
    "Reminded 1 attendee(s) of the Budget review at 14:00.",
)

ORDERS["a search result passed to another tool"] = Order(
    "Book a 45-minute call with Bob Stone on 2024-03-06 at 10:00.",
    """
    PUSH "Bob Stone"
    PUSH NONE
    CALL search_contacts
    POP R1
    MOV R2, R1.contacts[0]
    MOV R3, '[]'
    MOV R3[0], R2.email            ; attendees: a JSON list
    PUSH "Call with {R2.name}"
    PUSH "2024-03-06T10:00"
    PUSH 45
    PUSH R3
    CALL create_event
    POP R4
    SAY "Booked {R4.title} on {R4.start} for {R4.minutes} minutes (event {R4.id})."
""",
    [
        ("search_contacts", "Bob Stone", None),
        ("create_event", "Call with Bob Stone", "2024-03-06T10:00", 45, ["bob@acme.com"]),
    ],
    "Booked Call with Bob Stone on 2024-03-06T10:00 for 45 minutes (event 104).",
)

ORDERS["times formatted in the answer"] = Order(
    "What's on my calendar on 2024-03-05?",
    """
    PUSH "2024-03-05"
    CALL list_events
    POP R1
    LEN R2, R1
    CMP R2, 0
    JE free
    MOV ESI, 0
show:
    CMP ESI, R2
    JGE done
    MOV R3, R1[ESI]
    SUBSTR R4, R3.start, 11, 5
    MOV EAX, R3.minutes
    MOV ECX, 60
    DIV ECX                        ; EAX hours, EDX minutes
    SAY "{R4} {R3.title} ({EAX}:{EDX:02} h)"
    INC ESI
    JMP show
done:
    HLT
free:
    SAY "Nothing planned."
""",
    [("list_events", "2024-03-05")],
    "09:30 Standup (0:15 h)\n14:00 Budget review (1:30 h)\n16:00 Offsite planning (2:00 h)",
)


def test_the_prompt_teaches_every_feature_the_plans_use() -> None:
    """The plans above use only what the system prompt of these tools shows."""
    prompt = build_system_prompt(externs_from(API_TOOLS), SYSTEM)
    for taught in [
        "R1.items[0].id",
        "R1.items[ESI].name",
        "LEN dst, src",
        "MOV R1.phone, R2",
        "R4 = its LEN adds one at the end",
        "FIND dst, text, part",
        "SUBSTR dst, text, start, count",
        "CMPI a, b",
        "LOWER",
        "NUM dst, text",
        "PUSH NONE",
        "`null` reads as `NONE`",
        ":.2f",
        ":02",
        "Quoted text in any instruction",
        "amount: str (decimal)",
        "ContactPage {contacts: list[Contact], next_cursor: str | None}",
        "Event {id: int, title: str, start: str, minutes: int, attendees: list[str]}",
        "attendees: list[str] | None = None",
        "DIV",
    ]:
        assert taught in prompt, taught


def _run(order: Order, execution: str) -> tuple[dict[str, Any], Office]:
    world = office()
    model = ScriptedChatModel(replies=[asm(order.plan)])
    agent = create_agent(
        model,
        tools=API_TOOLS,
        middleware=[ToolsPlannerMiddleware(execution=execution)],
        context_schema=Office,
    )
    out = agent.invoke(
        {"messages": [SystemMessage(SYSTEM), HumanMessage(order.human)]}, context=world
    )
    assert len(model.calls) == 1  # one model call for the whole order
    final: dict[str, Any] = out["messages"][-1].response_metadata[KEY]
    assert out["messages"][-1].content == final["answer"]
    return final, world


@pytest.mark.parametrize("execution", ["agent", "graph"])
@pytest.mark.parametrize("name", list(ORDERS))
def test_each_order_is_carried_out_in_one_plan(name: str, execution: str) -> None:
    order = ORDERS[name]
    final, world = _run(order, execution)
    assert final["status"] == "finished", final.get("error")
    assert world.log == order.calls
    assert final["answer"] == order.answer
    assert final["repairs"] == 0


def test_the_orders_changed_the_office_as_asked() -> None:
    _, refunded = _run(ORDERS["refund a payment"], "agent")
    assert refunded.sent == [
        {"iban": "DE89 3704 0044 0532 0130 06", "amount": 23.5, "subject": "Refund: Dinner share"}
    ]
    _, tagged = _run(ORDERS["a record changed and passed back"], "agent")
    assert tagged.contacts[0].tags == ["lead", "vip"]
    _, cancelled = _run(ORDERS["a field compared in a branch"], "agent")
    assert [e.id for e in cancelled.events] == [10, 13]
    _, booked = _run(ORDERS["a search result passed to another tool"], "graph")
    assert booked.events[-1].attendees == ["bob@acme.com"] and booked.events[-1].minutes == 45
