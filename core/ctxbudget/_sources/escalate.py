"""Whole-document escalation: when retrieval keeps hitting one document, send the document.

Three chunks of one document usually mean the answer spans it; the document read
whole beats three fragments read apart, when it fits. What a loader returns is
permission-checked again, section by section: the document may hold text none of
the retrieved chunks showed, and whether it is sent must not depend on which
chunks the retriever happened to return.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._inputs import Chunk, Principal
from ctxbudget._pack import Fit, Packer, Part
from ctxbudget._report import DropReason
from ctxbudget._sources.permit import AccessPolicy, permitted

__all__ = [
    "DocumentLoader",
    "Escalated",
    "Escalation",
    "SectionLoader",
    "as_document",
    "check_loader",
    "document_permitted",
    "escalate",
    "load_sections",
    "shrink_escalated",
]

SECTION_JOIN = "\n\n"
"""What stands between two sections of a document assembled from its sections."""


@runtime_checkable
class DocumentLoader(Protocol):
    """Loads a whole document by id as one `Chunk`: one ACL stands for all of its text.

    Return None when the document is unknown. The chunk's `tenant` and `groups`
    must admit only principals who may see every part of the document; when its
    sections carry different ACLs, implement `SectionLoader` instead.
    """

    def load(self, document_id: str) -> Chunk | None: ...


@runtime_checkable
class SectionLoader(Protocol):
    """Loads a whole document by id as its sections in reading order, each with its own ACL.

    Return every section of the document, those `principal` may not see included,
    or None. The document is sent (its sections' text joined in order) only when
    `principal` may see every section; a forbidden section's text is never read.
    `principal` is given so a store that filters by ACL can answer None rather than
    fetch what the principal may not see; a list that leaves a section out would pass
    off part of the document as the whole. Preferred over `load` when an object has both.
    """

    def load_sections(
        self, document_id: str, principal: Principal | None
    ) -> Sequence[Chunk] | None: ...


class Escalation(BaseModel):
    """When a document is sent whole in place of its chunks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_chunks: int = Field(default=3, ge=2)
    """Selected chunks from one document that trigger loading it."""
    max_share: float = Field(default=0.7, gt=0, le=1)
    """The document must fit in this share of retrieval's grant; the rest stays for others."""


def check_loader(loader: object) -> DocumentLoader | SectionLoader:
    """`loader` itself, if it is a `DocumentLoader` or a `SectionLoader`; TypeError otherwise."""
    if isinstance(loader, SectionLoader | DocumentLoader):
        return loader
    raise TypeError(
        f"loader must have a load(document_id) -> Chunk | None method (a DocumentLoader) or a "
        f"load_sections(document_id, principal) -> Sequence[Chunk] | None method (a "
        f"SectionLoader); got {type(loader).__name__}"
    )


def load_sections(
    loader: DocumentLoader | SectionLoader, document_id: str, principal: Principal | None
) -> tuple[Chunk, ...] | None:
    """The document's sections in order (one for a `DocumentLoader`), or None when unknown.

    Only types are checked here, and error messages name types and positions, never
    text: the sections are not yet permission-checked.
    """
    if isinstance(loader, SectionLoader):
        sections = loader.load_sections(document_id, principal)
        if sections is None:
            return None
        if isinstance(sections, str | bytes) or not isinstance(sections, Sequence):
            raise TypeError(
                f"SectionLoader.load_sections({document_id!r}, ...) returned "
                f"{type(sections).__name__}; it must return a sequence of Chunk (the "
                "document's sections in order) or None"
            )
        for index, section in enumerate(sections):
            if not isinstance(section, Chunk):
                raise TypeError(
                    f"SectionLoader.load_sections({document_id!r}, ...)[{index}] is a "
                    f"{type(section).__name__}; every section must be a Chunk"
                )
        return tuple(sections) or None
    loaded = loader.load(document_id)
    if loaded is None:
        return None
    if not isinstance(loaded, Chunk):
        raise TypeError(
            f"DocumentLoader.load({document_id!r}) returned {type(loaded).__name__}; it must "
            "return a Chunk (id and document_id set to the document id) or None"
        )
    return (loaded,)


def document_permitted(
    document: Chunk, chunks: Sequence[Chunk], principal: Principal | None, policy: AccessPolicy
) -> bool:
    """Whether `principal` may see a loaded `document` or section, whose `chunks` they were shown.

    Fails closed: if its chunks carried a tenant or groups, the document must carry
    them too, so a loader that drops ACL metadata cannot widen access.
    """
    strict = AccessPolicy(
        require_tenant=policy.require_tenant or any(c.tenant is not None for c in chunks),
        require_groups=policy.require_groups or any(c.groups is not None for c in chunks),
    )
    return permitted(document, principal, strict)


def as_document(document_id: str, sections: Sequence[Chunk]) -> Chunk | None:
    """The document the permitted `sections` make up, as one chunk; None when it has no text.

    One section is the document itself. Several are joined in order, blank ones
    left out; the document takes its title and source from the first section with
    a title (else the first), the newest dates, every parse warning, and the narrowest
    ACL: the sections' one tenant and the groups every section admits. No `metadata`
    and no ingest `tokens` carry over: they describe a section, not the whole.
    """
    if len(sections) == 1:
        document = sections[0].model_copy(update={"id": document_id, "document_id": document_id})
        return document if document.content.strip() else None
    text = [s.content for s in sections if s.content.strip()]
    tenants = {s.tenant for s in sections if s.tenant is not None}
    if not text or len(tenants) > 1:
        return None
    lead = next((s for s in sections if s.title is not None), sections[0])
    groups = [s.groups for s in sections if s.groups is not None]
    return Chunk(
        id=document_id,
        document_id=document_id,
        content=SECTION_JOIN.join(text),
        title=lead.title,
        source=lead.source,
        effective_date=max((s.effective_date for s in sections if s.effective_date), default=None),
        updated_at=max((s.updated_at for s in sections if s.updated_at), key=_aware, default=None),
        parse_warnings=tuple(dict.fromkeys(w for s in sections for w in s.parse_warnings)),
        tenant=next(iter(tenants), None),
        groups=frozenset.intersection(*groups) if groups else None,
    )


def _aware(moment: datetime) -> datetime:
    """`moment` comparable with any other: a naive time is read as UTC, as rendering does."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalated(Fit[Chunk]):
    """A fit that sends one document whole (its first part); `base` is the same grant's
    fit without it, where the document's chunks come back from if it must go."""

    base: Fit[Chunk]


Reject = Callable[[Chunk, list[Chunk]], DropReason | None]


def escalate(
    base: Fit[Chunk],
    grant: int,
    *,
    packer: Packer[Chunk],
    candidates: Sequence[Chunk],
    rank: Mapping[str, int],
    settings: Escalation,
    load: Callable[[str], Chunk | None],
    reject_beside: Callable[[Chunk], Reject],
) -> Escalated | None:
    """`base` with one document sent whole in place of its chunks, or None.

    The document with the most selected chunks (ties: the best-ranked) is tried
    first; it must fit in `max_share` of the grant (bounded before it is counted),
    and the other documents' chunks are packed again, by rank, into what it leaves.
    `load` returns the permitted whole document or None; `reject_beside` gives the
    dedup check that counts the document as kept.
    """
    hits: Counter[str] = Counter()
    best: dict[str, int] = {}
    for part in base.parts:
        hits[part.item.document_id] += 1
        best.setdefault(part.item.document_id, rank[part.item.id])
    eligible = [d for d, n in hits.items() if n >= settings.min_chunks]
    eligible.sort(key=lambda d: (-hits[d], best[d]))
    separator = packer.separator
    room = settings.max_share * grant - packer.framing
    for document_id in eligible:
        document = load(document_id)
        if document is None or packer.bound(document) > room:
            continue
        cost = packer.cost(document)
        if cost > room:
            continue
        others = [c for c in candidates if c.document_id != document_id]
        # The document is a fixed overhead of the rest's packing: the others fit
        # around it, and "oversize" still means larger than the whole grant.
        rest = packer.pack(
            others, grant, reject=reject_beside(document), overhead=_constant(cost + separator)
        )
        pinned = Part(document.id, document, cost)
        if not rest.parts:
            total = cost + packer.framing
            return Escalated(
                (pinned,), total, rest.dropped, rest.unreached, rest.overflow, base=base
            )
        first, *more = rest.parts
        parts = (pinned, replace(first, cost=first.cost + separator), *more)
        return Escalated(parts, rest.cost, rest.dropped, rest.unreached, rest.overflow, base=base)
    return None


def shrink_escalated(packer: Packer[Chunk], fit: Escalated) -> Fit[Chunk] | None:
    """`fit` with less in it: the other documents' chunks go first (they rank below the
    document), then the document itself, whose chunks then come back as packed
    without it, so nothing it covered is lost."""
    if len(fit.parts) > 1 and (smaller := packer.shrink(fit)) is not None:
        return Escalated(
            smaller.parts,
            smaller.cost,
            smaller.dropped,
            smaller.unreached,
            smaller.overflow,
            base=fit.base,
        )
    return _without_document(packer, fit)


def _without_document(packer: Packer[Chunk], fit: Escalated) -> Fit[Chunk]:
    """`fit`'s base (its grant packed without the document), shrunk to cost less than `fit`.

    The document is reported as dropped; the chunks it covered are kept or dropped
    as the base decides, never lost with it.
    """
    document = fit.parts[0]
    fallback = fit.base
    while fallback.cost >= fit.cost and (smaller := packer.shrink(fallback)) is not None:
        fallback = smaller
    gone: tuple[Chunk, DropReason, int | None] = (document.item, "over_budget", document.cost)
    return replace(fallback, dropped=(gone, *fallback.dropped), overflow=True)


def _constant(tokens: int) -> Callable[[list[Chunk]], int]:
    """An overhead that does not depend on what else is kept."""

    def overhead(_: list[Chunk]) -> int:
        return tokens

    return overhead
