"""The verifier's words for what the paths of a plan may do wrong (see ``verifier.check_flow``).

Each function turns what the path analysis (:mod:`llassembly.analysis.flow`) or the
control-flow graph found into ``(line, column, message)`` problems, written for the model that
will fix the plan.
"""

from __future__ import annotations

from collections.abc import Iterator

from llassembly.analysis.cfg import ControlFlow
from llassembly.analysis.flow import MAX_CALL_DEPTH, MAX_STATES, Findings
from llassembly.analysis.layout import Layout
from llassembly.language.instructions import register_name
from llassembly.language.program import (
    Instruction,
    Mem,
    Name,
    Path,
    Program,
    Reg,
    Template,
    nested,
)

__all__ = ["Problem", "flow_problems", "loop_problems", "mnemonic"]

Problem = tuple[int, int, str]
"""``(line, column, message)``."""


def mnemonic(ins: Instruction) -> str:
    """The mnemonic as the model wrote it (``JB`` rather than ``JL``), upper-cased."""
    words = ins.text.split(maxsplit=1)
    return words[0].upper() if words else ins.op.value


def _column(ins: Instruction, position: int) -> int:
    columns = ins.operand_columns
    return columns[position] if 0 <= position < len(columns) else ins.column


def _at(ins: Instruction, message: str) -> Problem:
    return ins.line, ins.column, message


def _lines(lines: list[int]) -> str:
    shown = ", ".join(str(line) for line in lines[:20])
    return shown + (", ..." if len(lines) > 20 else "")


def flow_problems(flow: ControlFlow, found: Findings, layout: Layout) -> Iterator[Problem]:
    """Every problem the path analysis found, and every mix of the EAX convention."""
    instructions = flow.program.instructions
    for call, reader, pop in flow.mixed:
        message = (
            f"this POP would take a value from the stack, but the result of CALL "
            f"{flow.tools[call].name} (line {instructions[call].line}) is read in EAX on line "
            f"{instructions[reader].line}, so it is not on the stack: use one way, either "
            "POP the result right after the CALL (POP EAX), or read it in EAX and do not POP"
        )
        yield _at(instructions[pop], message)
    for pc, position in sorted(found.unwritten_reads):
        ins = instructions[pc]
        name = ins.operands[position]
        shown = name.label if isinstance(name, Mem) else name
        if isinstance(name, Path | Template):  # the variable read inside it
            parts = [p.label if isinstance(p, Mem) else p for p in nested(name)]
            shown = next((p for p in parts if str(p).lower() in layout.variables), name)
        message = (
            f"{shown} is read here before it is written on some path; a variable (a name "
            f"that is no register or data label) must be set first, e.g. MOV {shown}, 0, or "
            f"declare it in section .data ({shown} dd 0)"
        )
        yield ins.line, _column(ins, position), message
    for pc in found.empty_pops:
        message = "POP on an empty stack: on some path nothing is on the stack when this line runs"
        yield _at(instructions[pc], message + _in_loop(flow, pc))
    for pc, have in found.short_calls.items():
        tool = flow.tools[pc]
        params = ", ".join(str(getattr(p, "name", p)) for p in tool.params)
        count = len(tool.params)
        message = (
            f"CALL {tool.name} takes {count} value{'' if count == 1 else 's'} from the stack "
            f"({params}) but on some path only {have} {'is' if have == 1 else 'are'} there; "
            "PUSH the arguments, first parameter first, before the CALL"
        )
        yield _at(instructions[pc], message + _in_loop(flow, pc))
    for pc, cmps in found.string_jumps.items():
        lines = sorted(instructions[c].line for c in cmps)
        where = (
            f"the CMP on line {lines[0]}"
            if len(lines) == 1
            else "the CMPs on lines " + _lines(lines[:21])
        )
        message = (
            f"{mnemonic(instructions[pc])} needs an ordered compare, but on some path the "
            f"flags come from {where}, which compares strings; strings have no order, so "
            "only JE, JZ, JNE and JNZ may follow"
        )
        yield _at(instructions[pc], message)
    for pc in found.unset_jumps:
        jumps = flow.effects[pc].flow != "next"
        message = (
            f"{mnemonic(instructions[pc])} tests the flags, but on some path no CMP, TEST "
            "or arithmetic (ADD, SUB, MUL, INC, DEC...) has run before it, so there is "
            "nothing to test; "
            + (
                "put a CMP before the jump (for example CMP R1, 0), or use JMP to always jump"
                if jumps
                else "put a CMP before it (for example CMP R1, 0)"
            )
        )
        yield _at(instructions[pc], message)
    yield from _string_problems(flow, found, layout)
    for pc, call in found.off_end.items():
        label = instructions[call].operands[0]
        message = (
            f"on some path the subroutine '{label}' (CALLed on line {instructions[call].line}) "
            "runs past the end of the program here without RET, which would stop the whole "
            "plan; end the subroutine with RET (or HLT to stop the plan on purpose)"
        )
        yield _at(instructions[pc], message)
    yield from _limit_problems(flow, found)


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


def _string_problems(flow: ControlFlow, found: Findings, layout: Layout) -> Iterator[Problem]:
    instructions = flow.program.instructions
    for pc, reg in found.string_registers:
        ins = instructions[pc]
        name, op = register_name(reg), mnemonic(ins)
        if flow.effects[pc].flow == "branch":  # LOOP
            message = (
                f"{op} counts {name} down, but on some path {name} holds a string here; "
                f"MOV the number of rounds into {name} first"
            )
        else:
            message = (
                f"{op} {ins.operands[0]} works on {name} without naming it, but on some path "
                f"{name} holds a string here (from a string literal, string data or a tool "
                f"that returns str); MOV a number into {name} first (arithmetic works on "
                "numbers only)"
            )
        yield _at(ins, message)
    for pc, position in found.string_addresses:
        ins = instructions[pc]
        operand = ins.operands[position]
        assert isinstance(operand, Mem)  # only memory operands have an address
        what = (
            f"on some path a register in the address {operand} holds a string; an address "
            "is a number"
        )
        if operand.label is None and operand.base is not None:  # MOV ESI, table
            what += f" (to point {operand.base} at data, LEA {operand.base}, [label])"
        yield ins.line, _column(ins, position), _needs_numbers(ins, what)
    for pc, position in found.string_math:
        ins = instructions[pc]
        operand = ins.operands[position]
        if isinstance(operand, Reg | Mem) or (
            isinstance(operand, Name) and operand.name.lower() in layout.live
        ):
            what = (
                f"on some path {operand} holds a string here (from a string literal, string "
                "data or a tool that returns str); keep text and numbers in different "
                f"registers, or MOV a number into {operand} first"
            )
        elif isinstance(operand, Name):
            what = f"{operand.name!r} is string data; use a number or a number data label"
        else:
            what = f"{operand} is a string; use a number"
        yield ins.line, _column(ins, position), _needs_numbers(ins, what)


def _needs_numbers(ins: Instruction, what: str) -> str:
    return f"{mnemonic(ins)} needs numbers, but {what} (arithmetic works on numbers only)"


def _limit_problems(flow: ControlFlow, found: Findings) -> Iterator[Problem]:
    instructions = flow.program.instructions
    for pc in found.too_deep:
        label = instructions[pc].operands[0]
        message = (
            f"CALL {label}: subroutines nest deeper than {MAX_CALL_DEPTH} calls here; the "
            "checker cannot follow them, so the plan is refused (a subroutine that calls "
            "itself nests without end); repeat work with a loop (CMP and a conditional jump "
            f"back) and nest CALLs at most {MAX_CALL_DEPTH} deep"
        )
        yield _at(instructions[pc], message)
    if found.overflow is not None:
        fix = (
            "CALL subroutines from fewer places (one CALL in a loop, not many CALL lines) or "
            "nest them less"
            if flow.subroutine_call(found.overflow)
            else "write a shorter plan with fewer branches (repeat work with a loop)"
        )
        message = (
            f"the program has too many paths to check (over {MAX_STATES} states of code and "
            f"subroutine calls; the check stopped here), so it is refused; {fix}"
        )
        yield _at(instructions[found.overflow], message)


def loop_problems(flow: ControlFlow) -> Iterator[Problem]:
    """Every loop that can never end: no way out and no tool call, or nothing in it changes
    a register, memory or the stack (see :attr:`ControlFlow.loops`)."""
    program = flow.program
    for loop in flow.loops:
        if any(pc in flow.tools for pc in loop):
            continue
        members = set(loop)
        if not any(t not in members for pc in loop for t in flow.flat[pc]):
            why = "there is no way out of it and it calls no tool"
        elif not any(flow.effects[pc].changes_state for pc in loop):
            why = "nothing in it changes a register or the stack and it calls no tool"
        else:
            continue
        first = program.instructions[loop[0]]
        yield first.line, first.column, f"this loop ({_span(program, loop)}) can never end: {why}"


def _span(program: Program, component: tuple[int, ...]) -> str:
    """Render the lines of a loop: ``lines 3-5`` or ``lines 3-5, 9``."""
    runs: list[list[int]] = []
    for pc in sorted(component):
        if runs and runs[-1][-1] == pc - 1:
            runs[-1].append(pc)
        else:
            runs.append([pc])
    parts = []
    for run in runs:
        first, last = program.instructions[run[0]].line, program.instructions[run[-1]].line
        parts.append(str(first) if first == last else f"{first}-{last}")
    single = len(runs) == 1 and len(runs[0]) == 1
    return ("line " if single else "lines ") + ", ".join(parts)
