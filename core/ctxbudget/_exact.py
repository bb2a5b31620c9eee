"""The last step of every assembly: render, count the final string exactly, and trim to fit.

Per-part counts are estimates of the joined string: BPE can merge differently across
a join. So the final string is counted exactly (from its parts and their joins where
the tokenizer allows, `_joins.py`; else by encoding it), and while it is over the limit the
least preferred item of the lowest-priority claimant goes, but only while that
claimant stays at or above the floor allocation reserved for it (docs/budget.md, "How
space is shared"). When nothing can go, the request fails. With a provider count set
(`_provider.py`), `recount` applies the same rule to the provider's figure for the whole
request. `settle` is the path every entry point takes: allocation (`_allocate.py`), each
claimant's own check of what it got, then the exact count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ctxbudget._allocate import Allocated, allocate
from ctxbudget._claimants import Claimant
from ctxbudget._claims import Claim
from ctxbudget._errors import ContextBudgetError
from ctxbudget._joins import Counted, Piece
from ctxbudget._layout import PREFIX, SECTION_ORDER, SECTION_SEPARATOR, TAIL
from ctxbudget._pack import Fit
from ctxbudget._tokens import CountCache

__all__ = ["MAX_PROVIDER_COUNTS", "Rendered", "recount", "render_exactly", "settle"]

MAX_PROVIDER_COUNTS: Final = 4
"""The most provider count calls one assembly makes (docs/tokenizers.md, "The provider's
own count as the final check")."""


@dataclass(frozen=True)
class Rendered:
    """One request's outcome before it becomes a result: what each claimant kept and shows."""

    claims: Mapping[Claimant, Claim]
    fits: Mapping[Claimant, Fit[Any]]
    prefix: Mapping[Claimant, str]
    """The text of each prefix section (system, examples, tools) that kept something, in
    prompt order; the other sections are not kept apart from `text`, which holds them."""
    text: str
    tail: int
    """Where the sections after the history (memory, sources, question) start in `text`;
    ``len(text)`` when there are none."""
    outside: int
    """Tokens of what is sent beside `text` (tool schemas for native tool calling)."""
    total: int
    """The exact token count of `text`, plus `outside`."""
    drops: int
    """Items the exact count removed after allocation."""


def settle(
    claims: Mapping[Claimant, Claim], available: int, counter: CountCache
) -> tuple[Allocated, Rendered]:
    """Allocate `available` tokens among `claims`, check each claimant's own rule on what it
    was allocated, tell each that allocation is over (`Claim.settled`), and render the
    prompt within `available` by the exact count: the one path of every entry point."""
    allocated = allocate(list(claims.values()), available)
    for name, claim in claims.items():
        claim.require_allocated(allocated.fits[name], allocated.granted[name])
    for claim in claims.values():
        claim.settled()
    return allocated, render_exactly(claims, allocated, available, counter)


def render_exactly(
    claims: Mapping[Claimant, Claim],
    allocated: Allocated,
    limit: int,
    counter: CountCache,
) -> Rendered:
    """Render the claims' fits and drop items until the exact count is within `limit`."""
    fits = dict(allocated.fits)
    drops = 0
    while True:
        rendered = _render(claims, fits, counter, drops)
        if rendered.total <= limit:
            return rendered
        fits = _drop_one(claims, allocated, fits, rendered.total, limit, "the exact count")
        drops += 1


def recount(
    rendered: Rendered,
    allocated: Allocated,
    limit: int,
    counter: CountCache,
    measure: Callable[[Rendered], int],
    *,
    what: str,
) -> tuple[Rendered, int]:
    """Trim `rendered` (which fits by the offline count) until `measure`, one provider
    count of the whole prompt, is within `limit`; at most `MAX_PROVIDER_COUNTS` calls.

    When a count is over, items go in `render_exactly`'s order and under its floors until
    the offline count has fallen by the excess in offline tokens (the excess times the
    offline count over the provider's; before the last count, never less than the excess
    itself), or until nothing more can go; then the provider counts again. Errors from
    `measure` propagate.
    """
    claims = rendered.claims
    for call in range(1, MAX_PROVIDER_COUNTS + 1):
        figure = measure(rendered)
        if figure <= limit:
            return rendered, figure
        scale = rendered.total / figure
        if call == MAX_PROVIDER_COUNTS - 1:
            scale = max(scale, 1.0)
        target = rendered.total - math.ceil((figure - limit) * scale)
        fits, drops, first = dict(rendered.fits), rendered.drops, True
        while rendered.total > target:
            try:
                fits = _drop_one(claims, allocated, fits, figure, limit, what)
            except ContextBudgetError:
                if first:
                    raise
                break  # the provider counts what is left before the request fails
            first = False
            drops += 1
            rendered = _render(claims, fits, counter, drops)
    raise ContextBudgetError(
        "+".join(claims),
        figure,
        limit,
        f"{what} of the prompt was still over the budget after {MAX_PROVIDER_COUNTS:,} counts, "
        "each after dropping items: the assembler's tokenizer counts far fewer tokens than the "
        "provider; pass the model's name as tokenizer= (its estimate is an upper bound), or "
        "lower the budget total",
    )


def _render(
    claims: Mapping[Claimant, Claim],
    fits: Mapping[Claimant, Fit[Any]],
    counter: CountCache,
    drops: int,
) -> Rendered:
    """The prompt the fits make, and its exact count."""
    prefix: dict[Claimant, str] = {}
    pieces: list[Piece] = []
    length = 0
    tail = -1
    for name in SECTION_ORDER:
        if name not in claims:
            continue
        parts = claims[name].pieces(fits[name])
        section = "".join(p if isinstance(p, str) else p.text for p in parts)
        if section:
            if pieces:
                pieces.append(SECTION_SEPARATOR)
                length += len(SECTION_SEPARATOR)
            if name in PREFIX:
                prefix[name] = section
            elif tail < 0 and name in TAIL:
                tail = length  # TAIL ends the order (docs/results.md, "The prompt")
            length += len(section)
            # Each section counted from its parts (and remembered when it recurs), then
            # the sections joined: an unchanged section costs one lookup.
            pieces.append(Counted(section, counter.count_parts(parts)))
    # Of the sections only the prefix's outlive this call (the result shows them); the
    # others are in `text`, and holding them too would double a large prompt's memory
    # (docs/speed.md, "Memory").
    text = "".join(p if isinstance(p, str) else p.text for p in pieces)
    outside = sum(fits[n].cost for n, c in claims.items() if c.outside_text)
    total = counter.count_joined(pieces) + outside
    return Rendered(
        claims, dict(fits), prefix, text, length if tail < 0 else tail, outside, total, drops
    )


def _drop_one(
    claims: Mapping[Claimant, Claim],
    allocated: Allocated,
    fits: Mapping[Claimant, Fit[Any]],
    total: int,
    limit: int,
    what: str,
) -> dict[Claimant, Fit[Any]]:
    """`fits` less the least preferred item of the lowest-priority claimant that can give
    one up above its floor; the error when none can."""
    shrink_order = sorted(
        (c for c in claims.values() if c.allocation.priority > 0),
        key=lambda c: c.allocation.priority,
        reverse=True,
    )
    blocked: Claim | None = None
    for claim in shrink_order:
        name = claim.allocation.name
        smaller = claim.shrink(fits[name])
        if smaller is None:
            continue
        if smaller.cost < allocated.floors[name]:
            blocked = blocked or claim
            continue
        return {**fits, name: smaller}
    raise _over_after_join(claims, fits, blocked, total, limit, what)


def _over_after_join(
    claims: Mapping[Claimant, Claim],
    fits: Mapping[Claimant, Fit[Any]],
    blocked: Claim | None,
    total: int,
    limit: int,
    what: str,
) -> ContextBudgetError:
    """The error when the count (`what` made it) is over and nothing above a floor is left
    to drop."""
    over = total - limit
    if blocked is not None:
        a = blocked.allocation
        held = fits[a.name].cost
        return ContextBudgetError(
            a.name,
            held,
            max(held - over, 0),
            f"{what} of the joined prompt ({total:,}) is {over:,} over the budget, and "
            f"{a.name} cannot give up another item without falling below its floor "
            f"(min={a.min}); lower its min, raise the budget total, or shorten the other parts",
        )
    fixed = "+".join(c for c in claims if claims[c].allocation.priority == 0)
    return ContextBudgetError(
        fixed,
        total,
        limit,
        f"the never-trimmed parts alone exceed the budget once joined ({what}); raise the "
        "budget total or shorten them",
    )
