"""The NPC demo: runs in-process without a model server, one model call per unit, and the same
plans run through ``create_agent`` + ``ToolsPlannerMiddleware`` leave the same world.

The model here is the demo's bundled replay model: its replies are the hand-written plan files
in ``llassembly_demo/plans/`` (each says so in its header); none is a recording of a model.
"""

from __future__ import annotations

import asyncio
import io
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from llassembly.errors import UsageError
from llassembly.integration.graph import Granularity
from llassembly_demo.agents import TurnGate, run_with_agents
from llassembly_demo.cli import main
from llassembly_demo.picture import CELL, encode_png, png_size
from llassembly_demo.replay import ReplayChatModel, bundled_plans
from llassembly_demo.run import Game, bundled_scenario, new_game
from llassembly_demo.world import World

# Where the bundled orders leave the world (pinned: a change in the rules or plans shows here).
FINAL_UNITS = {1: (7, 7, True), 2: (4, 4, False), 3: (10, 1, False)}


def event_log(world: World) -> list[tuple[object, ...]]:
    return [(e.unit, e.action, e.args, e.result) for e in world.log]


@pytest.fixture(scope="module")
def played() -> tuple[Game, ReplayChatModel]:
    model = ReplayChatModel()
    game = new_game(model)
    game.play()
    return game, model


def test_demo_plays_to_the_expected_world(played: tuple[Game, ReplayChatModel]) -> None:
    game, _ = played
    snapshot = game.world.snapshot()
    assert snapshot["units"] == FINAL_UNITS
    assert snapshot["enemies"] == {}  # all three killed
    assert snapshot["swords"] == [(8, 3)]  # unit 2 dropped the ground sword where it finished
    assert [r.status for r in game.runs] == ["finished"] * 3


def test_each_unit_used_exactly_one_model_call(played: tuple[Game, ReplayChatModel]) -> None:
    game, model = played
    assert [r.model_calls for r in game.runs] == [1, 1, 1]
    assert model.requests == [p.order for p in bundled_plans()]
    for run in game.runs:
        assert run.react_model_calls == len(run.calls) + 1 > 30


def test_units_act_one_tool_call_per_turn_interleaved(
    played: tuple[Game, ReplayChatModel],
) -> None:
    game, _ = played
    for run in game.runs:
        assert [c.turn for c in run.calls] == list(range(1, len(run.calls) + 1))
    assert game.turns == max(len(r.calls) for r in game.runs)
    units_in_order = [e.unit for e in game.world.log[:6]]
    assert units_in_order == [1, 2, 3, 1, 2, 3]


def test_units_meet_in_the_world(played: tuple[Game, ReplayChatModel]) -> None:
    """Unit 2 goes for enemy 102 first, but unit 1 kills it on its way; units block each other."""
    game, _ = played
    kills = {e.args[0]: e.unit for e in game.world.log if e.action == "attack" and e.result == 0}
    assert kills == {102: 1, 103: 2, 101: 2}
    texts = [e.text for e in game.world.log]
    assert any(t.startswith("blocked by unit") for t in texts)
    assert any("out of reach" in t for t in texts)


@pytest.mark.parametrize("granularity", ["block", "instruction"])
def test_agents_with_the_middleware_leave_the_same_world(
    played: tuple[Game, ReplayChatModel], granularity: Granularity
) -> None:
    game, _ = played
    world, orders = bundled_scenario()
    model = ReplayChatModel()
    states = asyncio.run(run_with_agents(model, world, orders, granularity=granularity))
    assert world.snapshot() == game.world.snapshot()
    assert event_log(world) == event_log(game.world)
    assert len(model.requests) == 3
    for state, run in zip(states, game.runs, strict=True):
        meta = state["messages"][-1].response_metadata["llassembly"]
        assert meta["status"] == "finished"
        assert meta["model_calls"] == 1
        assert meta["granularity"] == granularity
        assert meta["tool_calls"] == len(run.calls)


async def test_turn_gate_passes_the_turn_in_unit_order_and_skips_units_that_left() -> None:
    gate = TurnGate([3, 1, 2])
    seen: list[int] = []

    async def unit(uid: int, calls: int) -> None:
        try:
            for _ in range(calls):
                await gate.acquire(uid)
                seen.append(uid)
                await gate.release(uid)
        finally:
            await gate.leave(uid)

    await asyncio.wait_for(asyncio.gather(unit(2, 3), unit(1, 1), unit(3, 2)), timeout=5)
    assert seen == [1, 2, 3, 2, 3, 2]


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_cli_demo_prints_frames_and_the_report() -> None:
    code, text = run_cli("--no-animation")
    assert code == 0
    assert "\x1b[" not in text  # not a TTY: plain lines, no redraw
    assert text.count("\nTurn ") > 50
    assert "bundled replay model (hand-written plans" in text
    for order in (p.order for p in bundled_plans()):
        assert f"order:    {order}" in text
    assert text.count("from 1 model call(s)") == 3
    assert "would need 39 for the same actions" in text  # unit 1: 38 tool calls
    assert "Total: 3 model calls for 3 units; one model call per tool call would take 162." in text


def test_cli_png_is_a_valid_picture_of_the_map(tmp_path: Path) -> None:
    path = tmp_path / "demo.png"
    code, _ = run_cli("--quiet", "--png", str(path))
    assert code == 0
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = png_size(data)
    assert (width, height) == (12 * CELL, 10 * CELL)
    length = struct.unpack(">I", data[33:37])[0]
    assert data[37:41] == b"IDAT"
    raw = zlib.decompress(data[41 : 41 + length])
    assert len(raw) == height * (1 + width * 3)
    assert data.endswith(b"IEND\xaeB`\x82")


def test_encode_png_checks_its_input() -> None:
    assert png_size(encode_png(2, 1, bytes(6))) == (2, 1)
    with pytest.raises(ValueError, match="expected 6 bytes"):
        encode_png(2, 1, bytes(5))


def test_cli_mermaid_writes_one_graph_per_unit(tmp_path: Path) -> None:
    path = tmp_path / "plans.md"
    code, _ = run_cli("--quiet", "--mermaid", str(path))
    assert code == 0
    text = path.read_text(encoding="utf-8")
    assert text.count("```mermaid") == 3
    assert "graph TD" in text
    assert "CALL make_one_step" in text


def test_cli_order_without_a_live_model_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _ = run_cli("--order", "Go to 3,3")
    assert code == 3
    assert "--order needs a live model" in capsys.readouterr().err


def test_replay_model_refuses_an_order_it_has_no_plan_for() -> None:
    from langchain_core.messages import HumanMessage

    with pytest.raises(UsageError, match="only replays the bundled hand-written plans"):
        ReplayChatModel().invoke([HumanMessage("Dance.")])


def test_bundled_plans_say_they_are_hand_written() -> None:
    plans = bundled_plans()
    assert len(plans) == 3
    for plan in plans:
        assert plan.text.startswith("; HAND-WRITTEN PLAN")


def test_python_dash_m_llassembly_demo_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "llassembly_demo", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "All plans ended after" in result.stdout


def test_cli_max_turns_stops_running_plans_with_exit_code_2() -> None:
    code, text = run_cli("--quiet", "--max-turns", "10")
    assert code == 2
    assert "Stopped after 10 turns (--max-turns)" in text
    assert "out of turns: still running after 10 turns" in text
