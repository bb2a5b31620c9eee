"""Document metadata ⇄ Chunk fields, tested without the framework (`_convert` imports none)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import Chunk, InputError, TiktokenTokenizer, ingest_metadata
from langchain_ctxbudget._convert import DocumentMetadataMapping, metadata_of, to_chunks
from tests.support.imports import loaded_after


def one(metadata: dict[str, Any], *, id: str | None = "c1", content: str = "text") -> Chunk:
    return to_chunks([(id, content, metadata)])[0]


def test_convert_module_imports_no_framework() -> None:
    code = (
        "import sys, importlib.util\n"
        "path = 'langchain_ctxbudget/_convert.py'\n"
        "spec = importlib.util.spec_from_file_location('_convert', path)\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
    )
    assert loaded_after(code, ["langchain_core", "langchain"]) == set()


def test_to_chunks_document_id_keys_in_order() -> None:
    assert one({"source": "a.md"}).document_id == "a.md"
    assert one({"doc_id": "d", "source": "a.md"}).document_id == "d"
    assert one({"document_id": "x", "doc_id": "d", "source": "a.md"}).document_id == "x"


def test_to_chunks_unused_alternative_key_passes_into_metadata() -> None:
    chunk = one({"document_id": "x", "source": "a.md"})
    assert chunk.metadata == {"source": "a.md"}


def test_to_chunks_integer_document_id_becomes_str() -> None:
    assert one({"doc_id": 42}).document_id == "42"


def test_to_chunks_heading_path_from_list_or_arrow_string() -> None:
    assert one({"heading_path": ["Returns", "EU"]}).heading_path == ("Returns", "EU")
    assert one({"headers": "Returns > EU >  "}).heading_path == ("Returns", "EU")


def test_to_chunks_ordinal_keys() -> None:
    assert one({"ordinal": 3}).ordinal == 3
    assert one({"chunk_index": 4}).ordinal == 4
    assert one({"start_index": 1200}).ordinal == 1200


def test_to_chunks_scores() -> None:
    chunk = one({"relevance_score": 0.4, "rerank_score": 0.9})
    assert (chunk.score, chunk.rerank_score) == (0.4, 0.9)


def test_to_chunks_dates_from_iso_strings_and_timestamps() -> None:
    chunk = one({"effective_date": "2024-03-01", "last_modified": 0})
    assert chunk.effective_date == date(2024, 3, 1)
    assert chunk.updated_at == datetime(1970, 1, 1, tzinfo=UTC)


def test_to_chunks_title_and_warnings() -> None:
    chunk = one({"title": "Refunds", "parse_warnings": "low OCR confidence"})
    assert (chunk.title, chunk.parse_warnings) == ("Refunds", ("low OCR confidence",))


def test_to_chunks_generic_tokens_key_is_plain_metadata() -> None:
    chunk = one({"tokens": 7})
    assert chunk.tokens is None
    assert chunk.metadata == {"tokens": 7}


def test_metadata_mapping_has_no_tokens_field() -> None:
    with pytest.raises(ValidationError, match="tokens"):
        DocumentMetadataMapping(tokens=("tokens",))  # type: ignore[call-arg]


def test_to_chunks_ingest_count_for_this_text_and_tokenizer_is_used(
    o200k: TiktokenTokenizer,
) -> None:
    metadata = ingest_metadata("Refunds take 5 days.", o200k)
    chunk = to_chunks([("c", "Refunds take 5 days.", metadata)], tokenizer="o200k_base")[0]
    assert chunk.tokens == o200k.count("Refunds take 5 days.")


def test_to_chunks_ingest_count_of_another_text_is_not_used(o200k: TiktokenTokenizer) -> None:
    metadata = ingest_metadata("Refunds take 5 days.", o200k)
    chunk = to_chunks([("c", "Refunds take 60 days.", metadata)], tokenizer="o200k_base")[0]
    assert chunk.tokens is None


def test_to_chunks_ingest_count_of_another_tokenizer_is_not_used(
    cl100k: TiktokenTokenizer,
) -> None:
    metadata = ingest_metadata("Refunds take 5 days.", cl100k)
    chunk = to_chunks([("c", "Refunds take 5 days.", metadata)], tokenizer="o200k_base")[0]
    assert chunk.tokens is None


def test_to_chunks_without_a_tokenizer_uses_no_ingest_count(o200k: TiktokenTokenizer) -> None:
    metadata = ingest_metadata("Refunds take 5 days.", o200k)
    assert to_chunks([("c", "Refunds take 5 days.", metadata)])[0].tokens is None


def test_to_chunks_unknown_keys_pass_into_metadata() -> None:
    assert one({"page": 3, "title": "T"}).metadata == {"page": 3}


def test_to_chunks_acl_keys_become_acl_fields_never_metadata() -> None:
    chunk = one({"tenant": "acme", "groups": ["sales", "legal"], "page": 1})
    assert chunk.tenant == "acme"
    assert chunk.groups == frozenset({"sales", "legal"})
    assert chunk.metadata == {"page": 1}


def test_to_chunks_single_group_string_is_one_group() -> None:
    assert one({"groups": "sales"}).groups == frozenset({"sales"})


def test_to_chunks_empty_groups_means_nobody() -> None:
    assert one({"groups": []}).groups == frozenset()


def test_to_chunks_acl_key_set_to_none_is_removed() -> None:
    chunk = one({"tenant": None, "page": 1})
    assert chunk.tenant is None
    assert chunk.metadata == {"page": 1}


def test_to_chunks_every_mapped_acl_key_is_taken_out() -> None:
    mapping = DocumentMetadataMapping(tenant=("tenant", "org_id"))
    chunk = to_chunks([("c", "t", {"tenant": "acme", "org_id": "acme"})], mapping)[0]
    assert chunk.tenant == "acme"
    assert chunk.metadata == {}


def test_to_chunks_disagreeing_acl_keys_are_an_error() -> None:
    mapping = DocumentMetadataMapping(tenant=("tenant", "org_id"))
    with pytest.raises(InputError, match=r"documents\[0\] metadata keys mapped to tenant disagree"):
        to_chunks([("c", "t", {"tenant": "acme", "org_id": "other"})], mapping)


def test_to_chunks_unmapped_acl_looking_key_is_an_error_with_the_mapping_fix() -> None:
    with pytest.raises(
        InputError,
        match=r"documents\[0\] metadata key 'tenant_id' looks like an access rule \(tenant\).*"
        r"DocumentMetadataMapping\(tenant=\.\.\.\)",
    ):
        one({"tenant_id": "acme"})


@pytest.mark.parametrize(
    "metadata",
    [
        {"groups": ["staff"], "tenant_id": "globex"},
        {"tenant": "acme", "allowed_groups": ["board"]},
        {"tenant": "acme", "tenant_id": "globex"},
    ],
)
def test_to_chunks_unmapped_acl_key_beside_a_mapped_one_is_an_error(
    metadata: dict[str, Any],
) -> None:
    with pytest.raises(InputError, match=r"documents\[0\] metadata key '\w+' looks like an access"):
        one(metadata)


def test_to_chunks_acl_key_mapped_beside_another_is_enforced() -> None:
    mapping = DocumentMetadataMapping(groups=("groups", "allowed_groups"))
    chunk = to_chunks([("c", "t", {"tenant": "acme", "allowed_groups": ["board"]})], mapping)[0]
    assert (chunk.tenant, chunk.groups, chunk.metadata) == ("acme", frozenset({"board"}), {})


def test_to_chunks_acl_error_names_the_document_index() -> None:
    documents = [("a", "ok", {}), ("b", "ok", {"Allowed-User-Groups": "x"})]
    with pytest.raises(InputError, match=r"^documents\[1\] metadata key 'Allowed-User-Groups'"):
        to_chunks(documents)


def test_to_chunks_numeric_acl_ids_become_str() -> None:
    chunk = one({"tenant": 7, "groups": [1, 2]})
    assert (chunk.tenant, chunk.groups) == ("7", frozenset({"1", "2"}))


def test_to_chunks_custom_mapping() -> None:
    mapping = DocumentMetadataMapping(title=("name",), tenant=("org",))
    chunk = to_chunks([("c", "t", {"name": "Doc", "org": "acme", "title": "kept"})], mapping)[0]
    assert (chunk.title, chunk.tenant, chunk.metadata) == ("Doc", "acme", {"title": "kept"})


def test_metadata_mapping_key_for_two_fields_is_an_error() -> None:
    with pytest.raises(
        ValidationError, match="'source' is mapped to both 'document_id' and 'title'"
    ):
        DocumentMetadataMapping(title=("source",))


def test_metadata_mapping_key_named_twice_for_a_field_is_an_error() -> None:
    with pytest.raises(ValidationError, match="metadata key 'tenant' is named twice for 'tenant'"):
        DocumentMetadataMapping(tenant=("tenant", "tenant"))


def test_metadata_mapping_unknown_field_is_an_error() -> None:
    with pytest.raises(ValidationError, match="tenants"):
        DocumentMetadataMapping(tenants=("t",))  # type: ignore[call-arg]


def test_to_chunks_error_names_document_index_and_key() -> None:
    documents = [("a", "ok", {}), ("b", "ok", {"chunk_index": -1})]
    with pytest.raises(
        InputError, match=r"documents\[1\] metadata\['chunk_index'\] \(Chunk.ordinal\)"
    ):
        to_chunks(documents)


def test_to_chunks_error_on_content_names_page_content() -> None:
    with pytest.raises(InputError, match=r"documents\[0\] page_content: .*surrogate"):
        one({}, content="bad \ud800")


def test_to_chunks_error_on_id_names_id() -> None:
    with pytest.raises(InputError, match=r"documents\[0\] id: "):
        one({}, id="")


def test_to_chunks_error_on_metadata_names_metadata() -> None:
    with pytest.raises(InputError, match=r"documents\[0\] metadata: "):
        to_chunks([("a", "t", {1: "not a str key"})])  # type: ignore[dict-item]


def test_to_chunks_missing_id_is_the_position_in_the_call() -> None:
    chunks = to_chunks([(None, "same", {}), ("x", "same", {}), (None, "other", {})])
    assert [c.id for c in chunks] == ["documents[0]", "x", "documents[2]"]


def test_to_chunks_missing_id_is_not_a_function_of_the_text() -> None:
    first = to_chunks([(None, "Board minutes: layoffs in May.", {})])[0]
    second = to_chunks([(None, "Refunds take 5 days.", {})])[0]
    assert first.id == second.id == "documents[0]"


def test_to_chunks_does_not_change_the_metadata_given() -> None:
    metadata = {"tenant": "acme", "groups": ["a"], "page": 1}
    one(metadata)
    assert metadata == {"tenant": "acme", "groups": ["a"], "page": 1}


def test_metadata_of_leaves_out_unset_fields_and_own_document_id() -> None:
    assert metadata_of(Chunk(id="c", content="t", metadata={"page": 1})) == {"page": 1}


def test_metadata_of_skips_fields_mapped_to_no_key() -> None:
    chunk = Chunk(id="c", content="t", title="T")
    assert metadata_of(chunk, DocumentMetadataMapping(title=())) == {}


_text = st.text(st.characters(codec="utf-8", exclude_characters=">"), min_size=1, max_size=8)


@given(
    document_id=st.none() | _text,
    title=st.none() | _text,
    heading=st.lists(_text.map(str.strip).filter(bool), max_size=3),
    ordinal=st.none() | st.integers(0, 10_000),
    score=st.none() | st.floats(-1, 1),
    tenant=st.none() | _text,
    groups=st.none() | st.frozensets(_text, max_size=3),
    warnings=st.lists(_text, max_size=2),
    effective=st.none() | st.dates(),
)
def test_metadata_of_reads_back_to_the_same_chunk(
    document_id: str | None,
    title: str | None,
    heading: list[str],
    ordinal: int | None,
    score: float | None,
    tenant: str | None,
    groups: frozenset[str] | None,
    warnings: list[str],
    effective: date | None,
) -> None:
    chunk = Chunk(
        id="c",
        content="text",
        document_id=document_id or "c",  # "c", the id: the default
        title=title,
        heading_path=tuple(heading),
        ordinal=ordinal,
        score=score,
        rerank_score=score,
        tenant=tenant,
        groups=groups,
        parse_warnings=tuple(warnings),
        effective_date=effective,
        updated_at=datetime(2024, 1, 2, 3, 4, tzinfo=UTC),
        metadata={"page": 3},
    )
    assert to_chunks([("c", "text", metadata_of(chunk))])[0] == chunk


def test_to_chunks_groups_of_another_type_is_an_error_naming_the_key() -> None:
    with pytest.raises(
        InputError, match=r"documents\[0\] metadata key 'groups' \(groups\) holds float 5.0"
    ):
        one({"groups": 5.0})
