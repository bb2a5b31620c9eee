"""`ContextBudgetPostprocessor`: cited nodes, budgets, principals, escalation, events."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from ctxbudget import (
    Budget,
    ContextAssembler,
    InputError,
    Principal,
    SourceOptions,
    select_sources,
)
from llamaindex_ctxbudget import (
    CitedNode,
    ContextBudgetPostprocessor,
    SourcesSelectedEvent,
    as_principal,
    to_chunk,
)
from tests.llamaindex.li_support import RecordingLLM, recording_llm

ACME_HR = Principal(tenant="acme", groups=frozenset({"hr"}))


def scored(
    node_id: str,
    text: str,
    score: float,
    document: str | None = None,
    **metadata: object,
) -> NodeWithScore:
    relationships = {}
    if document is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
            node_id=document, metadata={"title": f"Doc {document}"}
        )
    node = TextNode(id_=node_id, text=text, metadata=metadata, relationships=relationships)
    return NodeWithScore(node=node, score=score)


def corpus() -> list[NodeWithScore]:
    return [
        scored("a", "EU customers may return unworn items within 60 days.", 0.9, title="Returns"),
        scored("b", "Refunds reach the card within 14 days of receipt.", 0.8, title="Refunds"),
        scored("c", "Salary bands are reviewed in April.", 0.95, tenant="acme", groups=["hr"]),
        scored("d", "Shipping to Norway takes five working days.", 0.5, title="Shipping"),
    ]


def postprocessor(**options: Any) -> ContextBudgetPostprocessor:
    return ContextBudgetPostprocessor(tokenizer="o200k_base", **options)


def selected(events: list[BaseEvent]) -> SourcesSelectedEvent:
    found = [e for e in events if isinstance(e, SourcesSelectedEvent)]
    assert len(found) == 1
    return found[0]


def test_postprocess_returns_cited_nodes_in_prompt_order() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    assert all(isinstance(n, CitedNode) for n in out)
    assert [n.metadata["citation"] for n in out] == [1, 2, 3]
    assert [n.node.node_id for n in out] == ["a", "b", "d"]


def test_postprocess_node_texts_joined_are_the_core_block() -> None:
    nodes = corpus()
    out = postprocessor(max_tokens=1_000).postprocess_nodes(nodes)
    expected = select_sources(
        [to_chunk(n.node, score=n.score) for n in nodes], max_tokens=1_000, tokenizer="o200k_base"
    )
    texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in out]
    assert "\n\n".join(texts) == expected.text
    assert texts[0].startswith("<retrieved_documents>\n")
    assert texts[-1].endswith("\n</retrieved_documents>")
    assert texts[1] == expected.sources[1].text


def test_postprocess_metadata_is_not_rendered_twice() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    node = out[1].node
    assert node.metadata == {"title": "Refunds", "citation": 2}
    assert node.get_content(metadata_mode=MetadataMode.LLM) == node.get_content()
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.get_content()


def test_postprocess_never_changes_its_inputs() -> None:
    nodes = corpus()
    before = copy.deepcopy(nodes)
    out = postprocessor().postprocess_nodes(nodes)
    assert nodes == before
    assert isinstance(out[0], CitedNode)
    assert out[0].originals[0] is nodes[0]
    out[0].node.metadata["changed"] = True
    assert "changed" not in nodes[0].node.metadata


def test_postprocess_keeps_the_score_and_relationships() -> None:
    node = scored("a", "Refunds take 14 days.", 0.7, document="returns")
    out = postprocessor().postprocess_nodes([node])
    assert out[0].score == 0.7
    assert out[0].node.ref_doc_id == "returns"


def test_postprocess_without_principal_leaves_out_restricted_nodes() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    assert all("Salary" not in n.node.get_content() for n in out)


def test_postprocess_principal_at_construction_sees_its_nodes() -> None:
    out = postprocessor(principal=ACME_HR).postprocess_nodes(corpus())
    assert any("Salary" in n.node.get_content() for n in out)


def test_as_principal_overrides_the_constructed_one() -> None:
    processor = postprocessor(principal=ACME_HR)
    with as_principal(Principal(tenant="acme", groups=frozenset({"sales"}))):
        out = processor.postprocess_nodes(corpus())
    assert all("Salary" not in n.node.get_content() for n in out)
    assert any("Salary" in n.node.get_content() for n in processor.postprocess_nodes(corpus()))


def test_as_principal_reaches_the_async_path() -> None:
    processor = postprocessor()

    async def query() -> list[NodeWithScore]:
        with as_principal(ACME_HR):
            return await processor.apostprocess_nodes(corpus(), query_str="salary?")

    out = asyncio.run(query())
    assert any("Salary" in n.node.get_content() for n in out)


def test_postprocess_takes_a_query_bundle() -> None:
    out = postprocessor().postprocess_nodes(corpus(), query_bundle=QueryBundle("refunds?"))
    assert len(out) == 3


def test_postprocess_empty_selection_is_no_nodes(events: list[BaseEvent]) -> None:
    assert postprocessor().postprocess_nodes([]) == []
    assert selected(events).tokens == 0


def test_budget_comes_from_the_passed_llm(events: list[BaseEvent]) -> None:
    llm = recording_llm(window=8_000, reserve=1_000)
    postprocessor(llm=llm).postprocess_nodes(corpus())
    retrieved = Budget.for_context_window(8_000, reserve_output=1_000).allocation("retrieved")
    assert retrieved is not None
    assert selected(events).budget == retrieved.max


def test_budget_follows_settings_llm_at_query_time(
    events: list[BaseEvent], offline_settings: RecordingLLM
) -> None:
    processor = postprocessor()
    processor.postprocess_nodes(corpus())
    Settings.llm = recording_llm(window=16_000, reserve=2_000)
    processor.postprocess_nodes(corpus())
    first, second = (e for e in events if isinstance(e, SourcesSelectedEvent))
    assert first.budget < second.budget


def test_unknown_num_output_reserves_llamaindex_default(events: list[BaseEvent]) -> None:
    postprocessor(llm=recording_llm(None, window=8_000)).postprocess_nodes(corpus())
    retrieved = Budget.for_context_window(8_000, reserve_output=256).allocation("retrieved")
    assert retrieved is not None
    assert selected(events).budget == retrieved.max


def test_explicit_budget_is_used_whatever_the_llm(events: list[BaseEvent]) -> None:
    budget = Budget.default(total=3_000)
    postprocessor(budget=budget, llm=recording_llm(window=100_000)).postprocess_nodes(corpus())
    assert (
        selected(events).budget
        == ContextAssembler(tokenizer="o200k_base", budget=budget).select_sources([]).budget
    )


def test_assembler_brings_its_budget_and_options(events: list[BaseEvent]) -> None:
    assembler = ContextAssembler(
        tokenizer="o200k_base",
        budget=Budget.default(total=4_000),
        sources=SourceOptions(order="relevance"),
    )
    out = ContextBudgetPostprocessor(assembler).postprocess_nodes(corpus())
    assert [n.node.node_id for n in out] == ["a", "b", "d"]
    assert selected(events).budget == assembler.select_sources([]).budget


def test_max_tokens_limits_the_sources(events: list[BaseEvent]) -> None:
    out = postprocessor(max_tokens=70).postprocess_nodes(corpus())
    event = selected(events)
    assert event.budget == 70
    assert event.tokens <= 70
    assert event.trimmed
    assert len(out) < 3


def test_event_names_sources_and_drops_by_id_only(events: list[BaseEvent]) -> None:
    postprocessor().postprocess_nodes(corpus())
    event = selected(events)
    assert event.sources == ["a", "b", "d"]
    assert [(d.id, d.reason) for d in event.dropped] == [("c", "forbidden")]
    assert "Salary" not in str(event.model_dump())


def test_tokenizer_or_assembler_is_required() -> None:
    with pytest.raises(InputError, match=r"pass tokenizer= \(the model's tokenizer"):
        ContextBudgetPostprocessor()


def test_assembler_and_tokenizer_together_are_an_error() -> None:
    with pytest.raises(InputError, match="pass either assembler= or tokenizer="):
        ContextBudgetPostprocessor(ContextAssembler(tokenizer="o200k_base"), tokenizer="gpt-4o")


def test_class_names() -> None:
    assert ContextBudgetPostprocessor.class_name() == "ContextBudgetPostprocessor"
    assert CitedNode.class_name() == "CitedNode"


# --- whole-document escalation through the docstore ---------------------------------------

HANDBOOK = """# Handbook

## Holidays
Staff get 24 days of holiday a year.

## Expenses
Claims are paid within a month.

## Travel
Book trains for trips under four hours.
"""


def handbook_index(**metadata: object) -> VectorStoreIndex:
    document = Document(
        text=HANDBOOK, doc_id="handbook", metadata={"title": "Handbook", **metadata}
    )
    nodes = MarkdownNodeParser().get_nodes_from_documents([document])
    return VectorStoreIndex(nodes)


def test_docstore_sends_a_document_whole_in_place_of_its_nodes(events: list[BaseEvent]) -> None:
    index = handbook_index()
    retrieved = index.as_retriever(similarity_top_k=4).retrieve("holidays")
    out = ContextBudgetPostprocessor(
        tokenizer="o200k_base", docstore=index.docstore
    ).postprocess_nodes(retrieved)
    assert selected(events).escalated == "handbook"
    [whole] = out
    assert isinstance(whole, CitedNode)
    assert set(whole.metadata["covers"]) == {n.node.node_id for n in retrieved}
    assert whole.metadata["title"] == "Handbook"
    assert whole.node.ref_doc_id == "handbook"
    assert {id(o) for o in whole.originals} == {id(n) for n in retrieved}
    assert whole.score == max(n.score or 0 for n in retrieved)
    text = whole.node.get_content()
    assert text.index("Holidays") < text.index("Expenses") < text.index("Travel")


def test_docstore_escalation_with_an_assembler_keeps_its_budget(events: list[BaseEvent]) -> None:
    index = handbook_index()
    retrieved = index.as_retriever(similarity_top_k=4).retrieve("holidays")
    assembler = ContextAssembler(tokenizer="o200k_base", budget=Budget.default(total=3_000))
    ContextBudgetPostprocessor(assembler, docstore=index.docstore).postprocess_nodes(retrieved)
    event = selected(events)
    assert event.escalated == "handbook"
    assert event.budget == assembler.select_sources([]).budget


def test_docstore_escalation_rechecks_every_node_acl(events: list[BaseEvent]) -> None:
    document = Document(text=HANDBOOK, doc_id="handbook", metadata={"tenant": "acme"})
    nodes = MarkdownNodeParser().get_nodes_from_documents([document])
    nodes[-1].metadata["groups"] = ["travel-desk"]
    index = VectorStoreIndex(nodes)
    everything = index.as_retriever(similarity_top_k=4).retrieve("x")
    retrieved = [n for n in everything if "groups" not in n.node.metadata]
    processor = ContextBudgetPostprocessor(
        tokenizer="o200k_base", docstore=index.docstore, principal=Principal(tenant="acme")
    )
    out = processor.postprocess_nodes(retrieved)
    assert selected(events).escalated is None
    assert all("Book trains" not in n.node.get_content() for n in out)
    assert len(out) == len(retrieved)
