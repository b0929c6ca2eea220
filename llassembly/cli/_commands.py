"""What each command does: ``check`` and ``run`` a plan against the tools ``--tools`` names
(:func:`load_tools`), show the ``prompt`` the planner model is sent for them, and hand
``demo`` its arguments."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from llassembly import (
    Emulator,
    ExecutionError,
    Extern,
    PlainAnswer,
    Program,
    ToolCall,
    UsageError,
    build_system_prompt,
    check,
    parse,
    summarize,
)
from llassembly.analysis.toolset import looks_like_one_tool
from llassembly.cli._report import (
    EXIT_OK,
    EXIT_PLAN,
    EXIT_RUN,
    Report,
    plain,
    problem,
    show,
)
from llassembly.language.opcodes import Opcode
from llassembly.language.program import find_tool
from llassembly.machine.externs import check_sync_tools, externs_of
from llassembly.machine.query import QUERY_EXTERN, QUERY_TOOL


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
        try:
            value = value()
        except Exception as exc:  # the factory's own failure: --tools names no tools
            raise UsageError(f"calling {spec} raised {type(exc).__name__}: {exc}") from exc
    # The tools argument of the API (a list or a mapping, see ToolSpec), or one tool: on the
    # command line there is no list to wrap it in.
    tools = [value] if looks_like_one_tool(value) else value
    return dict(externs_of(tools, param="--tools"))


def _is_typed_tool(value: Callable[..., Any]) -> bool:
    """A plain function with annotations is a tool; a bare factory ``def tools():`` is not."""
    annotations = getattr(value, "__annotations__", {})
    return bool(annotations) and set(annotations) != {"return"}


def _read_plan(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read plan {path!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:  # a plan saved in another encoding
        byte, offset = exc.object[exc.start], exc.start
        msg = (
            f"cannot read plan {path!r}: it is not UTF-8 text (byte {byte:#04x} at offset {offset})"
        )
        raise UsageError(msg) from exc


def _parse_plan(path: str) -> Program | PlainAnswer:
    return parse(_read_plan(path))


def _plain_answer(report: Report, answer: PlainAnswer) -> int:
    report.text("The reply holds no instruction: it is a plain answer.")
    return report.json("plain_answer", EXIT_PLAN, text=answer.text)


def check_command(args: argparse.Namespace, report: Report) -> int:
    externs = load_tools(args.tools)
    program = _parse_plan(args.plan)
    if isinstance(program, PlainAnswer):
        return _plain_answer(report, program)
    problems = check(program, externs)
    if problems:
        for diagnostic in problems:
            report.text(diagnostic.render())
        report.text(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found.")
        return report.json("rejected", EXIT_PLAN, problems=[problem(d) for d in problems])
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
        if report.as_json or args.summary
        else None
    )
    report.text(f"OK: {len(program.instructions)} instructions, {calls} tool call sites.")
    if summary is not None:
        report.text(summary.render())
    return report.json(
        "ok",
        EXIT_OK,
        instructions=len(program.instructions),
        tool_call_sites=calls,
        **(summary.to_dict() if summary is not None else {}),
    )


def run_command(args: argparse.Namespace, report: Report) -> int:
    externs = load_tools(args.tools)
    program = _parse_plan(args.plan)
    if isinstance(program, PlainAnswer):
        return _plain_answer(report, program)
    emulator = Emulator(
        program,
        externs,
        max_instructions_to_exec=args.max_instructions,
        max_tool_calls=args.max_tool_calls,
        max_stack_depth=args.max_stack_depth,
    )
    # ``call`` below runs each tool synchronously, as ``Emulator.run()`` does without one:
    # refuse as it does, before anything runs, a plan that calls a tool that can only be awaited.
    compiled = emulator.compiled
    check_sync_tools((t.name for t in compiled.tools if t is not None), compiled.externs)
    calls: list[dict[str, Any]] = []

    def call(request: ToolCall) -> Any:
        arguments = ", ".join(f"{k}={show(v)}" for k, v in request.args.items())
        result = externs[request.tool].call(request.args)
        report.text(f"line {request.line:>3}  {request.tool}({arguments}) -> {show(result)}")
        calls.append(
            {
                "line": request.line,
                "tool": request.tool,
                "args": plain(request.args),
                "result": plain(result),
            }
        )
        return result

    try:
        result = emulator.run(call)
    except ExecutionError as exc:
        report.text(f"stopped: {exc}")
        error = {
            "type": type(exc).__name__,
            "message": exc.detail,
            "line": exc.line,
            "source": exc.source,
        }
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
    return report.json(
        "finished",
        EXIT_OK,
        answer=result.answer,
        returned=plain(result.returned),
        calls=calls,
        registers=plain(result.registers),
        stack=plain(result.stack),
        instructions_executed=result.instructions_executed,
        tool_calls=result.tool_calls,
    )


def prompt_command(args: argparse.Namespace, report: Report) -> int:
    """Print the system prompt the planner model gets for these tools, as the planner builds
    it (``Planner.system_prompt``), and its size; only the prompt goes to standard output."""
    # Counting tokens needs LangChain's messages, which check and run do not.
    from langchain_core.messages import SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately

    externs = load_tools(args.tools)
    if args.queries:  # as the planner's queries=True: the built-in query is one more tool
        if QUERY_TOOL in externs:
            raise UsageError(
                f"a tool is named {QUERY_TOOL!r}, the name plans call a query by (--queries): "
                "rename the tool"
            )
        externs[QUERY_TOOL] = QUERY_EXTERN
    text = build_system_prompt(externs, args.context, args.prompt_path)
    tokens = count_tokens_approximately([SystemMessage(text)])
    report.text(text, end="")
    if not report.as_json:  # not part of the prompt: `llassembly prompt ... > file` holds it alone
        sys.stderr.write(f"~{tokens} tokens (estimated), {len(externs)} tools\n")
    return report.json("ok", EXIT_OK, system_prompt=text, tokens=tokens, tools=list(externs))


DEMO_HELP = (
    "run the NPC demo with its own arguments (the llassembly-demo package: "
    "pip install -e examples/npc_demo); llassembly demo --help shows them"
)


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
    code: int = demo.main(list(argv), out=out)
    return code
