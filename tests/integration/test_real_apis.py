"""Plans over tools that return structures, through ``create_agent`` on both paths.

Tools return a ``TypedDict`` holding pydantic records (a page of a search, with a cursor), a
pydantic model, a ``list[...]`` that may be empty, dataclasses holding lists of dataclasses,
and nested lists; they take a pydantic record back and have optional parameters. Each plan
runs through ``create_agent`` with ``ToolsPlannerMiddleware(execution="agent")`` (each call
through the agent's tool node) and ``execution="graph"``: it reads fields, walks lists, builds
strings and formats its answer, and both paths give the same calls and the same answer. The
refusals of ``docs/language.md`` (*Types before the run*) reach the model as a repair request
before any tool runs. Every model reply here is written by hand (``ScriptedChatModel``), none
is a recording of a model.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypedDict

import pytest
from conftest import asm
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.record import KEY

PATHS = ["agent", "graph"]


class Product(BaseModel):
    id: int
    title: str
    price: float


class ProductPage(TypedDict):
    items: list[Product]
    next_cursor: str | None


class Contact(BaseModel):
    id: int
    name: str
    email: str
    phone: str | None = None
    vip: bool = False


@dataclasses.dataclass
class Attendee:
    name: str
    email: str


@dataclasses.dataclass
class Event:
    id: int
    title: str
    start: str
    attendees: list[Attendee]


CATALOGUE = [
    Product(id=1, title="Desk lamp", price=19.5),
    Product(id=2, title="Floor lamp", price=89.0),
    Product(id=3, title="Lamp shade", price=1200.25),
]
PAGES = {None: (0, "p2"), "p2": (2, None)}  # cursor -> (first index, next cursor)
CONTACTS = {
    7: Contact(id=7, name="Ann Lee", email="ann@example.com", vip=True),
    8: Contact(id=8, name="Bob Stone", email="bob@example.com", phone="+1 555 0100"),
}
EVENTS = [
    Event(1, "Standup", "2024-03-05T09:30", [Attendee("Ann Lee", "ann@example.com")]),
    Event(
        2,
        "Budget review",
        "2024-03-05T14:00",
        [Attendee("Ann Lee", "ann@example.com"), Attendee("Bob Stone", "bob@example.com")],
    ),
]


class World:
    """What the tools did, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def tools(self) -> list[BaseTool]:
        log = self.log

        @tool
        def search_products(query: str, cursor: str | None = None) -> ProductPage:
            """Search the catalogue; a page of results and the cursor of the next page."""
            log.append(("search_products", query, cursor))
            start, after = PAGES[cursor]
            found = [p for p in CATALOGUE if query.lower() in p.title.lower()]
            return {"items": found[start : start + 2], "next_cursor": after}

        @tool
        def get_contact(contact_id: int) -> Contact:
            """A contact by id."""
            log.append(("get_contact", contact_id))
            return CONTACTS[contact_id]

        @tool
        def find_contacts(name: str) -> list[Contact]:
            """Contacts whose name holds the text (maybe none)."""
            log.append(("find_contacts", name))
            return [c for c in CONTACTS.values() if name.lower() in c.name.lower()]

        @tool
        def update_contact(contact: Contact) -> Contact:
            """Save a changed contact."""
            log.append(("update_contact", contact.model_dump()))
            return contact

        @tool
        def set_phone(contact_id: int, phone: str | None = None, email: str | None = None) -> str:
            """Change a contact's phone and, when given, email."""
            log.append(("set_phone", contact_id, phone, email))
            return "ok"

        @tool
        def list_events(day: str) -> list[Event]:
            """The events of a day (YYYY-MM-DD)."""
            log.append(("list_events", day))
            return [e for e in EVENTS if e.start.startswith(day)]

        @tool
        def send_email(to: str, subject: str) -> None:
            """Send an email."""
            log.append(("send_email", to, subject))

        @tool
        def seating() -> list[list[int]]:
            """Seats taken, row by row."""
            log.append(("seating",))
            return [[1, 0, 1], [1, 1], []]

        return [
            search_products,
            get_contact,
            find_contacts,
            update_contact,
            set_phone,
            list_events,
            send_email,
            seating,
        ]


def run(path: str, replies: list[str], world: World) -> tuple[dict[str, Any], Any]:
    """One turn through ``create_agent``; the final record and the turn's messages."""
    model = ScriptedChatModel(replies=replies)
    agent = create_agent(
        model, tools=world.tools(), middleware=[ToolsPlannerMiddleware(execution=path)]
    )
    out = agent.invoke({"messages": [HumanMessage("go")]})
    final: dict[str, Any] = out["messages"][-1].response_metadata[KEY]
    return final, (model, out["messages"])


def calls_made(messages: list[BaseMessage]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c["name"], c["args"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls
    ]


@pytest.mark.parametrize("path", PATHS)
def test_every_page_of_a_search_is_walked_and_the_answer_formatted(path: str) -> None:
    plan = """
    MOV R5, NONE              ; no cursor: the first page
    MOV xmm1, 0.0             ; the total
    MOV R8, 0                 ; how many
page:
    PUSH "lamp"
    PUSH R5
    CALL search_products
    POP R1
    LEN R6, R1.items
    MOV ESI, 0
item:
    CMP ESI, R6
    JGE next_page
    ADDSD xmm1, R1.items[ESI].price
    INC R8
    INC ESI
    JMP item
next_page:
    MOV R5, R1.next_cursor
    CMP R5, NONE
    JNE page
    SAY "{R8} lamps, {xmm1:,.2f} together; the last is {R1.items[-1].title}"
"""
    world = World()
    final, _ = run(path, [asm(plan)], world)
    assert final["status"] == "finished", final.get("error")
    assert final["answer"] == "3 lamps, 1,308.75 together; the last is Lamp shade"
    assert world.log == [("search_products", "lamp", None), ("search_products", "lamp", "p2")]


@pytest.mark.parametrize("path", PATHS)
def test_a_pydantic_record_is_read_changed_and_passed_back(path: str) -> None:
    plan = """
    PUSH 8
    CALL get_contact
    POP R1
    MOV R1.phone, "+1 555 0199"
    PUSH R1
    CALL update_contact
    POP R2
    SAY "{R2.name} <{R2.email}>: {R2.phone}"
"""
    world = World()
    final, _ = run(path, [asm(plan)], world)
    assert final["answer"] == "Bob Stone <bob@example.com>: +1 555 0199"
    saved = world.log[1]
    assert saved[0] == "update_contact" and saved[1]["phone"] == "+1 555 0199"
    assert saved[1]["vip"] is False  # the record's other fields went back as they came


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("name", "answer"), [("lee", "Ann Lee (VIP)"), ("nobody", "no one")])
def test_a_list_that_may_be_empty_and_a_field_in_a_branch(
    path: str, name: str, answer: str
) -> None:
    plan = f"""
    PUSH "{name}"
    CALL find_contacts
    POP R1
    LEN R2, R1
    CMP R2, 0
    JE nobody
    CMP R1[0].vip, 1
    JNE plain
    SAY "{{R1[0].name}} (VIP)"
    HLT
plain:
    SAY "{{R1[0].name}}"
    HLT
nobody:
    SAY "no one"
"""
    final, _ = run(path, [asm(plan)], World())
    assert final["answer"] == answer


@pytest.mark.parametrize("path", PATHS)
def test_dataclasses_with_nested_lists_build_strings_for_arguments(path: str) -> None:
    plan = """
    PUSH "2024-03-05"
    CALL list_events
    POP R1
    LEN R2, R1
    MOV ESI, 0
event:
    CMP ESI, R2
    JGE done
    MOV R3, R1[ESI]
    SUBSTR R4, R3.start, 11, 5          ; "09:30"
    LEN R5, R3.attendees
    MOV EDI, 0
person:
    CMP EDI, R5
    JGE next_event
    PUSH R3.attendees[EDI].email
    PUSH "{R3.title} at {R4}"
    CALL send_email
    INC EDI
    JMP person
next_event:
    INC ESI
    JMP event
done:
    SAY "{R2} events"
"""
    world = World()
    final, (_, messages) = run(path, [asm(plan)], world)
    assert final["answer"] == "2 events"
    assert world.log[1:] == [
        ("send_email", "ann@example.com", "Standup at 09:30"),
        ("send_email", "ann@example.com", "Budget review at 14:00"),
        ("send_email", "bob@example.com", "Budget review at 14:00"),
    ]
    assert calls_made(messages)[1] == (
        "send_email",
        {"to": "ann@example.com", "subject": "Standup at 09:30"},
    )


@pytest.mark.parametrize("path", PATHS)
def test_nested_lists_are_walked_by_two_indexes(path: str) -> None:
    plan = """
    CALL seating
    POP R1
    LEN R2, R1
    MOV ESI, 0
    MOV R9, 0
row:
    CMP ESI, R2
    JGE done
    LEN R3, R1[ESI]
    MOV EDI, 0
seat:
    CMP EDI, R3
    JGE next_row
    ADD R9, R1[ESI][EDI]
    INC EDI
    JMP seat
next_row:
    INC ESI
    JMP row
done:
    SAY "{R9:02} seats taken in {R2} rows"
"""
    final, _ = run(path, [asm(plan)], World())
    assert final["answer"] == "04 seats taken in 3 rows"


@pytest.mark.parametrize("path", PATHS)
def test_none_leaves_optional_arguments_out_of_the_tool_call(path: str) -> None:
    plan = 'PUSH 7\nPUSH "+1 555 0123"\nPUSH NONE\nCALL set_phone\nPOP R1\nSAY "{R1}"'
    world = World()
    final, (_, messages) = run(path, [asm(plan)], world)
    assert final["answer"] == "ok"
    assert world.log == [("set_phone", 7, "+1 555 0123", None)]
    assert calls_made(messages) == [("set_phone", {"contact_id": 7, "phone": "+1 555 0123"})]


@pytest.mark.parametrize("path", PATHS)
def test_a_count_pushes_only_the_first_arguments_and_leaves_the_rest_out(path: str) -> None:
    plan = 'PUSH 7\nPUSH "+1 555 0123"\nCALL set_phone, 2\nPOP R1\nSAY "{R1}"'
    world = World()
    final, (_, messages) = run(path, [asm(plan)], world)
    assert final["answer"] == "ok"
    assert world.log == [("set_phone", 7, "+1 555 0123", None)]
    assert calls_made(messages) == [("set_phone", {"contact_id": 7, "phone": "+1 555 0123"})]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("city", ["Oslo", "Atlantis"])
def test_a_call_the_plan_tests_goes_on_after_it_fails(path: str, city: str) -> None:
    """``JC`` right after the ``CALL``: a failure sets the carry and leaves its text in EAX."""

    @tool
    def weather(city: str) -> float:
        """Today's temperature in a city."""
        if city == "Atlantis":
            raise ValueError("no such city")
        return 21.5

    plan = f"""
    PUSH "{city}"
    CALL weather
    JC failed
    POP R1
    SAY "It is {{R1}} degrees."
    HLT
failed:
    SAY "No weather: {{EAX}}"
"""
    model = ScriptedChatModel(replies=[asm(plan)])
    planner = ToolsPlannerMiddleware(execution=path)
    out = create_agent(model, tools=[weather], middleware=[planner]).invoke(
        {"messages": [HumanMessage("weather?")]}
    )
    final = out["messages"][-1].response_metadata[KEY]
    expected = {
        "Oslo": "It is 21.5 degrees.",
        "Atlantis": "No weather: tool 'weather' raised ValueError: no such city",
    }
    assert final["answer"] == expected[city]
    assert len(model.calls) == 1  # no replan: the plan handled it


@pytest.mark.parametrize("path", PATHS)
def test_a_result_that_is_the_reserved_character_never_leaves_an_argument_out(path: str) -> None:
    """U+FDD0 was once how NONE was held: a tool's text holding it is text on every path."""
    deleted: list[str] = []

    @tool
    def read_pattern() -> str:
        """The pattern of the files to clean up."""
        return "\ufdd0"

    @tool
    def delete_files(pattern: str = "*") -> int:
        """Delete the files matching the pattern (every file by default)."""
        deleted.append(pattern)
        return 0

    plan = "CALL read_pattern\nPOP R1\nPUSH R1\nCALL delete_files\nPOP R0"
    model = ScriptedChatModel(replies=[asm(plan)])
    planner = ToolsPlannerMiddleware(execution=path)
    create_agent(model, tools=[read_pattern, delete_files], middleware=[planner]).invoke(
        {"messages": [HumanMessage("clean up")]}
    )
    assert deleted == ["\ufdd0"]


@pytest.mark.parametrize("path", PATHS)
def test_a_field_the_result_cannot_have_is_refused_before_any_tool_runs(path: str) -> None:
    bad = 'PUSH 7\nCALL get_contact\nPOP R1\nSAY "{R1.emial}"'
    good = 'PUSH 7\nCALL get_contact\nPOP R1\nSAY "{R1.email}"'
    world = World()
    final, (model, messages) = run(path, [asm(bad), asm(good)], world)
    assert final["answer"] == "ann@example.com" and final["repairs"] == 1
    assert world.log == [("get_contact", 7)]  # the refused plan ran nothing
    repair = str(model.calls[1][-1].content)
    assert (
        "R1.emial: R1 (Contact) has no field 'emial'; its fields: id, name, email, phone, vip"
        in repair
    )
    assert not [m for m in messages if isinstance(m, ToolMessage)][1:]


@pytest.mark.parametrize("path", PATHS)
def test_an_index_past_the_end_stops_the_plan_naming_the_line_and_the_path(path: str) -> None:
    plan = 'PUSH "nobody"\nCALL find_contacts\nPOP R1\nSAY "{R1[0].name}"'
    final, _ = run(path, [asm(plan)], World())
    assert final["status"] == "stopped"
    assert final["error"]["line"] == 6  # prose and the fence come first
    assert "R1[0] is past the end of R1: it is empty" in final["error"]["detail"]


# -- plain x86 habits, on both paths ------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_plain_x86_plans_read_fields_test_strings_and_round(path: str) -> None:
    plan = """
main:
    push 8
    call get_contact
    mov ebx, eax                    ; the result comes back in EAX
    mov esi, [ebx + phone]          ; field by name, as ebx->phone
    cmp byte [esi], 0               ; an empty phone?
    je no_phone
    mov edi, [ebx].name
    push edi
    push "{esi}"
    call send_email
no_phone:
    mov eax, 17
    cvtsi2sd xmm0, eax
    mov ecx, 4
    cvtsi2sd xmm1, ecx
    divsd xmm0, xmm1                ; 4.25
    roundsd xmm0, xmm0, 2           ; up: 5.0
    cvtsd2si eax, xmm0
    ret
"""
    world = World()
    final, _ = run(path, [asm(plan)], world)
    assert final["status"] == "finished", final.get("error")
    assert world.log == [("get_contact", 8), ("send_email", "Bob Stone", "+1 555 0100")]
    assert final["registers"]["EAX"] == 5 and final["registers"]["XMM0"] == 5.0
