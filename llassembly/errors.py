"""The library's errors, in three groups.

* :class:`UsageError`: the developer used the library wrongly (a bad option, a tool the
  adapter cannot describe). Fix the code, not the plan.
* :class:`PlanError`: the model wrote a bad plan (:class:`AsmSyntaxError`,
  :class:`PlanRejected`). These read well when sent back to the model, and carry line numbers.
* :class:`ExecutionError`: something went wrong while a valid plan ran (a budget ran out, a
  tool raised, a value had the wrong type at run time). Each carries the line it happened on.

Every error derives from :class:`LLAssemblyError`.
"""

# No ``from __future__ import annotations``: ``Failure`` reads ``NotRequired`` at run time.
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NotRequired

from typing_extensions import TypedDict


class LLAssemblyError(Exception):
    """Base of every error the library raises."""


class UsageError(LLAssemblyError):
    """The library was used wrongly by the developer (not by the model)."""


class UsageTypeError(UsageError, TypeError):
    """An argument of the wrong kind (tools given as one tool, a string or a number): a
    :class:`UsageError` that is also the ``TypeError`` Python code expects for such a mistake,
    so either ``except`` catches it."""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in a plan, pointing at its place in the model's reply.

    Attributes:
        line: 1-based line number in the model's reply (0: the problem is at no line).
        column: 1-based column of the offending token.
        message: What is wrong, written for the model that will repair the plan.
        source: The text of that line as the model wrote it.
    """

    line: int
    column: int
    message: str
    source: str = ""

    def render(self) -> str:
        """Return ``line N, column C: message`` followed by the source line and a caret (the
        message alone for no line).

        Bounded whatever the plan: the message and the quoted line are clipped (a long line is
        shown as a window around the column).
        """
        message, keep = self.message, MAX_MESSAGE_CHARS // 3  # (the end says why: it stays)
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - keep - 5] + " ... " + message[-keep:]
        head = f"line {self.line}, column {self.column}: {message}" if self.line else message
        if not self.source or not self.line:
            return head
        column = max(self.column, 1)
        start = max(0, column - 1 - MAX_SOURCE_CHARS // 2)
        shown = self.source[start : start + MAX_SOURCE_CHARS]
        prefix = "..." if start else ""
        suffix = "..." if start + MAX_SOURCE_CHARS < len(self.source) else ""
        caret = " " * (len(prefix) + column - 1 - start) + "^"
        return f"{head}\n    {prefix}{shown}{suffix}\n    {caret}"


MAX_DIAGNOSTICS_SHOWN = 20
"""Most problems an error's text lists (the rest are counted); ``diagnostics`` keeps them all."""
MAX_MESSAGE_CHARS = 300
"""Longest diagnostic message shown."""
MAX_SOURCE_CHARS = 120
"""Longest piece of a source line quoted under a diagnostic."""


TRUNCATED: Final = "... [truncated]"
"""The mark of a long text cut for a model to read."""


def clip(text: str, limit: int = 40, mark: str = "...") -> str:
    """``text`` cut to ``limit`` characters, ``mark`` marking the cut (for messages)."""
    return text if len(text) <= limit else text[: limit - len(mark)] + mark


def fenced(data: str) -> str:
    """``data`` between ``<<<`` and ``>>>`` lines longer than any run of ``<`` or ``>`` in it
    (for a model to read it as data: no line of it can close the fence)."""
    size = max([3, *(len(run) + 1 for run in re.findall(r"<+|>+", data))])
    return f"{'<' * size}\n{data}\n{'>' * size}"


def first_names(names: Iterable[str], count: int = 20) -> str:
    """``id, name, email, ...``: the first ``count`` of ``names``, each clipped (for a message
    that lists what a plan may have meant; ``""``: none)."""
    shown = list(itertools.islice(names, count + 1))
    return ", ".join(clip(n) for n in shown[:count]) + (", ..." if len(shown) > count else "")


def plural(count: int, word: str) -> str:
    """``count`` and ``word``, with an ``s`` unless ``count`` is 1 (``2 problems``)."""
    return f"{count} {word}{'s' if count != 1 else ''}"


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate (half a character, which UTF-8 cannot encode: an emoji
    a web service cut in two) as U+FFFD; a pair of surrogates as the character it spells."""
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def safe_text(value: object) -> str:
    """``str(value)`` that never fails: the one way a foreign object (an error) becomes text."""
    try:
        return str(value)
    except Exception:  # any object's __str__ may raise (RecursionError too); this one must not
        return f"a {type(value).__name__} that cannot be shown"


def first_line(exc: BaseException) -> str:
    """A short, safe description of an error: its first line, not the whole huge value it quotes."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return clip((safe_text(exc).splitlines() or [type(exc).__name__])[0], 200)


def rendered(diagnostics: Sequence[Diagnostic]) -> str:
    """The first :data:`MAX_DIAGNOSTICS_SHOWN` diagnostics rendered, the rest counted."""
    shown = [d.render() for d in diagnostics[:MAX_DIAGNOSTICS_SHOWN]]
    hidden = len(diagnostics) - MAX_DIAGNOSTICS_SHOWN
    if hidden > 0:
        shown.append(f"... and {plural(hidden, 'more problem')} like these")
    return "\n".join(shown)


class PlanError(LLAssemblyError):
    """The model's plan is broken. ``diagnostics`` lists every problem found."""

    def __init__(self, summary: str, diagnostics: tuple[Diagnostic, ...]) -> None:
        self.summary = summary
        self.diagnostics = diagnostics
        super().__init__(f"{summary}\n{rendered(diagnostics)}" if diagnostics else summary)


class AsmSyntaxError(PlanError):
    """The reply has text that is not valid assembly.

    ``line``, ``column`` and ``expected`` describe the first problem; ``diagnostics`` has all.
    """

    def __init__(
        self, diagnostics: tuple[Diagnostic, ...], expected: str, summary: str = ""
    ) -> None:
        self.line, self.column = diagnostics[0].line, diagnostics[0].column
        self.expected = expected
        summary = summary or f"the plan has {plural(len(diagnostics), 'syntax error')}"
        super().__init__(summary, diagnostics)


class EmptyReply(AsmSyntaxError):
    """The model's reply is empty: neither a plan nor an answer in words."""

    def __init__(self) -> None:
        text = "the reply is empty: write the program in one ```asm block, or answer in words"
        expected, summary = "a program or an answer", "the model returned nothing"
        super().__init__((Diagnostic(1, 1, text),), expected, summary)


class PlanRejected(PlanError):
    """The verifier found problems; nothing has run. ``diagnostics`` has every problem."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...]) -> None:
        problems = plural(len(diagnostics), "problem")
        super().__init__(f"the plan was rejected before running: {problems}", diagnostics)


class RepairsExhausted(PlanError):
    """The model could not write a valid plan within ``max_repairs`` repairs.

    ``attempts`` is the number of plans the model wrote; ``diagnostics`` are the last plan's.
    """

    def __init__(self, attempts: int, last: PlanError) -> None:
        self.attempts = attempts
        self.last = last
        summary = f"the model wrote no valid plan in {plural(attempts, 'attempt')}; last attempt"
        super().__init__(f"{summary}: {last.summary}", last.diagnostics)


class ExecutionError(LLAssemblyError):
    """A valid plan failed while running.

    Attributes:
        line: 1-based line in the model's reply of the instruction that failed (0 if unknown).
        source: The source text of that instruction.
    """

    def __init__(self, message: str, *, line: int = 0, source: str = "") -> None:
        self.line = line
        self.source = source
        self.detail = message
        where = f"line {line}: " if line else ""
        shown = f" ({source})" if source else ""
        super().__init__(f"{where}{message}{shown}")


class AsmRuntimeError(ExecutionError):
    """An instruction met a value it cannot work with (arithmetic on a string, empty stack...).
    ``words``: why, from the plan's text alone (never a value met), for the planner model."""

    def __init__(self, message: str, *, line: int = 0, source: str = "", words: str = "") -> None:
        self.words = words or "the instruction met a value it cannot work with"
        super().__init__(message, line=line, source=source)


class ToolArgumentError(ExecutionError):
    """A value popped for a tool does not fit the tool's parameter."""

    def __init__(
        self, message: str, *, tool: str, argument: str, line: int = 0, source: str = ""
    ) -> None:
        self.tool = tool
        self.argument = argument
        super().__init__(message, line=line, source=source)


class CallNotRun(ExecutionError):
    """A plan's call was not run because a person or a middleware decided so (a reviewer rejected
    it, a limit refused it): a decision, not a fault of the tool. ``reason`` is what they said."""

    def __init__(self, tool: str, reason: str, *, line: int = 0, source: str = "") -> None:
        self.tool = tool
        self.reason = reason.strip() or "no reason given"
        super().__init__(f"the call of {tool} was not run: {self.reason}", line=line, source=source)


class DataFlowRefused(CallNotRun):
    """A data-flow policy refused a call before it ran: an argument derives from the result of
    a tool the policy does not allow there (see :func:`~llassembly.only_from`).

    Attributes:
        tool: The tool that was not called.
        argument: The argument the policy guards.
        value: The argument's value, shown short (``'eve@evil.example'``).
        sources: The tools whose results the argument's value derives from, sorted.
        policy: The policy, as written (``only_from('send_email', 'to', ['list_contacts'])``).
    """

    def __init__(
        self,
        tool: str,
        argument: str,
        value: str,
        sources: list[str],
        policy: str,
        rule: str,
        *,
        line: int = 0,
        source: str = "",
    ) -> None:
        self.argument = argument
        self.value = value
        self.sources = list(sources)
        self.policy = policy
        results = "results" if len(sources) != 1 else "result"
        reason = (
            f"its argument {argument!r} ({value}) derives from the {results} of "
            f"{', '.join(sources)}, and the data-flow policy {policy} {rule}"
        )
        super().__init__(tool, reason, line=line, source=source)


class ToolExecutionError(ExecutionError):
    """A tool raised ``original`` (also the ``__cause__``); ``exception`` is its class's name."""

    def __init__(
        self, tool: str, original: BaseException, *, line: int = 0, source: str = ""
    ) -> None:
        self.tool = tool
        self.original = original
        self.exception = type(original).__name__
        message = f"tool {tool!r} raised {type(original).__name__}: {safe_text(original)}"
        super().__init__(message, line=line, source=source)


class QueryFailed(ToolExecutionError):
    """A query (``CALL query_text``) got no value of its shape from its model: its answers
    were refused (after the one retry), or the model raised. ``reason`` says why, ``attempts``
    how many model calls it made. A tool failure: ``on_tool_error`` decides what follows."""

    def __init__(
        self, tool: str, reason: str, *, attempts: int = 0, line: int = 0, source: str = ""
    ) -> None:
        self.tool = tool
        self.reason = reason.strip() or "no reason given"
        self.attempts = attempts
        self.original = RuntimeError(self.reason)
        message = f"{tool} got no answer of the shape asked for: {self.reason}"
        ExecutionError.__init__(self, message, line=line, source=source)


class BudgetExceeded(ExecutionError):
    """A run-time budget ran out. ``budget`` names it (each subclass's, given as a class
    keyword); ``limit`` and ``reached`` are the numbers."""

    budget: str = "budget"

    def __init_subclass__(cls, budget: str = "budget", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.budget = budget

    def __init__(self, limit: float, reached: float, *, line: int = 0, source: str = "") -> None:
        self.limit = limit
        self.reached = reached
        message = f"{self.budget} budget exceeded: limit {limit}, reached {reached}"
        super().__init__(message, line=line, source=source)


class InstructionBudgetExceeded(BudgetExceeded, budget="max_instructions_to_exec"):
    """More instructions would run than ``max_instructions_to_exec`` allows."""


class ToolCallBudgetExceeded(BudgetExceeded, budget="max_tool_calls"):
    """More tool calls would be made than ``max_tool_calls`` allows."""


class StackDepthExceeded(BudgetExceeded, budget="max_stack_depth"):
    """The data stack plus the return stack would grow past ``max_stack_depth``."""


class WallClockExceeded(BudgetExceeded, budget="max_seconds"):
    """The plan ran longer than ``max_seconds``."""


# -- an error as plain data, and back -------------------------------------------------------------


class Failure(TypedDict):
    """Why a plan stopped, as plain data (the one form every path and every checkpoint keeps).

    Attributes:
        type: The error's class name (``ToolExecutionError``, ``InstructionBudgetExceeded``,
            ...), or ``RepairsExhausted`` / ``PlanNotApproved`` for a plan that never ran.
        message: The error's full text.
        detail: What went wrong, without the line prefix.
        line: Line of the plan it happened on (0 when none).
        source: That line's instruction.
        problems: The problems of a plan that never ran.

    The other keys are the error's own attributes (``tool``, ``argument``, ``limit``, ...).
    """

    type: str
    message: str
    detail: str
    line: int
    source: str
    problems: NotRequired[list[str]]
    tool: NotRequired[str]
    argument: NotRequired[str]
    budget: NotRequired[str]
    limit: NotRequired[float]
    reached: NotRequired[float]
    reason: NotRequired[str]
    attempts: NotRequired[int]
    value: NotRequired[str]
    sources: NotRequired[list[str]]
    policy: NotRequired[str]
    exception: NotRequired[str]
    words: NotRequired[str]


_RECORD_KEYS: Final = ("type", "message", "detail", "line", "source", "problems")
_ATTRIBUTES: Final = tuple(key for key in Failure.__annotations__ if key not in _RECORD_KEYS)
"""The keys of a :class:`Failure` that are an error's own attributes."""


def failure_of(error: ExecutionError) -> Failure:
    """The plain-data record of an error raised while a plan ran (see :func:`error_of`)."""
    failure = Failure(
        type=type(error).__name__,
        message=str(error),
        detail=error.detail,
        line=error.line,
        source=error.source,
    )
    for attr in _ATTRIBUTES:
        if hasattr(error, attr):
            failure[attr] = getattr(error, attr)  # type: ignore[literal-required,unused-ignore]
    return failure


def error_of(failure: Mapping[str, Any]) -> ExecutionError:
    """The error a :class:`Failure` describes, rebuilt where the live exception is gone (after
    a checkpoint, in another process): its class by name, its attributes, its message."""
    classes = [ExecutionError]
    for known in classes:  # every subclass, found as the list grows
        classes.extend(known.__subclasses__())
    cls = {c.__name__: c for c in classes}.get(str(failure.get("type")), ExecutionError)
    error = cls.__new__(cls)
    ExecutionError.__init__(
        error,
        str(failure.get("detail") or failure.get("message") or "the plan failed"),
        line=int(failure.get("line", 0) or 0),
        source=str(failure.get("source", "")),
    )
    for attr in _ATTRIBUTES:
        if attr in failure:
            setattr(error, attr, failure[attr])
    if isinstance(error, ToolExecutionError):
        error.original = RuntimeError(str(failure.get("detail", "")))
    return error
