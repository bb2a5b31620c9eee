"""Permission filters before retrieval, in the filter language of each vector store, so ``k``
is spent on documents the principal may see (docs/permissions.md,
"Permission filters before retrieval").

Every builder translates the core's rule, never its own: `ctxbudget.permit_filter` over the
keys `DocumentMetadataMapping` maps to tenant and groups, or, for stores that cannot test that a key
is absent (Chroma) or tell an empty list from a missing key (Qdrant, Elasticsearch), the
core's access tokens that `AccessMarker` writes at ingest. Where a store says less than the
rule, the translation admits less, never more, and says so. The retrieved documents still
pass the permit of `ContextBudgetRetriever` or `ContextBudgetRunnable`.

Another store: fold `ctxbudget.permit_filter(...)` into its language with
`ctxbudget.fold_filter`, or filter in Python with `ctxbudget.filter_admits`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import BaseDocumentTransformer, Document

from ctxbudget import (
    ACCESS_KEY,
    AccessPolicy,
    PermitFilter,
    Principal,
    access_tokens,
    filter_admits,
    fold_filter,
    permit_filter,
    permit_tokens,
)
from langchain_ctxbudget._convert import DocumentMetadataMapping, to_chunks

if TYPE_CHECKING:
    from qdrant_client import models

__all__ = [
    "AccessMarker",
    "chroma_where",
    "elasticsearch_filter",
    "in_memory_filter",
    "pgvector_filter",
    "pinecone_filter",
    "qdrant_filter",
]


class AccessMarker(BaseDocumentTransformer):
    """Documents with their ACL added as the core's access tokens (``ctxbudget_access``), which
    `chroma_where`, `qdrant_filter` and `elasticsearch_filter` match; run it before the store.

    The ACL is read as every component reads it (`DocumentMetadataMapping`, the core's
    `acl_from_metadata`), so an ACL-looking key nobody mapped is an `InputError` here, at
    ingest. Returns new documents; the inputs are not changed. Run it again whenever a
    document's ACL changes: a document without tokens never passes those filters.
    """

    def __init__(self, mapping: DocumentMetadataMapping | None = None) -> None:
        self.mapping = DocumentMetadataMapping() if mapping is None else mapping

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Copies of `documents`, each with its access tokens in ``metadata``."""
        raw = [
            (d.id, d.page_content, {k: v for k, v in d.metadata.items() if k != ACCESS_KEY})
            for d in documents
        ]
        chunks = to_chunks(raw, self.mapping)
        return [
            document.model_copy(
                update={
                    "metadata": {
                        **document.metadata,
                        ACCESS_KEY: access_tokens(chunk.tenant, chunk.groups),
                    }
                }
            )
            for document, chunk in zip(documents, chunks, strict=True)
        ]


def _rule(
    principal: Principal | None,
    mapping: DocumentMetadataMapping | None,
    policy: AccessPolicy | None,
) -> PermitFilter:
    mapping = DocumentMetadataMapping() if mapping is None else mapping
    return permit_filter(
        principal, tenant_keys=mapping.tenant, groups_keys=mapping.groups, policy=policy
    )


def in_memory_filter(
    principal: Principal | None,
    *,
    mapping: DocumentMetadataMapping | None = None,
    policy: AccessPolicy | None = None,
) -> Callable[[Document], bool]:
    """`InMemoryVectorStore`'s ``filter=`` (a callable on each `Document`): exactly the permit
    rule over the mapped keys; no ingest step needed.

    >>> store.as_retriever(search_kwargs={"filter": in_memory_filter(p)})  # doctest: +SKIP
    """
    rule = _rule(principal, mapping, policy)
    return lambda document: filter_admits(rule, document.metadata)


_Clause = dict[str, Any] | bool
"""A translated part, or True / False where the rule's part is a constant (a combination of
nothing), kept out of the store's language: most have no literal for either."""


def _translate(
    rule: PermitFilter,
    *,
    missing: Callable[[str], dict[str, Any]],
    matches: Callable[[str, tuple[str | int, ...]], dict[str, Any]],
) -> dict[str, Any]:
    """`rule` as a MongoDB-style filter dict (``$and``, ``$or``, ``$exists``); a rule that
    admits nothing as a contradiction (a key both set and unset), one that admits everything
    as ``{}`` (no filter)."""

    def all_of(parts: list[_Clause]) -> _Clause:
        if any(part is False for part in parts):
            return False
        kept = [part for part in parts if part is not True]
        return True if not kept else kept[0] if len(kept) == 1 else {"$and": kept}

    def any_of(parts: list[_Clause]) -> _Clause:
        if any(part is True for part in parts):
            return True
        kept = [part for part in parts if part is not False]
        return False if not kept else kept[0] if len(kept) == 1 else {"$or": kept}

    translated: _Clause = fold_filter(
        rule, missing=missing, matches=matches, all_of=all_of, any_of=any_of
    )
    if translated is True:
        return {}
    if translated is False:
        return {"$and": [{ACCESS_KEY: {"$exists": True}}, {ACCESS_KEY: {"$exists": False}}]}
    return translated


def pgvector_filter(
    principal: Principal | None,
    *,
    mapping: DocumentMetadataMapping | None = None,
    policy: AccessPolicy | None = None,
) -> dict[str, Any]:
    """langchain-postgres `PGVector`'s ``filter=`` dict: the permit rule over the mapped keys,
    in its grammar (``$and``, ``$or``, ``$in``, ``$exists``; see
    https://python.langchain.com/api_reference/postgres/vectorstores/langchain_postgres.vectorstores.PGVector.html).

    It admits less than the rule in two places, never more: ``$in`` compares the value's
    JSON text, so a group list (``["sales"]``) never matches (store one group as a str, or
    use `in_memory_filter`'s callable over fetched candidates); and ``$exists`` tests the
    key, so a key holding null counts as set.
    """
    rule = _rule(principal, mapping, policy)
    return _translate(
        rule,
        missing=lambda key: {key: {"$exists": False}},
        matches=lambda key, values: {key: {"$in": sorted({str(value) for value in values})}},
    )


def _pinecone_matches(key: str, values: tuple[str | int, ...]) -> dict[str, Any]:
    names = [value for value in values if isinstance(value, str)]
    ids = [value for value in values if isinstance(value, int)]
    clauses = [{key: {"$in": group}} for group in (names, ids) if group]
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def pinecone_filter(
    principal: Principal | None,
    *,
    mapping: DocumentMetadataMapping | None = None,
    policy: AccessPolicy | None = None,
) -> dict[str, Any]:
    """A Pinecone metadata filter (`PineconeVectorStore`'s ``filter=``): the permit rule over
    the mapped keys with ``$and``, ``$or``, ``$in`` and ``$exists``, exact: ``$in`` on a list
    of strings matches when one element is in it, and Pinecone stores no null (see
    https://docs.pinecone.io/guides/search/filter-by-metadata). Int ids are matched as
    numbers and as strings, in separate ``$in`` lists of one type each."""
    rule = _rule(principal, mapping, policy)
    return _translate(
        rule,
        missing=lambda key: {key: {"$exists": False}},
        matches=_pinecone_matches,
    )


def chroma_where(
    principal: Principal | None, *, policy: AccessPolicy | None = None
) -> dict[str, Any]:
    """Chroma's ``where`` (``Chroma.as_retriever(search_kwargs={"filter": ...})``) over the
    access tokens `AccessMarker` writes: ``$contains`` tests an array field for one value,
    ``$or`` joins them (see https://docs.trychroma.com/reference/where-filter). Exact for
    documents with tokens; Chroma cannot test that a key is absent (``$ne`` and ``$nin`` also
    match a missing key), which the rule over plain keys would need."""
    tokens = permit_tokens(principal, policy=policy)
    clauses: list[dict[str, Any]] = [{ACCESS_KEY: {"$contains": token}} for token in tokens]
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def qdrant_filter(
    principal: Principal | None,
    *,
    policy: AccessPolicy | None = None,
    metadata_key: str = "metadata",
) -> models.Filter:
    """A `qdrant_client.models.Filter` (`QdrantVectorStore`'s ``filter=``) over the access
    tokens `AccessMarker` writes, under the payload key the store keeps metadata in: one
    ``MatchAny``, which an array field passes when one element matches (see
    https://qdrant.tech/documentation/concepts/filtering/). Exact for documents with tokens;
    Qdrant's ``is_empty`` holds for an empty list as for a missing key, so the rule over
    plain keys would admit a chunk with empty groups, which nobody may see."""
    try:
        from qdrant_client import models
    except ImportError as error:
        raise ImportError(
            "qdrant_filter needs qdrant-client, which is not installed: pip install qdrant-client"
        ) from error
    tokens = permit_tokens(principal, policy=policy)
    condition = models.FieldCondition(
        key=f"{metadata_key}.{ACCESS_KEY}" if metadata_key else ACCESS_KEY,
        match=models.MatchAny(any=tokens),
    )
    return models.Filter(must=[condition])


def elasticsearch_filter(
    principal: Principal | None,
    *,
    policy: AccessPolicy | None = None,
    field: str = f"metadata.{ACCESS_KEY}.keyword",
) -> dict[str, Any]:
    """An Elasticsearch / OpenSearch bool query (``ElasticsearchStore``'s ``filter=[...]``,
    ``OpenSearchVectorSearch``'s ``boolean_filter=``) over the access tokens `AccessMarker`
    writes: one ``terms`` clause, which an array field passes when one of its values is
    listed (see https://www.elastic.co/guide/en/elasticsearch/reference/current/query-dsl-terms-query.html).
    `field` is the tokens' keyword field (dynamic mapping's ``.keyword`` by default). Exact
    for documents with tokens; both index an empty list as no value, so the rule over plain
    keys could not tell empty groups (nobody) from none (everybody)."""
    return {"bool": {"filter": [{"terms": {field: permit_tokens(principal, policy=policy)}}]}}
