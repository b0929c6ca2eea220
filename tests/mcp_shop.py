"""A small shop as a real MCP server (the ``mcp`` package's FastMCP, over stdio), for the tests
of MCP tools loaded with ``langchain-mcp-adapters`` (``tests/integration/test_mcp.py``).

Run: ``python tests/mcp_shop.py`` (speaks MCP over standard input and output). Its tools cover
what servers declare: structured results with an output schema (``get_order``,
``search_orders``), optional arguments (``search_orders``), constrained ones
(``apply_discount``), nested objects as arguments (``create_order``), a tool that raises
(``cancel_order``) and plain text (``greet``). State lives in the process, so
``server_calls`` tells which tool bodies ran.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

mcp = FastMCP("shop", log_level="WARNING")  # keep stderr quiet (INFO logs every request)


class Customer(BaseModel):
    name: str
    email: str


class Item(BaseModel):
    sku: str
    qty: int


class Order(BaseModel):
    id: int
    customer: Customer
    items: list[Item]
    total: float
    status: str = "open"


class OrderSummary(BaseModel):
    id: int
    total: float
    status: str


_ORDERS: dict[int, Order] = {
    1: Order(
        id=1,
        customer=Customer(name="Ada", email="ada@example.com"),
        items=[Item(sku="A-1", qty=2), Item(sku="B-7", qty=1)],
        total=42.5,
    ),
    2: Order(
        id=2,
        customer=Customer(name="Ada", email="ada@example.com"),
        items=[Item(sku="C-3", qty=5)],
        total=10.0,
        status="shipped",
    ),
    3: Order(
        id=3,
        customer=Customer(name="Bob", email="bob@example.com"),
        items=[Item(sku="A-1", qty=1)],
        total=7.25,
    ),
}
NOTES: list[str] = []
CALLS: list[str] = []  # every tool invocation that reached a tool body


@mcp.tool(
    title="Get order",
    annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True),
    meta={"owner": "shop-team"},
)
def get_order(order_id: int) -> Order:
    """Return the full order with nested customer and items."""
    CALLS.append(f"get_order({order_id})")
    if order_id not in _ORDERS:
        raise ValueError(f"unknown order {order_id}")
    return _ORDERS[order_id]


@mcp.tool()
def search_orders(customer: str, limit: int = 5, status: str | None = None) -> list[OrderSummary]:
    """Search orders by customer name; optional limit and status filter."""
    CALLS.append(f"search_orders({customer!r}, limit={limit}, status={status!r})")
    found = [
        OrderSummary(id=o.id, total=o.total, status=o.status)
        for o in _ORDERS.values()
        if o.customer.name == customer and (status is None or o.status == status)
    ]
    return found[:limit]


@mcp.tool()
def cancel_order(order_id: int) -> str:
    """Cancel an open order. Raises for unknown or already shipped orders."""
    CALLS.append(f"cancel_order({order_id})")
    order = _ORDERS.get(order_id)
    if order is None:
        raise ValueError(f"unknown order {order_id}")
    if order.status == "shipped":
        raise RuntimeError(f"order {order_id} already shipped")
    order.status = "cancelled"
    return f"order {order_id} cancelled"


@mcp.tool()
def apply_discount(
    order_id: int,
    percent: Annotated[float, Field(gt=0, le=100, description="Discount in percent")],
    reason: Literal["loyalty", "damaged", "promo"] = "promo",
) -> float:
    """Apply a percentage discount to an order; returns the new total."""
    CALLS.append(f"apply_discount({order_id}, {percent}, {reason!r})")
    order = _ORDERS[order_id]
    order.total = round(order.total * (1 - percent / 100), 2)
    return order.total


@mcp.tool()
def create_order(customer: Customer, items: list[Item], total: float) -> Order:
    """Create an order from nested input objects (input schema uses $defs/$ref)."""
    CALLS.append(f"create_order({customer.name!r}, {len(items)} items)")
    new_id = max(_ORDERS) + 1
    _ORDERS[new_id] = Order(id=new_id, customer=customer, items=items, total=total)
    return _ORDERS[new_id]


@mcp.tool()
def add_note(text: str) -> str:
    """Append a note to the in-memory notes list (plain text result)."""
    CALLS.append(f"add_note({text!r})")
    NOTES.append(text)
    return f"noted ({len(NOTES)} notes)"


@mcp.tool()
def list_notes() -> list[str]:
    """Report all notes (lets tests assert side effects)."""
    return list(NOTES)


@mcp.tool(structured_output=False)
def greet(name: str) -> str:
    """Plain text only: no output schema, no structured content."""
    CALLS.append(f"greet({name!r})")
    return f"Hello, {name}!"


@mcp.tool(structured_output=False)
def server_calls() -> str:
    """Debug: newline-joined log of tool bodies that actually ran."""
    return "\n".join(CALLS)


if __name__ == "__main__":
    mcp.run()  # default transport: stdio
