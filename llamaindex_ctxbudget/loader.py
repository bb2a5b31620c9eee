"""`DocstoreLoader`: whole-document escalation from a LlamaIndex docstore."""

from __future__ import annotations

from llama_index.core.storage.docstore.types import BaseDocumentStore

from ctxbudget import Chunk, Principal
from llamaindex_ctxbudget._convert import NodeMetadataMapping, to_chunk

__all__ = ["DocstoreLoader"]


class DocstoreLoader:
    """A `ctxbudget.SectionLoader` over an index's docstore: a document is its nodes, in order.

    Each node keeps its ACL, read as the postprocessor reads it (`to_chunk`: the node's
    own and its source document's, through `mapping`), so the core sends the document
    whole only when the principal may see every node of it. A document the docstore
    does not know, or one with a node missing, is not loaded: part of a document must
    never pass for the whole.

    >>> loader = DocstoreLoader(index.docstore)  # doctest: +SKIP
    """

    def __init__(
        self,
        docstore: BaseDocumentStore,
        *,
        mapping: NodeMetadataMapping | None = None,
        tokenizer: str | None = None,
    ) -> None:
        """
        Args:
            mapping: which metadata keys fill which `Chunk` field (ACLs included).
            tokenizer: the name of the tokenizer the assembler counts with (ingest counts
                from another tokenizer are recounted).
        """
        self.docstore = docstore
        self.mapping = NodeMetadataMapping() if mapping is None else mapping
        self.tokenizer = tokenizer

    def load_sections(self, document_id: str, principal: Principal | None) -> list[Chunk] | None:
        """The document's nodes as chunks in reading order; None when unknown or incomplete.

        Every node is returned, those `principal` may not see included: the core checks
        each one (`principal` is part of the protocol for stores that filter by ACL).
        """
        info = self.docstore.get_ref_doc_info(document_id)
        if info is None:
            return None
        nodes = self.docstore.get_nodes(list(info.node_ids), raise_error=False)
        if not nodes or len(nodes) != len(info.node_ids):
            return None
        chunks = [
            to_chunk(node, mapping=self.mapping, tokenizer=self.tokenizer, docstore=self.docstore)
            for node in nodes
        ]
        # The docstore lists nodes as they were added; ordinals, where known, say where they
        # stand (a stable sort: nodes without one keep the docstore's order, after the rest).
        return sorted(chunks, key=lambda c: (c.ordinal is None, c.ordinal or 0))
