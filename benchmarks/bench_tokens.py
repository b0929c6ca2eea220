"""The token bill: what a tool-calling loop and one plan send to the model for the same order.

The order is a walk: *"Walk the unit to (N-1, 0)"*. The unit moves one square per
``make_one_step`` call, which returns 1 while it moves and 0 once it is there, so the order
takes N calls and each call depends on the result of the one before: no model can batch them.
Both agents are ``create_agent`` with the same three tools, the same system message and the
same order:

* **tool-calling loop** (ReAct): a plain ``create_agent`` whose scripted model asks for one
  call per turn, then answers. Every turn re-sends the system message, the tools' schemas
  (bound tools travel with every request) and the whole growing history.
* **plan**: ``create_agent`` with ``ToolsPlannerMiddleware()``; the scripted model writes the
  plan once (a loop around ``make_one_step``), and the library runs it.

The models are scripted (their replies are written here, not a model's output), and they
record every request exactly as a provider would receive it: the messages, the system prompt
among them, and the tool schemas bound to the request. Tokens are counted with
``langchain_core.messages.utils.count_tokens_approximately`` (no tokenizer: 4 characters per
token, 3 more per message, the tool schemas as JSON), on input (each request) and output
(each reply). The counts are deterministic: the same on every machine.

The planner's prompt itself is measured too (:func:`prompt_growth`): the library's text alone,
and with catalogues of 10, 50 and 200 tools shaped like public benchmarks' tool suites
(records that nest, choices, optional arguments, long descriptions).

Run: ``python -m benchmarks.bench_tokens [--quick] [--calls 5 20 100]`` (quick: 5 and 20
calls). It prints; it writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, create_model

import llassembly
from llassembly import ToolsPlannerMiddleware

COUNTER = (
    "`langchain_core.messages.utils.count_tokens_approximately` (no tokenizer: 4 characters "
    "per token plus 3 per message; bound tools' schemas counted as JSON on every request)"
)
"""How tokens are counted, as the report says it."""

CALLS = (5, 20, 100)
QUICK_CALLS = (5, 20)

SYSTEM = "You steer an NPC unit on a grid map. Carry out the player's order."


def count(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
    """Approximate tokens of ``messages`` plus the schemas of ``tools`` (see :data:`COUNTER`)."""
    return count_tokens_approximately(messages, tools=list(tools) or None)


class RecordingModel(BaseChatModel):
    """A scripted chat model that keeps every request as sent: messages and bound tools."""

    replies: list[AIMessage]
    requests: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = Field(default_factory=list)
    sent: list[AIMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.requests.append((list(messages), list(kwargs.get("tools") or [])))
        reply = self.replies[len(self.sent)].model_copy()
        self.sent.append(reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bill(self) -> tuple[int, int]:
        """Input tokens over every request and output tokens over every reply."""
        sent_in = sum(count(messages, tools) for messages, tools in self.requests)
        return sent_in, sum(count([reply]) for reply in self.sent)


def unit_tools() -> tuple[list[BaseTool], list[int]]:
    """Fresh tools of a unit standing at (0, 0), and its position (changed by the tools)."""
    position = [0, 0]

    @tool
    def make_one_step(x: int, y: int) -> int:
        """Take one step towards (x, y), x first. Returns 1 if it moved, 0 if it was there."""
        axis = 0 if position[0] != x else 1
        target = (x, y)[axis]
        if position[axis] == target:
            return 0
        position[axis] += 1 if target > position[axis] else -1
        return 1

    @tool
    def get_current_position() -> tuple[int, int]:
        """The unit's position on the map: x, then y."""
        return position[0], position[1]

    @tool
    def get_enemies_around(radius: int) -> list[int]:
        """The ids of the enemies within `radius` squares of the unit, nearest first."""
        return []

    return [make_one_step, get_current_position, get_enemies_around], position


def _order(calls: int) -> list[BaseMessage]:
    return [SystemMessage(SYSTEM), HumanMessage(f"Walk the unit to ({calls - 1}, 0).")]


def _answer(calls: int) -> str:
    return f"The unit is at ({calls - 1}, 0)."


def plan_text(calls: int) -> str:
    """The plan the scripted planner model writes for the order of ``calls`` calls."""
    return f"""```asm
walk:   PUSH {calls - 1}    ; x
        PUSH 0              ; y
        CALL make_one_step
        POP R1              ; 1: moved, 0: there
        CMP R1, 1
        JE walk
        SAY "{_answer(calls)}"
```"""


@dataclass(frozen=True)
class Bill:
    """What one agent sent and received for one order."""

    tool_calls: int
    model_calls: int
    input_tokens: int
    output_tokens: int

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


def _finish(model: RecordingModel, result: dict[str, Any], position: list[int]) -> Bill:
    calls = sum(len(m.tool_calls) for m in result["messages"] if isinstance(m, AIMessage))
    final = result["messages"][-1]
    if position[0] + 1 != calls or final.text != _answer(calls):
        raise RuntimeError(f"the order was not carried out: {position}, {final.text!r}")
    sent_in, sent_out = model.bill()
    return Bill(calls, len(model.requests), sent_in, sent_out)


def loop_bill(calls: int) -> Bill:
    """A plain ``create_agent`` doing the order one call per model turn."""
    tools, position = unit_tools()
    steps = [
        AIMessage(
            "",
            tool_calls=[
                {"name": "make_one_step", "args": {"x": calls - 1, "y": 0}, "id": f"call_{i}"}
            ],
        )
        for i in range(calls)
    ]
    model = RecordingModel(replies=[*steps, AIMessage(_answer(calls))])
    agent = create_agent(model, tools=tools)
    result = agent.invoke({"messages": _order(calls)})
    return _finish(model, result, position)


def plan_bill(calls: int) -> Bill:
    """``create_agent`` with ``ToolsPlannerMiddleware()``: one plan for the whole order."""
    tools, position = unit_tools()
    model = RecordingModel(replies=[AIMessage(plan_text(calls))])
    agent = create_agent(
        model, tools=tools, middleware=[ToolsPlannerMiddleware(max_instructions_to_exec=5000)]
    )
    result = agent.invoke({"messages": _order(calls)})
    return _finish(model, result, position)


def prompt_size() -> dict[str, int]:
    """The planner's system prompt for these tools, in characters and tokens: whole, the
    library's fixed text alone (no system message, no tool), and the tool blocks; and the
    tokens of the three tools' schemas, which the loop sends instead."""
    tools, _ = unit_tools()
    whole = llassembly.build_system_prompt(llassembly.externs_from(tools), SYSTEM)
    fixed = llassembly.build_system_prompt({}, "")
    with_system = llassembly.build_system_prompt({}, SYSTEM)
    return {
        "prompt_chars": len(whole),
        "prompt_tokens": count([SystemMessage(whole)]),
        "fixed_chars": len(fixed),
        "fixed_tokens": count([SystemMessage(fixed)]),
        "tool_blocks_chars": len(whole) - len(with_system),
        "schemas_tokens": count([], [convert_to_openai_tool(t) for t in tools]),
    }


def measure(calls: Sequence[int]) -> list[dict[str, int]]:
    """Both bills at each number of calls, as rows of plain numbers."""
    rows = []
    for n in calls:
        loop, plan = loop_bill(n), plan_bill(n)
        rows.append(
            {
                "tool_calls": n,
                "loop_model_calls": loop.model_calls,
                "loop_input": loop.input_tokens,
                "loop_output": loop.output_tokens,
                "plan_model_calls": plan.model_calls,
                "plan_input": plan.input_tokens,
                "plan_output": plan.output_tokens,
            }
        )
    return rows


def ratio(row: dict[str, int]) -> float:
    """The loop's total tokens over the plan's."""
    return (row["loop_input"] + row["loop_output"]) / (row["plan_input"] + row["plan_output"])


def table(rows: Sequence[dict[str, int]]) -> str:
    """The bills as a Markdown table."""
    lines = [
        "| tool calls | loop: model calls | loop: tokens in / out | loop: total "
        "| plan: model calls | plan: tokens in / out | plan: total | loop / plan |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        loop_total = r["loop_input"] + r["loop_output"]
        plan_total = r["plan_input"] + r["plan_output"]
        lines.append(
            f"| {r['tool_calls']} | {r['loop_model_calls']} "
            f"| {r['loop_input']:,} / {r['loop_output']:,} | {loop_total:,} "
            f"| {r['plan_model_calls']} | {r['plan_input']:,} / {r['plan_output']:,} "
            f"| {plan_total:,} | {ratio(r):.1f}× |"
        )
    return "\n".join(lines)


def short_table(rows: Sequence[dict[str, int]]) -> str:
    """Total tokens only, as the README shows them."""
    lines = [
        "| tool calls | tool-calling loop: model calls, tokens | one plan: model calls, tokens "
        "| loop / plan |",
        "|---|---|---|---|",
    ]
    for r in rows:
        loop_total = r["loop_input"] + r["loop_output"]
        plan_total = r["plan_input"] + r["plan_output"]
        lines.append(
            f"| {r['tool_calls']} | {r['loop_model_calls']}, {loop_total:,} "
            f"| {r['plan_model_calls']}, {plan_total:,} | {ratio(r):.1f}× |"
        )
    return "\n".join(lines)


def report(rows: Sequence[dict[str, int]], size: dict[str, int]) -> str:
    """The table, how tokens were counted and the size of the planner's prompt."""
    return "\n".join(
        [
            table(rows),
            "",
            f"Tokens: {COUNTER}.",
            f"The planner's system prompt for these three tools: {size['prompt_chars']:,} "
            f"characters, about {size['prompt_tokens']:,} tokens; the library's fixed text "
            f"is {size['fixed_chars']:,} characters (about {size['fixed_tokens']:,} tokens) "
            f"of it, the tool blocks {size['tool_blocks_chars']:,} characters. The loop "
            f"sends the three tools' schemas instead, about {size['schemas_tokens']:,} "
            "tokens, with every request.",
        ]
    )


# -- how the prompt grows with the toolset --------------------------------------------------------

TOOLSET_SIZES = (10, 50, 200)


class Address(BaseModel):
    street: str
    city: str
    country: str


class Hotel(BaseModel):
    name: str
    stars: int
    price_per_night: float
    address: Address
    amenities: list[str]


class Booking(BaseModel):
    id: str
    hotel: Hotel
    check_in: str
    nights: int
    status: Literal["held", "confirmed", "cancelled"]


class Review(BaseModel):
    author: str
    rating: float
    text: str


_ABOUT = (
    "Looks the records up in the provider's catalogue and returns them as the provider "
    "stores them. Results are sorted by relevance unless an order is given; the provider "
    "may cut long lists, so narrow the query rather than paging through everything. Prices "
    "are in the currency of the user's account; dates are ISO 8601 (YYYY-MM-DD). "
)


def _catalogue_tool(i: int) -> BaseTool:
    """Tool ``i`` of a catalogue shaped like public benchmarks' tool suites: records that
    nest, a choice of values, optional arguments, descriptions short and long."""
    kind = i % 4
    fields: dict[str, Any] = {
        "query": (str, Field(description="What to look for: a name, a city or a phrase.")),
        "city": (str | None, Field(None, description="Only records in this city.")),
        "order": (
            Literal["relevance", "price", "rating"],
            Field("relevance", description="How to sort the results."),
        ),
        "limit": (int, Field(10, description="Most records to return.")),
    }
    returns: Any = [list[Hotel], Booking, dict[str, float], list[Review]][kind]
    if kind == 1:
        fields = {
            "hotel_name": (str, Field(description="The hotel, by its exact name.")),
            "check_in": (str, Field(description="The first night, YYYY-MM-DD.")),
            "nights": (int, Field(1, description="How many nights.")),
        }
    args = create_model(f"Args{i}", **fields)

    def run(**kwargs: Any) -> Any:
        return None

    run.__annotations__ = {"return": returns}
    about = ("Find hotels. ", "Book a room. ", "Ratings by hotel name. ", "Reviews. ")[kind]
    names = ("find_hotels", "book_room", "hotel_ratings", "hotel_reviews")
    return StructuredTool.from_function(
        run, name=f"{names[kind]}_{i}", description=about + _ABOUT * (i % 3), args_schema=args
    )


def prompt_growth(sizes: Sequence[int] = TOOLSET_SIZES) -> dict[str, int]:
    """Tokens of the planner's prompt: the library's text alone (no tool: ``base``), and with
    toolsets of each size (``tools_N``) and the tokens each tool adds (``per_tool_N``: over the
    prompt for one tool, so the sections structured tools bring are counted once)."""
    base = count([SystemMessage(llassembly.build_system_prompt({}, ""))])
    sizes_out: dict[str, int] = {"base": base}
    one = count([SystemMessage(llassembly.build_system_prompt([_catalogue_tool(0)], ""))])
    sizes_out["tools_1"] = one
    for n in sizes:
        tools = [_catalogue_tool(i) for i in range(n)]
        tokens = count([SystemMessage(llassembly.build_system_prompt(tools, ""))])
        sizes_out[f"tools_{n}"] = tokens
        sizes_out[f"per_tool_{n}"] = round((tokens - one) / (n - 1))
    return sizes_out


def growth_table(sizes: dict[str, int]) -> str:
    """The prompt's growth as a Markdown table."""
    counts = sorted(int(k.removeprefix("tools_")) for k in sizes if k.startswith("tools_"))
    lines = ["| tools | prompt tokens | tokens per tool |", "|---|---|---|"]
    lines.append(f"| 0 | {sizes['base']:,} | |")
    for n in counts:
        per = f"{sizes[f'per_tool_{n}']:,}" if n > 1 else ""
        lines.append(f"| {n} | {sizes[f'tools_{n}']:,} | {per} |")
    return "\n".join(lines)


# -- orders that need reading: queries against a loop ------------------------------------------

READING_BILLS = (1, 3, 10)
QUICK_READING_BILLS = (1, 3)
READING_SYSTEM = "You are the user's payment assistant. Carry out the user's order."
QUESTION = "Which IBAN and amount does this bill ask to be paid?"
BILL_SHAPE = '{"iban": "text", "amount": "number"}'


def bill_of(k: int) -> tuple[str, str, float]:
    """The ``k``-th bill of the folder: its file's text (written for people, about 500
    characters), the IBAN and the amount it asks for."""
    iban = f"DE{89 - k:02d}3704004405320130{k:02d}"
    amount = round(37.5 + 11.25 * k, 2)
    text = (
        f"Stadtwerke Musterstadt GmbH - customer 4471-{k:03d}\n"
        f"Invoice {2023 - k // 12}-{12 - k % 12:02d}: electricity and water\n\n"
        "Dear customer, thank you for your trust. This invoice covers your consumption for "
        "the period shown above; the meter readings are on the back of this page. Your "
        f"advance payment for the coming months stays unchanged. Please transfer EUR {amount:.2f} "
        f"to our account {iban} within 14 days, quoting the customer number. If you "
        "have questions, our service team is there for you on weekdays from 8 am to 6 pm.\n\n"
        "Kind regards, your Stadtwerke"
    )
    return text, iban, amount


def bill_tools(bills: int) -> tuple[list[BaseTool], list[tuple[str, float]]]:
    """Fresh tools over a folder of ``bills`` bills, and the payments they make."""
    paid: list[tuple[str, float]] = []

    @tool
    def list_bills() -> list[str]:
        """The names of the bill files in the user's inbox folder."""
        return [f"bill-{k}.txt" for k in range(bills)]

    @tool
    def read_file(name: str) -> str:
        """The text of one of the user's files."""
        return bill_of(int(name.removeprefix("bill-").removesuffix(".txt")))[0]

    @tool
    def pay(iban: str, amount: float) -> str:
        """Transfer an amount in EUR to an IBAN."""
        paid.append((iban, amount))
        return f"paid {amount:.2f} to {iban}"

    return [list_bills, read_file, pay], paid


def _reading_order() -> list[BaseMessage]:
    return [SystemMessage(READING_SYSTEM), HumanMessage("Pay all the bills in my inbox folder.")]


def _paid_answer(bills: int) -> str:
    return f"Paid {bills} bills."


READING_PLAN = f"""```asm
        CALL list_bills
        POP R1                  ; the file names
        LEN R5, R1
        MOV R6, 0
next:   CMP R6, R5
        JGE done
        PUSH R1[R6]
        CALL read_file
        POP R2
        PUSH R2                 ; the bill's text
        PUSH "{QUESTION}"
        PUSH '{BILL_SHAPE}'
        CALL query_text
        POP R3                  ; R3.iban, R3.amount
        PUSH R3.iban
        PUSH R3.amount
        CALL pay
        POP R0
        INC R6
        JMP next
done:   SAY "Paid {{R5}} bills."
```"""
"""The plan the scripted planner writes for the order, whatever the number of bills."""


def _reading_done(result: dict[str, Any], paid: list[tuple[str, float]], bills: int) -> None:
    expected = [bill_of(k)[1:] for k in range(bills)]
    if paid != expected or result["messages"][-1].text != _paid_answer(bills):
        raise RuntimeError(f"the order was not carried out: {paid}")


def reading_loop_bill(bills: int) -> Bill:
    """A plain ``create_agent``: one call per model turn; it reads each bill in its history."""
    tools, paid = bill_tools(bills)

    def call(name: str, args: dict[str, Any], k: int) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call_{k}"}])

    replies = [call("list_bills", {}, 0)]
    for k in range(bills):
        _, iban, amount = bill_of(k)
        replies.append(call("read_file", {"name": f"bill-{k}.txt"}, 2 * k + 1))
        replies.append(call("pay", {"iban": iban, "amount": amount}, 2 * k + 2))
    model = RecordingModel(replies=[*replies, AIMessage(_paid_answer(bills))])
    result = create_agent(model, tools=tools).invoke({"messages": _reading_order()})
    _reading_done(result, paid, bills)
    sent_in, sent_out = model.bill()
    return Bill(2 * bills + 1, len(model.requests), sent_in, sent_out)


def reading_plan_bill(bills: int) -> Bill:
    """``create_agent`` with ``ToolsPlannerMiddleware(query_model=...)``: one plan, and one
    query per bill, which sends the query model that bill alone."""
    tools, paid = bill_tools(bills)
    planner_model = RecordingModel(replies=[AIMessage(READING_PLAN)])
    answers = [
        json.dumps({"value": {"iban": iban, "amount": amount}})
        for _, iban, amount in (bill_of(k) for k in range(bills))
    ]
    reader = RecordingModel(replies=[AIMessage(a) for a in answers])
    planner = ToolsPlannerMiddleware(query_model=reader, max_instructions_to_exec=5000)
    agent = create_agent(planner_model, tools=tools, middleware=[planner])
    result = agent.invoke({"messages": _reading_order()})
    _reading_done(result, paid, bills)
    plan_in, plan_out = planner_model.bill()
    read_in, read_out = reader.bill()
    model_calls = len(planner_model.requests) + len(reader.requests)
    return Bill(3 * bills + 1, model_calls, plan_in + read_in, plan_out + read_out)


def measure_reading(bills: Sequence[int]) -> list[dict[str, int]]:
    """Both bills for the reading order at each number of bills, as rows of plain numbers."""
    rows = []
    for n in bills:
        loop, plan = reading_loop_bill(n), reading_plan_bill(n)
        rows.append(
            {
                "bills": n,
                "loop_model_calls": loop.model_calls,
                "loop_input": loop.input_tokens,
                "loop_output": loop.output_tokens,
                "plan_model_calls": plan.model_calls,
                "plan_input": plan.input_tokens,
                "plan_output": plan.output_tokens,
            }
        )
    return rows


def reading_table(rows: Sequence[dict[str, int]]) -> str:
    """The reading bills as a Markdown table, and how they were counted."""
    lines = [
        "| bills | loop: model calls | loop: tokens in / out | loop: total "
        "| plan + queries: model calls | plan + queries: tokens in / out "
        "| plan + queries: total | loop / plan |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        loop_total = r["loop_input"] + r["loop_output"]
        plan_total = r["plan_input"] + r["plan_output"]
        lines.append(
            f"| {r['bills']} | {r['loop_model_calls']} "
            f"| {r['loop_input']:,} / {r['loop_output']:,} | {loop_total:,} "
            f"| {r['plan_model_calls']} | {r['plan_input']:,} / {r['plan_output']:,} "
            f"| {plan_total:,} | {ratio(r):.1f}× |"
        )
    lines += [
        "",
        "Order: *pay all the bills in my inbox folder* (`list_bills`, then `read_file` and `pay` "
        "per bill; each bill about 500 characters of prose). Same payments and answer on both "
        "sides; the plan's figures add its queries' requests and replies to the planner's.",
    ]
    return "\n".join(lines)


def main(quick: bool = False, calls: Sequence[int] | None = None) -> dict[str, Any]:
    """Measure and print the bills; return the rows and the prompt size."""
    rows = measure(calls or (QUICK_CALLS if quick else CALLS))
    size = prompt_size()
    reading = measure_reading(QUICK_READING_BILLS if quick else READING_BILLS)
    growth = prompt_growth()
    print(report(rows, size))
    print()
    print(reading_table(reading))
    print()
    print(growth_table(growth))
    return {"rows": rows, "prompt": size, "reading": reading, "growth": growth}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_tokens", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="5 and 20 calls only")
    parser.add_argument("--calls", type=int, nargs="+", help="numbers of tool calls to measure")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead")
    args = parser.parse_args()
    if args.json:
        rows = measure(args.calls or (QUICK_CALLS if args.quick else CALLS))
        reading = measure_reading(QUICK_READING_BILLS if args.quick else READING_BILLS)
        figures = {"rows": rows, "prompt": prompt_size(), "reading": reading}
        print(json.dumps({**figures, "growth": prompt_growth()}, indent=2))
    else:
        main(quick=args.quick, calls=args.calls)
    sys.exit(0)
