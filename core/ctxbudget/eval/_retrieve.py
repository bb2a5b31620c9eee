"""Lexical look-ups for the experiments: a BM25 retriever over a pool, and nearness to a chunk.

No index, no model, no download: enough to give the k experiment a ranked list and
the position experiment topically adjacent distractors, deterministically.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Final

from ctxbudget import Chunk
from ctxbudget.eval._cases import Case, check_pool

__all__ = ["Retriever", "lexical_retriever", "nearest", "retrieve_all", "words"]

Retriever = Callable[[str], Sequence[Chunk]]
"""A question -> chunks function, best first: your retriever, or `lexical_retriever(pool)`."""

_WORD: Final = re.compile(r"\w+")
_K1: Final = 1.2
"""BM25's term-frequency saturation: Robertson's usual value (1.2 to 2 is the usual range)."""
_B: Final = 0.75
"""BM25's length normalisation: 0 ignores a text's length, 1 scales fully by it."""


def words(text: str) -> list[str]:
    """The case-folded words of `text` (runs of letters, digits and underscores)."""
    return _WORD.findall(text.casefold())


def _indexed(chunk: Chunk) -> str:
    return " ".join([chunk.title or "", *chunk.heading_path, chunk.content])


def lexical_retriever(pool: Sequence[Chunk], *, limit: int = 100) -> Retriever:
    """A BM25 retriever over `pool` (title, heading path and content): for a question, the
    `limit` best chunks that share a word with it, best first, as copies whose `score` is
    the BM25 score and whose `rerank_score` is cleared, so the assembler keeps that order.

    For trying the experiments on a pool without a search engine; your own retriever
    measures your own stack.
    """
    chunks = check_pool(pool)
    counts = [Counter(words(_indexed(c))) for c in chunks]
    lengths = [sum(c.values()) for c in counts]
    average = sum(lengths) / max(len(lengths), 1) or 1.0
    postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for index, count in enumerate(counts):
        for word, tf in count.items():
            postings[word].append((index, tf))
    total = len(chunks)

    def retrieve(question: str) -> list[Chunk]:
        scores: dict[int, float] = defaultdict(float)
        for word in set(words(question)):
            found = postings.get(word, [])
            idf = math.log(1 + (total - len(found) + 0.5) / (len(found) + 0.5))
            for index, tf in found:
                norm = tf + _K1 * (1 - _B + _B * lengths[index] / average)
                scores[index] += idf * tf * (_K1 + 1) / norm
        best = heapq.nsmallest(limit, scores, key=lambda i: (-scores[i], i))
        return [
            chunks[i].model_copy(update={"score": scores[i], "rerank_score": None}) for i in best
        ]

    return retrieve


def nearest(target: Sequence[Chunk], candidates: Sequence[Chunk]) -> list[Chunk]:
    """`candidates`, nearest to the `target` chunks first (ties keep their order).

    Cosine to the targets' mean embedding when every chunk has an embedding of one size;
    otherwise Jaccard similarity of word sets.
    """
    vectors = [c.embedding for c in (*target, *candidates)]
    if all(v is not None for v in vectors) and len({len(v or ()) for v in vectors}) == 1:
        columns = zip(*(c.embedding or () for c in target), strict=True)
        centre = [sum(column) / len(target) for column in columns]
        key = {c.id: -_cosine(centre, c.embedding or ()) for c in candidates}
    else:
        wanted = set(words(" ".join(_indexed(c) for c in target)))
        key = {c.id: -_jaccard(wanted, set(words(_indexed(c)))) for c in candidates}
    return sorted(candidates, key=lambda c: key[c.id])


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm or 1.0)


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / (len(a | b) or 1)


def retrieve_all(
    retrieve: Retriever, cases: Sequence[Case], limit: int | None
) -> list[list[Chunk]]:
    """The first `limit` chunks (all when None) `retrieve` returns for each case's question."""
    out = []
    for index, case in enumerate(cases):
        found = retrieve(case.question)
        out.append(check_pool(found, f"retrieve(<{case.label(index)} question>)")[:limit])
    return out
