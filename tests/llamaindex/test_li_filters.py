"""Permission filters before retrieval in a real VectorStoreIndex (llamaindex_ctxbudget.filters)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)

from ctxbudget import ACCESS_KEY, AccessPolicy, InputError, Principal
from ctxbudget._sources.permit import permitted
from llamaindex_ctxbudget import (
    AccessMarker,
    ContextBudgetPostprocessor,
    PrincipalRetriever,
    as_principal,
    principal_filters,
    to_chunk,
)
from tests.support.llamaindex_stack import RecordingLLM, numbers

SALES = Principal(tenant="acme", groups=frozenset({"sales"}))
OPEN = AccessPolicy()
# Three kinds of five are forbidden to SALES (60%), and come first so that an unfiltered
# search (every embedding alike) returns them first.
ACLS: list[dict[str, object]] = [
    {"tenant": "globex"},
    {"groups": ["hr"]},
    {"tenant": "acme", "groups": ["hr"]},
    {},
    {"tenant": "acme", "groups": ["sales", "hr"]},
]


def corpus(size: int = 100) -> list[TextNode]:
    forbidden = [i for i in range(size) if i % 5 < 3]
    allowed = [i for i in range(size) if i % 5 >= 3]
    return [
        TextNode(id_=f"n{i}", text=f"Fact {i}: refunds take {i} days.", metadata=dict(ACLS[i % 5]))
        for i in forbidden + allowed
    ]


def index_of(nodes: list[BaseNode]) -> VectorStoreIndex:
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


@pytest.fixture
def index() -> VectorStoreIndex:
    return index_of(list(AccessMarker()(corpus())))


def seen_by(principal: Principal | None, nodes: list[NodeWithScore]) -> list[bool]:
    return [permitted(to_chunk(n.node), principal, OPEN) for n in nodes]


def test_principal_filters_fill_top_k_30_with_permitted_nodes_only(
    index: VectorStoreIndex,
) -> None:
    retriever = index.as_retriever(similarity_top_k=30, filters=principal_filters(SALES))
    nodes = retriever.retrieve("How long do refunds take?")
    assert len(nodes) == 30
    assert all(seen_by(SALES, nodes))


def test_unfiltered_retriever_spends_top_k_on_forbidden_nodes(index: VectorStoreIndex) -> None:
    nodes = index.as_retriever(similarity_top_k=30).retrieve("How long do refunds take?")
    assert sum(seen_by(SALES, nodes)) < 30


def test_principal_filters_for_no_principal_return_unrestricted_nodes_only(
    index: VectorStoreIndex,
) -> None:
    retriever = index.as_retriever(similarity_top_k=100, filters=principal_filters(None))
    nodes = retriever.retrieve("refunds")
    assert {n.node.metadata.get("tenant") for n in nodes} == {None}
    assert {n.node.metadata.get("groups") for n in nodes} == {None}
    assert len(nodes) == 20


def test_principal_filters_refuse_no_principal_when_the_policy_requires_one() -> None:
    with pytest.raises(InputError, match="requires one"):
        principal_filters(None, policy=AccessPolicy(require_principal=True))


def test_principal_filters_never_return_a_node_ingested_without_tokens() -> None:
    nodes = corpus(10)
    marked = list(AccessMarker()(nodes[1:]))
    index = index_of([nodes[0], *marked])
    found = index.as_retriever(similarity_top_k=10, filters=principal_filters(SALES)).retrieve("x")
    assert "n0" not in {n.node.node_id for n in found}


def test_access_marker_keeps_its_tokens_out_of_llm_and_embedding_text() -> None:
    (node,) = AccessMarker()([TextNode(text="Refunds.", metadata={"tenant": "acme"})])
    assert ACCESS_KEY in node.metadata
    assert ACCESS_KEY not in node.get_content(metadata_mode=MetadataMode.LLM)
    assert ACCESS_KEY not in node.get_content(metadata_mode=MetadataMode.EMBED)


def test_access_marker_reads_the_source_documents_acl() -> None:
    source = RelatedNodeInfo(node_id="handbook", metadata={"groups": ["hr"]})
    node = TextNode(text="Salaries.", relationships={NodeRelationship.SOURCE: source})
    index = index_of(list(AccessMarker()([node])))
    found = index.as_retriever(filters=principal_filters(SALES)).retrieve("salaries")
    assert found == []


def test_access_marker_refuses_an_unmapped_acl_key() -> None:
    with pytest.raises(InputError, match="looks like an access rule"):
        AccessMarker()([TextNode(text="Refunds.", metadata={"tenant_id": "acme"})])


def test_principal_retriever_filters_for_the_as_principal_block(index: VectorStoreIndex) -> None:
    retriever = PrincipalRetriever(index, similarity_top_k=30)
    with as_principal(SALES):
        nodes = retriever.retrieve("refunds")
    assert len(nodes) == 30
    assert all(seen_by(SALES, nodes))


def test_principal_retriever_outside_as_principal_returns_unrestricted_nodes_only(
    index: VectorStoreIndex,
) -> None:
    nodes = PrincipalRetriever(index, similarity_top_k=30).retrieve("refunds")
    assert len(nodes) == 20
    assert all(seen_by(None, nodes))


def test_principal_retriever_filters_on_the_async_path(index: VectorStoreIndex) -> None:
    retriever = PrincipalRetriever(index, similarity_top_k=30)

    async def ask() -> list[NodeWithScore]:
        with as_principal(SALES):
            return await retriever.aretrieve("refunds")

    nodes = asyncio.run(ask())
    assert len(nodes) == 30
    assert all(seen_by(SALES, nodes))


def test_principal_retriever_built_for_one_principal_refuses_another(
    index: VectorStoreIndex,
) -> None:
    retriever = PrincipalRetriever(index, principal=SALES)
    with as_principal(None), pytest.raises(InputError, match="was built for"):
        retriever.retrieve("refunds")


def test_principal_retriever_refuses_filters_of_its_own(index: VectorStoreIndex) -> None:
    with pytest.raises(InputError, match="sets filters= itself"):
        PrincipalRetriever(index, filters=principal_filters(None))


def test_query_engine_with_principal_retriever_sends_permitted_sources_only(
    index: VectorStoreIndex, offline_settings: RecordingLLM
) -> None:
    budget = ContextBudgetPostprocessor(tokenizer="gpt-4o", llm=offline_settings)
    engine = RetrieverQueryEngine.from_args(
        PrincipalRetriever(index, similarity_top_k=30),
        llm=offline_settings,
        node_postprocessors=[budget],
    )
    with as_principal(SALES):
        response = engine.query("How long do refunds take?")
    sent = "\n".join(offline_settings.prompts)
    forbidden = [n for n in corpus() if not permitted(to_chunk(n), SALES, OPEN)]
    assert len(response.source_nodes) == 30
    assert sorted(numbers(sent)) == list(range(1, 31))
    assert not [n.node_id for n in forbidden if n.text in sent]
    assert all(n.node.metadata["citation"] for n in response.source_nodes)
