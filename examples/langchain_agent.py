"""A LangChain agent with ctxbudget, offline: every model call within the budget.

Run it with ``python examples/langchain_agent.py``. It needs ``ctxbudget[langchain,offline]``
(``langchain`` 1.x for `create_agent`). The chat model is a scripted fake that calls a tool
six times and then answers, and prints what each call received: old tool results are
cleared behind a placeholder, the latest round trip is always sent whole. Swap in a real
chat model (with a ``profile``) and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxbudget import get_tokenizer
from langchain_ctxbudget.middleware import ContextBudgetMiddleware

ORDERS = 6
ENCODING = get_tokenizer("o200k_base").encoding  # offline: ctxbudget ships the encoding


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id: status, items and shipping events."""
    events = " ".join(f"event {i}: parcel scanned at depot {i}." for i in range(60))
    return f"order {order_id}: delivered. {events}"


class ScriptedModel(BaseChatModel):
    """Looks up orders 1 to 6, one call at a time, then answers; prints what it received."""

    model_name: str = "gpt-4o"
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        shown(self.calls, messages)
        if self.calls <= ORDERS:
            call = {
                "name": "lookup_order",
                "args": {"order_id": str(self.calls)},
                "id": f"c{self.calls}",
            }
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"All {ORDERS} orders were delivered.")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools])


def shown(call: int, messages: list[BaseMessage]) -> None:
    """One line per model call: its size, then each message in brief."""
    total = sum(len(ENCODING.encode_ordinary(m.text)) for m in messages)
    print(f"--- call {call}: {len(messages)} messages, {total} tokens of text ---")
    for message in messages:
        calls = [
            f"{c['name']}({c['args']['order_id']})" for c in getattr(message, "tool_calls", [])
        ]
        print(f"  {message.type}: {' '.join(calls) or message.text[:60]}")


model = ScriptedModel(profile={"max_input_tokens": 3_500})
middleware = ContextBudgetMiddleware.for_model(model, reserve_output=1_000)
agent = create_agent(
    model,
    [lookup_order],
    system_prompt="You are the returns desk. Use the tools.",
    middleware=[middleware],
)
print(f"budget: {middleware.assembler.budget.available} tokens")
result = agent.invoke({"messages": [HumanMessage(f"Check my orders 1 to {ORDERS}, please.")]})
print("--- answer ---")
print(result["messages"][-1].text)
