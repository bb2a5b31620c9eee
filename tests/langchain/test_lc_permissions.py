"""Access rules in Document metadata on every path, and the ids made for documents without one.

Every ACL-looking key is mapped (then enforced) or refused, whatever else is set; a
property checks it over random metadata shapes and principals through real chains,
against an oracle written here from the documented name grammar (docs/inputs.md, "Inputs").
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from ctxbudget import ContextAssembler, InputError, Principal
from langchain_ctxbudget import DocumentMetadataMapping
from tests.support.acl_oracle import Rule, acl_keys, expected_acl, may_see
from tests.support.langchain_stack import (
    PATHS,
    Path,
    RecordingChatModel,
    ask,
    chain_for,
    small_budget,
)

ACME_STAFF = Principal(tenant="acme", groups=frozenset({"staff"}))
SECRET = "Board only: the Globex merger closes on 3 March."

PARTIAL = [
    {"groups": ["staff"], "tenant_id": "globex"},
    {"tenant": "acme", "allowed_groups": ["board"]},
    {"tenant": "acme", "tenant_id": "globex"},
]
"""Metadata that maps one ACL field and carries another, unmapped, access rule."""


def corpus_with(metadata: dict[str, Any]) -> list[Document]:
    return [
        Document("Refunds are paid within 5 business days.", id="refunds", metadata={}),
        Document(SECRET, id="secret", metadata=metadata),
    ]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("metadata", PARTIAL)
def test_partial_acl_is_refused_on_every_path(
    path: Path, metadata: dict[str, Any], assembler: ContextAssembler, model: RecordingChatModel
) -> None:
    with pytest.raises(InputError, match=r"documents\[\d\] metadata key '\w+' looks like an acc"):
        ask(path, corpus_with(metadata), assembler, model, principal=ACME_STAFF)
    assert model.received == []


@pytest.mark.parametrize("path", PATHS)
def test_mapped_second_group_key_is_enforced_on_every_path(
    path: Path, assembler: ContextAssembler, model: RecordingChatModel
) -> None:
    mapping = DocumentMetadataMapping(groups=("groups", "allowed_groups"))
    documents = corpus_with({"tenant": "acme", "allowed_groups": ["board"]})
    sent = ask(path, documents, assembler, model, principal=ACME_STAFF, mapping=mapping)
    assert "Refunds are paid" in sent
    assert "Globex merger" not in sent


@pytest.mark.parametrize("path", PATHS)
def test_mapped_tenant_keys_that_disagree_are_refused_on_every_path(
    path: Path, assembler: ContextAssembler, model: RecordingChatModel
) -> None:
    mapping = DocumentMetadataMapping(tenant=("tenant", "tenant_id"))
    documents = corpus_with({"tenant": "acme", "tenant_id": "globex"})
    with pytest.raises(InputError, match=r"metadata keys mapped to tenant disagree"):
        ask(path, documents, assembler, model, principal=ACME_STAFF, mapping=mapping)
    assert model.received == []


# --- the property: random metadata shapes and principals, through real chains ---------------


def access_rule_keys() -> st.SearchStrategy[str]:
    """An access-rule key in a random spelling (the shared oracle's grammar)."""
    return acl_keys().map(lambda drawn: drawn[0])


_PLAIN_KEYS = st.sampled_from(["page", "owner", "users", "author", "lang", "user", "tokens"])
_GOOD = st.sampled_from(["acme", "globex", "staff", "board"]) | st.integers(0, 2)
_BAD = st.sampled_from(["", True, 1.5])
_VALUES = st.one_of(
    st.none(),
    _GOOD,
    _GOOD,
    st.lists(_GOOD, min_size=1, max_size=1),
    st.lists(_GOOD | _BAD, max_size=2),
    _BAD,
)


@st.composite
def mappings(draw: st.DrawFn) -> DocumentMetadataMapping:
    """The default keys, sometimes with another spelling mapped beside them."""
    defaults = {"tenant", "groups"}
    tenant = [
        "tenant",
        *(k for k in draw(st.lists(access_rule_keys(), max_size=1)) if k not in defaults),
    ]
    extra = draw(st.lists(access_rule_keys(), max_size=1))
    groups = ["groups", *(k for k in extra if k not in {*tenant, *defaults})]
    return DocumentMetadataMapping(tenant=tuple(tenant), groups=tuple(groups))


@st.composite
def metadata_for(draw: st.DrawFn, mapping: DocumentMetadataMapping) -> dict[str, Any]:
    """Metadata setting some of the mapped keys, and now and then a key the mapping does not
    name: an access rule in another spelling, or plain data."""
    mapped = [*mapping.tenant, *mapping.groups]
    keys = draw(st.lists(st.sampled_from(mapped), max_size=3, unique=True))
    keys += draw(st.lists(access_rule_keys() | _PLAIN_KEYS, max_size=1))
    return {key: draw(_VALUES) for key in keys}


@st.composite
def shapes(draw: st.DrawFn) -> tuple[DocumentMetadataMapping, list[dict[str, Any]]]:
    """A mapping, and the metadata of one to three documents read through it."""
    mapping = draw(mappings())
    return mapping, draw(st.lists(metadata_for(mapping), min_size=1, max_size=3))


def oracle(metadata: dict[str, Any], mapping: DocumentMetadataMapping) -> Rule | None:
    """The rule the metadata restricts a document to, read through `mapping`; None when it
    cannot be enforced as written."""
    return expected_acl(metadata, mapping.tenant, mapping.groups)


_NAMES_SEEN = ["acme", "globex", "staff", "board", "0", "1", "2"]
_PRINCIPALS = st.none() | st.builds(
    Principal,
    tenant=st.none() | st.sampled_from(_NAMES_SEEN),
    groups=st.frozensets(st.sampled_from(_NAMES_SEEN), max_size=5),
)


def admitted_by(rule: Rule | None) -> Principal | None:
    """A principal the rule admits (the anonymous caller when it cannot be enforced)."""
    if rule is None:
        return None
    tenant, groups = rule
    return Principal(tenant=tenant, groups=groups or frozenset())


@given(
    shape=shapes(),
    principal=_PRINCIPALS | st.just("admitted"),
    path=st.sampled_from(PATHS),
)
def test_acl_metadata_shapes_never_show_forbidden_text(
    shape: tuple[DocumentMetadataMapping, list[dict[str, Any]]],
    principal: Principal | str | None,
    path: Path,
) -> None:
    mapping, metadatas = shape
    if principal == "admitted":  # one the first document admits: restricted text is shown too
        principal = admitted_by(oracle(metadatas[0], mapping))
    assert not isinstance(principal, str)
    texts = [f"Passage {i}: marker{i}x{i} " + "filler " * i for i in range(len(metadatas))]
    documents = [
        Document(text, id=f"d{i}", metadata=metadata)
        for i, (text, metadata) in enumerate(zip(texts, metadatas, strict=True))
    ]
    rules = [oracle(metadata, mapping) for metadata in metadatas]
    model = RecordingChatModel()
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget(retrieved=1_000))
    asking = None if path == "compressor" else principal  # the compressor answers for nobody
    if None in rules:
        with pytest.raises(InputError, match=r"^documents\[\d\] metadata key"):
            ask(path, documents, assembler, model, principal=principal, mapping=mapping)
        assert model.received == []
        return
    sent = ask(path, documents, assembler, model, principal=principal, mapping=mapping)
    for i, rule in enumerate(rules):
        assert rule is not None
        assert (f"marker{i}x{i}" in sent) == may_see(asking, rule), (rule, asking)


# --- ids made for documents that have none ---------------------------------------------------


class Events(BaseCallbackHandler):
    """Keeps the payload of every custom event."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.seen.append(data)


@pytest.mark.parametrize("path", ["runnable", "dict", "compressor", "retriever"])
def test_forbidden_document_without_id_is_named_by_its_position_not_its_text(
    path: Path,
    assembler: ContextAssembler,
    model: RecordingChatModel,
    caplog: pytest.LogCaptureFixture,
) -> None:
    documents = [
        Document("Refunds are paid within 5 business days."),
        Document(SECRET, metadata={"groups": ["board"]}),
    ]
    chain = chain_for(path, RunnableLambda(lambda _: documents), assembler, model)
    events = Events()
    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        chain.invoke("How long do refunds take?", config={"callbacks": [events]})
    [report] = events.seen
    assert {"id": "documents[1]", "reason": "forbidden"}.items() <= report["dropped"][0].items()
    logged = [json.dumps(vars(record), default=str) for record in caplog.records]
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    assert all(digest[:8] not in text for text in [json.dumps(report), *logged])
