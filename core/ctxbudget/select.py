"""The retrieved claimant: whole chunks by rank until the allocation is full, then arranged.

Candidates arrive permitted, above the relevance floor, and ranked. The walk is
lazy: a candidate is deduplicated against what is already kept, bounded without
tokenizing when it cannot fit, and neutralised and counted only when it might.
What is kept is decided by rank; `order.arrange` only decides where it stands.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ctxbudget._claims import ListClaim
from ctxbudget._fit import Fit, Part
from ctxbudget.budget import Allocation
from ctxbudget.conflicts import ConflictPolicy, conflict_instruction, dates_differ
from ctxbudget.dedup import Dedup, Deduplicator
from ctxbudget.escalate import DocumentLoader, Escalation, document_permitted
from ctxbudget.fence import datamark, fence_frame, fence_notice, neutralise
from ctxbudget.inputs import Chunk, Principal
from ctxbudget.order import Order, arrange
from ctxbudget.permit import AccessPolicy
from ctxbudget.render import RenderOptions, render_source
from ctxbudget.report import Dropped, DropReason
from ctxbudget.tokens import TokenCounter

__all__ = ["RetrievedClaim", "SourceSettings", "rank"]


def rank(chunks: Sequence[Chunk]) -> list[Chunk]:
    """Best first: rerank score, then retriever score, then the order given.

    A chunk without a rerank score ranks after every chunk with one.
    """
    order = {id(c): i for i, c in enumerate(chunks)}
    return sorted(
        chunks,
        key=lambda c: (
            c.rerank_score is None,
            -(c.rerank_score or 0.0),
            c.score is None,
            -(c.score or 0.0),
            order[id(c)],
        ),
    )


@dataclass(frozen=True)
class SourceSettings:
    """Everything about how retrieved sources are chosen and shown, for one request."""

    render: RenderOptions
    order: Order
    dedup: Dedup
    conflict_policy: ConflictPolicy | None
    datamark: bool
    access: AccessPolicy
    principal: Principal | None
    loader: DocumentLoader | None
    escalation: Escalation
    withheld: frozenset[str] = frozenset()
    """Documents with a chunk this principal may not see: never sent whole."""


class RetrievedClaim(ListClaim[Chunk]):
    """Ranked chunks packed whole into the fence; may escalate to one whole document."""

    def __init__(
        self,
        allocation: Allocation,
        ranked: Sequence[Chunk],
        *,
        counter: TokenCounter,
        settings: SourceSettings,
    ) -> None:
        self.settings = settings
        self._rank = {c.id: i for i, c in enumerate(ranked)}
        self._shown: dict[tuple[str, bool], str] = {}
        self._dedup = Deduplicator(settings.dedup)
        self._documents: dict[str, Chunk | None] = {}
        self._denied: dict[str, Dropped] = {}
        # Costs are upper bounds: every header costed with the widest number and, when
        # a conflict policy is set, with its effective date; the exact count comes last.
        widest = max(len(ranked), 1)
        upper = replace(settings.render, effective_dates=settings.conflict_policy is not None)

        def cost(chunk: Chunk) -> int:
            content = self.content(chunk)
            if chunk.tokens is not None and content is chunk.content:
                return counter.count(render_source(widest, chunk, "", upper)) + chunk.tokens
            return counter.count(render_source(widest, chunk, content, upper))

        def bound(chunk: Chunk) -> int:
            # Neutralising can shorten the text (hidden tag characters go), so an
            # ingest count bounds it only while the text is untouched.
            content = self.content(chunk)
            if chunk.tokens is not None and content is chunk.content:
                return chunk.tokens
            return counter.lower_bound(content)

        super().__init__(
            allocation,
            ranked,
            counter=counter,
            frame=fence_frame(self._notice(conflict=settings.conflict_policy is not None)),
            kind="chunk",
            key=lambda c: c.id,
            text=lambda c: render_source(widest, c, self.content(c), upper),
            cost=cost,
            bound=bound,
            kind_of=lambda c: "document" if self.is_document(c) else "chunk",
        )

    def content(self, chunk: Chunk) -> str:
        """The chunk's text as it goes into the fence: neutralised, datamarked if asked.

        Returns the chunk's own string object when nothing changed, so an ingest-time
        token count stays valid exactly when the text is untouched.
        """
        key = (chunk.id, self.is_document(chunk))
        cached = self._shown.get(key)
        if cached is None:
            cached = neutralise(chunk.content, fmt=self.settings.render.fmt)
            if self.settings.datamark:
                cached = datamark(cached)
            self._shown[key] = cached
        return cached

    def _notice(self, *, conflict: bool) -> str:
        notice = fence_notice(datamarked=self.settings.datamark)
        policy = self.settings.conflict_policy
        if conflict and policy is not None:
            notice += " " + conflict_instruction(policy)
        return notice

    def _reject(self, candidate: Chunk, kept: list[Chunk]) -> DropReason | None:
        return "duplicate" if self._dedup.duplicates(candidate, kept) is not None else None

    def _rejecting_beside(
        self, document: Chunk
    ) -> Callable[[Chunk, list[Chunk]], DropReason | None]:
        """A dedup check that also counts `document` as kept."""

        def reject(candidate: Chunk, kept: list[Chunk]) -> DropReason | None:
            return self._reject(candidate, [document, *kept])

        return reject

    def fit(self, grant: int) -> Fit[Chunk]:
        base = self.packer.pack(self.items, grant, reject=self._reject)
        if self.settings.loader is None:
            return base
        return self._escalate(base, grant) or base

    def _escalate(self, base: Fit[Chunk], grant: int) -> Fit[Chunk] | None:
        """`base` with one document sent whole in place of its chunks, or None.

        The document with the most selected chunks (ties: the best-ranked) is tried
        first; it must fit in `max_share` of the grant, and the other documents'
        chunks are packed again, by rank, into what it leaves.
        """
        hits: Counter[str] = Counter()
        best: dict[str, int] = {}
        for part in base.parts:
            hits[part.item.document_id] += 1
            best.setdefault(part.item.document_id, self._rank[part.item.id])
        eligible = [d for d, n in hits.items() if n >= self.settings.escalation.min_chunks]
        eligible.sort(key=lambda d: (-hits[d], best[d]))
        separator = self.packer.separator
        for document_id in eligible:
            document = self._load(document_id)
            if document is None:
                continue
            cost = self.packer.cost(document)
            if cost + self.packer.framing > self.settings.escalation.max_share * grant:
                continue
            others = [c for c in self.items if c.document_id != document_id]
            # The document is a fixed overhead of the rest's packing: the others fit
            # around it, and "oversize" still means larger than the whole grant.
            rest = self.packer.pack(
                others,
                grant,
                reject=self._rejecting_beside(document),
                overhead=_constant(cost + separator),
            )
            pinned = Part(document.id, document, cost)
            if not rest.parts:
                total = cost + self.packer.framing
                return Fit((pinned,), total, rest.dropped, rest.unreached, rest.overflow)
            first, *more = rest.parts
            parts = (pinned, replace(first, cost=first.cost + separator), *more)
            return Fit(parts, rest.cost, rest.dropped, rest.unreached, rest.overflow)
        return None

    def _load(self, document_id: str) -> Chunk | None:
        if document_id in self._documents:
            return self._documents[document_id]
        loader = self.settings.loader
        loaded = loader.load(document_id) if loader is not None else None
        if loaded is not None and not isinstance(loaded, Chunk):
            raise TypeError(
                f"DocumentLoader.load({document_id!r}) returned {type(loaded).__name__}; it must "
                "return a Chunk (id and document_id set to the document id) or None"
            )
        if loaded is not None:
            shown = [c for c in self.items if c.document_id == document_id]
            # The whole document holds every chunk of it, the withheld ones too.
            if document_id in self.settings.withheld or not document_permitted(
                loaded, shown, self.settings.principal, self.settings.access
            ):
                self._denied[document_id] = Dropped.trusted(
                    "retrieved", "document", document_id, "forbidden"
                )
                loaded = None
            elif not loaded.content.strip():
                loaded = None
            else:
                loaded = loaded.model_copy(update={"id": document_id, "document_id": document_id})
        self._documents[document_id] = loaded
        return loaded

    def is_document(self, chunk: Chunk) -> bool:
        """Whether `chunk` is an escalated whole document rather than a retrieved chunk."""
        return chunk is self._documents.get(chunk.document_id)

    def escalated(self, fit: Fit[Chunk]) -> str | None:
        """The id of the document sent whole in `fit`, if any."""
        return next((p.item.id for p in fit.parts if self.is_document(p.item)), None)

    def covered(self, document: Chunk) -> tuple[str, ...]:
        """Ids of the candidate chunks an escalated `document` contains."""
        return tuple(c.id for c in self.items if c.document_id == document.id)

    def sources(self, fit: Fit[Chunk]) -> list[Chunk]:
        """Kept chunks (and an escalated document) in prompt order; the n-th is source [n]."""
        kept = sorted((p.item for p in fit.parts), key=self._rank_of)
        return arrange(kept, self.settings.order)

    def _rank_of(self, chunk: Chunk) -> int:
        if self.is_document(chunk):
            return min(self._rank[c] for c in self.covered(chunk))
        return self._rank[chunk.id]

    def render(self, fit: Fit[Chunk]) -> str:
        if not fit.parts:
            return ""
        sources = self.sources(fit)
        conflict = self.settings.conflict_policy is not None and dates_differ(sources)
        options = replace(self.settings.render, effective_dates=conflict)
        blocks = [
            render_source(n, chunk, self.content(chunk), options)
            for n, chunk in enumerate(sources, 1)
        ]
        return fence_frame(self._notice(conflict=conflict)).wrap(blocks)

    def drops(self, fit: Fit[Chunk]) -> list[Dropped]:
        return [*self.packer.drops(fit), *self._denied.values()]


def _constant(tokens: int) -> Callable[[list[Chunk]], int]:
    """An overhead that does not depend on what else is kept."""

    def overhead(_: list[Chunk]) -> int:
        return tokens

    return overhead
