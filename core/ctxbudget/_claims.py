"""The `Claim` protocol every claimant implements, and the list claimant most build on.

Allocation (`_allocate.py`), the exact count (`_exact.py`) and the assembler's result
(`_assemble.py`) see a claimant only through `Claim`: a new claimant is a class that
implements it. Each claimant knows how to shrink itself (docs/budget.md, "How each
claimant shrinks"): `ListClaim` keeps a preferred prefix of its items and drops from the tail;
subclasses decide the preference order (rank, recency, relevance) and the display order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from ctxbudget._budget import Allocation
from ctxbudget._errors import ContextBudgetError
from ctxbudget._joins import Piece
from ctxbudget._layout import SECTION_SEPARATOR, Frame
from ctxbudget._pack import Fit, Packer
from ctxbudget._report import Dropped, DropRun, ItemKind, SummarySpan
from ctxbudget._tokens import CountCache

if TYPE_CHECKING:
    from ctxbudget._history import Entry
    from ctxbudget._inputs import Tool
    from ctxbudget._result import Source

T = TypeVar("T")

UNLIMITED = sys.maxsize


@dataclass(frozen=True)
class Outcome:
    """What a claimant's kept items add to the result beside its section text; empty for
    most claimants (only retrieval has sources, only history has entries)."""

    sources: tuple[Source, ...] = ()
    escalated: str | None = None
    """The document sent whole in place of its chunks, if any."""
    entries: tuple[Entry, ...] = ()
    """The conversation as chat messages: kept turns and the notes standing for gaps."""
    cleared: tuple[Dropped, ...] = ()
    """Kept tool results whose content a placeholder replaced."""
    summaries: tuple[SummarySpan, ...] = ()
    tools: tuple[Tool, ...] = ()
    """Kept tools, in the order shown."""


@runtime_checkable
class Claim(Protocol):
    """A claimant as the engine sees it: allocated, packed, shrunk by the exact count,
    rendered, reported. Every claimant implements all of it; a step that does not apply
    to one is a method that does nothing (`ListClaim`'s defaults)."""

    @property
    def allocation(self) -> Allocation:
        """Its name, floor, cap and priority."""
        ...

    @property
    def outside_text(self) -> bool:
        """Sent beside the prompt (native tool schemas): renders nothing, its cost counts."""
        ...

    def fit(self, grant: int) -> Fit[Any]:
        """Pack as much content as fits in `grant` tokens, whole items only."""
        ...

    def shrink(self, fit: Fit[Any]) -> Fit[Any] | None:
        """`fit` less its least preferred item; None when nothing is left to drop."""
        ...

    def content_cost(self) -> int:
        """Cost of all of the content; only called to word an error."""
        ...

    def floor_error(self, error: ContextBudgetError) -> ContextBudgetError:
        """The error to raise when allocation cannot meet this claimant's floor: `error`,
        or one that says more about what needed the space."""
        ...

    def require_allocated(self, fit: Fit[Any], granted: int) -> None:
        """Raise when the allocated `fit` breaks a rule of this claimant that the two
        passes do not know (a required text kept whole or not at all)."""
        ...

    def settled(self) -> None:
        """Allocation is over: no `fit` follows, only `shrink` and rendering, so what only
        the packing walks needed may go before the prompt is built."""
        ...

    def require_sent(self, fit: Fit[Any], granted: int) -> None:
        """Raise (or warn) when the final `fit` sends too little of what was found."""
        ...

    def pieces(self, fit: Fit[Any]) -> list[Piece]:
        """The section text of `fit` as parts that join to it ("" parts left out)."""
        ...

    def drop_runs(self, fit: Fit[Any]) -> list[Dropped | DropRun]:
        """Everything `fit` left out, for the report (runs of records built when read)."""
        ...

    def outcome(self, fit: Fit[Any]) -> Outcome:
        """What the kept items add to the result beside the section text."""
        ...


class ListClaim(Generic[T]):
    """Items in preference order, packed whole; rendered in `display` order inside a frame."""

    def __init__(
        self,
        allocation: Allocation,
        items: Sequence[T],
        *,
        counter: CountCache,
        frame: Frame,
        kind: ItemKind,
        key: Callable[[T], str],
        text: Callable[[T], str],
        display: Callable[[T], Any] | None = None,
        cost: Callable[[T], int] | None = None,
        bound: Callable[[T], int] | None = None,
        ceiling: Callable[[T], int] | None = None,
        quick_bound: Callable[[T], int] | None = None,
        kind_of: Callable[[T], ItemKind] | None = None,
        outside_text: bool = False,
    ) -> None:
        """`cost` and `bound` default to counting `text(item)`; pass them when an item's
        cost is known another way (a token count measured at ingest), and `ceiling` or
        `quick_bound` when there are still cheaper numbers never below or above `bound`
        (`Packer.ceiling`, `Packer.quick_bound`). An `outside_text`
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
            quick_bound=quick_bound,
        )

    def fit(self, grant: int) -> Fit[T]:
        return self.packer.pack(self.items, grant)

    def shrink(self, fit: Fit[T]) -> Fit[T] | None:
        return self.packer.shrink(fit)

    def content_cost(self) -> int:
        return self.fit(UNLIMITED).cost

    def floor_error(self, error: ContextBudgetError) -> ContextBudgetError:
        return error

    def require_allocated(self, fit: Fit[T], granted: int) -> None:
        return None

    def settled(self) -> None:
        return None

    def require_sent(self, fit: Fit[T], granted: int) -> None:
        return None

    def drops(self, fit: Fit[T]) -> list[Dropped]:
        return self.packer.drops(fit)

    def drop_runs(self, fit: Fit[T]) -> list[Dropped | DropRun]:
        return list(self.drops(fit))

    def outcome(self, fit: Fit[T]) -> Outcome:
        return Outcome()

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
        """`render(fit)` as parts that join to it, for `CountCache.count_joined`.

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


class TextClaim(ListClaim[str]):
    """A claimant whose content is one string, kept whole or not at all."""

    def require_allocated(self, fit: Fit[str], granted: int) -> None:
        """A required string (examples with a min, say) that did not fit whole is an error.

        Strings are never cut, so for them a floor can only mean "required": dropping the
        examples quietly because they outgrew their max would degrade every answer unseen.
        """
        a = self.allocation
        if a.required and self.items and not fit.parts:
            raise ContextBudgetError(
                a.name,
                self.content_cost(),
                granted,
                f"it is kept whole or not at all, and its min ({a.min}) makes it required; "
                "raise its max (and the total) or shorten it",
            )


def text_claim(
    allocation: Allocation, text: str | None, *, counter: CountCache, frame: Frame
) -> TextClaim:
    """The claimant of one string: `text`, or nothing when it is None or ""."""
    return TextClaim(
        allocation,
        [text] if text else [],
        counter=counter,
        frame=frame,
        kind="text",
        key=lambda _: allocation.name,
        text=lambda s: s,
    )
