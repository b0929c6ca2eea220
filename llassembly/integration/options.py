"""The planner options, each declared once: name, type, default, documentation and check.

:class:`PlannerOptions` declares every option ``ToolsPlannerMiddleware``, ``ToolsPlannerNode``,
``AToolsPlannerNode`` and :func:`~llassembly.plan` take, and is what a planner keeps. From it
come the defaults of the classes' keyword parameters (written out in their signatures, for
editors and type checkers, as ``max_repairs: int = PlannerOptions.max_repairs``), the
``Args:`` entries of their docstrings (see :func:`document_options`) and :data:`OPTIONS`.
``tests/integration/test_options.py`` fails when a signature, a default or a doc disagrees with it.

Example:
    >>> PlannerOptions.max_repairs
    2
    >>> [option.name for option in OPTIONS][:3]
    ['infer_tools_messages', 'prompt_path', 'max_instructions_to_exec']
    >>> PlannerOptions(max_repairs=-1)
    Traceback (most recent call last):
    ...
    llassembly.errors.UsageError: max_repairs must be a non-negative integer, got -1
"""

from __future__ import annotations

import inspect
import textwrap
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar, get_args

from llassembly.analysis.policies import DataFlowPolicy, PlanPolicy, name_problems
from llassembly.compat import defines_hook
from llassembly.errors import UsageError
from llassembly.integration.approval import approval_option
from llassembly.integration.graph import GRANULARITIES, Granularity
from llassembly.language import limits
from llassembly.machine.emulator import check_parallel_tools

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


OnToolError: TypeAlias = Literal["stop", "raise", "replan"]
Execution: TypeAlias = Literal["agent", "graph"]
FinalAnswer: TypeAlias = Literal["plan", "model"]

ToolMiddleware: TypeAlias = Any  # an AgentMiddleware with wrap_tool_call / awrap_tool_call

T = TypeVar("T")

BUDGETS = ("max_instructions_to_exec", "max_tool_calls", "max_stack_depth")
"""The budget options, as a :class:`~llassembly.Plan` names its fields too."""


def run_budgets(holder: Any) -> dict[str, Any]:
    """The budgets of a run that ``holder`` (the options, a plan) keeps: the instructions' and
    the tool calls' (the stack's is the compiled program's)."""
    return {budget: getattr(holder, budget) for budget in BUDGETS if budget != "max_stack_depth"}


def _tool_middleware(name: str, given: tuple[Any, ...]) -> None:
    """Refuse a middleware whose work is in hooks ``tool_middleware`` never runs: one with no
    ``wrap_tool_call`` (nor ``awrap_tool_call``), and LangChain's approval in its default
    ``interrupt_mode="batched"``, which asks in ``after_model``."""
    if not isinstance(given, tuple):
        raise UsageError(f"{name} takes a list of middleware, got {given!r}")
    for middleware in given:
        label = f"{name}: {type(middleware).__name__}"
        if isinstance(middleware, type):
            raise UsageError(f"{name} takes middleware, not the class {middleware.__name__}")
        if not any(defines_hook(middleware, h) for h in ("wrap_tool_call", "awrap_tool_call")):
            raise UsageError(
                f"{label} has no wrap_tool_call hook, the only one {name} runs, so none of it "
                "would run: give it to create_agent's middleware (the planner's own limits: "
                "max_tool_calls, max_instructions_to_exec)"
            )
        if getattr(middleware, "interrupt_mode", None) == "batched":
            raise UsageError(
                f"{label} in interrupt_mode='batched' asks in after_model, which {name} does "
                "not run, so no call would be approved: give it interrupt_mode='per_call'"
            )


@dataclass(frozen=True)
class Option(Generic[T]):
    """One planner option, as :class:`PlannerOptions` declares it: its ``default`` is the
    same in every class that takes it, its ``doc`` one paragraph the classes' docstrings
    quote; ``check`` raises :class:`~llassembly.errors.UsageError` for a value out of range
    (called with the name and the value kept), ``keep`` turns an argument into the value
    :class:`PlannerOptions` keeps (a list of tool names into a tuple, for example)."""

    name: str
    default: T
    doc: str
    check: Callable[[str, Any], None] = lambda name, value: None  # (any value is accepted)
    keep: Callable[[Any], Any] = lambda value: value


def _option(default: Any, doc: str, **how: Callable[..., Any]) -> Any:
    """A field of :class:`PlannerOptions`: its default, and the rest of its declaration (its
    :class:`Option`'s ``check`` and ``keep``)."""
    return field(default=default, metadata={"doc": doc, **how})


def _must(ok: Callable[[Any], bool], what: str) -> Callable[[str, Any], None]:
    """The check that refuses a value unless ``ok(value)``, saying it must be ``what``."""

    def check(name: str, value: Any) -> None:
        if not ok(value):
            raise UsageError(f"{name} must be {what}, got {value!r}")

    return check


def _at_least(least: int, what: str) -> Callable[[str, Any], None]:
    return _must(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= least, what)


def _one_of(kind: Any) -> Callable[[str, Any], None]:
    """Checks that a value is one of the ``Literal`` ``kind`` allows (or of a tuple)."""
    choices = kind if isinstance(kind, tuple) else get_args(kind)
    return _must(lambda value: value in choices, f"one of {choices}")


_positive = _at_least(1, "a positive integer")
_non_negative = _at_least(0, "a non-negative integer")
_callables = _must(lambda v: all(map(callable, v)), "a list of callables (summary, program)")
_tool_names = _must(
    lambda v: isinstance(v, bool) or (isinstance(v, tuple) and all(isinstance(n, str) for n in v)),
    "True, False or tool names",
)
_chat_model = _must(
    lambda v: v is None or all(callable(getattr(v, m, None)) for m in ("invoke", "ainvoke")),
    "a chat model (a BaseChatModel) or None",
)


def _readable_file(name: str, value: Any) -> None:
    if value is not None and not Path(value).is_file():
        raise UsageError(f"{name} {str(value)!r} is not a readable file")


def check_tool_names(
    options: PlannerOptions, tools: Mapping[str, Any], *, offered: bool = False
) -> None:
    """Refuse an option that names a tool the planner does not have: a misspelt name would
    switch the gate it sets off without a word. Names match exactly (case included).

    Checked for ``approve_plan``, ``parallel_tools`` and every ``plan_policy`` rule that says
    which tools it is about (a ``tool_names`` attribute, as :func:`~llassembly.max_calls`
    and :func:`~llassembly.not_in_loop` have) and which of their arguments (a
    ``tool_arguments`` attribute of ``(tool, argument)`` pairs, as the data-flow policies
    :func:`~llassembly.only_from` and :func:`~llassembly.never_from` have).

    ``offered``: ``tools`` are those one model request offers, which a tool selector before
    the planner may have narrowed. A tool they lack is then warned of (``UserWarning``), not
    refused: a plan cannot call it there, so what the option says of it holds (unless they
    hold it but for case: a plan calls it by either name, so that is refused).

    Raises:
        UsageError: An option names an unknown tool or argument; the message names it, the
            option, and the closest names.
    """
    lacking = "this model request does not offer" if offered else "is not among the tools"
    named: list[tuple[str, Any, Any]] = [
        (option, map(str, names) if isinstance(names, tuple) else (), ())
        for option in ("approve_plan", "parallel_tools")
        if (names := getattr(options, option))
    ]
    for policy in options.plan_policy:
        shown = policy if isinstance(policy, DataFlowPolicy) else None
        label = f"plan_policy {shown or getattr(policy, '__qualname__', type(policy).__name__)}"
        pairs = [(str(t), str(a)) for t, a in getattr(policy, "tool_arguments", ())]
        named.append((label, map(str, getattr(policy, "tool_names", ())), pairs))
    for subject, names, pairs in named:
        for sure, problem in name_problems(subject, tools, names, pairs, lacking):
            if sure or not offered:
                raise UsageError(problem)
            warnings.warn(f"{problem}; it applies where a request offers that tool", stacklevel=2)


@dataclass(frozen=True, kw_only=True)
class PlannerOptions:
    """Every planner option, declared once (see the module docstring); a planner keeps them.

    Raises:
        UsageError: An option is out of range.
    """

    infer_tools_messages: bool = _option(
        True,
        "Keep an ``AIMessage``/``ToolMessage`` pair per executed call (``False`` keeps only "
        "the plan and the final message once the turn ends).",
    )

    prompt_path: str | Path | None = _option(
        None,
        "A template file replacing the built-in prompt (``{context}`` and "
        "``{extern_functions}`` are filled in).",
        check=_readable_file,
    )

    max_instructions_to_exec: int = _option(
        limits.DEFAULT_MAX_INSTRUCTIONS, "Instruction budget of a plan.", check=_positive
    )

    max_repairs: int = _option(
        2,
        "How many times the model may fix a plan that does not parse or verify.",
        check=_non_negative,
    )

    on_tool_error: OnToolError = _option(
        "stop",
        "When a tool fails (it raised, a limit refused the call, a person rejected it) or a "
        'budget runs out: ``"stop"`` ends the turn with a message naming the tool, line and '
        'error; ``"raise"`` re-raises after the completed calls are saved (from a node, the '
        'error carries them as ``messages``); ``"replan"`` asks the model for a new plan with '
        "the results so far.",
        check=_one_of(OnToolError),
    )

    max_replans: int = _option(
        1, 'Most new plans per turn under ``"replan"``.', check=_non_negative
    )

    max_tool_calls: int = _option(
        limits.DEFAULT_MAX_TOOL_CALLS, "Tool-call budget of a plan.", check=_positive
    )

    max_stack_depth: int = _option(
        limits.DEFAULT_MAX_STACK_DEPTH, "Stack budget of a plan.", check=_positive
    )

    granularity: Granularity = _option(
        "block",
        'How a plan run as a graph (the nodes; the middleware with ``execution="graph"``) is '
        'checkpointed: ``"block"`` (a checkpointed step per tool call), ``"instruction"`` '
        '(a node per instruction) or ``"program"`` (one step).',
        check=_one_of(GRANULARITIES),
    )

    tool_middleware: tuple[ToolMiddleware, ...] = _option(
        (),
        "``wrap_tool_call`` middleware to apply to each call of a plan (e.g. "
        "``ToolRetryMiddleware``). On the middleware's agent path the agent's own middleware "
        "already wraps every plan call; these wrap plan calls only.",
        check=_tool_middleware,
        keep=lambda given: tuple(given) if isinstance(given, list | tuple) else given,
    )

    execution: Execution = _option(
        "agent",
        'Middleware only: ``"agent"`` (each call through the agent\'s tool node) or ``"graph"`` '
        "(the plan runs as a nested graph beside it; faster, but the agent's tool middleware, "
        "approvals and limits do not see its calls). The nodes always run plans as a graph.",
        check=_one_of(Execution),
    )

    approve_plan: bool | tuple[str, ...] = _option(
        False,
        "``True``: pause (``interrupt()``) before a plan's first call until a person "
        "approves, edits or rejects the whole plan (see ``docs/approval.md``); needs a "
        "checkpointer. A list of tool names: only plans that can call one of them.",
        check=_tool_names,
        keep=approval_option,
    )

    plan_policy: tuple[PlanPolicy, ...] = _option(
        (),
        "Rules ``(summary, program) -> problems`` (``llassembly.max_calls``, ``not_in_loop``, "
        "...); a plan with problems is refused before anything runs and the model repairs it. "
        "Data-flow "
        "policies (``only_from``, ``never_from``) are also checked before each call runs.",
        check=_callables,
        keep=tuple,
    )

    parallel_tools: bool | Literal["read_only"] | tuple[str, ...] = _option(
        False,
        'Tools whose calls may run together (``True``: all tools; ``"read_only"``: the '
        "tools whose metadata says ``readOnlyHint``, as MCP tools do): a call to one starts as "
        "soon as its arguments are known, and the plan runs on until it reads the result "
        "(see *Independent calls at once* in ``docs/language.md``); the calls started so far "
        "run at once, on the agent path as one ``AIMessage`` with several tool calls (the "
        "agent's tool node runs them together), when the plan runs as a graph on threads or "
        "with ``asyncio.gather``. The plan's meaning stays the sequential one; only the "
        "tools' own order of side effects may change. Budgets count every call.",
        check=lambda name, value: check_parallel_tools(value),
        keep=check_parallel_tools,
    )

    final_answer: FinalAnswer = _option(
        "plan",
        '``"plan"``: the turn ends with the plan\'s own answer (``SAY``), or a summary of its '
        'calls; ``"model"``: the model is called once more after the plan, with the calls and '
        "results as text, and its reply ends the turn (in the middleware, through the agent's "
        "model handler, so ``wrap_model_call`` middleware and call limits see it). With "
        "``create_agent(response_format=...)``, ``structured_response`` is filled from the "
        "plan's answer when it is JSON of the schema, else by that final call.",
        check=_one_of(FinalAnswer),
    )

    queries: bool = _option(
        False,
        "Let plans read prose: ``CALL query_text`` (the text, a question and the answer's shape "
        "pushed) asks a model with no tools, which sees only that text and question, for a "
        "value of the shape (a number, text, a boolean, an object of named fields); an answer "
        "that cannot be read as one is asked for once more, then the query fails as a tool "
        "would. Each query is a model call of the turn: counted, streamed (tagged "
        "``llassembly:query``) and checkpointed. A query changes nothing: under "
        '``parallel_tools`` (``True``, ``"read_only"``, or a list naming ``query_text``) '
        "independent queries are asked at once, in a batch of their own (never with tools).",
    )

    planner_sees_results: bool = _option(
        False,
        "Show the planner model the results of earlier calls (on repair, replan and in later "
        "turns; fenced as data, in the assistant's role). Weaker: by default the planner, which "
        "decides what runs, sees which calls ran and how they ended, never what a tool wrote, "
        "so no text inside a result can choose the next plan's calls (see docs/security.md).",
    )

    query_model: BaseChatModel | None = _option(
        None,
        "The chat model queries ask (``None``: the planner's own model); giving one turns "
        "``queries`` on.",
        check=_chat_model,
    )

    def __post_init__(self) -> None:
        for option in OPTIONS:
            option.check(option.name, getattr(self, option.name))
        if self.query_model is not None and not self.queries:
            object.__setattr__(self, "queries", True)

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> PlannerOptions:
        """The options in ``arguments`` (a constructor's ``locals()``), as :class:`PlannerOptions`
        keeps them; other names are ignored, missing options take their defaults.

        Raises:
            UsageError: An option is out of range.

        Example:
            >>> PlannerOptions.from_arguments({"self": None, "approve_plan": ["send"]}).approve_plan
            ('send',)
        """
        return cls(**{n: _BY_NAME[n].keep(v) for n, v in arguments.items() if n in _BY_NAME})


OPTIONS: tuple[Option[Any], ...] = tuple(
    Option(f.name, f.default, **f.metadata) for f in fields(PlannerOptions)
)
"""Every option, in declaration order."""

_BY_NAME: dict[str, Option[Any]] = {option.name: option for option in OPTIONS}


_INDENT = " " * 8
OPTIONS_LINE = "        (every planner option)"
"""The line of a class docstring's ``Args:`` that :func:`document_options` expands."""


def document_options(documented: T) -> T:
    """Class or function decorator: expand :data:`OPTIONS_LINE` in its docstring into one
    ``Args:`` entry per planner option it (a class: its ``__init__``) takes, in signature order.

    Raises:
        TypeError: The docstring has no :data:`OPTIONS_LINE`, or it takes a parameter that is
            neither documented in the docstring nor a planner option.
    """
    cls: Any = documented
    doc = cls.__doc__ or ""
    if OPTIONS_LINE not in doc:
        raise TypeError(f"{cls.__name__}'s docstring has no line {OPTIONS_LINE.strip()!r}")
    init = cls.__dict__["__init__"] if isinstance(cls, type) else cls
    params = [p for p in inspect.signature(init).parameters if p != "self"]
    for name in params:
        if name not in _BY_NAME and f"\n{_INDENT}{name}: " not in doc:
            raise TypeError(f"{cls.__name__}({name}=...) is neither documented nor an option")
    wrap = textwrap.TextWrapper(96, _INDENT, subsequent_indent=_INDENT + "    ")
    wrap.break_long_words = wrap.break_on_hyphens = False
    entries = [wrap.fill(f"{name}: {_BY_NAME[name].doc}") for name in params if name in _BY_NAME]
    cls.__doc__ = doc.replace(OPTIONS_LINE, "\n".join(entries))
    return documented
