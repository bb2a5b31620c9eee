"""What an assembly decided, as data: sizes, what was trimmed and dropped, and why.

Two speed exceptions to plain pydantic live here and nowhere else, each beside the plain
form its tests compare it with (tests/core/test_report.py). Measured with pydantic 2.14.4,
CPU-time medians, ratios to one encode of the prompt (``python -m benchmarks.ab_core HEAD
"<workload>" --repeat 21`` against a tree with the plain form, 2026-12-02, a loaded machine):

- Drop records are built by writing pydantic's instance slots (`_records_fast`), not with
  `model_construct` (`_records_by_construct`), which looks up every field's aliases and
  defaults: 1.5 µs a record against 6.2 (2,000 records: 3.0 ms against 12.4); with
  `model_construct`, 200 candidates with 200 history turns went from 3.30x to 3.52x
  one encode (41 requests).
- A report's or selection's `dropped` records are built on first read
  (`DeferredDropped.__getattribute__`), not when the request is assembled (`records`):
  built eagerly, 10,000 candidates went from 16.9x to 33.3x one encode, 200 candidates
  from 2.8x to 3.1x. pydantic's own lazy tools (a private attribute behind a computed
  field) would move `dropped` after every other field in dumps and out of the
  constructor, `model_fields` and `==`, which users and the golden outputs read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._claimants import Claimant
from ctxbudget._deprecated import warn_renamed

__all__ = [
    "DeferredDropped",
    "DropReason",
    "DropRun",
    "Dropped",
    "ItemKind",
    "Report",
    "SummaryOutcome",
    "SummarySpan",
    "drop_counts",
    "nothing_in",
    "records",
]

DropReason = Literal[
    "forbidden",
    "below_floor",
    "duplicate",
    "empty",
    "oversize",
    "over_budget",
    "summarized",
    "cleared",
]
"""Why an item was left out, or (cleared) cut down to a placeholder.

forbidden: the principal may not see it. below_floor: under the relevance floor.
duplicate: a near-copy of a better-ranked kept chunk. empty: no text.
oversize: larger than all the space its claimant got. over_budget: did not fit in what was left.
summarized: a history turn left out, covered by the summary standing in its place.
cleared: a tool result kept with a placeholder in place of its content (`Report.cleared`).
"""

SummaryOutcome = Literal["summarized", "cached", "none", "empty", "failed", "too_long"]
"""What stands where history turns were left out, when a summariser is set.

summarized: a summary the summariser wrote for this request. cached: a summary of the
same turns written earlier. The others fall back to the gap marker: none (it returned
None), empty (blank text), failed (it raised or returned something else), too_long (more
than `HistoryOptions.summary_tokens`).
"""

ItemKind = Literal["chunk", "document", "turn", "tool", "text"]


class Dropped(BaseModel):
    """One item left out of the prompt. Carries ids, never content.

    `tokens` is None for most records: the assembler never tokenizes an item it can
    rule out without doing so (docs/speed.md, "Where the time goes").
    """

    model_config = ConfigDict(frozen=True)

    claimant: Claimant = Field(description="The section the item was for, e.g. 'retrieved'.")
    kind: ItemKind = Field(
        description="What the item is: a chunk, a whole document (escalation), a history "
        "turn, a tool, or a claimant's whole text (examples, memory)."
    )
    id: str = Field(
        description="The item's id: Chunk.id, the document id, Turn.id (else 'history[i]'), "
        "Tool.name, or the claimant name for a text."
    )
    reason: DropReason = Field(
        description="Why it was left out: forbidden (the principal may not see it), "
        "below_floor (under min_relevance), duplicate (near-copy of a better-ranked kept "
        "chunk), empty (no text), oversize (larger than all the space its claimant got), "
        "over_budget (did not fit in what was left), summarized (a history turn a summary "
        "stands in for), cleared (a tool result kept, its content replaced by a placeholder; "
        "listed in Report.cleared, not in Report.dropped)."
    )
    tokens: int | None = Field(
        default=None,
        description="The item's token cost, when it was counted. None when it was ruled out "
        "without tokenizing, which is most drops: forbidden, empty and below_floor chunks go "
        "before anything counts them; duplicates are found by comparing word shingles (or "
        "embeddings); an item whose cheap lower bound (bytes / longest token) already exceeds "
        "the space is oversize or over_budget uncounted; and once one item does not fit, "
        "every later one is over_budget unseen. Counting them would cost more than "
        "assembling the prompt.",
    )

    @classmethod
    def _unvalidated(
        cls,
        claimant: Claimant,
        kind: ItemKind,
        id: str,
        reason: DropReason,
        tokens: int | None = None,
    ) -> Dropped:
        """A record built from values the library produced itself, skipping validation.

        A request can drop thousands of candidates; validating each record would cost
        more than selecting them (`_records_fast`). Internal: users build records with
        ``Dropped(...)``.
        """
        return cls._many(claimant, kind, (id,), reason, tokens)[0]

    @classmethod
    def _many(
        cls,
        claimant: Claimant,
        kind: ItemKind,
        ids: Iterable[str],
        reason: DropReason,
        tokens: int | None = None,
    ) -> list[Dropped]:
        """`_unvalidated` records for many ids at once (thousands of unread candidates)."""
        return _records_fast(cls, claimant, kind, ids, reason, tokens)


_new = object.__new__
_set = object.__setattr__
# The other three slots of every pydantic model, set through their descriptors.
_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_EXTRA_SET = BaseModel.__dict__["__pydantic_extra__"].__set__
_PRIVATE_SET = BaseModel.__dict__["__pydantic_private__"].__set__
_FIELDS: Final = frozenset(Dropped.model_fields)


def _records_fast(
    cls: type[Dropped],
    claimant: Claimant,
    kind: ItemKind,
    ids: Iterable[str],
    reason: DropReason,
    tokens: int | None,
) -> list[Dropped]:
    """`_records_by_construct(...)`, four times faster: it sets the four slots
    `model_construct` would set, directly (the numbers are in the module docstring)."""
    new, fields, fields_set, extra, private = _new, _FIELDS, _FIELDS_SET, _EXTRA_SET, _PRIVATE_SET
    out = []
    for item in ids:
        record = new(cls)
        _set(
            record,
            "__dict__",
            {"claimant": claimant, "kind": kind, "id": item, "reason": reason, "tokens": tokens},
        )
        fields_set(record, set(fields))
        extra(record, None)
        private(record, None)
        out.append(record)
    return out


def _records_by_construct(
    cls: type[Dropped],
    claimant: Claimant,
    kind: ItemKind,
    ids: Iterable[str],
    reason: DropReason,
    tokens: int | None,
) -> list[Dropped]:
    """The records `_records_fast` builds, built plainly: the reference its tests compare
    it with."""
    return [
        cls.model_construct(claimant=claimant, kind=kind, id=item, reason=reason, tokens=tokens)
        for item in ids
    ]


@dataclass(frozen=True, slots=True)
class DropRun:
    """Drop records not built yet: uncounted items of one claimant and kind, left out for
    one reason, by id in report order.

    A request can leave thousands of candidates unread; their records are built only if
    the report's `dropped` is read (`DeferredDropped`), and until then cost one id each.
    """

    claimant: Claimant
    kind: ItemKind
    reason: DropReason
    ids: Sequence[str]

    def records(self) -> list[Dropped]:
        """The records, one per id."""
        return Dropped._many(self.claimant, self.kind, self.ids, self.reason)


def records(drops: Iterable[Dropped | DropRun]) -> list[Dropped]:
    """The records of `drops`, runs built, in order."""
    out: list[Dropped] = []
    for drop in drops:
        if isinstance(drop, DropRun):
            out += drop.records()
        else:
            out.append(drop)
    return out


class _Deferred:
    """What a model's `dropped` field holds until it is first read: the records to build."""

    __slots__ = ("drops",)

    def __init__(self, drops: tuple[Dropped | DropRun, ...]) -> None:
        self.drops = drops

    def build(self) -> tuple[Dropped, ...]:
        return tuple(records(self.drops))


_get = object.__getattribute__


class DeferredDropped:
    """Mixin for a pydantic model with a `dropped: tuple[Dropped, ...]` field whose records
    are built on first read of the model (docs/speed.md, "Where the time goes").

    The model holds `_Deferred` in place of the tuple until `dropped` or `__dict__` is read.
    `model_dump`, `==`, `repr`, `hash`, copies and pickling all read `__dict__` as an
    attribute, through `__getattribute__`, so every one of them sees the built tuple and
    nothing can tell the model from one built with the records given. Why this is not
    pydantic's own lazy tools, with the numbers: the module docstring.
    """

    __slots__ = ()

    def _defer_dropped(self, drops: Sequence[Dropped | DropRun]) -> Self:
        """This model, built with ``dropped=()``, with `drops` as its records to build.

        Only for a model just built by the library: it replaces a frozen field in place.
        """
        state: dict[str, Any] = _get(self, "__dict__")
        if state["dropped"] != ():
            raise ValueError("_defer_dropped needs a model built with dropped=()")
        if any(isinstance(drop, DropRun) for drop in drops):
            state["dropped"] = _Deferred(tuple(drops))
        else:
            state["dropped"] = tuple(drops)
        return self

    if not TYPE_CHECKING:  # as pydantic hides its own __getattr__: typed access stays checked

        def __getattribute__(self, name: str) -> Any:
            # Every other field reads its own value; whatever reads them all reads __dict__.
            if name == "dropped" or name == "__dict__":
                state = _get(self, "__dict__")
                deferred = state.get("dropped")
                if type(deferred) is _Deferred:
                    # Two threads may both build: each stores an equal tuple; either is right.
                    state["dropped"] = deferred.build()
            return _get(self, name)


def drop_counts(model: object) -> Counter[DropReason]:
    """How many items `model` (a report, a selection or a history trim) left out, by reason,
    without building deferred records (a traced request stays as cheap as an untraced one)."""
    held = _get(model, "__dict__")["dropped"]
    drops = held.drops if type(held) is _Deferred else held
    counts: Counter[DropReason] = Counter()
    for drop in drops:
        counts[drop.reason] += len(drop.ids) if isinstance(drop, DropRun) else 1
    return counts


def nothing_in(value: tuple[object, ...]) -> bool:
    """Whether a tuple of records is empty: such a field stays out of dumps and log records."""
    return not value


def _is_true(value: bool) -> bool:
    return value is True


def _is_none(value: object) -> bool:
    return value is None


class SummarySpan(BaseModel):
    """One run of history turns left out while a summariser was set, and what stands there.

    The turns are ``history[start:stop]``: what an async adapter summarises itself between
    two assemblies (docs/agents.md, "Summaries"). Ids and numbers only, never text.
    """

    model_config = ConfigDict(frozen=True)

    start: int = Field(description="Index of the first turn left out.")
    stop: int = Field(description="Index after the last turn left out (exclusive).")
    ids: tuple[str, ...] = Field(description="The left-out turns' ids (Turn.id, else history[i]).")
    outcome: SummaryOutcome = Field(
        description="summarized or cached: a summary stands there; none, empty, failed or "
        "too_long: the summariser gave nothing usable (returned None, blank text, raised, or "
        "wrote more than summary_tokens) and the gap marker stands there."
    )


class Report(DeferredDropped, BaseModel):
    """Every decision of one assembly; also logged as one structured record.

    `sizes` is what each claimant's section costs in the prompt; `granted` is the most it
    could have used when allocation served it. Grants are ceilings handed out in
    priority order, and space a claimant leaves unused passes to the next, so grants
    overlap and their sum can exceed `budget`, while `sizes` add up to what the prompt holds.
    """

    model_config = ConfigDict(frozen=True)

    budget: int = Field(
        description="Tokens the prompt may use: Budget.total - Budget.reserve_output."
    )
    total: int = Field(
        description="Exact token count of the final prompt text, plus tool_schema_tokens when "
        "tools are sent natively."
    )
    unused: int = Field(description="budget - total: tokens the prompt could still have used.")
    sizes: dict[Claimant, int] = Field(
        description="Tokens each claimant's section takes in the prompt (framing and a section "
        "separator included; 0 when it holds nothing), added up from per-item counts. "
        "`total` is the exact count of the whole text, usually a few tokens less than the sum."
    )
    granted: dict[Claimant, int] = Field(
        description="The most tokens each claimant could have used when allocation served it "
        "(a ceiling, not a share): for priority 0, all of its content; for the others, its "
        "floor plus the space still unclaimed at its turn in priority order, capped at its "
        "max. Space a claimant leaves unused passes on to the next, so grants overlap and can "
        "sum to more than `budget`. Below its grant, a claimant either ran out of content or "
        "its next whole item did not fit in the rest."
    )
    trimmed: tuple[Claimant, ...] = Field(
        description="Claimants that got less than their content, by their max or by others' claims."
    )
    dropped: tuple[Dropped, ...] = Field(
        description="Every item left out, with its claimant, id and reason; ids only, never "
        "content."
    )
    retrieval_trimmed: bool = Field(
        description="Retrieval got less than it wanted (its content, capped at its max) "
        "because other claimants took the space."
    )
    trimmed_by: dict[Claimant, int] = Field(
        description="When retrieval_trimmed: the claimants holding space retrieval wanted, "
        "and how many tokens each held."
    )
    escalated: str | None = Field(
        description="The id of the document sent whole in place of its chunks, if any."
    )
    tool_schema_tokens: int = Field(
        default=0,
        description="Tokens of the tool schemas sent beside the text (native tool calling), "
        "counted against the budget and included in total; 0 when tools are in the text.",
    )
    prefix_tokens: int = Field(
        description="Tokens in the stable, cacheable prefix (system, examples, tools)."
    )
    prefix_hash: str = Field(
        description="sha256 of the prefix text; equal across requests means the provider's "
        "prompt cache can hit."
    )
    prefix_sections: dict[Claimant, str] = Field(
        default_factory=dict,
        description="sha256 of each prefix section (system, examples, tools; the tool schemas "
        "when tools are sent natively): when prefix_hash changes, which section changed.",
    )
    prefix_warnings: tuple[str, ...] = Field(
        description="Things in the prefix that look like they change per request (a date, a "
        "time, a UUID): they defeat the cache."
    )
    final_check_drops: int = Field(
        description="Items dropped because the exact count of the final text came out over "
        "the per-item estimate, or, with a provider count set, the provider's count of the "
        "request over the budget."
    )
    cleared: tuple[Dropped, ...] = Field(
        default=(),
        exclude_if=nothing_in,
        description="History tool results kept with a placeholder in place of their content "
        "(reason cleared; tokens is what the turn cost before), oldest first. Left out of "
        "dumps when empty.",
    )
    summaries: tuple[SummarySpan, ...] = Field(
        default=(),
        exclude_if=nothing_in,
        description="When a summariser is set: each run of history turns left out, in order, "
        "and whether a summary or the gap marker stands there. Left out of dumps when empty.",
    )
    count_exact: bool = Field(
        default=True,
        exclude_if=_is_true,
        description="Whether every count is the model's own tokenizer's (tiktoken:<encoding>, "
        "or a tokenizer declared exact); False for an upper-bound estimate or a tokenizer "
        'ctxbudget cannot vouch for (docs/tokenizers.md, "Counting other models"). Left out of '
        "dumps when True.",
    )
    count_method: str | None = Field(
        default=None,
        exclude_if=_is_none,
        description="How total was counted, when not offline by the model's own tokenizer: "
        "estimate:<family> (an upper bound for a model whose tokenizer is not public), "
        "callable:<name>, huggingface:<name>, user:<name> for a tokenizer that does not say, "
        "or a provider count's label (anthropic count_tokens, bedrock count_tokens, gemini "
        "count_tokens) when one made the final check. None when the counts are the model's "
        "own tokenizer's. Left out of dumps when None.",
    )
    count_margin: float | None = Field(
        default=None,
        exclude_if=_is_none,
        description="For an upper-bound estimate: its head-room above the worst ratio "
        "measured for that kind of text (0.1 is 10%); None otherwise, and left out of dumps.",
    )
    count_fallback: str | None = Field(
        default=None,
        exclude_if=_is_none,
        description="When a provider count was set but its call failed: why (the SDK's error), "
        "and total is the offline count, an upper bound for an estimate. None otherwise, and "
        "left out of dumps.",
    )

    @property
    def squeezed_by(self) -> dict[Claimant, int]:
        """Deprecated: read `trimmed_by`."""
        warn_renamed("Report.squeezed_by", "Report.trimmed_by")
        return self.trimmed_by
