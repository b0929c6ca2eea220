"""Command line: ``llassembly check``, ``run``, ``prompt`` and ``demo`` (and ``python -m
llassembly``), as ``docs/cli.md`` describes them; the exit codes are :data:`EXIT_CODES`, the
``--json`` output :data:`JSON_SCHEMA`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import math
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO, Union, cast, get_args, get_origin, get_type_hints

from langchain_core.tools import BaseTool
from pydantic_core import to_jsonable_python

from llassembly import Emulator, PlainAnswer, Program, ToolCall, __version__, errors
from llassembly.analysis.cfg import control_flow
from llassembly.analysis.toolset import looks_like_one_tool
from llassembly.errors import UsageError, plural, safe_text, well_formed
from llassembly.integration.prompt import build_system_prompt
from llassembly.integration.query import add_query
from llassembly.language import limits
from llassembly.language.parser import not_words, parse
from llassembly.machine.externs import Extern, check, check_sync_tools, externs_of, summarize

EXIT_OK, EXIT_PLAN, EXIT_RUN, EXIT_USAGE = 0, 1, 2, 3

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success: the plan is valid (check), ran to its end (run), or the prompt was printed",
    EXIT_PLAN: "the plan has problems (syntax, verifier, code or JSON) or holds no instruction",
    EXIT_RUN: "the run stopped: a tool raised, a budget ran out, a run-time error",
    EXIT_USAGE: "the command was used wrongly: arguments, --tools, a file it reads, no demo",
}
"""Every exit code of ``llassembly`` and what it means (the demo's are the same)."""

JSON_SCHEMA = """\
JSON output (--json): one object on standard output, whatever happens
(what the tools print goes to standard error).
  Always:    "command" ("check" | "run" | "prompt" | null), "status", "exit_code"
  status "ok" (check, exit 0): "instructions", "tool_call_sites", and the
             plan summary's fields: "tools", "min_tool_calls", "max_tool_calls",
             "max_instructions", "ends", "complete", "budgets", "within_budgets"
             (null = unbounded)
  status "ok" (prompt, exit 0): "system_prompt" (exactly what the planner model
             gets), "tokens" (its estimate), "tools" (the names plans may call)
  status "finished" (run, exit 0): "answer" (the SAY lines, "" if none),
             "returned" (what a top-level RET returned in EAX/XMM0, or null),
             "calls", "registers" (non-zero ones), "stack", "instructions_executed",
             "tool_calls"
  status "rejected" (exit 1): "problems": [{"line", "column", "message", "source"}]
             (also a reply of code, JSON or a tool call as text, with the
             reason the planner sends the model to repair it)
  status "plain_answer" (exit 1): "text" (the reply holds no instruction)
  status "stopped" (run, exit 2): "error": {"type", "message", "line", "source"},
             "calls" made before it, "answer" said before it
  status "usage_error" (exit 3): "error": {"type", "message"} (also run of a
             plan calling an async-only or injected tool: nothing has run)
  A call is {"line", "tool", "args", "result"}: JSON values (a record, a
  pydantic model or dataclass, is an object of its fields); a value JSON
  cannot hold (an object of no JSON form, an int too long to print) is its
  text. Registers, stack and returned hold the plan's numbers and strings.
  The output is ASCII (other characters as \\uXXXX
  escapes); a lone surrogate (half a character) is written as U+FFFD."""
"""The shape of ``--json`` output, as shown in ``llassembly --help``."""


def show(value: Any) -> str:
    """``repr`` that survives ints too long for Python to turn into text."""
    try:
        return repr(value)
    except Exception:  # a huge int (ValueError), or a tool result with a broken __repr__
        if isinstance(value, int):
            return f"<int of {value.bit_length()} bits>"
        return f"<unprintable {type(value).__name__}>"


def printable(text: str, stream: TextIO) -> str:
    """``text`` as ``stream`` can write it: what its encoding cannot hold (a lone surrogate
    always, an accented letter on an ASCII console) as a Python escape, as ``repr`` shows it."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # a stream that names an encoding Python does not know
        return text.encode("ascii", "backslashreplace").decode("ascii")
    return text


def plain(value: Any) -> Any:
    """``value`` as a JSON value: numbers, well-formed strings, arrays, objects (a record, a
    pydantic model or a dataclass, as its fields, as pydantic writes them); anything else, and
    data nested too deeply, as its text."""
    try:
        return _json_value(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deeply to show>"


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return well_formed(str.__str__(value))
    if isinstance(value, int):
        try:
            str(value)  # Python refuses to print ints of more than 4300 digits
        except ValueError:
            return show(value)
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {
            well_formed(k if type(k) is str else show(k)): _json_value(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_value(v) for v in value]
    try:  # a record, an enum, a date...: the JSON data pydantic writes for it
        data = to_jsonable_python(value, fallback=show)
    except Exception:  # bytes that are no UTF-8, a model whose own serializer raises
        return well_formed(show(value))
    return _json_value(data)


class ReaderGone(BaseException):
    """The reader of standard output went away (``| head -1``): the command stops at once."""


@dataclasses.dataclass
class Report:
    """Where a command's outcome goes: text for a person, or one JSON object (``--json``)."""

    out: TextIO
    as_json: bool
    command: str | None

    def text(self, line: str, end: str = "\n") -> None:
        """A line for a person (see :func:`printable`); nothing under ``--json``."""
        if not self.as_json:
            try:
                self.out.write(printable(line + end, self.out))
            except BrokenPipeError as exc:  # (a run must not take it for a tool's failure)
                raise ReaderGone from exc

    def json(self, status: str, code: int, **fields: Any) -> int:
        """The one JSON object under ``--json``, ASCII and its strings well formed (why: *JSON
        output* in ``docs/cli.md``); return the exit code either way."""
        if self.as_json:
            data = {"command": self.command, "status": status, "exit_code": code, **fields}
            self.out.write(json.dumps(plain(data), indent=2, ensure_ascii=True) + "\n")
        return code


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
    except (Exception, SystemExit) as exc:  # missing, failing or exiting while imported
        msg = f"cannot import module {module_name!r}: {type(exc).__name__}: {safe_text(exc)}"
        raise UsageError(msg) from exc
    try:
        value: Any = getattr(module, attr)
    except AttributeError as exc:
        where = getattr(module, "__file__", None) or "a module with no file"
        msg = f"module {module_name!r} ({where}) has no attribute {attr!r}"  # (a stdlib namesake?)
        raise UsageError(msg) from exc
    except Exception as exc:  # a module __getattr__ that fails (an optional import...)
        raise UsageError(f"cannot load {spec}: {type(exc).__name__}: {safe_text(exc)}") from exc
    if callable(value) and not hasattr(value, "invoke") and _returns_tools(value):
        try:
            value = value()
        except (Exception, SystemExit) as exc:  # the factory's failure: --tools names none
            msg = f"calling {spec} raised {type(exc).__name__}: {safe_text(exc)}"
            raise UsageError(msg) from exc
    # The tools argument of the API (a list or a mapping, see ToolSpec), or one tool: on the
    # command line there is no list to wrap it in.
    tools = [value] if looks_like_one_tool(value) else value
    return dict(externs_of(tools, param="--tools"))


def _returns_tools(func: Any) -> bool:
    """Whether ``func`` is a factory of tools, not a tool (the API takes any function as one):
    no parameter annotated, its return annotated as tools (see :func:`_tools_type`)."""
    try:
        hints = get_type_hints(func)
    except Exception:  # a name it cannot resolve: reading it as a tool says so
        return False
    return set(hints) == {"return"} and _tools_type(hints["return"], item=False)


def _tools_type(hint: Any, item: bool) -> bool:
    """Whether ``hint`` is a tool's type (a callable, a LangChain tool, an extern), or a list,
    tuple or mapping of them; an ``item`` of one may be ``Any`` (or not written)."""
    origin, args = get_origin(hint) or hint, get_args(hint)
    kind = origin if isinstance(origin, type) else type(None)
    if origin in (Union, types.UnionType):
        return all(_tools_type(arg, item) for arg in args)
    if origin is Callable or issubclass(kind, BaseTool | Extern) or (item and hint is Any):
        return True
    mapping = issubclass(kind, Mapping)
    many = not item and (mapping or issubclass(kind, list | tuple))
    return many and _tools_type(args[-1 if mapping else 0] if args else Any, item=True)


def _read_plan(path: str) -> str:
    try:
        if path != "-":
            return Path(path).read_text(encoding="utf-8")
        stdin = sys.stdin  # its bytes, as UTF-8 like a file's, whatever the console's encoding
        return stdin.buffer.read().decode("utf-8") if hasattr(stdin, "buffer") else stdin.read()
    except OSError as exc:
        raise UsageError(f"cannot read plan {path!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:  # a plan saved in another encoding
        where = f"byte {exc.object[exc.start]:#04x} at offset {exc.start}"
        msg = f"cannot read plan {path!r}: it is not UTF-8 text ({where})"
        raise UsageError(msg) from exc


def check_command(
    args: argparse.Namespace, report: Report, externs: dict[str, Extern], program: Program
) -> int:
    budgets = dict(
        max_instructions_to_exec=args.max_instructions, max_tool_calls=args.max_tool_calls
    )
    limits.check_budgets(**budgets)  # as run refuses them, before the plan is checked
    problems = check(program, externs)
    if problems:
        for diagnostic in problems:
            report.text(diagnostic.render())
        report.text(f"{plural(len(problems), 'problem')} found.")
        return report.json("rejected", EXIT_PLAN, problems=problems)
    count, calls = len(program.instructions), len(control_flow(program, externs).tools)
    summary = summarize(program, externs, **budgets) if report.as_json or args.summary else None
    report.text(f"OK: {count} instructions, {calls} tool call sites.")
    if summary is not None:
        report.text(summary.render())
    fields = summary.to_dict() if summary is not None else {}
    return report.json("ok", EXIT_OK, instructions=count, tool_call_sites=calls, **fields)


def run_command(
    args: argparse.Namespace, report: Report, externs: dict[str, Extern], program: Program
) -> int:
    budgets = dict(
        max_instructions_to_exec=args.max_instructions, max_tool_calls=args.max_tool_calls
    )
    emulator = Emulator(program, externs, **budgets, max_stack_depth=args.max_stack_depth)
    # ``call`` below runs each tool synchronously with the plan's arguments, as ``Emulator.run()``
    # does without one: refuse as it does, before anything runs, a plan that calls a tool that
    # can only be awaited or needs injected parameters (a tool-call id, a ``ToolRuntime``...).
    check_sync_tools(emulator.compiled.tools)
    emulator._check_injected()
    calls: list[dict[str, Any]] = []

    def call(request: ToolCall) -> Any:
        arguments = ", ".join(f"{k}={show(v)}" for k, v in request.args.items())
        try:
            result = externs[request.tool].call(
                request.args, line=request.line, source=request.source
            )
        except SystemExit as exc:  # a tool that exits: its failure, reported as any other
            raise RuntimeError(f"the tool called sys.exit({exc.code!r})") from exc
        if isinstance(result, Iterator) and externs[request.tool].n_results == 1:
            result = list(result)  # read once: the plan reads its items as a list, and so do we
        report.text(f"line {request.line:>3}  {request.tool}({arguments}) -> {show(result)}")
        made = {"line": request.line, "tool": request.tool, "args": plain(request.args)}
        calls.append({**made, "result": plain(result)})
        return result

    try:
        result = emulator.run(call)
    except errors.ExecutionError as exc:
        report.text(f"stopped: {exc}")
        error = dict(type=type(exc).__name__, message=exc.detail, line=exc.line, source=exc.source)
        said = "\n".join(emulator.state.answer)
        return report.json("stopped", EXIT_RUN, error=error, calls=calls, answer=said)
    registers = ", ".join(f"{k}={show(v)}" for k, v in result.registers.items()) or "(all zero)"
    report.text(
        f"finished: {result.instructions_executed} instructions, {result.tool_calls} tool calls"
    )
    report.text(f"registers: {registers}")
    if result.stack:
        report.text(f"stack (bottom to top): [{', '.join(show(v) for v in result.stack)}]")
    if result.returned is not None:
        report.text(f"returned: {show(result.returned)}")
    if result.answer:
        # The answer last, its lines indented under the first: what a person reads first.
        report.text("answer: " + result.answer.replace("\n", "\n        "))
    # The run's result as it is (the report makes it JSON), its calls as this command saw them.
    finished = {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}
    return report.json("finished", EXIT_OK, **{**finished, "calls": calls})


def prompt_command(args: argparse.Namespace, report: Report, externs: dict[str, Extern]) -> int:
    """Print the system prompt the planner model gets for these tools, as the planner builds
    it (``Planner.system_prompt``), and its size; only the prompt goes to standard output."""
    # Counting tokens needs LangChain's messages, which check and run do not.
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately

    text = build_system_prompt(externs, args.context, args.prompt_path)
    tokens = count_tokens_approximately([SystemMessage(text)])
    report.text(text, end="")
    if not report.as_json:  # not part of the prompt: `llassembly prompt ... > file` holds it alone
        sys.stderr.write(f"~{tokens} tokens (estimated), {len(externs)} tools\n")
    return report.json("ok", EXIT_OK, system_prompt=text, tokens=tokens, tools=list(externs))


def run_demo(argv: Sequence[str], out: TextIO) -> int:
    """Hand the arguments to the demo's command line when its package is installed.

    The demo is its own distribution that depends on this one, never the other way round, so
    it is imported by name, here only.
    """
    try:
        demo = importlib.import_module("llassembly_demo.cli")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("llassembly_demo"):
            raise  # the demo is installed but something it imports is missing: say so
        raise UsageError(
            "the NPC demo is its own package and it is not installed: from the repository's "
            "root, pip install -e . -e examples/npc_demo, then run llassembly demo "
            "(or llassembly-demo)"
        ) from exc
    return cast(int, demo.main(list(argv), out=out))


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are :class:`UsageError`, so that they exit 3 and
    come out as JSON under ``--json`` like every other usage error; its help ends with the exit
    codes and the JSON schema."""

    def __init__(self, **kwargs: Any) -> None:
        codes = "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
        kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
        super().__init__(epilog=f"exit codes:\n{codes}\n\n{JSON_SCHEMA}", **kwargs)

    def error(self, message: str) -> NoReturn:
        mistake = UsageError(message)
        mistake.add_note(self.format_usage())  # the usage line of the command concerned
        raise mistake


_HELP = {
    "check": "print every problem in a plan, with the line and a caret",
    "run": "run a plan: each tool call and its result, the registers, the answer",
    "prompt": "print the system prompt the planner model is sent for these tools",
    "demo": (
        "run the NPC demo with its own arguments (the llassembly-demo package: "
        "pip install -e examples/npc_demo); llassembly demo --help shows them"
    ),
    "--tools": "a list or mapping of tools, or one tool, or a function annotated to return them",
    "--queries": "as the planner's queries=True: plans may read prose with query_text",
    "--prompt-path": "a template replacing the built-in prompt (the planner's prompt_path)",
    "--context": "your own system prompt, embedded as the agent's system message is",
    "--summary": "also print what the plan can do: each tool's call counts and arguments",
    "--json": "print one JSON object and nothing else, also on errors (schema below)",
}
"""What ``llassembly --help`` says of each command, and each command's help of its options."""


def _parser() -> argparse.ArgumentParser:
    about = "Check and run LLM-written assembly plans against your tools."
    parser = _Parser(prog="llassembly", description=about)
    parser.add_argument("--version", action="version", version=f"llassembly {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in ("check", "run", "prompt"):
        add = commands.add_parser(name, help=_HELP[name], description=_HELP[name]).add_argument
        if name != "prompt":
            add("plan", help="the plan file, or - for standard input")
        add("--tools", required=True, metavar="MODULE:ATTR", help=_HELP["--tools"])
        if name != "run":  # run has no model to answer a query
            add("--queries", action="store_true", help=_HELP["--queries"])
        if name == "prompt":  # the planner's options that change its prompt
            add("--prompt-path", metavar="FILE", help=_HELP["--prompt-path"])
            add("--context", default="", metavar="TEXT", help=_HELP["--context"])
        else:
            add("--max-instructions", type=int, default=limits.DEFAULT_MAX_INSTRUCTIONS)
            add("--max-tool-calls", type=int, default=limits.DEFAULT_MAX_TOOL_CALLS)
        if name == "run":
            add("--max-stack-depth", type=int, default=limits.DEFAULT_MAX_STACK_DEPTH)
        elif name == "check":
            add("--summary", action="store_true", help=_HELP["--summary"])
        add("--json", action="store_true", help=_HELP["--json"])
    commands.add_parser("demo", help=_HELP["demo"], description=_HELP["demo"], add_help=False)
    return parser


@contextlib.contextmanager
def _tools_write_to_stderr(report: Report) -> Iterator[None]:
    """Under ``--json`` standard output holds the one JSON object: what the tools write to it,
    as they are imported or called, goes to standard error, by ``print`` and to file descriptor
    1 (a process a tool runs), and the report writes to the real standard output."""
    out, saved = report.out, None
    with contextlib.suppress(OSError, ValueError):  # (a stream with no descriptor: print's alone)
        if out.fileno() == 1:
            out.flush()
            saved = os.dup(1)
            os.dup2(2, 1)
            report.out = open(saved, "w", encoding="ascii", closefd=False)  # noqa: SIM115
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            report.out.flush()
            out.flush()  # (what a tool wrote to sys.__stdout__ goes to standard error too)
            os.dup2(saved, 1)
            os.close(saved)
            report.out = out


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line and return its exit code (see :data:`EXIT_CODES`; 141 when the
    reader of standard output went away, as a shell says of a process that SIGPIPE ended)."""
    try:
        return _command_line(argv, out)
    except (BrokenPipeError, ReaderGone):  # `... | head -1`: stop quietly, as `yes | head` does
        with contextlib.suppress(OSError, ValueError):  # (and no error as Python exits)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return 141


def _command_line(argv: Sequence[str] | None, out: TextIO | None) -> int:
    stream = out if out is not None else sys.stdout
    words = list(sys.argv[1:] if argv is None else argv)
    # Under --json even a usage mistake is a JSON object (the command is known only when
    # parsing got that far).
    command = words[0] if words and words[0] in ("check", "run", "prompt") else None
    report = Report(stream, as_json="--json" in words and words[:1] != ["demo"], command=command)
    try:
        if words[:1] == ["demo"]:  # the demo parses its own arguments, --help included
            return run_demo(words[1:], stream)
        try:
            args = _parser().parse_args(words)
        except SystemExit as exc:  # --help or --version, printed by argparse
            return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
        with _tools_write_to_stderr(report) if report.as_json else contextlib.nullcontext():
            externs = load_tools(args.tools)
            if getattr(args, "queries", False):  # as the planner's queries=True: one more tool
                add_query(externs, "--queries")
            if args.command == "prompt":
                return prompt_command(args, report, externs)
            program = parse(_read_plan(args.plan))
            if isinstance(program, PlainAnswer):
                not_words(program.text)  # code, JSON or a call as text: what the planner repairs
                report.text("The reply holds no instruction: it is a plain answer.")
                return report.json("plain_answer", EXIT_PLAN, text=program.text)
            handle = check_command if args.command == "check" else run_command
            return handle(args, report, externs, program)
    except errors.PlanError as exc:
        report.text(str(exc))
        return report.json("rejected", EXIT_PLAN, problems=exc.diagnostics)
    except UsageError as exc:
        if not report.as_json:
            usage = "".join(getattr(exc, "__notes__", ()))
            sys.stderr.write(printable(f"{usage}llassembly: {exc}\n", sys.stderr))
        error = {"type": type(exc).__name__, "message": str(exc)}
        return report.json("usage_error", EXIT_USAGE, error=error)
    except errors.LLAssemblyError as exc:
        report.text(f"stopped: {exc}")
        error = {"type": type(exc).__name__, "message": str(exc)}
        return report.json("stopped", EXIT_RUN, error=error)
