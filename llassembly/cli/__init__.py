"""Command line: ``llassembly check``, ``llassembly run``, ``llassembly prompt``,
``llassembly demo`` (and ``python -m llassembly``).

``check PLAN --tools module:attr`` prints every problem with the source line and a caret;
with ``--summary`` it also prints what a valid plan can do (each tool's fewest and most calls,
constant arguments, loops and conditions, worst-case counts against the budgets).
``run PLAN --tools module:attr`` executes the plan and prints each tool call, its result, the
final registers and the plan's answer (its ``SAY`` lines). With ``--json`` every command but
``demo`` prints one JSON object and nothing else, whatever happens (see :data:`JSON_SCHEMA`);
what the tools print meanwhile goes to standard error.
``PLAN`` is a file, or ``-`` for standard input. ``module:attr`` names a list of tools
(LangChain tools or plain typed functions), a mapping of tool name to tool, a single tool, or a
function returning a list or a mapping; the current directory is importable, so
``--tools examples.weather_tools:TOOLS`` works from the repository root.
``prompt --tools module:attr`` prints the system prompt the planner model is sent for those
tools (``--queries``, ``--prompt-path``, ``--context`` as the planner's options), and its size
on standard error. ``demo [ARGS...]`` runs the NPC demo (the ``llassembly-demo`` package) with
its own arguments.

Exit codes (:data:`EXIT_CODES`): 0 success, 1 the plan has problems, 2 the run stopped,
3 the command was used wrongly.

Here: the arguments and :func:`main`; what each command does is in ``_commands``, what a
command's outcome looks like (exit codes, text, the JSON object) in ``_report``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

from llassembly import LLAssemblyError, PlanError, UsageError, __version__
from llassembly.cli._commands import (
    DEMO_HELP,
    check_command,
    load_tools,
    prompt_command,
    run_command,
    run_demo,
)
from llassembly.cli._report import (
    EXIT_CODES,
    EXIT_OK,
    EXIT_PLAN,
    EXIT_RUN,
    EXIT_USAGE,
    JSON_SCHEMA,
    Report,
    printable,
    problem,
)
from llassembly.machine.emulator import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_STACK_DEPTH,
    DEFAULT_MAX_TOOL_CALLS,
)

__all__ = ["EXIT_CODES", "JSON_SCHEMA", "load_tools", "main"]


class _BadArguments(UsageError):
    """Arguments ``argparse`` refused; carries the usage line of the command concerned."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are :class:`UsageError`, so that they exit 3 and
    come out as JSON under ``--json`` like every other usage error."""

    def error(self, message: str) -> NoReturn:
        raise _BadArguments(message, self.format_usage())


def _epilog() -> str:
    codes = "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
    return f"exit codes:\n{codes}\n\n{JSON_SCHEMA}"


def _prompt_options(sub: argparse.ArgumentParser) -> None:
    """The planner's options that change its prompt."""
    sub.add_argument(
        "--queries",
        action="store_true",
        help="as the planner's queries=True: plans may read prose with query_text",
    )
    sub.add_argument(
        "--prompt-path",
        metavar="FILE",
        help="a template replacing the built-in prompt (the planner's prompt_path)",
    )
    sub.add_argument(
        "--context",
        default="",
        metavar="TEXT",
        help="your own system prompt, embedded as the agent's system message is",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="llassembly",
        description="Check and run LLM-written assembly plans against your tools.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"llassembly {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, helptext in (
        ("check", "print every problem in a plan, with the line and a caret"),
        ("run", "run a plan: each tool call and its result, the registers, the answer"),
        ("prompt", "print the system prompt the planner model is sent for these tools"),
    ):
        sub = commands.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=_epilog(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name != "prompt":
            sub.add_argument("plan", help="the plan file, or - for standard input")
        sub.add_argument(
            "--tools",
            required=True,
            metavar="MODULE:ATTR",
            help="a list or mapping of tools (or one tool, or a function returning either)",
        )
        if name == "prompt":
            _prompt_options(sub)
        else:
            sub.add_argument("--max-instructions", type=int, default=DEFAULT_MAX_INSTRUCTIONS)
            sub.add_argument("--max-tool-calls", type=int, default=DEFAULT_MAX_TOOL_CALLS)
        if name == "run":
            sub.add_argument("--max-stack-depth", type=int, default=DEFAULT_MAX_STACK_DEPTH)
        elif name == "check":
            sub.add_argument(
                "--summary",
                action="store_true",
                help="also print what the plan can do: each tool's call counts and arguments",
            )
        sub.add_argument(
            "--json",
            action="store_true",
            help="print one JSON object and nothing else, also on errors (schema below)",
        )
    commands.add_parser("demo", help=DEMO_HELP, description=DEMO_HELP, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line and return its exit code (see :data:`EXIT_CODES`)."""
    stream = out if out is not None else sys.stdout
    words = list(sys.argv[1:] if argv is None else argv)
    # Under --json even a usage mistake is a JSON object (the command is known only when
    # parsing got that far).
    command = words[0] if words and words[0] in ("check", "run", "prompt") else None
    as_json = "--json" in words and words[:1] != ["demo"]
    report = Report(stream, as_json=as_json, command=command)
    try:
        if words[:1] == ["demo"]:  # the demo parses its own arguments, --help included
            return run_demo(words[1:], stream)
        try:
            args = _parser().parse_args(words)
        except SystemExit as exc:  # --help or --version, printed by argparse
            return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
        handlers: dict[str, Callable[[argparse.Namespace, Report], int]] = {
            "check": check_command,
            "run": run_command,
            "prompt": prompt_command,
        }
        if not as_json:
            return handlers[args.command](args, report)
        # Under --json standard output holds the one JSON object: what the tools print, as
        # they are imported or called, goes to standard error (the report writes to the
        # stream taken above).
        with contextlib.redirect_stdout(sys.stderr):
            return handlers[args.command](args, report)
    except PlanError as exc:
        report.text(str(exc))
        problems = [problem(d) for d in exc.diagnostics]
        return report.json("rejected", EXIT_PLAN, problems=problems)
    except UsageError as exc:
        if not report.as_json:
            usage = exc.usage if isinstance(exc, _BadArguments) else ""
            sys.stderr.write(printable(f"{usage}llassembly: {exc}\n", sys.stderr))
        kind = "UsageError" if isinstance(exc, _BadArguments) else type(exc).__name__
        return report.json("usage_error", EXIT_USAGE, error={"type": kind, "message": str(exc)})
    except LLAssemblyError as exc:
        report.text(f"stopped: {exc}")
        return report.json(
            "stopped", EXIT_RUN, error={"type": type(exc).__name__, "message": str(exc)}
        )
