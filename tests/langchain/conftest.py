"""LangChain adapter fixtures: an assembler, a corpus, a chat model that records its input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.vectorstores import InMemoryVectorStore, VectorStoreRetriever
from pydantic import Field

from ctxbudget import Allocation, Budget, ContextAssembler


class RecordingChatModel(BaseChatModel):
    """Replies from a script (the last reply repeats) and keeps every request it received."""

    model_name: str = "gpt-4o"
    replies: list[AIMessage] = Field(default_factory=lambda: [AIMessage("See [1].")])
    received: list[list[BaseMessage]] = Field(default_factory=list)
    tools_received: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        self.tools_received.append(
            [t.get("function", t).get("name", t["type"]) for t in kwargs.get("tools", [])]
        )
        reply = self.replies[min(len(self.received), len(self.replies)) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)


def small_budget(*, retrieved: int = 300, history: int = 200, tools: int = 200) -> Budget:
    """A budget small enough that a handful of sources, turns and tools overflow it."""
    return Budget(
        total=2_000,
        reserve_output=200,
        allocations=(
            Allocation("retrieved", max=retrieved, priority=1),
            Allocation("examples", max=200, priority=1),
            Allocation("tools", max=tools, priority=2),
            Allocation("history", max=history, priority=3),
            Allocation("memory", max=100, priority=4),
        ),
    )


@pytest.fixture
def assembler() -> ContextAssembler:
    return ContextAssembler(tokenizer="gpt-4o", budget=small_budget())


@pytest.fixture
def model() -> RecordingChatModel:
    return RecordingChatModel()


def corpus() -> list[Document]:
    """A small help-desk corpus: sources with scores, a duplicate, two restricted documents."""
    return [
        Document(
            "Refunds are paid within 5 business days of receiving the returned item.",
            id="refunds-1",
            metadata={"source": "refunds.md", "title": "Refunds", "chunk_index": 0, "score": 0.91},
        ),
        Document(
            "Refunds are paid within 5 business days of receiving the returned item!",
            id="refunds-dup",
            metadata={"source": "refunds-copy.md", "title": "Refunds", "score": 0.90},
        ),
        Document(
            "Items must be returned unused, in the original packaging, within 30 days.",
            id="returns-1",
            metadata={"source": "returns.md", "title": "Returns", "headers": "Policy > EU"},
        ),
        Document(
            "Shipping is free for orders over 50 EUR; below that it costs 4.90 EUR.",
            id="shipping-1",
            metadata={"source": "shipping.md", "title": "Shipping", "relevance_score": 0.42},
        ),
        Document(
            "Internal: refund fraud threshold is 800 EUR per customer per month.",
            id="fraud-1",
            metadata={"source": "fraud.md", "title": "Fraud rules", "groups": ["risk"]},
        ),
        Document(
            "Other tenant: Globex refunds take 60 days.",
            id="globex-1",
            metadata={"source": "globex.md", "tenant": "globex"},
        ),
        Document(
            "Gift cards cannot be refunded or exchanged for cash, {not even} {{partly}}.",
            id="giftcards-1",
            metadata={"source": "giftcards.md", "title": "Gift cards"},
        ),
    ]


def vector_retriever(documents: list[Document]) -> VectorStoreRetriever:
    """Every document, most similar first, from an in-memory store with a hash embedding."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(documents)
    return store.as_retriever(search_kwargs={"k": len(documents)})
