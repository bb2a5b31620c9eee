"""Work that grows with the text read, not with the candidates never reached (docs/speed.md,
"Where the time goes").

Step counts, not times: with 25 times the candidates, assembly tokenizes, neutralises and
shingles exactly the same texts, never scans a chunk's bytes beyond its length, and builds
no drop record until the report's `dropped` is read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import ctxbudget._sources.claim
import ctxbudget._sources.dedup
import ctxbudget._sources.sizes
from ctxbudget import Allocation, Budget, Chunk, ContextAssembler, Dropped, Turn

BUDGET = Budget(
    total=3_000,
    allocations=(
        Allocation("system", priority=0),
        Allocation("question", priority=0),
        Allocation("retrieved", max=1_500, priority=1),
        Allocation("history", max=500, priority=2),
    ),
)


def candidates(n: int, *, counts: bool) -> list[Chunk]:
    return [
        Chunk(
            id=f"c{i}",
            document_id=f"d{i // 5}",
            content=f"Passage {i} about the refund policy, caf\u00e9 rules and returns. " * 12,
            score=1 - i / n,
            tokens=12 * 14 if counts else None,
        )
        for i in range(n)
    ]


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> Counter[str]:
    calls: Counter[str] = Counter()
    real: Callable[..., Any] = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def work(monkeypatch: pytest.MonkeyPatch, n: int, *, counts: bool) -> tuple[int, ...]:
    neutralised = counting(monkeypatch, ctxbudget._sources.claim, "neutralise")
    scanned = counting(monkeypatch, ctxbudget._sources.sizes, "removable_bytes")
    shingled = counting(monkeypatch, ctxbudget._sources.dedup, "shingles")
    assembler = ContextAssembler(tokenizer="o200k_base", budget=BUDGET)
    result = assembler.assemble(
        system="Answer from the sources.",
        question="How long do refunds take?",
        chunks=candidates(n, counts=counts),
        history=[Turn(role="user", content="Hello there, about my order.")],
    )
    assert len(result.report.dropped) == n - len(result.sources)
    monkeypatch.undo()
    return (
        assembler.counter.calls,
        neutralised["neutralise"],
        scanned["removable_bytes"],
        shingled["shingles"],
    )


@pytest.mark.parametrize("counts", [True, False])
def test_more_candidates_than_reached_add_no_text_work(
    monkeypatch: pytest.MonkeyPatch, counts: bool
) -> None:
    small = work(monkeypatch, 200, counts=counts)
    large = work(monkeypatch, 5_000, counts=counts)
    assert large == small
    assert small[2] == 0  # no chunk's bytes scanned: its length alone showed it may fit


def records_built(monkeypatch: pytest.MonkeyPatch, n: int) -> tuple[int, int]:
    """Drop records built by assembling `n` candidates, and by then reading the report."""
    built = [0]
    real = Dropped._many.__func__  # type: ignore[attr-defined]

    def spy(cls: type[Dropped], *args: Any, **kwargs: Any) -> list[Dropped]:
        records: list[Dropped] = real(cls, *args, **kwargs)
        built[0] += len(records)
        return records

    monkeypatch.setattr(Dropped, "_many", classmethod(spy))
    result = ContextAssembler(tokenizer="o200k_base", budget=BUDGET).assemble(
        question="How long do refunds take?", chunks=candidates(n, counts=True)
    )
    during = built[0]
    assert len(result.report.dropped) == n - len(result.sources)
    monkeypatch.undo()
    return during, built[0] - during


def test_more_candidates_build_no_drop_records_until_the_report_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small, large = records_built(monkeypatch, 200), records_built(monkeypatch, 5_000)
    assert small[0] == large[0]  # the few items looked at, not the candidates never read
    assert large[1] - small[1] == 4_800
