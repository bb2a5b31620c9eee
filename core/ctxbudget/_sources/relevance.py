"""The relevance step: drop what is not worth reading before anything is counted.

A chunk with nothing a reader can see (whitespace, invisible characters) is `empty`;
one whose relevance — the rerank score when there is one, else the retriever's
score — is under `min_relevance` is `below_floor`. Chunks without a score are kept:
no score is not a low score.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import attrgetter, itemgetter

from ctxbudget._inputs import Chunk
from ctxbudget._normalised import is_blank
from ctxbudget._report import Dropped, DropReason, DropRun

__all__ = ["relevance", "relevant"]


def relevance(chunk: Chunk) -> float | None:
    """The score the floor compares: rerank score, else retriever score, else None."""
    return chunk.rerank_score if chunk.rerank_score is not None else chunk.score


def _opens_visibly(text: str) -> bool:
    """Whether `text` starts with a printable ASCII character other than a space, which
    `is_blank` sees: such a text is not blank, and most chunk texts start so.

    One string compare: the texts between "!" and "\\x7f" in string order are exactly those.
    It reads one character and makes no slice (`_opens_visibly_by_index` is the plain form).
    """
    return "!" <= text < "\x7f"


def _opens_visibly_by_index(text: str) -> bool:
    """`_opens_visibly`, written plainly: the reference its tests compare it with."""
    return text != "" and "!" <= text[0] <= "~"


def _blank(text: str) -> bool:
    """`is_blank(text)`, its full look spared for a text that opens visibly."""
    return not _opens_visibly(text) and is_blank(text)


_CONTENT = attrgetter("content")


def _any_blank(chunks: Sequence[Chunk]) -> bool:
    """`any(_blank(c.content) for c in chunks)`, with `_opens_visibly` written inline: one
    compare per text that opens visibly (most of them), no call."""
    return any(is_blank(text) for text in map(_CONTENT, chunks) if not "!" <= text < "\x7f")


def relevant(
    chunks: Sequence[Chunk], min_relevance: float | None
) -> tuple[list[Chunk], list[Dropped | DropRun]]:
    """The step: chunks worth reading, and the rest as `empty` or `below_floor`."""
    # Without a floor, one pass that finds no blank text decides for all.
    if min_relevance is None and not _any_blank(chunks):
        return list(chunks), []
    kept: list[Chunk] = []
    dropped: list[tuple[str, DropReason]] = []
    for chunk in chunks:
        text = chunk.content
        if _blank(text):
            dropped.append((chunk.id, "empty"))
        elif (
            min_relevance is not None
            and (score := relevance(chunk)) is not None
            and score < min_relevance
        ):
            dropped.append((chunk.id, "below_floor"))
        else:
            kept.append(chunk)
    # In the order found, each run of one reason as one `DropRun`.
    return kept, [
        DropRun("retrieved", "chunk", reason, [chunk_id for chunk_id, _ in run])
        for reason, run in groupby(dropped, key=itemgetter(1))
    ]
