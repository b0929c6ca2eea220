"""Tests for llassembly.integration.planner: the ``Planner`` shared by the middleware and
the nodes (its caches and checks) and the options it runs with. Whole turns are tested in
test_contract.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import pytest
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState

from llassembly.analysis.summary import PlanSummary
from llassembly.errors import (
    AsmSyntaxError,
    PlanRejected,
    UsageError,
)
from llassembly.integration.calls import CallContext
from llassembly.integration.nodes import TURN_KEY, TurnRun, config_for
from llassembly.integration.options import PlannerOptions
from llassembly.integration.planner import Planner
from llassembly.language.limits import MAX_PLAN_INSTRUCTIONS
from llassembly.language.program import (
    PlainAnswer,
    Program,
)


def inc(x: int) -> int:
    """Return x + 1."""
    return x + 1


def dec(x: int) -> int:
    """Return x - 1."""
    return x - 1


PLAN = "PUSH 1\nCALL inc\nPOP R1"


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_check_returns_the_program_of_a_valid_plan_and_caches_its_compilation(
    execution: Any,
) -> None:
    turn = Planner(PlannerOptions(execution=execution))
    externs = turn.externs_for([inc])
    program = turn.check(PLAN, externs)
    assert isinstance(program, Program) and len(program.instructions) == 3
    assert turn.compiled(PLAN, externs) is turn.compiled(PLAN, externs)
    if execution == "graph":
        assert turn.plan_graph(PLAN, externs) is turn.plan_graph(PLAN, externs)


def test_check_returns_a_plain_answer_for_a_reply_without_code() -> None:
    turn = Planner(PlannerOptions())
    assert isinstance(turn.check("It is sunny.", turn.externs_for([inc])), PlainAnswer)


def test_check_refuses_what_does_not_parse_verify_or_fit() -> None:
    turn = Planner(PlannerOptions())
    externs = turn.externs_for([inc])
    with pytest.raises(AsmSyntaxError):
        turn.check("```asm\nMOV R1,\n```", externs)
    with pytest.raises(PlanRejected, match="teleport"):
        turn.check("CALL teleport", externs)
    too_long = "NOP\n" * (MAX_PLAN_INSTRUCTIONS + 1)
    with pytest.raises(PlanRejected, match=f"at most {MAX_PLAN_INSTRUCTIONS} are accepted"):
        turn.check(too_long, externs)


def test_plan_policy_problems_refuse_the_plan() -> None:
    def no_inc(summary: PlanSummary, program: Program) -> Iterable[str]:
        return ["inc is not allowed"] if summary.tool("inc") is not None else []

    turn = Planner(PlannerOptions(plan_policy=(no_inc,)))
    externs = turn.externs_for([inc])
    with pytest.raises(PlanRejected, match="inc is not allowed"):
        turn.check(PLAN, externs)
    assert isinstance(turn.check("It is sunny.", externs), PlainAnswer)


def test_externs_and_prompts_are_built_once_per_tool_list_and_context() -> None:
    turn = Planner(PlannerOptions())
    tools = [inc]
    externs = turn.externs_for(tools)
    assert turn.externs_for(tools) is externs
    assert turn.externs_for([inc]) is externs  # keyed by the tools, not the list object
    assert set(turn.externs_for([inc, dec])) == {"inc", "dec"}
    prompt = turn.system_prompt(externs, "Be brief.")
    assert prompt.startswith("Be brief.") and "inc(x: int) -> int" in prompt
    assert turn.system_prompt(externs, "Be brief.") is prompt
    assert turn.system_prompt(externs, "Be kind.").startswith("Be kind.")


@pytest.mark.parametrize("execution", ["agent", "graph"])
def test_tools_with_injected_parameters_are_taken_on_every_path(execution: Any) -> None:
    """Each path gives them what the agent's tool node does (test_tool_forms.py runs them)."""

    @tool
    def peek(x: int, state: Annotated[dict[str, Any], InjectedState]) -> int:
        """Look at the state."""
        return x

    externs = Planner(PlannerOptions(execution=execution)).externs_for([peek])
    assert [p.name for p in externs["peek"].params] == ["x"]


def test_approval_is_asked_only_for_plans_that_call_a_listed_tool() -> None:
    def other(x: int) -> int:
        """Return x."""
        return x

    turn = Planner(PlannerOptions(approve_plan=("inc",)))
    externs = turn.externs_for([inc, other])
    request = turn.approval(PLAN, externs)
    assert request is not None and "inc" in str(request)
    assert turn.approval("PUSH 1\nCALL other\nPOP R1", externs) is None
    assert Planner(PlannerOptions()).approval(PLAN, externs) is None


def test_config_for_adds_the_run_and_keeps_the_callers_config() -> None:
    run = TurnRun(CallContext(Planner(PlannerOptions()), {}))
    config = config_for(run, {"configurable": {"thread_id": "t"}, "tags": ["x"]})
    assert config["configurable"] == {"thread_id": "t", TURN_KEY: run}
    assert config["tags"] == ["x"]
    assert config_for(run, None)["configurable"] == {TURN_KEY: run}


def test_a_stored_plan_that_is_no_program_is_refused_before_any_machine_is_built() -> None:
    """The turn restarts its machine from the plan text its record keeps: a record altered to
    hold words where the plan was is refused, not run."""
    turn = Planner(PlannerOptions())
    externs = turn.externs_for([inc])
    with pytest.raises(UsageError, match=r"^the stored plan is no longer a program$"):
        turn.emulator("It is sunny.", externs, None)
    with pytest.raises(UsageError, match=r"^the stored plan is no longer a program$"):
        turn.plan_graph("It is sunny.", externs)


def test_the_extern_of_a_tool_that_cannot_be_adapted_is_none_and_kept() -> None:
    """The tool hook reads a call's result through its tool's extern: a tool named like a
    register has none, and asking again does not try again."""

    def eax() -> None:
        """A tool no plan can call."""

    turn = Planner(PlannerOptions())
    assert turn.extern_of(eax) is None
    assert turn.extern_of(eax) is None
    assert turn.extern_of(inc) is turn.extern_of(inc)
    extern = turn.extern_of(inc)
    assert extern is not None and extern.name == "inc"


def test_a_cache_entry_another_thread_drops_between_finding_and_touching_it_is_still_given() -> (
    None
):
    """One planner serves every thread of a server (``agent.batch`` runs on a thread pool): an
    entry evicted by another thread right after this one found it is no ``KeyError``."""
    from llassembly.integration.planner import Lru

    class EvictedMeanwhile(Lru[str, int]):
        def get(self, key: Any, default: Any = None) -> Any:
            found = super().get(key, default)
            self.pop(key, None)  # what a thread switch here may do
            return found

    cache = EvictedMeanwhile()
    cache.cached("plan", None, lambda: 1)
    assert cache.cached("plan", None, lambda: 2) == 1
