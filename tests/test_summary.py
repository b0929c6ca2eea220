"""The plan summary: hand-checked plans compared exactly, and random plans checked against runs.

Every expected summary below was worked out by hand from the plan text (paths, loops, what
is pushed before each CALL), not copied from the code's output.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given
from test_emulator_fuzz import _SETTINGS, EXTERNS, LIMITS, _compiled, programs

from llassembly import PlanSummary, parse, summarize, verify
from llassembly.cli import main
from llassembly.errors import LLAssemblyError
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
    forever = summary_of('again:\nPUSH "x"\nCALL lookup\nPOP R1\nJMP again')
    assert not forever.ends
    assert uses(forever) == {"lookup": (0, None, True, False)}
    assert "only a budget stops it" in forever.render()


def test_the_summary_is_json_serialisable_and_renders_for_a_person() -> None:
    summary = summary_of('PUSH "web"\nCALL restart\nPOP R1')
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["tools"][0]["name"] == "restart"
    assert data["tools"][0]["sites"][0]["arguments"] == [
        {"name": "service", "constant": True, "value": "web"}
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


@_SETTINGS
@given(programs())
def test_every_run_stays_within_the_summary(source: str) -> None:
    compiled = _compiled(source)
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
        for argument, value in zip(site.arguments, values, strict=True):
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
