"""Permission and tenant filtering: the first step, a where clause, failing closed.

A chunk is visible to a principal only if every ACL it carries admits them: its
tenant equals theirs, and they share at least one of its groups. Missing ACL
metadata is public unless the assembler requires it, in which case it is denied.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ctxbudget._errors import InputError
from ctxbudget._inputs import Chunk, Principal
from ctxbudget._report import Dropped, DropRun

__all__ = ["AccessPolicy", "check_principal", "permit", "permitted"]


class AccessPolicy(BaseModel):
    """Which ACL metadata a chunk must carry to be shown at all."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    require_tenant: bool = False
    """Deny chunks without a tenant (multi-tenant indexes should set this)."""
    require_groups: bool = False
    """Deny chunks without a group list."""
    require_principal: bool = False
    """Refuse a request that names no principal, instead of showing it unrestricted chunks
    only: for apps where every request has a known user, so a lost one is a bug."""


def check_principal(principal: object, policy: AccessPolicy) -> Principal | None:
    """`principal` itself when it is a `Principal` or None (and the policy allows None);
    `InputError` otherwise."""
    if principal is not None and not isinstance(principal, Principal):
        raise InputError(
            f"principal must be a ctxbudget.Principal, but got {type(principal).__name__}"
        )
    if principal is None and policy.require_principal:
        raise InputError(
            "no principal was given, and the access policy requires one "
            "(AccessPolicy(require_principal=True)): pass principal=Principal(...) for the "
            "user the request is for"
        )
    return principal


def permitted(chunk: Chunk, principal: Principal | None, policy: AccessPolicy) -> bool:
    """Whether `principal` may see `chunk`. No principal sees only unrestricted chunks."""
    if chunk.tenant is None:
        if policy.require_tenant:
            return False
    elif principal is None or principal.tenant != chunk.tenant:
        return False
    if chunk.groups is None:
        return not policy.require_groups
    return principal is not None and not principal.groups.isdisjoint(chunk.groups)


def permit(
    chunks: Sequence[Chunk], principal: Principal | None, policy: AccessPolicy
) -> tuple[list[Chunk], list[Dropped | DropRun]]:
    """The step: chunks `principal` may see, and the rest as `forbidden`, by id only.

    It runs before anything reads a chunk's text, so forbidden text is never looked at.
    """
    # Most corpora carry no ACL metadata and most policies require none; then `permitted`
    # admits every chunk whoever asks, and one pass that finds no restricted chunk decides.
    if not (policy.require_tenant or policy.require_groups) and not [
        c for c in chunks if c.tenant is not None or c.groups is not None
    ]:
        return list(chunks), []
    kept: list[Chunk] = []
    forbidden: list[str] = []
    for chunk in chunks:
        if permitted(chunk, principal, policy):
            kept.append(chunk)
        else:
            forbidden.append(chunk.id)
    return kept, [DropRun("retrieved", "chunk", "forbidden", forbidden)] if forbidden else []
