"""The plan summary: hand-checked plans compared exactly, and random plans checked against runs.

Every expected summary below was worked out by hand from the plan text (paths, loops, what
is pushed before each CALL), not copied from the code's output.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from random_plans import EXTERNS, LIMITS, SETTINGS, compiled_or_none, programs

from llassembly import PlanSummary, parse, summarize, verify
from llassembly.analysis import summary as analysis_summary
from llassembly.cli import main
from llassembly.errors import LLAssemblyError, PlanRejected, UsageError
from llassembly.language.program import Program
from llassembly.machine.emulator import Emulator
from llassembly.machine.externs import (
    Extern,
    externs_from,
)


def list_alerts(severity: str) -> int:
    """How many open alerts of a severity."""
    return 2


def restart(service: str) -> bool:
    """Restart a service."""
    return True


def send_email(to: str, subject: str, body: str) -> None:
    """Send an email."""


def lookup(key: str) -> str:
    """Look a key up."""
    return key


OPS: dict[str, Extern] = externs_from([list_alerts, restart, send_email, lookup])


def summary_of(text: str, **budgets: int) -> PlanSummary:
    program = parse(text)
    assert isinstance(program, Program)
    verify(program, OPS)
    return summarize(program, OPS, **budgets)


def uses(summary: PlanSummary) -> dict[str, tuple[int, int | None, bool, bool]]:
    """``name -> (min_calls, max_calls, in_loop, conditional)``."""
    return {u.name: (u.min_calls, u.max_calls, u.in_loop, u.conditional) for u in summary.tools}


def args_at(summary: PlanSummary, tool: str) -> list[list[Any]]:
    """Per call site of ``tool``, each argument's value or ``"?"`` when computed."""
    use = summary.tool(tool)
    assert use is not None
    return [[a.value if a.constant else "?" for a in site.arguments] for site in use.sites]


def test_a_straight_plan_has_exact_counts_and_constant_arguments() -> None:
    summary = summary_of(
        'PUSH "critical"\nCALL list_alerts\nPOP R1\n'
        'PUSH "ops@example.com"\nPUSH "alerts"\nPUSH R1\nCALL send_email\nHLT'
    )
    assert uses(summary) == {
        "list_alerts": (1, 1, False, False),
        "send_email": (1, 1, False, False),
    }
    assert args_at(summary, "list_alerts") == [["critical"]]
    # R1 holds list_alerts' result: computed.
    assert args_at(summary, "send_email") == [["ops@example.com", "alerts", "?"]]
    assert (summary.min_tool_calls, summary.max_tool_calls) == (2, 2)
    assert summary.max_instructions == 8  # every line once, HLT included
    assert summary.within_budgets and summary.ends and summary.complete


def test_a_branch_makes_calls_conditional_and_bounds_both_ways() -> None:
    summary = summary_of(
        """
        PUSH "critical"
        CALL list_alerts
        POP R1
        CMP R1, 0
        JE quiet
        PUSH "web"
        CALL restart
        POP R2
        JMP done
    quiet:
        PUSH "nothing to do"
        CALL lookup
        POP R3
    done:
        HLT
        """
    )
    assert uses(summary) == {
        "list_alerts": (1, 1, False, False),
        "restart": (0, 1, False, True),
        "lookup": (0, 1, False, True),
    }
    assert (summary.min_tool_calls, summary.max_tool_calls) == (2, 2)
    # Longest path: 5 lines to JE, the restart branch (4 lines), HLT.
    assert summary.max_instructions == 10


def test_a_call_inside_a_loop_is_unbounded_and_in_a_loop() -> None:
    summary = summary_of(
        """
        MOV R1, 0
    again:
        PUSH "web"
        CALL restart
        POP R2
        INC R1
        CMP R1, 3
        JL again
        PUSH "ops@example.com"
        PUSH "restarted"
        PUSH "three times"
        CALL send_email
        """
    )
    assert uses(summary) == {
        "restart": (1, None, True, False),  # a do-while: at least once
        "send_email": (1, 1, False, False),
    }
    assert args_at(summary, "restart") == [["web"]]
    assert (summary.min_tool_calls, summary.max_tool_calls, summary.max_instructions) == (
        2,
        None,
        None,
    )
    assert not summary.within_budgets
    restart_site = summary.tool("restart")
    assert restart_site is not None and restart_site.sites[0].in_loop


def test_a_subroutine_called_twice_counts_twice_and_joins_its_arguments() -> None:
    summary = summary_of(
        """
        PUSH "db"
        CALL fix
        PUSH "web"
        CALL fix
        HLT
    fix:
        CALL restart
        POP R1
        PUSH "ops@example.com"
        PUSH "fixed"
        PUSH "done"
        CALL send_email
        RET
        """
    )
    assert uses(summary) == {
        "restart": (2, 2, False, False),
        "send_email": (2, 2, False, False),
    }
    # One CALL restart line, reached with "db" and with "web": computed.
    assert args_at(summary, "restart") == [["?"]]
    # Every path pushes the same three constants before CALL send_email.
    assert args_at(summary, "send_email") == [["ops@example.com", "fixed", "done"]]
    send = summary.tool("send_email")
    assert send is not None and [a.value for a in send.arguments] == [
        "ops@example.com",
        "fixed",
        "done",
    ]
    # 2 + 7 (fix) + 2 + 7 + HLT
    assert summary.max_instructions == 19


def test_the_same_constant_on_both_branches_stays_constant_and_different_ones_do_not() -> None:
    summary = summary_of(
        """
        PUSH "critical"
        CALL list_alerts
        POP R1
        CMP R1, 0
        JE other
        MOV R2, "web"
        MOV R3, "ops@example.com"
        JMP go
    other:
        MOV R2, "db"
        MOV R3, "ops@example.com"
    go:
        PUSH R2
        CALL restart
        POP R0
        PUSH R3
        PUSH R2
        PUSH 7
        CALL send_email
        """
    )
    assert args_at(summary, "restart") == [["?"]]
    assert args_at(summary, "send_email") == [["ops@example.com", "?", 7]]


def test_data_labels_and_r0_are_constants_and_tool_results_are_not() -> None:
    summary = summary_of(
        """
    section .data
        boss db "boss@example.com", 0
    section .text
        PUSH "k"
        CALL lookup
        PUSH boss
        PUSH R0
        CALL send_email
        """
    )
    # The lookup result sits under boss and 0: subject is computed, to and body are not.
    assert args_at(summary, "send_email") == [["?", "boss@example.com", 0]]


def test_budgets_are_compared_and_a_plan_that_never_ends_says_so() -> None:
    short = summary_of('PUSH "x"\nCALL lookup\nPUSH "y"\nCALL lookup', max_instructions_to_exec=3)
    assert short.max_instructions == 4 and not short.within_budgets
    # No path ends this plan (the verifier refuses it): the summary still says what it would do.
    plan = parse('again:\nPUSH "x"\nCALL lookup\nPOP R1\nJMP again')
    with pytest.raises(PlanRejected, match="can never end"):
        verify(plan, OPS)
    forever = summarize(plan, OPS)
    assert not forever.ends
    assert uses(forever) == {"lookup": (0, None, True, False)}
    assert "only a budget stops it" in forever.render()


def test_the_summary_is_json_serialisable_and_renders_for_a_person() -> None:
    summary = summary_of('PUSH "web"\nCALL restart\nPOP R1')
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["tools"][0]["name"] == "restart"
    assert data["tools"][0]["sites"][0]["arguments"] == [
        {
            "name": "service",
            "constant": True,
            "value": "web",
            "sources": [],
            "certain": [],
            "answers": [],
            "optional": False,
        }
    ]
    assert data["budgets"] == {"max_instructions_to_exec": 1000, "max_tool_calls": 100}
    text = summary.render()
    assert 'line 2: restart(service="web")' in text
    assert "Instructions: at most 3 (budget 1000)" in text


def test_cli_check_summary_and_json(tmp_path: Any, capsys: Any) -> None:
    plan = tmp_path / "plan.asm"
    plan.write_text('PUSH "web"\nCALL restart\nPOP R1\n')
    assert main(["check", str(plan), "--tools", "test_summary:CLI_TOOLS", "--summary"]) == 0
    printed = capsys.readouterr().out
    assert "restart  1 call" in printed and 'restart(service="web")' in printed
    code = main(["check", str(plan), "--tools", "test_summary:CLI_TOOLS", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["max_tool_calls"] == 1


CLI_TOOLS = [list_alerts, restart, send_email, lookup]


# -- random programs: the summary bounds every real run --------------------------------------


def _run_counting(emu: Emulator) -> tuple[Counter[str], bool, list[tuple[int, list[Any]]]]:
    """Run to the end or the first error; the calls per tool, whether it finished, and the
    raw values each call took off the stack."""
    made: Counter[str] = Counter()
    taken: list[tuple[int, list[Any]]] = []
    try:
        while True:
            call = emu.advance()
            if call is None:
                return made, True, taken
            made[call.tool] += 1
            pending = emu.state.pending
            assert pending is not None
            taken.append((call.index, list(pending[1])))
            emu.complete(EXTERNS[call.tool].call(call.args))
    except LLAssemblyError:
        return made, False, taken
    except Exception:  # the `fail` tool raises: the run stops there
        return made, False, taken


@pytest.mark.slow
@SETTINGS
@given(programs())
def test_every_run_stays_within_the_summary(source: str) -> None:
    compiled = compiled_or_none(source)
    if compiled is None:
        return
    summary = summarize(compiled.program, EXTERNS, **{k: LIMITS[k] for k in ("max_tool_calls",)})
    emu = Emulator(compiled, **LIMITS)
    made, finished, taken = _run_counting(emu)
    for name, count in made.items():
        use = summary.tool(name)
        assert use is not None, f"{name} was called but the summary lists no call"
        assert use.max_calls is None or count <= use.max_calls
    if finished:
        for use in summary.tools:
            assert made[use.name] >= use.min_calls
        assert sum(made.values()) >= summary.min_tool_calls
        if summary.max_instructions is not None:
            assert emu.state.executed <= summary.max_instructions
    if summary.max_tool_calls is not None:
        assert sum(made.values()) <= summary.max_tool_calls
    sites = {
        site.line: site for use in summary.tools for site in use.sites
    }  # one CALL per line in these programs
    for index, values in taken:
        site = sites[compiled.program.instructions[index].line]
        for argument in site.arguments[len(values) :]:  # CALL tool, N: the rest left out
            assert argument.constant and argument.value is None
        for argument, value in zip(site.arguments, values, strict=False):
            if argument.constant:
                assert type(argument.value) is type(value) and argument.value == value


def test_data_the_plan_writes_is_no_constant_argument() -> None:
    """A data label the plan writes (MOV limit, ECX) holds what was written, not its initial
    value: an argument read from it is computed."""
    from llassembly.analysis.summary import summarize
    from llassembly.language.parser import parse

    def ping(x: int) -> int:
        """Answer x."""
        return x

    program = parse(
        "MOV ECX, 3\nMOV limit, ECX\nPUSH limit\nCALL ping\nHLT\nsection .data\nlimit dd 10"
    )
    summary = summarize(program, {"ping": __import__("llassembly").externs_from([ping])["ping"]})
    (site,) = summary.tool("ping").sites
    assert [a.constant for a in site.arguments] == [False]


# -- the summary is what runs: the two cases that once disagreed ----------------------------------


def our_domain_only(summary: PlanSummary, program: Program) -> list[str]:
    """The policy of ``llassembly.policies``' docstring: send_email to @ours.com only."""
    use = summary.tool("send_email")
    if use is None:
        return []
    return [
        f"line {site.line}: send_email may only write to @ours.com addresses"
        for site in use.sites
        if not (site.arguments[0].constant and str(site.arguments[0].value).endswith("@ours.com"))
    ]


def calls_made(program: Program, tools: dict[str, Extern], results: dict[str, Any]) -> list[Any]:
    made: list[Any] = []

    def call(request: Any) -> Any:
        made.append((request.tool, request.args))
        return results.get(request.tool)

    Emulator(program, tools).run(call)
    return made


def test_a_result_read_in_eax_is_not_on_the_summarys_stack() -> None:
    """Registers saved around a call whose result is read in EAX: the result is not on the
    stack (the EAX convention), so the POPs take the saved values. The summary once kept the
    result on its stack, took the wrong saved value for send_email's address, and a policy
    allowing only our domain passed a plan that emails another. (Written with a JMP before
    the POPs: a POP straight after the EAX read is refused by the verifier.)"""
    plan = """
        PUSH "x@evil.com"
        PUSH "a@ours.com"
        PUSH "critical"
        CALL list_alerts
        MOV R1, EAX
        JMP go
    go:
        POP R3
        POP R2
        PUSH R2
        PUSH "alerts"
        PUSH R1
        CALL send_email
        HLT
    """
    summary = summary_of(plan)
    assert args_at(summary, "send_email") == [["x@evil.com", "alerts", "?"]]
    program = parse(plan)
    assert isinstance(program, Program)
    assert our_domain_only(summary, program) == [
        "line 14: send_email may only write to @ours.com addresses"
    ]
    made = calls_made(program, OPS, {"list_alerts": 2})
    assert made[1] == ("send_email", {"to": "x@evil.com", "subject": "alerts", "body": "2"})


def transfer(amount: int) -> None:
    """Move an amount."""


def test_loop_counts_ecx_down_in_the_summary_too() -> None:
    """LOOP writes ECX: after ``MOV ECX, 1001`` and one LOOP, ECX is 1000. The summary once
    showed transfer(1001) while the run called transfer(1000)."""
    tools = externs_from([transfer])
    program = parse("MOV ECX, 1001\nLOOP next\nnext:\nPUSH ECX\nCALL transfer\nHLT")
    assert isinstance(program, Program)
    verify(program, tools)
    use = summarize(program, tools).tool("transfer")
    assert use is not None and use.arguments[0].shown() == "amount=1000"
    assert calls_made(program, tools, {}) == [("transfer", {"amount": 1000})]


def test_a_value_computed_from_ecx_after_a_loop_is_what_the_run_computes() -> None:
    """A loop that ends with ECX at 0, then arithmetic on it: the summary runs the same
    instructions the machine runs, so the constant it shows is the one passed; when the
    rounds are not followed one by one, the value is computed, never a wrong constant."""
    tools = externs_from([transfer])
    after = "MOV R1, ECX\nADD R1, 1001\nPUSH R1\nCALL transfer"
    once = parse(f"MOV ECX, 1\ntop:\nNOP\nLOOP top\n{after}")
    thrice = parse(f"MOV ECX, 3\ntop:\nNOP\nLOOP top\n{after}")
    assert isinstance(once, Program) and isinstance(thrice, Program)
    assert args_at(summarize(once, tools), "transfer") == [[1001]]
    assert args_at(summarize(thrice, tools), "transfer") == [["?"]]
    assert (
        calls_made(once, tools, {})
        == calls_made(thrice, tools, {})
        == [("transfer", {"amount": 1001})]
    )


def test_a_value_that_differs_between_rounds_of_a_loop_is_computed() -> None:
    tools = externs_from([transfer])
    program = parse("MOV ECX, 3\ntop:\nPUSH ECX\nCALL transfer\nLOOP top\nHLT")
    assert isinstance(program, Program)
    use = summarize(program, tools).tool("transfer")
    assert use is not None and use.arguments[0].shown() == "amount=<computed>"
    assert [args["amount"] for _, args in calls_made(program, tools, {})] == [3, 2, 1]


def test_arithmetic_on_constants_is_a_constant_of_the_machines_type() -> None:
    """Each instruction whose inputs are known is run by the machine's own step: integer and
    float arithmetic, conversions, shifts, memory read through a computed address."""
    tools = externs_from([transfer, send_email])
    plan = """
    section .rodata
        table dd 10, 20, 30
    section .text
        MOV R1, 7
        IMUL R1, 6
        SHL R1, 1
        PUSH R1
        CALL transfer
        LEA ESI, [table]
        MOV ESI, [ESI + 8]
        MOV R2, ESI
        CVTSI2SD xmm0, R2
        DIVSD xmm0, 4
        PUSH "a@ours.com"
        PUSH xmm0
        PUSH 1
        CALL send_email
    """
    summary = summarize(parse(plan), tools)  # type: ignore[arg-type]
    assert args_at(summary, "transfer") == [[84]]
    assert args_at(summary, "send_email") == [["a@ours.com", 7.5, 1]]
    assert type(args_at(summary, "send_email")[0][1]) is float


def test_a_branch_the_constants_decide_goes_one_way_for_the_arguments() -> None:
    """``CMP`` of two known values decides the jump: the arguments come from that path only
    (the counts still cover both ways, as paths through the code)."""
    tools = externs_from([transfer])
    plan = "MOV R1, 5\nCMP R1, 5\nJE same\nMOV R1, 9\nsame:\nPUSH R1\nCALL transfer\nHLT"
    summary = summarize(parse(plan), tools)  # type: ignore[arg-type]
    assert args_at(summary, "transfer") == [[5]]


def test_memory_the_plan_writes_and_tool_results_are_never_constants() -> None:
    tools = externs_from([transfer, list_alerts])
    plan = """
    section .data
        n dd 4
    section .text
        MOV R1, [n]
        PUSH R1
        CALL transfer
        MOV [n], 5
        PUSH "x"
        CALL list_alerts
        MOV R2, EAX
        PUSH R2
        CALL transfer
    """
    summary = summarize(parse(plan), tools)  # type: ignore[arg-type]
    assert args_at(summary, "transfer") == [["?"], ["?"]]


def test_without_the_machine_only_copies_are_followed() -> None:
    from llassembly.analysis.constants import COPIES_ONLY, default_semantics
    from llassembly.machine.steps import StepSemantics

    assert isinstance(default_semantics(), StepSemantics)  # installed by the machine
    tools = externs_from([transfer])
    program = parse(
        "MOV R1, 2\nMOV R2, R1\nADD R1, 3\nPUSH R2\nCALL transfer\nPUSH R1\nCALL transfer"
    )
    assert isinstance(program, Program)
    assert args_at(summarize(program, tools, semantics=COPIES_ONLY), "transfer") == [[2], ["?"]]
    assert args_at(summarize(program, tools), "transfer") == [[2], [5]]


def test_the_summary_of_a_31_kb_plan_does_not_blow_up() -> None:
    """The paths are counted in passes linear in their states (the conditional check once,
    not once per call site); the constants within a bounded number of visits. (A guard against
    work quadratic in the call sites, 900 here; the bound is far above what a linear pass
    takes, so a loaded machine does not fail it: speed targets are the benchmarks'.)"""
    import time

    plan = "".join(f"CALL sub\nPUSH {i}\nCALL transfer\nCALL get\nPOP R1\n" for i in range(900))
    plan += "HLT\nsub:\nNOP\nRET\n"
    assert len(plan) > 31_000

    def get() -> int:
        """A reading."""
        return 1

    tools = externs_from([transfer, get])
    program = parse(plan)
    assert isinstance(program, Program)
    start = time.perf_counter()
    summary = summarize(program, tools)
    took = time.perf_counter() - start
    assert summary.complete and summary.tool("transfer").max_calls == 900  # type: ignore[union-attr]
    assert args_at(summary, "transfer")[899] == [899]
    assert took < 30.0, took


def test_a_call_every_path_makes_through_a_subroutine_is_not_conditional() -> None:
    """Both branches call the subroutine that calls the tool: on every path the line runs
    (in a different calling context each way), so it is not conditional; a line only one
    branch reaches is."""
    tools = externs_from([transfer])
    plan = """
        MOV R1, 1
        CMP R1, 0
        JE other
        CALL pay
        JMP done
    other:
        CALL pay
        PUSH 2
        CALL transfer
    done:
        HLT
    pay:
        PUSH 1
        CALL transfer
        RET
    """
    summary = summarize(parse(plan), tools)  # type: ignore[arg-type]
    use = summary.tool("transfer")
    assert use is not None
    assert [(s.line, s.conditional) for s in use.sites] == [(10, True), (15, False)]
    assert (use.min_calls, use.max_calls, use.conditional) == (1, 2, False)


def test_a_parameter_given_as_text_is_named_as_the_verifier_names_it() -> None:
    """A ``ToolShape`` may give its parameters as their names (``params=("city",)``): the
    summary names them so, as the verifier's messages do (``program.param_names``), not
    ``arg1``."""

    @dataclass(frozen=True)
    class Shape:
        name: str
        params: tuple[str, ...]
        n_results: int = 1

    program = parse('PUSH "Oslo"\nPUSH 3\nCALL forecast\nPOP R1')
    assert isinstance(program, Program)
    found = analysis_summary.summarize(program, [Shape("forecast", ("city", "days"))])
    (site,) = found.tools[0].sites
    assert [(a.name, a.value) for a in site.arguments] == [("city", "Oslo"), ("days", 3)]


def test_a_plan_whose_entry_is_past_its_last_instruction_ends_at_once() -> None:
    """``global main`` with ``main:`` after the last instruction verifies, and the run ends
    having done nothing; the summary said no path ends (``only a budget stops it``)."""
    program = parse("global main\nPUSH 1\nCALL lookup\nmain:")
    assert isinstance(program, Program)
    verify(program, OPS)
    result = Emulator(program, OPS).run()
    assert (result.instructions_executed, result.calls) == (0, [])
    summary = summarize(program, OPS)
    assert summary.ends and summary.complete and summary.within_budgets
    assert (summary.max_instructions, summary.min_tool_calls, summary.max_tool_calls) == (0, 0, 0)
    assert summary.tools == ()
    assert summary.render().splitlines() == [
        "This plan calls no tool.",
        "Tool calls in all: 0 calls (budget 100)",
        "Instructions: at most 0 (budget 1000)",
    ]


def test_a_plan_that_calls_no_tool_has_no_call_every_path_makes() -> None:
    summary = summary_of("MOV R1, 1\nHLT")
    assert (summary.tools, summary.ends, summary.max_instructions) == ((), True, 2)
    assert summary.render().splitlines() == [
        "This plan calls no tool.",
        "Tool calls in all: 0 calls (budget 100)",
        "Instructions: at most 2 (budget 1000)",
    ]


@pytest.mark.parametrize("jump", ["JMP nowhere", "CALL nowhere"])
def test_a_plan_with_a_jump_to_no_label_is_summarised_as_not_followed(jump: str) -> None:
    """The verifier refuses it; the summary still returns, its maxima unbounded."""
    program = parse(f'PUSH "x"\nCALL lookup\n{jump}\nHLT')
    assert isinstance(program, Program)
    with pytest.raises(PlanRejected):
        verify(program, OPS)
    summary = summarize(program, OPS)
    assert (summary.complete, summary.ends, summary.flows_known) == (False, False, False)
    assert (summary.min_tool_calls, summary.max_tool_calls, summary.max_instructions) == (
        0,
        None,
        None,
    )
    assert "The analysis could not follow every path; maxima are unbounded." in summary.render()


@pytest.mark.parametrize(("divisor", "at_call"), [(1, ("x",)), (0, ())])
def test_no_constant_goes_on_past_an_instruction_that_fails_on_every_run(
    divisor: int, at_call: tuple[str, ...]
) -> None:
    """``DIV`` by a known 0 fails on every run that gets there: no state after it is reached
    with facts (its stack is ``()``), where with 1 the pushed constant reaches the CALL."""
    from llassembly.analysis.cfg import control_flow, layout_of
    from llassembly.analysis.constants import FAILS, UNKNOWN, constants
    from llassembly.analysis.paths import paths_of
    from llassembly.analysis.toolset import tool_shapes

    assert (repr(UNKNOWN), repr(FAILS)) == ("UNKNOWN", "FAILS")
    program = parse(f'MOV R1, {divisor}\nMOV R2, 5\nDIV R2, R1\nPUSH "x"\nCALL lookup\nHLT')
    assert isinstance(program, Program)
    by_name = tool_shapes(OPS)
    paths = paths_of(control_flow(program, by_name))
    stacks = constants(paths, layout_of(program, by_name))
    assert stacks is not None
    assert [stacks(number) for number, (pc, _) in enumerate(paths.states) if pc == 4] == [at_call]
    assert args_at(summarize(program, OPS), "lookup") == [["x" if divisor else "?"]]


def test_the_rendering_says_why_a_plan_that_ends_may_not_fit_its_budgets() -> None:
    """An unbounded loop, then a bounded plan longer than its budget: one line each, after
    the counts, and neither for a plan within its budgets."""
    looping = summary_of('again:\nPUSH "web"\nCALL restart\nPOP R1\nCMP R1, 0\nJNE again\nHLT')
    assert looping.ends and looping.max_tool_calls is None
    assert looping.render().splitlines()[-1] == (
        "A loop has no bound known before the run: the budgets stop it."
    )
    long = summary_of('PUSH "x"\nCALL lookup\nPUSH "y"\nCALL lookup', max_instructions_to_exec=3)
    assert long.ends and long.max_instructions == 4 and not long.within_budgets
    assert long.render().splitlines()[-2:] == [
        "Instructions: at most 4 (budget 3)",
        "Some paths can go over a budget: the run stops there.",
    ]
    fits = summary_of('PUSH "x"\nCALL lookup\nPUSH "y"\nCALL lookup')
    assert fits.render().splitlines()[-1] == "Instructions: at most 4 (budget 1000)"


@pytest.mark.parametrize(("registers", "known"), [(2, True), (100, False)])
def test_past_its_work_bound_the_summary_knows_no_constant_and_no_flow(
    registers: int, known: bool
) -> None:
    """The value analyses take at most ``MAX_VALUE_WORK`` register-visits: 11,000 states with
    100 registers held go past it (the constants and the data flows give up: every argument is
    computed, the flows not worked out); with 2 registers the same paths are followed."""
    from llassembly.analysis.cfg import control_flow, layout_of
    from llassembly.analysis.constants import constants
    from llassembly.analysis.paths import paths_of
    from llassembly.analysis.toolset import tool_shapes

    tools = externs_from([transfer])
    plan = "".join(f"MOV R{i}, {i}\n" for i in range(1, registers + 1))
    plan += "".join(f"CALL sub\nPUSH {i}\nCALL transfer\n" for i in range(700))
    plan += "HLT\nsub:\n" + "NOP\n" * 12 + "RET\n"
    program = parse(plan)
    assert isinstance(program, Program)
    by_name = tool_shapes(tools)
    paths = paths_of(control_flow(program, by_name))
    assert paths.complete and len(paths.states) > 11_000
    assert (constants(paths, layout_of(program, by_name)) is not None) is known
    summary = summarize(program, tools)
    assert summary.complete and summary.flows_known is known
    assert args_at(summary, "transfer")[699] == ([699] if known else ["?"])
    assert ("Data flows: not worked out" in summary.render()) is not known


@pytest.mark.parametrize(("entries", "claimed"), [(5, True), (25, False)])
def test_past_max_steps_no_call_is_claimed_on_every_path(entries: int, claimed: bool) -> None:
    """``CALL t1`` runs on every path. Each trampoline at the end of the plan brings the body
    one call fewer that every path made, so the body's 4,800 states are visited again once
    per trampoline: 5 stay within ``MAX_STEPS`` visits and the call is claimed; 25 go past
    it, and the summary claims no call (the line is shown conditional)."""

    @dataclass(frozen=True)
    class Tool:
        name: str
        params: tuple[str, ...] = ()
        n_results: int = 0

    tools = [Tool(f"t{i}") for i in range(1, entries + 1)]
    plan = "".join(f"CALL t{i}\nCMP R1, {i}\nJE e{i}\n" for i in range(1, entries + 1)) + "HLT\n"
    plan += "body:\n" + "CALL sub\n" * 400 + "HLT\nsub:\n" + "NOP\n" * 10 + "RET\n"
    plan += "".join(f"e{i}:\nJMP body\n" for i in range(entries, 0, -1))
    program = parse(plan)
    assert isinstance(program, Program)
    summary = analysis_summary.summarize(program, tools)
    assert summary.complete and summary.ends
    first = summary.tool("t1")
    assert first is not None
    assert (first.min_calls, first.max_calls, first.conditional) == (1, 1, False)
    assert first.sites[0].conditional is not claimed


@pytest.mark.parametrize(
    "budgets",
    [
        {"max_instructions_to_exec": -5},
        {"max_tool_calls": 0},
        {"max_tool_calls": True},
        {"max_instructions_to_exec": 2.5},
    ],
)
def test_summarize_refuses_the_budgets_the_emulator_refuses(budgets: dict[str, Any]) -> None:
    """It used to summarize against a budget of -5 instructions; the public summarize and
    the analysis' own refuse what Emulator refuses, with its words."""
    program = parse("NOP")
    with pytest.raises(UsageError) as refused:
        Emulator(program, [], **budgets)
    for summarize_it in (summarize, analysis_summary.summarize):
        with pytest.raises(UsageError) as also:
            summarize_it(program, [], **budgets)
        assert str(also.value) == str(refused.value)


def test_the_summary_shows_invisible_characters_of_a_constant_escaped() -> None:
    """A person reads the summary to approve the plan: a right-to-left override or a
    zero-width character in a constant would show them other text than the tool is sent
    (``"a\\u202eelpmaxe.live@"`` shows as an address that is not ``a@live.example``), so
    characters that change how text is shown, not what it says, are written escaped."""
    plan = 'PUSH "a\u202eelpmaxe.live@"\nPUSH "hi\u200b\u2028there"\nPUSH "x"\nCALL send_email'
    text = summary_of(plan).render()
    assert '"a\\u202eelpmaxe.live@"' in text
    assert '"hi\\u200b\\u2028there"' in text
    assert not any(c in text for c in "\u202e\u200b\u2028")
    hidden = "\ufe0f\U000e0100\u034f\u3164\x9b\x85"  # shown as nothing, or as a line break
    text = summary_of(
        f'PUSH "ceo@example.com{hidden}"\nPUSH "s"\nPUSH "b"\nCALL send_email'
    ).render()
    assert "\\ufe0f\\U000e0100\\u034f\\u3164\\u009b\\u0085" in text
    assert not any(c in text for c in hidden) and len(text.splitlines()) == 5


def test_none_for_an_argument_with_no_default_is_shown_as_none_given() -> None:
    """``PUSH NONE`` leaves out an argument the tool has a default for; one it has none for
    gets ``None`` (a phone erased, say): the summary a person approves says which."""

    def set_phone(contact_id: int, phone: str | None, note: str | None = None) -> None:
        """Set a contact's phone."""

    program = parse("PUSH 8\nPUSH NONE\nPUSH NONE\nCALL set_phone")
    assert isinstance(program, Program)
    text = summarize(program, externs_from([set_phone])).render()
    assert "phone=NONE (None: no value)" in text
    assert "note=NONE (left out: the tool's default)" in text
