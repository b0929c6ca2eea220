"""The token-bill benchmark counts what each model request really holds.

``benchmarks/bench_tokens.py`` compares a plain ``create_agent`` tool-calling loop with one
plan for the same order; these tests check its bookkeeping (what is recorded per request, how
the counts grow) and that the figures the docs print are the benchmark's own.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
from conftest import ROOT
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage, ToolMessage

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import bench_tokens


@pytest.fixture(scope="module")
def rows() -> list[dict[str, int]]:
    return bench_tokens.measure(bench_tokens.CALLS)


def test_the_loop_makes_one_model_call_per_tool_call_and_the_plan_one(
    rows: list[dict[str, int]],
) -> None:
    assert [r["tool_calls"] for r in rows] == [5, 20, 100]
    assert [r["loop_model_calls"] for r in rows] == [6, 21, 101]
    assert [r["plan_model_calls"] for r in rows] == [1, 1, 1]


def test_the_loops_input_grows_with_the_square_of_the_calls_and_the_plans_stays_flat(
    rows: list[dict[str, int]],
) -> None:
    at5, at20, at100 = rows
    # 5x the calls from 20 to 100: more than 5x the tokens (the history is re-sent each call)
    assert at100["loop_input"] / at20["loop_input"] > 10
    assert at20["loop_input"] / at5["loop_input"] > 4
    # the plan is written once; only the digits of the target differ
    assert at100["plan_input"] - at5["plan_input"] <= 2
    assert at100["plan_output"] - at5["plan_output"] <= 2


def test_each_loop_request_carries_the_tool_schemas_and_the_whole_history() -> None:
    tools, _ = bench_tokens.unit_tools()
    model = bench_tokens.RecordingModel(replies=[*_steps(3), bench_tokens.AIMessage("done")])
    create_agent(model, tools=tools).invoke({"messages": bench_tokens._order(3)})
    assert [len(schemas) for _, schemas in model.requests] == [3, 3, 3, 3]
    assert [len(messages) for messages, _ in model.requests] == [2, 4, 6, 8]
    last, schemas = model.requests[-1]
    assert sum(isinstance(m, ToolMessage) for m in last) == 3
    with_schemas = bench_tokens.count(last, schemas)
    assert with_schemas - bench_tokens.count(last) == bench_tokens.count([], schemas) > 100


def test_the_plan_request_holds_the_planners_prompt_and_binds_no_tool() -> None:
    tools, _ = bench_tokens.unit_tools()
    model = bench_tokens.RecordingModel(replies=[bench_tokens.AIMessage(bench_tokens.plan_text(4))])
    planner = bench_tokens.ToolsPlannerMiddleware()
    create_agent(model, tools=tools, middleware=[planner]).invoke(
        {"messages": bench_tokens._order(4)}
    )
    [(messages, schemas)] = model.requests
    assert schemas == []
    system = messages[0]
    assert isinstance(system, SystemMessage)
    assert bench_tokens.SYSTEM in system.text and "## make_one_step" in system.text
    size = bench_tokens.prompt_size()
    assert len(system.text) == size["prompt_chars"]
    assert model.bill()[0] >= size["prompt_tokens"]


def test_a_plan_that_does_not_carry_out_the_order_is_not_counted() -> None:
    tools, _ = bench_tokens.unit_tools()
    wrong = bench_tokens.plan_text(4).replace("PUSH 3", "PUSH 2")  # walks one square short
    model = bench_tokens.RecordingModel(replies=[bench_tokens.AIMessage(wrong)])
    agent = create_agent(model, tools=tools, middleware=[bench_tokens.ToolsPlannerMiddleware()])
    result = agent.invoke({"messages": bench_tokens._order(4)})
    with pytest.raises(RuntimeError, match="not carried out"):
        bench_tokens._finish(model, result, [2, 0])


def test_the_command_prints_the_table_and_says_how_tokens_are_counted() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_tokens", "--calls", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.startswith("| tool calls | loop: model calls |")
    assert "count_tokens_approximately" in done.stdout
    assert "the library's fixed text" in done.stdout


def _steps(n: int) -> list[Any]:
    call = {"name": "make_one_step", "args": {"x": n - 1, "y": 0}}
    return [bench_tokens.AIMessage("", tool_calls=[{**call, "id": f"c{i}"}]) for i in range(n)]


# -- the figures the docs print are the benchmark's --------------------------------------------

RERUN = "python -m benchmarks.bench_tokens prints the tables afresh"


def test_the_readme_token_table_is_the_benchmarks(rows: list[dict[str, int]]) -> None:
    table = bench_tokens.short_table(rows)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = "\n".join(line.strip() for line in readme.splitlines())
    assert table in shown, f"the README's token table is out of date; {RERUN}:\n{table}"


def test_the_performance_page_shows_the_benchmarks_report(rows: list[dict[str, int]]) -> None:
    report = bench_tokens.report(rows, bench_tokens.prompt_size())
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert report in page, f"docs/performance.md is out of date; {RERUN}:\n{report}"


def test_the_performance_page_says_from_how_many_calls_a_plan_wins_3x_and_10x() -> None:
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    said = re.search(r"3× lower from (\d+) calls on, 10× lower from about (\d+)", page)
    assert said is not None
    rows = bench_tokens.measure(range(5, 26))
    first = {
        target: next(r["tool_calls"] for r in rows if bench_tokens.ratio(r) >= target)
        for target in (3, 10)
    }
    assert (first[3], first[10]) == (int(said[1]), int(said[2]))


# -- orders that need reading: queries against a loop -------------------------------------------


@pytest.fixture(scope="module")
def reading() -> list[dict[str, int]]:
    return bench_tokens.measure_reading(bench_tokens.READING_BILLS)


def test_the_loop_reads_in_its_history_and_the_plan_asks_one_query_per_bill(
    reading: list[dict[str, int]],
) -> None:
    assert [r["bills"] for r in reading] == [1, 3, 10]
    assert [r["loop_model_calls"] for r in reading] == [4, 8, 22]  # list, read + pay each, answer
    assert [r["plan_model_calls"] for r in reading] == [2, 4, 11]  # the plan, a query per bill
    at1, _, at10 = reading
    assert bench_tokens.ratio(at10) > 4 > 1 > bench_tokens.ratio(at1)


def test_each_query_request_holds_its_bill_and_the_question_only() -> None:
    bills = 3
    tools, paid = bench_tokens.bill_tools(bills)
    answers = [
        bench_tokens.json.dumps({"value": {"iban": iban, "amount": amount}})
        for _, iban, amount in (bench_tokens.bill_of(k) for k in range(bills))
    ]
    reader = bench_tokens.RecordingModel(replies=[bench_tokens.AIMessage(a) for a in answers])
    planner_model = bench_tokens.RecordingModel(
        replies=[bench_tokens.AIMessage(bench_tokens.READING_PLAN)]
    )
    planner = bench_tokens.ToolsPlannerMiddleware(query_model=reader)
    agent = create_agent(planner_model, tools=tools, middleware=[planner])
    agent.invoke({"messages": bench_tokens._reading_order()})
    assert paid == [bench_tokens.bill_of(k)[1:] for k in range(bills)]
    assert len(reader.requests) == bills
    for k, (messages, schemas) in enumerate(reader.requests):
        assert schemas == [] and len(messages) == 2
        asked = messages[1].text
        assert bench_tokens.bill_of(k)[0] in asked and bench_tokens.QUESTION in asked
        assert all(bench_tokens.bill_of(j)[0] not in asked for j in range(bills) if j != k)
        assert bench_tokens.READING_SYSTEM not in asked


def test_a_reading_that_pays_the_wrong_account_is_not_counted() -> None:
    _tools, paid = bench_tokens.bill_tools(1)
    paid.append(("GB33BUKB20201555555555", 5000.0))
    result = {"messages": [bench_tokens.AIMessage(bench_tokens._paid_answer(1))]}
    with pytest.raises(RuntimeError, match="not carried out"):
        bench_tokens._reading_done(result, paid, 1)


def test_the_performance_page_shows_the_reading_table(reading: list[dict[str, int]]) -> None:
    table = bench_tokens.reading_table(reading)
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert table in page, f"docs/performance.md is out of date; {RERUN}:\n{table}"


def test_the_performance_page_shows_how_the_prompt_grows_with_the_toolset() -> None:
    growth = bench_tokens.prompt_growth()
    table = bench_tokens.growth_table(growth)
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert table in page, f"docs/performance.md is out of date; {RERUN}:\n{table}"
    # each tool adds about the same: its record types are described once, in one section
    assert abs(growth["per_tool_10"] - growth["per_tool_200"]) <= 2
