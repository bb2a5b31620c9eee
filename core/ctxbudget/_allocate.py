"""Two-pass allocation: floors first, then the remainder, both in priority order.

Pass 1 reserves each claimant's floor (min of its content and its `min`), so a
small high-priority claimant never starves a lower one that fits, and a floor that
cannot be met fails before anything is trimmed. Pass 2 hands out what is left,
again in priority order; space a claimant cannot use (whole items leave gaps)
flows on to the next one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxbudget._budget import Allocation
from ctxbudget._claimants import Claimant
from ctxbudget._claims import Claim
from ctxbudget._errors import ContextBudgetError
from ctxbudget._pack import Fit

__all__ = ["Allocated", "allocate"]


@dataclass(frozen=True)
class Allocated:
    """The fits and grants of every claimant, and who trimmed retrieval by holding space."""

    fits: dict[Claimant, Fit[Any]]
    floors: dict[Claimant, int]
    """What pass 1 reserved per claimant: no later step may shrink it below this."""
    granted: dict[Claimant, int]
    trimmed_by_others: dict[Claimant, bool]
    """Per claimant: it wanted more than it got, because of others (not its own max)."""
    holders: dict[Claimant, dict[Claimant, int]]
    """For each claimant trimmed by others: who held space when it was served, and how much."""


def allocate(claims: Sequence[Claim], available: int) -> Allocated:
    """Grant `available` tokens among `claims` by the two-pass rule; raise if a floor cannot fit."""
    ordered = sorted(claims, key=lambda c: c.allocation.priority)
    floors: dict[Claimant, int] = {}
    fits: dict[Claimant, Fit[Any]] = {}
    left = available

    # Pass 1: floors. Priority 0 takes all of its content (it is never trimmed).
    for claim in ordered:
        a = claim.allocation
        if a.priority == 0:
            cap = left if a.max is None else min(a.max, left)
            fit = claim.fit(cap)
            if fit.overflow:
                raise _never_trimmed_error(claim, left, floors)
            fits[a.name] = fit
            floor = fit.cost
        elif not a.required:
            floor = 0
        else:
            probe = claim.fit(a.min)
            floor = a.min if probe.overflow else probe.cost
            if floor > left:
                raise claim.floor_error(
                    ContextBudgetError(
                        a.name,
                        floor,
                        left,
                        f"its floor (min={a.min}) cannot be met after {_holding(floors)}; lower "
                        "its min, raise the budget total, or shorten the higher-priority parts",
                    )
                )
        floors[a.name] = floor
        left -= floor

    # Pass 2: the remainder, up to each claimant's max.
    granted: dict[Claimant, int] = {}
    trimmed_by_others: dict[Claimant, bool] = {}
    holders: dict[Claimant, dict[Claimant, int]] = {}
    for claim in ordered:
        a = claim.allocation
        if a.priority == 0:
            granted[a.name] = fits[a.name].cost
            trimmed_by_others[a.name] = False
            continue
        room = floors[a.name] + left
        grant = _cap(a, room)
        fit = claim.fit(grant)
        fits[a.name] = fit
        granted[a.name] = grant
        held = {
            name: fits[name].cost if name in fits else floor
            for name, floor in floors.items()
            if name != a.name and (fits[name].cost if name in fits else floor) > 0
        }
        # Trimmed by others: they held space, and with that space it would have kept more.
        # Its own max, a small content, or whole items that would not fit anyway do not count.
        trimmed_by_others[a.name] = (
            fit.overflow
            and (a.max is None or a.max > room)
            and bool(held)
            and claim.fit(_cap(a, room + sum(held.values()))).cost > fit.cost
        )
        if trimmed_by_others[a.name]:
            holders[a.name] = held
        left = room - fit.cost
    return Allocated(fits, floors, granted, trimmed_by_others, holders)


def _cap(allocation: Allocation, room: int) -> int:
    return room if allocation.max is None else min(allocation.max, room)


def _holding(floors: dict[Claimant, int]) -> str:
    held = [f"{name} {tokens:,}" for name, tokens in floors.items() if tokens]
    return "higher-priority claimants took their share (" + (", ".join(held) or "none") + ")"


def _never_trimmed_error(
    claim: Claim, left: int, floors: dict[Claimant, int]
) -> ContextBudgetError:
    a = claim.allocation
    needed = claim.content_cost()
    if a.max is not None and needed > a.max:
        return ContextBudgetError(
            a.name,
            needed,
            min(a.max, left),
            f"its max is {a.max:,} and priority-0 parts are never trimmed; raise its max or "
            "shorten it",
        )
    return ContextBudgetError(
        a.name,
        needed,
        left,
        f"priority-0 parts are never trimmed and {_holding(floors)}; raise the budget total "
        "or shorten the priority-0 parts",
    )
