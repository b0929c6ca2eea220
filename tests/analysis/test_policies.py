"""Where plan-policy problems point: a string at no line, a refused call at its ``CALL``."""

from __future__ import annotations

from llassembly import externs_from, max_calls, never_from, not_in_loop, parse, summarize
from llassembly.analysis.policies import check_policies
from llassembly.errors import Diagnostic
from llassembly.language.program import Program


def restart_service(name: str) -> str:
    """Restart a service."""
    return name


def read_name() -> str:
    """Read a name."""
    return "web"


TOOLS = externs_from([restart_service, read_name])

LOOP = """\
MOV R1, 0
again:  PUSH "web"
        CALL restart_service
POP R2
INC R1
CMP R1, 3
JL again
CALL read_name
POP R3
again2: PUSH R3
    CALL restart_service
POP R4
"""


def problems(*policies: object) -> tuple[Diagnostic, ...]:
    plan = parse(LOOP)
    assert isinstance(plan, Program)
    return check_policies(policies, summarize(plan, TOOLS), plan)  # type: ignore[arg-type]


def test_a_policys_string_points_at_no_line() -> None:
    """It used to be placed at the plan's first instruction (line 1), beside the line the
    string itself names."""
    (found,) = problems(lambda summary, program: ["line 11: restart_service only once"])
    assert found == Diagnostic(0, 0, "plan policy: line 11: restart_service only once")
    assert found.render() == "plan policy: line 11: restart_service only once"  # no "line 0"


def test_a_refused_call_is_pointed_at_its_call_not_at_column_1() -> None:
    """The caret used to sit under the label (``again:``) or the indentation."""
    in_loop, too_many = problems(not_in_loop("restart_service"), max_calls({"restart_service": 1}))
    assert (in_loop.line, in_loop.column, in_loop.source) == (3, 9, "        CALL restart_service")
    assert in_loop.render().splitlines()[1:] == [
        "            CALL restart_service",
        "            ^",
    ]
    assert [(too_many.line, too_many.column)] == [(3, 9)]
    (from_read,) = problems(never_from("restart_service", "name", ["read_name"]))
    assert (from_read.line, from_read.column, from_read.source) == (
        11,
        5,
        "    CALL restart_service",
    )
