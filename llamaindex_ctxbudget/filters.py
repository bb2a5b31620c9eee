"""Permission filters before retrieval: the vector store returns only nodes the principal
may see, so ``similarity_top_k`` is spent on them (docs/permissions.md,
"Permission filters before retrieval").

The ACL is written once, at ingest, as the core's access tokens (`AccessMarker`, under
``ctxbudget.ACCESS_KEY``), and a query's filter is one ``ANY`` test against the
principal's tokens (`principal_filters`): exact, and one the in-memory SimpleVectorStore
runs (it takes neither nested filters nor a test that tells a missing key from an empty
list). A node ingested without the tokens is never returned through the filter: it admits
less, never more. The postprocessor's permit still runs on what comes back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.bridge.pydantic import Field
from llama_index.core.indices.vector_store import VectorStoreIndex
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TransformComponent
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from ctxbudget import (
    ACCESS_KEY,
    AccessPolicy,
    InputError,
    Principal,
    access_tokens,
    permit_tokens,
    principal_for_call,
)
from llamaindex_ctxbudget._convert import NodeMetadataMapping, to_chunk
from llamaindex_ctxbudget.postprocessor import _PRINCIPAL

__all__ = ["AccessMarker", "PrincipalRetriever", "principal_filters"]


class AccessMarker(TransformComponent):
    """An `IngestionPipeline` step that writes each node's ACL as the core's access tokens
    (``ctxbudget_access``), the value `principal_filters` matches.

    The ACL is read as the postprocessor reads it (`to_chunk`: the node's metadata and its
    source document's, under `mapping`), so the filter and the permit see one rule. Run it
    after the node parser, and again whenever a node's ACL changes; the key is excluded
    from LLM and embedding text.

    >>> steps = [SentenceSplitter(), AccessMarker()]  # doctest: +SKIP
    """

    mapping: NodeMetadataMapping = Field(
        default_factory=NodeMetadataMapping,
        description="Which node metadata keys hold the ACL (as for the postprocessor).",
    )

    @classmethod
    def class_name(cls) -> str:
        return "CtxBudgetAccessMarker"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Annotate `nodes` in place (as LlamaIndex transformations do) and return them."""
        for node in nodes:
            node.metadata.pop(ACCESS_KEY, None)  # a stale value is not the node's ACL
            chunk = to_chunk(node, mapping=self.mapping)
            node.metadata[ACCESS_KEY] = access_tokens(chunk.tenant, chunk.groups)
            for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
                if ACCESS_KEY not in keys:
                    keys.append(ACCESS_KEY)
        return nodes


def principal_filters(
    principal: Principal | None, *, policy: AccessPolicy | None = None
) -> MetadataFilters:
    """The vector-store filter that returns only nodes `principal` may see (None: the
    anonymous caller, unrestricted nodes only), for ``index.as_retriever(filters=...)`` or
    ``as_query_engine(filters=...)``. Nodes need `AccessMarker`'s tokens; `policy` is the
    postprocessor's ``SourceOptions.access``."""
    tokens = permit_tokens(principal, policy=policy)
    return MetadataFilters(
        filters=[MetadataFilter(key=ACCESS_KEY, value=tokens, operator=FilterOperator.ANY)]
    )


class PrincipalRetriever(BaseRetriever):
    """An index's retriever filtered, on each query, for the principal of the `as_principal`
    block around it (or the one it was built for), as the postprocessor decides who asks.

    >>> retriever = PrincipalRetriever(index, similarity_top_k=30)  # doctest: +SKIP
    >>> RetrieverQueryEngine.from_args(retriever, node_postprocessors=[pp])  # doctest: +SKIP
    """

    def __init__(
        self,
        index: VectorStoreIndex,
        *,
        principal: Principal | None = None,
        policy: AccessPolicy | None = None,
        **retriever_kwargs: Any,
    ) -> None:
        """
        Args:
            principal: the one principal it serves; None: whoever each `as_principal`
                block names (none: unrestricted nodes only).
            retriever_kwargs: passed to ``index.as_retriever`` (``similarity_top_k``, ...).
        """
        if "filters" in retriever_kwargs:
            raise InputError(
                "PrincipalRetriever sets filters= itself, for each query's principal; "
                "filter other metadata after retrieval, or build the retriever with "
                "index.as_retriever(filters=MetadataFilters(filters=[*principal_filters(p)"
                ".filters, ...]))"
            )
        super().__init__()
        self._index = index
        self._principal = principal
        self._policy = policy
        self._kwargs = retriever_kwargs

    def _filtered(self) -> BaseRetriever:
        principal = principal_for_call(self._principal, _PRINCIPAL.get(), where="as_principal")
        filters = principal_filters(principal, policy=self._policy)
        return self._index.as_retriever(filters=filters, **self._kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._filtered().retrieve(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await self._filtered().aretrieve(query_bundle)
