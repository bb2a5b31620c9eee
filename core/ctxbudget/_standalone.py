"""One part of a prompt on its own: `select_sources` and `trim_history`, side by side.

Each runs one claimant of `ContextAssembler` (docs/sources.md, "Retrieved sources on
their own"; docs/budget.md, "How each claimant shrinks") through the assembler's own
engine (`_exact.settle`: allocation, the claimant's checks, the exact count) with no other
claimant beside it: what a LangChain document compressor, a LlamaIndex node postprocessor or
`PromptHelper.repack` need, and an adapter trimming a framework's message list. The `*_with`
forms take the assembler's counter (and summary cache), whose caches outlive a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._arguments import (
    check_int,
    check_optional,
    check_token_range,
    check_type,
    sequence_of,
)
from ctxbudget._budget import Allocation
from ctxbudget._conversation import HistoryOptions, Summarize, SummaryCache
from ctxbudget._deprecated import renamed_keyword, warn_renamed
from ctxbudget._errors import InputError
from ctxbudget._exact import settle
from ctxbudget._history import HistoryClaim
from ctxbudget._inputs import Chunk, Principal, Role, Turn
from ctxbudget._layout import Frame
from ctxbudget._otel import traced_entry
from ctxbudget._report import DeferredDropped, Dropped, SummarySpan, nothing_in
from ctxbudget._result import Source
from ctxbudget._sources.permit import check_principal
from ctxbudget._sources.pipeline import SourceOptions, check_chunks, retrieved_claim, source_options
from ctxbudget._tokens import CountCache, Tokenizer, tokenizer_of

__all__ = [
    "FenceMode",
    "Selection",
    "TrimmedHistory",
    "history_options",
    "select_sources",
    "select_with",
    "trim_history",
    "trim_with",
]

# --- retrieved sources ---------------------------------------------------------------------

FenceMode = Literal["block", "per_source"]
"""One fence around all sources, or each source in a fence of its own."""

_NO_FRAME: Final = Frame("", "", "")
"""A selection's frame when it kept no source."""


class Selection(DeferredDropped, BaseModel):
    """Retrieved sources selected under a token budget: the fenced block and what it holds."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(
        description="The fenced, numbered sources; '' when no source was kept. One fence "
        "around them all, or (fence='per_source') each source in its own, joined by "
        "frame.separator."
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
    frame: Frame = Field(
        default=_NO_FRAME,
        description="The fence: what opens it (its tag and the untrusted-data notice), what "
        "closes it, and what stands between two sources; all '' when no source was kept.",
    )

    def framed_sources(self) -> tuple[str, ...]:
        """Each source inside a fence of its own (what a framework node should carry when
        fence='per_source': whatever reorders or filters them, each stays fenced)."""
        return tuple(self.frame.wrap([s.text]) for s in self.sources)

    @property
    def fence_open(self) -> str:
        """Deprecated: read `frame.open`."""
        warn_renamed("Selection.fence_open", "Selection.frame.open")
        return self.frame.open

    @property
    def fence_close(self) -> str:
        """Deprecated: read `frame.close`."""
        warn_renamed("Selection.fence_close", "Selection.frame.close")
        return self.frame.close

    @property
    def separator(self) -> str:
        """Deprecated: read `frame.separator`."""
        warn_renamed("Selection.separator", "Selection.frame.separator")
        return self.frame.separator


@renamed_keyword("select_sources", "options", "sources")
@traced_entry("ctxbudget.select_sources")
def select_sources(
    chunks: Sequence[Chunk],
    *,
    max_tokens: int,
    tokenizer: str | Tokenizer,
    min_tokens: int = 0,
    principal: Principal | None = None,
    sources: SourceOptions | None = None,
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
    sources = source_options("sources", sources)
    return select_with(
        CountCache(tokenizer_of(tokenizer)),
        chunks,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        principal=principal,
        sources=sources,
        now=now,
        fence=fence,
    )


def select_with(
    counter: CountCache,
    chunks: Sequence[Chunk],
    *,
    max_tokens: int,
    min_tokens: int,
    principal: Principal | None,
    sources: SourceOptions,
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
        principal=check_principal(principal, sources.access),
        options=sources,
        counter=counter,
        now=now,
        per_source=fence == "per_source",
    )
    _, rendered = settle({"retrieved": claim}, max_tokens, counter)
    fit = rendered.fits["retrieved"]
    claim.require_sent(fit, max_tokens)
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
        frame=claim.fence(fit) if fit.parts else _NO_FRAME,
    )._defer_dropped([*ruled_out, *claim.drop_runs(fit)])


# --- conversation history ------------------------------------------------------------------


class TrimmedHistory(BaseModel):
    """The turns that fit a token budget, in order, and where turns were left out."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[tuple[Role, str], ...] = Field(
        description="Kept turns as (role, content) in order, with a gap marker (or a summary) "
        "as a user note wherever turns are missing; a cleared tool result's content is its "
        "placeholder."
    )
    kept: tuple[int, ...] = Field(description="Indices of the kept turns in the input, ascending.")
    gaps: tuple[tuple[int, int], ...] = Field(
        description="Each run of left-out turns as (start, stop) input indices, stop exclusive."
    )
    text: str = Field(description="The history section as the prompt shows it; '' when empty.")
    tokens: int = Field(description="Exact token count of text.")
    budget: int = Field(description="The max_tokens the history was trimmed to.")
    dropped: tuple[Dropped, ...] = Field(description="Every turn left out, by id or position.")
    cleared: tuple[int, ...] = Field(
        default=(),
        exclude_if=nothing_in,
        description="Indices of the kept tool turns whose content was replaced by a placeholder "
        "(in messages), ascending. Left out of dumps when empty.",
    )
    summaries: tuple[SummarySpan, ...] = Field(
        default=(),
        exclude_if=nothing_in,
        description="When a summariser is set: each run of left-out turns and whether a summary "
        "or the gap marker stands there. Left out of dumps when empty.",
    )


@renamed_keyword("trim_history", "options", "history")
@traced_entry("ctxbudget.trim_history")
def trim_history(
    turns: Sequence[Turn],
    *,
    max_tokens: int,
    tokenizer: str | Tokenizer,
    min_tokens: int = 0,
    history: HistoryOptions | None = None,
) -> TrimmedHistory:
    """Keep the latest unit, the first and the most recent units that fit in `max_tokens`,
    counted exactly; old tool results are cleared before whole units go (`history`).

    Raises `ContextBudgetError` when the latest unit alone does not fit. No summary outlives
    the call, so a summarised run ends where the fewest turns are left out (`summary_headroom`
    pays only in a session); for repeated calls prefer `ContextAssembler.trim_history`, which
    keeps token counts and summaries cached across requests.
    """
    history = history_options("history", history)
    return trim_with(
        CountCache(tokenizer_of(tokenizer)),
        turns,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        history=history.model_copy(update={"summary_headroom": 0}),
        summaries=SummaryCache(),
    )


def history_options(name: str, options: object) -> HistoryOptions:
    """An entry point's history options: `HistoryOptions()` for None, else checked."""
    if options is None:
        return HistoryOptions()
    return check_type(
        name,
        options,
        HistoryOptions,
        "a HistoryOptions",
        "build it with HistoryOptions(keep_tool_results=..., summarize=..., ...)",
    )


def trim_with(
    counter: CountCache,
    turns: Sequence[Turn],
    *,
    max_tokens: int,
    min_tokens: int,
    history: HistoryOptions,
    summaries: SummaryCache,
    summarize: Summarize | None = None,
) -> TrimmedHistory:
    """`trim_history` with a given counter and summary cache (the assembler's, which outlive a
    call); `summarize` overrides `history.summarize` for this call."""
    turns = sequence_of("turns", turns, Turn)
    max_tokens = check_int("max_tokens", max_tokens)
    max_tokens, min_tokens = check_token_range(max_tokens, check_int("min_tokens", min_tokens))
    allocation = Allocation("history", min=min_tokens, max=max_tokens, priority=1)
    claim = HistoryClaim(
        allocation,
        turns,
        counter=counter,
        options=history,
        summarize=summarize,
        summaries=summaries,
    )
    _, rendered = settle({"history": claim}, max_tokens, counter)
    fit = rendered.fits["history"]
    entries = claim.entries(fit)
    return TrimmedHistory(
        messages=tuple((entry.role, entry.content) for entry in entries),
        kept=tuple(entry.position for entry in entries if entry.position is not None),
        gaps=tuple(claim.gaps(fit)),
        text=rendered.text,
        tokens=rendered.total,
        budget=max_tokens,
        dropped=tuple(claim.drops(fit)),
        cleared=tuple(e.position for e in entries if e.cleared and e.position is not None),
        summaries=tuple(claim.summary_spans(fit)),
    )
