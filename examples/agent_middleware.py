"""``create_agent`` with ``ToolsPlannerMiddleware``: one model call plans, the agent runs it.

The model is a stand-in (``GenericFakeChatModel``) that answers with a plan written by hand, so
this runs offline; put any chat model in its place (``ChatOllama(model="gpt-oss:20b")``,
``ChatOpenAI(...)``, ...). Run: ``python examples/agent_middleware.py``.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from llassembly import ToolsPlannerMiddleware

TEMPERATURES = {"Paris": 19.5, "Oslo": 7.0, "Cairo": 31.0}
SENT: list[str] = []


@tool
def get_temperature(city: str) -> float:
    """Today's temperature in a city, in degrees Celsius."""
    return TEMPERATURES[city]


@tool
def notify(message: str) -> None:
    """Send a message to the user's phone."""
    SENT.append(message)


# What a model writes when the planner's prompt asks it for a plan (written by hand here).
PLAN = """```asm
section .data
cities  dd paris, oslo, cairo
paris   db "Paris", 0
oslo    db "Oslo", 0
cairo   db "Cairo", 0
section .text
        MOV ESI, 0                  ; index of the city
        MOV R3, -100                ; warmest temperature so far
next:   PUSH [cities + ESI*4]
        CALL get_temperature
        POP R1
        CMP R1, R3
        JLE colder
        MOV R3, R1
        MOV R2, [cities + ESI*4]    ; warmest city so far
colder: INC ESI
        CMP ESI, 3
        JL next
        CMP R3, 30
        JL done
        PUSH "Heat warning"
        CALL notify
done:   SAY "The warmest is {R2} at {R3} °C."
```"""


def main() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(PLAN)]))
    agent = create_agent(
        model, tools=[get_temperature, notify], middleware=[ToolsPlannerMiddleware()]
    )
    result = agent.invoke(
        {
            "messages": [
                SystemMessage("You look after the user's travel plans."),
                HumanMessage("Which city is the warmest today? Warn me if it is above 30."),
            ]
        }
    )
    # Each call of the plan is an AIMessage with one tool call and its ToolMessage, made by
    # the agent's own tool node; the last message is the plan's answer.
    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            print(f"  {message.name} -> {message.text}")
    final = result["messages"][-1]
    record = final.response_metadata["llassembly"]
    print(final.text)
    print(
        f"{record['model_calls']} model call, {record['tool_calls']} tool calls, "
        f"{record['instructions']} instructions; notified: {SENT}"
    )


if __name__ == "__main__":
    main()
