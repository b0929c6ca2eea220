"""``llassembly-demo``: NPC units on a grid, each steered by one plan from one model call.

Exit codes, as ``llassembly``'s: 0 every plan finished, 1 a unit got no plan, 2 a plan stopped
(or ran out of turns), 3 the command was used wrongly.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from langchain_core.language_models import BaseChatModel

from llassembly import LLAssemblyError, PlanError, UsageError

from .picture import draw_world
from .render import CLEAR_SCREEN, frame
from .replay import ReplayChatModel
from .run import UnitRun, new_game, outcome
from .world import World

__all__ = ["main", "parser", "run_demo_command"]

_EXIT_OK, _EXIT_PLAN, _EXIT_RUN, _EXIT_USAGE = 0, 1, 2, 3

_DESCRIPTION = """\
Three NPC units on a 12x10 map, each given an order in words. Each unit gets its whole plan
from ONE model call; then all units act turn by turn (one tool call each per turn) and the
map is drawn after every turn. At the end: each unit's order, plan, tool calls and outcome,
and the model calls used against those a one-tool-call-per-round-trip agent would need.

By default the model is a bundled REPLAY model: it answers each bundled order with a plan
file written by hand (llassembly_demo/plans/*.asm), not by a language model. Use
--ollama URL --model NAME to have a live model write the plans for the same orders."""


def parser() -> argparse.ArgumentParser:
    """The ``llassembly-demo`` command line."""
    command = argparse.ArgumentParser(
        prog="llassembly-demo",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--ollama", metavar="URL", help="a live Ollama server, e.g. http://localhost:11434"
    )
    command.add_argument(
        "--model", metavar="NAME", default="gpt-oss:20b", help="Ollama model (default: %(default)s)"
    )
    command.add_argument(
        "--order",
        action="append",
        default=[],
        metavar="TEXT",
        help="add a unit with this order (repeatable); needs --ollama, the replay model "
        "knows only its own orders",
    )
    command.add_argument(
        "--no-animation", action="store_true", help="print frames one after another, no redraw"
    )
    command.add_argument(
        "--delay",
        type=float,
        default=0.15,
        metavar="SECONDS",
        help="pause between animated frames (TTY only)",
    )
    command.add_argument(
        "--quiet", action="store_true", help="print only the final frame and the report"
    )
    command.add_argument(
        "--max-turns", type=int, default=400, metavar="N", help="stop after N turns"
    )
    command.add_argument(
        "--png", metavar="PATH", help="write a picture of the map with each unit's path"
    )
    command.add_argument(
        "--mermaid", metavar="PATH", help="write each plan's control-flow graph (Markdown)"
    )
    return command


def _model(args: argparse.Namespace) -> tuple[BaseChatModel, str]:
    if args.ollama is None:
        if args.order:
            raise UsageError(
                "--order needs a live model: add --ollama URL --model NAME (the bundled replay "
                "model only answers its own orders, with hand-written plans)"
            )
        return ReplayChatModel(), "bundled replay model (hand-written plans, no LLM)"
    try:
        from langchain_ollama import ChatOllama
    except ImportError as exc:
        raise UsageError(
            "--ollama needs langchain-ollama: pip install 'llassembly[ollama]'"
        ) from exc
    model = ChatOllama(model=args.model, base_url=args.ollama, temperature=0)
    return model, f"{args.model} at {args.ollama}"


def _report(world: World, run: UnitRun) -> list[str]:
    lines = [f"== Unit {run.unit_id} ({run.letter}) ==", f"order:    {run.order}"]
    if run.program is not None:
        size = len(run.program.instructions)
        lines.append(f"plan:     {size} instructions, from {run.model_calls} model call(s)")
        lines += [f"  {ln}" for ln in run.program.listing().splitlines()]
    else:
        lines.append(f"plan:     none after {run.model_calls} model call(s)")
    lines.append(f"tools:    {len(run.calls)} calls ({run.tally() or 'none'})")
    lines.append(f"outcome:  {outcome(world, run)}")
    if run.program is not None:
        lines.append(
            f"model calls: {run.model_calls} here; an agent that asks the model before each "
            f"tool call would need {run.react_model_calls} for the same actions"
        )
    return lines


def _mermaid(runs: list[UnitRun]) -> str:
    parts = ["# Plans of the llassembly demo", ""]
    for run in runs:
        parts += [f"## Unit {run.unit_id} ({run.letter})", "", f"Order: {run.order}", ""]
        if run.graph is None:
            parts += ["No plan.", ""]
            continue
        parts += ["```mermaid", run.graph.draw_mermaid().rstrip(), "```", ""]
    return "\n".join(parts)


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write {path!r}: {exc.strerror or exc}") from exc


def run_demo_command(args: argparse.Namespace, out: TextIO) -> int:
    """Plan every unit, play the turns, print the report; write the picture and graphs."""
    if args.max_turns < 1 or args.delay < 0:
        raise UsageError("--max-turns must be positive and --delay not negative")
    model, model_name = _model(args)
    out.write(f"Planning with {model_name}: one model call per unit.\n")
    game = new_game(model, args.order)
    world, runs = game.world, game.runs
    for run in runs:
        if run.program is None:
            note = run.detail
        else:
            note = f"a plan of {len(run.program.instructions)} instructions"
        out.write(f"  unit {run.unit_id} ({run.letter}): {run.model_calls} model call(s), {note}\n")

    animate = not args.no_animation and not args.quiet and out.isatty()

    def show(turn: int) -> None:
        if args.quiet:
            return
        text = frame(world, [r.view() for r in runs], turn, colour=animate)
        if animate:
            out.write(CLEAR_SCREEN + text + "\n")
            out.flush()
            time.sleep(args.delay)
        else:
            out.write(f"\n{text}\n")

    if not args.quiet:
        show(0)
    turns = game.play(max_turns=args.max_turns, on_turn=show)
    if args.quiet:
        out.write("\n" + frame(world, [r.view() for r in runs], turns) + "\n")
    if any(r.status == "out of turns" for r in runs):
        out.write(
            f"\nStopped after {turns} turns (--max-turns); some plans were still running.\n\n"
        )
    else:
        out.write(f"\nAll plans ended after {turns} turns.\n\n")
    for run in runs:
        out.write("\n".join(_report(world, run)) + "\n\n")
    used = sum(r.model_calls for r in runs)
    react = sum(r.react_model_calls for r in runs)
    out.write(
        f"Total: {used} model calls for {len(runs)} units; "
        f"one model call per tool call would take {react}.\n"
    )

    if args.png:
        image = draw_world(world, [(r.unit_id, r.path) for r in runs], fallen=game.fallen)
        _write(args.png, image)
        out.write(f"Picture: {args.png}\n")
    if args.mermaid:
        _write(args.mermaid, _mermaid(runs).encode("utf-8"))
        out.write(f"Plan graphs: {args.mermaid}\n")

    if any(r.status == "no plan" for r in runs):
        return _EXIT_PLAN
    return _EXIT_OK if all(r.status == "finished" for r in runs) else _EXIT_RUN


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run ``llassembly-demo`` and return its exit code (see the module's docstring)."""
    stream = out if out is not None else sys.stdout
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage; 2 would read as "run stopped"
        return _EXIT_OK if exc.code in (0, None) else _EXIT_USAGE
    try:
        return run_demo_command(args, stream)
    except PlanError as exc:
        stream.write(f"{exc}\n")
        return _EXIT_PLAN
    except UsageError as exc:
        sys.stderr.write(f"llassembly-demo: {exc}\n")
        return _EXIT_USAGE
    except LLAssemblyError as exc:
        stream.write(f"stopped: {exc}\n")
        return _EXIT_RUN
