"""Retrieved sources on their own: chunks and a token budget in, numbered, fenced sources out.

`select_sources` runs the retrieved half of the pipeline (permit → relevance floor →
dedup → select → escalate → arrange → render → fence) with no question, system
prompt or other claimants: what a LangChain document compressor, a LlamaIndex node
postprocessor or `PromptHelper.repack` need. `ContextAssembler` runs the very same
steps as its `retrieved` claimant, with the same `SourceOptions`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxbudget._arguments import check_int, check_optional, check_type
from ctxbudget._budget import Allocation
from ctxbudget._errors import InputError
from ctxbudget._exact import settle
from ctxbudget._fence import SourceFormat
from ctxbudget._inputs import Chunk, Principal, check_token_range, sequence_of
from ctxbudget._otel import traced_entry
from ctxbudget._report import DeferredDropped, Dropped, DropRun
from ctxbudget._result import Source
from ctxbudget._sources.arrange import Order
from ctxbudget._sources.claim import RankedIds, RetrievedClaim, SourceSettings, ranking
from ctxbudget._sources.conflicts import ConflictPolicy
from ctxbudget._sources.dedup import Dedup
from ctxbudget._sources.escalate import DocumentLoader, Escalation, SectionLoader, check_loader
from ctxbudget._sources.permit import AccessPolicy, check_principal, permit
from ctxbudget._sources.relevance import relevant
from ctxbudget._sources.render import RenderOptions
from ctxbudget._tokens import TokenCounter, Tokenizer, tokenizer_of

__all__ = [
    "FenceMode",
    "Selection",
    "SourceOptions",
    "candidates",
    "check_chunks",
    "retrieved_claim",
    "select_sources",
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


FenceMode = Literal["block", "per_source"]
"""One fence around all sources, or each source in a fence of its own."""


class Selection(DeferredDropped, BaseModel):
    """Retrieved sources selected under a token budget: the fenced block and what it holds."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(
        description="The fenced, numbered sources; '' when no source was kept. One fence "
        "around them all, or (fence='per_source') each source in its own, joined by separator."
    )
    tokens: int = Field(description="Exact token count of text.")
    budget: int = Field(description="The max_tokens the selection was made under.")
    sources: tuple[Source, ...] = Field(
        description="What each [n] in text refers to, in prompt order."
    )
    dropped: tuple[Dropped, ...] = Field(
        description="Every chunk left out, with its reason; ids only, never content."
    )
    escalated: str | None = Field(
        description="The document sent whole in place of its chunks, if any."
    )
    trimmed: bool = Field(description="Some chunk was left out for lack of space.")
    fence: FenceMode = Field(default="block", description="How the sources are fenced.")
    fence_open: str = Field(
        default="", description="What opens the fence: its tag and the untrusted-data notice."
    )
    fence_close: str = Field(default="", description="What closes the fence.")
    separator: str = Field(default="", description="What stands between two sources.")

    def framed_sources(self) -> tuple[str, ...]:
        """Each source inside a fence of its own (what a framework node should carry when
        fence='per_source': whatever reorders or filters them, each stays fenced)."""
        return tuple(self.fence_open + s.text + self.fence_close for s in self.sources)


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

logger = logging.getLogger("ctxbudget")


def retrieved_claim(
    allocation: Allocation,
    chunks: Sequence[Chunk],
    *,
    principal: Principal | None,
    options: SourceOptions,
    counter: TokenCounter,
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


@traced_entry("ctxbudget.select_sources")
def select_sources(
    chunks: Sequence[Chunk],
    *,
    max_tokens: int,
    tokenizer: str | Tokenizer,
    min_tokens: int = 0,
    principal: Principal | None = None,
    options: SourceOptions | None = None,
    now: datetime | None = None,
    fence: FenceMode = "block",
) -> Selection:
    """Select, number and fence retrieved chunks within `max_tokens`, counted exactly.

    For repeated calls prefer `ContextAssembler.select_sources`, which keeps token
    counts cached across requests.

    Args:
        max_tokens: the hard limit on the fenced block's exact token count.
        min_tokens: a floor: when less than this much space can be filled (while
            more content exists), `ContextBudgetError` is raised.
        principal: who is asking; chunks they may not see never enter the block.
        now: the reference time for freshness notes; defaults to the current time.
        fence: "per_source" puts each source in a fence of its own (`framed_sources`), for
            a framework that passes sources on separately; the budget counts every fence.
    """
    options = source_options("options", options)
    return select_with(
        TokenCounter(tokenizer_of(tokenizer)),
        chunks,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        principal=principal,
        options=options,
        now=now,
        fence=fence,
    )


def select_with(
    counter: TokenCounter,
    chunks: Sequence[Chunk],
    *,
    max_tokens: int,
    min_tokens: int,
    principal: Principal | None,
    options: SourceOptions,
    now: datetime | None,
    fence: FenceMode = "block",
) -> Selection:
    """`select_sources` with a given counter (the assembler's, whose cache outlives a call)."""
    check_optional("now", now, datetime, "a datetime", "e.g. datetime.now(UTC)")
    if fence not in ("block", "per_source"):
        raise InputError(f"fence must be 'block' or 'per_source', but got {fence!r}")
    max_tokens = check_int("max_tokens", max_tokens)
    max_tokens, min_tokens = check_token_range(max_tokens, check_int("min_tokens", min_tokens))
    allocation = Allocation("retrieved", min=min_tokens, max=max_tokens, priority=1)
    claim, ruled_out = retrieved_claim(
        allocation,
        check_chunks(chunks),
        principal=check_principal(principal, options.access),
        options=options,
        counter=counter,
        now=now,
        per_source=fence == "per_source",
    )
    _, rendered = settle({"retrieved": claim}, max_tokens, counter)
    fit = rendered.fits["retrieved"]
    claim.require_sent(fit, max_tokens)
    frame = claim.fence(fit) if fit.parts else None
    outcome = claim.outcome(fit)
    return Selection(
        text=rendered.text,
        tokens=rendered.total,
        budget=max_tokens,
        sources=outcome.sources,
        dropped=(),
        escalated=outcome.escalated,
        trimmed=fit.overflow,
        fence=fence,
        fence_open="" if frame is None else frame.open,
        fence_close="" if frame is None else frame.close,
        separator="" if frame is None else frame.separator,
    )._defer_dropped([*ruled_out, *claim.drop_runs(fit)])
