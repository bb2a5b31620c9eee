"""Arrangement: where kept sources stand. What is kept was decided by rank; this only moves it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Literal, TypeVar

from ctxbudget._inputs import Chunk

__all__ = ["Order", "arrange", "sandwich"]

Order = Literal["by_document", "relevance", "sandwich", "chronological"]

T = TypeVar("T")


def sandwich(ranked: Sequence[T]) -> list[T]:
    """Best at both ends, worst in the middle ("lost in the middle" mitigation).

    The best item is first and the second best last, for every length. This is
    Haystack's LostInTheMiddleRanker order; LangChain's LongContextReorder gives the
    same order for odd lengths and puts the best item last for even ones.
    """
    out: list[T] = []
    for item in ranked:
        out.insert(len(out) // 2 + len(out) % 2, item)
    return out


def arrange(ranked: Sequence[Chunk], order: Order) -> list[Chunk]:
    """The kept chunks (given best first) in prompt order.

    by_document: documents in the order of their best chunk, a document's chunks by
    ordinal (then rank). relevance: best first. sandwich: see `sandwich`.
    chronological: oldest first by effective date, else update time; undated last.
    """
    position = {c.id: i for i, c in enumerate(ranked)}
    if order == "relevance":
        return list(ranked)
    if order == "sandwich":
        return sandwich(ranked)
    if order == "chronological":
        return sorted(
            ranked, key=lambda c: (_when(c) is None, _when(c) or datetime.min, position[c.id])
        )
    first: dict[str, int] = {}
    for chunk in ranked:
        first.setdefault(chunk.document_id, position[chunk.id])
    return sorted(
        ranked,
        key=lambda c: (
            first[c.document_id],
            c.ordinal is None,
            c.ordinal if c.ordinal is not None else 0,
            position[c.id],
        ),
    )


def _when(chunk: Chunk) -> datetime | None:
    if chunk.effective_date is not None:
        return _as_datetime(chunk.effective_date)
    if chunk.updated_at is not None:
        moment = chunk.updated_at
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return moment
    return None


def _as_datetime(day: date) -> datetime:
    return datetime(day.year, day.month, day.day)
