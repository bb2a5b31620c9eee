"""Forbidden text never leaves the assembler: not in the prompt, messages, sources, report,
log records or exception messages (docs/sources.md, "Permit").

Every chunk carries a unique canary string in every text field; for each chunk the
principal may not see, its canary must appear nowhere the caller or a log can read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    Chunk,
    ContextAssembler,
    CtxBudgetError,
    Escalation,
    Principal,
    SourceOptions,
    TiktokenTokenizer,
    get_tokenizer,
)
from ctxbudget._sources.permit import AccessPolicy

TENANTS = ["acme", "globex"]
GROUPS = ["sales", "eng", "hr"]

# One tokenizer for the module: hypothesis calls the test body many times.
TOKENIZER: TiktokenTokenizer = get_tokenizer("o200k_base")

# The loaded profile's settings (conftest.py), plus: caplog is cleared by hand per example.
PROPERTY = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def visible(
    tenant: str | None,
    groups: frozenset[str] | None,
    principal: Principal | None,
    policy: AccessPolicy,
) -> bool:
    """The rule, restated independently: every ACL a chunk carries must admit the principal."""
    if tenant is None:
        if policy.require_tenant:
            return False
    elif principal is None or principal.tenant != tenant:
        return False
    if groups is None:
        return not policy.require_groups
    return principal is not None and bool(groups & principal.groups)


def canary(salt: str, i: int) -> str:
    return f"CANARY-{i:03d}-{salt}"


def secret_chunk(
    i: int, salt: str, *, tenant: str | None, groups: frozenset[str] | None, **fields: Any
) -> Chunk:
    """A chunk whose every free-text field carries its canary."""
    mark = canary(salt, i)
    data: dict[str, Any] = {
        "id": f"c{i}",
        "content": f"Passage {i} opens. {mark} " + " ".join(f"p{i}w{j}" for j in range(30)),
        "title": f"Title {i} {mark}",
        "heading_path": ("Section", f"Sub {mark}"),
        "parse_warnings": (f"warning {mark}",),
        "source": f"wiki-{mark}",
        "metadata": {"note": mark},
        "tenant": tenant,
        "groups": groups,
        "score": 1 - i / 100,
    }
    data.update(fields)
    return Chunk(**data)


def exposed(result: Assembled, records: list[logging.LogRecord]) -> str:
    """Everything of one assembly a caller or a log reader can see, as one string."""
    return "\n".join(
        [
            result.text,
            json.dumps(result.messages()),
            repr(result.sources),
            "".join(s.model_dump_json() for s in result.sources),
            result.report.model_dump_json(),
            result.model_dump_json(),
            *(r.getMessage() for r in records),
            *(repr(r.__dict__) for r in records),
        ]
    )


def raised(exc: BaseException, records: list[logging.LogRecord]) -> str:
    return "\n".join(
        [
            str(exc),
            repr(exc),
            repr(exc.args),
            repr(vars(exc)),
            *(r.getMessage() for r in records),
            *(repr(r.__dict__) for r in records),
        ]
    )


# --- the property -------------------------------------------------------------------------

# Weighted towards "acme", the usual principal, so most examples mix visible and forbidden.
tenants = st.sampled_from([None, "acme", "acme", "globex"])
acls = st.tuples(tenants, st.one_of(st.none(), st.frozensets(st.sampled_from(GROUPS))))
known_principals = st.builds(
    Principal,
    tenant=st.sampled_from(TENANTS),
    groups=st.frozensets(st.sampled_from(GROUPS), min_size=1),
)
principals = st.one_of(
    st.builds(Principal, tenant=tenants, groups=st.frozensets(st.sampled_from(GROUPS))), st.none()
)
policies = st.builds(
    AccessPolicy,
    require_tenant=st.sampled_from([False, False, True]),
    require_groups=st.sampled_from([False, False, True]),
)


@dataclass(frozen=True)
class Scenario:
    budget: Budget
    system: str | None


SCENARIOS = {
    # Room for everything: every permitted chunk must be in the prompt.
    "generous": Scenario(
        Budget(
            total=50_000,
            allocations=(
                Allocation("system", priority=0),
                Allocation("question", max=200, priority=0),
                Allocation("retrieved", priority=1),
            ),
        ),
        "Answer from the sources.",
    ),
    # Room for a few: the rest is dropped over budget, never as forbidden.
    "tight": Scenario(
        Budget(
            total=50_000,
            allocations=(
                Allocation("question", max=200, priority=0),
                Allocation("retrieved", max=300, priority=1),
            ),
        ),
        None,
    ),
    # A retrieval floor that a long system prompt leaves no room for: may raise.
    "floor": Scenario(
        Budget(
            total=1_000,
            allocations=(
                Allocation("system", priority=0),
                Allocation("question", max=200, priority=0),
                Allocation("retrieved", min=300, priority=1),
            ),
        ),
        "Answer from the sources. " * 150,
    ),
}


@PROPERTY
@given(
    chunk_acls=st.lists(acls, min_size=1, max_size=10),
    principal=principals,
    policy=policies,
    scenario=st.sampled_from(list(SCENARIOS)),
    salt=st.uuids().map(str),
)
def test_forbidden_canary_never_exposed(
    caplog: pytest.LogCaptureFixture,
    chunk_acls: list[tuple[str | None, frozenset[str] | None]],
    principal: Principal | None,
    policy: AccessPolicy,
    scenario: str,
    salt: str,
) -> None:
    chunks = [
        secret_chunk(i, salt, tenant=tenant, groups=groups)
        for i, (tenant, groups) in enumerate(chunk_acls)
    ]
    forbidden = {c.id for c in chunks if not visible(c.tenant, c.groups, principal, policy)}
    canaries = [canary(salt, int(c.id[1:])) for c in chunks if c.id in forbidden]
    setup = SCENARIOS[scenario]
    assembler = ContextAssembler(
        tokenizer=TOKENIZER, budget=setup.budget, sources=SourceOptions(access=policy)
    )
    caplog.clear()

    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        try:
            result = assembler.assemble(
                system=setup.system, question="What is new?", chunks=chunks, principal=principal
            )
        except CtxBudgetError as exc:
            event("raised")
            seen = raised(exc, caplog.records)
            assert [c for c in canaries if c in seen] == []
            return

    share = "none" if not forbidden else "all" if len(forbidden) == len(chunks) else "some"
    event(f"{scenario}: {share} forbidden")
    seen = exposed(result, caplog.records)
    assert [c for c in canaries if c in seen] == []
    reported = {d.id for d in result.report.dropped if d.reason == "forbidden"}
    assert reported == forbidden
    kept = {s.chunk.id for s in result.sources}
    assert kept.isdisjoint(forbidden)
    if scenario == "generous":
        assert kept == {c.id for c in chunks} - forbidden


@PROPERTY
@given(
    data=st.data(),
    principal=known_principals,
    document_acl=acls,
    policy=policies,
    salt=st.uuids().map(str),
)
def test_escalated_document_canary_exposed_only_when_permitted(
    caplog: pytest.LogCaptureFixture,
    data: st.DataObject,
    principal: Principal,
    document_acl: tuple[str | None, frozenset[str] | None],
    policy: AccessPolicy,
    salt: str,
) -> None:
    # The chunks' ACL admits the principal unless the policy requires what it lacks.
    tenant = data.draw(st.sampled_from([None, principal.tenant]), label="chunk tenant")
    groups = data.draw(
        st.one_of(
            st.none(),
            st.frozensets(st.sampled_from(GROUPS)).map(lambda g: g | {min(principal.groups)}),
        ),
        label="chunk groups",
    )
    chunks = [
        secret_chunk(i, salt, tenant=tenant, groups=groups, document_id="doc", ordinal=i)
        for i in range(3)
    ]
    mark = canary(salt, 999)
    document = secret_chunk(
        999,
        salt,
        id="doc",
        tenant=document_acl[0],
        groups=document_acl[1],
        content=f"Whole document. {mark}\n\n" + "\n\n".join(c.content for c in chunks),
    )
    chunks_visible = visible(tenant, groups, principal, policy)
    # The document must admit the principal by its own ACL, and carry every kind of ACL
    # its chunks carried (a loader that drops ACL metadata must not widen access).
    strict = AccessPolicy(
        require_tenant=policy.require_tenant or tenant is not None,
        require_groups=policy.require_groups or groups is not None,
    )
    document_visible = visible(document_acl[0], document_acl[1], principal, strict)
    assembler = ContextAssembler(
        tokenizer=TOKENIZER,
        budget=SCENARIOS["generous"].budget,
        sources=SourceOptions(access=policy, loader=Loader(document)),
    )
    caplog.clear()

    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        result = assembler.assemble(question="Q?", chunks=chunks, principal=principal)

    event(f"chunks visible: {chunks_visible}, document visible: {document_visible}")
    denied = [(d.kind, d.id) for d in result.report.dropped if d.reason == "forbidden"]
    if not chunks_visible:
        assert result.report.escalated is None
        assert mark not in exposed(result, caplog.records)
    elif document_visible:
        assert result.report.escalated == "doc"
    else:
        assert result.report.escalated is None
        assert denied == [("document", "doc")]
        assert mark not in exposed(result, caplog.records)
        assert [s.chunk.id for s in result.sources] == ["c0", "c1", "c2"]


# --- whole-document escalation, by example ------------------------------------------------


class Loader:
    """A DocumentLoader serving one document and counting loads."""

    def __init__(self, document: Chunk) -> None:
        self.document = document
        self.calls = 0

    def load(self, document_id: str) -> Chunk | None:
        self.calls += 1
        return self.document if document_id == self.document.id else None


ACME = Principal(tenant="acme", groups=frozenset({"sales"}))
SALT = "5f0c2a44-0b7e-4c3e-9a51-5a8f1f0e6b21"
DOCUMENT_CANARY = canary(SALT, 999)


def permitted_parts(**acl: Any) -> list[Chunk]:
    return [secret_chunk(i, SALT, document_id="handbook", ordinal=i, **acl) for i in range(3)]


def loaded(chunks: list[Chunk], **acl: Any) -> Chunk:
    return secret_chunk(
        999,
        SALT,
        id="handbook",
        content=f"Handbook, complete. {DOCUMENT_CANARY}\n\n"
        + "\n\n".join(c.content for c in chunks),
        **acl,
    )


@pytest.mark.parametrize(
    ("chunk_acl", "document_acl"),
    [
        pytest.param(
            {"tenant": "acme", "groups": None},
            {"tenant": "globex", "groups": None},
            id="other-tenant",
        ),
        pytest.param(
            {"tenant": "acme", "groups": frozenset({"sales"})},
            {"tenant": None, "groups": None},
            id="acl-dropped-by-loader",
        ),
        pytest.param(
            {"tenant": "acme", "groups": None},
            {"tenant": None, "groups": None},
            id="tenant-dropped-by-loader",
        ),
        pytest.param(
            {"tenant": None, "groups": frozenset({"sales"})},
            {"tenant": None, "groups": None},
            id="groups-dropped-by-loader",
        ),
        pytest.param(
            {"tenant": "acme", "groups": frozenset({"sales"})},
            {"tenant": "acme", "groups": frozenset({"hr"})},
            id="other-group",
        ),
        pytest.param(
            {"tenant": None, "groups": None},
            {"tenant": "globex", "groups": None},
            id="public-chunks-tenant-document",
        ),
    ],
)
def test_escalation_forbidden_document_never_exposed(
    caplog: pytest.LogCaptureFixture,
    chunk_acl: dict[str, Any],
    document_acl: dict[str, Any],
) -> None:
    chunks = permitted_parts(**chunk_acl)
    loader = Loader(loaded(chunks, **document_acl))
    assembler = ContextAssembler(tokenizer=TOKENIZER, sources=SourceOptions(loader=loader))

    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        result = assembler.assemble(question="Q?", chunks=chunks, principal=ACME)

    assert loader.calls == 1
    assert result.report.escalated is None
    assert [(d.kind, d.id, d.reason) for d in result.report.dropped] == [
        ("document", "handbook", "forbidden")
    ]
    assert DOCUMENT_CANARY not in exposed(result, caplog.records)
    assert [s.chunk.id for s in result.sources] == ["c0", "c1", "c2"]


def test_escalation_permitted_document_is_sent() -> None:
    # The control for the test above: the same document with the chunks' ACL goes in.
    chunks = permitted_parts(tenant="acme", groups=frozenset({"sales"}))
    loader = Loader(loaded(chunks, tenant="acme", groups=frozenset({"sales"})))
    assembler = ContextAssembler(tokenizer=TOKENIZER, sources=SourceOptions(loader=loader))

    result = assembler.assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated == "handbook"
    assert DOCUMENT_CANARY in result.text


def test_escalation_document_holding_a_forbidden_chunk_not_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Three chunks of the handbook are visible, a fourth (HR only) is not. The loaded
    # handbook contains all four; sending it whole would put the HR chunk's text in the
    # prompt after permission filtering kept it out.
    visible_parts = permitted_parts(tenant="acme", groups=frozenset({"sales"}))
    hr_only = secret_chunk(
        3, SALT, document_id="handbook", ordinal=3, tenant="acme", groups=frozenset({"hr"})
    )
    loader = Loader(
        loaded([*visible_parts, hr_only], tenant="acme", groups=frozenset({"sales", "hr"}))
    )
    assembler = ContextAssembler(tokenizer=TOKENIZER, sources=SourceOptions(loader=loader))

    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        result = assembler.assemble(question="Q?", chunks=[*visible_parts, hr_only], principal=ACME)

    assert canary(SALT, 3) not in exposed(result, caplog.records)
    assert result.report.escalated is None


def test_forbidden_chunk_never_in_exception_message(caplog: pytest.LogCaptureFixture) -> None:
    secret = secret_chunk(0, SALT, tenant="globex", groups=None)
    setup = SCENARIOS["floor"]
    public = [secret_chunk(i, SALT, tenant=None, groups=None) for i in range(1, 6)]
    assembler = ContextAssembler(tokenizer=TOKENIZER, budget=setup.budget)

    with (
        caplog.at_level(logging.DEBUG, logger="ctxbudget"),
        pytest.raises(CtxBudgetError, match=r"'retrieved' needs 300 tokens") as caught,
    ):
        assembler.assemble(
            system=setup.system, question="Q?", chunks=[secret, *public], principal=ACME
        )

    assert canary(SALT, 0) not in raised(caught.value, caplog.records)


# --- documents loaded as their sections ---------------------------------------------------


class SectionsLoader:
    """A SectionLoader serving one document's sections and recording who asked."""

    def __init__(self, document_id: str, sections: list[Chunk]) -> None:
        self.document_id = document_id
        self.sections = sections
        self.principals: list[Principal | None] = []

    def load_sections(self, document_id: str, principal: Principal | None) -> list[Chunk] | None:
        self.principals.append(principal)
        return self.sections if document_id == self.document_id else None


def handbook_sections(acls: list[dict[str, Any]]) -> list[Chunk]:
    """The handbook as sections c0, c1, ...; each carries its canary and the given ACL."""
    return [
        secret_chunk(i, SALT, document_id="handbook", ordinal=i, **acl)
        for i, acl in enumerate(acls)
    ]


SALES = {"tenant": "acme", "groups": frozenset({"sales"})}
HR = {"tenant": "acme", "groups": frozenset({"hr"})}


def test_escalation_restricted_section_not_retrieved_never_exposed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Issue #6: the retriever returned the three sections the principal may see, not the
    # HR-only fourth. Sending the handbook whole would put the HR section in the prompt.
    sections = handbook_sections([SALES, SALES, SALES, HR])
    loader = SectionsLoader("handbook", sections)
    assembler = ContextAssembler(tokenizer=TOKENIZER, sources=SourceOptions(loader=loader))

    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        result = assembler.assemble(question="Q?", chunks=sections[:3], principal=ACME)

    assert loader.principals == [ACME]
    assert result.report.escalated is None
    assert canary(SALT, 3) not in exposed(result, caplog.records)
    assert [s.chunk.id for s in result.sources] == ["c0", "c1", "c2"]
    assert [(d.kind, d.id, d.reason) for d in result.report.dropped] == [
        ("document", "handbook", "forbidden")
    ]


def test_escalation_permitted_sections_sent_whole() -> None:
    # The control for the test above: with the fourth section visible, the handbook goes in.
    sections = handbook_sections([SALES, SALES, SALES, SALES])
    assembler = ContextAssembler(
        tokenizer=TOKENIZER, sources=SourceOptions(loader=SectionsLoader("handbook", sections))
    )

    result = assembler.assemble(question="Q?", chunks=sections[:3], principal=ACME)

    assert result.report.escalated == "handbook"
    assert canary(SALT, 3) in result.text


def test_escalation_loader_type_error_never_shows_text() -> None:
    class Leaky:
        def load_sections(self, document_id: str, principal: Principal | None) -> list[Any]:
            return [{"content": DOCUMENT_CANARY}]

    chunks = permitted_parts(tenant="acme", groups=frozenset({"sales"}))
    assembler = ContextAssembler(tokenizer=TOKENIZER, sources=SourceOptions(loader=Leaky()))

    with pytest.raises(
        TypeError, match=r"\[0\] is a dict; every section must be a Chunk"
    ) as caught:
        assembler.assemble(question="Q?", chunks=chunks, principal=ACME)

    assert DOCUMENT_CANARY not in raised(caught.value, [])


@PROPERTY
@given(data=st.data(), principal=known_principals, policy=policies, salt=st.uuids().map(str))
def test_section_canary_exposed_only_when_every_section_permitted(
    caplog: pytest.LogCaptureFixture,
    data: st.DataObject,
    principal: Principal,
    policy: AccessPolicy,
    salt: str,
) -> None:
    # Most sections share an ACL that admits the principal; any may be restricted.
    tenant = data.draw(st.sampled_from([None, principal.tenant]), label="document tenant")
    admitting = st.tuples(
        st.just(tenant),
        st.sampled_from([None, frozenset({min(principal.groups)})])
        if data.draw(st.booleans(), label="groups may be absent")
        else st.frozensets(st.sampled_from(GROUPS)).map(lambda g: g | {min(principal.groups)}),
    )
    section_acls = data.draw(
        st.lists(st.one_of(admitting, admitting, admitting, acls), min_size=2, max_size=5),
        label="section ACLs",
    )
    sections = [
        secret_chunk(i, salt, tenant=t, groups=g, document_id="doc", ordinal=i)
        for i, (t, g) in enumerate(section_acls)
    ]
    # Which sections the retriever returned, as chunks: any subset, in any order.
    returned = data.draw(st.permutations(sections), label="retriever order")
    how_many = st.one_of(st.just(len(returned)), st.integers(0, len(returned)))
    returned = returned[: data.draw(how_many, label="returned")]
    assembler = ContextAssembler(
        tokenizer=TOKENIZER,
        budget=SCENARIOS["generous"].budget,
        sources=SourceOptions(
            access=policy,
            loader=SectionsLoader("doc", sections),
            escalation=Escalation(min_chunks=2),
        ),
    )
    caplog.clear()

    with caplog.at_level(logging.DEBUG, logger="ctxbudget"):
        result = assembler.assemble(question="Q?", chunks=returned, principal=principal)

    # The rule, restated: the document may go whole only if the principal may see every
    # section (carrying each kind of ACL its shown chunks carried) and every chunk returned.
    shown = [c for c in returned if visible(c.tenant, c.groups, principal, policy)]
    strict = AccessPolicy(
        require_tenant=policy.require_tenant or any(c.tenant is not None for c in shown),
        require_groups=policy.require_groups or any(c.groups is not None for c in shown),
    )
    whole_allowed = len(shown) == len(returned) and all(
        visible(s.tenant, s.groups, principal, strict) for s in sections
    )
    escalated = result.report.escalated == "doc"
    restricted_unreturned = any(
        not visible(s.tenant, s.groups, principal, policy) and s not in returned for s in sections
    )
    event(f"escalated: {escalated}; a restricted section not returned: {restricted_unreturned}")
    assert escalated == (whole_allowed and len(shown) >= 2)
    seen = exposed(result, caplog.records)
    readable = {c.id for c in (sections if escalated else shown)}
    hidden = [canary(salt, i) for i, s in enumerate(sections) if s.id not in readable]
    assert [c for c in hidden if c in seen] == []
