"""A LangGraph ``StateGraph`` with a planner node: the plan runs inside the graph.

``ToolsPlannerNode`` asks the model for one plan, checks it and runs it as a LangGraph
sub-graph; each call is written to the ``custom`` stream as it completes. The model is a
stand-in (``GenericFakeChatModel``) answering with a plan written by hand, so this runs
offline. Run: ``python examples/langgraph_node.py``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import ToolsPlannerNode

STOCK = {"apples": 3, "pears": 12, "plums": 0}
ORDERS: list[tuple[str, int]] = []


@tool
def stock_of(item: str) -> int:
    """How many of an item are in stock."""
    return STOCK[item]


@tool
def reorder(item: str, quantity: int) -> str:
    """Order more of an item; returns the order number."""
    ORDERS.append((item, quantity))
    return f"PO-{len(ORDERS)}"


PLAN = """```asm
        MOV R2, 0               ; orders placed
        PUSH "apples"
        CALL check
        PUSH "pears"
        CALL check
        PUSH "plums"
        CALL check
        SAY "Placed {R2} orders."
        HLT

check:  POP R1                  ; the item
        PUSH R1
        CALL stock_of
        POP R3
        CMP R3, 5
        JGE enough
        PUSH R1
        PUSH 10
        CALL reorder
        POP R0                  ; the order number is not needed
        INC R2
enough: RET
```"""


def build() -> Any:
    model = GenericFakeChatModel(messages=iter([AIMessage(PLAN)]))
    graph = StateGraph(MessagesState)
    graph.add_node("planner", ToolsPlannerNode(model, tools=[stock_of, reorder]))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", END)
    return graph.compile()


def main() -> None:
    agent = build()
    request = {"messages": [HumanMessage("Reorder 10 of anything with fewer than 5 in stock.")]}
    final: dict[str, Any] = {}
    for mode, chunk in agent.stream(request, stream_mode=["custom", "values"]):
        if mode == "custom":  # one event per call, as it completes
            call = chunk["llassembly"]["call"]
            args = ", ".join(repr(value) for value in call["args"].values())
            print(
                f"  line {call['line']}: {call['tool']}({args}) -> {chunk['llassembly']['result']}"
            )
        else:
            final = chunk
    print(final["messages"][-1].text)
    print(f"orders: {ORDERS}")


if __name__ == "__main__":
    main()
