"""The turn state machine (``llassembly.integration.turn``): its step, alone, and the same
scripted turns driven by both of its drivers (the agent path and the turn graph) giving the
same record and the same messages.

Every model reply here is written by hand; none is a recording of a real model.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import BAD_PLAN, FLAKY_PLAN, Toolbox, asm
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from llassembly.errors import CallNotRun, RepairsExhausted, UsageError
from llassembly.integration.middleware import ToolsPlannerMiddleware
from llassembly.integration.nodes import ToolsPlannerNode
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.integration.query import Reply
from llassembly.integration.record import KEY
from llassembly.integration.turn import (
    AskModel,
    AskPerson,
    AskQuery,
    Begin,
    Finish,
    Proceed,
    Received,
    RunCalls,
    RunPlan,
    TurnView,
    step,
)
from llassembly.machine.emulator import Failed

PLAN = asm('PUSH 1\nCALL increment\nPOP R1\nPUSH R1\nCALL increment\nPOP R2\nSAY "{R2}"')


def _view(box: Toolbox, *, graph: bool = False, **options: Any) -> TurnView:
    planner = Planner(PlannerOptions(**options))
    return TurnView(planner, planner.externs_for(box.sync_tools), [HumanMessage("go")], graph)


# -- the step, alone ----------------------------------------------------------------------------


def test_a_turn_begins_by_asking_for_a_plan(box: Toolbox) -> None:
    first = step(None, Begin(), _view(box))
    assert isinstance(first.action, AskModel) and first.action.extra == []
    assert first.record["phase"] == "planning" and first.messages == []


def test_a_valid_plan_asks_for_its_first_call_or_for_a_plan_graph(box: Toolbox) -> None:
    view = _view(box)
    asked = step(None, Begin(), view)
    started = step(asked.record, Received(AIMessage(PLAN)), view)
    assert isinstance(started.action, RunCalls)
    assert [c.tool for c in started.action.calls] == ["increment"]
    assert started.record["pending"][0]["line"] == 4  # the reply's line (after its prose)
    assert [type(m) for m in started.messages] == [AIMessage, AIMessage]  # plan, call
    graph = _view(box, graph=True)
    as_graph = step(step(None, Begin(), graph).record, Received(AIMessage(PLAN)), graph)
    assert isinstance(as_graph.action, RunPlan) and as_graph.action.plan == PLAN


def test_results_go_into_the_machine_until_the_plan_ends_with_its_answer(box: Toolbox) -> None:
    view = _view(box)
    current = step(step(None, Begin(), view).record, Received(AIMessage(PLAN)), view)
    current = step(current.record, Received([2]), view)
    assert isinstance(current.action, RunCalls) and current.action.calls[0].args == {"x": 2}
    done = step(current.record, Received([3]), view)
    assert isinstance(done.action, Finish) and done.record["phase"] == "done"
    assert done.messages[-1].text == "3"
    assert done.record["tool_calls"] == 2 and done.record["model_calls"] == 1


def test_a_rejected_reply_asks_for_a_repair_with_the_draft_and_its_problems(box: Toolbox) -> None:
    view = _view(box, max_repairs=1, on_tool_error="stop")
    asked = step(step(None, Begin(), view).record, Received(AIMessage(BAD_PLAN)), view)
    assert isinstance(asked.action, AskModel) and asked.record["repairs"] == 1
    draft, request = asked.action.extra
    assert draft.text == BAD_PLAN and "teleport" in request.text
    given_up = step(asked.record, Received(AIMessage(BAD_PLAN)), view)
    assert isinstance(given_up.action, Finish)
    assert given_up.record["failure"] is not None
    assert given_up.record["failure"]["type"] == "RepairsExhausted"
    final = given_up.messages[-1]
    assert "could not make a plan that passes the checks" in final.text
    assert final.response_metadata["llassembly"]["status"] == "refused"
    assert "teleport" in final.response_metadata["llassembly"]["error"]["problems"][0]
    raising = _view(box, max_repairs=0, on_tool_error="raise")
    with pytest.raises(RepairsExhausted):
        step(step(None, Begin(), raising).record, Received(AIMessage(BAD_PLAN)), raising)


def test_a_failed_call_under_replan_asks_for_a_new_plan_with_what_happened(box: Toolbox) -> None:
    view = _view(box, on_tool_error="replan")
    started = step(step(None, Begin(), view).record, Received(AIMessage(PLAN)), view)
    refused = CallNotRun("increment", "a reviewer said no", line=3, source="CALL increment")
    replanning = step(started.record, Received([Failed(refused)]), view)
    assert isinstance(replanning.action, AskModel) and replanning.record["replans"] == 1
    (request,) = replanning.action.extra
    assert "line 3" in request.text and "a reviewer said no" in request.text
    assert replanning.record["tool_calls"] == 0  # the refused call did not complete
    again = step(replanning.record, Proceed(), view)
    assert isinstance(again.action, AskModel) and again.action.extra == replanning.action.extra


def test_a_refused_call_ends_the_turn_as_a_decision(box: Toolbox) -> None:
    view = _view(box)
    started = step(step(None, Begin(), view).record, Received(AIMessage(PLAN)), view)
    refused = CallNotRun("increment", "a reviewer said no", line=3, source="CALL increment")
    done = step(started.record, Received([Failed(refused)]), view)
    assert isinstance(done.action, Finish)
    text = done.messages[-1].text
    assert "was not run: a reviewer said no (a decision, not an error)" in text
    assert "Nothing had been done before it" in text


def test_approval_pauses_then_runs_an_approved_plan_or_ends_on_a_rejection(box: Toolbox) -> None:
    view = _view(box, approve_plan=True)
    paused = step(step(None, Begin(), view).record, Received(AIMessage(PLAN)), view)
    assert isinstance(paused.action, AskPerson) and paused.record["phase"] == "approval"
    assert step(paused.record, Proceed(), view).action == paused.action
    approved = step(paused.record, Received({"type": "approve"}), view)
    assert isinstance(approved.action, RunCalls)
    rejected = step(paused.record, Received({"type": "reject", "message": "no"}), view)
    assert isinstance(rejected.action, Finish)
    assert rejected.record["failure"] is not None
    assert rejected.record["failure"]["type"] == "PlanNotApproved"


# -- the same turns through both drivers ---------------------------------------------------------

ASK = 'PUSH "three apples"\nPUSH "How many?"\nPUSH "integer"\nCALL query_text\n'
QUERY_PLAN = asm(ASK + 'POP R1\nPUSH R1\nCALL increment\nPOP R2\nSAY "{R2}"')
TWO_QUERIES = asm(ASK + "POP R1\n" + ASK + 'POP R2\nADD R1, R2\nSAY "{R1}"')

SCENARIOS: dict[str, tuple[list[str], dict[str, Any], set[int]]] = {
    "repair then run": ([BAD_PLAN, PLAN], {}, set()),
    "tool fails, replan": (
        [FLAKY_PLAN, asm("PUSH 30\nCALL increment\nPOP R1")],
        {"on_tool_error": "replan"},
        {3},
    ),
    "tool fails, stop": ([FLAKY_PLAN], {}, {2}),
    "answer in words": (["No tools needed: it is 4."], {}, set()),
    "final answer call": ([PLAN, "It came to 3."], {"final_answer": "model"}, set()),
    "query then call": ([QUERY_PLAN, '{"value": 3}'], {"queries": True}, set()),
    "query retried": ([QUERY_PLAN, "three", '{"value": 3}'], {"queries": True}, set()),
    "query fails, stop": ([QUERY_PLAN, "three", "drei"], {"queries": True}, set()),
    "queries at once": (
        [TWO_QUERIES, '{"value": 3}', '{"value": 3}'],
        {"queries": True, "parallel_tools": True},
        set(),
    ),
}


def _agent_turn(replies: list[str], options: dict[str, Any], fail_on: set[int]) -> Any:
    box = Toolbox(fail_on=set(fail_on))
    app = create_agent(
        ScriptedChatModel(replies=replies),
        tools=box.sync_tools,
        middleware=[ToolsPlannerMiddleware(**options)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    out = app.invoke({"messages": [HumanMessage("go")]}, config)
    return out["messages"][1:], app.get_state(config).values[KEY], box.log


def _graph_turn(replies: list[str], options: dict[str, Any], fail_on: set[int]) -> Any:
    box = Toolbox(fail_on=set(fail_on))
    node = ToolsPlannerNode(ScriptedChatModel(replies=replies), box.sync_tools, **options)
    finals: list[dict[str, Any]] = []
    update = node._update

    def keep(final: dict[str, Any], config: Any) -> Any:
        finals.append(final)
        return update(final, config)

    node._update = keep  # type: ignore[method-assign]
    out = node({"messages": [HumanMessage("go")]}, {})
    return out["messages"], finals[-1]["record"], box.log


_SAME = ("phase", "plan_number", "model_calls", "repairs", "replans", "executed", "tool_calls")


def _shape(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    shape: list[tuple[Any, ...]] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            shape.append(("tool", m.name, m.text, m.status))
        elif isinstance(m, AIMessage):
            calls = [(c["name"], c["args"]) for c in m.tool_calls]
            tag = m.response_metadata.get(KEY) or {}
            status = tag.get("status") if isinstance(tag, dict) else None
            shape.append(("ai", m.text, calls, status))
        else:
            shape.append((type(m).__name__, m.text))
    return shape


def _failure(record: dict[str, Any]) -> tuple[str, int, str] | None:
    failure = record["failure"]
    return None if failure is None else (failure["type"], failure["line"], failure["detail"])


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_both_drivers_give_the_same_record_and_messages(scenario: str) -> None:
    replies, options, fail_on = SCENARIOS[scenario]
    agent_messages, agent_record, agent_log = _agent_turn(replies, options, fail_on)
    graph_messages, graph_record, graph_log = _graph_turn(replies, options, fail_on)
    assert agent_log == graph_log
    assert {k: agent_record[k] for k in _SAME} == {k: graph_record[k] for k in _SAME}
    assert _failure(agent_record) == _failure(graph_record)
    assert agent_record["machine"] == graph_record["machine"]
    assert _shape(agent_messages) == _shape(graph_messages)


# -- what a plan returns in EAX / XMM0 is its answer when it said nothing -----------------------

RETURNS = {
    "EAX after a call": ("PUSH 1\nCALL increment\nPOP EAX\nRET", "2"),
    "integer constant": ("MOV EAX, 42\nRET", "42"),
    "float in xmm0": ("MOV xmm0, 2.5\nRET", "2.5"),
    "return 0 says nothing": ("PUSH 1\nCALL increment\nPOP R1\nXOR EAX, EAX\nRET", None),
    "SAY wins over EAX": ('SAY "x"\nMOV EAX, 5\nRET', "x"),
    "HLT returns nothing": ("PUSH 1\nCALL increment\nPOP EAX\nHLT", None),
}


@pytest.mark.parametrize("execution", ["agent", "graph"])
@pytest.mark.parametrize("case", list(RETURNS))
def test_a_returned_value_is_the_answer_on_every_driver(case: str, execution: str) -> None:
    """A top-level ``RET`` returns EAX or XMM0 (the x86 convention): with nothing said, that
    value is the final message; with ``SAY`` lines, or no value returned, the final message is
    what it was before (the answer, or the summary of the calls)."""
    source, expected = RETURNS[case]
    options = {"execution": execution} if execution == "graph" else {}
    agent_messages, _, _ = _agent_turn([asm(source)], options, set())
    graph_messages, _, _ = _graph_turn([asm(source)], {}, set())
    for messages in (agent_messages, graph_messages):
        final = messages[-1]
        meta = final.response_metadata[KEY]
        assert meta["kind"] == "answer"
        assert meta["answer"] == expected
        if expected is not None:
            assert final.text == expected
        else:
            assert "increment" in final.text  # the summary of the calls that ran
    assert _shape(agent_messages) == _shape(graph_messages)


# -- events the turn does not wait for ----------------------------------------------------------


def test_an_event_of_another_kind_than_the_turn_waits_for_is_refused(box: Toolbox) -> None:
    view = _view(box)
    asked = step(None, Begin(), view)
    with pytest.raises(UsageError, match=r"^list came while the turn waits for 'plan'$"):
        step(asked.record, Received([2]), view)
    started = step(asked.record, Received(AIMessage(PLAN)), view)
    with pytest.raises(UsageError, match=r"^AIMessage came while the turn waits for 'results'$"):
        step(started.record, Received(AIMessage(PLAN)), view)
    done = step(step(started.record, Received([2]), view).record, Received([3]), view)
    assert isinstance(done.action, Finish)
    with pytest.raises(UsageError, match=r"^list came while the turn waits for 'nothing'$"):
        step(done.record, Received([4]), view)


def test_proceeding_where_nothing_is_due_is_refused(box: Toolbox) -> None:
    """Only the turn's driver answers results (agent path) and nothing follows the end."""
    view = _view(box)
    started = step(step(None, Begin(), view).record, Received(AIMessage(PLAN)), view)
    with pytest.raises(UsageError, match=r"^nothing is due in a turn at phase 'running'$"):
        step(started.record, Proceed(), view)
    done = step(step(started.record, Received([2]), view).record, Received([3]), view)
    with pytest.raises(UsageError, match=r"^nothing is due in a turn at phase 'done'$"):
        step(done.record, Proceed(), view)


def test_an_edit_that_holds_no_instruction_is_asked_about_again(box: Toolbox) -> None:
    view = _view(box, approve_plan=True)
    paused = step(step(None, Begin(), view).record, Received(AIMessage(PLAN)), view)
    words = "Just add one, twice."
    again = step(paused.record, Received({"type": "edit", "plan": words}), view)
    assert isinstance(again.action, AskPerson) and again.record["phase"] == "approval"
    request = again.action.request
    assert request["problems"] == [
        "the edited text holds no instruction: write a program, or reject the plan"
    ]
    assert request["rejected_edit"] == words and request["plan"] == PLAN
    assert again.messages == [] and again.record["tool_calls"] == 0


def test_query_replies_of_another_number_than_the_queries_asked_are_refused(
    box: Toolbox,
) -> None:
    view = _view(box, queries=True)
    asked = step(step(None, Begin(), view).record, Received(AIMessage(QUERY_PLAN)), view)
    assert isinstance(asked.action, AskQuery) and len(asked.action.requests) == 1
    two = (Reply(text='{"value": 3}'), Reply(text='{"value": 3}'))
    with pytest.raises(
        UsageError, match=r"^query replies came while the turn waits on no such queries$"
    ):
        step(asked.record, Received(two), view)
    with pytest.raises(
        UsageError, match=r"^query replies came while the turn waits on no such queries$"
    ):
        step(asked.record, Received(()), view)
    one = step(asked.record, Received(two[:1]), view)
    assert isinstance(one.action, RunCalls) and one.action.calls[0].args == {"x": 3}
