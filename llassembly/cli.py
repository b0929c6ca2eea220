"""Command line: ``llassembly check``, ``llassembly run`` (and ``python -m llassembly``).

``check PLAN --tools module:attr`` prints every problem with the source line and a caret;
with ``--summary`` it also prints what a valid plan can do (each tool's fewest and most calls,
constant arguments, loops and conditions, worst-case counts against the budgets), and with
``--json`` only that summary, as JSON.
``run PLAN --tools module:attr`` executes the plan and prints each tool call, its result and the
final registers. ``PLAN`` is a file, or ``-`` for standard input. ``module:attr`` names a list of
tools (LangChain tools or plain typed functions), a single tool, or a function returning a list;
the current directory is importable, so ``--tools examples.weather_tools:TOOLS`` works from the
repository root.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from llassembly.analysis.summary import summarize
from llassembly.analysis.verifier import check
from llassembly.errors import (
    ExecutionError,
    LLAssemblyError,
    PlanError,
    UsageError,
)
from llassembly.language.opcodes import Opcode
from llassembly.language.parser import parse
from llassembly.language.program import (
    PlainAnswer,
    Program,
    find_tool,
)
from llassembly.machine.emulator import (
    DEFAULT_MAX_INSTRUCTIONS,
    DEFAULT_MAX_STACK_DEPTH,
    DEFAULT_MAX_TOOL_CALLS,
    Emulator,
    ToolCall,
)
from llassembly.machine.externs import (
    Extern,
    externs_from,
)

__all__ = ["load_tools", "main"]

_EXIT_OK, _EXIT_PLAN, _EXIT_RUN, _EXIT_USAGE = 0, 1, 2, 3


def load_tools(spec: str) -> dict[str, Extern]:
    """Import ``module:attr`` and adapt what it names into externs.

    Raises:
        UsageError: The spec is malformed, the module or attribute is missing, or a tool
            cannot be adapted.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--tools must look like module:attribute, got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a missing module, or one that fails while importing
        msg = f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        raise UsageError(msg) from exc
    try:
        value: Any = getattr(module, attr)
    except AttributeError as exc:
        raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from exc
    if callable(value) and not hasattr(value, "invoke") and not _is_typed_tool(value):
        value = value()
    tools = list(value) if isinstance(value, list | tuple) else [value]
    return externs_from(tools)


def _is_typed_tool(value: Callable[..., Any]) -> bool:
    """A plain function with annotations is a tool; a bare factory ``def tools():`` is not."""
    annotations = getattr(value, "__annotations__", {})
    return bool(annotations) and set(annotations) != {"return"}


def _show(value: Any) -> str:
    """``repr`` that survives ints too long for Python to turn into text."""
    try:
        return repr(value)
    except Exception:  # a huge int (ValueError), or a tool result with a broken __repr__
        if isinstance(value, int):
            return f"<int of {value.bit_length()} bits>"
        return f"<unprintable {type(value).__name__}>"


def _read_plan(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read plan {path!r}: {exc.strerror or exc}") from exc


def _parse_plan(path: str, out: TextIO) -> Program | None:
    result = parse(_read_plan(path))
    if isinstance(result, PlainAnswer):
        out.write("The reply holds no instruction: it is a plain answer.\n")
        return None
    return result


def _cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    externs = load_tools(args.tools)
    program = _parse_plan(args.plan, out)
    if program is None:
        return _EXIT_PLAN
    problems = check(program, externs)
    for diagnostic in problems:
        out.write(diagnostic.render() + "\n")
    if problems:
        out.write(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found.\n")
        return _EXIT_PLAN
    calls = sum(
        1
        for i in program.instructions
        if i.op is Opcode.CALL and find_tool(str(i.operands[0]), externs) is not None
    )
    summary = (
        summarize(
            program,
            externs,
            max_instructions_to_exec=args.max_instructions,
            max_tool_calls=args.max_tool_calls,
        )
        if args.json or args.summary
        else None
    )
    if args.json and summary is not None:
        out.write(json.dumps(summary.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return _EXIT_OK
    out.write(f"OK: {len(program.instructions)} instructions, {calls} tool call sites.\n")
    if summary is not None:
        out.write(summary.render() + "\n")
    return _EXIT_OK


def _cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    externs = load_tools(args.tools)
    program = _parse_plan(args.plan, out)
    if program is None:
        return _EXIT_PLAN
    emulator = Emulator(
        program,
        externs,
        max_instructions_to_exec=args.max_instructions,
        max_tool_calls=args.max_tool_calls,
        max_stack_depth=args.max_stack_depth,
    )

    def call(request: ToolCall) -> Any:
        arguments = ", ".join(f"{k}={_show(v)}" for k, v in request.args.items())
        result = externs[request.tool].call(request.args)
        out.write(f"line {request.line:>3}  {request.tool}({arguments}) -> {_show(result)}\n")
        return result

    try:
        result = emulator.run(call)
    except ExecutionError as exc:
        out.write(f"stopped: {exc}\n")
        return _EXIT_RUN
    registers = ", ".join(f"{k}={_show(v)}" for k, v in result.registers.items()) or "(all zero)"
    out.write(
        f"finished: {result.instructions_executed} instructions, "
        f"{result.tool_calls} tool calls\nregisters: {registers}\n"
    )
    if result.stack:
        shown = ", ".join(_show(v) for v in result.stack)
        out.write(f"stack (bottom to top): [{shown}]\n")
    return _EXIT_OK


_DEMO = "how to run the NPC demo (its own package, llassembly-demo)"


def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    raise UsageError(
        "the NPC demo is its own package: from the repository's root, "
        "pip install -e . -e examples/npc_demo, then run llassembly-demo"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llassembly",
        description="Check and run LLM-written assembly plans against your tools.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("check", "print every problem in a plan, with the line and a caret"),
        ("run", "run a plan, printing each tool call, its result and the final registers"),
    ):
        sub = commands.add_parser(name, help=helptext, description=helptext)
        sub.add_argument("plan", help="the plan file, or - for standard input")
        sub.add_argument(
            "--tools",
            required=True,
            metavar="MODULE:ATTR",
            help="a list of tools (or one tool, or a function returning a list)",
        )
        sub.add_argument("--max-instructions", type=int, default=DEFAULT_MAX_INSTRUCTIONS)
        sub.add_argument("--max-tool-calls", type=int, default=DEFAULT_MAX_TOOL_CALLS)
        if name == "run":
            sub.add_argument("--max-stack-depth", type=int, default=DEFAULT_MAX_STACK_DEPTH)
        else:
            sub.add_argument(
                "--summary",
                action="store_true",
                help="also print what the plan can do: each tool's call counts and arguments",
            )
            sub.add_argument(
                "--json", action="store_true", help="print the summary as JSON (nothing else)"
            )
    commands.add_parser("demo", help=_DEMO, description=_DEMO)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line and return its exit code.

    Exit codes: 0 success, 1 the plan has problems, 2 the run stopped with an error,
    3 the command was used wrongly.
    """
    stream = out if out is not None else sys.stdout
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser().parse_args(words)
    except SystemExit as exc:  # argparse has printed the usage; 2 would read as "run stopped"
        return _EXIT_OK if exc.code in (0, None) else _EXIT_USAGE
    handlers: dict[str, Callable[[argparse.Namespace, TextIO], int]] = {
        "check": _cmd_check,
        "run": _cmd_run,
        "demo": _cmd_demo,
    }
    handler = handlers[args.command]
    try:
        code: int = handler(args, stream)
    except PlanError as exc:
        stream.write(f"{exc}\n")
        return _EXIT_PLAN
    except UsageError as exc:
        sys.stderr.write(f"llassembly: {exc}\n")
        return _EXIT_USAGE
    except LLAssemblyError as exc:
        stream.write(f"stopped: {exc}\n")
        return _EXIT_RUN
    return code
