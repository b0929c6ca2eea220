"""One process of the cross-process plan-approval test (``test_approval.py``).

``python approval_process.py start STORE DB CALLS EXECUTION``: plan (a hand-written reply, not
a recording) and stop at the approval request. ``python approval_process.py resume STORE DB
CALLS EXECUTION``: approve it with ``Command(resume={"type": "approve"})`` and a model that has
no replies. STORE is ``sqlite`` (DB is a file) or ``postgres`` (DB is a connection string).
Tools append their name to the CALLS file; the last line printed is a JSON summary, naming
the checkpointer class that was used.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.tools import tool
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from test_approval import PLAN  # the plan of the in-process approval tests

from llassembly import ToolsPlannerMiddleware


def main(role: str, store: str, db: str, calls: Path, execution: str) -> None:
    """``db``: a SQLite file (``store="sqlite"``) or a PostgreSQL connection string."""

    def record(name: str) -> None:
        with calls.open("a", encoding="utf-8") as out:
            out.write(name + "\n")

    @tool
    def list_alerts(severity: str) -> int:
        """How many open alerts of a severity."""
        record("list_alerts")
        return 2

    @tool
    def restart(service: str) -> str:
        """Restart a service."""
        record("restart")
        return f"{service} restarted"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        record("send_email")
        return "sent"

    tools = [list_alerts, restart, send_email]
    model = ScriptedChatModel(replies=[PLAN] if role == "start" else [])
    if store == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(db) as saver:
            saver.setup()
            _turn(role, model, tools, execution, saver)
        return
    if store != "sqlite":
        raise SystemExit(f"unknown store {store!r}: sqlite or postgres")
    conn = sqlite3.connect(db, check_same_thread=False)
    _turn(role, model, tools, execution, SqliteSaver(conn))
    conn.close()


def _turn(
    role: str, model: ScriptedChatModel, tools: list[Any], execution: str, saver: Any
) -> None:
    # The graph path learns the agent's tools only from model requests: a process that
    # resumes without calling the model passes them (see the README).
    planner = ToolsPlannerMiddleware(
        approve_plan=True,
        execution=execution,  # type: ignore[arg-type]
        tools=tools if execution == "graph" else None,
    )
    agent = create_agent(model, tools=tools, middleware=[planner], checkpointer=saver)
    config = {"configurable": {"thread_id": "cross-process"}}
    payload = (
        {"messages": [HumanMessage("Fix the critical alerts.")]}
        if role == "start"
        else Command(resume={"type": "approve"})
    )
    result = agent.invoke(payload, config)  # type: ignore[arg-type]
    interrupts = result.get("__interrupt__") or []
    final = result["messages"][-1]
    summary = {
        "interrupted": interrupts[0].value["type"] if interrupts else None,
        "model_calls": len(model.calls),
        "status": final.response_metadata.get("llassembly", {}).get("status"),
        "saver": type(saver).__name__,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5])
