"""Checking and summarising a plan against tools given as the rest of the API takes them.

:func:`check`, :func:`verify` and :func:`summarize` are the analysis' own
(:mod:`llassembly.analysis.verifier`, :mod:`llassembly.analysis.summary`) with the tools given
as every public function takes them (:data:`~llassembly.machine.externs.ToolSpec`: a list of
LangChain tools, plain functions or externs, or a mapping of name to tool): functions and
LangChain tools become externs (:func:`~llassembly.machine.externs.externs_of`).

Example:
    >>> from llassembly.parser import parse
    >>> def ping(x: int) -> int:
    ...     return x
    >>> check(parse("PUSH 1\\nCALL ping\\nPOP R1"), [ping])
    ()
"""

from __future__ import annotations

from llassembly.analysis import summary as _summary
from llassembly.analysis import verifier as _verifier
from llassembly.analysis.constants import Semantics
from llassembly.analysis.summary import PlanSummary
from llassembly.errors import Diagnostic, UsageError
from llassembly.language.limits import DEFAULT_MAX_INSTRUCTIONS, DEFAULT_MAX_TOOL_CALLS
from llassembly.language.program import PlainAnswer, Program
from llassembly.machine.externs import ToolSpec, externs_of

__all__ = ["ToolSpec", "check", "program_of", "summarize", "verify"]


def program_of(program: object, where: str) -> Program:
    """``program``, checked to be a :class:`Program`.

    Raises:
        UsageError: It is something else: a plain answer (the reply held no instruction; see
            :func:`~llassembly.parse_program`), or no parsed plan at all.
    """
    if isinstance(program, Program):
        return program
    if isinstance(program, PlainAnswer):
        msg = (
            f"{where}() takes a Program, but the reply held no instruction (parse() gave a "
            "PlainAnswer): check isinstance(parsed, Program) first, or use parse_program()"
        )
        raise UsageError(msg)
    raise UsageError(f"{where}() takes a Program from parse(), got {type(program).__name__}")


def check(program: Program, tools: ToolSpec) -> tuple[Diagnostic, ...]:
    """Every problem of ``program`` (see :func:`llassembly.analysis.verifier.check`).

    Raises:
        UsageError: ``program`` is not a :class:`Program`, or ``tools`` no toolset (a
            :class:`~llassembly.errors.UsageTypeError`, also a ``TypeError``, when it is
            neither a list nor a mapping of tools).
    """
    return _verifier.check(program_of(program, "check"), externs_of(tools))


def verify(program: Program, tools: ToolSpec) -> None:
    """Check ``program`` and raise if anything is wrong (see
    :func:`llassembly.analysis.verifier.verify`).

    Raises:
        PlanRejected: The plan has problems.
        UsageError: ``program`` is not a :class:`Program`, or ``tools`` no toolset (a
            :class:`~llassembly.errors.UsageTypeError`, also a ``TypeError``, when it is
            neither a list nor a mapping of tools).
    """
    _verifier.verify(program_of(program, "verify"), externs_of(tools))


def summarize(
    program: Program,
    tools: ToolSpec,
    *,
    max_instructions_to_exec: int = DEFAULT_MAX_INSTRUCTIONS,
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    semantics: Semantics | None = None,
) -> PlanSummary:
    """What ``program`` may do (see :func:`llassembly.analysis.summary.summarize`).

    Raises:
        UsageError: ``program`` is not a :class:`Program`, or ``tools`` no toolset (a
            :class:`~llassembly.errors.UsageTypeError`, also a ``TypeError``, when it is
            neither a list nor a mapping of tools).
    """
    return _summary.summarize(
        program_of(program, "summarize"),
        externs_of(tools),
        max_instructions_to_exec=max_instructions_to_exec,
        max_tool_calls=max_tool_calls,
        semantics=semantics,
    )
