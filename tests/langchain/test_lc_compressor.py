"""ContextBudgetCompressor (langchain_ctxbudget/compressor.py) inside langchain-classic's
ContextualCompressionRetriever and DocumentCompressorPipeline, and standalone."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document

from ctxbudget import ContextAssembler
from langchain_ctxbudget import (
    ContextBudgetCompressor,
    ContextBudgetTransformer,
)
from tests.support.langchain_stack import corpus, vector_retriever

QUESTION = "How long do refunds take?"


def compression_retriever(
    assembler: ContextAssembler, **options: Any
) -> ContextualCompressionRetriever:
    return ContextualCompressionRetriever(
        base_compressor=ContextBudgetCompressor(assembler=assembler, **options),
        base_retriever=vector_retriever(corpus()),
    )


def test_compressor_in_contextual_compression_retriever(assembler: ContextAssembler) -> None:
    documents = compression_retriever(assembler).invoke(QUESTION)
    assert [d.metadata["citation"] for d in documents] == list(range(1, len(documents) + 1))
    assert {"globex-1", "fraud-1"}.isdisjoint(d.id for d in documents)
    assert all(d.page_content.startswith(f"[{d.metadata['citation']}]") for d in documents)


def test_compressor_async_matches_sync(assembler: ContextAssembler) -> None:
    retriever = compression_retriever(assembler)
    assert asyncio.run(retriever.ainvoke(QUESTION)) == retriever.invoke(QUESTION)


def test_compressor_standalone_matches_transformer(assembler: ContextAssembler) -> None:
    compressed = ContextBudgetCompressor(assembler=assembler).compress_documents(corpus(), QUESTION)
    assert compressed == ContextBudgetTransformer(assembler).transform_documents(corpus())


def test_compressor_async_standalone(assembler: ContextAssembler) -> None:
    compressor = ContextBudgetCompressor(assembler=assembler)
    assert asyncio.run(compressor.acompress_documents(corpus(), QUESTION)) == list(
        compressor.compress_documents(corpus(), QUESTION)
    )


def test_compressor_in_document_compressor_pipeline(assembler: ContextAssembler) -> None:
    def drop_shipping(documents: list[Document]) -> list[Document]:
        return [d for d in documents if d.id != "shipping-1"]

    class WithoutShipping(ContextBudgetTransformer):
        def transform_documents(self, documents: Any, **kwargs: Any) -> Any:
            return drop_shipping(list(documents))

    pipeline = DocumentCompressorPipeline(
        transformers=[WithoutShipping(assembler), ContextBudgetCompressor(assembler=assembler)]
    )
    documents = pipeline.compress_documents(corpus(), QUESTION)
    assert "shipping-1" not in [d.id for d in documents]
    assert [d.metadata["citation"] for d in documents] == list(range(1, len(documents) + 1))


def test_compressor_leaves_out_restricted_documents_and_says_what_to_use(
    assembler: ContextAssembler, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        ids = [d.id for d in compression_retriever(assembler).invoke(QUESTION)]
    assert {"globex-1", "fraud-1"}.isdisjoint(ids)
    [record] = caplog.records
    assert record.getMessage().startswith(
        "ContextBudgetCompressor left out 2 document(s) that only a principal may see"
    )
    assert "ContextBudgetRetriever(retriever=..., assembler=...)" in record.getMessage()


def test_compressor_over_public_documents_does_not_warn(
    assembler: ContextAssembler, caplog: pytest.LogCaptureFixture
) -> None:
    public = [d for d in corpus() if not {"tenant", "groups"} & set(d.metadata)]
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        ContextBudgetCompressor(assembler=assembler).compress_documents(public, QUESTION)
    assert caplog.records == []


async def _custom_events(retriever: ContextualCompressionRetriever) -> list[Any]:
    return [
        event
        async for event in retriever.astream_events(QUESTION, version="v2")
        if event["event"] == "on_custom_event"
    ]


def test_compressor_report_shows_in_astream_events(assembler: ContextAssembler) -> None:
    [event] = asyncio.run(_custom_events(compression_retriever(assembler)))
    assert event["name"] == "ctxbudget_report"
    reasons = {d["id"]: d["reason"] for d in event["data"]["dropped"]}
    assert reasons["globex-1"] == "forbidden"
    assert event["data"]["sources"][0] == {
        "n": 1,
        "id": event["data"]["sources"][0]["id"],
        "document_id": event["data"]["sources"][0]["document_id"],
    }


def test_compressor_report_dispatched_on_the_sync_path(assembler: ContextAssembler) -> None:
    seen: list[str] = []

    class Recorder(BaseCallbackHandler):
        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            seen.append(name)

    compression_retriever(assembler).invoke(QUESTION, config={"callbacks": [Recorder()]})
    assert seen == ["ctxbudget_report"]
