"""The relevance step: drop what is not worth reading before anything is counted.

A chunk with nothing a reader can see (whitespace, invisible characters) is `empty`;
one whose relevance — the rerank score when there is one, else the retriever's
score — is under `min_relevance` is `below_floor`. Chunks without a score are kept:
no score is not a low score.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget._fence import is_blank
from ctxbudget._inputs import Chunk
from ctxbudget._report import Dropped

__all__ = ["relevance", "relevant"]


def relevance(chunk: Chunk) -> float | None:
    """The score the floor compares: rerank score, else retriever score, else None."""
    return chunk.rerank_score if chunk.rerank_score is not None else chunk.score


def relevant(
    chunks: Sequence[Chunk], min_relevance: float | None
) -> tuple[list[Chunk], list[Dropped]]:
    """The step: chunks worth reading, and the rest as `empty` or `below_floor`."""
    kept: list[Chunk] = []
    dropped: list[Dropped] = []
    for chunk in chunks:
        if is_blank(chunk.content):
            dropped.append(Dropped._unvalidated("retrieved", "chunk", chunk.id, "empty"))
        elif (
            min_relevance is not None
            and (score := relevance(chunk)) is not None
            and score < min_relevance
        ):
            dropped.append(Dropped._unvalidated("retrieved", "chunk", chunk.id, "below_floor"))
        else:
            kept.append(chunk)
    return kept, dropped
