"""Plan approval and plan policies, through ``create_agent`` (both execution paths) and the
LangGraph node, with checkpointers and tools that count every real call.

Each case checks that nothing runs before the decision and nothing runs twice after the
resume. Checkpointers come from :data:`SAVERS` (name -> factory of a saver for a test's
temporary directory) and a fresh PostgreSQL database (the ``postgres`` fixture). Every model
reply is written by hand (``ScriptedChatModel``); none is a recording.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, asm, meta
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.tools import tool
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from llassembly import ToolsPlannerMiddleware, ToolsPlannerNode, unless_plan_approved
from llassembly.analysis.policies import (
    max_calls,
    not_in_loop,
)
from llassembly.errors import UsageError

THREAD = {"configurable": {"thread_id": "ops-1"}}

# -- checkpointers: name -> factory(tmp_path) --------------------------------------------------

_OPEN: list[sqlite3.Connection] = []


def _sqlite(tmp_path: Path) -> Any:
    conn = sqlite3.connect(tmp_path / "state.sqlite", check_same_thread=False)
    _OPEN.append(conn)
    return SqliteSaver(conn)


SAVERS: dict[str, Callable[[Path], Any]] = {
    "memory": lambda _: InMemorySaver(),
    "sqlite": _sqlite,
}


@pytest.fixture(params=[*sorted(SAVERS), "postgres"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "postgres":  # a fresh database of the test server (see conftest)
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(request.getfixturevalue("postgres")) as pg:
            pg.setup()
            yield pg
        return
    yield SAVERS[request.param](tmp_path)
    while _OPEN:
        _OPEN.pop().close()


# -- tools that count --------------------------------------------------------------------------


class Ops:
    """An email/ops toolbox; ``log`` has one entry per real call."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def tools(self) -> list[Any]:
        log = self.log

        @tool
        def list_alerts(severity: str) -> int:
            """How many open alerts of a severity."""
            log.append(("list_alerts", severity))
            return 2

        @tool
        def restart(service: str) -> str:
            """Restart a service."""
            log.append(("restart", service))
            return f"{service} restarted"

        @tool
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            log.append(("send_email", to))
            return "sent"

        return [list_alerts, restart, send_email]


PLAN = asm(
    """
    PUSH "critical"
    CALL list_alerts
    POP R1
    PUSH "web"
    CALL restart
    POP R2
    PUSH "ops@example.com"
    PUSH R2
    CALL send_email
    POP R3
    """
)
EDITED = asm('PUSH "db"\nCALL restart\nPOP R2')
ALL_CALLS = [("list_alerts", "critical"), ("restart", "web"), ("send_email", "ops@example.com")]

SURFACES = ["agent", "graph", "node"]


def build(surface: str, replies: list[Any], tools: list[Any], saver: Any, **options: Any) -> Any:
    model = ScriptedChatModel(replies=replies)
    if surface == "node":
        builder = StateGraph(MessagesState)
        builder.add_node("planner", ToolsPlannerNode(model, tools, **options))
        builder.add_edge(START, "planner")
        builder.add_edge("planner", END)
        app = builder.compile(checkpointer=saver)
    else:
        execution = "graph" if surface == "graph" else "agent"
        planner = ToolsPlannerMiddleware(execution=execution, **options)
        app = create_agent(model, tools=tools, middleware=[planner], checkpointer=saver)
    app.scripted = model
    return app


def start(app: Any) -> dict[str, Any]:
    return app.invoke({"messages": [HumanMessage("Fix the critical alerts.")]}, THREAD)  # type: ignore[no-any-return]


def request_of(paused: dict[str, Any]) -> dict[str, Any]:
    interrupts = paused["__interrupt__"]
    assert len(interrupts) == 1
    value: dict[str, Any] = interrupts[0].value
    return value


def unanswered(messages: list[Any]) -> list[str]:
    asked = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [i for i in asked if i not in answered]


# -- approve -----------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_nothing_runs_before_approval_and_each_call_runs_once_after(
    surface: str, saver: Any
) -> None:
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), saver, approve_plan=True)
    paused = start(app)
    assert ops.log == []
    request = request_of(paused)
    assert request["type"] == "plan_approval" and request["plan"] == PLAN
    assert request["allowed_decisions"] == ["approve", "edit", "reject"]
    assert request["problems"] == []
    json.dumps(request)  # plain JSON data
    summary = request["summary"]
    assert [(t["name"], t["min_calls"], t["max_calls"]) for t in summary["tools"]] == [
        ("list_alerts", 1, 1),
        ("restart", 1, 1),
        ("send_email", 1, 1),
    ]
    send = summary["tools"][2]["sites"][0]["arguments"]
    assert send == [
        {
            "name": "to",
            "constant": True,
            "value": "ops@example.com",
            "sources": [],
            "certain": [],
            "answers": [],
            "optional": False,
        },
        {
            "name": "body",
            "constant": False,
            "value": None,
            "sources": ["restart"],
            "certain": ["restart"],
            "answers": [],
            "optional": False,
        },
    ]
    assert 'send_email(to="ops@example.com", body=<computed>)' in request["description"]
    # The person approving sees where the computed argument comes from.
    assert request["description"].endswith("send_email.body <- restart")

    out = app.invoke(Command(resume={"type": "approve"}), THREAD)
    assert ops.log == ALL_CALLS
    final = out["messages"][-1]
    assert meta(final)["status"] == "finished"
    assert meta(final)["registers"]["R3"] == "sent"
    assert len(app.scripted.calls) == 1
    assert unanswered(out["messages"]) == []


@pytest.mark.parametrize("surface", SURFACES)
def test_approve_plan_with_tool_names_pauses_only_for_plans_that_can_call_them(
    surface: str,
) -> None:
    ops = Ops()
    quiet = asm('PUSH "critical"\nCALL list_alerts\nPOP R1')
    app = build(
        surface, [quiet], ops.tools(), InMemorySaver(), approve_plan=["send_email", "restart"]
    )
    out = start(app)
    assert "__interrupt__" not in out and ops.log == [("list_alerts", "critical")]

    ops2 = Ops()
    app2 = build(surface, [PLAN], ops2.tools(), InMemorySaver(), approve_plan=["send_email"])
    assert "__interrupt__" in start(app2) and ops2.log == []


# -- edit --------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_an_edited_plan_is_verified_and_runs_instead(surface: str, saver: Any) -> None:
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), saver, approve_plan=True)
    start(app)
    out = app.invoke(Command(resume={"type": "edit", "plan": EDITED}), THREAD)
    assert ops.log == [("restart", "db")]
    [note] = [m.text for m in out["messages"] if "A reviewer replaced the plan" in m.text]
    assert 'PUSH "db"' in note and note.count("```") == 2  # one fence
    assert meta(out["messages"][-1])["registers"] == {"R2": "db restarted"}
    assert len(app.scripted.calls) == 1


@pytest.mark.parametrize("surface", SURFACES)
def test_the_same_edit_in_two_turns_runs_in_each_with_calls_of_its_own(surface: str) -> None:
    """A reviewer's plan is salted by the plan it replaces, as a model's plan by its reply:
    the same edit in two turns of one thread runs in each, with call ids of its own."""
    ops = Ops()
    app = build(surface, [PLAN, PLAN], ops.tools(), InMemorySaver(), approve_plan=True)
    for _ in range(2):
        start(app)
        out = app.invoke(Command(resume={"type": "edit", "plan": EDITED}), THREAD)
        assert meta(out["messages"][-1])["registers"] == {"R2": "db restarted"}
    assert ops.log == [("restart", "db")] * 2 and unanswered(out["messages"]) == []
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 2


@pytest.mark.parametrize("surface", SURFACES)
def test_an_edit_without_a_fence_is_recorded_in_one(surface: str, saver: Any) -> None:
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), saver, approve_plan=True)
    start(app)
    out = app.invoke(Command(resume={"type": "edit", "plan": 'PUSH "db"\nCALL restart'}), THREAD)
    assert ops.log == [("restart", "db")]
    [note] = [m.text for m in out["messages"] if "A reviewer replaced the plan" in m.text]
    assert note.endswith('```asm\nPUSH "db"\nCALL restart\n```') and note.count("```") == 2


NOTE_EDITS = {  # an edit as a reviewer may write it -> the code of the note's one block
    "two fences": (
        '```asm\nPUSH "db"\n```\nthen\n```asm\nCALL restart\n```',
        'PUSH "db"\nCALL restart',
    ),
    "prose around a fence": (
        'Use this:\n~~~asm\nPUSH "db"  ; the database\n\nCALL restart\n~~~\nThanks.',
        'PUSH "db"  ; the database\n\nCALL restart',
    ),
    "backticks in a string": (
        'PUSH "db ```` x"\nCALL restart',
        'PUSH "db ```` x"\nCALL restart',
    ),
}


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("case", list(NOTE_EDITS))
def test_the_edit_note_holds_the_plan_in_one_fenced_block(case: str, surface: str) -> None:
    """Whatever the reviewer wrote around the plan (prose, fences, several blocks), the note
    shows the lines that run in one block, fenced by more backticks than any run inside."""
    edit, code = NOTE_EDITS[case]
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), InMemorySaver(), approve_plan=True)
    start(app)
    out = app.invoke(Command(resume={"type": "edit", "plan": edit}), THREAD)
    assert [name for name, _ in ops.log] == ["restart"]
    [message] = [m for m in out["messages"] if "A reviewer replaced the plan" in m.text]
    note = message.text
    assert message.response_metadata["llassembly"]["kind"] == "edit"  # (as every turn's message)
    fence = "`````" if "````" in code else "```"
    head = "A reviewer replaced the plan before it ran; this plan runs instead:"
    assert note == f"{head}\n{fence}asm\n{code}\n{fence}"


@pytest.mark.parametrize("surface", SURFACES)
def test_a_failure_of_an_edited_plan_names_its_line_in_the_note(surface: str) -> None:
    """The edited plan runs as the note shows it (its code, without the reviewer's prose and
    fences): a failure's line is the line of the note's block that holds the instruction."""
    ops = Ops()
    edit = 'Try this:\n\n```asm\nPUSH "db"\nCALL restart\nPOP R1\nMOV R3, R1.state\n```'
    app = build(surface, [PLAN], ops.tools(), InMemorySaver(), approve_plan=True)
    start(app)
    out = app.invoke(Command(resume={"type": "edit", "plan": edit}), THREAD)
    [note] = [m.text for m in out["messages"] if "A reviewer replaced the plan" in m.text]
    error = meta(out["messages"][-1])["error"]
    block = note.split("```asm\n", 1)[1].split("\n")
    assert block[error["line"] - 1] == error["source"] == "MOV R3, R1.state"


@pytest.mark.parametrize("surface", SURFACES)
def test_a_broken_edit_asks_again_with_its_problems_and_runs_nothing(
    surface: str, saver: Any
) -> None:
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), saver, approve_plan=True)
    start(app)
    again = app.invoke(Command(resume={"type": "edit", "plan": "POP R1\nCALL nuke"}), THREAD)
    assert ops.log == []
    request = request_of(again)
    assert request["plan"] == PLAN  # approving now runs the original plan
    assert request["rejected_edit"] == "POP R1\nCALL nuke"
    assert "unknown tool 'nuke'" in request["problems"][0]
    out = app.invoke(Command(resume={"type": "approve"}), THREAD)
    assert ops.log == ALL_CALLS
    assert meta(out["messages"][-1])["status"] == "finished"


# -- reject ------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_reject_runs_nothing_and_ends_the_turn_with_the_message(surface: str, saver: Any) -> None:
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), saver, approve_plan=True)
    start(app)
    out = app.invoke(Command(resume={"type": "reject", "message": "not during the sale"}), THREAD)
    assert ops.log == []
    final = out["messages"][-1]
    assert meta(final)["status"] == "rejected"
    assert final.text == "The plan did not run: a reviewer rejected the plan: not during the sale."
    assert unanswered(out["messages"]) == []


@pytest.mark.parametrize("surface", SURFACES)
def test_reject_under_replan_gets_a_new_plan_which_is_approved_in_turn(
    surface: str, saver: Any
) -> None:
    ops = Ops()
    smaller = asm('PUSH "critical"\nCALL list_alerts\nPOP R1\nPUSH "web"\nCALL restart\nPOP R2')
    app = build(
        surface, [PLAN, smaller], ops.tools(), saver, approve_plan=True, on_tool_error="replan"
    )
    start(app)
    second = app.invoke(Command(resume={"type": "reject", "message": "no emails"}), THREAD)
    assert ops.log == []
    assert request_of(second)["plan"] == smaller
    assert "no emails" in app.scripted.calls[1][-1].text
    out = app.invoke(Command(resume={"type": "approve"}), THREAD)
    assert ops.log == [("list_alerts", "critical"), ("restart", "web")]
    record = meta(out["messages"][-1])
    assert (record["status"], record["model_calls"], record["replans"]) == ("finished", 2, 1)


def test_a_resume_value_that_is_no_decision_is_refused() -> None:
    app = build("agent", [PLAN], Ops().tools(), InMemorySaver(), approve_plan=True)
    start(app)
    with pytest.raises(UsageError, match="plan approval is answered with"):
        app.invoke(Command(resume={"type": "maybe"}), THREAD)


# -- with HumanInTheLoopMiddleware -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_an_approved_plan_is_not_asked_about_again_call_by_call(mode: str) -> None:
    ops = Ops()
    hitl = HumanInTheLoopMiddleware(
        interrupt_on=unless_plan_approved({"send_email": True, "restart": True}),
        interrupt_mode=mode,  # type: ignore[arg-type]
    )
    model = ScriptedChatModel(replies=[PLAN])
    app = create_agent(
        model,
        tools=ops.tools(),
        middleware=[ToolsPlannerMiddleware(approve_plan=True), hitl],
        checkpointer=InMemorySaver(),
    )
    assert request_of(start(app))["type"] == "plan_approval"
    out = app.invoke(Command(resume={"type": "approve"}), THREAD)
    assert "__interrupt__" not in out
    assert ops.log == ALL_CALLS


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_unwrapped_interrupt_on_still_asks_per_call_and_wrapped_asks_without_approval(
    mode: str,
) -> None:
    """Plain ``interrupt_on`` is not changed behind the user's back: an approved plan's calls
    are asked about again; and ``unless_plan_approved`` asks as before when no plan was
    approved (here approve_plan is off)."""
    ops = Ops()
    plain = HumanInTheLoopMiddleware(interrupt_on={"restart": True}, interrupt_mode=mode)  # type: ignore[arg-type]
    app = create_agent(
        ScriptedChatModel(replies=[PLAN]),
        tools=ops.tools(),
        middleware=[ToolsPlannerMiddleware(approve_plan=True), plain],
        checkpointer=InMemorySaver(),
    )
    start(app)
    asked = app.invoke(Command(resume={"type": "approve"}), THREAD)
    assert "__interrupt__" in asked and ops.log == [("list_alerts", "critical")]

    ops2 = Ops()
    wrapped = HumanInTheLoopMiddleware(
        interrupt_on=unless_plan_approved({"restart": True}),
        interrupt_mode=mode,  # type: ignore[arg-type]
    )
    app2 = create_agent(
        ScriptedChatModel(replies=[PLAN]),
        tools=ops2.tools(),
        middleware=[ToolsPlannerMiddleware(), wrapped],
        checkpointer=InMemorySaver(),
    )
    paused = start(app2)
    assert "__interrupt__" in paused and ops2.log == [("list_alerts", "critical")]


# -- a new process -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "postgres"])
@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_approval_is_answered_in_a_new_process(
    tmp_path: Path, execution: str, store: str, request: pytest.FixtureRequest
) -> None:
    """Two real processes share one SQLite file or PostgreSQL database: the first stops at
    the approval request, the second (a model with no replies, only the thread id) approves
    and runs the plan."""
    script = Path(__file__).with_name("approval_process.py")
    calls = tmp_path / "calls.log"
    db = (
        str(tmp_path / "state.sqlite") if store == "sqlite" else request.getfixturevalue("postgres")
    )

    def run(role: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(script), role, store, db, str(calls), execution],
            env={**os.environ, "PYTHONPATH": str(TESTS)},  # fakes, beside the folders
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    first = run("start")
    assert first["interrupted"] == "plan_approval" and first["model_calls"] == 1
    assert not calls.exists()
    second = run("resume")
    assert second["model_calls"] == 0 and second["status"] == "finished"
    assert calls.read_text().split() == ["list_alerts", "restart", "send_email"]
    saver = {"sqlite": "SqliteSaver", "postgres": "PostgresSaver"}[store]
    assert first["saver"] == second["saver"] == saver
    if store == "postgres":  # the checkpoints are in that database, not in a file named by it
        import psycopg

        with psycopg.connect(db) as conn:
            row = conn.execute(
                "SELECT count(*) FROM checkpoints WHERE thread_id = 'cross-process'"
            ).fetchone()
        assert row is not None and row[0] > 0


# -- policies ----------------------------------------------------------------------------------

LOOPING = asm(
    """
    MOV R1, 0
again:
    PUSH "ops@example.com"
    PUSH "alert"
    CALL send_email
    POP R2
    INC R1
    CMP R1, 5
    JL again
    """
)


@pytest.mark.parametrize("surface", SURFACES)
def test_a_policy_violation_goes_back_to_the_model_and_the_fixed_plan_runs(surface: str) -> None:
    ops = Ops()
    app = build(
        surface,
        [LOOPING, PLAN],
        ops.tools(),
        InMemorySaver(),
        plan_policy=[not_in_loop("send_email"), max_calls({"send_email": 1})],
    )
    out = start(app)
    assert ops.log == ALL_CALLS  # the looping plan never ran
    repair = app.scripted.calls[1][-1].text
    assert "send_email must not be called inside a loop" in repair
    assert "send_email may be called at most 1 time per plan" in repair
    assert "line 7" in repair  # the CALL send_email line of the reply (after prose, fence)
    record = meta(out["messages"][-1])
    assert (record["status"], record["repairs"]) == ("finished", 1)


def test_a_plan_that_never_passes_the_policies_ends_the_turn_without_running() -> None:
    ops = Ops()
    app = build(
        "agent",
        [LOOPING, LOOPING],
        ops.tools(),
        InMemorySaver(),
        plan_policy=[lambda summary, program: ["no email today"]],
        max_repairs=1,
    )
    out = start(app)
    assert ops.log == []
    final = out["messages"][-1]
    assert meta(final)["status"] == "refused" and "could not make a plan" in final.text
    assert "plan policy: no email today" in meta(final)["error"]["message"]


def test_policy_and_approval_options_are_checked() -> None:
    with pytest.raises(UsageError, match="approve_plan"):
        ToolsPlannerMiddleware(approve_plan="send_email")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="plan_policy"):
        ToolsPlannerMiddleware(plan_policy=["not callable"])  # type: ignore[list-item]
    with pytest.raises(UsageError):
        max_calls({"send_email": -1})


@pytest.mark.parametrize("surface", ["agent", "graph"])
async def test_approval_works_with_ainvoke(surface: str) -> None:
    ops = Ops()
    app = build(surface, [PLAN], ops.tools(), InMemorySaver(), approve_plan=True)
    paused = await app.ainvoke({"messages": [HumanMessage("Fix the critical alerts.")]}, THREAD)
    assert request_of(paused)["type"] == "plan_approval" and ops.log == []
    out = await app.ainvoke(Command(resume={"type": "approve"}), THREAD)
    assert ops.log == ALL_CALLS and meta(out["messages"][-1])["status"] == "finished"


def test_a_policy_can_read_constant_arguments() -> None:
    """The README's example: send_email only to a constant address of our domain."""

    def only_our_domain(summary: Any, program: Any) -> list[str]:
        use = summary.tool("send_email")
        return [
            f"line {site.line}: send_email may only write to a constant @example.com address"
            for site in (use.sites if use else ())
            if not (
                site.arguments[0].constant and str(site.arguments[0].value).endswith("@example.com")
            )
        ]

    ops = Ops()
    outside = PLAN.replace("ops@example.com", "someone@elsewhere.org")
    app = build(
        "agent", [outside, PLAN], ops.tools(), InMemorySaver(), plan_policy=[only_our_domain]
    )
    out = start(app)
    assert ops.log == ALL_CALLS
    assert "line 11: send_email may only write to a constant" in app.scripted.calls[1][-1].text
    assert meta(out["messages"][-1])["repairs"] == 1


def test_a_decision_in_a_list_of_one_as_the_batched_hitl_resumes_is_taken() -> None:
    """``{"decisions": [d]}`` (HumanInTheLoopMiddleware's batched shape) answers as ``d``."""
    ops = Ops()
    app = build("agent", [PLAN], ops.tools(), InMemorySaver(), approve_plan=True)
    start(app)
    out = app.invoke(Command(resume={"decisions": [{"type": "approve"}]}), THREAD)
    assert ops.log == ALL_CALLS and meta(out["messages"][-1])["status"] == "finished"


@pytest.mark.parametrize(
    ("resume", "error"),
    [
        ({"decisions": [{"type": "approve"}, {"type": "approve"}]}, "plan approval is answered"),
        ({"decisions": {"type": "approve"}}, "plan approval is answered"),
        ({"type": "edit"}, "an 'edit' plan-approval decision needs the new plan text as 'plan'"),
        ({"type": "edit", "plan": None}, "an 'edit' plan-approval decision needs the new plan"),
        ({"type": "reject", "message": 3}, "the 'message' of a 'reject' decision must be text"),
    ],
)
def test_a_decision_of_the_wrong_shape_is_refused_and_nothing_runs(
    resume: dict[str, Any], error: str
) -> None:
    ops = Ops()
    app = build("agent", [PLAN], ops.tools(), InMemorySaver(), approve_plan=True)
    start(app)
    with pytest.raises(UsageError, match=error):
        app.invoke(Command(resume=resume), THREAD)
    assert ops.log == []


@pytest.mark.parametrize("config", ["yes", None, 1])
def test_unless_plan_approved_refuses_a_config_of_no_known_kind(config: Any) -> None:
    with pytest.raises(UsageError, match=r"interrupt_on\['restart'\] must be True, False or a"):
        unless_plan_approved({"restart": config})


def test_unless_plan_approved_keeps_false_and_each_configs_keys() -> None:
    out = unless_plan_approved(
        {"restart": False, "send_email": {"allowed_decisions": ["approve"], "description": "d"}}
    )
    assert out["restart"] is False
    assert {k: v for k, v in out["send_email"].items() if k != "when"} == {
        "allowed_decisions": ["approve"],
        "description": "d",
    }
    assert out["send_email"]["when"](object()) is True  # no plan approved: asked as before
