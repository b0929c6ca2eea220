"""Approve the plan, not each call: one human decision before the plan's first call.

``ToolsPlannerMiddleware(approve_plan=True)`` pauses with ``interrupt()`` once the plan is
written and checked; the interrupt's value says what the plan can do (each tool, how often,
with which arguments). The run resumes with ``Command(resume={"type": "approve"})`` (or
``"edit"`` / ``"reject"``), here from a new agent that shares only the checkpointer and the
thread id, as a new process would. The model is a stand-in answering with a hand-written plan.
Run: ``python examples/approval.py``.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from llassembly import ToolsPlannerMiddleware

SERVICES = ["web", "db", "cache"]
RESTARTED: list[str] = []


@tool
def count_alerts(severity: str) -> int:
    """How many open alerts of this severity there are."""
    return 2 if severity == "critical" else 0


@tool
def alert_service(severity: str, index: int) -> str:
    """The service named by the open alert number `index` of this severity."""
    return SERVICES[index]


@tool
def restart_service(service: str) -> bool:
    """Restart a service; true when it came back."""
    RESTARTED.append(service)
    return True


PLAN = """```asm
        PUSH "critical"
        CALL count_alerts
        POP R1                  ; number of critical alerts
        MOV R2, 0               ; alert index
next:   CMP R2, R1
        JGE done
        PUSH "critical"
        PUSH R2
        CALL alert_service
        CALL restart_service    ; the service name is on the stack
        POP R0
        INC R2
        JMP next
done:   SAY "Restarted {R1} services."
```"""

TOOLS = [count_alerts, alert_service, restart_service]
THREAD: RunnableConfig = {"configurable": {"thread_id": "ops-1"}}


def main() -> None:
    saver = InMemorySaver()  # SqliteSaver or PostgresSaver to resume in another process
    model = GenericFakeChatModel(messages=iter([AIMessage(PLAN)]))
    planner = ToolsPlannerMiddleware(approve_plan=True)
    agent = create_agent(model, tools=TOOLS, middleware=[planner], checkpointer=saver)

    paused = agent.invoke({"messages": [HumanMessage("Handle the critical alerts.")]}, THREAD)
    question = paused["__interrupt__"][0].value
    print(f"Paused for approval ({question['type']}); nothing has run: {RESTARTED}")
    print(question["description"])

    # Later, maybe in another process: a new agent on the same saver; the model is not called
    # again (this stand-in has no reply left).
    idle = GenericFakeChatModel(messages=iter([]))
    later = create_agent(
        idle,
        tools=TOOLS,
        middleware=[ToolsPlannerMiddleware(approve_plan=True)],
        checkpointer=saver,
    )
    done = later.invoke(Command(resume={"type": "approve"}), THREAD)
    print(f"Approved. {done['messages'][-1].text} Restarted: {RESTARTED}")


if __name__ == "__main__":
    main()
