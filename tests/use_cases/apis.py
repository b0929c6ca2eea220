"""A bank account, a CRM and a calendar, as LangChain tools that return structures.

The tools are shaped like the third-party APIs users bring: records are pydantic models (a
transaction's amount a ``Decimal``, as banks write money), a calendar event is a dataclass
holding a list, a search is paginated with a cursor in a ``TypedDict``, parameters are
optional. They read and change an :class:`Office` through ``ToolRuntime.context``, and every
call is appended to ``office.log`` so a test can compare the exact calls.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypedDict

from langchain.tools import ToolRuntime, tool
from pydantic import BaseModel

__all__ = [
    "API_TOOLS",
    "Contact",
    "ContactPage",
    "Event",
    "Office",
    "Receipt",
    "Transaction",
    "office",
]


class Transaction(BaseModel):
    """One booking: money in is positive, money out negative."""

    id: int
    date: str  # YYYY-MM-DD
    counterparty: str
    iban: str
    subject: str
    amount: Decimal


class Receipt(BaseModel):
    id: str
    status: str


class Contact(BaseModel):
    id: int
    name: str
    email: str
    company: str
    phone: str | None = None
    tags: list[str] = []


class ContactPage(TypedDict):
    contacts: list[Contact]
    next_cursor: str | None


@dataclass
class Event:
    id: int
    title: str
    start: str  # YYYY-MM-DDTHH:MM
    minutes: int
    attendees: list[str]


@dataclass
class Office:
    """The account's bookings, the contacts, the calendar, and what was sent."""

    transactions: list[Transaction] = field(default_factory=list)
    contacts: list[Contact] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    log: list[tuple[Any, ...]] = field(default_factory=list)
    page_size: int = 2


def office() -> Office:
    """A fresh office with a month and a half of bookings, six contacts and two days."""

    def tx(i: int, date: str, who: str, subject: str, amount: str) -> Transaction:
        iban = f"DE89 3704 0044 0532 0130 {i:02}"
        return Transaction(
            id=i, date=date, counterparty=who, iban=iban, subject=subject, amount=Decimal(amount)
        )

    return Office(
        transactions=[
            tx(1, "2024-02-28", "Landlord GmbH", "Rent March", "-900.00"),
            tx(2, "2024-03-01", "Spotify AB", "Premium", "-10.99"),
            tx(3, "2024-03-04", "Carol Diaz", "Concert tickets", "45.00"),
            tx(4, "2024-03-09", "REWE Markt", "Groceries", "-62.35"),
            tx(5, "2024-03-15", "SPOTIFY AB", "Premium family upgrade", "-6.00"),
            tx(6, "2024-03-20", "Carol Diaz", "Dinner share", "23.50"),
            tx(7, "2024-04-01", "Spotify AB", "Premium", "-16.99"),
        ],
        contacts=[
            Contact(id=1, name="Ann Lee", email="ann@acme.com", company="Acme", tags=["lead"]),
            Contact(id=2, name="Bob Stone", email="bob@acme.com", company="Acme", phone="+1 555"),
            Contact(id=3, name="Carol Diaz", email="carol@initech.com", company="Initech"),
            Contact(id=4, name="Dan Acker", email="dan@acme.com", company="Acme"),
            Contact(id=5, name="Eve Marsh", email="eve@globex.com", company="Globex"),
            Contact(id=6, name="Finn Acme-Ray", email="finn@umbrella.com", company="Umbrella"),
        ],
        events=[
            Event(10, "Standup", "2024-03-05T09:30", 15, ["ann@acme.com", "bob@acme.com"]),
            Event(11, "Budget review", "2024-03-05T14:00", 90, ["carol@initech.com"]),
            Event(12, "Offsite planning", "2024-03-05T16:00", 120, []),
            Event(13, "Lunch", "2024-03-06T12:00", 60, ["eve@globex.com"]),
        ],
    )


# -- the bank ---------------------------------------------------------------------------------


@tool
def list_transactions(
    runtime: ToolRuntime[Office], month: str | None = None, counterparty: str | None = None
) -> list[Transaction]:
    """The account's bookings, oldest first; only those of a month (YYYY-MM) or with a
    counterparty (exact name) when given.

    Args:
        month: A month as YYYY-MM, or none for every month.
        counterparty: A counterparty's exact name, or none for all.
    """
    o = runtime.context
    o.log.append(("list_transactions", month, counterparty))
    return [
        t
        for t in o.transactions
        if (month is None or t.date.startswith(month))
        and (counterparty is None or t.counterparty == counterparty)
    ]


@tool
def send_money(iban: str, amount: float, subject: str, runtime: ToolRuntime[Office]) -> Receipt:
    """Transfer money from the account.

    Args:
        iban: The receiver's IBAN.
        amount: How much, in euros (more than 0).
        subject: The text the receiver sees.
    """
    o = runtime.context
    o.log.append(("send_money", iban, amount, subject))
    if amount <= 0:
        raise ValueError("the amount must be more than 0")
    o.sent.append({"iban": iban, "amount": amount, "subject": subject})
    return Receipt(id=f"tr-{len(o.sent)}", status="booked")


# -- the CRM ----------------------------------------------------------------------------------


@tool
def search_contacts(
    query: str, runtime: ToolRuntime[Office], cursor: str | None = None
) -> ContactPage:
    """Contacts whose name or company holds the query (any case), a page at a time.

    Args:
        query: Text to look for.
        cursor: The next_cursor of the page before, or none for the first page.
    """
    o = runtime.context
    o.log.append(("search_contacts", query, cursor))
    found = [c for c in o.contacts if query.lower() in f"{c.name} {c.company}".lower()]
    start = int(cursor or 0)
    end = start + o.page_size
    return {"contacts": found[start:end], "next_cursor": str(end) if end < len(found) else None}


@tool
def update_contact(contact: Contact, runtime: ToolRuntime[Office]) -> Contact:
    """Save a contact (found by its id) as given."""
    o = runtime.context
    o.log.append(("update_contact", contact.model_dump()))
    for i, known in enumerate(o.contacts):
        if known.id == contact.id:
            o.contacts[i] = contact
            return contact
    raise ValueError(f"no contact {contact.id}")


@tool
def send_email(to: str, subject: str, body: str, runtime: ToolRuntime[Office]) -> None:
    """Send an email."""
    runtime.context.log.append(("send_email", to, subject, body))


# -- the calendar -----------------------------------------------------------------------------


@tool
def list_events(day: str, runtime: ToolRuntime[Office]) -> list[Event]:
    """The events of a day (YYYY-MM-DD), by start time."""
    o = runtime.context
    o.log.append(("list_events", day))
    return [e for e in o.events if e.start.startswith(day)]


@tool
def create_event(
    title: str,
    start: str,
    runtime: ToolRuntime[Office],
    minutes: int = 30,
    attendees: list[str] | None = None,
) -> Event:
    """Put an event in the calendar.

    Args:
        title: What it is.
        start: When, as YYYY-MM-DDTHH:MM.
        minutes: How long (30 if not given).
        attendees: Email addresses to invite, if any.
    """
    o = runtime.context
    o.log.append(("create_event", title, start, minutes, attendees))
    event = Event(100 + len(o.events), title, start, minutes, list(attendees or []))
    o.events.append(event)
    return dataclasses.replace(event)


@tool
def cancel_event(event_id: int, runtime: ToolRuntime[Office]) -> None:
    """Remove an event from the calendar."""
    o = runtime.context
    o.log.append(("cancel_event", event_id))
    o.events = [e for e in o.events if e.id != event_id]


API_TOOLS = [
    list_transactions,
    send_money,
    search_contacts,
    update_contact,
    send_email,
    list_events,
    create_event,
    cancel_event,
]
