"""Context size as a regression test: the p95 of prompt tokens over sample cases.

Averages hide the requests that grow: a template change, a larger k or a longer
system prompt shows in the tail first. `assert_context_p95_below` makes "p95 stays
under N tokens" one line of a test suite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ctxbudget import ContextAssembler
from ctxbudget.eval._cases import Case, as_cases
from ctxbudget.eval._prompts import check_system
from ctxbudget.eval._retrieve import Retriever, retrieve_all

__all__ = ["assert_context_p95_below", "context_size_p95", "context_sizes"]


def context_sizes(
    assembler: ContextAssembler,
    cases: Iterable[Case | Mapping[str, Any]],
    *,
    retrieve: Retriever | None = None,
    system: str | None = None,
) -> list[int]:
    """The prompt tokens (`report.total`) `assembler` builds for each case, in case order.

    Each case's chunks are what `retrieve` returns for its question (all of them, as a
    retriever's top k), else the case's gold chunks.
    """
    cases = as_cases(cases)
    system = check_system(system)
    chunks = (
        [list(c.gold) for c in cases]
        if retrieve is None
        else retrieve_all(retrieve, cases, limit=None)
    )
    return [
        assembler.assemble(system=system, question=case.question, chunks=found).report.total
        for case, found in zip(cases, chunks, strict=True)
    ]


def context_size_p95(
    assembler: ContextAssembler,
    cases: Iterable[Case | Mapping[str, Any]],
    *,
    retrieve: Retriever | None = None,
    system: str | None = None,
) -> int:
    """The 95th percentile of prompt tokens over `cases` (nearest rank: a size some case
    actually had). See `context_sizes` for what is assembled."""
    return _p95(context_sizes(assembler, cases, retrieve=retrieve, system=system))


def assert_context_p95_below(
    assembler: ContextAssembler,
    cases: Iterable[Case | Mapping[str, Any]],
    limit: int,
    *,
    retrieve: Retriever | None = None,
    system: str | None = None,
) -> int:
    """Raise `AssertionError` unless the p95 of prompt tokens is below `limit`; returns it.

    >>> def test_prompts_stay_small():
    ...     assert_context_p95_below(assembler, SAMPLE_CASES, 3_000, retrieve=my_retriever)
    """
    sizes = context_sizes(assembler, cases, retrieve=retrieve, system=system)
    p95 = _p95(sizes)
    if p95 >= limit:
        largest = sorted(range(len(sizes)), key=lambda i: -sizes[i])[:3]
        shown = ", ".join(f"cases[{i}] {sizes[i]:,}" for i in largest)
        raise AssertionError(
            f"p95 of prompt tokens over {len(sizes)} cases is {p95:,}, not below {limit:,} "
            f"(largest: {shown})"
        )
    return p95


def _p95(sizes: list[int]) -> int:
    return sorted(sizes)[math.ceil(0.95 * len(sizes)) - 1]
