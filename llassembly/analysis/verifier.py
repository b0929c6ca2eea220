"""Verifier: reject a bad plan before any tool runs, listing every problem at once.

Two stages after a size check (see "Checks before the run" in ``docs/language.md``):

* size: a plan of more than :data:`~llassembly.language.limits.MAX_PLAN_INSTRUCTIONS`
  instructions is refused at once, with that one problem;
* structure: unknown instructions, operand count and kind, ``CALL`` targets, jump labels,
  labels defined twice or clashing with data labels, a ``global`` naming no code label;
* flow, only when the structure leaves the control flow well defined (the path analysis is
  :mod:`llassembly.analysis.flow`, over the graph of :mod:`llassembly.analysis.cfg`): stack
  underflow, jumps with no flags set, ordered jumps after a compare of strings, arithmetic on
  strings and subroutines running past the end, each on some path; loops that can never end.
  A plan the path analysis cannot follow within its limits (nesting, states, steps) is
  refused, saying which limit.

Example:
    >>> from llassembly.parser import parse
    >>> check(parse("POP R1\\nHLT"), {})[0].message
    'POP on an empty stack: on some path nothing is on the stack when this line runs'
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from llassembly.analysis._path_problems import flow_problems, loop_problems, mnemonic
from llassembly.analysis.cfg import control_flow
from llassembly.analysis.flow import (
    MAX_CALL_DEPTH,
    MAX_STATES,
    explore,
)
from llassembly.analysis.layout import (
    MAX_MEMORY_CELLS,
    layout_of,
    literal_zero,
)
from llassembly.analysis.placeholders import placeholder_problems
from llassembly.analysis.queries import query_result_shapes, query_sites
from llassembly.analysis.toolset import tool_shapes
from llassembly.analysis.typecheck import type_problems
from llassembly.errors import (
    Diagnostic,
    PlanRejected,
)
from llassembly.language.instructions import (
    MNEMONICS,
    OPCODE_INFO,
    Opcode,
    OperandKind,
)
from llassembly.language.limits import MAX_PLAN_INSTRUCTIONS
from llassembly.language.program import (
    Imm,
    Instruction,
    Mem,
    Name,
    Operand,
    Path,
    Program,
    Reg,
    Template,
    ToolShape,
    find_tool,
)
from llassembly.language.templates import has_placeholders

__all__ = ["MAX_CALL_DEPTH", "MAX_DIAGNOSTICS", "MAX_STATES", "check", "verify"]

MAX_DIAGNOSTICS = 1000
"""Most problems one check keeps (a hostile plan can have one per character); the rest are
counted in a last diagnostic."""

_KIND_WORDS: dict[OperandKind, str] = {
    "reg": "a destination register",
    "value": "a value",
    "label": "a label",
    "target": "a tool name or a label",
    "mem": "a memory operand [...]",
}
_OPCODE_LIST = ", ".join(op.value for op in Opcode)


_mnemonic = mnemonic


def _names(names: list[str], none: str) -> str:
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return shown or none


class _Checker:
    """One verification: the program, the tools and what has been found so far."""

    def __init__(self, program: Program, tools: Mapping[str, ToolShape]) -> None:
        self.program = program
        self.tools = tools
        self.found: list[Diagnostic] = []
        self.not_kept = 0  # problems found beyond MAX_DIAGNOSTICS
        self.structural = False  # a fault that makes the control flow meaningless
        self.flow = control_flow(program, tools)
        self.layout = layout_of(program, tools)

    def report(self, line: int, column: int, message: str, *, structural: bool = False) -> None:
        self.structural = self.structural or structural
        if len(self.found) >= MAX_DIAGNOSTICS:  # a hostile plan: count the rest, keep none
            self.not_kept += 1
            return
        self.found.append(Diagnostic(line, column, message, self.program.source_of(line)))

    def column_of(self, ins: Instruction, position: int) -> int:
        columns = ins.operand_columns
        return columns[position] if position < len(columns) else ins.column

    # -- structure --------------------------------------------------------------------------

    def check_unknown(self) -> None:
        hints: dict[str, str] = {}  # one suggestion per distinct word (a hostile plan repeats)
        for unknown in self.program.unknown:
            if len(self.found) >= MAX_DIAGNOSTICS:  # counted, not listed: no suggestion needed
                self.report(unknown.line, unknown.column, "", structural=True)
                continue
            word = unknown.mnemonic.upper()
            if word not in hints:
                close = difflib.get_close_matches(word, MNEMONICS, n=3)
                close.sort(key=lambda m: m[0] != word[0])  # MOVE: MOV rather than CMOVE
                hints[word] = f"did you mean {close[0]}? " if close else ""
            hint = hints[word]
            message = (
                f"unknown instruction {unknown.mnemonic!r}; {hint}"
                f"the instructions are {_OPCODE_LIST}"
            )
            self.report(unknown.line, unknown.column, message, structural=True)

    def check_labels(self) -> None:
        program = self.program
        for key, sites in program.label_lines.items():
            if not sites:
                continue
            name = program.label_names.get(key, key)
            (first_line, _), *again = sites
            per_line: dict[int, list[int]] = {}
            for line, column in again:
                per_line.setdefault(line, []).append(column)
            for line, columns in per_line.items():  # one report per line, however many
                again_here = (
                    f"again ({len(columns)} times on this line)" if len(columns) > 1 else "twice"
                )
                message = (
                    f"label {name!r} is defined {again_here} (first on line {first_line}); "
                    "rename one"
                )
                self.report(line, columns[0], message, structural=True)
            if key in program.data:
                line, column = sites[0]
                message = f"{name!r} is both a code label and a data label; rename one of them"
                self.report(line, column, message)

    def check_operands(self) -> None:
        for index, ins in enumerate(self.program.instructions):
            info = OPCODE_INFO[ins.op]
            given = ins.operands
            wanted = info.accepts(len(given))
            if wanted is None:
                wanted = info.operands
                kinds = " or ".join(
                    "(" + (" and ".join(_KIND_WORDS[k] for k in shape) or "nothing") + ")"
                    for shape in (info.operands, *info.forms)
                )
                count = len(info.operands)
                column = self.column_of(ins, count) if len(given) > count else ins.column
                numbers = sorted({count, *(len(form) for form in info.forms)})
                takes = " or ".join(str(n) for n in numbers)
                message = (
                    f"{_mnemonic(ins)} takes {takes} operand{'' if numbers == [1] else 's'} "
                    f"{kinds} but {len(given)} {'was' if len(given) == 1 else 'were'} given"
                )
                self.report(ins.line, column, message, structural=True)
                continue
            for position, (kind, operand) in enumerate(zip(wanted, given, strict=True)):
                column = self.column_of(ins, position)
                if info.variadic and position:  # a placeholder of SAY's text
                    self.check_placeholder(index, ins, position, column)
                else:
                    self.check_operand(index, ins, kind, operand, column)
            if info.divides and literal_zero(given[-1], self.program):
                message = (
                    f"{_mnemonic(ins)} divides by {given[-1]}, which is 0: division by zero; "
                    "divide by a number that is not 0 (CMP it with 0 and jump around first)"
                )
                self.report(ins.line, self.column_of(ins, len(given) - 1), message)

    def check_operand(
        self, index: int, ins: Instruction, kind: OperandKind, operand: Operand, column: int
    ) -> None:
        line, op = ins.line, _mnemonic(ins)
        key = operand.name.lower() if isinstance(operand, Name) else ""
        if isinstance(operand, Path | Template):
            self.check_compound(index, ins, kind, operand, column)
        elif kind == "value" and ins.op is not Opcode.SAY and self.is_template_data(key):
            message = (
                f"{operand} holds text with placeholders ({{...}}), and only SAY fills them in "
                "from a data label; write the text in the instruction instead "
                f'(PUSH "... {{R1}} ..."), where placeholders are filled in'
            )
            self.report(line, column, message)
        elif kind in ("label", "target") and isinstance(operand, Mem):
            where = "a label of the plan" if kind == "label" else "a tool name or a label"
            message = (
                f"{op} needs {where}, not the memory operand {operand}: a plan cannot jump or "
                "CALL through an address; compare the value and jump to labels instead"
            )
            self.report(line, column, message, structural=True)
        elif isinstance(operand, Mem):
            self.check_memory(ins, kind, operand, column)
        elif kind == "mem":
            message = f"{op} needs a memory operand like [name + ESI*4], not {operand}"
            self.report(line, column, message)
        elif kind == "reg" and not isinstance(operand, Reg):
            self.check_destination(ins, operand, column)
        elif kind == "value" and isinstance(operand, Name) and key not in self.program.data:
            if key in self.layout.variables:
                return
            if key in self.program.labels:
                message = f"{operand.name!r} is a code label, not a value"
            elif find_tool(operand.name, self.tools) is not None:
                message = f"{operand.name!r} is a tool, not a value; CALL it and POP its result"
            else:
                message = (
                    f"unknown name {operand.name!r}: it is not a register, a number, "
                    "a string, a data label or a variable (a name written by MOV or POP "
                    "before it is read)"
                )
            self.report(line, column, message)
        elif kind == "label":
            if not isinstance(operand, Name):
                self.report(line, column, f"{op} needs a label, not {operand}", structural=True)
            elif key not in self.program.labels:
                labels = _names(list(self.program.label_names.values()), "none")
                message = f"jump to undefined label {operand.name!r}; labels: {labels}"
                self.report(line, column, message, structural=True)
        elif kind == "target":
            self.check_call(index, ins, operand, column)

    def names_nothing(self, name: Name) -> bool:
        key = name.name.lower()
        known = key in self.program.data or key in self.layout.variables
        return (
            not known
            and key not in self.program.labels
            and find_tool(name.name, self.tools) is None
        )

    def is_template_data(self, key: str) -> bool:
        value = self.program.data.get(key) if key else None
        return isinstance(value, str) and has_placeholders(value)

    def check_compound(
        self, index: int, ins: Instruction, kind: OperandKind, operand: Path | Template, column: int
    ) -> None:
        """A template (each placeholder is a value read) or a path (``R1.items[0].id``: its
        base and keys are read; written, its base is written too)."""
        if isinstance(operand, Template):
            at = operand.columns or (column,) * len(operand.fills)
            for fill, where in zip(operand.fills, at, strict=True):
                if isinstance(fill, Name) and self.names_nothing(fill):
                    message = (
                        f"{{{fill}}} in the text names no register, data label or variable; a "
                        "placeholder names a register ({R1}), a data label or variable ({best}), "
                        "memory ({[table + ESI*4]}) or a path ({R1.items[0].id}); write {{"
                        f"{fill}}}}} to keep the braces as text"
                    )
                    self.report(ins.line, where, message)
                else:
                    self.check_operand(index, ins, "value", fill, where)
            return
        if kind != "value" and kind != "reg":
            message = f"{_mnemonic(ins)} needs {_KIND_WORDS[kind]}, not the path {operand}"
            self.report(ins.line, column, message, structural=kind != "mem")
            return
        base = operand.base
        if kind == "reg" and not isinstance(base, Reg):
            self.check_operand(index, ins, "reg", base, column)
        elif not isinstance(base, Reg):
            self.check_operand(index, ins, "value", base, column)
        for step in operand.steps:
            if not isinstance(step, Imm):
                self.check_operand(index, ins, "value", step, column)

    def check_placeholder(self, index: int, ins: Instruction, position: int, column: int) -> None:
        """A ``{...}`` placeholder of a ``SAY`` text (the parser made it an operand)."""
        found = placeholder_problems(ins, position, self.program, self.tools, self.layout)
        for at, message in found:
            self.report(ins.line, self.column_of(ins, at), message)
        if not isinstance(ins.operands[position], Name):
            self.check_operand(index, ins, "value", ins.operands[position], column)

    def check_destination(self, ins: Instruction, operand: Operand, column: int) -> None:
        """A destination that is no register: a variable, or a one-cell writable label."""
        op = _mnemonic(ins)
        key = operand.name.lower() if isinstance(operand, Name) else ""
        label = self.layout.labels.get(key)
        if label is None:
            message = (
                f"the destination of {op} must be a register (R1..R100, EAX..EBP, xmm0..xmm15), "
                f"a memory operand ([name]) or a variable, not {operand}"
            )
        elif not label.writable:
            message = (
                f"{op} writes {operand}, which is read-only data (section .rodata or equ); "
                "keep values that change in section .data or in a register"
            )
        elif len(label.cells) != 1:
            message = (
                f"{operand} has {len(label.cells)} cells; write one of them: "
                f"[{operand} + i*{label.size}] (cell i is at byte i*{label.size})"
            )
        else:
            return
        self.report(ins.line, column, message)

    def check_memory(self, ins: Instruction, kind: OperandKind, mem: Mem, column: int) -> None:
        """A memory operand: a known data label, in bounds and at a cell where it is known."""
        if mem.label is None:
            return
        key = mem.label.lower()
        label = self.layout.labels.get(key)
        if label is None:
            if key in self.program.data:
                message = (
                    f"{mem.label} is a constant (equ), not memory; write {mem.label} without "
                    "brackets"
                )
            else:
                known = _names(
                    [k for k in self.layout.labels if k not in self.layout.variables], "none"
                )
                message = f"{mem} names no data label {mem.label!r}; data labels: {known}"
            self.report(ins.line, column, message)
            return
        if kind == "reg" and not label.writable:
            message = (
                f"{_mnemonic(ins)} writes {mem}, which is read-only data (section .rodata); "
                "put data that changes in section .data"
            )
            self.report(ins.line, column, message)
        if kind == "mem":  # LEA computes the address only: any offset is fine
            return
        size, cells = label.size, len(label.cells)
        if all(scale % size == 0 for scale in _scales(mem)) and mem.disp % size:
            message = (
                f"{mem} is at byte {mem.disp} (plus whole cells) of {mem.label}, not at a cell: "
                f"its cells are {size} bytes apart, so the offset must be a multiple of {size}"
            )
            self.report(ins.line, column, message)
        elif not mem.registers and not 0 <= mem.disp // size < cells:
            message = (
                f"{mem} reads cell {mem.disp // size} of {mem.label}, which has {cells} "
                f"(cells 0..{cells - 1}, at bytes 0..{(cells - 1) * size})"
            )
            self.report(ins.line, column, message)

    def check_memory_size(self) -> None:
        cells = self.layout.cells
        if cells > MAX_MEMORY_CELLS:
            line = max(label.line for label in self.layout.labels.values())
            message = (
                f"the data takes {cells} cells, more than the {MAX_MEMORY_CELLS} a plan may "
                "have; keep large data in tools and fetch what the plan needs"
            )
            self.report(line, 1, message)

    def check_call(self, index: int, ins: Instruction, operand: Operand, column: int) -> None:
        if not isinstance(operand, Name):
            message = f"CALL needs a tool name or a label, not {operand}"
            self.report(ins.line, column, message, structural=True)
            return
        if index in self.flow.ambiguous:
            message = (
                f"CALL {operand.name} is ambiguous: {operand.name!r} is both a tool and a code "
                "label; rename the label"
            )
            self.report(ins.line, column, message, structural=True)
        elif index not in self.flow.tools and index not in self.flow.targets:
            tools = _names(sorted(self.tools), "none")
            message = f"unknown tool {operand.name!r}; available tools: {tools}"
            self.report(ins.line, column, message, structural=True)

    # -- entry -------------------------------------------------------------------------------

    def check_entry(self) -> None:
        program, name = self.program, self.program.entry_name
        if name is None or name.lower() in program.labels:
            return
        what = "a data label, not a code label" if name.lower() in program.data else "no code label"
        labels = _names(list(program.label_names.values()), "none")
        message = (
            f"global {name} names {what}, so the plan has no entry point; put the label "
            f"{name}: on the instruction to start from, or remove this line (code labels: {labels})"
        )
        line, column = program.entry_site
        self.report(line, column, message)

    # -- flow -------------------------------------------------------------------------------

    def check_flow(self) -> None:
        """Walk the paths (see :mod:`llassembly.analysis.flow`) and report what they may do
        wrong."""
        found = explore(self.flow, self.layout)
        for line, column, message in flow_problems(self.flow, found, self.layout):
            self.report(line, column, message)
        instructions = self.program.instructions
        queries = query_sites(self.flow, self.layout)
        for pc, site in queries.items():  # a query's answer shape, known before the run
            if isinstance(site, str):
                self.report(instructions[pc].line, self.column_of(instructions[pc], 0), site)
        answers, skip = query_result_shapes(queries), frozenset(found.string_math)
        for problem in type_problems(self.flow, self.layout, skip, answers):
            ins = instructions[problem.pc]
            self.report(ins.line, self.column_of(ins, problem.position), problem.message)

    def check_loops(self) -> None:
        """Report every loop that can never end (see :attr:`ControlFlow.loops`)."""
        for line, column, message in loop_problems(self.flow):
            self.report(line, column, message)


def _size_problem(program: Program) -> Diagnostic | None:
    """The problem of a plan longer than :data:`MAX_PLAN_INSTRUCTIONS`, at its first
    instruction past the limit; ``None`` for one within it."""
    count = len(program.instructions)
    if count <= MAX_PLAN_INSTRUCTIONS:
        return None
    first = program.instructions[MAX_PLAN_INSTRUCTIONS]
    return Diagnostic(
        first.line,
        first.column,
        f"the plan has {count} instructions; at most {MAX_PLAN_INSTRUCTIONS} are accepted: "
        "repeat work with a loop or a subroutine instead of writing it out",
        program.source_of(first.line),
    )


def _scales(mem: Mem) -> list[int]:
    return [1 if reg is mem.base else mem.scale for reg in mem.registers]


def check(
    program: Program, tools: Mapping[str, ToolShape] | Iterable[ToolShape]
) -> tuple[Diagnostic, ...]:
    """Return every problem of ``program``, sorted by line and column (empty when it is fine).

    Args:
        program: The parsed plan.
        tools: The tools the plan may CALL: by name, or a list of tools (externs, or anything
            with a name, params and n_results; ``llassembly.check`` also takes functions and
            LangChain tools).

    Returns:
        One :class:`~llassembly.errors.Diagnostic` per problem.

    Raises:
        UsageError: ``tools`` is neither a mapping nor a list of tools.
    """
    by_name = tool_shapes(tools)
    too_long = _size_problem(program)
    if too_long is not None:  # refused before any of it is checked (a repair asks for less)
        return (too_long,)
    checker = _Checker(program, by_name)
    checker.check_unknown()
    checker.check_labels()
    checker.check_operands()
    checker.check_entry()
    checker.check_memory_size()
    if not checker.structural:
        checker.check_flow()
        checker.check_loops()
    unique = sorted(dict.fromkeys(checker.found), key=lambda d: (d.line, d.column))
    if checker.not_kept:
        last = unique[-1]
        more = f"... and {checker.not_kept} more problems, not listed; fix the ones above first"
        unique.append(Diagnostic(last.line, last.column, more))
    return tuple(unique)


def verify(program: Program, tools: Mapping[str, ToolShape] | Iterable[ToolShape]) -> None:
    """Check ``program`` and raise if anything is wrong.

    Args:
        program: The parsed plan.
        tools: The tools the plan may CALL, by name or as a list (see :func:`check`).

    Raises:
        PlanRejected: The plan has problems; ``diagnostics`` lists all of them.
        UsageError: ``tools`` is neither a mapping nor a list of tools.
    """
    diagnostics = check(program, tools)
    if diagnostics:
        raise PlanRejected(diagnostics)
