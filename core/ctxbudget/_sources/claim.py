"""The retrieved claimant: whole chunks by rank until the allocation is full, then arranged.

Candidates arrive permitted, above the relevance floor, and ranked. The walk is
lazy: a candidate is deduplicated against what is already kept, bounded from its
raw text (neither neutralised nor tokenized) when it cannot fit, and neutralised
and counted only when it might. What is kept is decided by rank; `arrange.arrange`
only decides where it stands. When a loader is set, `escalate.escalate` may send one
document whole in place of its chunks.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Final

from ctxbudget._budget import Allocation
from ctxbudget._claims import ListClaim, Outcome
from ctxbudget._errors import ContextBudgetError
from ctxbudget._fence import SourceFormat, datamark, fence_frame, fence_notice
from ctxbudget._inputs import Chunk, Principal
from ctxbudget._joins import Counted, Piece
from ctxbudget._layout import SECTION_SEPARATOR, Frame
from ctxbudget._neutralise import neutralise
from ctxbudget._pack import Fit
from ctxbudget._report import Dropped, DropReason, DropRun, records
from ctxbudget._result import Source
from ctxbudget._sources.arrange import Order, arrange
from ctxbudget._sources.conflicts import ConflictPolicy, conflict_instruction, dates_differ
from ctxbudget._sources.dedup import Dedup, Deduplicator
from ctxbudget._sources.escalate import (
    DocumentLoader,
    Escalated,
    Escalation,
    SectionLoader,
    as_document,
    document_permitted,
    escalate,
    load_sections,
    shrink_escalated,
)
from ctxbudget._sources.permit import AccessPolicy
from ctxbudget._sources.rank import Positions
from ctxbudget._sources.render import HeaderCache, RenderOptions, header_cache, render_source
from ctxbudget._sources.sizes import estimates
from ctxbudget._textcache import shingle_cache
from ctxbudget._tokens import CountCache

__all__ = ["RetrievedClaim", "SourceSettings"]

logger = logging.getLogger("ctxbudget")

_SEPARATE: Final = Frame("", "", SECTION_SEPARATOR)
"""The section frame when each source carries its fence: only blank lines between them."""

_ID = attrgetter("id")

_MARK = "\x00"
"""Stands in for the content to find what a rendered source puts around it."""


def _around(
    n: int, chunk: Chunk, content: str, options: RenderOptions, headers: HeaderCache | None = None
) -> tuple[str, str, str]:
    """Source `n` as (header and what follows it, `content`, what closes it): joined, exactly
    `render_source(n, chunk, content, options)`, its header from `headers` when rendered before.

    The mark is the last one in the rendered source: what follows content is fixed text, and
    a header may hold a mark of its own.
    """
    marked = render_source(n, chunk, _MARK, options, cache=headers)
    cut = marked.rindex(_MARK)
    return marked[:cut], content, marked[cut + 1 :]


@functools.cache
def _shown_text(fmt: SourceFormat, datamarked: bool) -> Callable[[str], str]:
    """A chunk's text as the fence shows it, one function per format and datamarking: the
    counter remembers its results by the function and the text."""

    def show(text: str) -> str:
        shown = neutralise(text, fmt=fmt)
        return datamark(shown) if datamarked else shown

    return show


_Shown = tuple[Chunk, tuple[str, str, str], int | None]
"""A kept source: the chunk, its rendered parts (header, content, close), its ingest count."""


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
    loader: DocumentLoader | SectionLoader | None
    escalation: Escalation
    withheld: frozenset[str] = frozenset()
    """Documents with a chunk this principal may not see: never sent whole."""
    per_source: bool = False
    """Each source in a fence of its own, joined by blank lines, instead of one fence
    around all: for frameworks that pass sources on one by one, reorder or filter them."""


class RetrievedClaim(ListClaim[Chunk]):
    """Ranked chunks packed whole into the fence; may escalate to one whole document."""

    def __init__(
        self,
        allocation: Allocation,
        ranked: Sequence[Chunk],
        *,
        counter: CountCache,
        settings: SourceSettings,
        ids: Sequence[str] | None = None,
    ) -> None:
        """`ids`: the ids of `ranked`, in order, when known without reading each chunk
        (`rank.RankedIds`); they name the candidates a walk never reached."""
        if ids is not None and len(ids) != len(ranked):
            raise ValueError(f"ids name each ranked chunk: got {len(ids)} for {len(ranked)}")
        self.settings = settings
        self._ids = ids
        self._rank = Positions(ranked)
        self._shown: dict[tuple[str, bool], str] = {}
        self._headers = header_cache(counter)
        self._documents: dict[str, Chunk | None] = {}
        self._denied: dict[str, Dropped] = {}
        self._last: tuple[Fit[Chunk], tuple[bool, list[_Shown]]] | None = None
        self._counter = counter
        # Costs are upper bounds: every header costed with the widest number and, when
        # a conflict policy is set, with its effective date; the exact count comes last.
        self._widest = max(len(ranked), 1)
        self._upper = replace(settings.render, effective_dates=settings.conflict_policy is not None)
        # The fence costed with the conflict instruction whenever a policy may add it.
        self._upper_fence = fence_frame(self._notice(conflict=settings.conflict_policy is not None))
        bound, quick_bound, ceiling = estimates(counter, datamarked=settings.datamark)
        super().__init__(
            allocation,
            ranked,
            counter=counter,
            frame=_SEPARATE if settings.per_source else self._upper_fence,
            kind="chunk",
            key=_ID,
            text=self._costed_text,
            cost=self._cost,
            bound=bound,
            ceiling=ceiling,
            quick_bound=quick_bound,
            kind_of=lambda c: "document" if self.is_document(c) else "chunk",
        )

    def _costed_parts(self, chunk: Chunk) -> tuple[str, str, str]:
        """The chunk rendered as costed (widest number, upper-bound header and fence)."""
        around = _around(self._widest, chunk, self.content(chunk), self._upper, self._headers)
        return self._framed(around, self._upper_fence)

    def _costed_text(self, chunk: Chunk) -> str:
        return "".join(self._costed_parts(chunk))

    def _cost(self, chunk: Chunk) -> int:
        """An upper bound on what `chunk` costs in the prompt, frame and header included."""
        before, content, after = self._costed_parts(chunk)
        tokens = self._ingest_count(chunk, content)
        if tokens is not None:
            return self._counter.count(before + after) + tokens
        # Counted around the content: the content's count is cached for the final count.
        return self._counter.count_joined((before, content, after))

    def _ids_of(self, chunks: Sequence[Chunk]) -> Sequence[str]:
        """The ids of `chunks`; from `ids` when they are the last ranked candidates, as a
        walk leaves them unreached (compared by identity, in C, not read)."""
        ranked, count = self.items, len(chunks)
        if self._ids is not None and 0 < count <= len(ranked):
            tail = len(ranked) - count
            if list(chunks) == ranked[tail:]:
                return self._ids[tail:]
        return list(map(_ID, chunks))

    def content(self, chunk: Chunk) -> str:
        """The chunk's text as it goes into the fence: neutralised, datamarked if asked.

        Returns the chunk's own string object when nothing changed, so an ingest-time
        token count stays valid exactly when the text is untouched.
        """
        key = (chunk.id, self.is_document(chunk))
        cached = self._shown.get(key)
        if cached is None:
            # By text across requests: a chat's next turn retrieves the same texts anew.
            show = _shown_text(self.settings.render.fmt, self.settings.datamark)
            cached = self._shown[key] = self._counter.rewritten(chunk.content, show)
        return cached

    def _ingest_count(self, chunk: Chunk, content: str) -> int | None:
        """`chunk.tokens` where it can stand for counting `content`, else None.

        Only a retrieved chunk's own untouched text qualifies, and only when the count
        is not below what its bytes certainly cost; a loaded document is always
        counted, since it decides escalation and may be any size.
        """
        tokens = chunk.tokens
        if tokens is None or content is not chunk.content or self.is_document(chunk):
            return None
        return tokens if tokens >= self._counter.lower_bound(content) else None

    def _framed(self, around: tuple[str, str, str], fence: Frame) -> tuple[str, str, str]:
        """A source's parts, inside `fence` of its own when each source has one."""
        if not self.settings.per_source:
            return around
        before, content, after = around
        return fence.open + before, content, after + fence.close

    def fence(self, fit: Fit[Chunk]) -> Frame:
        """The fence the sources of `fit` are shown in (its notice names a conflict policy
        only when their dates differ)."""
        return fence_frame(self._notice(conflict=self._shown_sources(fit)[0]))

    def _notice(self, *, conflict: bool) -> str:
        notice = fence_notice(datamarked=self.settings.datamark)
        policy = self.settings.conflict_policy
        if conflict and policy is not None:
            notice += " " + conflict_instruction(policy)
        return notice

    @functools.cached_property
    def _dedup(self) -> Deduplicator:
        """This request's near-duplicate check, built by the first walk that asks."""
        return Deduplicator(self.settings.dedup, shingle_cache(self._counter))

    def settled(self) -> None:
        """The dedup check goes: its state grows with what is kept (docs/speed.md, "Memory")
        and the prompt is built without it; a later walk would build it anew."""
        self.__dict__.pop("_dedup", None)

    def _reject(self, candidate: Chunk, kept: list[Chunk]) -> DropReason | None:
        return "duplicate" if self._dedup.duplicates(candidate, kept) is not None else None

    def _rejecting_beside(
        self, document: Chunk
    ) -> Callable[[Chunk, list[Chunk]], DropReason | None]:
        """A dedup check that also counts `document`, and each retrieved chunk of it, as kept:
        a near-copy of one of its sections may not pass for new beside the whole document."""
        inside = [document, *(c for c in self.items if c.document_id == document.id)]

        def reject(candidate: Chunk, kept: list[Chunk]) -> DropReason | None:
            return self._reject(candidate, [*inside, *kept])

        return reject

    def fit(self, grant: int) -> Fit[Chunk]:
        base = self.packer.pack(self.items, grant, reject=self._reject)
        loader = self.settings.loader
        if loader is None:
            return base
        escalated = escalate(
            base,
            grant,
            packer=self.packer,
            candidates=self.items,
            rank=self._rank,
            settings=self.settings.escalation,
            load=lambda document_id: self._load(document_id, loader),
            reject_beside=self._rejecting_beside,
        )
        return escalated or base

    def shrink(self, fit: Fit[Chunk]) -> Fit[Chunk] | None:
        """`fit` with less in it: the least preferred chunk goes; an escalated document
        goes last, and then its chunks come back as packed without it, so nothing it
        covered is lost. None when nothing is left to drop."""
        if isinstance(fit, Escalated):
            return shrink_escalated(self.packer, fit)
        return self.packer.shrink(fit)

    def _load(self, document_id: str, loader: DocumentLoader | SectionLoader) -> Chunk | None:
        """The whole document, loaded once per request; None when unknown, empty or forbidden."""
        if document_id in self._documents:
            return self._documents[document_id]
        sections = load_sections(loader, document_id, self.settings.principal)
        document = None
        if sections is not None:
            if self._may_see(document_id, sections):
                document = as_document(document_id, sections)
            else:
                self._denied[document_id] = Dropped._unvalidated(
                    "retrieved", "document", document_id, "forbidden"
                )
        self._documents[document_id] = document
        return document

    def _may_see(self, document_id: str, sections: Sequence[Chunk]) -> bool:
        """Whether the principal may see every section of the document.

        Every section, not only those retrieved: access must not depend on which
        chunks the retriever returned. A retrieved chunk of it that was forbidden
        withholds it too, whatever the loader says.
        """
        if document_id in self.settings.withheld:
            return False
        shown = [c for c in self.items if c.document_id == document_id]
        principal, access = self.settings.principal, self.settings.access
        return all(document_permitted(s, shown, principal, access) for s in sections)

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

    def blocks(self, fit: Fit[Chunk]) -> list[tuple[Chunk, str]]:
        """Kept sources in prompt order, each with its text as the prompt shows it."""
        return [(chunk, "".join(around)) for chunk, around, _ in self._shown_sources(fit)[1]]

    def _shown_sources(self, fit: Fit[Chunk]) -> tuple[bool, list[_Shown]]:
        """Whether dates conflict, and each kept source in prompt order with its rendered
        parts and its content's ingest count: computed once per fit (the final count and
        the result's sources both read it)."""
        last = self._last
        if last is not None and last[0] is fit:
            return last[1]
        sources = self.sources(fit)
        conflict = self._conflict(sources)
        options = replace(self.settings.render, effective_dates=conflict)
        shown: list[_Shown] = []
        for n, chunk in enumerate(sources, 1):
            content = self.content(chunk)
            shown.append(
                (
                    chunk,
                    _around(n, chunk, content, options, self._headers),
                    self._ingest_count(chunk, content),
                )
            )
        self._last = (fit, (conflict, shown))
        return conflict, shown

    def _conflict(self, sources: list[Chunk]) -> bool:
        return self.settings.conflict_policy is not None and dates_differ(sources)

    def render(self, fit: Fit[Chunk]) -> str:
        return "".join(p if isinstance(p, str) else p.text for p in self.pieces(fit))

    def pieces(self, fit: Fit[Chunk]) -> list[Piece]:
        """The fenced sources as parts: frame, each source's header, its content (with its
        ingest count when that stands), and the text between them."""
        if not fit.parts:
            return []
        fence = self.fence(fit)
        out: list[Piece] = [] if self.settings.per_source else [fence.open]
        for n, (_, around, tokens) in enumerate(self._shown_sources(fit)[1], 1):
            if n > 1:
                out.append(fence.separator)
            before, content, after = self._framed(around, fence)
            out += [before, content if tokens is None else Counted(content, tokens), after]
        if not self.settings.per_source:
            out.append(fence.close)
        return out

    def drops(self, fit: Fit[Chunk]) -> list[Dropped]:
        return records(self.drop_runs(fit))

    def outcome(self, fit: Fit[Chunk]) -> Outcome:
        """What each [n] refers to, in prompt order, and the document sent whole."""
        sources = tuple(
            Source(
                n=n,
                chunk=chunk,
                text=text,
                document=self.is_document(chunk),
                covers=self.covered(chunk) if self.is_document(chunk) else (),
            )
            for n, (chunk, text) in enumerate(self.blocks(fit), 1)
        )
        return Outcome(sources=sources, escalated=self.escalated(fit))

    def require_sent(self, fit: Fit[Chunk], granted: int) -> None:
        """Retrieval that found permitted, relevant sources but could send none is no silent
        success: an error when retrieval has a floor, else a warning naming them.

        Answering from no sources while the retriever found some degrades the answer unseen;
        a floor says the request needs sources, so it fails instead.
        """
        if fit.parts or not fit.overflow:
            return
        unfit = [d for d in self.drops(fit) if d.reason in ("oversize", "over_budget")]
        if not unfit:
            return
        ids = [d.id for d in unfit]
        named = ", ".join(ids[:10]) + (f" and {len(ids) - 10:,} more" if len(ids) > 10 else "")
        floor = self.allocation.min
        if floor > 0:
            # The smallest source counted, in its fence: less than that sends nothing.
            known = [d.tokens for d in unfit if d.tokens is not None]
            needed = self.packer.framing + min(known) if known else granted + 1
            raise ContextBudgetError(
                "retrieved",
                max(needed, granted + 1),
                granted,
                f"{len(ids):,} permitted, relevant source(s) were found but none fits ({named}), "
                f"and retrieval's min ({floor:,}) says the request needs sources; raise the "
                "retrieved allocation (or the total), cut documents into smaller chunks, or "
                "set min=0 to answer without sources",
            )
        logger.warning(
            "no source fits the %s tokens retrieval was given: %s permitted, relevant source(s) "
            "were left out (%s); the model answers without sources",
            f"{granted:,}",
            f"{len(ids):,}",
            named,
            extra={"ctxbudget_unsent": ids},
        )

    def drop_runs(self, fit: Fit[Chunk]) -> list[Dropped | DropRun]:
        """`drops(fit)`, with the chunks never looked at as a run of records not built yet."""
        # Without a loaded document every item is a chunk: no per-item kind to look up.
        loaded = any(d is not None for d in self._documents.values())
        runs = self.packer.drop_runs(fit, kinds=loaded, names=self._ids_of)
        return [*runs, *self._denied.values()]
