"""`ContextBudgetMiddleware`: an agent's model requests kept within the token budget.

Needs ``langchain`` 1.x (agents built with `create_agent`); the rest of the adapter
needs only langchain-core.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AnyMessage
from langchain_core.runnables import ensure_config

from ctxbudget import Assembled, ContextAssembler, InputError
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    assembled_report,
    in_run,
    kept_units,
    restore,
    tool_of,
    units_of,
)

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
    )
except ImportError as error:
    raise ImportError(
        "langchain_ctxbudget.middleware needs langchain 1.x (create_agent and its "
        "middleware): pip install 'langchain>=1.0,<2'"
    ) from error

__all__ = ["ContextBudgetMiddleware"]


class ContextBudgetMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Budgets every model call of an agent by the rules of `ContextAssembler.assemble`.

    The latest turn (the user's message, or the last tool calls with their results)
    is the request's question and always sent; earlier messages are history (first
    human turn, most recent turns, a gap marker between; an AI message with tool
    calls stays with its results); tools are dropped whole, least relevant (last
    listed) first. Every message, the latest turn's included, is sent rebuilt as it was
    counted: texts neutralised (tool results are untrusted data), every part counted or
    refused (README "What a message costs"); the agent's state keeps the originals.
    The system prompt is counted, never changed. Build the assembler
    with ``native_tools=True`` so tools are counted as the schemas the provider
    receives. Each call dispatches the custom event ``"ctxbudget_report"`` (when it
    runs inside a run, as in an agent)::

        agent = create_agent(model, tools, middleware=[ContextBudgetMiddleware(assembler)])
    """

    def __init__(self, assembler: ContextAssembler) -> None:
        """`assembler` holds the budget (it needs ``history`` and ``tools`` allocations)."""
        super().__init__()
        self.assembler = assembler

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Send `request` with its messages and tools cut to the budget."""
        budgeted, assembled = self._budget(request)
        config = ensure_config()
        if in_run(config):
            dispatch_custom_event(REPORT_EVENT, assembled_report(assembled), config=config)
        return handler(budgeted)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """`wrap_model_call` for agents run asynchronously."""
        budgeted, assembled = self._budget(request)
        config = ensure_config()
        if in_run(config):
            await adispatch_custom_event(REPORT_EVENT, assembled_report(assembled), config=config)
        return await handler(budgeted)

    def _budget(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], Assembled]:
        units = units_of("messages", request.messages, counter=self.assembler.counter)
        if not units:
            raise InputError("the model request has no messages, so there is no turn to answer")
        *earlier, latest = units
        described = [tool_of(index, tool) for index, tool in enumerate(request.tools)]
        assembled = self.assembler.assemble(
            question=latest.turn.content,
            system=request.system_prompt,
            history=[unit.turn for unit in earlier],
            tools=[tool for tool in described if tool is not None],
        )
        kept_tools = {tool.name for tool in assembled.tools}
        messages = [
            message
            for _, group in restore(earlier, kept_units(earlier, assembled), assembled.history)
            for message in group
        ]
        messages.extend(latest.sent())
        tools = [
            tool
            for tool, seen in zip(request.tools, described, strict=True)
            if seen is None or seen.name in kept_tools
        ]
        # Rebuilt by sent_message as the standard class of each message's type: AnyMessage.
        return request.override(messages=cast("list[AnyMessage]", messages), tools=tools), assembled
