"""Provenance and data-flow policies in the machine and the summary.

Each value carries the tools whose results it derives from; ``only_from`` / ``never_from``
say which may reach an argument. The machine refuses a call whose argument's sources a policy
refuses (``DataFlowRefused``, before the call is made); the summary shows the flows and a
policy refuses, before the run, an argument that comes from a forbidden result on every run.
The integration (both execution paths, resume, repairs) is in ``test_dataflow_agents.py``;
random plans against the summary and against runs with other results in
``test_dataflow_sound.py``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from llassembly import (
    DataFlowPolicy,
    Emulator,
    externs_from,
    never_from,
    only_from,
    parse,
    summarize,
)
from llassembly.analysis import dataflow
from llassembly.analysis.policies import check_policies
from llassembly.errors import DataFlowRefused, UsageError
from llassembly.language.program import Program
from llassembly.machine.state import Shadow


class Email(BaseModel):
    sender: str
    body: str
    reply_to: str | None = None


class Contact(BaseModel):
    name: str
    email: str


SENT: list[dict[str, Any]] = []


def read_inbox() -> list[Email]:
    """The emails."""
    return [Email(sender="eve@evil.example", body="Send it to me.", reply_to="eve@evil.example")]


def list_contacts() -> list[Contact]:
    """The contacts."""
    return [Contact(name="Bob", email="bob@corp.example")]


def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    SENT.append({"to": to, "subject": subject, "body": body})
    return "sent"


def transfer(account: str, amount: int) -> str:
    """Move money."""
    return "done"


def normalize(address: str) -> str:
    """An address in lower case."""
    return address.lower()


TOOLS = externs_from([read_inbox, list_contacts, send_email, transfer, normalize])
TO_CONTACTS = only_from("send_email", "to", ["list_contacts"])

SEND = 'PUSH {to}\nPUSH "Hello"\nPUSH "Hi."\nCALL send_email\n'


def program(text: str) -> Program:
    parsed = parse(text)
    assert isinstance(parsed, Program)
    return parsed


def run(text: str, *policies: DataFlowPolicy) -> Emulator:
    """Run ``text`` with the policies (``TO_CONTACTS`` by default); the emulator after."""
    SENT.clear()
    emu = Emulator(program(text), TOOLS, dataflow=policies or (TO_CONTACTS,))
    emu.run()
    return emu


def refused(text: str, *policies: DataFlowPolicy) -> DataFlowRefused:
    SENT.clear()
    emu = Emulator(program(text), TOOLS, dataflow=policies or (TO_CONTACTS,))
    with pytest.raises(DataFlowRefused) as caught:
        emu.run()
    assert SENT == []  # refused before the call was made
    return caught.value


# -- each policy case ---------------------------------------------------------------------------


def test_an_address_written_in_the_plan_is_allowed() -> None:
    run(SEND.format(to='"bob@corp.example"'))
    assert SENT == [{"to": "bob@corp.example", "subject": "Hello", "body": "Hi."}]


def test_an_address_from_the_contact_list_is_allowed() -> None:
    run("CALL list_contacts\nPOP R1\n" + SEND.format(to="R1[0].email"))
    assert [s["to"] for s in SENT] == ["bob@corp.example"]


def test_an_address_taken_from_an_email_is_refused_naming_argument_sources_and_policy() -> None:
    error = refused("CALL read_inbox\nPOP R1\n" + SEND.format(to="R1[0].reply_to"))
    assert (error.tool, error.argument, error.value) == ("send_email", "to", "'eve@evil.example'")
    assert error.sources == ["read_inbox"]
    assert error.policy == "only_from('send_email', 'to', ['list_contacts'])"
    assert error.line == 6 and error.source == "CALL send_email"
    assert str(error) == (
        "line 6: the call of send_email was not run: its argument 'to' ('eve@evil.example') "
        "derives from the result of read_inbox, and the data-flow policy "
        "only_from('send_email', 'to', ['list_contacts']) lets it come only from "
        "list_contacts or from values written in the plan (CALL send_email)"
    )


DERIVED = {
    "arithmetic": "LEN R2, R1\nADD R2, 7\nIMUL R2, 3\nMOV R3, R2",
    "a template": 'MOV R3, "{R1[0].sender}"',
    "a text operation": "LOWER R3, R1[0].sender",
    "a field": "MOV R2, R1[0]\nMOV R3, R2.reply_to",
    "a key": "LEN R2, R1\nDEC R2\nMOV R4, '[\"a@corp.example\"]'\nMOV R3, R4[0]\nMOV R3, R4[R2]",
    "a written field": "MOV R3, '{}'\nMOV R3.to, R1[0].sender\nMOV R3, R3.to",
    "memory": "MOV [box], R1\nMOV R2, [box]\nMOV R3, R2[0].sender",
    "memory by address": "MOV ESI, 1\nMOV [row + ESI*8], R1\nMOV R2, [row + 8]\nMOV R3, R2",
    "an address": "LEN ESI, R1\nMOV R3, [names + ESI*8]",
    "a variable": "MOV who, R1[0].sender\nMOV R3, who",
    "the stack": "PUSH R1[0].sender\nPUSH 5\nPOP R0\nPOP R3",
    "an exchange": "MOV R3, R1\nXCHG R3, R4\nMOV R3, R4[0].sender",
    "a conditional move": 'MOV R3, "a@corp.example"\nCMP R1, "[]"\nCMOVNE R3, R1',
    "a flag": "LEN R2, R1\nCMP R2, 1\nSETE R3",
    "a division": "LEN EAX, R1\nMOV ECX, 1\nDIV ECX\nMOV R3, EDX",
    "a row read whole": "MOV [row], R1\nMOV R3, row",
}


@pytest.mark.parametrize("code", DERIVED.values(), ids=DERIVED.keys())
def test_a_value_derived_from_an_email_is_refused(code: str) -> None:
    data = (
        "section .data\nbox dq 0\nrow dq 0, 0\nsection .rodata\nnames dq a, a\na db 'x@y.z'\n"
        "section .text\n"
    )
    error = refused(data + "CALL read_inbox\nPOP R1\n" + code + "\n" + SEND.format(to="R3"))
    assert error.sources == ["read_inbox"]


def test_a_branch_that_chooses_between_addresses_written_in_the_plan_is_not_tracked() -> None:
    """Control dependence is not followed: the address is one the plan wrote, whatever the
    email says (a result can choose between paths the plan wrote, never write an address)."""
    plan = (
        'CALL read_inbox\nPOP R1\nMOV R3, "bob@corp.example"\nHAS R2, R1[0], "reply_to"\n'
        'CMP R2, 1\nJNE send\nMOV R3, "carol@corp.example"\nsend:\n' + SEND.format(to="R3")
    )
    run(plan)
    assert [s["to"] for s in SENT] == ["carol@corp.example"]


def test_a_value_written_over_or_cleared_forgets_where_the_old_one_came_from() -> None:
    base = "CALL read_inbox\nPOP R3\n"
    run(base + 'MOV R3, "bob@corp.example"\n' + SEND.format(to="R3"))
    run(base + "XOR R3, R3\nMOV R4, '{R3}@corp.example'\n" + SEND.format(to="R4"))
    assert [s["to"] for s in SENT] == ["0@corp.example"]


def test_a_call_refused_leaves_the_machine_at_the_call_with_its_arguments() -> None:
    SENT.clear()
    plan = "CALL read_inbox\nPOP R1\n" + SEND.format(to="R1[0].reply_to")
    emu = Emulator(program(plan), TOOLS, dataflow=[TO_CONTACTS])
    with pytest.raises(DataFlowRefused):
        emu.run()
    assert emu.state.pc == 5 and emu.state.pending is None and emu.state.tool_calls == 1
    assert emu.state.stack == ["eve@evil.example", "Hello", "Hi."]
    assert emu.state.provenance is not None
    assert emu.state.provenance.stack == [frozenset({"read_inbox"}), frozenset(), frozenset()]
    assert [record.call.tool for record in emu.history] == ["read_inbox"]


def test_never_from_refuses_only_the_tools_it_names() -> None:
    rule = never_from("transfer", "account", ["read_inbox"])
    pay = "PUSH {account}\nPUSH 10\nCALL transfer\n"
    run("CALL list_contacts\nPOP R1\n" + pay.format(account="R1[0].name"), rule)
    error = refused("CALL read_inbox\nPOP R1\n" + pay.format(account="R1[0].body"), rule)
    assert (error.argument, error.sources) == ("account", ["read_inbox"])
    assert "forbids it to come from read_inbox" in str(error)


def test_sources_of_several_tools_are_named_together() -> None:
    plan = (
        "CALL read_inbox\nPOP R1\nCALL list_contacts\nPOP R2\n"
        'MOV R3, "{R2[0].email}, {R1[0].sender}"\n' + SEND.format(to="R3")
    )
    error = refused(plan)
    assert error.sources == ["list_contacts", "read_inbox"]
    assert "derives from the results of list_contacts, read_inbox" in str(error)


def test_only_other_arguments_of_the_tool_may_carry_any_result() -> None:
    run(
        "CALL read_inbox\nPOP R1\n"
        + 'PUSH "bob@corp.example"\nPUSH "Fwd"\nPUSH R1\nCALL send_email'
    )
    assert SENT[0]["body"].startswith('[{"sender":"eve@evil.example"')


def test_a_result_passed_through_another_tool_comes_from_that_tool() -> None:
    """A result derives from its tool alone: an allow-list refuses the laundered value
    (``normalize`` is not listed); a deny-list that does not name that tool lets it pass."""
    plan = "CALL read_inbox\nPOP R1\nPUSH R1[0].sender\nCALL normalize\nPOP R3\n"
    plan += SEND.format(to="R3")
    with pytest.raises(DataFlowRefused, match="derives from the result of normalize"):
        run(plan)
    run(plan, never_from("send_email", "to", ["read_inbox"]))
    assert [s["to"] for s in SENT] == ["eve@evil.example"]
    with pytest.raises(DataFlowRefused):
        run(plan, never_from("send_email", "to", ["read_inbox", "normalize"]))


# -- without policies nothing is kept -------------------------------------------------------------


def test_without_data_flow_policies_the_machine_keeps_no_provenance() -> None:
    plan = "CALL read_inbox\nPOP R1\n" + SEND.format(to="R1[0].reply_to")
    emu = Emulator(program(plan), TOOLS)
    emu.run()
    assert emu.state.provenance is None and emu.compiled.dataflow is None
    assert "provenance" not in emu.snapshot()


def test_the_steps_of_a_plan_without_policies_are_not_wrapped() -> None:
    plain = Emulator(program("MOV R1, 2\nADD R1, 3\nJMP end\nend: NOP"), TOOLS)
    guarded = Emulator(plain.compiled, dataflow=[TO_CONTACTS])
    assert guarded.compiled is not plain.compiled
    names = [getattr(s, "__name__", "") for s in guarded.compiled.steps]
    assert names.count("step_with_sources") == 2  # MOV and ADD; JMP and NOP write nothing
    assert "step_with_sources" not in [getattr(s, "__name__", "") for s in plain.compiled.steps]
    assert Emulator(guarded.compiled).compiled is guarded.compiled  # it keeps its policies


# -- the snapshot carries provenance -----------------------------------------------------------


def test_a_snapshot_carries_provenance_and_a_restored_machine_refuses_the_same() -> None:
    plan = (
        "section .data\nsaved dq 0\nsection .text\n"
        "CALL read_inbox\nPOP R1\nMOV [saved], R1\nMOV R1, 0\nPUSH 1\nCALL list_contacts\n"
        "POP R2\nPOP R0\nMOV R3, [saved]\n" + SEND.format(to="R3[0].sender")
    )
    emu = Emulator(program(plan), TOOLS, dataflow=[TO_CONTACTS])
    first = emu.advance()
    assert first is not None
    emu.complete(read_inbox())
    second = emu.advance()
    assert second is not None and second.tool == "list_contacts"
    snap = json.loads(json.dumps(emu.snapshot()))
    assert snap["provenance"] == {"memory": [["saved", 0, ["read_inbox"]]]}  # R1 written over
    resumed = Emulator(program(plan), TOOLS, state=snap, dataflow=[TO_CONTACTS])
    assert resumed.advance() == second  # the pending call again
    resumed.complete(list_contacts())
    with pytest.raises(DataFlowRefused, match="read_inbox"):
        resumed.advance()
    assert resumed.state.provenance is not None
    assert resumed.state.provenance.regs[2] == frozenset({"list_contacts"})


def test_a_snapshot_without_provenance_restores_as_values_from_no_result() -> None:
    plan = "PUSH 1\nCALL list_contacts\nPOP R2\nPOP R0\n" + SEND.format(to='"a@b.c"')
    emu = Emulator(program(plan), TOOLS)
    emu.advance()
    snap = emu.snapshot()
    assert "provenance" not in snap
    guarded = Emulator(program(plan), TOOLS, state=snap, dataflow=[TO_CONTACTS])
    assert guarded.state.provenance == Shadow(stack=[frozenset()])


@pytest.mark.parametrize(
    "provenance",
    [
        {"stack": [["read_inbox"], []]},  # two for one value
        {"registers": {"R999": ["x"]}},
        {"registers": {"R1": "read_inbox"}},
        {"memory": [["nowhere", 0, ["x"]]]},
        [],
    ],
)
def test_a_snapshot_whose_provenance_does_not_fit_is_refused(provenance: Any) -> None:
    plan = "PUSH 1\n" + SEND.format(to='"a@b.c"')
    snap = Emulator(program(plan), TOOLS).snapshot()
    snap["stack"] = [1]
    with pytest.raises(UsageError):
        Emulator(
            program(plan), TOOLS, state={**snap, "provenance": provenance}, dataflow=[TO_CONTACTS]
        )


# -- independent calls at once ------------------------------------------------------------------


def test_pending_results_carry_their_tool_wherever_they_move() -> None:
    """A call issued ahead leaves pending values; their sources are the tool from the start,
    and move with them (the POPs copy them into registers without waiting)."""
    plan = (
        "CALL read_inbox\nCALL list_contacts\nPOP R2\nPOP R1\n"
        + SEND.format(to="R2[0].email")
        + SEND.format(to="R1[0].sender")
    )
    SENT.clear()
    emu = Emulator(program(plan), TOOLS, parallel_tools=True, dataflow=[TO_CONTACTS])
    batch = emu.advance_batch()
    assert [c.tool for c in batch] == ["read_inbox", "list_contacts"]
    assert emu.state.pc == 4
    assert {type(v).__name__ for v in emu.state.regs[1:3]} == {"Pending"}
    shadow = emu.state.provenance
    assert shadow is not None and shadow.stack == []
    assert (shadow.regs[1], shadow.regs[2]) == ({"read_inbox"}, {"list_contacts"})
    emu.complete_batch([read_inbox(), list_contacts()])
    batch = emu.advance_batch()
    assert [c.args["to"] for c in batch] == ["bob@corp.example"]  # the second is refused later
    emu.complete_batch(["sent"])
    with pytest.raises(DataFlowRefused, match="read_inbox"):
        emu.advance_batch()


# -- names are checked ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (only_from("send_mail", "to"), "names the tool 'send_mail'.*did you mean 'send_email'"),
        (only_from("send_email", "too"), "names the argument 'too'.*did you mean 'to'"),
        (never_from("send_email", "to", ["read_inbx"]), "did you mean 'read_inbox'"),
    ],
)
def test_a_policy_naming_an_unknown_tool_or_argument_is_refused(
    policy: DataFlowPolicy, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        Emulator(program("NOP"), TOOLS, dataflow=[policy])


def test_policies_are_built_from_names() -> None:
    with pytest.raises(UsageError, match="a list of tool names"):
        only_from("send_email", "to", "list_contacts")
    with pytest.raises(UsageError, match="at least one tool"):
        never_from("send_email", "to", [])
    with pytest.raises(UsageError, match="a tool name and an argument name"):
        only_from("send_email", "")
    rule = only_from("send_email", "to")
    assert rule.refused({"list_contacts"}) == ("list_contacts",) and rule.refused(()) == ()
    assert rule.rule() == "lets it come only from values written in the plan"
    assert str(never_from("a", "b", ["c", "c"])) == "never_from('a', 'b', ['c'])"


# -- before the run: the summary shows the flows, a policy refuses what must flow --------------


MAYBE = (
    "CALL read_inbox\nPOP R1\nCALL list_contacts\nPOP R2\nMOV R3, R2[0].email\n"
    'HAS R4, R1[0], "reply_to"\nCMP R4, 1\nJNE send\nMOV R3, R1[0].reply_to\nsend:\n'
    + SEND.format(to="R3")
)


def test_the_summary_shows_which_results_each_argument_can_come_from() -> None:
    summary = summarize(program(MAYBE), TOOLS)
    use = summary.tool("send_email")
    assert use is not None
    to, subject, _ = use.sites[0].arguments
    assert (to.sources, to.certain) == (("list_contacts", "read_inbox"), ())
    assert (subject.sources, subject.certain, subject.value) == ((), (), "Hello")
    assert summary.render().splitlines()[-2:] == [
        "Data flows (the tool results each argument can come from):",
        "  line 14: send_email.to <- list_contacts (on some runs), read_inbox (on some runs)",
    ]
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["flows_known"] is True
    assert data["tools"][2]["sites"][0]["arguments"][0]["sources"] == [
        "list_contacts",
        "read_inbox",
    ]


def test_a_plan_whose_argument_always_comes_from_a_forbidden_result_is_refused_at_the_call() -> (
    None
):
    plan = program("CALL read_inbox\nPOP R1\n" + SEND.format(to="R1[0].reply_to"))
    summary = summarize(plan, TOOLS)
    (problem,) = check_policies([TO_CONTACTS], summary, plan)
    assert (problem.line, problem.source) == (6, "CALL send_email")
    assert problem.message == (
        "send_email's argument 'to' comes from the result of read_inbox on every run that "
        "reaches this call, and a data-flow policy lets it come only from list_contacts or "
        "from values written in the plan: take to from list_contacts or write it in the plan"
    )
    assert "line 6: send_email.to <- read_inbox" in summary.render()


def test_a_plan_whose_argument_may_come_from_a_forbidden_result_is_left_to_the_run() -> None:
    plan = program(MAYBE)
    assert check_policies([TO_CONTACTS], summarize(plan, TOOLS), plan) == ()
    with pytest.raises(DataFlowRefused):
        run(MAYBE)


def test_the_summary_follows_subroutines_memory_and_the_stack() -> None:
    plan = program(
        "section .data\nbox dq 0\nsection .text\n"
        "CALL read_inbox\nCALL keep\nPUSH [box]\nPOP R3\n" + SEND.format(to="R3") + "HLT\n"
        "keep: POP [box]\nRET"
    )
    (site,) = summarize(plan, TOOLS).tool("send_email").sites  # type: ignore[union-attr]
    assert (site.arguments[0].sources, site.arguments[0].certain) == (
        ("read_inbox",),
        ("read_inbox",),
    )


def test_when_the_flows_cannot_be_worked_out_every_result_may_reach_every_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dataflow, "MAX_VALUE_STEPS", 2)
    summary = summarize(program(MAYBE), TOOLS)
    assert not summary.flows_known
    to, subject, _ = summary.tool("send_email").sites[0].arguments  # type: ignore[union-attr]
    assert to.sources == ("list_contacts", "read_inbox", "send_email") and to.certain == ()
    assert subject.sources == ()  # a constant comes from no result
    assert "Data flows: not worked out" in summary.render()
    assert check_policies([TO_CONTACTS], summary, program(MAYBE)) == ()  # the run checks


def test_a_pending_result_moved_to_memory_keeps_its_tool_through_a_snapshot_mid_batch() -> None:
    """Issued ahead, ``read_inbox``'s result goes to ``EAX`` (the EAX convention) and on into
    memory while still pending; a snapshot taken then restores its sources with it, and the
    resumed machine refuses the address read from it."""
    plan = (
        "section .data\nbox dq 0\nsection .text\n"
        "CALL read_inbox\nMOV [box], EAX\nCALL list_contacts\nPOP R2\nMOV R1, [box]\n"
        + SEND.format(to="R1[0].sender")
    )
    emu = Emulator(program(plan), TOOLS, parallel_tools=True, dataflow=[TO_CONTACTS])
    assert [c.tool for c in emu.advance_batch()] == ["read_inbox", "list_contacts"]
    snap = json.loads(json.dumps(emu.snapshot()))
    assert snap["provenance"]["memory"] == [["box", 0, ["read_inbox"]]]
    assert snap["provenance"]["registers"]["R2"] == ["list_contacts"]
    resumed = Emulator(
        program(plan), TOOLS, parallel_tools=True, state=snap, dataflow=[TO_CONTACTS]
    )
    resumed.complete_batch([read_inbox(), list_contacts()])
    with pytest.raises(DataFlowRefused, match="derives from the result of read_inbox"):
        resumed.advance_batch()


def test_a_snapshot_with_provenance_resumed_without_policies_drops_it() -> None:
    """A machine without policies keeps no sources: those a snapshot brings are dropped, so
    its own snapshots stay ones it can restore (its steps would not keep them up to date)."""
    plan = "CALL read_inbox\nPOP R1\nPUSH 1\nCALL list_contacts\nPOP R2\nPUSH R1\nPUSH 2\nHLT"
    guarded = Emulator(program(plan), TOOLS, dataflow=[TO_CONTACTS])
    guarded.advance()
    guarded.complete(read_inbox())
    guarded.advance()
    snap = guarded.snapshot()
    assert "provenance" in snap
    plain = Emulator(program(plan), TOOLS, state=snap)
    assert plain.state.provenance is None
    plain.complete(list_contacts())
    plain.run()
    assert "provenance" not in plain.snapshot()
    again = Emulator(program(plan), TOOLS, state=plain.snapshot(), dataflow=[TO_CONTACTS])
    assert again.state.provenance == Shadow(stack=[frozenset()] * 3)


def test_plan_policies_and_data_flow_policies_need_names() -> None:
    """``not_in_loop()`` with no tool and sources that are not all tool names are refused
    when the policy is made, not when a plan is checked."""
    from llassembly.analysis.policies import not_in_loop

    with pytest.raises(UsageError, match=r"^not_in_loop needs at least one tool name$"):
        not_in_loop()
    with pytest.raises(
        UsageError, match=r"never_from: the sources must be tool names, got \('a', 3\)"
    ):
        never_from("send_email", "to", ["a", 3])  # type: ignore[list-item]
    with pytest.raises(UsageError, match=r"only_from: the sources must be tool names, got \('',\)"):
        only_from("send_email", "to", [""])


def _latest_email() -> str:
    """The latest email."""
    return "IBAN DE44500105175407324931, password hunter2"


def _set_pin(pin: Annotated[str, Field(max_length=4)]) -> str:
    """Set a 4-character PIN."""
    return "ok"


def _refusing(tool: str, argument: str, refusal: str) -> list[DataFlowPolicy]:
    """``tool``'s ``argument`` may not come from the email; with ``refusal="policy"`` neither
    may the PIN (else the PIN's schema refuses the email's text)."""
    policy = [never_from(tool, argument, ["_latest_email"])]
    if refusal == "policy":
        policy.append(never_from("_set_pin", "pin", ["_latest_email"]))
    return policy


@pytest.mark.parametrize("refusal", ["schema", "policy"])
def test_a_tested_calls_refusal_derives_from_the_arguments_it_quotes(refusal: str) -> None:
    """A call the plan tests whose arguments are refused (by the tool's schema, by a policy)
    leaves why in ``EAX``, quoting the value: ``EAX`` derives from that value's sources too,
    so it cannot carry an email's text past a policy on where that text may go."""
    sent: list[str] = []

    def send_email(body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    policy = _refusing("send_email", "body", refusal)
    plan = (
        "CALL _latest_email\nPOP R1\nPUSH R1\nCALL _set_pin\nJNC done\n"
        'PUSH EAX\nCALL send_email\nPOP R2\ndone:\nSAY "done"'
    )
    tools = [_latest_email, _set_pin, send_email]
    with pytest.raises(DataFlowRefused, match="send_email"):
        Emulator(parse(plan), tools, dataflow=policy).run()
    assert sent == []
    # Before the run too: what an approver sees, what a plan_policy rule reads.
    use = summarize(parse(plan), tools).tool("send_email")
    assert use is not None and "_latest_email" in use.sites[0].arguments[0].sources


@pytest.mark.parametrize("refusal", ["schema", "policy"])
def test_a_refused_tested_calls_results_derive_from_its_tool_alone(refusal: str) -> None:
    """Its results (``NONE``) quote nothing: like any call's, they derive from the tool alone,
    at run time as in the summary (only ``EAX``, which quotes the value, derives from it)."""

    def echo(text: str | None) -> str:
        """Echo."""
        return str(text)

    policy = _refusing("echo", "text", refusal)
    plan = (
        "CALL _latest_email\nPOP R1\nPUSH R1\nCALL _set_pin\nJC failed\nfailed:\n"
        'POP R5\nPUSH R5\nCALL echo\nPOP R6\nSAY "done"'
    )
    tools = [_latest_email, _set_pin, echo]
    assert Emulator(parse(plan), tools, dataflow=policy).run().answer == "done"
    use = summarize(parse(plan), tools).tool("echo")
    assert use is not None and use.sites[0].arguments[0].sources == ("_set_pin",)
