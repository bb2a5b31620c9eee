"""`CacheMonitorHandler`: a chain's and an agent's model usage fed to a `CacheMonitor` with the
report of the prompt it answered."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.runnables import RunnableLambda

from ctxbudget import CacheMonitor, ContextAssembler
from langchain_ctxbudget import CacheMonitorHandler, ContextBudgetRunnable
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.factories import words
from tests.support.langchain_stack import RecordingChatModel, small_budget

SYSTEM = "You answer from the sources. " + words("rule", 40)


def usage(prompt: int, cached: int) -> UsageMetadata:
    return {
        "input_tokens": prompt,
        "output_tokens": 3,
        "total_tokens": prompt + 3,
        "input_token_details": {"cache_read": cached},
    }


def replies(*usages: UsageMetadata) -> list[AIMessage]:
    return [AIMessage("See [1].", usage_metadata=u) for u in usages]


def _chain(model: RecordingChatModel) -> Any:
    ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o"))

    def prompt_of(question: str) -> dict[str, Any]:
        return {"question": question, "system": SYSTEM}

    return RunnableLambda(prompt_of) | ctx | model


def _prefix() -> tuple[str, int]:
    result = ContextAssembler(tokenizer="gpt-4o").assemble(system=SYSTEM, question="Why?")
    return result.report.prefix_hash, result.report.prefix_tokens


def test_handler_feeds_the_chains_usage_with_its_report() -> None:
    model = RecordingChatModel(replies=replies(usage(500, 0), usage(500, 40)))
    hash_, tokens = _prefix()
    monitor = CacheMonitor()
    chain = _chain(model)
    for question in ("Why?", "How?"):
        chain.invoke(question, config={"callbacks": [CacheMonitorHandler(monitor)]})
    assert monitor.hit_rate(hash_) == 40 / tokens


def test_handler_feeds_an_async_chain() -> None:
    model = RecordingChatModel(replies=replies(usage(500, 0), usage(500, 10)))
    hash_, tokens = _prefix()
    monitor = CacheMonitor()
    handler = CacheMonitorHandler(monitor)
    chain = _chain(model)

    async def run() -> None:
        for question in ("Why?", "How?"):
            await chain.ainvoke(question, config={"callbacks": [handler]})

    asyncio.run(run())
    assert monitor.hit_rate(hash_) == 10 / tokens


def test_handler_skips_a_model_call_with_no_report_before_it() -> None:
    monitor = CacheMonitor()
    model = RecordingChatModel(replies=replies(usage(500, 0)))
    model.invoke("hi", config={"callbacks": [CacheMonitorHandler(monitor)]})
    assert monitor.hit_rate("0" * 64) is None


def test_handler_feeds_an_agents_model_calls_through_the_middleware() -> None:
    assembler = ContextAssembler(
        tokenizer="gpt-4o", budget=small_budget(history=250, tools=300), native_tools=True
    )
    model = RecordingChatModel(replies=replies(usage(800, 0), usage(800, 64), usage(800, 64)))
    agent = create_agent(
        model, [], system_prompt=SYSTEM, middleware=[ContextBudgetMiddleware(assembler)]
    )
    monitor = CacheMonitor()
    handler = CacheMonitorHandler(monitor)
    for question in ("Why?", "How?"):
        state: Any = {"messages": [HumanMessage(question)]}
        agent.invoke(state, config={"callbacks": [handler]})
    (rate,) = monitor.hit_rates().values()  # one system prompt, one prefix
    assert rate is not None
    assert rate > 0
