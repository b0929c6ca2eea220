"""Each assumption ``llassembly.compat`` makes about LangChain and LangGraph, pinned against
the installed versions: an upgrade that changes one fails here, not in a running plan."""

from __future__ import annotations

import asyncio
import typing
from typing import Annotated, Any

import pytest
from fakes import ScriptedChatModel
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware
from langchain.agents.middleware.model_call_limit import ModelCallLimitState
from langchain.tools import InjectedState, InjectedStore, ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from pydantic import BaseModel, ValidationError, field_validator

from llassembly.compat import (
    MODEL_CALL_COUNTERS,
    Recorded,
    bubbling_errors,
    private_state,
    recording,
    recording_tool,
    tagged_model,
)


def test_the_model_call_counters_are_the_limit_middlewares_state_keys() -> None:
    hints = typing.get_type_hints(ModelCallLimitState, include_extras=True)
    for key in MODEL_CALL_COUNTERS:
        (annotated,) = typing.get_args(hints[key])  # NotRequired[Annotated[int, ...]]
        assert typing.get_args(annotated)[0] is int
        assert private_state() in typing.get_args(annotated)[1:]


def test_the_limit_middleware_counts_in_those_keys() -> None:
    limit = ModelCallLimitMiddleware(run_limit=5)
    update = limit.after_model({"messages": []}, None)  # type: ignore[arg-type]
    assert update is not None and set(update) == set(MODEL_CALL_COUNTERS)


def test_graph_interrupts_bubble() -> None:
    assert GraphBubbleUp in bubbling_errors()
    assert issubclass(GraphInterrupt, bubbling_errors())


def _double(x: int) -> int:
    """Twice x."""
    return 2 * x


def test_a_recording_copy_of_a_tool_notes_its_return_value_and_leaves_the_tool_alone() -> None:
    original = StructuredTool.from_function(_double)
    copy = recording_tool(original)
    with recording(Recorded()) as noted:
        message = copy.invoke(
            {"name": "_double", "args": {"x": 4}, "id": "c1", "type": "tool_call"}
        )
    assert message.content == "8"  # the tool's own formatting, untouched
    assert (noted.ran, noted.returned, noted.value) == (True, True, 8)
    with recording(Recorded()) as again:
        assert copy.invoke({"x": 5}) == 10
    assert again.value == 10 and noted.value == 8  # each call notes into its own record
    assert copy.invoke({"x": 6}) == 12  # outside a recording: nothing is noted
    assert original.invoke({"x": 1}) == 2


def test_a_recording_copy_works_for_async_and_for_base_tool_subclasses() -> None:
    @tool
    async def ahalf(x: int) -> float:
        """Half of x."""
        return x / 2

    async def half_of_three() -> tuple[float, Recorded]:
        with recording(Recorded()) as noted:
            return await recording_tool(ahalf).ainvoke({"x": 3}), noted

    value, noted = asyncio.run(half_of_three())
    assert value == 1.5 and noted.value == 1.5

    class Shout(BaseTool):
        name: str = "shout"
        description: str = "Upper-case a word."

        def _run(self, word: str) -> str:
            return word.upper()

    with recording(Recorded()) as noted:
        assert recording_tool(Shout()).invoke({"word": "hi"}) == "HI"
    assert (noted.ran, noted.value) == (True, "HI")


def test_a_content_and_artifact_tool_notes_its_content() -> None:
    @tool(response_format="content_and_artifact")
    def search(q: str) -> tuple[str, dict[str, Any]]:
        """Search."""
        return f"found {q}", {"raw": q}

    with recording(Recorded()) as noted:
        message = recording_tool(search).invoke(
            {"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}
        )
    assert message.artifact == {"raw": "x"} and noted.value == ("found x", {"raw": "x"})


def test_a_raising_tool_is_noted_as_having_run_without_a_value() -> None:
    @tool
    def boom() -> int:
        """Fails."""
        raise ValueError("no")

    with recording(Recorded()) as noted, pytest.raises(ValueError):
        recording_tool(boom).invoke({})
    assert noted.ran and not noted.returned


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_only_langchains_error_writing_the_value_is_noted_and_each_attempt_starts_over(
    asynchronous: bool,
) -> None:
    """``unwritten`` is the error ``BaseTool.run`` raised after the tool's code returned (an
    integer too long to print), so a caller tells it from a middleware's; a second attempt in
    the same recording (a retry) drops what the first one noted, but that the tool ran."""
    results: list[Any] = [10**5000, ValueError("down")]

    def measure() -> int:
        """A reading."""
        result = results.pop(0)
        if isinstance(result, Exception):
            raise result
        return int(result)

    async def ameasure() -> int:
        """A reading."""
        return measure()

    copy = recording_tool(StructuredTool.from_function(measure, coroutine=ameasure))
    call = {"name": "measure", "args": {}, "id": "c1", "type": "tool_call"}

    def attempt() -> Any:
        return asyncio.run(copy.ainvoke(call)) if asynchronous else copy.invoke(call)

    with recording(Recorded()) as noted:
        with pytest.raises(ValueError) as first:
            attempt()
        assert noted.returned and noted.value == 10**5000 and noted.unwritten is first.value
        with pytest.raises(ValueError, match="down"):
            attempt()
    assert noted.ran and not noted.returned and noted.unwritten is None


def test_a_directly_written_value_is_noted_with_langchains_error_writing_it() -> None:
    from llassembly.compat import tool_message

    with recording(Recorded()) as noted, pytest.raises(ValueError) as raised:
        tool_message(10**5000, "c1", "measure")
    assert noted.returned and noted.value == 10**5000 and noted.unwritten is raised.value
    with recording(Recorded()) as noted:
        message = tool_message(3, "c1", "measure")
    assert (noted.value, noted.content, noted.unwritten) == (3, message.content, None)


def test_an_mcp_tools_structured_output_is_in_its_artifact_and_its_schema_in_its_metadata() -> None:
    """``langchain-mcp-adapters`` keeps an MCP call's structured output in the artifact of its
    ``content_and_artifact`` result; ``load_mcp_tools`` keeps the output schema in the tool's
    metadata under MCP's own name."""
    import inspect

    from langchain_mcp_adapters import tools as adapter

    from llassembly.compat import MCP_OUTPUT_SCHEMA, mcp_output_schema, mcp_structured

    assert "structured_content" in inspect.getsource(adapter)
    assert mcp_structured({"structured_content": {"id": 1}}) == {"id": 1}
    assert mcp_structured(None) is None
    decorated = StructuredTool.from_function(
        _double, metadata={MCP_OUTPUT_SCHEMA: {"type": "object"}}
    )
    assert mcp_output_schema(decorated) == {"type": "object"}
    assert mcp_output_schema(StructuredTool.from_function(_double)) is None


def test_a_tagged_model_answers_a_tools_less_request_and_its_chunks_carry_the_tag() -> None:
    """The planner's own request hands the agent's model handler a tagged binding of the
    model (and no tools); ``stream_mode="messages"`` metadata carries the tag."""

    class Tagging(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            bound = tagged_model(request.model, "probe:tag", {"probe": "yes"})
            return handler(request.override(model=bound, tools=[]))

    model = ScriptedChatModel(replies=["hello"])
    agent = create_agent(model, tools=[], middleware=[Tagging()])
    seen = [
        meta
        for chunk, meta in agent.stream({"messages": [HumanMessage("hi")]}, stream_mode="messages")
        if isinstance(chunk, AIMessage)
    ]
    assert seen and all("probe:tag" in m.get("tags", []) for m in seen)
    assert all(m.get("probe") == "yes" for m in seen)


OUTPUTS = [
    "text",
    "naïve ☕",
    7,
    2.5,
    None,
    {"a": 1, "b": ["x", "é"]},
    [1, 2, 3],
    [{"type": "text", "text": "a block"}],
    ("a", 1),
]


@pytest.mark.parametrize("output", OUTPUTS, ids=repr)
def test_a_directly_called_tools_message_is_the_one_tool_invoke_makes(output: Any) -> None:
    """``tool_message`` writes a tool's output as ``BaseTool.run`` does for a tool call."""
    from llassembly.compat import tool_message

    def give() -> Any:
        """Give the output."""
        return output

    made = StructuredTool.from_function(give).invoke(
        {"name": "give", "args": {}, "id": "c1", "type": "tool_call"}
    )
    direct = tool_message(output, "c1", "give")
    assert (direct.content, direct.tool_call_id, direct.name, direct.status) == (
        made.content,
        made.tool_call_id,
        made.name,
        made.status,
    )


def test_a_tool_is_called_directly_only_when_invoking_it_adds_nothing_observable() -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    from llassembly.compat import direct_function, unobserved

    def plain(x: int) -> int:
        """Plain."""
        return x

    def with_config(x: int, config: RunnableConfig) -> int:
        """Reads its config."""
        return x

    class Tidy(BaseModel):
        x: int

        @field_validator("x")
        @classmethod
        def positive(cls, x: int) -> int:
            if x < 0:
                raise ValueError("negative")
            return x * 10

    call = {"name": "plain", "args": {"x": "4"}, "id": "c1", "type": "tool_call"}
    # A schema with no checks of its own: the arguments, checked against the tool-call schema
    # before every call, are passed as they are (validating them again would change nothing).
    direct = direct_function(StructuredTool.from_function(plain))
    assert direct is not None and direct({**call, "args": {"x": 4}}) == 4
    # A schema with checks of its own: the arguments are read as invoke reads them.
    tidied = StructuredTool.from_function(plain, args_schema=Tidy)
    direct = direct_function(tidied)
    assert direct is not None and direct(call) == 40 == int(tidied.invoke(call).content)
    with pytest.raises(ValidationError, match="negative"):
        direct({**call, "args": {"x": -1}})
    assert direct_function(StructuredTool.from_function(with_config)) is None
    assert direct_function(StructuredTool.from_function(plain, handle_tool_error=True)) is None
    artifact = StructuredTool.from_function(plain, response_format="content_and_artifact")
    assert direct_function(artifact) is None
    assert unobserved({}) and unobserved({"callbacks": []})
    assert not unobserved({"callbacks": [BaseCallbackHandler()]})


def test_the_tool_node_injects_state_a_state_key_the_store_and_the_runtime() -> None:
    """``tool_node_steps`` injects as ``ToolNode._inject_tool_args``: what it adds to a tool
    call, and that a value the call names for an injected parameter is dropped."""
    from llassembly.compat import tool_node_steps

    def use(
        x: int,
        state: Annotated[dict[str, Any], InjectedState],
        messages: Annotated[list[Any], InjectedState("messages")],
        store: Annotated[Any, InjectedStore()],
        call_id: Annotated[str, InjectedToolCallId],
        runtime: ToolRuntime,
    ) -> int:
        """Use them."""
        return x

    used = StructuredTool.from_function(use)
    state = {"messages": ["hi"]}
    runtime = ToolRuntime(
        state=state, context=None, config={}, stream_writer=lambda _: None,
        tool_call_id="c1", store="the store",
    )  # fmt: skip
    call = {"name": "use", "args": {"x": 1, "call_id": "forged"}, "id": "c1", "type": "tool_call"}
    injected = tool_node_steps([used])[0](call, runtime, used)
    assert injected["args"] == {
        "x": 1, "state": state, "messages": ["hi"], "store": "the store", "runtime": runtime,
    }  # fmt: skip
    assert call["args"] == {"x": 1, "call_id": "forged"}  # the caller's call is left as it was
    assert used.invoke({**injected, "type": "tool_call"}).content == "1"  # the id: invoke's


def test_a_tool_whose_function_has_no_signature_is_invoked_not_called_directly() -> None:
    """(``invoke`` then fails as LangChain fails such a tool: the call's failure.)"""
    from llassembly.compat import direct_function

    class Pair(BaseModel):
        a: int
        b: int

    biggest = StructuredTool(name="biggest", description="The larger.", args_schema=Pair, func=max)
    assert direct_function(biggest) is None  # inspect.signature(max) raises ValueError


def test_a_tool_with_a_json_schema_is_called_with_the_arguments_invoke_reads() -> None:
    from llassembly.compat import direct_function

    def add(a: int, b: int) -> int:
        return a + b

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    tool_ = StructuredTool(name="add", description="Add.", args_schema=schema, func=add)
    direct = direct_function(tool_)
    assert direct is not None
    call = {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1", "type": "tool_call"}
    assert direct(call) == 3 == tool_.invoke(call["args"])


class NoJsonSchemaOutput(ScriptedChatModel):
    """A model whose profile says it has structured output, but that cannot bind a schema."""

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise NotImplementedError("no json_schema method")


def test_a_model_that_cannot_bind_structured_output_is_asked_without_it() -> None:
    from llassembly.compat import structured_model

    schema = {"title": "answer", "type": "object", "properties": {"value": {"type": "number"}}}
    assert structured_model(ScriptedChatModel(replies=[]), schema) is None  # no profile
    able = ScriptedChatModel(replies=[], profile={"structured_output": True})
    assert structured_model(able, schema) is not None and able.schemas == [schema]
    unable = NoJsonSchemaOutput(replies=[], profile={"structured_output": True})
    assert structured_model(unable, schema) is None
