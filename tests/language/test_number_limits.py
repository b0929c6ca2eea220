"""Numbers stay within the language's range: 64-bit integers and finite floats."""

from __future__ import annotations

import pytest

from llassembly import AsmRuntimeError, AsmSyntaxError, Emulator, parse


@pytest.mark.parametrize("literal", ["0x" + "f" * 40, "9" * 30, "1e999", "-1e999"])
def test_out_of_range_literal_is_a_syntax_error_at_its_column(literal: str) -> None:
    with pytest.raises(AsmSyntaxError, match="out of range") as caught:
        parse(f"MOV R1, {literal}")
    assert (caught.value.line, caught.value.column) == (1, 9)


def test_largest_64_bit_literals_are_accepted() -> None:
    program = parse("MOV R1, 0x7fffffffffffffff\nMOV R2, -9223372036854775807")
    result = Emulator(program).run()
    assert result.registers == {"R1": 2**63 - 1, "R2": -(2**63) + 1}


def test_tool_returning_nan_stops_the_plan_with_the_tool_and_line() -> None:
    def sensor() -> float:
        return float("nan")

    with pytest.raises(AsmRuntimeError, match=r"sensor.*non-finite") as caught:
        Emulator(parse("CALL sensor\nPOP R1"), [sensor]).run()
    assert caught.value.line == 1


@pytest.mark.parametrize(
    "number", [2**63, -(2**63) - 1, 2**64, 2**20000], ids=["2^63", "-2^63-1", "2^64", "2^20000"]
)
def test_an_integer_result_beyond_64_bits_stops_the_plan_at_its_call(number: int) -> None:
    """The state must stay checkpointable (msgpack holds 64-bit integers): a larger result is
    refused where it arrives, with a short message however long the number is."""
    calls: list[str] = []

    def big() -> int:
        return number

    def shout(text: str) -> str:
        calls.append(text)
        return text.upper()

    with pytest.raises(AsmRuntimeError, match="outside the 64-bit range") as caught:
        Emulator(parse("CALL big\nCALL shout"), [big, shout]).run()
    assert caught.value.line == 1 and calls == []
    assert len(str(caught.value)) < 300


def test_the_64_bit_limits_themselves_are_held() -> None:
    def edges() -> tuple[int, int]:
        return (2**63 - 1, -(2**63))

    result = Emulator(parse("CALL edges\nPOP R1\nPOP R2"), [edges]).run()
    assert result.registers == {"R1": 2**63 - 1, "R2": -(2**63)}


@pytest.mark.parametrize("path", ["agent", "graph", "node"])
@pytest.mark.parametrize(
    ("result", "read", "line"),
    [
        (2**20000, "", 3),
        (-(2**64), "", 3),
        (float("inf"), "", 3),
        (float("nan"), "", 3),
        ({"total": 10**401}, "MOV R2, R1.total\nADD R2, 1", 6),
        ([1, 2**70], "MOV R2, R1[1]\nADD R2, 1", 6),
    ],
    ids=["2^20000", "-2^64", "inf", "nan", "field", "element"],
)
def test_a_number_of_any_size_from_a_tool_stops_the_plan_on_every_path(
    path: str, result: object, read: str, line: int
) -> None:
    """Only the library's errors leave a run: the turn ends with the plan stopped at the
    call (a number inside a structure, beyond 64 bits, reads as its digits, which arithmetic
    refuses), on the agent path, the graph path and the nodes. Lines count the reply's two
    lines of prose."""
    from conftest import asm, meta
    from fakes import ScriptedChatModel
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph

    from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode

    @tool
    def measure() -> object:
        """A measurement."""
        return result

    model = ScriptedChatModel(replies=[asm(f"CALL measure\nPOP R1\n{read}\nSAY 'done'")])
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, [measure]))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        app = graph.compile()
    else:
        planner = ToolsPlannerMiddleware(execution=path)  # type: ignore[arg-type]
        app = create_agent(model, [measure], middleware=[planner])
    out = app.invoke({"messages": [HumanMessage("Measure.")]})
    final = meta(out["messages"][-1])
    assert final["status"] == "stopped" and final["error"]["line"] == line
    assert len(out["messages"][-1].text) < 300
