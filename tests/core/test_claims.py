"""The `Claim` protocol (_claims.py): every claimant implements it, and a claimant written
against it alone is allocated, counted exactly and reported by the assembler's own path."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ctxbudget import (
    Allocation,
    Budget,
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    Tool,
    Turn,
    get_tokenizer,
)
from ctxbudget._claimants import Claimant
from ctxbudget._claims import Claim, ListClaim, TextClaim, text_claim
from ctxbudget._exact import settle
from ctxbudget._history import HistoryClaim
from ctxbudget._layout import FRAMES
from ctxbudget._pack import Fit
from ctxbudget._sources.claim import RetrievedClaim
from ctxbudget._sources.pipeline import SourceOptions, retrieved_claim
from ctxbudget._tools import ToolsClaim, tools_claim
from ctxbudget.types import CountCache
from tests.support.factories import SizedClaim

O200K = get_tokenizer("o200k_base")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def counter() -> CountCache:
    return CountCache(O200K)


def library_claims() -> list[Claim]:
    """One of each claim class the library builds, typed as the protocol (mypy checks each)."""
    text: TextClaim = text_claim(
        Allocation("system", priority=0), "Be brief.", counter=counter(), frame=FRAMES["system"]
    )
    tools: ToolsClaim = tools_claim(
        Allocation("tools", priority=2), [Tool(name="search")], counter=counter()
    )
    history = HistoryClaim(
        Allocation("history", priority=3), [Turn(role="user", content="Hi")], counter=counter()
    )
    retrieved, _ = retrieved_claim(
        Allocation("retrieved", priority=1),
        [Chunk(id="a", document_id="d", content="Refunds take 14 days.")],
        principal=None,
        options=SourceOptions(),
        counter=counter(),
        now=NOW,
    )
    claims: list[Claim] = [text, tools, history, retrieved]
    return claims


def test_claim_every_library_class_satisfies_protocol() -> None:
    claims = library_claims()

    assert [type(c) for c in claims] == [TextClaim, ToolsClaim, HistoryClaim, RetrievedClaim]
    assert all(isinstance(c, Claim) for c in claims)


def test_claim_list_claim_satisfies_protocol() -> None:
    plain: Claim = ListClaim(
        Allocation("memory", priority=4),
        ["a note"],
        counter=counter(),
        frame=FRAMES["memory"],
        kind="text",
        key=str,
        text=str,
    )

    assert isinstance(plain, Claim)


def test_claim_custom_class_satisfies_protocol_without_library_base() -> None:
    custom: Claim = SizedClaim(Allocation("memory", priority=4), {"m0": 5})

    assert isinstance(custom, Claim)
    assert not isinstance(custom, ListClaim)


def test_claim_object_missing_a_member_is_not_a_claim() -> None:
    class FitOnly:
        allocation = Allocation("memory", priority=4)

        def fit(self, grant: int) -> Fit[Any]:
            return Fit((), 0)

    assert not isinstance(FitOnly(), Claim)


def assembled_with_custom_memory(sizes: dict[str, int], *, max_memory: int) -> Any:
    """A request whose memory claimant is a `SizedClaim`, through the assembler's own path."""
    budget = Budget(
        total=1_000,
        allocations=(
            Allocation("question", max=100, priority=0),
            Allocation("memory", max=max_memory, priority=4),
        ),
    )
    assembler = ContextAssembler(tokenizer=O200K, budget=budget)
    question, memory = budget.allocation("question"), budget.allocation("memory")
    assert question is not None
    assert memory is not None
    claims: dict[Claimant, Claim] = {
        "question": text_claim(
            question, "Why?", counter=assembler.counter, frame=FRAMES["question"]
        ),
        "memory": SizedClaim(memory, sizes),
    }
    return assembler._run(claims, [])


def test_claim_custom_claimant_is_allocated_and_rendered() -> None:
    result = assembled_with_custom_memory({"alpha": 10, "beta": 10, "gamma": 10}, max_memory=25)

    assert result.text == "alpha beta\n\nQuestion: Why?"
    assert result.report.sizes["memory"] == 20
    assert result.report.granted["memory"] == 25


def test_claim_custom_claimant_drops_are_reported() -> None:
    result = assembled_with_custom_memory({"alpha": 10, "beta": 10, "gamma": 10}, max_memory=25)

    assert [(d.claimant, d.id, d.reason) for d in result.report.dropped] == [
        ("memory", "gamma", "over_budget")
    ]
    assert result.report.trimmed == ("memory",)


def test_claim_custom_claimant_total_is_exact_count_of_text() -> None:
    result = assembled_with_custom_memory({"alpha": 10}, max_memory=25)

    assert result.report.total == O200K.count(result.text)


class Strict(SizedClaim):
    """A custom claimant whose own checks refuse everything, to see that the engine asks."""

    def floor_error(self, error: ContextBudgetError) -> ContextBudgetError:
        return ContextBudgetError(error.claimant, error.needed, error.left, "custom floor")

    def require_allocated(self, fit: Fit[Any], granted: int) -> None:
        raise ContextBudgetError(self.allocation.name, fit.cost, granted, "custom allocated")

    def require_sent(self, fit: Fit[Any], granted: int) -> None:
        raise ContextBudgetError(self.allocation.name, fit.cost, granted, "custom sent")


def test_claim_floor_error_is_the_claimants_own() -> None:
    strict = Strict(Allocation("memory", min=50, priority=4), {"m0": 50})
    system = SizedClaim(Allocation("system", priority=0), {"s0": 80})

    with pytest.raises(ContextBudgetError, match="custom floor"):
        settle({"system": system, "memory": strict}, 100, counter())


def test_claim_require_allocated_runs_before_the_exact_count() -> None:
    strict = Strict(Allocation("memory", priority=4), {"m0": 5})

    with pytest.raises(ContextBudgetError, match="custom allocated"):
        settle({"memory": strict}, 100, counter())


def test_claim_require_sent_runs_after_the_exact_count() -> None:
    class SentOnly(Strict):
        def require_allocated(self, fit: Fit[Any], granted: int) -> None:
            return None

    assembler = ContextAssembler(tokenizer=O200K, budget=Budget(total=1_000, allocations=()))

    with pytest.raises(ContextBudgetError, match="custom sent"):
        assembler._run({"memory": SentOnly(Allocation("memory", priority=4), {"m0": 5})}, [])
