"""A LangChain stack for the adapter's tests: a chat model that records its input, a corpus
and retriever, every chain path documents take to a model, and an independent count of
everything a model received (tiktoken's own encoding)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, get_args

from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.vectorstores import InMemoryVectorStore, VectorStoreRetriever
from pydantic import Field

from ctxbudget import Allocation, Budget, ContextAssembler, Principal, get_tokenizer
from langchain_ctxbudget import (
    ContextBudgetCompressor,
    ContextBudgetRetriever,
    ContextBudgetRunnable,
    ContextBudgetTransformer,
    DocumentMetadataMapping,
)


class RecordingChatModel(BaseChatModel):
    """Replies from a script (the last reply repeats) and keeps every request it received."""

    model_name: str = "gpt-4o"
    replies: list[AIMessage] = Field(default_factory=lambda: [AIMessage("See [1].")])
    received: list[list[BaseMessage]] = Field(default_factory=list)
    tools_received: list[list[str]] = Field(default_factory=list)
    schemas_received: list[list[dict[str, Any]]] = Field(default_factory=list)

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
        self.schemas_received.append(list(kwargs.get("tools", [])))
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


_O200K = get_tokenizer("o200k_base").encoding
"""tiktoken's own o200k_base encoding: counts made with it owe nothing to ctxbudget's counter."""


def tokens(text: str) -> int:
    """Tokens of `text` by tiktoken's encoding itself (gpt-4o's)."""
    return len(_O200K.encode_ordinary(text))


def _block_text(block: str | dict[str, Any]) -> str:
    if isinstance(block, str):
        return block
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    return json.dumps(block, ensure_ascii=False)


def message_tokens(message: BaseMessage) -> int:
    """Everything `message` carries that a provider integration could send, counted apart:
    its content (a non-text block as its JSON), tool calls, additional_kwargs, name and ids."""
    content = message.content
    texts = [content] if isinstance(content, str) else [_block_text(b) for b in content]
    for call in getattr(message, "tool_calls", []):
        texts += [call["name"], json.dumps(call["args"], ensure_ascii=False), call["id"] or ""]
    for call in getattr(message, "invalid_tool_calls", []):
        texts += [call["name"] or "", call["args"] or "", call["id"] or ""]
    texts += [json.dumps(value, ensure_ascii=False) for value in message.additional_kwargs.values()]
    texts += [message.name or "", getattr(message, "tool_call_id", "") or ""]
    return sum(tokens(text) for text in texts)


def received_tokens(messages: Sequence[BaseMessage]) -> int:
    """What a list of messages costs, by `message_tokens`."""
    return sum(message_tokens(message) for message in messages)


# --- every path documents take to a model ---------------------------------------------------

Path = Literal["runnable", "dict", "transformer", "compressor", "retriever"]
PATHS: tuple[Path, ...] = get_args(Path)
PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the sources; cite them by [n]."), ("human", "{context}\n\n{question}")]
)


def _joined(documents: list[Document]) -> str:
    return "\n\n".join(document.page_content for document in documents)


def chain_for(
    path: Path,
    retriever: Runnable[str, list[Document]],
    assembler: ContextAssembler,
    model: RecordingChatModel,
    *,
    principal: Principal | None = None,
    mapping: DocumentMetadataMapping | None = None,
) -> Runnable[str, Any]:
    """A RAG chain from `retriever` to `model` through one of the adapter's components.

    `principal` goes in each call's config (the runnable and the retriever take it from
    there), or as the transformer's ``principal=``; the compressor takes none.
    """
    mapping = DocumentMetadataMapping() if mapping is None else mapping
    if path == "runnable":
        ctx = ContextBudgetRunnable(assembler=assembler, mapping=mapping)
        context: Runnable[str, Any] = retriever | ctx
    elif path == "dict":

        def prompt_of(question: str) -> dict[str, Any]:
            return {"question": question, "documents": retriever.invoke(question)}

        ctx = ContextBudgetRunnable(assembler=assembler, mapping=mapping)
        return RunnableLambda(prompt_of) | ctx | model
    elif path == "transformer":
        transformer = ContextBudgetTransformer(assembler, mapping=mapping)

        def transform(documents: list[Document]) -> list[Document]:
            return list(transformer.transform_documents(documents, principal=principal))

        context = retriever | RunnableLambda(transform) | RunnableLambda(_joined)
    elif path == "compressor":
        compressor = ContextBudgetCompressor(assembler=assembler, mapping=mapping)
        context = ContextualCompressionRetriever(
            base_compressor=compressor, base_retriever=retriever
        ) | RunnableLambda(_joined)
    else:
        budgeted = ContextBudgetRetriever(retriever=retriever, assembler=assembler, mapping=mapping)
        context = budgeted | RunnableLambda(_joined)
    return {"context": context, "question": RunnablePassthrough()} | PROMPT | model


def ask(
    path: Path,
    documents: list[Document],
    assembler: ContextAssembler,
    model: RecordingChatModel,
    *,
    principal: Principal | None = None,
    mapping: DocumentMetadataMapping | None = None,
    question: str = "How long do refunds take?",
) -> str:
    """Run `question` through `chain_for(path, ...)` over `documents` (in a vector store),
    as `principal`; everything the model received, as text."""
    retriever = vector_retriever(documents)
    chain = chain_for(path, retriever, assembler, model, principal=principal, mapping=mapping)
    config: Any = {"configurable": {"principal": principal}} if principal is not None else {}
    chain.invoke(question, config=config)
    return "\n".join(str(m.content) for m in model.received[-1])
