"""An agent for the middleware's tests: a real `create_agent` with a recording model, a
useful tool and long filler tools, and conversations with tool calls in them."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from ctxbudget import ContextAssembler
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.langchain_stack import RecordingChatModel, small_budget

SYSTEM = "You are the returns desk of Acme. Use the tools."


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id: status, items and shipping date."""
    return f"order {order_id}: delivered, 2 items"


def filler_tools(count: int) -> list[BaseTool]:
    """Tools with long descriptions, listed after the useful one, so a small budget drops them."""

    def make(i: int) -> BaseTool:
        def run(x: str) -> str:
            return x

        run.__name__ = f"filler_{i}"
        run.__doc__ = f"Filler tool number {i}. " + "It does nothing useful at all. " * 12
        return tool(run)

    return [make(i) for i in range(count)]


def agent_model() -> RecordingChatModel:
    call = {"name": "lookup_order", "args": {"order_id": "17"}, "id": "call-live"}
    return RecordingChatModel(
        replies=[AIMessage("", tool_calls=[call]), AIMessage("Order 17 was delivered [1].")]
    )


def run_agent(
    model: RecordingChatModel, messages: list[BaseMessage], *, tools: int = 0
) -> dict[str, Any]:
    assembler = ContextAssembler(
        tokenizer="gpt-4o", budget=small_budget(history=250, tools=300), native_tools=True
    )
    agent = create_agent(
        model,
        [lookup_order, *filler_tools(tools)],
        system_prompt=SYSTEM,
        middleware=[ContextBudgetMiddleware(assembler)],
    )
    state: Any = {"messages": messages}
    result: dict[str, Any] = agent.invoke(state)
    return result


def history_with_tools(turns: int) -> list[BaseMessage]:
    """A conversation of `turns` exchanges, every third one an AI tool call and its result."""
    messages: list[BaseMessage] = [HumanMessage("I want to return my order 17, it arrived broken.")]
    for i in range(turns):
        if i % 3 == 1:
            call = {"name": "lookup_order", "args": {"id": str(i)}, "id": f"call-{i}"}
            messages.append(AIMessage("", tool_calls=[call]))
            messages.append(ToolMessage(f"order {i}: shipped, 2 items", tool_call_id=f"call-{i}"))
        messages.append(AIMessage(f"Answer number {i} about the return of order 17."))
        messages.append(HumanMessage(f"Follow-up question number {i} about the refund."))
    return messages
