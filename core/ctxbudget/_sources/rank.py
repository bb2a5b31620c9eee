"""Rank: best first by rerank score, then retriever score, then the order given.

What is kept is decided by rank (docs/sources.md, "Select"); `arrange` only decides where
it stands. Ranking sorts positions, not chunks, in C: what is known of each chunk by
position (its id, read once in the order given) follows without reading it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import cast, overload

from ctxbudget._inputs import Chunk

__all__ = ["Positions", "RankedIds", "rank", "ranking"]


def rank(chunks: Sequence[Chunk]) -> list[Chunk]:
    """Best first: rerank score, then retriever score, then the order given.

    A chunk without a rerank score ranks after every chunk with one; within either
    group, one without a retriever score ranks after every chunk with one.
    """
    return list(map(chunks.__getitem__, ranking(chunks)))


def ranking(chunks: Sequence[Chunk]) -> list[int]:
    """The positions of `chunks` in `rank` order.

    Positions rather than chunks, so that what is known of each chunk by position (its
    id, read once in the order given) can be put in rank order without reading it again.
    """
    # Stable sorts on one float each, in C: the order of the key (rerank is None, -rerank,
    # score is None, -score, position), without building a tuple per candidate. Every
    # field is read once, in the order given: reading chunks in rank order misses the cache.
    reranks = list(map(_RERANK, chunks))
    scores = list(map(_SCORE, chunks))
    positions = range(len(chunks))
    if reranks.count(None) == len(reranks):
        return _best_first(scores, positions)
    reranked = [p for p in positions if reranks[p] is not None]
    plain = [p for p in positions if reranks[p] is None]
    return sorted(
        _best_first(scores, reranked), key=reranks.__getitem__, reverse=True
    ) + _best_first(scores, plain)


_ID = attrgetter("id")
_RERANK = attrgetter("rerank_score")
_SCORE = attrgetter("score")


def _best_first(keys: list[float | None], positions: Sequence[int]) -> list[int]:
    """`positions` by `keys[position]`, highest first; ties and None keys in the order given."""
    # Typed as floats: a None key raises in the first sort and is left out of the second.
    key = cast("Callable[[int], float]", keys.__getitem__)
    if len(positions) > 1:
        # A sort of two or more items that returns has compared each item with its
        # neighbour in the result (else their order would be a guess), and comparing None
        # raises TypeError: so it saw no None key, and its order is the one below. Cheaper
        # than looking for None first.
        try:
            return sorted(positions, key=key, reverse=True)
        except TypeError:
            pass
    known = [p for p in positions if keys[p] is not None]
    return sorted(known, key=key, reverse=True) + [p for p in positions if keys[p] is None]


class RankedIds(Sequence[str]):
    """The ids of ranked chunks, from their ids in the order given and `ranking`'s positions.

    Candidates never read are reported by id; named from here, not one chunk at a time in
    rank order, their ids cost nothing until the report's records are built.
    """

    def __init__(self, ids: Sequence[str], positions: Sequence[int]) -> None:
        self._ids = ids
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    def __iter__(self) -> Iterator[str]:
        return map(self._ids.__getitem__, self._positions)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> RankedIds: ...

    def __getitem__(self, index: int | slice) -> str | RankedIds:
        if isinstance(index, slice):
            return RankedIds(self._ids, self._positions[index])
        return self._ids[self._positions[index]]


class Positions(Mapping[str, int]):
    """Rank positions by chunk id, indexed only as far as lookups reach.

    Lookups are of kept chunks, which come first in rank: most candidates of a long list
    are never indexed.
    """

    def __init__(self, ranked: Sequence[Chunk]) -> None:
        self._ranked = ranked
        self._index: dict[str, int] = {}

    def __getitem__(self, key: str) -> int:
        found = self._index.get(key)
        index = len(self._index)
        while found is None and index < len(self._ranked):
            chunk_id = self._ranked[index].id
            self._index[chunk_id] = index
            index += 1
            if chunk_id == key:
                found = index - 1
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return (c.id for c in self._ranked)

    def __len__(self) -> int:
        return len(self._ranked)
