"""A claimant as a list of whole items packed into its grant, and the plain-text claimants.

Each claimant knows how to shrink itself (README "How each claimant shrinks"): the list claimant
keeps a preferred prefix of its items and drops from the tail; subclasses decide
the preference order (rank, recency, relevance) and the display order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from ctxbudget._budget import Allocation
from ctxbudget._joins import Piece
from ctxbudget._layout import SECTION_SEPARATOR, Frame
from ctxbudget._pack import Fit, Packer
from ctxbudget._report import Dropped, ItemKind
from ctxbudget._tokens import TokenCounter

T = TypeVar("T")

UNLIMITED = sys.maxsize


class ListClaim(Generic[T]):
    """Items in preference order, packed whole; rendered in `display` order inside a frame."""

    def __init__(
        self,
        allocation: Allocation,
        items: Sequence[T],
        *,
        counter: TokenCounter,
        frame: Frame,
        kind: ItemKind,
        key: Callable[[T], str],
        text: Callable[[T], str],
        display: Callable[[T], Any] | None = None,
        cost: Callable[[T], int] | None = None,
        bound: Callable[[T], int] | None = None,
        ceiling: Callable[[T], int] | None = None,
        floor: Callable[[T], int] | None = None,
        kind_of: Callable[[T], ItemKind] | None = None,
        outside_text: bool = False,
    ) -> None:
        """`cost` and `bound` default to counting `text(item)`; pass them when an item's
        cost is known another way (a token count measured at ingest), and `ceiling` or
        `floor` when there are still cheaper numbers never below or above `bound`
        (`Packer.ceiling`, `Packer.floor`). An `outside_text`
        claimant is sent beside the prompt (tool schemas for native tool calling): it
        renders nothing, and its items' cost counts against the budget on its own."""
        self.allocation = allocation
        self.outside_text = outside_text
        self.items = items
        self.frame = frame
        self._text = text
        self._display = display
        self.packer: Packer[T] = Packer(
            claimant=allocation.name,
            kind=kind,
            key=key,
            cost=cost or (lambda item: counter.count(text(item))),
            bound=bound or (lambda item: counter.lower_bound(text(item))),
            framing=0
            if outside_text
            else counter.count(frame.open)
            + counter.count(frame.close)
            + counter.count(SECTION_SEPARATOR),
            separator=0 if outside_text else counter.count(frame.separator),
            kind_of=kind_of,
            ceiling=ceiling,
            floor=floor,
        )

    def fit(self, grant: int) -> Fit[T]:
        return self.packer.pack(self.items, grant)

    def shrink(self, fit: Fit[T]) -> Fit[T] | None:
        return self.packer.shrink(fit)

    def content_cost(self) -> int:
        return self.fit(UNLIMITED).cost

    def drops(self, fit: Fit[T]) -> list[Dropped]:
        return self.packer.drops(fit)

    def kept(self, fit: Fit[T]) -> list[T]:
        """Kept items in the order they appear in the prompt."""
        items = [part.item for part in fit.parts]
        if self._display is not None:
            items.sort(key=self._display)
        return items

    def render(self, fit: Fit[T]) -> str:
        """The section text, or "" when nothing was kept or the claimant is outside the text."""
        if not fit.parts or self.outside_text:
            return ""
        return self.frame.wrap([self._text(item) for item in self.kept(fit)])

    def pieces(self, fit: Fit[T]) -> list[Piece]:
        """`render(fit)` as parts that join to it, for `TokenCounter.count_joined`.

        Cut at the frame's separator, so a part that recurs across requests (a turn,
        a paragraph of the system prompt) is tokenized once and counted from the cache.
        """
        section = self.render(fit)
        separator = self.frame.separator
        if not separator:
            return [section] if section else []
        out: list[Piece] = []
        for index, part in enumerate(section.split(separator)):
            if index:
                out.append(separator)
            if part:
                out.append(part)
        return out


def text_claim(
    allocation: Allocation, text: str | None, *, counter: TokenCounter, frame: Frame
) -> ListClaim[str]:
    """A claimant whose content is one string, kept whole or not at all."""
    return ListClaim(
        allocation,
        [text] if text else [],
        counter=counter,
        frame=frame,
        kind="text",
        key=lambda _: allocation.name,
        text=lambda s: s,
    )
