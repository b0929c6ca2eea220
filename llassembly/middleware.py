"""``ToolsPlannerMiddleware``: one plan per model call inside ``create_agent``.

Where things happen, and why:

* ``wrap_model_call`` swaps the system prompt for the planner's (the caller's system message
  becomes its context), offers the model no tools, and repairs a plan that does not parse or
  verify (model calls only; no tool has run). The plan goes to private state.
* ``after_model`` runs the plan as a nested LangGraph graph that shares the agent's
  checkpointer. ``ModelRetryMiddleware`` wraps only the model call, so a retry never re-runs a
  tool; an ``interrupt()`` in a tool pauses the agent, and on resume only this hook re-runs:
  the nested graph continues from its last checkpoint without calling the model again.
* ``after_agent`` re-raises a plan failure under ``on_tool_error="raise"``, after the messages
  of the calls that completed were saved to the agent state.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, NotRequired, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from ._drive import adrive, drive
from .errors import ExecutionError, UsageError
from .externs import Extern
from .graph import Granularity
from .planner import (
    OnToolError,
    PlannerOptions,
    ToolMiddleware,
    Turn,
    TurnRun,
    model_reply,
    short_hash,
    turn_messages,
)

__all__ = ["PlannerAgentState", "ToolsPlannerMiddleware"]

_STATE_KEY: Final = "llassembly"


class PlannerAgentState(AgentState[Any]):
    """Agent state plus the planner's private record (never in the agent's input or output)."""

    llassembly: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class ToolsPlannerMiddleware(AgentMiddleware[PlannerAgentState, Any]):
    """Make a ``create_agent`` agent write one plan and run it, instead of one call per turn.

    Args:
        infer_tools_messages: Keep an ``AIMessage``/``ToolMessage`` pair per executed call
            (``False`` keeps only the plan and the final message).
        prompt_path: A template file replacing the built-in prompt (``{context}`` and
            ``{extern_functions}`` are filled in).
        max_instructions_to_exec: Instruction budget of a plan.
        max_repairs: How many times the model may fix a plan that does not parse or verify.
        on_tool_error: When a tool raises or a budget runs out: ``"stop"`` ends the turn with a
            message naming the tool, line and error; ``"raise"`` re-raises after the completed
            calls are saved; ``"replan"`` asks the model for a new plan with the results so far.
        max_replans: Most new plans per turn under ``"replan"``.
        max_tool_calls: Tool-call budget of a plan.
        max_stack_depth: Stack budget of a plan.
        granularity: ``"block"`` (a checkpointed step per tool call), ``"instruction"`` (a node
            per instruction) or ``"program"`` (one step for the whole plan).
        tools: The tools plans may call. By default, the agent's tools as the model request
            lists them; pass them to resume an interrupted plan in a process where the model
            has not been called yet (LangChain tells middleware the tools only then).
        tool_middleware: ``wrap_tool_call`` middleware to apply to each call of a plan
            (e.g. ``ToolRetryMiddleware``). The agent's own ``wrap_tool_call`` middleware
            wraps its tool node, which plans do not go through.

    Example:
        >>> from langchain.agents import create_agent
        >>> from llassembly import ToolsPlannerMiddleware
        >>> planner = ToolsPlannerMiddleware()
        >>> agent = create_agent(model, tools=[get_weather], middleware=[planner])  # doctest: +SKIP
    """

    state_schema = PlannerAgentState

    def __init__(
        self,
        infer_tools_messages: bool = True,
        prompt_path: str | Path | None = None,
        max_instructions_to_exec: int = 1000,
        *,
        max_repairs: int = 2,
        on_tool_error: OnToolError = "stop",
        max_replans: int = 1,
        max_tool_calls: int = 100,
        max_stack_depth: int = 256,
        granularity: Granularity = "block",
        tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
        tool_middleware: Sequence[ToolMiddleware] = (),
    ) -> None:
        super().__init__()
        self.options = PlannerOptions(
            infer_tools_messages=infer_tools_messages,
            prompt_path=prompt_path,
            max_instructions_to_exec=max_instructions_to_exec,
            max_repairs=max_repairs,
            on_tool_error=on_tool_error,
            max_replans=max_replans,
            max_tool_calls=max_tool_calls,
            max_stack_depth=max_stack_depth,
            granularity=granularity,
            tool_middleware=tuple(tool_middleware),
        )
        self._turn = Turn(self.options)
        self._given_tools = list(tools) if tools is not None else None
        self._given: dict[str, Extern] | None = (
            self._turn.externs_for(self._given_tools) if self._given_tools is not None else None
        )
        # Tools and model seen in model requests, by the tool names the plan was written for:
        # one middleware instance may serve several agents at once, with different tools.
        self._seen: dict[tuple[str, ...], tuple[dict[str, Extern], Any]] = {}
        self._errors: dict[str, ExecutionError] = {}

    # -- model side -------------------------------------------------------------------------

    def _prepare(
        self, request: ModelRequest[Any]
    ) -> tuple[ModelRequest[Any], dict[str, Extern], str]:
        if self._given is not None:
            externs = self._given
        else:
            externs = self._turn.externs_for([t for t in request.tools if isinstance(t, BaseTool)])
        self._seen[tuple(externs)] = (externs, request.model)
        # The agent's system prompt and any SystemMessage in the conversation become the
        # planner's context; the model then sees exactly one system message (ours).
        parts = [request.system_message.text] if request.system_message is not None else []
        parts += [m.text for m in request.messages if isinstance(m, SystemMessage)]
        context = "\n\n".join(p for p in parts if p)
        prompt = self._turn.system_prompt(externs, context)
        planner_request = request.override(
            system_message=SystemMessage(prompt), messages=_conversation(request.messages), tools=[]
        )
        return planner_request, externs, context

    @staticmethod
    def _response(
        reply: AIMessage, is_program: bool, calls: int, context: str, externs: dict[str, Extern]
    ) -> ExtendedModelResponse[Any]:
        record = {
            "plan": reply.text if is_program else None,
            "tools": list(externs),
            "context": context,
            "model_calls": calls,
            "repairs": calls - 1,
        }
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[reply]),
            command=Command(update={_STATE_KEY: record}),
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Any],
    ) -> ExtendedModelResponse[Any]:
        """Ask for a plan (no tools offered), repairing it until it parses and verifies."""
        planner_request, externs, context = self._prepare(request)
        body = self._turn.draft(list(planner_request.messages), externs)
        reply, is_program, calls = drive(
            body, lambda msgs: model_reply(handler(planner_request.override(messages=_any(msgs))))
        )
        return self._response(reply, is_program, calls, context, externs)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`wrap_model_call`."""
        planner_request, externs, context = self._prepare(request)
        body = self._turn.draft(list(planner_request.messages), externs)

        async def call(msgs: list[BaseMessage]) -> AIMessage:
            return model_reply(await handler(planner_request.override(messages=_any(msgs))))

        reply, is_program, calls = await adrive(body, call)
        return self._response(reply, is_program, calls, context, externs)

    # -- plan side --------------------------------------------------------------------------

    def _start(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> tuple[dict[str, Any], TurnRun, dict[str, Any]] | None:
        record = state.get(_STATE_KEY)
        if not record or not record.get("plan"):
            return None
        externs, model = self._seen.get(tuple(record.get("tools", ())), (self._given, None))
        if externs is None:
            raise UsageError(
                "the plan's tools are unknown in this process: pass tools=[...] to "
                "ToolsPlannerMiddleware to resume a plan before the model has been called here"
            )
        messages = _conversation(state["messages"])
        plan_message = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        seed = f"{record['plan']}{getattr(plan_message, 'id', '')}"
        run = TurnRun(
            externs=externs,
            system_prompt=self._turn.system_prompt(externs, record.get("context", "")),
            call_model=(lambda msgs: model_reply(model.invoke(msgs)))
            if model is not None
            else None,
            acall_model=(lambda msgs: _ainvoke(model, msgs)) if model is not None else None,
            agent_state=state,
            runtime=runtime,
        )
        turn_input = {
            "conversation": messages,
            "plan": record["plan"],
            "plan_number": 1,
            "call_prefix": f"asm{short_hash(seed)}_1_",
            "new_messages": [],
            "model_calls": record.get("model_calls", 1),
            "repairs": record.get("repairs", 0),
            "replans": 0,
            "executed": 0,
            "tool_calls": 0,
        }
        return turn_input, run, record

    def _finish(
        self, final: dict[str, Any], run: TurnRun, record: dict[str, Any]
    ) -> dict[str, Any]:
        done = {**record, "plan": None}
        if final.get("failure") and self.options.on_tool_error == "raise":
            key = uuid.uuid4().hex
            if run.error is not None:
                self._errors[key] = run.error
            done["raise"] = key
            done["failure"] = final["failure"]
        return {
            "messages": turn_messages(final, self.options),
            _STATE_KEY: done,
            "jump_to": "end",
        }

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: PlannerAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Run the plan the model just wrote."""
        started = self._start(state, runtime)
        if started is None:
            return None
        turn_input, run, record = started
        final = self._turn.graph.invoke(turn_input, self._turn.config_for(run, get_config()))
        return self._finish(final, run, record)

    @hook_config(can_jump_to=["end"])
    async def aafter_model(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        started = self._start(state, runtime)
        if started is None:
            return None
        turn_input, run, record = started
        final = await self._turn.graph.ainvoke(turn_input, self._turn.config_for(run, get_config()))
        return self._finish(final, run, record)

    def after_agent(self, state: PlannerAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Under ``on_tool_error="raise"``, raise the plan's failure now that state is saved."""
        record = state.get(_STATE_KEY) or {}
        key = record.get("raise")
        if not key:
            return None
        error = self._errors.pop(key, None)
        if error is None:
            failure = record.get("failure") or {}
            error = ExecutionError(
                str(failure.get("detail", "the plan failed")),
                line=int(failure.get("line", 0)),
                source=str(failure.get("source", "")),
            )
        raise error

    async def aafter_agent(
        self, state: PlannerAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_agent`."""
        return self.after_agent(state, runtime)


def _any(messages: list[BaseMessage]) -> list[AnyMessage]:
    """The planner's messages as the type ``ModelRequest`` declares (they are already)."""
    return cast("list[AnyMessage]", messages)


def _conversation(messages: Sequence[Any]) -> list[Any]:
    """The messages the planner model sees after its system prompt (system messages dropped)."""
    return [m for m in messages if not isinstance(m, SystemMessage)]


async def _ainvoke(model: Any, messages: list[BaseMessage]) -> AIMessage:
    return model_reply(await model.ainvoke(messages))
