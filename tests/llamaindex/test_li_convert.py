"""Node -> Chunk mapping (`llamaindex_ctxbudget._convert`), on real LlamaIndex nodes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from pydantic import ValidationError

from ctxbudget import InputError
from llamaindex_ctxbudget import MetadataMapping, to_chunk


def node(text: str = "Refunds take 14 days.", **fields: Any) -> TextNode:
    return TextNode(text=text, id_="n1", **fields)


def with_source(document: dict[str, object] | None = None, **fields: Any) -> TextNode:
    source = RelatedNodeInfo(node_id="doc-1", metadata=document or {})
    return node(relationships={NodeRelationship.SOURCE: source}, **fields)


def test_to_chunk_takes_raw_text_without_metadata() -> None:
    chunk = to_chunk(node(metadata={"file_name": "returns.md"}))
    assert chunk.content == "Refunds take 14 days."
    assert chunk.id == "n1"


def test_to_chunk_document_id_is_the_source_relationship() -> None:
    assert to_chunk(with_source()).document_id == "doc-1"


def test_to_chunk_without_source_is_its_own_document() -> None:
    assert to_chunk(node()).document_id == "n1"


def test_to_chunk_score_comes_from_the_caller() -> None:
    assert to_chunk(node(), score=0.75).score == 0.75


def test_to_chunk_title_prefers_title_over_file_name() -> None:
    chunk = to_chunk(node(metadata={"file_name": "returns.md", "title": "Returns policy"}))
    assert chunk.title == "Returns policy"


def test_to_chunk_title_falls_back_to_file_name() -> None:
    assert to_chunk(node(metadata={"file_name": "returns.md"})).title == "returns.md"


def test_to_chunk_title_falls_back_to_source_document_metadata() -> None:
    assert to_chunk(with_source({"title": "Handbook"})).title == "Handbook"


def test_to_chunk_heading_path_from_markdown_node_parser() -> None:
    text = "# Returns\n\n## EU\n\nSixty days.\n"
    nodes = MarkdownNodeParser().get_nodes_from_documents([Document(text=text, doc_id="r")])
    eu = next(n for n in nodes if "Sixty" in n.get_content())
    assert eu.metadata["header_path"] == "/Returns/"
    assert to_chunk(eu).heading_path == ("Returns",)
    assert to_chunk(eu).document_id == "r"


def test_to_chunk_heading_path_separator_is_configurable() -> None:
    chunk = to_chunk(
        node(metadata={"header_path": "Returns > EU"}),
        mapping=MetadataMapping(heading_separator=">"),
    )
    assert chunk.heading_path == ("Returns", "EU")


def test_to_chunk_heading_path_as_a_list() -> None:
    assert to_chunk(node(metadata={"header_path": ["A", "B"]})).heading_path == ("A", "B")


def test_to_chunk_ordinal_from_ingest_metadata_before_start_char_idx() -> None:
    chunk = to_chunk(node(metadata={"ctxbudget_ordinal": 2}, start_char_idx=500))
    assert chunk.ordinal == 2


def test_to_chunk_ordinal_falls_back_to_start_char_idx() -> None:
    assert to_chunk(node(start_char_idx=500)).ordinal == 500


def test_to_chunk_trusts_ingest_tokens_from_the_same_tokenizer() -> None:
    metadata = {"ctxbudget_tokens": 6, "ctxbudget_tokenizer": "o200k_base"}
    assert to_chunk(node(metadata=metadata), tokenizer="o200k_base").tokens == 6


def test_to_chunk_ignores_ingest_tokens_from_another_tokenizer() -> None:
    metadata = {"ctxbudget_tokens": 6, "ctxbudget_tokenizer": "cl100k_base"}
    assert to_chunk(node(metadata=metadata), tokenizer="o200k_base").tokens is None


def test_to_chunk_ingest_keys_do_not_reach_chunk_metadata() -> None:
    metadata = {
        "ctxbudget_tokens": 6,
        "ctxbudget_tokenizer": "o200k_base",
        "ctxbudget_ordinal": 0,
        "ctxbudget_parse_warnings": "asks to ignore earlier instructions",
        "file_name": "a.md",
    }
    assert to_chunk(node(metadata=metadata)).metadata == {"file_name": "a.md"}


def test_to_chunk_parse_warnings_one_per_line() -> None:
    metadata = {"ctxbudget_parse_warnings": "first\nsecond"}
    assert to_chunk(node(metadata=metadata)).parse_warnings == ("first", "second")


def test_to_chunk_acl_keys_become_fields_and_leave_metadata() -> None:
    chunk = to_chunk(node(metadata={"tenant": "acme", "groups": ["hr"], "file_name": "a.md"}))
    assert chunk.tenant == "acme"
    assert chunk.groups == frozenset({"hr"})
    assert chunk.metadata == {"file_name": "a.md"}


def test_to_chunk_groups_string_is_one_group() -> None:
    assert to_chunk(node(metadata={"groups": "hr,sales"})).groups == frozenset({"hr,sales"})


def test_to_chunk_maps_custom_acl_keys() -> None:
    mapping = MetadataMapping(tenant=("tenant_id",), groups=("allowed_groups",))
    chunk = to_chunk(
        node(metadata={"tenant_id": "acme", "allowed_groups": ["sales"]}), mapping=mapping
    )
    assert (chunk.tenant, chunk.groups, chunk.metadata) == ("acme", frozenset({"sales"}), {})


def test_to_chunk_unmapped_acl_key_is_an_error_naming_the_node() -> None:
    with pytest.raises(InputError, match=r"node 'n1': metadata key 'tenant_id' looks like"):
        to_chunk(node(metadata={"tenant_id": "acme"}))


def test_to_chunk_disagreeing_acl_keys_are_an_error() -> None:
    mapping = MetadataMapping(tenant=("tenant", "org"))
    with pytest.raises(InputError, match=r"'tenant', 'org' all set tenant but disagree"):
        to_chunk(node(metadata={"tenant": "acme", "org": "other"}), mapping=mapping)


def test_to_chunk_bad_value_names_the_metadata_key() -> None:
    with pytest.raises(InputError, match=r"node 'n1' metadata\['title'\] \(Chunk.title\)"):
        to_chunk(node(metadata={"title": 42}))


def test_to_chunk_bad_field_without_a_key_names_the_field() -> None:
    with pytest.raises(InputError, match=r"node 'n1' \(Chunk.score\): must be a finite number"):
        to_chunk(node(), score=float("nan"))


def test_to_chunk_passes_the_embedding() -> None:
    assert to_chunk(node(embedding=[0.1, 0.2])).embedding == (0.1, 0.2)


def test_to_chunk_does_not_change_the_node() -> None:
    given = with_source({"title": "T"}, metadata={"tenant": "acme", "header_path": "/A/"})
    before = copy.deepcopy(given)
    to_chunk(given)
    assert given == before


def test_metadata_mapping_one_key_one_field() -> None:
    with pytest.raises(ValidationError, match="'title' is mapped to both 'title' and 'tenant'"):
        MetadataMapping(tenant=("title",))


@pytest.mark.parametrize(("key", "value"), [("groups", 5), ("header_path", 5)])
def test_to_chunk_value_of_the_wrong_shape_names_the_key(key: str, value: object) -> None:
    with pytest.raises(InputError, match=rf"node 'n1' metadata\['{key}'\]"):
        to_chunk(node(metadata={key: value}))
