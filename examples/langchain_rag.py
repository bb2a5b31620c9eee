"""A LangChain RAG chain with ctxbudget, offline: what reaches the model, and the report.

Run it with ``python examples/langchain_rag.py``. It needs ``ctxbudget[langchain,offline]``
and numpy (LangChain's `InMemoryVectorStore` computes similarities with it). The
embedding and the chat model are LangChain's own fakes, so nothing leaves the machine;
swap in a real embedding and chat model and nothing else changes.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from ctxbudget import Allocation, Budget, ContextAssembler, Principal
from langchain_ctxbudget import ContextBudgetRunnable, TokenCountTransformer

DOCUMENTS = [
    Document(
        "Refunds are paid within 5 business days of receiving the returned item.",
        id="refunds-1",
        metadata={"source": "refunds.md", "title": "Refunds", "headers": "Policy > Payment"},
    ),
    Document(
        "Refunds are paid within 5 business days of receiving the returned item!",
        id="refunds-copy",
        metadata={"source": "refunds-copy.md", "title": "Refunds"},
    ),
    Document(
        "Items must be returned unused, in the original packaging, within 30 days.",
        id="returns-1",
        metadata={"source": "returns.md", "title": "Returns", "score": 0.87},
    ),
    Document(
        "Internal: the refund fraud threshold is 800 EUR per customer per month.",
        id="fraud-1",
        metadata={"source": "fraud.md", "title": "Fraud rules", "groups": ["risk"]},
    ),
    Document(
        "Globex customers get refunds within 60 days.",
        id="globex-1",
        metadata={"source": "globex.md", "tenant": "globex"},
    ),
]


class ShowWhatTheModelGets(BaseCallbackHandler):
    """Prints the messages each chat model call receives, and ctxbudget's report."""

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        for message in messages[0]:
            print(f"--- {message.type} ---\n{message.text}")

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "ctxbudget_report":
            kept = [source["id"] for source in data["sources"]]
            dropped = {drop["id"]: drop["reason"] for drop in data["dropped"]}
            print(f"--- report ---\nkept {kept}, dropped {json.dumps(dropped)}")


def main() -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=256))
    # Counted once, at ingest: requests use these counts instead of counting each text again.
    store.add_documents(TokenCountTransformer("gpt-4o").transform_documents(DOCUMENTS))
    retriever = store.as_retriever(search_kwargs={"k": len(DOCUMENTS)})

    budget = Budget(
        total=4_000, reserve_output=500, allocations=(Allocation("retrieved", max=400, priority=1),)
    )
    # Built without a principal, it answers each call for the principal in its config.
    context = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o", budget=budget))
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer only from the sources and cite them as [n]."),
            ("human", "{context}\n\nQuestion: {question}"),
        ]
    )
    model = GenericFakeChatModel(messages=iter([AIMessage("Within 5 business days [2].")]))
    chain = (
        {"context": retriever | context, "question": RunnablePassthrough()}
        | prompt
        | model
        | StrOutputParser()
    )
    answer = chain.invoke(
        "How long do refunds take?",
        config={
            "callbacks": [ShowWhatTheModelGets()],
            "configurable": {"principal": Principal(tenant="acme")},
        },
    )
    print(f"--- answer ---\n{answer}")


if __name__ == "__main__":
    main()
