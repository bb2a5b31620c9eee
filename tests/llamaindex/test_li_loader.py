"""`DocstoreLoader`: a document is its nodes from the docstore, in order, each with its ACL."""

from __future__ import annotations

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

from ctxbudget import InputError, Principal, SectionLoader
from llamaindex_ctxbudget import (
    ContextBudgetPostprocessor,
    DocstoreLoader,
    NodeMetadataMapping,
    TokenCounter,
)

TEXT = " ".join(f"Sentence {i} of the travel policy." for i in range(30))


def docstore_with(*nodes: BaseNode) -> SimpleDocumentStore:
    store = SimpleDocumentStore()
    store.add_documents(list(nodes))
    return store


def split(**metadata: object) -> list[BaseNode]:
    document = Document(text=TEXT, doc_id="travel", metadata=metadata)
    return SentenceSplitter(chunk_size=40, chunk_overlap=0).get_nodes_from_documents([document])


def split_without_metadata(**metadata: object) -> list[BaseNode]:
    """Nodes that copy none of the document's metadata (its SOURCE relationship holds it)."""
    document = Document(text=TEXT, doc_id="travel", metadata=metadata)
    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=0, include_metadata=False)
    return splitter.get_nodes_from_documents([document])


def part(node_id: str, start: int | None) -> TextNode:
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc")}
    return TextNode(id_=node_id, text=node_id, start_char_idx=start, relationships=source)


def test_docstore_loader_is_a_section_loader() -> None:
    assert isinstance(DocstoreLoader(SimpleDocumentStore()), SectionLoader)


def test_load_sections_returns_every_node_in_order() -> None:
    nodes = split()
    sections = DocstoreLoader(docstore_with(*reversed(nodes))).load_sections("travel", None)
    assert sections is not None
    assert [s.id for s in sections] == [n.node_id for n in nodes]
    assert all(s.document_id == "travel" for s in sections)


def test_load_sections_maps_each_node_acl() -> None:
    nodes = split(org="acme")
    nodes[1].metadata["groups"] = ["hr"]
    loader = DocstoreLoader(docstore_with(*nodes), mapping=NodeMetadataMapping(tenant=("org",)))
    sections = loader.load_sections("travel", Principal(tenant="acme"))
    assert sections is not None
    assert {s.tenant for s in sections} == {"acme"}
    assert [s.groups for s in sections[:2]] == [None, frozenset({"hr"})]


def test_load_sections_uses_ingest_counts_of_its_tokenizer() -> None:
    node = part("a", 0)
    TokenCounter(tokenizer="o200k_base")([node])
    loader = DocstoreLoader(docstore_with(node), tokenizer="o200k_base")
    sections = loader.load_sections("doc", None)
    assert sections is not None
    assert sections[0].tokens == node.metadata["ctxbudget_tokens"]


def test_load_sections_recounts_counts_ctxbudget_did_not_write() -> None:
    node = part("a", 0)
    node.metadata.update(ctxbudget_tokens=7, ctxbudget_tokenizer="o200k_base")
    sections = DocstoreLoader(docstore_with(node), tokenizer="o200k_base").load_sections(
        "doc", None
    )
    assert sections is not None
    assert sections[0].tokens is None


def test_load_sections_applies_the_source_document_acl() -> None:
    nodes = split_without_metadata(tenant="globex")
    assert all(n.metadata == {} for n in nodes)
    sections = DocstoreLoader(docstore_with(*nodes)).load_sections("travel", None)
    assert sections is not None
    assert {s.tenant for s in sections} == {"globex"}


def test_load_sections_node_and_document_acl_that_disagree_are_an_error() -> None:
    nodes = split(tenant="globex")
    nodes[1].metadata["tenant"] = "acme"
    with pytest.raises(InputError, match=rf"node '{nodes[1].node_id}' sets tenant 'acme'"):
        DocstoreLoader(docstore_with(*nodes)).load_sections("travel", None)


def test_escalation_never_sends_a_document_whose_source_acl_forbids_it() -> None:
    nodes = split_without_metadata(tenant="globex")
    index = VectorStoreIndex(nodes)
    retrieved = index.as_retriever(similarity_top_k=len(nodes)).retrieve("travel")
    out = ContextBudgetPostprocessor(
        tokenizer="o200k_base",
        docstore=index.docstore,
        principal=Principal(tenant="acme"),
        max_tokens=5_000,
    ).postprocess_nodes(retrieved)
    assert out == []


def test_load_sections_unknown_document_is_none() -> None:
    assert DocstoreLoader(docstore_with(*split())).load_sections("other", None) is None


class LossyDocstore(SimpleDocumentStore):
    """A docstore whose ref-doc info lists a node it can no longer return."""

    lost = ""

    def get_node(self, node_id: str, raise_error: bool = True) -> BaseNode | None:  # type: ignore[override]
        if node_id == self.lost:
            return None
        if raise_error:
            return super().get_node(node_id)
        return super().get_node(node_id, raise_error=False)


def test_load_sections_with_a_node_missing_is_none() -> None:
    nodes = split()
    store = LossyDocstore()
    store.add_documents(list(nodes))
    store.lost = nodes[1].node_id
    assert DocstoreLoader(store).load_sections("travel", None) is None


def test_load_sections_without_ordinals_keeps_docstore_order_after_the_rest() -> None:
    store = docstore_with(part("late", 50), part("unplaced", None), part("early", 0))
    sections = DocstoreLoader(store).load_sections("doc", None)
    assert sections is not None
    assert [s.id for s in sections] == ["early", "late", "unplaced"]
