"""The two-pass allocation rule (core/ctxbudget/_allocate.py).

Claimants here are made of whole items with exact sizes (no framing, no separators),
so every grant and cost below can be checked by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Allocation, ContextBudgetError
from ctxbudget._allocate import Allocated, allocate
from ctxbudget.types import CLAIMANTS, Claimant
from tests.support.factories import SizedClaim


def claim(
    name: Claimant, *sizes: int, min: int = 0, max: int | None = None, priority: int = 1
) -> SizedClaim:
    """Claimant `name` with items `name0`, `name1`, ... of the given sizes."""
    return SizedClaim(
        Allocation(name, min=min, max=max, priority=priority),
        {f"{name}{i}": size for i, size in enumerate(sizes)},
    )


def kept(allocated: Allocated, name: Claimant) -> list[str]:
    return [part.key for part in allocated.fits[name].parts]


def costs(allocated: Allocated) -> dict[Claimant, int]:
    return {name: fit.cost for name, fit in allocated.fits.items()}


# --- pass 1: floors -----------------------------------------------------------------------


def test_allocate_floor_reserved_before_higher_priority_remainder() -> None:
    retrieved = claim("retrieved", *[10] * 10, priority=1)
    history = claim("history", 10, 10, 10, 10, min=30, priority=3)

    allocated = allocate([retrieved, history], 100)

    assert costs(allocated) == {"retrieved": 70, "history": 30}


def test_allocate_floor_unmet_raises_with_numbers() -> None:
    system = claim("system", 80, priority=0)
    retrieved = claim("retrieved", 25, 25, 25, min=50, priority=1)

    with pytest.raises(ContextBudgetError) as caught:
        allocate([system, retrieved], 100)

    assert (caught.value.claimant, caught.value.needed, caught.value.left) == ("retrieved", 50, 20)


def test_allocate_floor_unmet_message_names_claimant_numbers_and_holders() -> None:
    system = claim("system", 80, priority=0)
    retrieved = claim("retrieved", 25, 25, 25, min=50, priority=1)

    with pytest.raises(
        ContextBudgetError,
        match=r"'retrieved' needs 50 tokens but only 20 are left: its floor \(min=50\) cannot be "
        r"met after higher-priority claimants took their share \(system 80\)",
    ):
        allocate([system, retrieved], 100)


def test_allocate_floor_unmet_message_formats_thousands() -> None:
    system = claim("system", 4_000, priority=0)
    retrieved = claim("retrieved", 1_000, 1_000, min=1_200, priority=1)

    with pytest.raises(
        ContextBudgetError, match=r"'retrieved' needs 1,200 tokens but only 1,000 are left"
    ):
        allocate([system, retrieved], 5_000)


def test_allocate_floors_met_in_priority_order() -> None:
    # examples is declared first but served second, so it is the one whose floor fails.
    examples = claim("examples", 30, min=30, priority=2)
    retrieved = claim("retrieved", 40, min=40, priority=1)

    with pytest.raises(ContextBudgetError) as caught:
        allocate([examples, retrieved], 60)

    assert (caught.value.claimant, caught.value.needed, caught.value.left) == ("examples", 30, 20)


def test_allocate_floor_above_content_is_not_an_error() -> None:
    # A floor guards space, not content: two small items that are all there is are fine.
    retrieved = claim("retrieved", 5, 5, min=50, priority=1)

    allocated = allocate([retrieved], 20)

    assert kept(allocated, "retrieved") == ["retrieved0", "retrieved1"]


def test_allocate_floor_above_content_reserves_only_content() -> None:
    system = claim("system", 10, priority=0)
    retrieved = claim("retrieved", 5, 5, min=50, priority=1)
    history = claim("history", 10, min=10, priority=3)

    allocated = allocate([system, retrieved, history], 30)

    assert costs(allocated) == {"system": 10, "retrieved": 10, "history": 10}


# --- priority 0 ---------------------------------------------------------------------------


def test_allocate_priority_zero_keeps_all_content() -> None:
    system = claim("system", 30, 30, priority=0)
    retrieved = claim("retrieved", 20, 20, 20, priority=1)

    allocated = allocate([retrieved, system], 100)

    assert kept(allocated, "system") == ["system0", "system1"]
    assert allocated.granted["system"] == 60
    assert costs(allocated)["retrieved"] == 40


def test_allocate_priority_zero_not_trimmed_to_make_room_for_floor() -> None:
    system = claim("system", 90, priority=0)
    retrieved = claim("retrieved", 20, min=20, priority=1)

    with pytest.raises(ContextBudgetError) as caught:
        allocate([retrieved, system], 100)

    assert (caught.value.claimant, caught.value.needed, caught.value.left) == ("retrieved", 20, 10)


def test_allocate_priority_zero_never_trimmed_by_others() -> None:
    allocated = allocate([claim("system", 30, priority=0)], 100)

    assert allocated.trimmed_by_others["system"] is False


def test_allocate_priority_zero_over_its_max_raises_with_content() -> None:
    system = claim("system", 6, 6, max=10, priority=0)

    with pytest.raises(ContextBudgetError) as caught:
        allocate([system], 100)

    assert (caught.value.claimant, caught.value.needed, caught.value.left) == ("system", 12, 10)


def test_allocate_priority_zero_over_its_max_message_names_fix() -> None:
    system = claim("system", 6, 6, max=10, priority=0)

    with pytest.raises(
        ContextBudgetError,
        match=r"'system' needs 12 tokens but only 10 are left: its max is 10 and priority-0 "
        "parts are never trimmed; raise its max or shorten it",
    ):
        allocate([system], 100)


def test_allocate_priority_zero_over_what_is_left_raises() -> None:
    system = claim("system", 80, priority=0)
    question = claim("question", 15, 15, priority=0)

    with pytest.raises(ContextBudgetError) as caught:
        allocate([system, question], 100)

    assert (caught.value.claimant, caught.value.needed, caught.value.left) == ("question", 30, 20)


def test_allocate_priority_zero_over_what_is_left_message_names_holders() -> None:
    system = claim("system", 80, priority=0)
    question = claim("question", 15, 15, priority=0)

    with pytest.raises(
        ContextBudgetError,
        match=r"'question' needs 30 tokens but only 20 are left: priority-0 parts are never "
        r"trimmed and higher-priority claimants took their share \(system 80\)",
    ):
        allocate([system, question], 100)


# --- pass 2: the remainder ----------------------------------------------------------------


def test_allocate_remainder_goes_in_priority_order() -> None:
    history = claim("history", *[10] * 10, priority=3)
    tools = claim("tools", *[10] * 10, priority=2)

    allocated = allocate([history, tools], 100)

    assert costs(allocated) == {"tools": 100, "history": 0}


def test_allocate_remainder_capped_at_max() -> None:
    retrieved = claim("retrieved", *[10] * 5, max=30, priority=1)
    history = claim("history", *[10] * 5, priority=3)

    allocated = allocate([retrieved, history], 100)

    assert allocated.granted == {"retrieved": 30, "history": 70}
    assert costs(allocated) == {"retrieved": 30, "history": 50}


def test_allocate_small_high_priority_claimant_does_not_block_lower() -> None:
    retrieved = claim("retrieved", 10, max=3_000, priority=1)
    history = claim("history", 40, 40, priority=3)

    allocated = allocate([retrieved, history], 100)

    assert costs(allocated) == {"retrieved": 10, "history": 80}


def test_allocate_unusable_gap_flows_to_next_claimant() -> None:
    retrieved = claim("retrieved", 30, 30, priority=1)
    history = claim("history", 20, priority=3)

    allocated = allocate([retrieved, history], 50)

    assert kept(allocated, "retrieved") == ["retrieved0"]
    assert kept(allocated, "history") == ["history0"]
    assert allocated.granted == {"retrieved": 50, "history": 20}


def test_allocate_max_none_is_uncapped() -> None:
    retrieved = claim("retrieved", *[100] * 5, priority=1)

    allocated = allocate([retrieved], 350)

    assert allocated.granted["retrieved"] == 350
    assert costs(allocated)["retrieved"] == 300


def test_allocate_max_zero_grants_nothing() -> None:
    tools = claim("tools", 1, max=0, priority=2)

    allocated = allocate([tools], 100)

    assert allocated.granted["tools"] == 0
    assert allocated.fits["tools"].parts == ()
    assert costs(allocated)["tools"] == 0


# --- trimmed by others, and holders -----------------------------------------------------


def crowded_setup() -> list[SizedClaim]:
    return [
        claim("system", 30, priority=0),
        claim("retrieved", *[20] * 4, max=100, priority=1),
        claim("history", 10, 10, min=10, priority=3),
    ]


def test_allocate_trimmed_by_others_when_they_hold_space() -> None:
    allocated = allocate(crowded_setup(), 100)

    assert costs(allocated) == {"system": 30, "retrieved": 60, "history": 10}
    assert allocated.trimmed_by_others == {"system": False, "retrieved": True, "history": True}


def test_allocate_holders_name_floors_not_yet_served() -> None:
    allocated = allocate(crowded_setup(), 100)

    assert allocated.holders["retrieved"] == {"system": 30, "history": 10}


def test_allocate_holders_name_fits_already_served() -> None:
    allocated = allocate(crowded_setup(), 100)

    assert allocated.holders["history"] == {"system": 30, "retrieved": 60}


def test_allocate_not_trimmed_by_others_when_own_max_limits() -> None:
    retrieved = claim("retrieved", *[10] * 5, max=30, priority=1)

    allocated = allocate([retrieved], 1_000)

    assert allocated.fits["retrieved"].overflow is True
    assert allocated.trimmed_by_others["retrieved"] is False
    assert "retrieved" not in allocated.holders


def test_allocate_not_trimmed_by_others_when_content_small() -> None:
    system = claim("system", 50, priority=0)
    retrieved = claim("retrieved", 10, priority=1)

    allocated = allocate([system, retrieved], 100)

    assert allocated.trimmed_by_others["retrieved"] is False
    assert "retrieved" not in allocated.holders


# --- the invariant ------------------------------------------------------------------------


@st.composite
def claim_sets(draw: st.DrawFn) -> tuple[list[SizedClaim], int]:
    names = draw(st.lists(st.sampled_from(CLAIMANTS), min_size=1, max_size=7, unique=True))
    claims = []
    for name in names:
        low = draw(st.integers(0, 60))
        high = draw(st.none() | st.integers(low, 120))
        sizes = draw(st.lists(st.integers(0, 40), max_size=6))
        claims.append(claim(name, *sizes, min=low, max=high, priority=draw(st.integers(0, 4))))
    return claims, draw(st.integers(0, 300))


def allocate_or_error(claims: list[SizedClaim], available: int) -> Allocated | ContextBudgetError:
    try:
        return allocate(claims, available)
    except ContextBudgetError as error:
        return error


@given(claim_sets())
def test_allocate_fits_budget_or_raises(case: tuple[list[SizedClaim], int]) -> None:
    claims, available = case
    allocated = allocate_or_error(claims, available)
    if isinstance(allocated, ContextBudgetError):
        assert allocated.needed > allocated.left
        return

    assert set(allocated.fits) == {c.allocation.name for c in claims}
    assert sum(fit.cost for fit in allocated.fits.values()) <= available
    for c in claims:
        a = c.allocation
        fit, grant = allocated.fits[a.name], allocated.granted[a.name]
        assert fit.cost <= grant
        if a.priority == 0:
            assert [part.key for part in fit.parts] == list(c.sizes)
        elif c.content_cost() >= a.min:
            assert grant >= a.min
        else:
            assert [part.key for part in fit.parts] == list(c.sizes)
