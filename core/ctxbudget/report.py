"""What an assembly decided, as data: sizes, what was trimmed and dropped, and why."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ctxbudget.budget import Claimant

__all__ = ["DropReason", "Dropped", "ItemKind", "Report"]

DropReason = Literal["forbidden", "below_floor", "duplicate", "empty", "oversize", "over_budget"]
"""Why an item was left out.

forbidden: the principal may not see it. below_floor: under the relevance floor.
duplicate: a near-copy of a better-ranked kept chunk. empty: no text.
oversize: larger than all the space its claimant got. over_budget: did not fit in what was left.
"""

ItemKind = Literal["chunk", "document", "turn", "tool", "text"]


class Dropped(BaseModel):
    """One item left out of the prompt. Carries ids, never content."""

    model_config = ConfigDict(frozen=True)

    claimant: Claimant
    kind: ItemKind
    id: str
    reason: DropReason
    tokens: int | None = None
    """Its cost when it was counted; None when it was ruled out without tokenizing."""

    @classmethod
    def trusted(
        cls,
        claimant: Claimant,
        kind: ItemKind,
        id: str,
        reason: DropReason,
        tokens: int | None = None,
    ) -> Dropped:
        """A record built from values the library produced itself, skipping validation.

        A request can drop thousands of candidates; validating each record would cost
        more than selecting them.
        """
        return cls.model_construct(
            claimant=claimant, kind=kind, id=id, reason=reason, tokens=tokens
        )


class Report(BaseModel):
    """Every decision of one assembly; also logged as one structured record."""

    model_config = ConfigDict(frozen=True)

    budget: int
    """Tokens the prompt may use (total - reserve_output)."""
    total: int
    """Exact token count of the final prompt text."""
    unused: int
    """budget - total."""
    sizes: dict[Claimant, int]
    """Tokens per claimant section (framing and a section separator included), added up
    from per-item counts; `total` is the exact count of the whole text, usually a few
    tokens less than their sum."""
    granted: dict[Claimant, int]
    """Tokens each claimant was allowed to fill."""
    trimmed: tuple[Claimant, ...]
    """Claimants that got less than their content, by their cap or by others' claims."""
    dropped: tuple[Dropped, ...]
    retrieval_trimmed: bool
    """Retrieval got less than it wanted (content capped at max) because others took the space."""
    squeezed_by: dict[Claimant, int]
    """When retrieval_trimmed: the claimants holding space retrieval wanted, and how much."""
    escalated: str | None
    """The document sent whole in place of its chunks, if any."""
    prefix_tokens: int
    """Tokens in the stable, cacheable prefix (system, examples, tools)."""
    prefix_hash: str
    """sha256 of the prefix text; equal across requests means the provider cache can hit."""
    prefix_warnings: tuple[str, ...]
    """Things in the prefix that look like they change per request (they defeat the cache)."""
    final_check_drops: int
    """Items dropped because the exact count of the final text came out over the estimate."""
