"""The provider's own count through the LangChain adapter (docs/langchain.md, "A
provider count in the chain"): the real Anthropic client over a fake
count_tokens endpoint, checked on what reached a recording model by that endpoint's own
count function applied to the request LangChain's Anthropic integration would send."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnablePassthrough

from ctxbudget import Allocation, AnthropicCount, Budget, ContextAssembler, InputError
from langchain_ctxbudget import (
    ContextBudgetCompressor,
    ContextBudgetRunnable,
    ContextBudgetTransformer,
)
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.langchain_agent_oracle import anthropic_prompt
from tests.support.langchain_stack import RecordingChatModel, tokens, vector_retriever
from tests.support.provider_sdks import AHTTP, AnthropicServer

MODEL = "claude-sonnet-4-5"
TOTAL = 1_200
SYSTEM = "Answer from the sources; cite them by [n]."


def _strings(body: object) -> list[str]:
    """Every string in a request body a provider could count: texts, tool results, tool
    names and descriptions, and tool inputs and schemas as JSON."""
    if isinstance(body, str):
        return [body]
    if isinstance(body, dict):
        found: list[str] = []
        for key, value in body.items():
            if key in ("input", "input_schema"):
                found.append(json.dumps(value, sort_keys=True))
            elif key in ("text", "content", "name", "description") or isinstance(
                value, list | dict
            ):
                found += _strings(value)
        return found
    if isinstance(body, list):
        return [s for item in body for s in _strings(item)]
    return []


def provider_tokens(body: dict[str, Any]) -> int:
    """The fake provider's count: twice o200k on the request's strings, so the offline
    estimate and the provider disagree and the provider's figure decides."""
    return math.ceil(2 * sum(tokens(s) for s in _strings(body)))


def received_by_provider(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> int:
    """What the provider would count for the request the model received."""
    body = anthropic_prompt(messages)
    if tools:
        body["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"]["parameters"],
            }
            for t in tools
        ]
    return provider_tokens(body)


def budget(total: int = TOTAL) -> Budget:
    return Budget(
        total=total,
        reserve_output=0,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", priority=0),
            Allocation("tools", max=400, priority=1),
            Allocation("retrieved", priority=2),
            Allocation("history", priority=3),
        ),
    )


def assembler(server: AnthropicServer, **options: Any) -> ContextAssembler:
    return ContextAssembler(
        tokenizer=MODEL,
        budget=options.pop("budget", budget()),
        provider_count=AnthropicCount(server.client(), model=MODEL),
        **options,
    )


def documents(n: int = 30) -> list[Document]:
    return [
        Document(
            f"Refund policy clause {i}: " + " ".join(f"term{i}x{k}" for k in range(25)),
            id=f"doc-{i}",
        )
        for i in range(n)
    ]


class Reports(BaseCallbackHandler):
    """The ``ctxbudget_report`` events of a run."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "ctxbudget_report":
            self.reports.append(data)


def rag_chain(server: AnthropicServer, model: RecordingChatModel) -> Runnable[str, Any]:
    ctx = ContextBudgetRunnable(assembler=assembler(server))
    retriever = vector_retriever(documents())
    return {"documents": retriever, "question": RunnablePassthrough()} | ctx | model


def test_rag_chain_sends_within_the_provider_count() -> None:
    server, model = AnthropicServer(provider_tokens), RecordingChatModel(model_name=MODEL)
    rag_chain(server, model).invoke("How long do refunds take?")
    assert server.bodies, "the provider count was never called"
    assert received_by_provider(model.received[-1], []) <= TOTAL


def test_rag_chain_report_says_provider_count_and_drops() -> None:
    server, model, events = AnthropicServer(provider_tokens), RecordingChatModel(), Reports()
    rag_chain(server, model).invoke("How long do refunds take?", config={"callbacks": [events]})
    (report,) = events.reports
    assert report["count_method"] == "anthropic count_tokens"
    sent = "\n".join(m.text for m in model.received[-1])
    shown = [i for i in range(len(documents())) if f"Refund policy clause {i}:" in sent]
    assert 0 < len(shown) < len(documents())
    assert report["total"] == provider_tokens(server.bodies[-1])


@pytest.mark.parametrize("cache_control", [False, True])
def test_prompt_costs_no_more_than_the_provider_measured_with_a_prefix_of_parts(
    cache_control: bool,
) -> None:
    layout = Budget(
        total=TOTAL,
        reserve_output=0,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", priority=0),
            Allocation("examples", max=200, priority=1),
            Allocation("memory", max=100, priority=1),
            Allocation("retrieved", priority=2),
        ),
    )
    server, model, events = AnthropicServer(provider_tokens), RecordingChatModel(), Reports()
    ctx = ContextBudgetRunnable(
        assembler=assembler(server, budget=layout), cache_control=cache_control
    )
    values = {
        "question": "Refunds?",
        "system": SYSTEM,
        "documents": documents(),
        "examples": "Q: How long? A: Five days [1].",
        "memory": "The user is in the EU.",
    }
    (ctx | model).invoke(values, config={"callbacks": [events]})
    assert len(server.bodies[-1]["system"]) > 1
    assert received_by_provider(model.received[-1], []) <= events.reports[0]["total"] <= TOTAL


def test_rag_chain_answers_when_the_count_endpoint_is_overloaded() -> None:
    server, model, events = AnthropicServer(provider_tokens), RecordingChatModel(), Reports()
    server.fail = AHTTP.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}})
    answer = rag_chain(server, model).invoke("Refunds?", config={"callbacks": [events]})
    assert answer.content == "See [1]."
    (report,) = events.reports
    assert "anthropic count_tokens failed" in report["count_fallback"]
    assert "529" in report["count_fallback"]


def test_rag_chain_answers_when_the_count_endpoint_is_unreachable() -> None:
    server, model, events = AnthropicServer(provider_tokens), RecordingChatModel(), Reports()
    server.fail = AHTTP.ConnectError("connection refused")
    rag_chain(server, model).invoke("Refunds?", config={"callbacks": [events]})
    (report,) = events.reports
    assert "APIConnectionError" in report["count_fallback"]
    assert report["total"] <= TOTAL


def test_rag_chain_ainvoke_counts_inline_within_the_provider_count() -> None:
    server, model, events = AnthropicServer(provider_tokens), RecordingChatModel(), Reports()
    chain = rag_chain(server, model)
    asyncio.run(chain.ainvoke("Refunds?", config={"callbacks": [events]}))
    assert events.reports[0]["count_method"] == "anthropic count_tokens"
    assert received_by_provider(model.received[-1], []) <= TOTAL


def test_rag_chain_batch_counts_each_prompt_once_per_recount() -> None:
    server, model = AnthropicServer(provider_tokens), RecordingChatModel()
    questions = ["Refunds?", "Returns?", "Shipping?"]
    rag_chain(server, model).batch(questions)
    assert len(model.received) == len(questions)
    assert all(received_by_provider(sent, []) <= TOTAL for sent in model.received)
    asked = [json.dumps(body) for body in server.bodies]
    assert all(any(q in body for body in asked) for q in questions)


def test_runnable_refuses_documents_alone_with_a_provider_count() -> None:
    ctx = ContextBudgetRunnable(assembler=assembler(AnthropicServer(provider_tokens)))
    with pytest.raises(InputError, match=r"provider count .* whole prompt.*dict input"):
        ctx.invoke(documents(3))


def test_with_sources_refuses_a_provider_count() -> None:
    ctx = ContextBudgetRunnable(assembler=assembler(AnthropicServer(provider_tokens)))
    with pytest.raises(InputError, match=r"provider count .* whole prompt.*dict input"):
        ctx.with_sources().invoke(documents(3))


def test_agent_middleware_refuses_a_provider_count() -> None:
    # The count would measure tool calls as text; the agent sends them as tool blocks.
    counted = assembler(AnthropicServer(provider_tokens), native_tools=True, fence_rule=False)
    with pytest.raises(
        InputError, match=r"ContextBudgetMiddleware cannot use the provider count .* tool blocks"
    ):
        ContextBudgetMiddleware(counted)


def test_runnable_refuses_a_provider_count_with_tool_turns_in_the_history() -> None:
    server = AnthropicServer(provider_tokens)
    ctx = ContextBudgetRunnable(assembler=assembler(server))
    call = {"name": "lookup_order", "args": {"order_id": "17"}, "id": "call-1"}
    history = [
        HumanMessage("Where is order 17?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("delivered", tool_call_id="call-1"),
    ]
    with pytest.raises(
        InputError, match=r"ContextBudgetRunnable cannot use the provider count .* tool blocks"
    ):
        ctx.invoke({"question": "And order 18?", "history": history})
    assert server.bodies == []


COMPONENTS: dict[str, Callable[[ContextAssembler], object]] = {
    "transformer": lambda a: ContextBudgetTransformer(a).transform_documents(documents(3)),
    "compressor": lambda a: ContextBudgetCompressor(assembler=a).compress_documents(
        documents(3), "Why?"
    ),
}


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_document_components_refuse_a_provider_count(component: str) -> None:
    server = AnthropicServer(provider_tokens)
    with pytest.raises(InputError, match=r"select_sources returns one part of a prompt"):
        COMPONENTS[component](assembler(server))
    assert server.bodies == []
