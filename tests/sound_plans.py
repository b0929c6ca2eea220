"""Random plans that verify, for the summary's differential test (``test_summary_sound.py``).

A plan is a few *segments*, each a shape models write: moves and arithmetic on integer
registers, tool calls whose results are popped or read in ``EAX`` (the EAX convention),
registers saved on the stack around a call, branches on a compare, loops counted by ``LOOP``
or by a register, subroutines called from several places, memory (writable, read-only, through
a register), ``SETcc``/``CMOVcc``, strings for the ``send`` tool, structured values (paths read
and written in the JSON ``R6`` holds, ``LEN``, ``HAS``, a ``rec`` result read by path), text
(templates, ``FIND``, ``SUBSTR``, ``NUM``, texts ordered by ``CMP``, ``KEYS``), ``NONE`` for
an argument with a default or ``CALL opt, 0`` leaving it out, a call that may fail tested with
``JC``, ``SETC`` or ``CMOVNC``, and a tool's result kept below many values on the stack (more
than the summary follows, sometimes) while a segment runs. Segments nest (a branch, a loop, a
subroutine or a deep stack holds one). Every plan verifies by construction: integer registers
only ever hold integers, every ``POP`` has its ``PUSH``, every conditional follows a ``CMP``
(or a tested ``CALL``).

The tools return what the test draws for them: random integers and strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from llassembly.machine.emulator import Failed
from llassembly.machine.externs import Extern, externs_from

__all__ = ["EXTERNS", "RESULTS", "RUN_LIMITS", "SOUND_LIMITS", "Plan", "plans"]


def get() -> int:
    """A reading."""
    return 0


def twice(x: int) -> int:
    """Something of x."""
    return x


def pair(a: int, b: int) -> tuple[int, int]:
    """Two numbers."""
    return a, b


def name() -> str:
    """Some text."""
    return ""


def put(amount: int) -> None:
    """Move an amount."""


def send(to: str, amount: int) -> None:
    """Send an amount to an address."""


def rec() -> dict[str, int]:
    """A record."""
    return {"a": 0}


def opt(amount: int = 1) -> None:
    """An amount, or its default."""


def flaky(x: int) -> int:
    """Something of x, when it does not fail."""
    return x


EXTERNS: dict[str, Extern] = externs_from([get, twice, pair, name, put, send, rec, opt, flaky])
FAILS = Failed(RuntimeError("down"))
"""What a call that fails gives the machine (``flaky``'s, whose failure every plan tests)."""
SOUND_LIMITS = {"max_instructions_to_exec": 3000, "max_tool_calls": 80}
RUN_LIMITS = {**SOUND_LIMITS, "max_stack_depth": 1000}
"""The budgets of a run: room on the stack for the values :func:`_deep` keeps."""

INTS = ("R1", "R2", "R3", "R4", "R5")
STRS = ("R7", "R8")
ADDRESSES = ('"a@ours.com"', '"b@ours.com"', '"x@evil.com"')

RESULTS = {
    "get": st.integers(-3, 5),
    "twice": st.integers(-3, 5),
    "pair": st.tuples(st.integers(-2, 3), st.integers(-2, 3)),
    "name": st.sampled_from(["a@ours.com", "x@evil.com", "1.10", ""]),
    "rec": st.fixed_dictionaries({"a": st.integers(-3, 5)}),
    "flaky": st.one_of(st.integers(-3, 5), st.just(FAILS)),
}
"""What each tool with results may return, drawn per call."""


@dataclass
class Plan:
    """A plan being written: its lines, its subroutines, fresh label numbers."""

    lines: list[str] = field(default_factory=list)
    subs: list[list[str]] = field(default_factory=list)
    labels: int = 0

    def label(self) -> str:
        self.labels += 1
        return f"L{self.labels}"

    def text(self) -> str:
        out = [
            "section .data",
            "    x dd 0",
            "    row dd 0, 0, 0",
            "section .rodata",
            "    table dd 10, 20, 30",
            "section .text",
            f"    MOV R7, {ADDRESSES[0]}",
            f"    MOV R8, {ADDRESSES[2]}",
            """    MOV R6, '{"a": 2, "l": [4, 5]}'""",
            *self.lines,
            "    HLT",
        ]
        for number, body in enumerate(self.subs):
            out += [f"S{number}:", *body, "    RET"]
        return "\n".join(out) + "\n"


_int = st.sampled_from(INTS)
_small = st.integers(-4, 9)
_value = st.one_of(_int, _small.map(str), st.just("ECX"))


@st.composite
def _arith(draw: st.DrawFn) -> list[str]:
    r, s = draw(_int), draw(_int)
    return [
        draw(
            st.sampled_from(
                [
                    f"MOV {r}, {draw(_small)}",
                    f"MOV {r}, {draw(_small)}",
                    f"MOV {r}, {draw(_small)}",
                    f"MOV {r}, {draw(_value)}",
                    f"MOV {r}, {draw(_value)}",
                    f"ADD {r}, {draw(_value)}",
                    f"SUB {r}, {draw(_value)}",
                    f"IMUL {r}, {draw(_small)}",
                    f"INC {r}",
                    f"DEC {r}",
                    f"XOR {r}, {r}",
                    f"AND {r}, {draw(st.integers(0, 7))}",
                    f"SHL {r}, 1",
                    f"NEG {r}",
                    f"MOD {r}, {draw(st.integers(2, 5))}",
                    f"LEA {r}, [{s} + 4]",
                    f"MOV {r}, ECX",
                    f"MOV {r}, EDX",
                    f"XCHG {r}, {s}",
                ]
            )
        )
    ]


_TOOLS = ("get", "twice", "pair", "name", "put", "send")


@st.composite
def _call(draw: st.DrawFn, tools: tuple[str, ...] = _TOOLS) -> list[str]:
    """A tool call, its result popped or read in EAX (then maybe kept in a register)."""
    tool = draw(st.sampled_from(tools))
    args = {
        "get": [],
        "twice": [draw(_value)],
        "pair": [draw(_value), draw(_value)],
        "name": [],
        "put": [draw(_value)],
        "send": [draw(st.sampled_from([*STRS, *ADDRESSES])), draw(_value)],
    }[tool]
    lines = [f"PUSH {a}" for a in args] + [f"CALL {tool}"]
    r = draw(_int)
    if tool == "pair":
        lines += [f"POP {r}", f"POP {draw(_int)}"]
    elif tool == "name":
        lines += [f"POP {draw(st.sampled_from(STRS))}"]
    elif tool in ("get", "twice"):
        lines += draw(
            st.sampled_from(
                [
                    [f"POP {r}"],
                    [f"MOV {r}, EAX"],  # the EAX convention: nothing on the stack
                    [f"ADD {r}, EAX"],
                    ["MUL EAX", f"MOV {r}, EAX"],
                ]
            )
        )
    return lines


@st.composite
def _saved(draw: st.DrawFn) -> list[str]:
    """Registers saved on the stack around a call and restored after it (then maybe one of
    them passed to a tool)."""
    saved = draw(st.lists(_int, min_size=1, max_size=3, unique=True))
    inner = draw(_call(("get", "twice", *_TOOLS)))  # mostly a call with a result
    lines = [f"PUSH {r}" for r in saved] + inner + [f"POP {r}" for r in reversed(saved)]
    if draw(st.booleans()):
        lines += [f"PUSH {draw(st.sampled_from(saved))}", "CALL put"]
    return lines


@st.composite
def _c_style(draw: st.DrawFn) -> list[str]:
    """As C code calls: registers saved, a call whose result comes back in EAX, the registers
    restored, then used."""
    saved = draw(st.lists(_int, min_size=2, max_size=3, unique=True))
    tool = draw(st.sampled_from(["get", "twice"]))
    args = [f"PUSH {draw(_value)}"] if tool == "twice" else []
    keep = draw(st.sampled_from([r for r in INTS if r not in saved]))
    return [
        *[f"PUSH {r}" for r in saved],
        *args,
        f"CALL {tool}",
        f"MOV {keep}, EAX",
        *[f"POP {r}" for r in reversed(saved)],
        f"PUSH {draw(st.sampled_from(saved))}",
        "CALL put",
    ]


@st.composite
def _stack(draw: st.DrawFn) -> list[str]:
    """Values put on the stack and taken back, maybe in another order."""
    values = draw(st.lists(_value, min_size=1, max_size=3))
    targets = draw(st.lists(_int, min_size=len(values), max_size=len(values)))
    return [f"PUSH {v}" for v in values] + [f"POP {r}" for r in targets]


@st.composite
def _memory(draw: st.DrawFn) -> list[str]:
    r, s = draw(_int), draw(_int)
    return draw(
        st.sampled_from(
            [
                [f"MOV [x], {r}"],
                [f"MOV {r}, [x]"],
                ["INC dword [x]"],
                [f"MOV {r}, [table + {4 * draw(st.integers(0, 2))}]"],
                [f"MOV [row + {4 * draw(st.integers(0, 2))}], {s}"],
                [f"MOV {r}, [row + 4]"],
                ["LEA ESI, [table]", f"MOV {r}, [ESI + 8]"],
                [f"MOV ESI, {draw(st.integers(0, 2))}", f"MOV {r}, [row + ESI*4]"],
            ]
        )
    )


@st.composite
def _structured(draw: st.DrawFn) -> list[str]:
    """Paths into the JSON ``R6`` holds (its ``a`` and ``l`` elements stay integers), a tool's
    record read by path, text built and searched, ``NONE`` for an argument with a default."""
    r = draw(_int)
    return draw(
        st.sampled_from(
            [
                [f"MOV {r}, R6.a"],
                [f"MOV {r}, R6.l[{draw(st.integers(-2, 1))}]"],
                [f"LEN {r}, R6.l"],
                [f"MOV R6.a, {draw(_value)}"],
                [f"MOV R6.l[1], {draw(_value)}"],
                [f'HAS {r}, R6, "{draw(st.sampled_from(["a", "b"]))}"'],
                ["PUSH R6.l[0]", "CALL put"],
                ["CALL rec", "POP R9", f"MOV {r}, R9.a"],
                ["CALL rec", f"MOV {r}, EAX.a"],
                [f'MOV R7, "x{{{r}}}@ours.com"', f'FIND {r}, R7, "@"'],
                [f"SUBSTR R8, R7, 0, {draw(st.integers(0, 3))}", f"LEN {r}, R8"],
                [f'NUM {r}, "1{draw(st.integers(0, 9))}"'],
                [f'PUSH "{{{r}}}"', "POP R8"],
                ["PUSH NONE", "CALL opt"],
                [f"PUSH {draw(_value)}", "CALL opt"],
                ["CALL opt, 0"],
                [f"PUSH {draw(_value)}", "CALL opt, 1"],
                ["KEYS R8, R6", f"LEN {r}, R8"],
                [f'MOV R8, "{draw(st.sampled_from(ADDRESSES))[1:-1]}"', "CMP R7, R8", f"SETL {r}"],
            ]
        )
    )


@st.composite
def _tested(draw: st.DrawFn, plan: Plan) -> list[str]:
    """A call that may fail, tested right after it: its results are NONE then (dropped)."""
    r, s, call = draw(_int), draw(_int), ["PUSH " + draw(_value), "CALL flaky"]
    failed, done = plan.label(), plan.label()
    after = [f"MOV {r}, -1", f"{done}:"]
    return draw(
        st.sampled_from(
            [
                [*call, f"JC {failed}", f"POP {r}", f"JMP {done}", f"{failed}:", "POP R0", *after],
                [*call, f"JNC {done}", "POP R0", f"PUSH {s}", f"{done}:", f"POP {r}"],
                [*call, f"SETC {r}", "POP R0"],
                [*call, f"CMOVNC {r}, {s}", "POP R0"],
            ]
        )
    )


@st.composite
def _flags(draw: st.DrawFn) -> list[str]:
    r, s, t = draw(_int), draw(_int), draw(_int)
    test = draw(st.sampled_from(["SETL", "SETE", "SETGE", "CMOVG", "CMOVNE", "CMOVLE"]))
    return [f"CMP {r}, {draw(_value)}", f"{test} {t}" if test[0] == "S" else f"{test} {t}, {s}"]


def _segment(plan: Plan, depth: int, counting: bool = False) -> st.SearchStrategy[list[str]]:
    """One segment; ``counting``: inside a ``LOOP``, where nothing may write ECX."""
    simple = [_arith(), _arith(), _call(), _call(), _saved(), _c_style(), _stack(), _memory()]
    simple += [_flags(), _structured(), _tested(plan)]
    if depth >= 2:
        return st.one_of(*simple)
    nested = [
        _branch(plan, depth, counting),
        _counted(plan, depth, counting),
        _subroutine(plan, depth),
        _deep(plan, depth, counting),
    ]
    if not counting:  # the only writer of ECX
        nested.append(_loop(plan, depth))
    return st.one_of(*simple, *nested)


@st.composite
def _block(draw: st.DrawFn, plan: Plan, depth: int, counting: bool = False) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        lines += draw(_segment(plan, depth, counting))
    return lines


@st.composite
def _branch(draw: st.DrawFn, plan: Plan, depth: int, counting: bool) -> list[str]:
    skip = plan.label()
    jump = draw(st.sampled_from(["JE", "JNE", "JL", "JGE", "JG"]))
    head = [f"CMP {draw(_int)}, {draw(_value)}", f"{jump} {skip}"]
    return head + draw(_block(plan, depth + 1, counting)) + [f"{skip}:"]


@st.composite
def _loop(draw: st.DrawFn, plan: Plan, depth: int) -> list[str]:
    """``LOOP``: ECX counts the rounds (nothing in the body writes ECX)."""
    top = plan.label()
    body = draw(_block(plan, depth + 1, counting=True))
    # what the count left: read after the loop, or passed on
    after = draw(st.sampled_from([[], [f"MOV {draw(_int)}, ECX"], ["PUSH ECX", "CALL put"]]))
    return [f"MOV ECX, {draw(st.integers(1, 3))}", f"{top}:", *body, f"LOOP {top}", *after]


@st.composite
def _counted(draw: st.DrawFn, plan: Plan, depth: int, counting: bool) -> list[str]:
    """A loop counted by its own register up to a number."""
    top, counter = plan.label(), f"R{10 + depth}"
    body = draw(_block(plan, depth + 1, counting))
    limit = draw(st.integers(1, 3))
    tail = [f"INC {counter}", f"CMP {counter}, {limit}", f"JL {top}"]
    return [f"MOV {counter}, 0", f"{top}:", *body, *tail]


@st.composite
def _deep(draw: st.DrawFn, plan: Plan, depth: int, counting: bool) -> list[str]:
    """A value (a tool's result, or one the summary may know) kept below many values while a
    segment runs, then passed to a tool: a few values, more than the 64 the summary once
    followed, or more than it follows at all (``MAX_FOLLOWED_STACK``, 256)."""
    first = draw(st.sampled_from([["CALL get"], [f"PUSH {draw(_value)}"]]))
    many = draw(st.sampled_from([2, 70, 300]))
    body = draw(_block(plan, depth + 1, counting))
    kept, done = draw(_int), plan.label()  # the jump ends a result read in EAX in the body
    below = [*["PUSH 0"] * many, *body, f"JMP {done}", f"{done}:", *["POP R0"] * many]
    return [*first, *below, f"POP {kept}", f"PUSH {kept}", "CALL twice", f"POP {kept}"]


@st.composite
def _subroutine(draw: st.DrawFn, plan: Plan, depth: int) -> list[str]:
    """A subroutine, written once and called from here (and maybe from later segments)."""
    if plan.subs and draw(st.booleans()):
        number = draw(st.integers(0, len(plan.subs) - 1))
    else:
        body = draw(_block(plan, 2))  # no calls of subroutines inside: no recursion
        plan.subs.append(body)
        number = len(plan.subs) - 1
    return [f"CALL S{number}"]


@st.composite
def plans(draw: st.DrawFn) -> str:
    """The text of a random plan that verifies (see the module doc)."""
    plan = Plan()
    for reg in INTS:  # models set their registers up first, most of the time
        if draw(st.booleans()):
            plan.lines.append(f"MOV {reg}, {draw(_small)}")
    for _ in range(draw(st.integers(1, 6))):
        plan.lines += draw(_segment(plan, 0))
    return plan.text()
