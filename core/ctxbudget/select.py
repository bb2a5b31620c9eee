"""The retrieved claimant: whole chunks taken by rank, best first, until the allocation is full."""

from __future__ import annotations

from collections.abc import Sequence

from ctxbudget._claims import ListClaim
from ctxbudget._fit import Fit
from ctxbudget.budget import Allocation
from ctxbudget.fence import FENCE
from ctxbudget.inputs import Chunk
from ctxbudget.render import header, render_source
from ctxbudget.tokens import TokenCounter

__all__ = ["RetrievedClaim", "rank"]


def rank(chunks: Sequence[Chunk]) -> list[Chunk]:
    """Best first: rerank score, then retriever score, then the order given.

    A chunk without a rerank score ranks after every chunk with one.
    """
    order = {id(c): i for i, c in enumerate(chunks)}
    return sorted(
        chunks,
        key=lambda c: (
            c.rerank_score is None,
            -(c.rerank_score or 0.0),
            c.score is None,
            -(c.score or 0.0),
            order[id(c)],
        ),
    )


class RetrievedClaim(ListClaim[Chunk]):
    """Ranked chunks packed whole; a chunk's cost is its header plus its content."""

    def __init__(
        self, allocation: Allocation, ranked: Sequence[Chunk], *, counter: TokenCounter
    ) -> None:
        # Numbers are assigned after selection; cost every header with the widest number.
        widest = max(len(ranked), 1)

        def content(chunk: Chunk) -> int:
            return chunk.tokens if chunk.tokens is not None else counter.count(chunk.content)

        def bound(chunk: Chunk) -> int:
            return chunk.tokens if chunk.tokens is not None else counter.lower_bound(chunk.content)

        super().__init__(
            allocation,
            ranked,
            counter=counter,
            frame=FENCE,
            kind="chunk",
            key=lambda c: c.id,
            text=lambda c: render_source(widest, c),
            cost=lambda c: counter.count(header(widest, c) + "\n") + content(c),
            bound=bound,
        )

    def sources(self, fit: Fit[Chunk]) -> list[Chunk]:
        """Kept chunks in prompt order; the n-th is source [n]."""
        return [part.item for part in fit.parts]

    def render(self, fit: Fit[Chunk]) -> str:
        if not fit.parts:
            return ""
        blocks = [render_source(n, chunk) for n, chunk in enumerate(self.sources(fit), 1)]
        return self.frame.wrap(blocks)
