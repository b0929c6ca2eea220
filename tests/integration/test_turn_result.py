"""What an application reads after a turn: a typed ``TurnResult`` with a ``status`` in the
last message's ``response_metadata["llassembly"]`` after every kind of turn, on the agent
path, the graph path and the node; the end user reads plain words without line numbers or
exception text. And what a developer reads: log records on ``getLogger("llassembly")``.

Every model reply here is hand-written.
"""

from __future__ import annotations

import logging
from typing import Any, NotRequired, get_args, get_origin, get_type_hints

import pytest
from conftest import asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from pydantic import TypeAdapter

import llassembly
from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode, TurnResult, max_calls
from llassembly.errors import Failure
from llassembly.integration.record import Approval, QueryDue, TurnRecord

PATHS = ["agent", "graph", "node"]
OPENED: list[str] = []


@tool
def open_door(room: str) -> str:
    """Open the door of a room."""
    if room == "vault":
        raise PermissionError("the vault stays shut for visitor 4711")
    OPENED.append(room)
    return f"{room} open"


GOOD = asm('PUSH "hall"\nCALL open_door\nPOP R1\nSAY "The hall is open."')
FAILS = asm('PUSH "hall"\nCALL open_door\nPOP R1\nPUSH "vault"\nCALL open_door\nPOP R2')
BROKEN = asm("POP R1\nJMP nowhere")
TWICE = asm('PUSH "hall"\nCALL open_door\nPOP R1\nPUSH "attic"\nCALL open_door\nPOP R2')


def build(path: str, replies: list[str], **options: Any) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(replies=replies)
    if path == "node":
        graph = StateGraph(MessagesState)
        graph.add_node("planner", ToolsPlannerNode(model, [open_door], **options))
        graph.add_edge(START, "planner")
        graph.add_edge("planner", END)
        return graph.compile(checkpointer=InMemorySaver()), model
    planner = ToolsPlannerMiddleware(execution=path, **options)  # type: ignore[arg-type]
    agent = create_agent(model, [open_door], middleware=[planner], checkpointer=InMemorySaver())
    return agent, model


def turn(app: Any, text: str = "Open the hall.", thread: str = "t") -> Any:
    config = {"configurable": {"thread_id": thread}}
    return app.invoke({"messages": [HumanMessage(text)]}, config)


def typed(out: Any) -> dict[str, Any]:
    """The last message's record, checked against ``TurnResult``'s declared keys and types."""
    result = meta(out["messages"][-1])
    hints = get_type_hints(TurnResult, include_extras=True)
    required = {k for k, v in hints.items() if get_origin(v) is not NotRequired}
    assert required <= result.keys() <= hints.keys()
    assert TurnResult.__required_keys__ <= result.keys()  # what the class says at run time
    assert TypeAdapter(TurnResult).validate_python(result) == result
    assert result["status"] in get_args(hints["status"])
    for key in ("model_calls", "repairs", "replans", "tool_calls", "instructions"):
        assert isinstance(result[key], int) and result[key] >= 0, key
    assert isinstance(result["drafts"], list)
    return result


@pytest.fixture(autouse=True)
def _fresh() -> None:
    OPENED.clear()


@pytest.mark.parametrize(
    "kind", [TurnResult, Failure, TurnRecord, Approval, QueryDue], ids=lambda k: k.__name__
)
def test_the_records_know_their_optional_keys_at_run_time(kind: Any) -> None:
    """``__required_keys__`` and ``__optional_keys__`` (read by pydantic and by applications)
    say what the annotations say: a ``NotRequired`` key is optional."""
    hints = get_type_hints(kind, include_extras=True)
    optional = {k for k, v in hints.items() if get_origin(v) is NotRequired}
    assert optional and kind.__optional_keys__ == optional
    assert kind.__required_keys__ == hints.keys() - optional


def test_the_types_are_exported() -> None:
    assert {"TurnResult", "Status"} <= set(llassembly.__all__)
    assert get_args(llassembly.Status) == (
        "answered", "finished", "stopped", "refused", "rejected",
    )  # fmt: skip


@pytest.mark.parametrize("path", PATHS)
def test_a_plain_answer_is_answered(path: str) -> None:
    app, _ = build(path, ["Hello! Which room should I open?"])
    result = typed(turn(app, "Hi"))
    assert result["status"] == "answered" and result["model_calls"] == 1
    assert result["tool_calls"] == 0 and "error" not in result


@pytest.mark.parametrize("path", PATHS)
def test_a_plan_that_runs_to_its_end_is_finished(path: str) -> None:
    app, _ = build(path, [GOOD])
    out = turn(app)
    result = typed(out)
    assert result["status"] == "finished" and result["tool_calls"] == 1
    assert out["messages"][-1].text == "The hall is open." and OPENED == ["hall"]


@pytest.mark.parametrize("path", PATHS)
def test_a_stopped_plan_tells_the_user_plainly_and_the_application_everything(path: str) -> None:
    app, _ = build(path, [FAILS])
    out = turn(app)
    result, said = typed(out), out["messages"][-1].text
    assert result["status"] == "stopped" and OPENED == ["hall"]
    assert result["error"]["type"] == "ToolExecutionError" and result["error"]["line"] == 7
    assert result["error"]["tool"] == "open_door"
    assert "the vault stays shut for visitor 4711" in result["error"]["message"]
    assert said.startswith("I could not finish") and "1 tool call had completed" in said
    assert "4711" not in said and "line" not in said and "PermissionError" not in said


@pytest.mark.parametrize("path", PATHS)
def test_exhausted_repairs_are_refused_with_every_draft_kept(path: str) -> None:
    app, _ = build(path, [BROKEN, BROKEN, BROKEN], max_repairs=2)
    out = turn(app)
    result, said = typed(out), out["messages"][-1].text
    assert result["status"] == "refused" and result["repairs"] == 2 and OPENED == []
    assert len(result["drafts"]) == 3
    assert all("undefined label 'nowhere'" in "\n".join(d["problems"]) for d in result["drafts"])
    assert said == "I could not make a plan that passes the checks, so nothing was done."
    assert result["error"]["type"] == "RepairsExhausted"


@pytest.mark.parametrize("path", PATHS)
def test_a_plan_refused_by_a_policy_is_refused_naming_the_policy(path: str) -> None:
    app, _ = build(path, [TWICE, TWICE], max_repairs=1, plan_policy=[max_calls({"open_door": 1})])
    out = turn(app)
    result = typed(out)
    assert result["status"] == "refused" and OPENED == []
    assert "open_door" in result["drafts"][0]["problems"][0]


@pytest.mark.parametrize("path", PATHS)
def test_a_plan_a_person_rejects_is_rejected(path: str) -> None:
    app, _ = build(path, [GOOD], approve_plan=True)
    config = {"configurable": {"thread_id": "r"}}
    app.invoke({"messages": [HumanMessage("Open the hall.")]}, config)
    out = app.invoke(Command(resume={"type": "reject", "message": "not today"}), config)
    result = typed(out)
    assert result["status"] == "rejected" and OPENED == []


# -- logging ----------------------------------------------------------------------------------


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "llassembly" and r.levelno == level]


@pytest.mark.parametrize("path", PATHS)
def test_the_plan_its_problems_and_each_call_are_logged_at_debug(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = build(path, [BROKEN, GOOD])
    with caplog.at_level(logging.DEBUG, logger="llassembly"):
        turn(app)
    debug = "\n".join(records(caplog, logging.DEBUG))
    assert "POP R1\nJMP nowhere" in debug and "undefined label 'nowhere'" in debug
    assert 'CALL open_door\nPOP R1\nSAY "The hall is open."' in debug
    assert "line 4: open_door({'room': 'hall'}) -> 'hall open'" in debug


@pytest.mark.parametrize("path", PATHS)
def test_repairs_replans_and_the_outcome_are_logged_at_info(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = build(path, [BROKEN, FAILS, GOOD], on_tool_error="replan")
    with caplog.at_level(logging.INFO, logger="llassembly"):
        turn(app)
    info = records(caplog, logging.INFO)
    assert any(m.startswith("the reply was refused") for m in info)
    assert any(m.startswith("new plan 1/1 after ToolExecutionError at line 7") for m in info)
    assert info[-1] == "turn ended: finished (3 model calls, 2 tool calls)"
    assert records(caplog, logging.DEBUG) == []  # nothing below the level asked for


@pytest.mark.parametrize("path", PATHS)
def test_approvals_are_logged_at_info(path: str, caplog: pytest.LogCaptureFixture) -> None:
    app, _ = build(path, [GOOD], approve_plan=True)
    config = {"configurable": {"thread_id": "a"}}
    with caplog.at_level(logging.INFO, logger="llassembly"):
        app.invoke({"messages": [HumanMessage("Open the hall.")]}, config)
        app.invoke(Command(resume={"type": "approve"}), config)
    info = records(caplog, logging.INFO)
    assert "plan 1 awaits a person's approval" in info
    assert "a person answered the plan approval: approve" in info


@pytest.mark.parametrize("path", PATHS)
def test_a_refused_edit_and_a_reject_are_logged_plainly(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An edit that fails the checks is logged as such (not by the step's own word); a turn
    that ends with no line to point at says why, not ``at line 0``."""
    app, _ = build(path, [GOOD], approve_plan=True)
    config = {"configurable": {"thread_id": "a"}}
    with caplog.at_level(logging.INFO, logger="llassembly"):
        app.invoke({"messages": [HumanMessage("Open the hall.")]}, config)
        app.invoke(Command(resume={"type": "edit", "plan": "CALL nope"}), config)
        app.invoke(Command(resume={"type": "reject", "message": "not today"}), config)
    info = records(caplog, logging.INFO)
    assert "a person answered the plan approval: edit, refused by the checks (asked again)" in info
    assert "a person answered the plan approval: reject" in info
    ended = (
        "turn ended: rejected (1 model call, 0 tool calls; a reviewer rejected the plan: not today)"
    )
    assert info[-1] == ended


def test_the_library_adds_no_handler() -> None:
    assert logging.getLogger("llassembly").handlers == []
    assert logging.getLogger("llassembly").propagate
