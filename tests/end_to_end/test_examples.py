"""The scripts in ``examples/`` run offline, as a user runs them, and print what they promise.

Each runs in a fresh process (``python examples/NAME.py``) from the repository root; their
models are stand-ins answering with hand-written plans, so no network is needed. The
PostgreSQL example gets the tests' server (``LLASSEMBLY_TEST_POSTGRES`` or a throw-away
cluster, see ``conftest.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_agent_middleware_runs_the_plan_through_the_agents_tool_node() -> None:
    out = run_example("agent_middleware.py")
    assert out.splitlines() == [
        "  get_temperature -> 19.5",
        "  get_temperature -> 7.0",
        "  get_temperature -> 31.0",
        "  notify -> null",
        "The warmest is Cairo at 31 °C.",
        "1 model call, 4 tool calls, 35 instructions; notified: ['Heat warning']",
    ]


def test_langgraph_node_streams_each_call_and_answers() -> None:
    out = run_example("langgraph_node.py")
    assert out.splitlines() == [
        "  line 14: stock_of('apples') -> 3",
        "  line 20: reorder('apples', 10) -> PO-1",
        "  line 14: stock_of('pears') -> 12",
        "  line 14: stock_of('plums') -> 0",
        "  line 20: reorder('plums', 10) -> PO-2",
        "Placed 2 orders.",
        "orders: [('apples', 10), ('plums', 10)]",
    ]


def test_approval_pauses_before_any_call_and_runs_once_approved() -> None:
    out = run_example("approval.py")
    assert out.startswith("Paused for approval (plan_approval); nothing has run: []\n")
    assert "line 11: restart_service(service=<computed>)  (in a loop, conditional)" in out
    assert out.endswith("Approved. Restarted 2 services. Restarted: ['web', 'db']\n")


def test_pay_bill_refuses_the_payee_a_fooled_reader_names_by_a_data_flow_policy() -> None:
    out = run_example("pay_bill.py")
    lines = out.splitlines()
    assert lines[:4] == [
        "1. An honest reader:",
        "  calls made: read_file, query_text, find_payee, pay",
        "  the query model got SystemMessage, HumanMessage: the bill and one question, no tools",
        "  Paid 98.70 EUR to Stadtwerke Musterstadt (DE89370400440532013000).",
    ]
    assert lines[4:6] == [
        "2. A reader the injected text fooled, under never_from('pay', 'iban', ['query_text']):",
        "  calls made: read_file, query_text, find_payee",
    ]
    assert lines[6] == (
        "  I could not finish: the data-flow policy never_from('pay', 'iban', ['query_text']) "
        "refused the call of pay: its argument 'iban' derives from the results of query_text, "
        "read_file. 3 tool calls had completed before it."
    )
    assert lines[7:] == [
        "  paid so far: [('DE89370400440532013000', 98.7)]",
        "3. The same without the policy:",
        "  calls made: read_file, query_text, find_payee, pay",
        "  Paid 5000.00 EUR to Quick Refunds Ltd (GB33BUKB20201555555555).",
    ]


def test_email_assistant_reads_the_injection_and_refuses_to_send_to_the_attacker() -> None:
    out = run_example("email_assistant.py")
    assert out.splitlines() == [
        "  line 25: send_email.to <- read_inbox (on some runs)",
        "read: True",
        "DataFlowRefused: to='billing@supp1ier.example' from ['read_inbox']; sent: []",
        "Sent the confirmation to accounts@corp.example. sent: ['accounts@corp.example']",
    ]


def test_postgres_durability_finishes_in_a_second_process_shipping_each_crate_once(
    postgres: str,
) -> None:
    out = run_example("postgres_durability.py", "--dsn", postgres)
    lines = out.splitlines()
    assert lines[0].endswith("asked 'Ship crate 3 as well?'")
    assert lines[1] == "shipped before the question: [1, 2]"
    assert lines[2].endswith("resumed; Shipping done. (4 tool calls, 1 model call)")
    assert lines[0].split(":")[0] != lines[2].split(":")[0]  # two processes
    assert lines[3] == "shipped in all: [1, 2, 3]"


def test_postgres_durability_reads_the_connection_string_from_the_environment(
    postgres: str,
) -> None:
    out = run_example("postgres_durability.py", env={"LLASSEMBLY_POSTGRES": postgres})
    assert out.splitlines()[-1] == "shipped in all: [1, 2, 3]"


def test_postgres_durability_without_a_server_says_how_to_give_one() -> None:
    env = {k: v for k, v in os.environ.items() if "POSTGRES" not in k}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "postgres_durability.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 2
    assert "--dsn" in done.stderr


@pytest.mark.parametrize(
    "name", sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
)
def test_every_example_script_is_run_by_a_test_here(name: str) -> None:
    """A new script in ``examples/`` needs a test above (or is a module the others use)."""
    tested = Path(__file__).read_text(encoding="utf-8")
    helpers = {"weather_tools.py", "ops_tools.py", "workers.py"}  # used by the CLI, the tests
    assert name in helpers or f'run_example("{name}"' in tested
