"""Permission and tenant filtering (_sources/permit.py): the first pipeline step, failing closed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import (
    Chunk,
    ContextAssembler,
    Dropped,
    Principal,
    SourceOptions,
    TiktokenTokenizer,
)
from ctxbudget._report import records
from ctxbudget._sources.permit import AccessPolicy, permit, permitted
from tests.support.factories import budget_for

OPEN = AccessPolicy()

BUDGET = budget_for("retrieved", 6_000)


def chunk(
    id: str = "c",
    *,
    tenant: str | None = None,
    groups: set[str] | None = None,
    content: str | None = None,
    score: float | None = None,
) -> Chunk:
    return Chunk(
        id=id,
        content=content if content is not None else f"Passage {id} says the sky is blue.",
        tenant=tenant,
        groups=None if groups is None else frozenset(groups),
        score=score,
    )


def dropped(result_dropped: tuple[Dropped, ...], reason: str) -> list[str]:
    return [d.id for d in result_dropped if d.reason == reason]


@pytest.fixture
def assembler(o200k: TiktokenTokenizer) -> ContextAssembler:
    return ContextAssembler(tokenizer=o200k, budget=BUDGET)


# --- permitted: tenants -------------------------------------------------------------------


def test_permitted_tenant_match() -> None:
    assert permitted(chunk(tenant="acme"), Principal(tenant="acme"), OPEN)


def test_permitted_tenant_mismatch_denied() -> None:
    assert not permitted(chunk(tenant="acme"), Principal(tenant="globex"), OPEN)


def test_permitted_no_principal_denied_tenant_scoped_chunk() -> None:
    assert not permitted(chunk(tenant="acme"), None, OPEN)


def test_permitted_principal_without_tenant_denied_tenant_scoped_chunk() -> None:
    assert not permitted(chunk(tenant="acme"), Principal(groups=frozenset({"sales"})), OPEN)


def test_permitted_chunk_without_tenant_public_by_default() -> None:
    assert permitted(chunk(), Principal(tenant="acme"), OPEN)
    assert permitted(chunk(), None, OPEN)


def test_permitted_require_tenant_denies_chunk_without_tenant() -> None:
    policy = AccessPolicy(require_tenant=True)

    assert not permitted(chunk(), Principal(tenant="acme"), policy)
    assert not permitted(chunk(), None, policy)


def test_permitted_require_tenant_admits_matching_tenant() -> None:
    policy = AccessPolicy(require_tenant=True)

    assert permitted(chunk(tenant="acme"), Principal(tenant="acme"), policy)


# --- permitted: groups --------------------------------------------------------------------


def test_permitted_groups_intersect() -> None:
    assert permitted(
        chunk(groups={"sales", "legal"}), Principal(groups=frozenset({"legal", "hr"})), OPEN
    )


def test_permitted_groups_disjoint_denied() -> None:
    assert not permitted(chunk(groups={"sales"}), Principal(groups=frozenset({"hr"})), OPEN)


def test_permitted_groups_no_principal_denied() -> None:
    assert not permitted(chunk(groups={"sales"}), None, OPEN)


def test_permitted_empty_chunk_groups_denied_to_everyone() -> None:
    empty = chunk(groups=set())

    assert not permitted(empty, Principal(groups=frozenset({"sales", "admin"})), OPEN)
    assert not permitted(empty, Principal(), OPEN)
    assert not permitted(empty, None, OPEN)


def test_permitted_groups_none_public_by_default() -> None:
    assert permitted(chunk(groups=None), Principal(groups=frozenset({"sales"})), OPEN)
    assert permitted(chunk(groups=None), None, OPEN)


def test_permitted_require_groups_denies_chunk_without_groups() -> None:
    policy = AccessPolicy(require_groups=True)

    assert not permitted(chunk(groups=None), Principal(groups=frozenset({"sales"})), policy)
    assert not permitted(chunk(groups=None), None, policy)


def test_permitted_tenant_and_groups_both_must_admit() -> None:
    scoped = chunk(tenant="acme", groups={"sales"})

    assert permitted(scoped, Principal(tenant="acme", groups=frozenset({"sales"})), OPEN)
    assert not permitted(scoped, Principal(tenant="acme", groups=frozenset({"hr"})), OPEN)
    assert not permitted(scoped, Principal(tenant="globex", groups=frozenset({"sales"})), OPEN)


# --- AccessPolicy -------------------------------------------------------------------------


def test_access_policy_defaults_require_nothing() -> None:
    assert OPEN.require_tenant is False
    assert OPEN.require_groups is False


def test_access_policy_unknown_option_rejected() -> None:
    with pytest.raises(
        ValidationError, match=r"require_tennant\n\s+Extra inputs are not permitted"
    ):
        AccessPolicy(require_tennant=True)  # type: ignore[call-arg]


def test_access_policy_is_frozen() -> None:
    with pytest.raises(ValidationError, match="Instance is frozen"):
        OPEN.require_tenant = True


# --- end to end ---------------------------------------------------------------------------


def test_assemble_forbidden_chunk_reported_by_id_only(assembler: ContextAssembler) -> None:
    secret = chunk("secret", tenant="globex", content="Globex merger closes on Friday.")
    public = chunk("public")

    result = assembler.assemble(
        question="What is new?", chunks=[secret, public], principal=Principal(tenant="acme")
    )

    assert Dropped(claimant="retrieved", kind="chunk", id="secret", reason="forbidden") in (
        result.report.dropped
    )
    assert "Globex merger" not in result.report.model_dump_json()


def test_assemble_forbidden_chunk_absent_from_text_and_sources(
    assembler: ContextAssembler,
) -> None:
    secret = chunk("secret", tenant="globex", content="Globex merger closes on Friday.")
    public = chunk("public")

    result = assembler.assemble(
        question="What is new?", chunks=[secret, public], principal=Principal(tenant="acme")
    )

    assert "Globex merger" not in result.text
    assert [s.chunk.id for s in result.sources] == ["public"]


def test_assemble_no_principal_sees_only_unrestricted(assembler: ContextAssembler) -> None:
    chunks = [chunk("a", tenant="acme"), chunk("b", groups={"sales"}), chunk("c")]

    result = assembler.assemble(question="What is new?", chunks=chunks)

    assert [s.chunk.id for s in result.sources] == ["c"]
    assert dropped(result.report.dropped, "forbidden") == ["a", "b"]


def test_assemble_require_tenant_policy_applied(o200k: TiktokenTokenizer) -> None:
    assembler = ContextAssembler(
        tokenizer=o200k,
        budget=BUDGET,
        sources=SourceOptions(access=AccessPolicy(require_tenant=True)),
    )

    result = assembler.assemble(
        question="What is new?",
        chunks=[chunk("untagged"), chunk("tagged", tenant="acme")],
        principal=Principal(tenant="acme"),
    )

    assert [s.chunk.id for s in result.sources] == ["tagged"]
    assert dropped(result.report.dropped, "forbidden") == ["untagged"]


def test_assemble_permission_checked_before_relevance_floor(o200k: TiktokenTokenizer) -> None:
    assembler = ContextAssembler(
        tokenizer=o200k, budget=BUDGET, sources=SourceOptions(min_relevance=0.5)
    )

    result = assembler.assemble(
        question="What is new?",
        chunks=[chunk("low-secret", tenant="globex", score=0.1), chunk("ok", score=0.9)],
        principal=Principal(tenant="acme"),
    )

    assert dropped(result.report.dropped, "forbidden") == ["low-secret"]
    assert dropped(result.report.dropped, "below_floor") == []


def test_assemble_permission_checked_before_dedup(assembler: ContextAssembler) -> None:
    text = "The quarterly revenue grew by twelve percent in the northern region last year."
    forbidden_copy = chunk("secret-copy", tenant="globex", content=text, score=0.99)
    allowed = chunk("allowed", tenant="acme", content=text, score=0.5)

    result = assembler.assemble(
        question="Revenue?", chunks=[forbidden_copy, allowed], principal=Principal(tenant="acme")
    )

    assert [s.chunk.id for s in result.sources] == ["allowed"]
    assert dropped(result.report.dropped, "forbidden") == ["secret-copy"]
    assert dropped(result.report.dropped, "duplicate") == []


def test_assemble_forbidden_chunk_costs_no_tokens(assembler: ContextAssembler) -> None:
    secret = chunk("secret", tenant="globex")
    public = chunk("public")
    principal = Principal(tenant="acme")

    with_secret = assembler.assemble(question="Q?", chunks=[secret, public], principal=principal)
    without = assembler.assemble(question="Q?", chunks=[public], principal=principal)

    assert with_secret.text == without.text
    assert with_secret.report.sizes == without.report.sizes
    forbidden = [d for d in with_secret.report.dropped if d.reason == "forbidden"]
    assert [d.tokens for d in forbidden] == [None]


def test_permit_step_keeps_the_visible_and_reports_the_rest_by_id() -> None:
    chunks = [
        Chunk(id="public", content="a"),
        Chunk(id="other-tenant", content="b", tenant="globex"),
        Chunk(id="sales", content="c", tenant="acme", groups=frozenset({"sales"})),
    ]
    kept, dropped = permit(chunks, Principal(tenant="acme"), AccessPolicy())
    assert [c.id for c in kept] == ["public"]
    assert [(d.id, d.reason, d.tokens) for d in records(dropped)] == [
        ("other-tenant", "forbidden", None),
        ("sales", "forbidden", None),
    ]


def test_permit_step_without_acl_metadata_keeps_every_chunk_as_given() -> None:
    chunks = [chunk("a"), chunk("b")]
    kept, dropped = permit(chunks, Principal(tenant="acme"), OPEN)
    assert kept == chunks
    assert kept is not chunks
    assert dropped == []


tenants = st.none() | st.sampled_from(["acme", "globex"])
group_sets = st.none() | st.frozensets(st.sampled_from(["sales", "hr"]), max_size=2)


@given(
    acl=st.lists(st.tuples(tenants, group_sets), max_size=6),
    principal=st.none()
    | st.builds(Principal, tenant=tenants, groups=st.frozensets(st.sampled_from(["sales", "hr"]))),
    policy=st.builds(AccessPolicy, require_tenant=st.booleans(), require_groups=st.booleans()),
)
def test_permit_step_keeps_exactly_the_chunks_permitted_one_by_one(
    acl: list[tuple[str | None, frozenset[str] | None]],
    principal: Principal | None,
    policy: AccessPolicy,
) -> None:
    chunks = [
        Chunk(id=f"c{i}", content="text", tenant=tenant, groups=groups)
        for i, (tenant, groups) in enumerate(acl)
    ]
    kept, dropped = permit(chunks, principal, policy)
    assert kept == [c for c in chunks if permitted(c, principal, policy)]
    assert [d.id for d in records(dropped)] == [
        c.id for c in chunks if not permitted(c, principal, policy)
    ]
    assert {d.reason for d in records(dropped)} <= {"forbidden"}
