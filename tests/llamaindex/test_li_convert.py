"""Node -> Chunk mapping (`llamaindex_ctxbudget._convert`), on real LlamaIndex nodes."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from llama_index.core import Document, get_response_synthesizer
from llama_index.core.node_parser import (
    HierarchicalNodeParser,
    MarkdownNodeParser,
    SentenceSplitter,
    SentenceWindowNodeParser,
    TokenTextSplitter,
)
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from pydantic import ValidationError

from ctxbudget import InputError, Principal, get_tokenizer, ingest_metadata
from llamaindex_ctxbudget import (
    ContextBudgetPostprocessor,
    ContextBudgetPromptHelper,
    NodeMetadataMapping,
    as_principal,
    to_chunk,
)
from tests.support.acl_oracle import acl_keys, expected_acl, may_see
from tests.support.llamaindex_stack import recording_llm


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
    assert to_chunk(eu).heading_path == ("Returns", "EU")  # its own heading opens its text
    assert to_chunk(eu).document_id == "r"


def test_to_chunk_heading_path_separator_is_configurable() -> None:
    chunk = to_chunk(
        node(metadata={"header_path": "Returns > EU"}),
        mapping=NodeMetadataMapping(heading_separator=">"),
    )
    assert chunk.heading_path == ("Returns", "EU")


def test_to_chunk_heading_path_as_a_list() -> None:
    assert to_chunk(node(metadata={"header_path": ["A", "B"]})).heading_path == ("A", "B")


def test_to_chunk_ordinal_from_ingest_metadata_before_start_char_idx() -> None:
    chunk = to_chunk(node(metadata={"ctxbudget_ordinal": 2}, start_char_idx=500))
    assert chunk.ordinal == 2


def test_to_chunk_ordinal_falls_back_to_start_char_idx() -> None:
    assert to_chunk(node(start_char_idx=500)).ordinal == 500


def ingested(text: str, tokenizer: str = "o200k_base") -> dict[str, object]:
    return ingest_metadata(text, get_tokenizer(tokenizer))


def test_to_chunk_trusts_ingest_counts_written_for_this_text_and_tokenizer() -> None:
    metadata = ingested("Refunds take 14 days.")
    chunk = to_chunk(node(metadata=metadata), tokenizer="o200k_base")
    assert chunk.tokens == get_tokenizer("o200k_base").count("Refunds take 14 days.")


def test_to_chunk_recounts_a_count_from_another_tokenizer() -> None:
    metadata = ingested("Refunds take 14 days.", "cl100k_base")
    assert to_chunk(node(metadata=metadata), tokenizer="o200k_base").tokens is None


def test_to_chunk_recounts_a_count_without_its_digest() -> None:
    # What a document could set itself (a document's metadata is copied onto its nodes).
    metadata = {"ctxbudget_tokens": 1, "ctxbudget_tokenizer": "o200k_base"}
    assert to_chunk(node(metadata=metadata), tokenizer="o200k_base").tokens is None


def test_to_chunk_recounts_a_count_made_before_the_text_changed() -> None:
    metadata = ingested("Refunds take 14 days.")
    changed = node(text="Refunds take 14 days, or 30 days for orders shipped abroad.")
    changed.metadata.update(metadata)
    assert to_chunk(changed, tokenizer="o200k_base").tokens is None


def test_to_chunk_recounts_a_generic_tokens_key() -> None:
    chunk = to_chunk(node(metadata={"tokens": 1}), tokenizer="o200k_base")
    assert chunk.tokens is None
    assert chunk.metadata == {"tokens": 1}


def test_to_chunk_ingest_keys_do_not_reach_chunk_metadata() -> None:
    metadata = {
        **ingested("Refunds take 14 days."),
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
    mapping = NodeMetadataMapping(tenant=("tenant_id",), groups=("allowed_groups",))
    chunk = to_chunk(
        node(metadata={"tenant_id": "acme", "allowed_groups": ["sales"]}), mapping=mapping
    )
    assert (chunk.tenant, chunk.groups, chunk.metadata) == ("acme", frozenset({"sales"}), {})


def test_to_chunk_unmapped_acl_key_is_an_error_naming_the_node() -> None:
    with pytest.raises(InputError, match=r"node 'n1' metadata: metadata key 'tenant_id' looks"):
        to_chunk(node(metadata={"tenant_id": "acme"}))


@pytest.mark.parametrize(
    "metadata",
    [
        {"groups": ["staff"], "tenant_id": "globex"},
        {"tenant": "acme", "allowed_groups": ["board"]},
        {"tenant": "acme", "tenant_id": "globex"},
    ],
)
def test_to_chunk_unmapped_acl_key_beside_a_mapped_one_is_an_error(
    metadata: dict[str, object],
) -> None:
    with pytest.raises(InputError, match=r"looks like an access rule .* not mapped"):
        to_chunk(node(metadata=metadata))


def test_to_chunk_unmapped_acl_key_beside_mapped_ones_is_enforced_once_mapped() -> None:
    mapping = NodeMetadataMapping(tenant=("tenant", "tenant_id"))
    with pytest.raises(InputError, match=r"mapped to tenant disagree"):
        to_chunk(node(metadata={"tenant": "acme", "tenant_id": "globex"}), mapping=mapping)


def test_to_chunk_disagreeing_acl_keys_are_an_error() -> None:
    mapping = NodeMetadataMapping(tenant=("tenant", "org"))
    with pytest.raises(InputError, match=r"node 'n1' metadata: metadata keys mapped to tenant"):
        to_chunk(node(metadata={"tenant": "acme", "org": "other"}), mapping=mapping)


def test_to_chunk_source_document_acl_applies_to_the_node() -> None:
    chunk = to_chunk(with_source({"tenant": "globex", "groups": "board"}))
    assert (chunk.tenant, chunk.groups) == ("globex", frozenset({"board"}))


def test_to_chunk_node_and_source_document_acl_that_agree_are_one_acl() -> None:
    chunk = to_chunk(with_source({"tenant": ["acme"]}, metadata={"tenant": "acme"}))
    assert chunk.tenant == "acme"


def test_to_chunk_node_acl_narrows_a_document_without_one() -> None:
    chunk = to_chunk(with_source({"tenant": "acme"}, metadata={"groups": ["hr"]}))
    assert (chunk.tenant, chunk.groups) == ("acme", frozenset({"hr"}))


def test_to_chunk_node_and_source_document_acl_that_disagree_are_an_error() -> None:
    with pytest.raises(
        InputError, match=r"node 'n1' sets tenant 'acme', but its source document 'doc-1' sets"
    ):
        to_chunk(with_source({"tenant": "globex"}, metadata={"tenant": "acme"}))


def test_to_chunk_unmapped_acl_key_in_the_source_document_is_an_error() -> None:
    with pytest.raises(InputError, match=r"node 'n1' source document 'doc-1' metadata: .*'org'"):
        to_chunk(with_source({"org": "globex"}))


def test_to_chunk_source_document_from_the_docstore_when_the_relationship_lacks_it() -> None:
    store = SimpleDocumentStore()
    store.add_documents([Document(text="x", doc_id="doc-1", metadata={"tenant": "globex"})])
    assert to_chunk(with_source(), docstore=store).tenant == "globex"
    assert to_chunk(with_source()).tenant is None


def test_to_chunk_source_document_metadata_of_every_node_parser() -> None:
    document = Document(text="# A\n\nHello world. " * 40, doc_id="d", metadata={"tenant": "t"})
    parsers = [
        SentenceSplitter(include_metadata=False, chunk_size=64, chunk_overlap=0),
        TokenTextSplitter(include_metadata=False, chunk_size=64, chunk_overlap=0),
        MarkdownNodeParser(include_metadata=False),
        SentenceWindowNodeParser(include_metadata=False),
        HierarchicalNodeParser.from_defaults(chunk_sizes=[128, 64], include_metadata=False),
    ]
    for parser in parsers:
        for parsed in parser.get_nodes_from_documents([document]):
            assert to_chunk(parsed).tenant == "t", type(parser).__name__


def test_to_chunk_groups_int_ids_are_names() -> None:
    assert to_chunk(node(metadata={"groups": [7, "hr"]})).groups == frozenset({"7", "hr"})


def test_to_chunk_deeply_nested_metadata_is_an_error_naming_the_node() -> None:
    deep: list[object] = []
    level = deep
    for _ in range(100):
        level.append([])
        level = level[0]  # type: ignore[assignment]
    with pytest.raises(InputError, match=r"node 'n1' metadata nests more than 64 levels"):
        to_chunk(node(metadata={"d": deep}))


def test_to_chunk_deeply_nested_source_document_metadata_is_an_error() -> None:
    deep: dict[str, object] = {}
    level = deep
    for _ in range(100):
        level["k"] = {}
        level = level["k"]  # type: ignore[assignment]
    with pytest.raises(InputError, match=r"node 'n1' SOURCE relationship metadata nests"):
        to_chunk(with_source({"d": deep}))


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
        NodeMetadataMapping(tenant=("title",))


@pytest.mark.parametrize(("key", "value"), [("groups", 1.5), ("header_path", 5)])
def test_to_chunk_value_of_the_wrong_shape_names_the_key(key: str, value: object) -> None:
    with pytest.raises(InputError, match=rf"node 'n1' metadata.*'{key}'"):
        to_chunk(node(metadata={key: value}))


# --- property: forbidden text never reaches the LLM, whatever shape the ACL metadata has ------
#
# The oracle below is written from the rule of docs/inputs.md, "Inputs", not from the
# library: which keys look like access rules (the name grammar, spelt here by construction),
# how values are read, when an error is justified, and what a principal may see.

_PLAIN_KEYS = ["owner", "author", "users", "source", "category", "page_label"]
_NAMES = ["acme", "globex", "staff", "board"]


_VALUES = st.one_of(
    st.sampled_from(_NAMES),
    st.integers(1, 2),
    st.none(),
    st.sampled_from(["", True, 1.5]),
    st.lists(st.one_of(st.sampled_from(_NAMES), st.integers(1, 2), st.none()), max_size=2),
)


@st.composite
def metadata_shapes(draw: st.DrawFn) -> dict[str, object]:
    """Metadata with access-rule keys (the shared oracle's grammar) and plain keys."""
    acl = [key for key, _ in draw(st.lists(acl_keys(), max_size=3))]
    plain = draw(st.lists(st.sampled_from(_PLAIN_KEYS), max_size=2, unique=True))
    metadata: dict[str, object] = {key: draw(_VALUES) for key in acl}
    metadata.update({key: draw(st.sampled_from(_NAMES)) for key in plain if key not in acl})
    return metadata


PRINCIPALS = st.one_of(
    st.none(),
    st.builds(
        Principal,
        tenant=st.sampled_from([None, "acme", "globex", "1"]),
        groups=st.frozensets(st.sampled_from(["staff", "board", "1"]), max_size=2),
    ),
)


@given(
    node_shape=metadata_shapes(),
    document_shape=metadata_shapes(),
    placement=st.sampled_from(["node", "document", "both", "copied"]),
    mapped=st.data(),
    principal=PRINCIPALS,
    per_query=st.booleans(),
)
def test_forbidden_text_never_reaches_the_llm_for_any_metadata_shape(
    node_shape: dict[str, object],
    document_shape: dict[str, object],
    placement: str,
    mapped: st.DataObject,
    principal: Principal | None,
    per_query: bool,
) -> None:
    node_metadata, document_metadata = node_shape, document_shape
    if placement == "node":
        document_metadata = {}
    elif placement == "document":
        node_metadata = {}
    elif placement == "copied":  # SentenceSplitter(include_metadata=True): the same keys
        node_metadata = dict(document_metadata)
    keys = sorted({*node_metadata, *document_metadata, "tenant", "groups"})
    tenant = mapped.draw(st.lists(st.sampled_from(keys), max_size=2, unique=True))
    groups = mapped.draw(
        st.lists(
            st.sampled_from([k for k in keys if k not in tenant] or ["groups"]),
            max_size=2,
            unique=True,
        )
    )
    groups = [k for k in groups if k not in tenant]
    own = expected_acl(node_metadata, tenant, groups)
    inherited = expected_acl(document_metadata, tenant, groups)
    verdict: bool | None = None
    if own is not None and inherited is not None:
        pairs = list(zip(own, inherited, strict=True))
        if all(mine is None or theirs is None or mine == theirs for mine, theirs in pairs):
            rule = (
                (own[0] if own[0] is not None else inherited[0]),
                (own[1] if own[1] is not None else inherited[1]),
            )
            verdict = may_see(principal, rule)
    event({None: "refused", True: "shown", False: "forbidden"}[verdict])

    source = RelatedNodeInfo(node_id="document", metadata=document_metadata)
    restricted = TextNode(
        id_="restricted",
        text="The merger closes in May zqsecret.",
        metadata=node_metadata,
        relationships={NodeRelationship.SOURCE: source},
    )
    public = TextNode(id_="public", text="The canteen opens at noon zqpublic.")
    nodes = [NodeWithScore(node=restricted, score=0.9), NodeWithScore(node=public, score=0.5)]
    llm = recording_llm(5)
    postprocessor = ContextBudgetPostprocessor(
        tokenizer="o200k_base",
        llm=llm,
        mapping=NodeMetadataMapping(tenant=tuple(tenant), groups=tuple(groups)),
        principal=None if per_query else principal,
    )
    synthesizer = get_response_synthesizer(
        llm=llm, prompt_helper=ContextBudgetPromptHelper.from_llm(llm, tokenizer="o200k_base")
    )

    def answer() -> None:
        with as_principal(principal) if per_query else contextlib.nullcontext():
            synthesizer.synthesize("When?", postprocessor.postprocess_nodes(nodes))

    if verdict is None:
        with pytest.raises(InputError, match=r"node 'restricted'"):
            answer()
        assert llm.prompts == []
        return
    answer()
    [prompt] = llm.prompts
    assert "zqpublic" in prompt
    assert ("zqsecret" in prompt) is verdict
