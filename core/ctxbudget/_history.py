"""The history claimant: whole turns; the first turn, then the most recent that fit.

The first turn usually states the topic, and the recent ones carry the thread, so
the middle goes first. Wherever turns are missing a gap marker says how many, so
the model does not read two distant turns as adjacent. Turn content is neutralised
before it is costed or shown, so no turn can forge another turn, a source or a
section frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ctxbudget._budget import Allocation
from ctxbudget._claims import ListClaim
from ctxbudget._fence import neutralise_section
from ctxbudget._inputs import Role, Turn
from ctxbudget._joins import Piece
from ctxbudget._layout import FRAMES, ROLE_LABELS
from ctxbudget._pack import Fit
from ctxbudget._tokens import TokenCounter

__all__ = ["ROLE_LABELS", "HistoryClaim", "gap_marker"]

Indexed = tuple[int, Turn]


def gap_marker(missing: int) -> str:
    """The line standing in for `missing` consecutive turns that were left out."""
    noun = "message" if missing == 1 else "messages"
    return f"[… {missing} {noun} omitted …]"


def _gaps(indices: list[int], count: int) -> int:
    """How many runs of missing turns a kept set (sorted indices of `count`) leaves."""
    if not indices:
        return 0
    expected = 0
    gaps = 0
    for index in indices:
        gaps += index > expected
        expected = index + 1
    return gaps + (expected < count)


def _turns(fit: Fit[Indexed]) -> list[Indexed]:
    return [part.item for part in fit.parts]


def _turn_key(indexed: Indexed) -> str:
    index, turn = indexed
    return turn.id if turn.id is not None else f"history[{index}]"


class HistoryClaim(ListClaim[Indexed]):
    """Conversation turns; costs include the gap markers the kept set needs.

    A turn's content goes through `_fence.neutralise_section` once, and that text is
    what is costed, rendered in the conversation section and returned by `messages`:
    a line ``Assistant: ...`` inside a user's turn reads ``Assistant (quoted): ...``
    in the prompt and in the chat messages alike, and the count is of what is sent.
    """

    def __init__(
        self, allocation: Allocation, turns: Sequence[Turn], *, counter: TokenCounter
    ) -> None:
        self._contents: dict[int, str] = {}
        self._lines: dict[int, tuple[str, int]] = {}
        self._counter = counter
        indexed = list(enumerate(turns))
        preference = indexed[:1] + indexed[:0:-1]  # first turn, then newest to oldest
        super().__init__(
            allocation,
            preference,
            counter=counter,
            frame=FRAMES["history"],
            kind="turn",
            key=_turn_key,
            text=self._line,
            bound=self._bound,
            display=lambda it: it[0],
        )
        self._count = len(turns)
        # A marker for the largest possible gap is the most a marker can cost.
        self._marker_cost = counter.count(gap_marker(max(len(turns), 1))) + self.packer.separator

    def content(self, indexed: Indexed) -> str:
        """The turn's content as the prompt shows it: neutralised once per text (the counter
        remembers it for the next request, which resends the same turns)."""
        index, turn = indexed
        shown = self._contents.get(index)
        if shown is None:
            shown = self._contents[index] = self._counter.rewritten(
                turn.content, neutralise_section
            )
        return shown

    def _line(self, indexed: Indexed) -> str:
        return self._shown_line(indexed)[0]

    def _bound(self, indexed: Indexed) -> int:
        return self._shown_line(indexed)[1]

    def _shown_line(self, indexed: Indexed) -> tuple[str, int]:
        """The turn's line in the conversation section and its free lower bound, built once
        per claim (allocation packs the turns several times)."""
        found = self._lines.get(indexed[0])
        if found is None:
            line = f"{ROLE_LABELS[indexed[1].role]}: {self.content(indexed)}"
            found = self._lines[indexed[0]] = (line, self._counter.lower_bound(line))
        return found

    def fit(self, grant: int) -> Fit[Indexed]:
        """Keep turns in preference order while they and the markers their gaps need fit.

        A turn's marginal cost includes the markers it adds or removes, so taking a
        recent turn that would open a second gap stops the walk like any turn that
        does not fit.
        """
        whole = self.packer.pack(self.items, grant)
        if not whole.overflow:
            return whole  # everything fits: no gaps, no markers
        return self.packer.pack(self.items, grant, overhead=self._markers)

    def _markers(self, kept: list[Indexed]) -> int:
        """Tokens of the gap markers a kept set of turns needs."""
        return _gaps(sorted(index for index, _ in kept), self._count) * self._marker_cost

    def shrink(self, fit: Fit[Indexed]) -> Fit[Indexed] | None:
        smaller = self.packer.shrink(fit)
        if smaller is None or not smaller.parts:
            return smaller
        # Dropping a turn can open, widen or close a gap: re-price the markers.
        change = self._markers(_turns(smaller)) - self._markers(_turns(fit))
        return replace(smaller, cost=smaller.cost + change)

    def render(self, fit: Fit[Indexed]) -> str:
        return self.frame.wrap(self._lines_of(fit)) if fit.parts else ""

    def pieces(self, fit: Fit[Indexed]) -> list[Piece]:
        """`render(fit)` as the frame, each line (a turn's line is the very text its cost
        counted, so a miss on the whole section finds every line counted) and the separators."""
        if not fit.parts:
            return []
        separator = self.frame.separator
        out: list[Piece] = [self.frame.open]
        for index, line in enumerate(self._lines_of(fit)):
            if index:
                out.append(separator)
            out.append(line)
        out.append(self.frame.close)
        return out

    def _lines_of(self, fit: Fit[Indexed]) -> list[str]:
        """The section's lines: kept turns in order, a gap marker wherever turns are missing."""
        lines: list[str] = []
        for start, stop, turn in self._walk(fit):
            if stop > start:
                lines.append(gap_marker(stop - start))
            if turn is not None:
                lines.append(self._line(turn))
        return lines

    def messages(self, fit: Fit[Indexed]) -> list[tuple[Role, str]]:
        """(role, content) pairs for chat output, gap markers as user-role notes; the
        content is the neutralised text the conversation section shows.

        A marker is sent as a user message because every provider accepts one
        anywhere in the conversation; a mid-conversation system message is rejected
        by some (Anthropic's Messages API has no such role).
        """
        out: list[tuple[Role, str]] = []
        for start, stop, turn in self._walk(fit):
            if stop > start:
                out.append(("user", gap_marker(stop - start)))
            if turn is not None:
                out.append((turn[1].role, self.content(turn)))
        return out

    def _walk(self, fit: Fit[Indexed]) -> list[tuple[int, int, Indexed | None]]:
        """For each kept turn: the span of missing indices before it, and the turn."""
        steps: list[tuple[int, int, Indexed | None]] = []
        expected = 0
        for indexed in self.kept(fit):
            steps.append((expected, indexed[0], indexed))
            expected = indexed[0] + 1
        if steps and expected < self._count:
            steps.append((expected, self._count, None))
        return steps
