"""ContextBudgetMiddleware in a real `create_agent` agent with a recording fake model."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool

from ctxbudget import ContextAssembler, InputError
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.langchain.conftest import RecordingChatModel, small_budget
from tests.langchain.test_lc_runnable import assert_tool_calls_answered, history_with_tools

SYSTEM = "You are the returns desk of Acme. Use the tools."
GAP = re.compile(r"\[… \d+ messages? omitted …\]")


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


def test_middleware_trims_history_by_whole_turns() -> None:
    model = agent_model()
    history = [*history_with_tools(60), HumanMessage("Where is order 17?")]
    run_agent(model, history)
    sent = model.received[0]
    assert sent[0] == SystemMessage(SYSTEM)
    assert sent[1].content == history[0].content
    assert GAP.fullmatch(str(sent[2].content))
    assert sent[-1].content == "Where is order 17?"
    assert len(sent) < len(history)
    assert_tool_calls_answered(sent[1:])


def test_middleware_keeps_the_live_tool_call_and_its_result() -> None:
    model = agent_model()
    result = run_agent(model, [*history_with_tools(60), HumanMessage("Where is order 17?")])
    second = model.received[1]
    assert isinstance(second[-2], AIMessage)
    assert second[-2].tool_calls[0]["id"] == "call-live"
    assert second[-1].content == "order 17: delivered, 2 items"
    assert result["messages"][-1].content == "Order 17 was delivered [1]."


def test_middleware_drops_least_relevant_tools_first() -> None:
    model = agent_model()
    run_agent(model, [HumanMessage("Where is order 17?")], tools=8)
    offered = model.tools_received[0]
    assert offered[0] == "lookup_order"
    assert 2 <= len(offered) < 9
    assert offered == ["lookup_order", *(f"filler_{i}" for i in range(len(offered) - 1))]


def test_middleware_short_conversation_is_sent_unchanged() -> None:
    model = agent_model()
    run_agent(model, [HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage("Order 17?")])
    assert [m.content for m in model.received[0]] == [SYSTEM, "Hi", "Hello!", "Order 17?"]


def test_middleware_async_agent() -> None:
    model = agent_model()
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget(history=250))
    agent = create_agent(model, [lookup_order], middleware=[ContextBudgetMiddleware(assembler)])
    state: Any = {"messages": [*history_with_tools(60), HumanMessage("Order 17?")]}
    asyncio.run(agent.ainvoke(state))
    assert GAP.fullmatch(str(model.received[0][1].content))
    assert len(model.received) == 2


async def _reports(agent: Any, messages: list[BaseMessage]) -> list[Any]:
    return [
        event["data"]
        async for event in agent.astream_events({"messages": messages}, version="v2")
        if event["event"] == "on_custom_event" and event["name"] == "ctxbudget_report"
    ]


def test_middleware_report_shows_in_astream_events() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget(history=250))
    agent = create_agent(
        agent_model(), [lookup_order], middleware=[ContextBudgetMiddleware(assembler)]
    )
    reports = asyncio.run(_reports(agent, [*history_with_tools(60), HumanMessage("Order 17?")]))
    assert len(reports) == 2
    assert "history" in reports[0]["trimmed"]
    assert all(d["claimant"] == "history" for d in reports[0]["dropped"])


def request(messages: list[Any], tools: list[Any]) -> ModelRequest[Any]:
    return ModelRequest(model=RecordingChatModel(), messages=messages, tools=tools)


def test_middleware_keeps_provider_builtin_tools() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    builtin = {"type": "web_search_preview"}
    seen: list[ModelRequest[Any]] = []

    def handler(budgeted: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(budgeted)
        return ModelResponse(result=[AIMessage("ok")])

    ContextBudgetMiddleware(assembler).wrap_model_call(
        request([HumanMessage("Search the web.")], [builtin, lookup_order]), handler
    )
    assert seen[0].tools == [builtin, lookup_order]


def test_middleware_async_outside_an_agent_run() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    seen: list[ModelRequest[Any]] = []

    async def handler(budgeted: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(budgeted)
        return ModelResponse(result=[AIMessage("ok")])

    history = [*history_with_tools(60), HumanMessage("Order 17?")]
    asyncio.run(ContextBudgetMiddleware(assembler).awrap_model_call(request(history, []), handler))
    assert GAP.fullmatch(str(seen[0].messages[1].content))


def test_middleware_request_without_messages_is_an_error() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    with pytest.raises(InputError, match="the model request has no messages"):
        ContextBudgetMiddleware(assembler).wrap_model_call(request([], []), lambda r: None)  # type: ignore[arg-type, return-value]


def test_middleware_without_langchain_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'langchain' or name.startswith('langchain.'):\n"
        "            raise ImportError(f'blocked {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import langchain_ctxbudget.middleware\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'langchain>=1.0,<2'" in out
