"""Whole-document escalation: when retrieval keeps hitting one document, send the document.

Three chunks of one document usually mean the answer spans it; the document read
whole beats three fragments read apart, when it fits. The loaded document is
permission-checked again: it may hold text its chunks did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget.inputs import Chunk, Principal
from ctxbudget.permit import AccessPolicy, permitted

__all__ = ["DocumentLoader", "Escalation", "document_permitted"]


@runtime_checkable
class DocumentLoader(Protocol):
    """Loads a whole document by id, as a `Chunk` whose `id` and `document_id` are the document's.

    The returned chunk must carry the document's ACL (`tenant`, `groups`); return
    None when the document is unknown.
    """

    def load(self, document_id: str) -> Chunk | None: ...


class Escalation(BaseModel):
    """When a document is sent whole in place of its chunks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_chunks: int = Field(default=3, ge=2)
    """Selected chunks from one document that trigger loading it."""
    max_share: float = Field(default=0.7, gt=0, le=1)
    """The document must fit in this share of retrieval's grant; the rest stays for others."""


def document_permitted(
    document: Chunk, chunks: Sequence[Chunk], principal: Principal | None, policy: AccessPolicy
) -> bool:
    """Whether `principal` may see the loaded `document` whose `chunks` they were shown.

    Fails closed: if its chunks carried a tenant or groups, the document must carry
    them too, so a loader that drops ACL metadata cannot widen access.
    """
    strict = AccessPolicy(
        require_tenant=policy.require_tenant or any(c.tenant is not None for c in chunks),
        require_groups=policy.require_groups or any(c.groups is not None for c in chunks),
    )
    return permitted(document, principal, strict)
