"""Permission filters before retrieval, in each store's language (langchain_ctxbudget.filters):
real in-process stores where there is one, the documented grammar where there is none."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from hypothesis import given
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.vectorstores import InMemoryVectorStore
from qdrant_client import QdrantClient, models

from ctxbudget import ACCESS_KEY, AccessPolicy, ContextAssembler, InputError, Principal
from ctxbudget._sources.permit import permitted
from langchain_ctxbudget import AccessMarker, ContextBudgetRetriever, DocumentMetadataMapping
from langchain_ctxbudget._convert import to_chunks
from langchain_ctxbudget.filters import (
    chroma_where,
    elasticsearch_filter,
    in_memory_filter,
    pgvector_filter,
    pinecone_filter,
    qdrant_filter,
)
from tests.support.langchain_stack import RecordingChatModel
from tests.support.permit_strategies import (
    GROUPS_KEYS,
    TENANT_KEYS,
    chunk_of,
    metadatas,
    policies,
    principals,
)

SALES = Principal(tenant="acme", groups=frozenset({"sales"}))
OPEN = AccessPolicy()
MAPPING = DocumentMetadataMapping(tenant=TENANT_KEYS, groups=GROUPS_KEYS)
EMBEDDING = DeterministicFakeEmbedding(size=16)
# Three kinds of five are forbidden to SALES: 60% of the corpus.
ACLS: list[dict[str, Any]] = [
    {"tenant": "globex"},
    {"groups": ["hr"]},
    {"tenant": "acme", "groups": ["hr"]},
    {},
    {"tenant": "acme", "groups": ["sales", "hr"]},
]


def corpus(size: int = 100) -> list[Document]:
    return [
        Document(f"Fact {i}: refunds take {i} days.", id=f"d{i}", metadata=dict(ACLS[i % 5]))
        for i in range(size)
    ]


def visible(principal: Principal | None, documents: list[Document]) -> list[bool]:
    raw = [(d.id, d.page_content, d.metadata) for d in documents]
    return [permitted(chunk, principal, OPEN) for chunk in to_chunks(raw)]


def test_in_memory_filter_fills_k_30_with_permitted_documents_only() -> None:
    store = InMemoryVectorStore.from_documents(corpus(), EMBEDDING)
    found = store.similarity_search("refunds", k=30, filter=in_memory_filter(SALES))
    assert len(found) == 30
    assert all(visible(SALES, found))


def test_unfiltered_in_memory_search_spends_k_on_forbidden_documents() -> None:
    store = InMemoryVectorStore.from_documents(corpus(), EMBEDDING)
    assert sum(visible(SALES, store.similarity_search("refunds", k=30))) < 30


def test_in_memory_filter_sends_only_permitted_sources_to_the_model() -> None:
    store = InMemoryVectorStore.from_documents(corpus(), EMBEDDING)
    search = {"k": 30, "filter": in_memory_filter(SALES)}
    retriever = ContextBudgetRetriever(
        retriever=store.as_retriever(search_kwargs=search),
        assembler=ContextAssembler(tokenizer="gpt-4o"),
        principal=SALES,
    )
    model = RecordingChatModel()
    prompt = ChatPromptTemplate.from_messages([("human", "{context}")])
    (
        retriever
        | (lambda docs: {"context": "\n".join(d.page_content for d in docs)})
        | prompt
        | model
    ).invoke("refunds")
    sent = model.received[0][0].text
    forbidden = [
        d.page_content for d, ok in zip(corpus(), visible(SALES, corpus()), strict=True) if not ok
    ]
    assert sent.count("Fact ") == 30
    assert not [text for text in forbidden if text in sent]


def test_in_memory_filter_reads_the_keys_the_mapping_names() -> None:
    admits = in_memory_filter(SALES, mapping=DocumentMetadataMapping(tenant=("org_id",)))
    assert not admits(Document("x", metadata={"org_id": "globex"}))
    assert admits(Document("x", metadata={"org_id": "acme"}))


def test_access_marker_does_not_change_its_input() -> None:
    documents = corpus(5)
    marked = AccessMarker().transform_documents(documents)
    assert all(ACCESS_KEY not in d.metadata for d in documents)
    assert all(ACCESS_KEY in d.metadata for d in marked)


def test_access_marker_refuses_an_unmapped_acl_key() -> None:
    with pytest.raises(InputError, match=r"documents\[0\] metadata key 'tenant_id'"):
        AccessMarker().transform_documents([Document("x", metadata={"tenant_id": "acme"})])


def test_access_marker_replaces_stale_tokens() -> None:
    stale = Document("x", metadata={"tenant": "globex", ACCESS_KEY: ['["acme", null]']})
    (marked,) = AccessMarker().transform_documents([stale])
    assert marked.metadata[ACCESS_KEY] == ['["globex", null]']


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every address a socket tried to connect to or resolve during the test."""
    seen: list[object] = []
    connect, resolve = socket.socket.connect, socket.getaddrinfo

    def recording_connect(self: socket.socket, address: Any) -> None:
        seen.append(address)
        connect(self, address)

    def recording_resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(host)
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", recording_connect)
    monkeypatch.setattr(socket, "getaddrinfo", recording_resolve)
    return seen


def test_chroma_where_fills_k_30_with_permitted_documents_only(
    connections: list[object],
) -> None:
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    store = Chroma(
        collection_name=f"filters-{uuid.uuid4().hex}", embedding_function=EMBEDDING, client=client
    )
    store.add_documents(AccessMarker().transform_documents(corpus()))
    found = store.similarity_search("refunds", k=30, filter=chroma_where(SALES))
    assert len(found) == 30
    assert all(visible(SALES, found))
    assert connections == []


def test_chroma_where_without_principal_returns_unrestricted_documents_only() -> None:
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    store = Chroma(
        collection_name=f"filters-{uuid.uuid4().hex}", embedding_function=EMBEDDING, client=client
    )
    store.add_documents(AccessMarker().transform_documents(corpus()))
    found = store.similarity_search("refunds", k=100, filter=chroma_where(None))
    assert len(found) == 20
    assert all(visible(None, found))


def qdrant_store(documents: list[Document]) -> QdrantClient:
    client = QdrantClient(":memory:")
    client.create_collection(
        "docs", vectors_config=models.VectorParams(size=16, distance=models.Distance.COSINE)
    )
    points = [
        models.PointStruct(
            id=i,
            vector=EMBEDDING.embed_query(d.page_content),
            payload={"page_content": d.page_content, "metadata": d.metadata},
        )
        for i, d in enumerate(documents)
    ]
    client.upsert("docs", points)
    return client


def test_qdrant_filter_fills_k_30_with_permitted_documents_only() -> None:
    client = qdrant_store(AccessMarker().transform_documents(corpus()))
    hits = client.query_points(
        "docs", query=EMBEDDING.embed_query("refunds"), query_filter=qdrant_filter(SALES), limit=30
    ).points
    found = [
        Document(h.payload["page_content"], metadata=h.payload["metadata"])
        for h in hits
        if h.payload
    ]
    assert len(found) == 30
    assert all(visible(SALES, found))


def test_qdrant_filter_for_a_principal_who_may_see_nothing_returns_nothing() -> None:
    client = qdrant_store(AccessMarker().transform_documents(corpus()))
    policy = AccessPolicy(require_tenant=True)
    hits = client.query_points(
        "docs",
        query=EMBEDDING.embed_query("refunds"),
        query_filter=qdrant_filter(Principal(groups=frozenset({"hr"})), policy=policy),
        limit=30,
    ).points
    assert hits == []


def test_qdrant_filter_reads_the_payload_key_the_store_keeps_metadata_in() -> None:
    condition = qdrant_filter(None, metadata_key="meta").must
    assert isinstance(condition, list)
    assert condition[0].key == f"meta.{ACCESS_KEY}"  # type: ignore[union-attr]


def _pg_text(value: object) -> str | None:
    """``cmetadata ->> key``: a str as itself, a number as its digits, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None if value is None else "json"


def pg_admits(rule: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """langchain-postgres' filter grammar, evaluated as its SQL does: ``$in`` on the value's
    text, ``$exists`` on the key (jsonb_exists), ``$and``/``$or``, ``{}`` for no filter."""
    if not rule:
        return True
    ((key, clause),) = rule.items()
    if key == "$and":
        return all(pg_admits(part, metadata) for part in clause)
    if key == "$or":
        return any(pg_admits(part, metadata) for part in clause)
    ((operator, operand),) = clause.items()
    if operator == "$exists":
        return (key in metadata) is operand
    assert operator == "$in"
    return _pg_text(metadata.get(key)) in operand


def _has_list_or_null(metadata: dict[str, Any]) -> bool:
    return any(isinstance(v, list) or v is None for v in metadata.values())


@given(metadatas(), principals, policies)
def test_pgvector_filter_never_admits_what_permit_refuses(
    metadata: dict[str, Any], principal: Principal | None, policy: AccessPolicy
) -> None:
    chunk = chunk_of(metadata)
    admitted = pg_admits(pgvector_filter(principal, mapping=MAPPING, policy=policy), metadata)
    allowed = permitted(chunk, principal, policy)
    assert admitted <= allowed
    if not _has_list_or_null(metadata):
        assert admitted == allowed


def pinecone_admits(rule: dict[str, Any], metadata: dict[str, Any]) -> bool:
    """Pinecone's filter language on metadata it stores (no nulls): ``$in`` matches a value, or
    a list of strings with one element, in its list; ``$exists`` on the key."""
    stored = {key: value for key, value in metadata.items() if value is not None}
    if not rule:
        return True
    ((key, clause),) = rule.items()
    if key == "$and":
        return all(pinecone_admits(part, stored) for part in clause)
    if key == "$or":
        return any(pinecone_admits(part, stored) for part in clause)
    ((operator, operand),) = clause.items()
    if operator == "$exists":
        return (key in stored) is operand
    assert operator == "$in"
    assert len({type(value) for value in operand}) == 1
    value = stored.get(key)
    items = value if isinstance(value, list) else [value]
    return any(item in operand for item in items if item is not None)


@given(metadatas(), principals, policies)
def test_pinecone_filter_admits_what_permit_admits(
    metadata: dict[str, Any], principal: Principal | None, policy: AccessPolicy
) -> None:
    chunk = chunk_of(metadata)
    rule = pinecone_filter(principal, mapping=MAPPING, policy=policy)
    assert pinecone_admits(rule, metadata) == permitted(chunk, principal, policy)


@given(metadatas(), principals, policies)
def test_elasticsearch_filter_admits_what_permit_admits(
    metadata: dict[str, Any], principal: Principal | None, policy: AccessPolicy
) -> None:
    chunk = chunk_of(metadata)
    (marked,) = AccessMarker(MAPPING).transform_documents([Document("x", metadata=metadata)])
    query = elasticsearch_filter(principal, policy=policy)
    ((terms,),) = [[clause["terms"]] for clause in query["bool"]["filter"]]
    ((field, wanted),) = terms.items()
    assert field == f"metadata.{ACCESS_KEY}.keyword"
    shared = set(marked.metadata[ACCESS_KEY]) & set(wanted)
    assert bool(shared) == permitted(chunk, principal, policy)


def test_pgvector_filter_for_a_principal_who_may_see_nothing_is_a_contradiction() -> None:
    rule = pgvector_filter(Principal(), policy=AccessPolicy(require_tenant=True))
    assert not pg_admits(rule, {})
    assert not pg_admits(rule, {ACCESS_KEY: ["x"]})


def test_pgvector_filter_without_acl_keys_is_no_filter() -> None:
    assert pgvector_filter(SALES, mapping=DocumentMetadataMapping(tenant=(), groups=())) == {}


def test_store_filters_refuse_no_principal_when_the_policy_requires_one() -> None:
    policy = AccessPolicy(require_principal=True)
    for build in (in_memory_filter, pgvector_filter, pinecone_filter, chroma_where):
        with pytest.raises(InputError, match="requires one"):
            build(None, policy=policy)
