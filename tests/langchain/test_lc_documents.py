"""ContextBudgetTransformer standalone and ContextBudgetCompressor inside langchain-classic's
ContextualCompressionRetriever and DocumentCompressorPipeline."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document

from ctxbudget import Chunk, ContextAssembler, SourceOptions
from langchain_ctxbudget import (
    ContextBudgetCompressor,
    ContextBudgetRunnable,
    ContextBudgetTransformer,
)
from tests.support.langchain_stack import corpus, small_budget, vector_retriever

QUESTION = "How long do refunds take?"


def test_transformer_cites_sources_in_prompt_order(assembler: ContextAssembler) -> None:
    documents = ContextBudgetTransformer(assembler).transform_documents(corpus())
    assert [d.metadata["citation"] for d in documents] == list(range(1, len(documents) + 1))


def test_transformer_page_content_is_the_rendered_source(assembler: ContextAssembler) -> None:
    documents = ContextBudgetTransformer(assembler).transform_documents(corpus())
    returns = next(d for d in documents if d.id == "returns-1")
    n = returns.metadata["citation"]
    assert returns.page_content == (
        f"[{n}] Returns — Policy > EU\n"
        "Items must be returned unused, in the original packaging, within 30 days."
    )


def test_transformer_sources_are_the_blocks_parts_in_order(assembler: ContextAssembler) -> None:
    documents = ContextBudgetTransformer(assembler).transform_documents(corpus())
    block = ContextBudgetRunnable(assembler=assembler).invoke(corpus())
    assert isinstance(block, str)
    starts = [block.index(f"\n\n{d.page_content}\n") for d in documents]
    assert starts == sorted(starts)


def test_transformer_keeps_the_input_metadata_and_id(assembler: ContextAssembler) -> None:
    documents = ContextBudgetTransformer(assembler).transform_documents(corpus())
    shipping = next(d for d in documents if d.id == "shipping-1")
    assert shipping.metadata == {
        "source": "shipping.md",
        "title": "Shipping",
        "relevance_score": 0.42,
        "citation": shipping.metadata["citation"],
        "fence": shipping.metadata["fence"],
    }


def test_transformer_does_not_change_its_input(assembler: ContextAssembler) -> None:
    documents = corpus()
    before = copy.deepcopy(documents)
    ContextBudgetTransformer(assembler).transform_documents(documents)
    assert documents == before


def test_transformer_drops_forbidden_and_duplicate_documents(assembler: ContextAssembler) -> None:
    ids = [d.id for d in ContextBudgetTransformer(assembler).transform_documents(corpus())]
    assert "globex-1" not in ids
    assert "fraud-1" not in ids
    assert ("refunds-1" in ids) != ("refunds-dup" in ids)


def test_transformer_unknown_keyword_is_an_error(assembler: ContextAssembler) -> None:
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument.*'query'; it takes principal="
    ):
        ContextBudgetTransformer(assembler).transform_documents(corpus(), query="q")


def test_transformer_max_tokens_limits_the_selection(assembler: ContextAssembler) -> None:
    few = ContextBudgetTransformer(assembler, max_tokens=90).transform_documents(corpus())
    many = ContextBudgetTransformer(assembler).transform_documents(corpus())
    assert 0 < len(few) < len(many)


def test_transformer_async_matches_sync(assembler: ContextAssembler) -> None:
    transformer = ContextBudgetTransformer(assembler)
    assert asyncio.run(transformer.atransform_documents(corpus())) == list(
        transformer.transform_documents(corpus())
    )


class Library:
    """A document store for escalation: whole documents by id."""

    def load(self, document_id: str) -> Chunk | None:
        if document_id != "manual.md":
            return None
        text = "\n\n".join(f"Manual part {i}: step {i} of the returns process." for i in range(4))
        return Chunk(id="manual.md", content=text, title="Returns manual", metadata={"rev": 3})


def test_transformer_escalated_document_gets_its_own_metadata() -> None:
    assembler = ContextAssembler(
        tokenizer="gpt-4o", budget=small_budget(), sources=SourceOptions(loader=Library())
    )
    parts = [
        Document(
            f"Manual part {i}: step {i} of the returns process.",
            id=f"manual-{i}",
            metadata={"source": "manual.md", "chunk_index": i},
        )
        for i in range(3)
    ]
    [whole] = ContextBudgetTransformer(assembler).transform_documents(parts)
    assert whole.id == "manual.md"
    assert whole.metadata == {
        "rev": 3,
        "title": "Returns manual",
        "covers": ["manual-0", "manual-1", "manual-2"],
        "citation": 1,
        "fence": whole.metadata["fence"],
    }
    assert whole.page_content.startswith("[1] Returns manual\nManual part 0")


# --- the compressor in langchain-classic's retrievers --------------------------------------


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


def test_transformer_xml_sources_are_whole_document_tags() -> None:
    assembler = ContextAssembler(
        tokenizer="gpt-4o", budget=small_budget(), sources=SourceOptions(source_format="xml")
    )
    documents = ContextBudgetTransformer(assembler).transform_documents(corpus())
    for document in documents:
        assert document.page_content.startswith(
            f'<document index="{document.metadata["citation"]}"'
        )
        assert document.page_content.endswith("</document>")
        assert document.page_content.count("</document>") == 1
