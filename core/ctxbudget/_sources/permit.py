"""Permission and tenant filtering: the first step, a where clause, failing closed.

A chunk is visible to a principal only if every ACL it carries admits them: its
tenant equals theirs, and they share at least one of its groups. Missing ACL
metadata is public unless the assembler requires it, in which case it is denied.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ctxbudget._inputs import Chunk, Principal
from ctxbudget._report import Dropped

__all__ = ["AccessPolicy", "permit", "permitted"]


class AccessPolicy(BaseModel):
    """Which ACL metadata a chunk must carry to be shown at all."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    require_tenant: bool = False
    """Deny chunks without a tenant (multi-tenant indexes should set this)."""
    require_groups: bool = False
    """Deny chunks without a group list."""


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
) -> tuple[list[Chunk], list[Dropped]]:
    """The step: chunks `principal` may see, and the rest as `forbidden`, by id only.

    It runs before anything reads a chunk's text, so forbidden text is never looked at.
    """
    kept: list[Chunk] = []
    dropped: list[Dropped] = []
    for chunk in chunks:
        if permitted(chunk, principal, policy):
            kept.append(chunk)
        else:
            dropped.append(Dropped._unvalidated("retrieved", "chunk", chunk.id, "forbidden"))
    return kept, dropped
