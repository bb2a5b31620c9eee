"""The retrieved half of the pipeline composed: chunks in, the retrieved claimant out.

permit → relevance floor → rank (`candidates`), then dedup → select → escalate → arrange →
render → fence inside `claim.RetrievedClaim`. Both entry points build their claimant here
with the same `SourceOptions`: `ContextAssembler` as its `retrieved` claimant, and
`select_sources` (`ctxbudget._standalone`) on its own; neither engine is imported from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxbudget._arguments import check_type, sequence_of
from ctxbudget._budget import Allocation
from ctxbudget._errors import InputError
from ctxbudget._fence import SourceFormat
from ctxbudget._inputs import Chunk, Principal
from ctxbudget._report import Dropped, DropRun
from ctxbudget._sources.arrange import Order
from ctxbudget._sources.claim import RetrievedClaim, SourceSettings
from ctxbudget._sources.conflicts import ConflictPolicy
from ctxbudget._sources.dedup import Dedup
from ctxbudget._sources.escalate import DocumentLoader, Escalation, SectionLoader, check_loader
from ctxbudget._sources.permit import AccessPolicy, permit
from ctxbudget._sources.rank import RankedIds, ranking
from ctxbudget._sources.relevance import relevant
from ctxbudget._sources.render import RenderOptions
from ctxbudget._tokens import CountCache

__all__ = [
    "SourceOptions",
    "candidates",
    "check_chunks",
    "retrieved_claim",
    "source_options",
]


class SourceOptions(BaseModel):
    """How retrieved sources are chosen and shown; one object for both entry points.

    >>> SourceOptions(order="sandwich", min_relevance=0.2).order
    'sandwich'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    order: Order = Field(
        default="by_document",
        description="Where kept sources stand: by_document, relevance, sandwich, chronological.",
    )
    source_format: SourceFormat = Field(
        default="markdown",
        description='"markdown" headers ([n] Title — A > B) or "xml" <document> tags.',
    )
    dedup: Dedup = Field(
        default_factory=Dedup,
        description="Near-duplicate thresholds; Dedup(jaccard=None, containment=None, "
        "cosine=None) turns dedup off.",
    )
    min_relevance: float | None = Field(
        default=None,
        allow_inf_nan=False,
        description="Drop chunks whose rerank score (else score) is below this; None: off.",
    )
    stale_after: timedelta | None = Field(
        default=timedelta(days=365),
        description="Sources not updated for longer get a freshness note; None: never.",
    )
    conflict_policy: ConflictPolicy | None = Field(
        default=None,
        description="What the model should do when sources' effective dates differ; when set, "
        "those dates are shown.",
    )
    datamark: bool = Field(
        default=False, description="Interleave a marker in retrieved text (Spotlighting)."
    )
    access: AccessPolicy = Field(
        default_factory=AccessPolicy,
        description="Which ACL metadata chunks must carry; by default none is required.",
    )
    loader: Any = Field(
        default=None,
        description="A DocumentLoader or SectionLoader for whole-document escalation; None "
        "turns escalation off.",
    )
    escalation: Escalation = Field(
        default_factory=Escalation, description="When a document is sent whole."
    )

    @field_validator("loader")
    @classmethod
    def _loader(cls, value: object) -> DocumentLoader | SectionLoader | None:
        return None if value is None else check_loader(value)


def source_options(name: str, options: object) -> SourceOptions:
    """An entry point's source options: `SourceOptions()` for None, else checked."""
    if options is None:
        return SourceOptions()
    return check_type(
        name,
        options,
        SourceOptions,
        "a SourceOptions",
        "build it with SourceOptions(order=..., dedup=..., ...)",
    )


def check_chunks(chunks: object) -> list[Chunk]:
    """`chunks` as a list, or an `InputError` naming the first item that is not a `Chunk`."""
    return sequence_of("chunks", chunks, Chunk)


def candidates(
    chunks: Sequence[Chunk], principal: Principal | None, options: SourceOptions
) -> tuple[list[Dropped | DropRun], list[Chunk], RankedIds]:
    """Ranked chunks worth considering, their ids, and those ruled out before selection.

    The first steps of the pipeline, in order: permit (before anything reads the
    text), then relevance (`empty`, `below_floor`), then rank.
    """
    ids = list(map(_ID, chunks))
    if len(set(ids)) != len(ids):  # one C-speed check; the loop only names the culprit
        seen: set[str] = set()
        for chunk_id in ids:
            if chunk_id in seen:
                raise InputError(
                    f"chunk id {chunk_id!r} is given twice; ids must be unique within a "
                    "request (reports and sources refer to chunks by id)"
                )
            seen.add(chunk_id)
    visible, forbidden = permit(chunks, principal, options.access)
    kept, irrelevant = relevant(visible, options.min_relevance)
    # Both steps keep the order given: when they drop nothing, `kept` is `chunks`.
    kept_ids = ids if len(kept) == len(chunks) else list(map(_ID, kept))
    order = ranking(kept)
    return [*forbidden, *irrelevant], list(map(kept.__getitem__, order)), RankedIds(kept_ids, order)


_ID = attrgetter("id")


def retrieved_claim(
    allocation: Allocation,
    chunks: Sequence[Chunk],
    *,
    principal: Principal | None,
    options: SourceOptions,
    counter: CountCache,
    now: datetime | None,
    per_source: bool = False,
) -> tuple[RetrievedClaim, list[Dropped | DropRun]]:
    """The retrieved claimant for one request, and the chunks ruled out before selection."""
    ruled_out, ranked, ids = candidates(chunks, principal, options)
    forbidden = {
        chunk_id
        for run in ruled_out
        if isinstance(run, DropRun) and run.reason == "forbidden"
        for chunk_id in run.ids
    }
    settings = SourceSettings(
        render=RenderOptions(
            fmt=options.source_format,
            stale_after=options.stale_after,
            now=now or datetime.now(UTC),
        ),
        order=options.order,
        dedup=options.dedup,
        conflict_policy=options.conflict_policy,
        datamark=options.datamark,
        access=options.access,
        principal=principal,
        loader=options.loader,
        escalation=options.escalation,
        withheld=frozenset(c.document_id for c in chunks if c.id in forbidden)
        if forbidden
        else frozenset(),
        per_source=per_source,
    )
    claim = RetrievedClaim(allocation, ranked, counter=counter, settings=settings, ids=ids)
    return claim, ruled_out
