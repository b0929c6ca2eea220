"""Verifier: reject a bad plan before any tool runs, listing every problem at once.

Three stages, as "Checks before the run" in ``docs/language.md`` lists them: the plan's size,
its structure, then (when the structure leaves the control flow well defined) its paths, over
the states of :mod:`llassembly.analysis.paths`: the stack, flags and variables of each path
and the types of values, in one walk (:mod:`.typecheck`), and loops that never end. A plan
the paths cannot be followed for within their limits is refused, saying which limit: a path
the analysis did not follow is never taken for a fine one.

Example:
    >>> from llassembly import parse
    >>> check(parse("POP R1\\nHLT"), {})[0].message
    'POP on an empty stack: on some path nothing is on the stack when this line runs'
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from llassembly.analysis.cfg import ControlFlow, control_flow, layout_of
from llassembly.analysis.paths import Paths, outermost, paths_of
from llassembly.analysis.queries import AnswerShape, query_sites
from llassembly.analysis.toolset import tool_shapes
from llassembly.analysis.typecheck import walk_paths
from llassembly.errors import Diagnostic, PlanRejected
from llassembly.language.instructions import MNEMONICS, OPCODE_INFO, Opcode, OperandKind
from llassembly.language.limits import (
    MAX_CALL_DEPTH,
    MAX_DIAGNOSTICS,
    MAX_MEMORY_CELLS,
    MAX_PLAN_INSTRUCTIONS,
    MAX_STATES,
    MAX_STEPS,
)
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
    arguments_of,
    fewest_arguments,
    find_tool,
)
from llassembly.language.templates import has_placeholders

_KIND_WORDS: dict[OperandKind, str] = {
    "reg": "a destination register",
    "value": "a value",
    "label": "a label",
    "target": "a tool name or a label",
    "mem": "a memory operand [...]",
    "count": "a number of arguments",
}
_OPCODE_LIST = ", ".join(op.value for op in Opcode)


def _names(names: list[str], none: str) -> str:
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return shown or none


def _column(ins: Instruction, position: int) -> int:
    """The column of operand ``position`` (of the instruction itself for -1)."""
    columns = ins.operand_columns
    return columns[position] if 0 <= position < len(columns) else ins.column


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

    def report_at(self, pc: int, message: str, position: int = -1) -> None:
        """:meth:`report` at operand ``position`` of instruction ``pc`` (-1: the instruction)."""
        ins = self.program.instructions[pc]
        self.report(ins.line, _column(ins, position), message)

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
                column = _column(ins, count) if len(given) > count else ins.column
                numbers = sorted({count, *(len(form) for form in info.forms)})
                takes = " or ".join(str(n) for n in numbers)
                message = (
                    f"{ins.mnemonic} takes {takes} operand{'' if numbers == [1] else 's'} "
                    f"{kinds} but {len(given)} {'was' if len(given) == 1 else 'were'} given"
                )
                self.report(ins.line, column, message, structural=True)
                continue
            for position, (kind, operand) in enumerate(zip(wanted, given, strict=True)):
                column = _column(ins, position)
                if info.variadic and position:  # a placeholder of SAY's text
                    self.check_placeholder(index, ins, position, column)
                else:
                    self.check_operand(index, ins, kind, operand, column)
            if info.divides and self.literal_zero(given[-1]):
                message = (
                    f"{ins.mnemonic} divides by {given[-1]}, which is 0: division by zero; "
                    "divide by a number that is not 0 (CMP it with 0 and jump around first)"
                )
                self.report(ins.line, _column(ins, len(given) - 1), message)

    def check_operand(
        self, index: int, ins: Instruction, kind: OperandKind, operand: Operand, column: int
    ) -> None:
        line, op = ins.line, ins.mnemonic
        key = operand.name.lower() if isinstance(operand, Name) else ""
        if isinstance(operand, Path | Template):
            self.check_compound(index, ins, kind, operand, column)
        elif (
            kind == "value"
            and ins.op is not Opcode.SAY
            and isinstance(text := self.program.data.get(key), str)
            and has_placeholders(text)
        ):
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
        elif kind == "value" and isinstance(operand, Name) and (named := self.no_value(operand)):
            message = {
                "label": f"{operand.name!r} is a code label, not a value",
                "tool": f"{operand.name!r} is a tool, not a value; CALL it and POP its result",
                "nothing": (
                    f"unknown name {operand.name!r}: it is not a register, a number, "
                    "a string, a data label or a variable (a name written by MOV or POP "
                    "before it is read)"
                ),
            }[named]
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
        elif kind == "count":
            self.check_count(index, ins, operand, column)

    def no_value(self, name: Name) -> str:
        """What a name read as a value names when it is no data label or variable: ``"label"``,
        ``"tool"`` or ``"nothing"``; ``""`` when it is one."""
        key = name.name.lower()
        if key in self.program.data or key in self.layout.variables:
            return ""
        if key in self.program.labels:
            return "label"
        return "tool" if find_tool(name.name, self.tools) is not None else "nothing"

    def literal_zero(self, operand: Operand) -> bool:
        """Whether an operand is the number 0 written in the program (a literal or constant)."""
        if isinstance(operand, Imm):
            return operand.value == 0  # text is never 0
        if isinstance(operand, Name):
            label = self.program.memory.get(operand.name.lower())
            writable = label is not None and label.writable
            return not writable and self.program.data.get(operand.name.lower()) == 0
        return False

    def check_compound(
        self, index: int, ins: Instruction, kind: OperandKind, operand: Path | Template, column: int
    ) -> None:
        """A template (each placeholder is a value read) or a path (``R1.items[0].id``: its
        base and keys are read; written, its base is written too)."""
        if isinstance(operand, Template):
            at = operand.columns or (column,) * len(operand.fills)
            for fill, where in zip(operand.fills, at, strict=True):
                if isinstance(fill, Name) and self.no_value(fill) == "nothing":
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
            message = f"{ins.mnemonic} needs {_KIND_WORDS[kind]}, not the path {operand}"
            self.report(ins.line, column, message, structural=kind != "mem")
            return
        if not isinstance(operand.base, Reg):  # read, or written (kind "reg")
            self.check_operand(index, ins, kind, operand.base, column)
        for step in (step for step in operand.steps if not isinstance(step, Imm)):
            self.check_operand(index, ins, "value", step, column)

    def check_placeholder(self, index: int, ins: Instruction, position: int, column: int) -> None:
        """A ``{...}`` placeholder of a ``SAY`` text (the parser made it an operand)."""
        first, operand = ins.operands[0], ins.operands[position]
        if isinstance(first, Name) and first.name.lower() in self.layout.live and position == 1:
            message = (
                f"SAY {first} fills in placeholders, but the plan also writes {first}; keep the "
                "answer text in its own data label and the values elsewhere"
            )
            self.report(ins.line, _column(ins, 0), message)
        if not isinstance(operand, Name):
            self.check_operand(index, ins, "value", operand, column)
        elif named := self.no_value(operand):
            what = {
                "label": "a code label, not a value",
                "tool": "a tool, not a value (CALL it and POP its result first)",
                "nothing": "no register, data label or variable",
            }[named]
            message = (
                f"{{{operand.name}}} in the answer text names {what}; a placeholder names a "
                "register ({R1}, {EAX}, {xmm0}), a data label or variable ({best}) or memory "
                "({[table + ESI*4]})"
            )
            self.report(ins.line, column, message)

    def check_destination(self, ins: Instruction, operand: Operand, column: int) -> None:
        """A destination that is no register: a variable, or a one-cell writable label."""
        op = ins.mnemonic
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
                f"{ins.mnemonic} writes {mem}, which is read-only data (section .rodata); "
                "put data that changes in section .data"
            )
            self.report(ins.line, column, message)
        if kind == "mem":  # LEA computes the address only: any offset is fine
            return
        size, cells = label.size, len(label.cells)
        scales = [1 if reg is mem.base else mem.scale for reg in mem.registers]
        if all(scale % size == 0 for scale in scales) and mem.disp % size:
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

    def check_count(self, index: int, ins: Instruction, operand: Operand, column: int) -> None:
        """``CALL tool, N``: ``N`` arguments pushed, the tool's required ones at least."""
        tool = self.flow.tools.get(index)
        if index in self.flow.targets:
            message = f"CALL {ins.operands[0]}, {operand}: a subroutine takes no count of arguments"
        elif tool is None:
            return  # the unknown tool is reported
        elif isinstance(operand, Imm) and arguments_of(tool, ins.operands) == operand.value:
            return
        else:
            names = [str(getattr(p, "name", p)) for p in tool.params]
            least, shown = fewest_arguments(tool), ", ".join(names) or "none"
            message = (
                f"CALL {tool.name}, {operand}: the count is how many arguments were pushed, a "
                f"whole number from {least} to {len(names)}: {tool.name} takes {shown}, and the "
                f"last ones may be left out ({', '.join(names[least:])}) to take the tool's "
                "defaults"
                if least < len(names)
                else f"CALL {tool.name}, {operand}: {tool.name} needs all its arguments "
                f"({shown}): push them and write CALL {tool.name}"
            )
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

    # -- paths ------------------------------------------------------------------------------

    def check_paths(self) -> None:
        """Walk the paths (see the module doc) and report what they may do wrong, written for
        the model that will fix the plan, and every mix of the EAX convention."""
        flow, instructions = self.flow, self.program.instructions
        paths = paths_of(flow)
        queries = query_sites(flow, self.layout)
        answers = {pc: s.shape() for pc, s in queries.items() if isinstance(s, AnswerShape)}
        walk = walk_paths(flow, self.layout, answers)
        if walk.stopped is not None:
            self.too_many(paths, walk.stopped)
        for call, reader, pop in flow.mixed:
            message = (
                f"this POP would take a value from the stack, but the result of CALL "
                f"{flow.tools[call].name} (line {instructions[call].line}) is read in EAX on line "
                f"{instructions[reader].line}, so it is not on the stack: use one way, either "
                "POP the result right after the CALL (POP EAX), or read it in EAX and do not POP"
            )
            self.report_at(pop, message)
        for (pc, position), shown in sorted(walk.unwritten_reads.items()):
            message = (
                f"{shown} is read here before it is written on some path; a variable (a name "
                f"that is no register or data label) must be set first, e.g. MOV {shown}, 0, or "
                f"declare it in section .data ({shown} dd 0)"
            )
            self.report_at(pc, message, position)
        for pc in walk.empty_pops:
            message = (
                "POP on an empty stack: on some path nothing is on the stack when this line runs"
            )
            self.report_at(pc, message + _in_loop(flow, pc))
        for pc, have in walk.short_calls.items():
            tool = flow.tools[pc]
            params = ", ".join(str(getattr(p, "name", p)) for p in tool.params)
            count, least = flow.stack_effect(pc)[0], fewest_arguments(tool)
            message = (
                f"CALL {tool.name} takes {count} value{'' if count == 1 else 's'} from the stack "
                f"({params}) but on some path only {have} {'is' if have == 1 else 'are'} there; "
                "PUSH the arguments, first parameter first, before the CALL"
            )
            if least < count:
                message += (
                    f" (to leave the last ones to the tool's defaults, push the first N, at least "
                    f"{least}, and write CALL {tool.name}, N)"
                )
            self.report_at(pc, message + _in_loop(flow, pc))
        for pc in walk.unset_jumps:
            fix = (
                "put a CMP before the jump (for example CMP R1, 0), or use JMP to always jump"
                if flow.effects[pc].flow != "next"
                else "put a CMP before it (for example CMP R1, 0)"
            )
            message = (
                f"{instructions[pc].mnemonic} tests the flags, but on some path no CMP, TEST "
                "or arithmetic (ADD, SUB, MUL, INC, DEC...) has run before it, so there is "
                f"nothing to test; {fix}"
            )
            self.report_at(pc, message)
        for pc, call in paths.off_end.items():  # a subroutine running past the end
            label = instructions[call].operands[0]
            message = (
                f"on some path the subroutine '{label}' (CALLed on line {instructions[call].line}) "
                "runs past the end of the program here without RET, which would stop the whole "
                "plan; end the subroutine with RET (or HLT to stop the plan on purpose)"
            )
            self.report_at(pc, message)
        for pc in paths.too_deep:
            label = instructions[pc].operands[0]
            message = (
                f"CALL {label}: subroutines nest deeper than {MAX_CALL_DEPTH} calls here; the "
                "checker cannot follow them, so the plan is refused (a subroutine that calls "
                "itself nests without end); repeat work with a loop (CMP and a conditional jump "
                f"back) and nest CALLs at most {MAX_CALL_DEPTH} deep"
            )
            self.report_at(pc, message)
        if paths.overflow is not None:
            self.too_many(paths, None)
        for pc, site in queries.items():  # a query's answer shape, known before the run
            if isinstance(site, str):
                self.report_at(pc, site, 0)
        for pc, position, message in walk.problems:
            if pc not in walk.short_calls:  # else its arguments are not where the check looks
                self.report_at(pc, message, position)

    def too_many(self, paths: Paths, stopped: int | None) -> None:
        """The plan has more paths than the analysis follows: :data:`MAX_STATES` states (when
        ``stopped`` is ``None``), or :data:`MAX_STEPS` visits, stopped at state ``stopped``."""
        pc = paths.overflow if stopped is None else outermost(paths.states[stopped])
        assert pc is not None  # an overflow is where the states ran out
        fix = (
            "CALL subroutines from fewer places (one CALL in a loop, not many CALL lines) or "
            "nest them less"
            if self.flow.subroutine_call(pc)
            else "write a shorter plan with fewer branches (repeat work with a loop)"
        )
        what = (
            f"{MAX_STATES} states of code and subroutine calls"
            if stopped is None
            else f"{MAX_STEPS} steps through code and subroutine calls"
        )
        message = (
            f"the program has too many paths to check (over {what}; the check stopped here), "
            f"so it is refused; {fix}"
        )
        self.report_at(pc, message)

    def check_loops(self) -> None:
        """Every loop that can never end: one no path leaves, whatever it calls (only a budget
        would stop it), or one with no tool call where nothing changes a register, memory or
        the stack (see :attr:`Paths.endless` and :attr:`ControlFlow.loops`)."""
        flow, program = self.flow, self.program
        found: dict[tuple[int, ...], str] = {}
        for loop in paths_of(flow).endless:
            tools = sorted({flow.tools[pc].name for pc in loop if pc in flow.tools})
            exits = any(t not in loop for pc in loop for t in flow.flat[pc])
            known = " (no run takes its jumps out: the flags they test are known)" * exits
            found[loop] = f"there is no way out of it{known}" + (
                f": it would CALL {', '.join(tools)} again and again until a budget stops the "
                "plan; give the loop an exit (CMP and a conditional jump out of it)"
                if tools
                else " and it calls no tool"
            )
        for loop in flow.loops:
            if loop in found or any(pc in flow.tools for pc in loop):
                continue
            members = set(loop)
            if not any(t not in members for pc in loop for t in flow.flat[pc]):
                found[loop] = "there is no way out of it and it calls no tool"
            elif not any(flow.effects[pc].changes_state for pc in loop):
                found[loop] = "nothing in it changes a register or the stack and it calls no tool"
        for loop, why in found.items():
            self.report_at(loop[0], f"this loop ({_span(program, loop)}) can never end: {why}")


def _in_loop(flow: ControlFlow, pc: int) -> str:
    """Why values pushed by an earlier loop do not count in this one, and what to write."""
    loop = next((loop for loop in flow.loops if pc in loop), None)
    if loop is None:
        return ""
    return (
        f" (in the loop on {_span(flow.program, loop)}). The check counts the values pushed, "
        "not the rounds of loops, so values another loop PUSHed are not known to be there "
        "for each round of this one, even when both loops run as many rounds: POP each value "
        "in the loop that PUSHes it, or keep the values in a list: MOV R9, '[]' before the "
        "first loop, then LEN R8, R9 and MOV R9[R8], value to add one; in the second loop "
        "MOV R2, R9[ESI] reads element ESI"
    )


def _span(program: Program, component: tuple[int, ...]) -> str:
    """Render the lines of a loop: ``lines 3-5`` or ``lines 3-5, 9``."""
    runs: list[list[int]] = []  # [first, last] of each run of instructions
    for pc in sorted(component):
        if runs and runs[-1][1] == pc - 1:
            runs[-1][1] = pc
        else:
            runs.append([pc, pc])
    lines = [(program.instructions[a].line, program.instructions[b].line) for a, b in runs]
    parts = [str(first) if first == last else f"{first}-{last}" for first, last in lines]
    return ("line " if len(component) == 1 else "lines ") + ", ".join(parts)


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
    count = len(program.instructions)
    if count > MAX_PLAN_INSTRUCTIONS:  # refused at once, at the first instruction past the limit
        first = program.instructions[MAX_PLAN_INSTRUCTIONS]  # (a repair asks for less)
        message = (
            f"the plan has {count} instructions; at most {MAX_PLAN_INSTRUCTIONS} are accepted: "
            "repeat work with a loop or a subroutine instead of writing it out"
        )
        return (Diagnostic(first.line, first.column, message, program.source_of(first.line)),)
    checker = _Checker(program, by_name)
    checker.check_unknown()
    checker.check_labels()
    checker.check_operands()
    checker.check_entry()
    checker.check_memory_size()
    if not checker.structural:
        checker.check_paths()
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
