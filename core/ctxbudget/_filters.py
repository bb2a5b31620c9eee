"""The permit rule as a filter a vector store runs before retrieval, so top_k is spent on
what the principal may see (docs/permissions.md,
"Permission filters before retrieval").

`permitted` (the permit step) is the one rule; this module restates its branches over
metadata keys, in two shapes every store can take:

- `permit_filter`: a small expression over the keys `acl_from_metadata` reads
  (`AllOf`, `AnyOf`, `Missing`, `Matches`), for stores whose filter language nests and can
  test that a key is absent. `filter_admits` evaluates it; `fold_filter` is the hook that
  translates it.
- `access_tokens` / `permit_tokens`: the ACL written at ingest as one list of tokens
  (`ACCESS_KEY`), so the filter is one "any of these values" test, exact in any store that
  keeps a list of strings (LlamaIndex's SimpleVectorStore, which neither nests nor tells an
  empty list from a missing key, included).

A filter never replaces the permit: the retrieved chunks still pass through it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Final, TypeVar

from ctxbudget._errors import InputError
from ctxbudget._inputs import Principal
from ctxbudget._sources.permit import AccessPolicy, check_principal

__all__ = [
    "ACCESS_KEY",
    "AllOf",
    "AnyOf",
    "Matches",
    "Missing",
    "PermitFilter",
    "access_tokens",
    "filter_admits",
    "fold_filter",
    "permit_filter",
    "permit_tokens",
]

ACCESS_KEY: Final = "ctxbudget_access"
"""The metadata key ingest writes `access_tokens` under."""

_NOBODY: Final = "[]"
"""The token of a chunk no principal may see (empty groups): stores that refuse an empty
list still get one value, and no principal's tokens include it."""
_NOTHING: Final = "null"
"""The token of a principal who may see nothing: no chunk's tokens include it, and a store
that refuses an empty list of values still gets one."""


@dataclass(frozen=True)
class Missing:
    """The key is absent, or holds None (which carries no rule, as `acl_from_metadata` reads it)."""

    key: str


@dataclass(frozen=True)
class Matches:
    """The key holds one of `values`, or a list holding one of them. A name is given as the
    stored forms it may take: the str, and its int when it is a canonical int id."""

    key: str
    values: tuple[str | int, ...]


@dataclass(frozen=True)
class AllOf:
    """Every part holds; no parts: always true."""

    parts: tuple[PermitFilter, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one part holds; no parts: never true."""

    parts: tuple[PermitFilter, ...]


PermitFilter = AllOf | AnyOf | Missing | Matches
"""A permit rule over metadata keys, as `permit_filter` builds it."""


def _forms(name: str) -> tuple[str | int, ...]:
    """The values a stored `name` may take: `acl_from_metadata` reads int ids as their str."""
    if name.isascii() and name.isdigit() and str(int(name)) == name:
        return (name, int(name))
    return (name,)


def _field(
    keys: Sequence[str], names: frozenset[str], *, required: bool, field: str
) -> PermitFilter:
    """The branch of `permitted` for one ACL field: every key unset (allowed unless
    required), or every key that is set holding one of `names` (and at least one set)."""
    if isinstance(keys, str):
        raise InputError(f"{field}_keys= is a sequence of metadata keys: use ({keys!r},)")
    values = tuple(form for name in sorted(names) for form in _forms(name))
    if not values:
        return AnyOf(()) if required else AllOf(tuple(Missing(key) for key in keys))
    # Keys that disagree are an error in `acl_from_metadata`, so every key set must match.
    each = AllOf(tuple(AnyOf((Missing(key), Matches(key, values))) for key in keys))
    if required:
        return AllOf((AnyOf(tuple(Matches(key, values) for key in keys)), each))
    return each


def permit_filter(
    principal: Principal | None,
    *,
    tenant_keys: Sequence[str] = ("tenant",),
    groups_keys: Sequence[str] = ("groups",),
    policy: AccessPolicy | None = None,
) -> PermitFilter:
    """The permit rule for `principal` over the metadata keys mapped to tenant and groups.

    For metadata that `acl_from_metadata` reads without error, `filter_admits` says what
    `permitted` says of the chunk it becomes. `InputError` when the policy requires a
    principal and there is none.

    >>> filter_admits(permit_filter(Principal(tenant="acme")), {"tenant": "globex"})
    False
    """
    policy = AccessPolicy() if policy is None else policy
    principal = check_principal(principal, policy)
    tenant = frozenset() if principal is None or principal.tenant is None else {principal.tenant}
    groups = frozenset() if principal is None else principal.groups
    return AllOf(
        (
            _field(tenant_keys, frozenset(tenant), required=policy.require_tenant, field="tenant"),
            _field(groups_keys, groups, required=policy.require_groups, field="groups"),
        )
    )


def _matches(stored: object, values: tuple[str | int, ...]) -> bool:
    items = stored if isinstance(stored, list | tuple | set | frozenset) else (stored,)
    names = {str(value) for value in values}
    return any(
        (isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool)))
        and str(item) in names
        for item in items
    )


def filter_admits(rule: PermitFilter, metadata: Mapping[str, Any]) -> bool:
    """Whether `metadata` passes `rule`: the reference meaning every translation keeps (or
    narrows, where a store cannot say as much)."""
    if isinstance(rule, Missing):
        return metadata.get(rule.key) is None
    if isinstance(rule, Matches):
        return metadata.get(rule.key) is not None and _matches(metadata[rule.key], rule.values)
    if isinstance(rule, AllOf):
        return all(filter_admits(part, metadata) for part in rule.parts)
    return any(filter_admits(part, metadata) for part in rule.parts)


_T = TypeVar("_T")


def fold_filter(
    rule: PermitFilter,
    *,
    missing: Callable[[str], _T],
    matches: Callable[[str, tuple[str | int, ...]], _T],
    all_of: Callable[[list[_T]], _T],
    any_of: Callable[[list[_T]], _T],
) -> _T:
    """`rule` in another filter language: each leaf through `missing` or `matches`, each
    combination through `all_of` or `any_of` (given its parts already translated). The hook
    for a store ctxbudget has no builder for."""

    def go(part: PermitFilter) -> _T:
        if isinstance(part, Missing):
            return missing(part.key)
        if isinstance(part, Matches):
            return matches(part.key, part.values)
        combine = all_of if isinstance(part, AllOf) else any_of
        return combine([go(child) for child in part.parts])

    return go(rule)


def _token(tenant: str | None, group: str | None) -> str:
    return json.dumps([tenant, group], ensure_ascii=False)


def access_tokens(tenant: str | None, groups: frozenset[str] | None) -> list[str]:
    """What ingest writes under `ACCESS_KEY` for a chunk's ACL: one token per group it admits
    (paired with its tenant), sorted; never empty."""
    if groups is None:
        return [_token(tenant, None)]
    return [_token(tenant, group) for group in sorted(groups)] or [_NOBODY]


def permit_tokens(principal: Principal | None, *, policy: AccessPolicy | None = None) -> list[str]:
    """The tokens a chunk's `access_tokens` must share one of for `principal` to see it, by
    the branches of `permitted` (a chunk's tenant is theirs or unset, unless required; one of
    its groups is theirs, or it has none, unless required); never empty."""
    policy = AccessPolicy() if policy is None else policy
    principal = check_principal(principal, policy)
    tenants: list[str | None] = [] if policy.require_tenant else [None]
    groups: list[str | None] = [] if policy.require_groups else [None]
    if principal is not None:
        tenants += [] if principal.tenant is None else [principal.tenant]
        groups += sorted(principal.groups)
    tokens = sorted(_token(tenant, group) for tenant, group in product(tenants, groups))
    return tokens or [_NOTHING]
