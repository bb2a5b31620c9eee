"""ContextBudgetTransformer (langchain_ctxbudget/transformer.py): budgeted, cited documents
from any list of documents, standalone."""

from __future__ import annotations

import asyncio
import copy

import pytest
from langchain_core.documents import Document

from ctxbudget import Chunk, ContextAssembler, SourceOptions
from langchain_ctxbudget import (
    ContextBudgetRunnable,
    ContextBudgetTransformer,
)
from tests.support.langchain_stack import corpus, small_budget


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
