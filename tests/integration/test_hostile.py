"""Hostile replies through the public entry points: bounded cost, nothing lost, nothing run
that should not be.

Every model reply is written by hand (``ScriptedChatModel``), several of them deliberately
malformed or huge; none is a recording of a real model.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Literal

import pytest
from conftest import Harness, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.tools import tool
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from llassembly import ToolsPlannerMiddleware, check, parse_program
from llassembly.errors import UsageError
from llassembly.integration.messages import MAX_REPAIR_REQUEST_CHARS
from llassembly.integration.prompt import describe_extern

EXECUTIONS = pytest.mark.parametrize("execution", ["agent", "graph"])


def bank(log: list[tuple[str, Any]], fail: set[str] | None = None) -> list[Any]:
    """Tools that record their calls; names in ``fail`` raise."""
    failing = fail or set()

    @tool
    def pay(amount: int) -> str:
        """Pay an amount."""
        log.append(("pay", amount))
        if "pay" in failing:
            raise RuntimeError("bank is down")
        return "paid"

    @tool
    def withdraw(amount: int) -> str:
        """Take money out."""
        log.append(("withdraw", amount))
        return "taken"

    @tool
    def deposit(amount: int) -> str:
        """Put money in."""
        log.append(("deposit", amount))
        if "deposit" in failing:
            raise RuntimeError("vault jammed")
        return "stored"

    return [pay, withdraw, deposit]


def run(replies: list[str], tools: list[Any], **options: Any) -> tuple[dict[str, Any], Any]:
    model = ScriptedChatModel(replies=replies)
    app = create_agent(model, tools=tools, middleware=[ToolsPlannerMiddleware(**options)])
    return app.invoke({"messages": [HumanMessage("Do it.")]}), model


def test_a_long_digit_run_that_is_no_number_is_refused_quickly() -> None:
    """The number pattern used to backtrack quadratically: 40,000 digits took about a minute.
    A child process bounds the wait (the bound is generous; bench_hostile measures)."""
    code = (
        "from llassembly import parse\n"
        "from llassembly.errors import AsmSyntaxError\n"
        "try:\n"
        "    parse('```asm\\nPUSH ' + '1' * 40000 + 'x\\n```')\n"
        "except AsmSyntaxError as e:\n"
        "    print(len(str(e)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 2000  # the 40,000-digit token is not quoted whole


@EXECUTIONS
def test_a_repair_request_stays_small_whatever_the_reply(execution: str) -> None:
    log: list[tuple[str, Any]] = []
    hostile = "```asm\n" + "a: " * 10000 + "NOP\n```"  # 9,999 duplicate labels on one line
    out, model = run(
        [hostile, asm("PUSH 1\nCALL pay")], bank(log), execution=execution, max_repairs=1
    )
    repair = model.calls[1][-1]
    assert isinstance(repair, HumanMessage)
    assert len(repair.text) <= MAX_REPAIR_REQUEST_CHARS
    assert "label 'a' is defined again (9999 times on this line)" in repair.text
    assert log == [("pay", 1)]
    assert meta(out["messages"][-1])["status"] == "finished"


@EXECUTIONS
def test_a_think_tag_in_a_comment_does_not_cut_the_plan(execution: str) -> None:
    log: list[tuple[str, Any]] = []
    plan = asm("PUSH 5\nCALL withdraw ; see <think> notes\nPUSH 5\nCALL deposit")
    out, _ = run([plan], bank(log), execution=execution)
    assert log == [("withdraw", 5), ("deposit", 5)]
    assert meta(out["messages"][-1])["tool_calls"] == 2
    closing = asm("PUSH 5\nCALL withdraw ; </think>\nPUSH 5\nCALL deposit")
    log.clear()
    run([closing], bank(log), execution=execution)
    assert log == [("withdraw", 5), ("deposit", 5)]


@EXECUTIONS
def test_an_empty_reply_is_asked_again_then_reported(execution: str) -> None:
    log: list[tuple[str, Any]] = []
    out, model = run(["", asm("PUSH 2\nCALL pay")], bank(log), execution=execution)
    assert len(model.calls) == 2 and log == [("pay", 2)]
    assert "empty" in model.calls[1][-1].text

    out, model = run(["", "  "], bank(log), execution=execution, max_repairs=1)
    final = out["messages"][-1]
    assert "the model returned nothing" in meta(final)["error"]["detail"]
    assert meta(final)["status"] == "refused" and [d["draft"] for d in meta(final)["drafts"]] == [
        "",
        "  ",
    ]


@EXECUTIONS
def test_a_replan_that_never_verifies_keeps_the_calls_that_ran(execution: str) -> None:
    """Plan 1 pays, then deposit fails; the replan is broken and max_repairs=0: the turn ends
    with a message, and the pay call and its result stay in the messages."""
    log: list[tuple[str, Any]] = []
    plan = asm("PUSH 7\nCALL pay\nPOP R1\nPUSH 7\nCALL deposit")
    out, model = run(
        [plan, asm("FROB R1")],
        bank(log, fail={"deposit"}),
        execution=execution,
        on_tool_error="replan",
        max_repairs=0,
    )
    assert log == [("pay", 7), ("deposit", 7)]
    assert len(model.calls) == 2
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert results[0].text == "paid" and results[0].name == "pay"
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and meta(final)["status"] == "stopped"
    assert "no plan passed the checks" in final.text and "1 tool call had completed" in final.text
    assert (meta(final)["replans"], meta(final)["status"]) == (1, "stopped")


@EXECUTIONS
def test_tools_named_like_mcp_tools_can_be_called(execution: str) -> None:
    seen: list[str] = []

    @tool("get-weather")
    def get_weather(city: str) -> str:
        """Weather in a city."""
        seen.append(city)
        return f"sunny in {city}"

    @tool("github.search")
    def github_search(query: str) -> int:
        """Number of repositories found."""
        seen.append(query)
        return 3

    plan = asm('PUSH "Oslo"\nCALL get-weather\nPOP R1\nPUSH "asm"\nCALL github.search\nPOP R2')
    out, _ = run([plan], [get_weather, github_search], execution=execution)
    assert seen == ["Oslo", "asm"]
    assert meta(out["messages"][-1])["registers"] == {"R1": "sunny in Oslo", "R2": 3}


# -- hostile values: only the library's own errors, stopped at the right line --------------------


@EXECUTIONS
def test_deeply_nested_json_for_a_dict_argument_is_the_plans_error(execution: str) -> None:
    seen: list[Any] = []

    @tool
    def store(record: dict[str, Any]) -> str:
        """Store a record."""
        seen.append(record)
        return "ok"

    deep = "[" * 100_000
    # Written in the plan, the check refuses it before the run; built as the plan runs, the
    # run stops at the CALL.
    (problem,) = check(parse_program(f'PUSH "{deep}"\nCALL store'), [store])
    assert "argument 'record': expected JSON object" in problem.message
    assert problem.line == 2 and len(problem.message) < 400
    plan = f'MOV R1, "["\nPUSH "{{R1}}{deep[1:]}"\nCALL store'
    out, _ = run([asm(plan)], [store], execution=execution)
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and "of store" in final.text
    assert meta(final)["error"]["tool"] == "store"
    assert seen == [] and len(final.text) < 2000


@EXECUTIONS
@pytest.mark.parametrize("depth", [150, 600])
def test_an_argument_the_plan_nests_too_deeply_stops_at_its_call_and_the_state_saves(
    execution: str, depth: int
) -> None:
    """JSON text a loop wraps in itself (a few KB) used to reach the tool call's message
    nested hundreds of levels deep: ``RecursionError`` out of ``invoke``, or a checkpointer
    refusing the message. The argument is refused at its ``CALL`` (the plan's error, with
    its line), and the turn's state saves."""
    from langgraph.checkpoint.memory import InMemorySaver

    seen: list[Any] = []

    @tool
    def put(record: dict[str, Any]) -> str:
        """Store a record."""
        seen.append(record)
        return "ok"

    plan = (
        f"MOV R1, 1\nMOV ECX, {depth}\nagain: MOV R1, '{{\"a\": {{R1}}}}'\nLOOP again\n"
        "PUSH R1\nCALL put\nPOP R2"
    )
    model = ScriptedChatModel(replies=[asm(plan)])
    planner = ToolsPlannerMiddleware(execution=execution, max_instructions_to_exec=5000)  # type: ignore[arg-type]
    app = create_agent(model, tools=[put], middleware=[planner], checkpointer=InMemorySaver())
    out = app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    error = meta(out["messages"][-1])["error"]
    assert (error["type"], error["line"], error["argument"]) == ("ToolArgumentError", 8, "record")
    assert "nested more than 100 levels deep" in error["message"] and seen == []


@EXECUTIONS
@pytest.mark.parametrize("number", [2**64, 10**400, 10**5000], ids=["2^64", "1e400", "5000 digits"])
def test_a_huge_integer_result_stops_the_plan_and_the_state_still_saves(
    execution: str, number: int
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    seen: list[float] = []

    @tool
    def measure() -> int:
        """A reading."""
        return number

    @tool
    def scale(x: float) -> float:
        """Scale x."""
        seen.append(x)
        return x * 2

    model = ScriptedChatModel(replies=[asm("CALL measure\nCALL scale\nPOP R1")])
    planner = ToolsPlannerMiddleware(execution=execution)  # type: ignore[arg-type]
    app = create_agent(
        model, tools=[measure, scale], middleware=[planner], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "huge"}}
    out = app.invoke({"messages": [HumanMessage("go")]}, config)
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped" and meta(final)["error"]["line"] == 3 and seen == []
    # (Even where LangChain cannot turn the value into text, the plan reads what the tool
    # returned, as on every path: the library's own error, not a failed call.)
    assert "outside the 64-bit range" in meta(final)["error"]["message"]
    assert final.text.startswith("I could not finish: the plan went wrong while it ran.")
    assert app.get_state(config).values["messages"][-1].text == final.text


def test_an_async_only_tool_under_invoke_is_refused_before_anything_runs() -> None:
    log: list[tuple[str, Any]] = []

    @tool
    async def notify(text: str) -> str:
        """Send a notification (async only)."""
        log.append(("notify", text))
        return "sent"

    tools = [*bank(log), notify]
    for execution in ("agent", "graph"):
        model = ScriptedChatModel(replies=[asm('PUSH 3\nCALL pay\nPUSH "done"\nCALL notify')])
        planner = ToolsPlannerMiddleware(execution=execution)  # type: ignore[arg-type]
        app = create_agent(model, tools=tools, middleware=[planner])
        with pytest.raises(
            UsageError, match=r"async-only tools \('notify'\).*none of their calls can be made"
        ):
            app.invoke({"messages": [HumanMessage("go")]})
        assert log == []


@EXECUTIONS
def test_a_library_error_inside_a_tool_is_that_tools_failure_at_the_outer_line(
    execution: str,
) -> None:
    """A tool that runs a plan of its own: its errors name the outer plan's line and follow
    on_tool_error, instead of escaping or pointing at a line the outer plan does not have."""
    from llassembly import Emulator, parse

    @tool
    def subplan() -> int:
        """Run an inner plan."""
        return Emulator(parse("NOP\nNOP\nNOP\nNOP\nNOP\nNOP\nNOP\nPOP R1")).run().tool_calls

    out, _ = run([asm("NOP\nCALL subplan\nPOP R1")], [subplan], execution=execution)
    final = out["messages"][-1]
    assert meta(final)["status"] == "stopped"
    assert meta(final)["error"]["line"] == 4 and "subplan" in final.text


def test_tools_that_cannot_be_described_honestly_are_refused_or_fixed() -> None:
    from llassembly import externs_from

    @tool
    def set_mode(mode: Literal["eco", "boost", "off"]) -> str:
        """Set the thermostat mode."""
        return mode

    block = describe_extern(externs_from([set_mode])["set_mode"])
    assert "mode: boost" not in block and 'one of "eco", "boost", "off"' in block

    def spread(*values: int) -> int:
        return sum(values)

    def options(name: str, **extra: str) -> str:
        return name

    for bad, shown in ((spread, r"\*values"), (options, r"\*\*extra")):
        with pytest.raises(UsageError, match=shown):
            externs_from([bad])


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        ('PUSH "nan"\nCALL scale', "not a finite number"),
        ('PUSH "1e400"\nCALL scale', "not a finite number"),
        ('PUSH "99999999999999999999"\nCALL count', "outside the 64-bit range"),
    ],
)
def test_values_that_do_not_fit_a_parameter_are_refused_before_the_call(
    plan: str, expected: str
) -> None:
    from llassembly import Emulator, parse
    from llassembly.errors import PlanRejected

    seen: list[Any] = []

    def scale(x: float) -> float:
        seen.append(x)
        return x

    def count(n: int) -> int:
        seen.append(n)
        return n

    with pytest.raises(PlanRejected, match=expected):  # written in the plan: before the run
        Emulator(parse(plan), [scale, count]).run()
    assert seen == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("x db [NaN, 1]", "NaN is not a finite number"),
        ("x db [1e400]", "invalid JSON in data"),
        ('x db "ab", 0, "cd"', "a string ends at its 0"),
    ],
)
def test_data_that_would_change_silently_is_a_syntax_error(data: str, expected: str) -> None:
    from llassembly import parse
    from llassembly.errors import AsmSyntaxError

    with pytest.raises(AsmSyntaxError, match=expected):
        parse(f"section .data\n{data}\nsection .text\nMOV R1, x")


def test_the_smallest_64_bit_integer_is_a_literal() -> None:
    from llassembly import Emulator, parse

    result = Emulator(parse("MOV R1, -9223372036854775808")).run()
    assert result.registers == {"R1": -(2**63)}


def test_many_call_sites_of_one_subroutine_build_a_plan_graph_in_linear_work() -> None:
    """RET used to list every call site for every block that reaches it (quadratic edges):
    75 KB of `CALL sub` lines took 45 s and 1.7 GB. Drawn edges are now bounded per node."""
    from llassembly import PlanGraph, compile_program, externs_from, parse

    def get() -> int:
        return 1

    text = "CALL sub\nCALL get\nPOP R1\n" * 1000 + "HLT\nsub: NOP\nRET\n"
    compiled = compile_program(parse(text), externs_from([get]), max_stack_depth=64)
    graph = PlanGraph(compiled, "block")
    edges = graph.graph.get_graph().edges
    assert len(edges) < 20 * 1000  # was about 1000 × 1000
    # A node with more successors than a drawing can show says so instead of listing them.
    assert "one of many tool calls" in graph.draw_mermaid()


@EXECUTIONS
def test_a_plan_longer_than_the_limit_is_refused_before_it_is_compiled(execution: str) -> None:
    from llassembly.language.limits import MAX_PLAN_INSTRUCTIONS

    log: list[tuple[str, Any]] = []
    long_plan = asm("PUSH 1\nCALL pay\n" + "NOP\n" * MAX_PLAN_INSTRUCTIONS)
    out, model = run([long_plan, asm("PUSH 2\nCALL pay")], bank(log), execution=execution)
    assert log == [("pay", 2)] and meta(out["messages"][-1])["repairs"] == 1
    assert f"at most {MAX_PLAN_INSTRUCTIONS} are accepted" in model.calls[1][-1].text


def test_a_deeply_nested_result_on_the_graph_path_stops_the_plan_with_a_library_error() -> None:
    """The engine holds such a result (JSON text) or refuses it (AsmRuntimeError naming the
    tool and line); the graph path's message text of it must not crash either."""

    @tool
    def fetch() -> Any:
        """Fetch nested data."""
        value: Any = 1
        for _ in range(600):
            value = [value]
        return value

    out, _ = run([asm("CALL fetch\nPOP R1")], [fetch], execution="graph")
    assert meta(out["messages"][-1])["status"] in ("finished", "stopped")


HARNESSES = pytest.mark.parametrize(
    ("kind", "execution", "asynchronous"),
    [(k, e, a) for k, e in (("agent", "agent"), ("agent", "graph"), ("node", "")) for a in (0, 1)],
)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class Unshown:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


async def _turn(kind: str, execution: str, asynchronous: int, *args: Any, **opts: Any) -> Any:
    """The last message of one turn on the path (only the library's errors may leave it)."""
    harness = Harness(kind, asynchronous=bool(asynchronous))
    options = {**opts, **({"execution": execution} if execution else {})}
    return (await harness.run(*args, **options))["messages"][-1]


@HARNESSES
@pytest.mark.parametrize("on_tool_error", ["stop", "replan"])
async def test_a_tool_error_whose_text_raises_is_that_tools_failure(
    kind: str, execution: str, asynchronous: int, on_tool_error: str
) -> None:
    @tool
    def bad() -> str:
        """Raise."""
        raise Unprintable

    replies = [asm('CALL bad\nPOP R1\nSAY "ok"'), asm('SAY "instead"')]
    final = await _turn(kind, execution, asynchronous, replies, [bad], on_tool_error=on_tool_error)
    if on_tool_error == "replan":
        assert final.text == "instead"
    else:
        assert meta(final)["status"] == "stopped" and "bad" in final.text


def test_a_tool_error_whose_text_raises_is_a_library_error_in_the_emulator() -> None:
    from llassembly import Emulator, ToolExecutionError, parse

    def bad() -> str:
        """Raise."""
        raise Unprintable

    with pytest.raises(ToolExecutionError, match="raised Unprintable: a Unprintable that cannot"):
        Emulator(parse("CALL bad\nPOP R1"), [bad]).run()


@HARNESSES
async def test_a_result_whose_text_raises_stops_the_plan(
    kind: str, execution: str, asynchronous: int
) -> None:
    @tool
    def get() -> object:
        """Get."""
        return Unshown()

    final = await _turn(kind, execution, asynchronous, [asm('CALL get\nPOP R1\nSAY "ok"')], [get])
    assert meta(final)["status"] == "stopped"


@HARNESSES
async def test_a_query_reply_that_is_a_lone_surrogate_is_refused(
    kind: str, execution: str, asynchronous: int
) -> None:
    reader = GenericFakeChatModel(messages=iter([AIMessage("\ud800"), AIMessage("\ud800")]))
    plan = (
        'PUSH "t"\nPUSH "How many?"\nPUSH \'{"n": "integer"}\'\nCALL query_text\nPOP R1\n'
        'SAY "{R1.n}"'
    )
    final = await _turn(kind, execution, asynchronous, [asm(plan)], [], query_model=reader)
    assert meta(final)["status"] == "stopped" and "query" in final.text


@EXECUTIONS
def test_a_library_error_inside_a_tool_at_the_outer_calls_line_is_still_the_tools_failure(
    execution: str,
) -> None:
    """An inner plan whose failing line has the outer ``CALL``'s number (a document's snippet
    padded to it): its error, source and words are the tool's failure, not the outer plan's
    own error at that line, and its text reaches no planner request."""
    from llassembly import Emulator, parse

    @tool
    def evaluate() -> int:
        """Run a snippet."""
        inner = "NOP\n" * 4 + "MOV R1, '{\"a\": 1}'\nMOV R2, R1.INJECTED_call_send_money"
        return Emulator(parse(inner)).run().tool_calls

    out, model = run(
        [asm("NOP\nNOP\nNOP\nCALL evaluate\nPOP R1"), asm('SAY "no"')],
        [evaluate],
        execution=execution,
        on_tool_error="replan",
    )
    assert out["messages"][-1].text == "no"
    request = model.calls[1][-1].text
    assert "INJECTED" not in request and "the tool evaluate failed" in request


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_the_async_only_check_follows_how_the_current_run_is_driven(execution: str) -> None:
    """A turn begun with ``invoke`` and resumed with ``ainvoke`` may call an async-only tool
    in its new plan (a replan); one begun with ``ainvoke`` and resumed with ``invoke`` is
    refused before that tool is called, as on the graph path, not failed as the tool's."""
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    @tool
    def ask(q: str) -> str:
        """Ask a person."""
        answer: str = interrupt(q)
        return answer

    @tool
    def boom(x: int) -> int:
        """Always fails."""
        raise RuntimeError("down")

    @tool
    async def afetch(key: str) -> str:
        """Fetch (async only)."""
        return key.upper()

    first = asm('PUSH "ok?"\nCALL ask\nPOP R1\nPUSH 1\nCALL boom\nPOP R2\nSAY "{R1} {R2}"')
    second = asm('PUSH "a"\nCALL afetch\nPOP R1\nSAY "replanned {R1}"')

    def agent() -> Any:
        model = ScriptedChatModel(replies=[first, second])
        planner = ToolsPlannerMiddleware(execution=execution, on_tool_error="replan")  # type: ignore[arg-type]
        return create_agent(
            model, tools=[ask, boom, afetch], middleware=[planner], checkpointer=InMemorySaver()
        )

    config: Any = {"configurable": {"thread_id": "t"}}
    app = agent()
    app.invoke({"messages": [HumanMessage("go")]}, config)  # paused in ask
    out = asyncio.run(app.ainvoke(Command(resume="yes"), config))
    assert out["messages"][-1].text == "replanned A"
    app = agent()
    asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, config))
    with pytest.raises(UsageError, match=r"async-only tools \('afetch'\)"):
        app.invoke(Command(resume="yes"), config)
    # The plan begun with ainvoke calls the async-only tool itself, after the pause.
    first = asm('PUSH "ok?"\nCALL ask\nPOP R1\nPUSH "a"\nCALL afetch\nPOP R2\nSAY "{R2}"')
    app, config = agent(), {"configurable": {"thread_id": "u"}}
    asyncio.run(app.ainvoke({"messages": [HumanMessage("go")]}, config))
    with pytest.raises(UsageError, match=r"async-only tools \('afetch'\)"):
        app.invoke(Command(resume="yes"), config)
    out = asyncio.run(app.ainvoke(Command(resume="yes"), config))
    assert out["messages"][-1].text == "A"


@pytest.mark.parametrize("depth", [150, 900])
def test_an_argument_written_too_deeply_nested_is_refused_before_the_run(depth: int) -> None:
    """JSON text written in the plan nested deeper than a call takes is refused by the check
    before the run, as the call itself would refuse it, so no tool runs first."""

    def put(record: list[Any]) -> str:
        """Store a record."""
        return "ok"

    plan = f"PUSH '{'[' * depth}{']' * depth}'\nCALL put\nPOP R1"
    found = [(d.line, d.message) for d in check(parse_program(plan), [put])]
    assert len(found) == 1 and found[0][0] == 2
    assert "nested more than 100 levels deep" in found[0][1]


@pytest.mark.parametrize("text", ["[NaN, 1]", "[Infinity]", '{"x": -Infinity}'])
def test_a_json_argument_holding_no_finite_number_is_refused_before_the_run(text: str) -> None:
    """Plans hold finite numbers wherever they come from: JSON text with ``NaN`` or
    ``Infinity`` for a structured argument is refused, as in a plan's data or a result."""

    def mean(xs: list[float] | dict[str, float]) -> float:
        """The mean."""
        return 0.0

    def total(xs: list[float]) -> float:
        """The sum."""
        return 0.0

    found = [d.message for d in check(parse_program(f"PUSH '{text}'\nCALL total"), [total])]
    assert len(found) == 1 and "not a finite number" in found[0]
    program = parse_program(f"PUSH '{text}'\nCALL mean")
    assert check(program, [mean]) != ()  # (as text, which neither a list nor a dict is)


@pytest.mark.parametrize("number", [2**64, 10**5000], ids=["2^64", "5000 digits"])
def test_a_huge_integer_result_reads_alike_in_the_emulator(number: int) -> None:
    """An integer LangChain cannot even write as text is, in the Emulator too, the library's
    range error at the call (its words in EAX after JC), not the tool's failure."""
    from llassembly import Emulator

    @tool
    def measure() -> int:
        """A reading."""
        return number

    plan = 'CALL measure\nJC bad\nPOP R1\nHLT\nbad:\nSAY "{EAX}"'
    answer = Emulator(parse_program(plan), [measure]).run().answer
    assert "outside the 64-bit range; plans hold 64-bit integers" in answer
