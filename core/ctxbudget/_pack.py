"""Packing whole items into a token grant: the one trimming rule every claimant shares.

Items arrive lazily in preference order (best first). Each is costed only when it
might fit, so a candidate that cannot fit is never tokenized. An item larger than
the whole grant is skipped as "oversize" (told by a free size bound, before any other
look at it); the first item that does not fit in what is left ends the walk
("over_budget"), so what is kept is always the preferred prefix, never a later,
smaller item in place of a better one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ctxbudget._claimants import Claimant
from ctxbudget._report import Dropped, DropReason, DropRun, ItemKind, records

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Part(Generic[T]):
    """A kept item and what it costs in the prompt (its separator included)."""

    key: str
    item: T
    cost: int


@dataclass(frozen=True, slots=True)
class Fit(Generic[T]):
    """The outcome of packing a claimant into a grant."""

    parts: tuple[Part[T], ...]
    """Kept items, most preferred first (the order shrinking undoes)."""
    cost: int
    """Estimated tokens, framing included; 0 when nothing is kept."""
    dropped: tuple[tuple[T, DropReason, int | None], ...] = ()
    """Items looked at and left out: (item, reason, its cost if it was counted)."""
    unreached: tuple[T, ...] = ()
    """Items after the walk stopped; left out as over_budget without being counted."""
    overflow: bool = False
    """Something was left out for lack of space: the content is larger than the grant."""


@dataclass(frozen=True, slots=True)
class Packer(Generic[T]):
    """How one claimant's items are named, bounded and costed."""

    claimant: Claimant
    kind: ItemKind
    key: Callable[[T], str]
    cost: Callable[[T], int]
    """Exact cost of the item as rendered, separator excluded."""
    bound: Callable[[T], int]
    """A cheap lower bound on `cost`."""
    framing: int
    """Cost of the section around the items (tags, notices, the join to the next section)."""
    separator: int
    """Cost of the join between two items."""
    kind_of: Callable[[T], ItemKind] | None = None
    """The report kind per item, when not every item is of `kind`."""
    ceiling: Callable[[T], int] | None = None
    """A still cheaper number never below `bound`: while it fits, `bound` is not computed."""
    quick_bound: Callable[[T], int] | None = None
    """A cheaper number never above `bound`: when it alone exceeds the grant, the item is
    oversize without `bound` being computed."""
    _costs: dict[int, tuple[T, int]] = field(default_factory=dict, compare=False, repr=False)
    """`cost` per item already costed (allocation packs a claimant more than once), by
    identity; holding the item keeps its id from being reused."""

    def cost_of(self, item: T) -> int:
        """`cost(item)`, computed once per item."""
        known = self._costs.get(id(item))
        if known is None or known[0] is not item:
            known = self._costs[id(item)] = (item, self.cost(item))
        return known[1]

    def pack(
        self,
        items: Iterable[T],
        grant: int,
        *,
        reject: Callable[[T, list[T]], DropReason | None] | None = None,
        overhead: Callable[[list[T]], int] | None = None,
    ) -> Fit[T]:
        """Keep the preferred prefix of `items` that fits in `grant` tokens.

        Args:
            reject: drops an item, given the items kept so far, before it is costed.
            overhead: tokens the section needs for a kept set beyond its items (history's
                gap markers); checked for the set each item would make. The returned
                cost includes it.
        """
        room = grant - self.framing
        kept: list[Part[T]] = []
        kept_items: list[T] = []
        dropped: list[tuple[T, DropReason, int | None]] = []
        used = 0
        overflow = False
        walk = iter(items)
        for item in walk:
            # Larger than the whole grant: oversize whatever else it is. This cheap size
            # bound comes before `reject` (dedup), which would read the whole text.
            ceiling = None if self.ceiling is None else self.ceiling(item)
            lower = None
            if ceiling is None or ceiling > room:
                lower = (
                    room + 1
                    if self.quick_bound is not None and self.quick_bound(item) > room
                    else None
                )
                lower = self.bound(item) if lower is None else lower
                if lower > room:
                    dropped.append((item, "oversize", None))
                    overflow = True
                    continue
            if reject is not None and (reason := reject(item, kept_items)) is not None:
                dropped.append((item, reason, None))
                continue
            step = self.separator if kept else 0
            extra = overhead([*kept_items, item]) if overhead is not None else 0
            # used, step and extra are >= 0: a ceiling that fits after them needs no bound.
            if lower is None and ceiling is not None and used + step + ceiling + extra > room:
                lower = self.bound(item)
            if lower is not None and used + step + lower + extra > room:
                dropped.append((item, "over_budget", None))
                overflow = True
                break
            cost = self.cost_of(item)
            if cost > room:
                dropped.append((item, "oversize", cost))
                overflow = True
                continue
            if used + step + cost + extra > room:
                dropped.append((item, "over_budget", cost))
                overflow = True
                break
            kept.append(Part(self.key(item), item, cost + step))
            kept_items.append(item)
            used += cost + step
        if not kept:
            return Fit((), 0, tuple(dropped), tuple(walk), overflow)
        extra = overhead(kept_items) if overhead is not None else 0
        return Fit(tuple(kept), used + extra + self.framing, tuple(dropped), tuple(walk), overflow)

    def shrink(self, fit: Fit[T]) -> Fit[T] | None:
        """`fit` without its least preferred part; None when nothing is left to drop."""
        if not fit.parts:
            return None
        *rest, last = fit.parts
        drop: tuple[T, DropReason, int | None] = (last.item, "over_budget", last.cost)
        cost = fit.cost - last.cost if rest else 0
        return Fit(tuple(rest), cost, (*fit.dropped, drop), fit.unreached, True)

    def drops(self, fit: Fit[T]) -> list[Dropped]:
        """The report records for everything `fit` left out."""
        return records(self.drop_runs(fit))

    def drop_runs(
        self,
        fit: Fit[T],
        *,
        kinds: bool = True,
        names: Callable[[tuple[T, ...]], Sequence[str]] | None = None,
    ) -> list[Dropped | DropRun]:
        """`drops(fit)`, with the items never looked at as one run of records not built yet.

        Often thousands of candidates are never looked at: the report builds their
        records only if it is read (`DeferredDropped`); until then they cost their ids.

        Args:
            kinds: look up each item's kind with `kind_of`; False when the caller knows
                every item is of `kind`.
            names: `key` of each of many items at once, in order, when the caller has a
                cheaper way than one item at a time.
        """
        noted: list[Dropped | DropRun] = [
            self.record(item, reason, tokens, kinds=kinds) for item, reason, tokens in fit.dropped
        ]
        unreached = fit.unreached
        if not unreached:
            return noted
        if self.kind_of is None or not kinds:
            ids = list(map(self.key, unreached)) if names is None else names(unreached)
            noted.append(DropRun(self.claimant, self.kind, "over_budget", ids))
        else:
            noted += [self.record(item, "over_budget", None) for item in unreached]
        return noted

    def record(
        self, item: T, reason: DropReason, tokens: int | None, *, kinds: bool = True
    ) -> Dropped:
        """The report record for one item left out (`kinds` as in `drop_runs`)."""
        kind = self.kind if self.kind_of is None or not kinds else self.kind_of(item)
        return Dropped._unvalidated(self.claimant, kind, self.key(item), reason, tokens)
