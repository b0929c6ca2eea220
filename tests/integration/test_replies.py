"""A reply that holds neither a plan nor an answer in words (code in another language, a JSON
value, a tool call written as text) gets a repair request with a short reason, within
``max_repairs``, on the agent path, the graph path and the node; an answer in words that
shows a little code stays an answer. Every reply here is hand-written.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode

PATHS = ["agent", "graph", "node"]


@tool
def get_temperature(city: str) -> float:
    """Today's temperature in a city, in degrees Celsius."""
    return {"Paris": 19.5, "Oslo": 7.0}[city]


PLAN = asm('PUSH "Oslo"\nCALL get_temperature\nPOP R1\nSAY "Oslo: {R1} °C."')
PYTHON = "```python\nprint(get_temperature('Oslo'))\n```"
JSON = '{"tool": "get_temperature", "arguments": {"city": "Oslo"}}'
CALL_TEXT = 'get_temperature(city="Oslo")'
NOT_ANSWERS = {
    "python": (PYTHON, "the reply holds code in python"),
    "json": (JSON, "the reply holds a JSON value"),
    "call as text": (CALL_TEXT, "the reply holds a tool call written as text"),
    "tagged call": ("<tool_call>\nget_temperature Oslo\n</tool_call>", "a tool call written"),
    "JSON after prose": (f"I will call the tool now.\n{JSON}", "the reply holds a JSON value"),
    "ReAct": (
        "Thought: the user wants to know how warm Oslo is, so I look the temperature up first.\n"
        'Action: get_temperature\nAction Input: {"city": "Oslo"}',
        "the reply holds a tool call written as text",
    ),
    "harmony": (
        "<|channel|>commentary to=functions.get_temperature <|constrain|>json"
        '<|message|>{"city": "Oslo"}',
        "the reply holds a tool call written as text",
    ),
    "unfenced python": (
        'def main():\n    t = get_temperature("Oslo")\n    return t',
        "the reply holds code in another language",
    ),
    "unlabeled fence": (
        "```\nt = get_temperature('Oslo')\nprint(t)\n```",
        "the reply holds a code block that is not a program,",  # not "code in t"
    ),
}


def run(path: str, replies: list[str], **options: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(replies=replies)
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, [get_temperature], **options))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        app: Any = graph.compile()
    else:
        planner = ToolsPlannerMiddleware(execution=path, **options)  # type: ignore[arg-type]
        app = create_agent(model, [get_temperature], middleware=[planner])
    return app.invoke({"messages": [HumanMessage("How warm is Oslo?")]}), model


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", list(NOT_ANSWERS))
def test_a_reply_that_is_no_answer_in_words_is_repaired(path: str, kind: str) -> None:
    reply, reason = NOT_ANSWERS[kind]
    out, model = run(path, [reply, PLAN])
    final = meta(out["messages"][-1])
    assert out["messages"][-1].text == "Oslo: 7 °C."
    assert final["status"] == "finished" and final["repairs"] == 1 and final["model_calls"] == 2
    request = model.calls[1][-1].text
    assert reason in request and "```asm" in request and len(request) < 600
    assert final["drafts"][0]["draft"] == reply


@pytest.mark.parametrize("path", PATHS)
def test_an_answer_in_words_with_a_little_code_stays_an_answer(path: str) -> None:
    words = (
        "You can ask me for any city's temperature; for example, in Python you would write:\n"
        "```python\nget_temperature('Oslo')\n```\nbut I can simply look it up for you."
    )
    out, model = run(path, [words])
    assert out["messages"][-1].text == words and len(model.calls) == 1
    assert meta(out["messages"][-1])["status"] == "answered"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "words",
    [
        "Oslo (Norway) is at 7 °C.",
        "Oslo (7 °C)",
        "Here is what I found, as JSON, since you asked for it in that form:\n"
        '{"city": "Oslo", "celsius": 7}',
        "Action items for today: none.",
    ],
)
def test_a_short_answer_in_words_stays_an_answer(path: str, words: str) -> None:
    out, model = run(path, [words])
    assert out["messages"][-1].text == words and len(model.calls) == 1
    assert meta(out["messages"][-1])["status"] == "answered"


@pytest.mark.parametrize("path", PATHS)
def test_after_the_repairs_the_last_such_reply_stands_as_the_answer(path: str) -> None:
    """The model was told twice what to write; a JSON reply it insists on is its answer (a
    user may have asked for JSON), never a failure that hides it."""
    out, model = run(path, [JSON, JSON, JSON], max_repairs=2)
    final = meta(out["messages"][-1])
    assert out["messages"][-1].text == JSON and len(model.calls) == 3
    assert final["status"] == "answered" and final["repairs"] == 2
