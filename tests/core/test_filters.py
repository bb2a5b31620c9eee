"""The permit rule as a pre-retrieval filter (_filters.py): never wider than the permit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from ctxbudget import (
    AccessPolicy,
    AllOf,
    AnyOf,
    InputError,
    Matches,
    Missing,
    PermitFilter,
    Principal,
    access_tokens,
    filter_admits,
    fold_filter,
    permit_filter,
    permit_tokens,
)
from ctxbudget._sources.permit import permitted
from tests.support.permit_strategies import (
    GROUPS_KEYS,
    TENANT_KEYS,
    chunk_of,
    metadatas,
    policies,
    principals,
)


@given(metadatas(), principals, policies)
def test_permit_filter_admits_what_permit_admits_for_any_metadata(
    metadata: dict[str, Any], principal: Principal | None, policy: AccessPolicy
) -> None:
    chunk = chunk_of(metadata)
    rule = permit_filter(principal, tenant_keys=TENANT_KEYS, groups_keys=GROUPS_KEYS, policy=policy)
    assert filter_admits(rule, metadata) == permitted(chunk, principal, policy)


@given(metadatas(), principals, policies)
def test_permit_tokens_share_one_with_access_tokens_exactly_when_permit_admits(
    metadata: dict[str, Any], principal: Principal | None, policy: AccessPolicy
) -> None:
    chunk = chunk_of(metadata)
    shared = set(access_tokens(chunk.tenant, chunk.groups)) & set(
        permit_tokens(principal, policy=policy)
    )
    assert bool(shared) == permitted(chunk, principal, policy)


def test_access_tokens_of_empty_groups_are_one_token_no_principal_holds() -> None:
    tokens = access_tokens("acme", frozenset())
    assert len(tokens) == 1
    assert not set(tokens) & set(permit_tokens(Principal(tenant="acme", groups=frozenset({"hr"}))))


def test_permit_filter_matches_canonical_int_ids_in_both_forms() -> None:
    rule = permit_filter(Principal(tenant="7"), groups_keys=())
    assert filter_admits(rule, {"tenant": 7})
    assert Matches("tenant", ("7", 7)) in fold_filter(
        rule,
        missing=lambda key: [],
        matches=lambda key, values: [Matches(key, values)],
        all_of=lambda parts: [leaf for part in parts for leaf in part],
        any_of=lambda parts: [leaf for part in parts for leaf in part],
    )


def test_permit_filter_without_principal_admits_only_unrestricted_metadata() -> None:
    rule = permit_filter(None)
    assert filter_admits(rule, {"title": "Refunds", "tenant": None})
    assert not filter_admits(rule, {"tenant": "acme"})
    assert not filter_admits(rule, {"groups": []})


def test_permit_filter_refuses_no_principal_when_the_policy_requires_one() -> None:
    with pytest.raises(InputError, match="requires one"):
        permit_filter(None, policy=AccessPolicy(require_principal=True))


def test_permit_tokens_refuse_no_principal_when_the_policy_requires_one() -> None:
    with pytest.raises(InputError, match="requires one"):
        permit_tokens(None, policy=AccessPolicy(require_principal=True))


def test_permit_filter_refuses_a_str_of_keys() -> None:
    with pytest.raises(InputError, match=r"tenant_keys= is a sequence of metadata keys"):
        permit_filter(None, tenant_keys="tenant")


def test_permit_filter_under_required_tenant_without_principal_tenant_admits_nothing() -> None:
    rule = permit_filter(
        Principal(groups=frozenset({"hr"})), policy=AccessPolicy(require_tenant=True)
    )
    assert isinstance(rule, AllOf)
    assert rule.parts[0] == AnyOf(())


def test_fold_filter_rebuilds_the_expression_it_folds() -> None:
    rule = permit_filter(Principal(tenant="acme", groups=frozenset({"hr"})))

    def all_of(parts: list[PermitFilter]) -> PermitFilter:
        return AllOf(tuple(parts))

    def any_of(parts: list[PermitFilter]) -> PermitFilter:
        return AnyOf(tuple(parts))

    rebuilt = fold_filter(rule, missing=Missing, matches=Matches, all_of=all_of, any_of=any_of)
    assert rebuilt == rule
