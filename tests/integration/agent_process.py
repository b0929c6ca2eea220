"""One process of the cross-process resume test (``test_agent_path.py``).

``python agent_process.py start DB CALLS``: run a hand-written plan (not a recording) until
its ``ask_permission`` tool interrupts. ``python agent_process.py resume DB CALLS``: resume the
same thread with ``Command(resume="yes")`` and a model that has no replies. Tools append their
name to the CALLS file; the last line printed is a JSON summary.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.tools import tool
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, interrupt
from test_interrupts import PLAN  # the same plan as the in-process interrupt tests

from llassembly import ToolsPlannerMiddleware


def main(role: str, db: Path, calls: Path) -> None:
    def record(name: str) -> None:
        with calls.open("a", encoding="utf-8") as out:
            out.write(name + "\n")

    @tool
    def step(n: int) -> None:
        """Take step number n."""
        record(f"step{n}")

    @tool
    def ask_permission(question: str) -> str:
        """Ask the human a yes/no question."""
        record("ask")
        answer: str = interrupt(question)
        return answer

    model = ScriptedChatModel(replies=[PLAN] if role == "start" else [])
    conn = sqlite3.connect(db, check_same_thread=False)
    agent = create_agent(
        model,
        tools=[step, ask_permission],
        middleware=[ToolsPlannerMiddleware()],
        checkpointer=SqliteSaver(conn),
    )
    config = {"configurable": {"thread_id": "cross-process"}}
    payload = (
        {"messages": [HumanMessage("Walk three steps.")]}
        if role == "start"
        else Command(resume="yes")
    )
    result = agent.invoke(payload, config)  # type: ignore[arg-type]
    messages = result["messages"]
    asked = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    final = messages[-1]
    summary = {
        "interrupted": bool(result.get("__interrupt__")),
        "model_calls": len(model.calls),
        "status": final.response_metadata.get("llassembly", {}).get("status"),
        "unanswered": [i for i in asked if i not in answered],
    }
    conn.close()
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
