"""ContextBudgetRetriever: any retriever's documents, budgeted for the call, in real chains."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableLambda, RunnablePassthrough
from pydantic import ValidationError

from ctxbudget import ContextAssembler, InputError, Principal
from langchain_ctxbudget import ContextBudgetRetriever, ContextBudgetTransformer
from tests.support.langchain_stack import (
    PROMPT,
    RecordingChatModel,
    corpus,
    tokens,
    vector_retriever,
)

QUESTION = "How long do refunds take?"


def budgeted(assembler: ContextAssembler, **options: Any) -> ContextBudgetRetriever:
    return ContextBudgetRetriever(
        retriever=vector_retriever(corpus()), assembler=assembler, **options
    )


def test_retriever_cites_sources_in_prompt_order(assembler: ContextAssembler) -> None:
    documents = budgeted(assembler).invoke(QUESTION)
    assert [d.metadata["citation"] for d in documents] == list(range(1, len(documents) + 1))
    assert all(d.page_content.startswith(f"[{d.metadata['citation']}]") for d in documents)


def test_retriever_matches_the_transformer_on_what_was_retrieved(
    assembler: ContextAssembler,
) -> None:
    retrieved = vector_retriever(corpus()).invoke(QUESTION)
    expected = ContextBudgetTransformer(assembler).transform_documents(retrieved)
    assert budgeted(assembler).invoke(QUESTION) == expected


def test_retriever_max_tokens_limits_the_selection(assembler: ContextAssembler) -> None:
    few = budgeted(assembler, max_tokens=90).invoke(QUESTION)
    assert 0 < len(few) < len(budgeted(assembler).invoke(QUESTION))
    assert sum(tokens(d.page_content) for d in few) <= 90


def test_retriever_in_a_rag_chain_sends_only_permitted_sources(
    assembler: ContextAssembler, model: RecordingChatModel
) -> None:
    def joined(documents: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in documents)

    context = budgeted(assembler) | RunnableLambda(joined)
    chain = {"context": context, "question": RunnablePassthrough()} | PROMPT | model
    config: Any = {"configurable": {"principal": Principal(groups=frozenset({"risk"}))}}
    chain.invoke(QUESTION, config=config)
    sent = "\n".join(str(m.content) for m in model.received[0])
    assert "fraud threshold" in sent
    assert "Globex" not in sent


def test_retriever_runs_the_base_retriever_as_a_child_with_the_call_config(
    assembler: ContextAssembler,
) -> None:
    seen: list[RunnableConfig] = []

    def base(question: str, config: RunnableConfig) -> list[Document]:
        seen.append(config)
        return corpus()

    wrong: Any = RunnableLambda(base)  # a retriever that returns the wrong type, on purpose
    retriever = ContextBudgetRetriever(retriever=wrong, assembler=assembler)
    retriever.invoke(QUESTION, {"tags": ["eu"], "metadata": {"user": "u1"}})
    assert "eu" in seen[0]["tags"]
    assert seen[0]["metadata"]["user"] == "u1"
    callbacks = seen[0]["callbacks"]
    assert isinstance(callbacks, BaseCallbackManager)
    assert callbacks.parent_run_id is not None


def test_retriever_report_dispatched_on_the_sync_path(assembler: ContextAssembler) -> None:
    seen: list[Any] = []

    class Recorder(BaseCallbackHandler):
        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            seen.append((name, data))

    budgeted(assembler).invoke(QUESTION, {"callbacks": [Recorder()]})
    [(name, report)] = seen
    assert name == "ctxbudget_report"
    assert {d["id"]: d["reason"] for d in report["dropped"]}["globex-1"] == "forbidden"


async def _custom_events(retriever: ContextBudgetRetriever) -> list[Any]:
    return [
        event
        async for event in retriever.astream_events(QUESTION, version="v2")
        if event["event"] == "on_custom_event"
    ]


def test_retriever_report_shows_in_astream_events(assembler: ContextAssembler) -> None:
    [event] = asyncio.run(_custom_events(budgeted(assembler)))
    assert event["name"] == "ctxbudget_report"
    assert event["data"]["sources"][0]["n"] == 1


def test_retriever_async_matches_sync(assembler: ContextAssembler) -> None:
    retriever = budgeted(assembler)
    assert asyncio.run(retriever.ainvoke(QUESTION)) == retriever.invoke(QUESTION)


def test_retriever_does_not_change_the_documents_retrieved(assembler: ContextAssembler) -> None:
    documents = corpus()
    before = copy.deepcopy(documents)
    ContextBudgetRetriever(
        retriever=RunnableLambda(lambda _: documents), assembler=assembler
    ).invoke(QUESTION)
    assert documents == before


def test_retriever_unknown_option_is_an_error(assembler: ContextAssembler) -> None:
    with pytest.raises(ValidationError, match="principals"):
        budgeted(assembler, principals=[Principal(tenant="acme")])


def test_retriever_unknown_keyword_in_a_call_is_an_error(assembler: ContextAssembler) -> None:
    with pytest.raises(TypeError, match="k"):
        budgeted(assembler).invoke(QUESTION, k=3)


def test_retriever_base_output_that_is_not_documents_is_an_error(
    assembler: ContextAssembler,
) -> None:
    def base(_: str) -> list[str]:
        return ["text"]

    wrong: Any = RunnableLambda(base)  # a retriever that returns the wrong type, on purpose
    retriever = ContextBudgetRetriever(retriever=wrong, assembler=assembler)
    with pytest.raises(InputError, match=r"documents\[0\] is a str, expected a langchain_core"):
        retriever.invoke(QUESTION)
