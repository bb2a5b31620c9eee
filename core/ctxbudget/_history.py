"""The history claimant: whole units; the latest, the first, then the most recent that fit.

A unit is a turn, or consecutive turns of one `Turn.group` (a tool call and its results),
kept or dropped together, so no request holds a result without its call. When the model
continues the conversation (no question follows), the latest unit is what it answers:
a floor, sent or named by `ContextBudgetError`. The first unit usually states the topic
and the recent ones carry the thread, so the middle goes first. Before any unit goes, old
tool results are cleared behind a placeholder (`_conversation.py`). Wherever turns are
missing a gap marker says how many, or a summary of them stands there, so the model does
not read two distant turns as adjacent; a summarised run ends where a cached summary ends
while that fits, so a growing conversation is not summarised anew on every request. Turn
content is neutralised before it is costed or shown, so no turn can forge another turn, a
source or a section frame.
"""

from __future__ import annotations

import bisect
import inspect
import itertools
import logging
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from ctxbudget._budget import Allocation
from ctxbudget._claims import ListClaim, Outcome
from ctxbudget._conversation import HistoryOptions, SpanKeys, Summarize, SummaryCache
from ctxbudget._errors import ContextBudgetError, InputError
from ctxbudget._inputs import Role, Turn
from ctxbudget._joins import Piece
from ctxbudget._layout import FRAMES, ROLE_LABELS
from ctxbudget._neutralise import neutralise_section
from ctxbudget._pack import Fit
from ctxbudget._report import Dropped, DropReason, DropRun, SummaryOutcome, SummarySpan, records
from ctxbudget._text import check_text
from ctxbudget._tokens import CountCache

__all__ = [
    "ROLE_LABELS",
    "Entry",
    "HistoryClaim",
    "cleared_placeholder",
    "gap_marker",
    "summary_line",
]

logger = logging.getLogger("ctxbudget")

Indexed = tuple[int, Turn]


def gap_marker(missing: int) -> str:
    """The line standing in for `missing` consecutive turns that were left out."""
    noun = "message" if missing == 1 else "messages"
    return f"[… {missing} {noun} omitted …]"


def summary_line(missing: int, summary: str) -> str:
    """The line standing in for `missing` left-out turns when a summary of them is given."""
    noun = "message" if missing == 1 else "messages"
    return f"[Summary of {missing} earlier {noun}: {summary}]"


def cleared_placeholder(name: str | None, tokens: int) -> str:
    """What a cleared tool result shows in place of its content: the tool and its size."""
    tool = "" if name is None else f"{name}, "
    return f"[tool result cleared: {tool}{tokens:,} tokens]"


class Unit(NamedTuple):
    """Turns kept or dropped together, in one clearing state. The packer tells items apart
    by identity, so each state is one object (`HistoryClaim._variant`)."""

    order: int
    """Position among the units."""
    turns: tuple[Indexed, ...]
    cleared: frozenset[int] = frozenset()
    """Indices of its turns to show as a placeholder (where the placeholder is shorter)."""


class Entry(NamedTuple):
    """One line of the kept history: a turn (`position` set) or what stands in a gap."""

    role: Role
    content: str
    position: int | None
    """The turn's index in the input; None for a gap marker or a summary."""
    cleared: bool = False


@dataclass(frozen=True, slots=True)
class _StandIn:
    """What stands in one gap: its line, and how the summariser fared."""

    text: str
    outcome: SummaryOutcome | None = None
    """None when no summariser is set: the gap marker, as always."""


_GROUP = operator.attrgetter("group")


def _units(turns: Sequence[Turn]) -> list[Unit]:
    """The turns in units: consecutive turns of one group together; `InputError` when a group
    comes back after other turns (its call and results would be split)."""
    if not any(map(_GROUP, turns)):  # a chat without tool calls: a unit per turn
        return [Unit(index, ((index, turn),)) for index, turn in enumerate(turns)]
    units: list[list[Indexed]] = []
    first: dict[str, int] = {}
    previous: str | None = None
    for index, turn in enumerate(turns):
        group = turn.group
        if group is not None and group == previous:
            units[-1].append((index, turn))
            continue
        if group is not None:
            if group in first:
                raise InputError(
                    f"history[{index}] has group {group!r} like history[{first[group]}], but "
                    f"history[{index - 1}] in between is not of that group; a group's turns must "
                    "be consecutive (the assistant turn that calls tools, then the tool turns "
                    "answering it): move the turn, or give it a group of its own"
                )
            first[group] = index
        previous = group
        units.append([(index, turn)])
    return [Unit(order, tuple(unit)) for order, unit in enumerate(units)]


def _gaps(indices: list[int], count: int) -> int:
    """How many runs of missing units a kept set (sorted indices of `count`) leaves."""
    if not indices:
        return 0
    expected = 0
    gaps = 0
    for index in indices:
        gaps += index > expected
        expected = index + 1
    return gaps + (expected < count)


def _preference(units: Sequence[Unit], *, latest_first: bool) -> list[Unit]:
    """The latest unit, the first, then the rest newest to oldest; or, when a question
    follows the history, the first, then all the others newest to oldest."""
    if len(units) < 2:
        return list(units)
    if latest_first:
        return [units[-1], units[0], *units[-2:0:-1]]
    return [units[0], *units[:0:-1]]


def _turn_key(indexed: Indexed) -> str:
    index, turn = indexed
    return turn.id if turn.id is not None else f"history[{index}]"


class HistoryClaim(ListClaim[Unit]):
    """Conversation units; costs include the gap markers (or summaries) the kept set needs.

    A turn's content goes through `_neutralise.neutralise_section` once, and that text is
    what is costed, rendered in the conversation section and returned by `entries`:
    a line ``Assistant: ...`` inside a user's turn reads ``Assistant (quoted): ...``
    in the prompt and in the chat messages alike, and the count is of what is sent.

    With `keep_latest` (no question follows: the model continues the conversation) the
    latest unit comes first and the allocation's floor is raised to what it needs; when a
    question follows, the question is the latest message and the history's last unit is a
    recent unit like the others.
    """

    def __init__(
        self,
        allocation: Allocation,
        turns: Sequence[Turn],
        *,
        counter: CountCache,
        options: HistoryOptions | None = None,
        summarize: Summarize | None = None,
        summaries: SummaryCache | None = None,
        keep_latest: bool = True,
    ) -> None:
        """`summarize` overrides `options.summarize` for this request; `summaries` is the
        assembler's cache (a new one when None)."""
        self._turns = turns
        self._keep_latest = keep_latest
        self._options = HistoryOptions() if options is None else options
        self._summarize = summarize if summarize is not None else self._options.summarize
        self._summaries = SummaryCache() if summaries is None else summaries
        self._counter = counter
        self._contents: dict[int, str] = {}
        self._lines: tuple[dict[int, str], dict[int, str]] = ({}, {})
        """Each turn's line, whole and cleared."""
        self._bounds: dict[int, int] = {}
        self._stand_ins: dict[tuple[int, int], _StandIn] = {}
        self._span_keys: dict[int, SpanKeys] = {}
        self._starts: list[int] = []
        """Each unit's first turn index, then the number of turns: where a run can end."""
        self._entries: tuple[Fit[Unit], tuple[Entry, ...]] | None = None
        self._units = _units(turns)
        self._variants: dict[tuple[int, frozenset[int]], Unit] = {}
        super().__init__(
            allocation,
            _preference(self._units, latest_first=keep_latest),
            counter=counter,
            frame=FRAMES["history"],
            kind="turn",
            key=lambda unit: _turn_key(unit.turns[0]),
            text=self._unit_text,
            cost=self._unit_cost,
            bound=self._unit_bound,
            display=lambda unit: unit.order,
        )
        self.given = allocation
        """The allocation as the budget has it, before the latest unit's floor."""
        # A marker for the largest possible gap is the most a marker can cost.
        marker = counter.count(gap_marker(max(len(turns), 1)))
        self._summary_room = 0
        if self._summarize is not None:
            label = counter.count(summary_line(max(len(turns), 1), ""))
            self._summary_room = label + self._options.summary_tokens
        self._gap_cost = max(marker, self._summary_room) + self.packer.separator
        self._clearable, self._protected = self._clearable_turns()
        self.latest_floor = self._latest_floor()
        """Tokens the latest unit needs in the section: frame, its turns and the gap before
        it; 0 when a question follows the history."""
        self._check_latest()

    # --- turns, units and their costs -------------------------------------------------------

    def content(self, index: int) -> str:
        """A turn's content as the prompt shows it: neutralised once per text (the counter
        remembers it for the next request, which resends the same turns)."""
        shown = self._contents.get(index)
        if shown is None:
            shown = self._contents[index] = self._counter.rewritten(
                self._turns[index].content, neutralise_section
            )
        return shown

    def _shown(self, index: int, cleared: bool) -> str:
        """A turn's content as sent: its neutralised text, or its cleared placeholder."""
        if not cleared:
            return self.content(index)
        turn = self._turns[index]
        placeholder = cleared_placeholder(turn.name, self._line_cost(index, False))
        return self._counter.rewritten(placeholder, neutralise_section)

    def _line(self, index: int, cleared: bool = False) -> str:
        """A turn's line in the conversation section, built once per claim (allocation packs
        the units several times)."""
        lines = self._lines[cleared]
        line = lines.get(index)
        if line is None:
            role = ROLE_LABELS[self._turns[index].role]
            line = lines[index] = f"{role}: {self._shown(index, cleared)}"
        return line

    def _line_cost(self, index: int, cleared: bool) -> int:
        return self._counter.count(self._line(index, cleared))

    def _saving(self, index: int) -> int:
        """Tokens clearing the turn saves (at most 0 when its placeholder is no shorter)."""
        return self._line_cost(index, False) - self._line_cost(index, True)

    def _is_cleared(self, unit: Unit, index: int) -> bool:
        """Whether the turn shows its placeholder in this state of its unit: it is to be
        cleared and the placeholder is shorter (known once the turn is counted)."""
        return index in unit.cleared and self._saving(index) > 0

    def _unit_lines(self, unit: Unit) -> list[str]:
        return [self._line(index, self._is_cleared(unit, index)) for index, _ in unit.turns]

    def _unit_text(self, unit: Unit) -> str:
        return self.frame.separator.join(self._unit_lines(unit))

    def _unit_cost(self, unit: Unit) -> int:
        """The unit's turn lines and the separators between them, each line counted (and
        remembered) on its own as the section's pieces are."""
        if len(unit.turns) == 1 and not unit.cleared:  # most units: one turn, all of it
            return self._counter.count(self._line(unit.turns[0][0]))
        lines = self._unit_lines(unit)
        return sum(map(self._counter.count, lines)) + self.packer.separator * (len(lines) - 1)

    def _unit_bound(self, unit: Unit) -> int:
        """A free lower bound: a turn to be cleared may cost next to nothing, and its
        placeholder is known only once the turn is counted."""
        if len(unit.turns) == 1 and not unit.cleared:  # most units: one turn, all of it
            return self._bound(unit.turns[0][0])
        lines = sum(self._bound(index) for index, _ in unit.turns if index not in unit.cleared)
        return lines + self.packer.separator * (len(unit.turns) - 1)

    def _bound(self, index: int) -> int:
        """The free lower bound of a turn's line, once per claim (every pack asks again)."""
        bound = self._bounds.get(index)
        if bound is None:
            bound = self._bounds[index] = self._counter.lower_bound(self._line(index))
        return bound

    def _cost_of_all(self, units: Sequence[Unit]) -> int:
        """The section holding every one of `units`, no gap anywhere."""
        packer = self.packer
        costs = sum(map(packer.cost_of, units))
        return packer.framing + costs + packer.separator * (len(units) - 1)

    def _variant(self, unit: Unit, cleared: frozenset[int]) -> Unit:
        """`unit` with those of `cleared` that are its turns to be cleared; one object per
        state, so the packer's per-item costs carry over between packs."""
        own = frozenset(index for index, _ in unit.turns if index in cleared)
        if not own:
            return unit
        found = self._variants.get((unit.order, own))
        if found is None:
            found = self._variants[unit.order, own] = Unit(unit.order, unit.turns, own)
        return found

    def _with_cleared(self, cleared: frozenset[int]) -> list[Unit]:
        units = [self._variant(unit, cleared) for unit in self._units]
        return _preference(units, latest_first=self._keep_latest)

    # --- the latest unit ---------------------------------------------------------------------

    def _latest_floor(self) -> int:
        """The cheapest section that holds the latest unit: with a gap marker (or summary)
        before it, or every unit (tool results cleared) when that costs less, as in a short
        history whose other turns cost less than a marker."""
        if not self._keep_latest or not self._units:
            return 0
        packer = self.packer
        latest = packer.framing + packer.cost_of(self._units[-1])
        cheapest = frozenset((*self._clearable, *self._protected))
        rest = 0
        # Newest first, the units packing counts anyway; most histories pass a gap's cost
        # within a unit or two, and counting stops there.
        for unit in reversed(self._units[:-1]):
            rest += packer.separator + packer.cost_of(self._variant(unit, cheapest))
            if rest >= self._gap_cost:
                return latest + self._gap_cost
        return latest + rest

    def _check_latest(self) -> None:
        """Raise the floor to the latest unit; `ContextBudgetError` when the max cannot hold it."""
        a = self.given
        if a.priority == 0 or self.latest_floor <= a.min:
            return
        if a.max is not None and self.latest_floor > a.max:
            them = "it" if len(self._units[-1].turns) == 1 else "them"
            raise self.latest_error(
                self.latest_floor, a.max, f"raise the history max ({a.max:,}), or shorten {them}"
            )
        self.allocation = Allocation(a.name, min=self.latest_floor, max=a.max, priority=a.priority)

    @property
    def latest_binds(self) -> bool:
        """Whether the history's floor is the latest unit's, not the budget's min."""
        return self.allocation.min > self.given.min

    def floor_error(self, error: ContextBudgetError) -> ContextBudgetError:
        """`error`, or when the floor that could not be met is the latest unit's, the error
        naming that unit (allocation knows only that history's min was not met)."""
        if not self.latest_binds:
            return error
        return self.latest_error(
            error.needed,
            error.left,
            f"the higher-priority claimants' floors leave {error.left:,}; raise the budget "
            "total, lower their floors, or shorten the latest message",
        )

    def latest_error(self, needed: int, left: int, fix: str) -> ContextBudgetError:
        """The error when the latest unit does not fit, naming its turns and their sizes."""
        latest = self._units[-1].turns
        parts = ", ".join(self._described(index, turn) for index, turn in latest)
        what = "message is" if len(latest) == 1 else f"{len(latest)} messages (one unit) are"
        gap = " and the gap marker before it" if len(self._units) > 1 else ""
        return ContextBudgetError(
            "history",
            needed,
            left,
            f"the latest {what} always sent, whole: {parts} ({needed:,} with the conversation "
            f"frame{gap}); {fix}",
        )

    def _described(self, index: int, turn: Turn) -> str:
        key = _turn_key((index, turn))
        size = f"{self._line_cost(index, False):,} tokens"
        if turn.role == "tool":
            name = "" if turn.name is None else f" {turn.name!r}"
            return f"tool result{name} ({key}) of {size}"
        return f"{turn.role} message ({key}) of {size}"

    # --- tool-result clearing --------------------------------------------------------------

    def _clearable_turns(self) -> tuple[list[int], list[int]]:
        """Tool turns that may be cleared, oldest first: the older ones, and the most recent
        `keep_tool_results` (cleared only in place of dropping their unit). Never the latest
        unit's, never those of a `never_clear` tool."""
        options = self._options
        if not options.clear_tool_results or not self._units:
            return [], []
        latest = {index for index, _ in self._units[-1].turns}
        tools = [
            index
            for index, turn in enumerate(self._turns)
            if turn.role == "tool" and index not in latest
        ]
        older = set(tools[: max(len(tools) - options.keep_tool_results, 0)])
        eligible = [i for i in tools if self._turns[i].name not in options.never_clear]
        return [i for i in eligible if i in older], [i for i in eligible if i not in older]

    def _clearing(self, grant: int) -> frozenset[int] | None:
        """The oldest clearable turns whose clearing fits every unit in `grant` and frees at
        least `clear_at_least`; None when clearing them all cannot fit every unit (told by
        free bounds first, so a long history is not counted whole)."""
        clearable = frozenset(self._clearable)
        units = [self._variant(unit, clearable) for unit in self._units]
        bounds = sum(map(self._unit_bound, units)) + self.packer.separator * (len(units) - 1)
        if self.packer.framing + bounds > grant:
            return None
        need = self._cost_of_all(self._units) - grant
        saved = 0
        chosen: list[int] = []
        for index in self._clearable:
            if saved >= need and saved >= self._options.clear_at_least:
                break
            saving = self._saving(index)
            if saving > 0:
                chosen.append(index)
                saved += saving
        return frozenset(chosen) if saved >= need else None

    # --- packing ------------------------------------------------------------------------------

    def fit(self, grant: int) -> Fit[Unit]:
        """Keep units in preference order while they and the markers their gaps need fit;
        with a summariser, end the summarised run where `_settle` says."""
        fit = self._packed(grant)
        if self._summarize is None or self._options.summary_headroom == 0:
            return fit
        return self._settle(fit, grant)

    def _packed(self, grant: int) -> Fit[Unit]:
        """The most units that fit, in preference order.

        When not all fit whole, the oldest tool results are cleared first, as few as fit
        everything; when clearing them all is not enough, units go, the middle first, and a
        recent result that would not fit whole is cleared rather than dropped with its call.
        A unit's marginal cost includes the markers it adds or removes, so taking a recent
        unit that would open a second gap stops the walk like any unit that does not fit.
        """
        whole = self.packer.pack(self.items, grant)
        if not whole.overflow:
            return whole  # everything fits: no gaps, no markers
        if not self._clearable and not self._protected:
            return self.packer.pack(self.items, grant, overhead=self._markers)
        enough = self._clearing(grant)
        if enough is not None:
            return self.packer.pack(self._with_cleared(enough), grant)
        cleared = frozenset(self._clearable)
        while True:
            fit = self.packer.pack(self._with_cleared(cleared), grant, overhead=self._markers)
            left_out = {index for unit, _, _ in fit.dropped for index, _ in unit.turns}
            more = left_out.intersection(self._protected) - cleared
            if not more:
                return fit
            cleared |= more

    def _settle(self, fit: Fit[Unit], grant: int) -> Fit[Unit]:
        """`fit` with its summarised run ending where the next requests will end it too.

        The run is `fit`'s one gap, the units after the first (or from the first, when it did
        not fit), and it ends at the oldest unit `fit` keeps: the smallest cut. A cut is a
        unit boundary from there to `summary_headroom` of the grant further (never past the
        latest unit). The first cut whose run has a cached summary is taken, and costs no call;
        with none cached, the furthest, so that the turns the next requests add fit before
        the end must move again. Any other shape (several gaps) is left as packed.
        """
        middle = self._middle(fit)
        if middle is None:
            return fit
        first, smallest = middle
        costs = {part.item.order: part.cost for part in fit.parts}
        share = self._options.summary_headroom * grant
        latest = len(self._units) - 1
        furthest, freed = smallest, 0
        while furthest < latest and freed < share:
            freed += costs[furthest]
            furthest += 1
        if furthest == smallest:  # no cut to choose: nothing to look up (a floor's probe)
            return fit
        starts = self._unit_starts()
        cut = next(
            (
                end
                for end in range(smallest, furthest + 1)
                if self._summaries.get(self._span_key(starts[first], starts[end])) is not None
            ),
            furthest,
        )
        return self._without(fit, smallest, cut)

    def _middle(self, fit: Fit[Unit]) -> tuple[int, int] | None:
        """(first, smallest) when the units ``first:smallest`` are `fit`'s only gap, every
        unit from `smallest` on is kept, and the first unit is kept (first 1) or in the gap
        (first 0); None for any other shape."""
        orders = sorted(part.item.order for part in fit.parts)
        count = len(self._units)
        if not orders or orders[-1] != count - 1:
            return None
        first = 1 if orders[0] == 0 else 0
        smallest = orders[first] if len(orders) > first else count
        if smallest <= first or len(orders) - first != count - smallest:
            return None
        return first, smallest

    def _without(self, fit: Fit[Unit], start: int, stop: int) -> Fit[Unit]:
        """`fit` without its units ``start:stop`` (all kept, none its first part), which join
        the gap before them."""
        if stop == start:
            return fit
        kept = tuple(part for part in fit.parts if not start <= part.item.order < stop)
        left: tuple[tuple[Unit, DropReason, int | None], ...] = tuple(
            (part.item, "over_budget", part.cost)
            for part in fit.parts
            if start <= part.item.order < stop
        )
        units = [part.item for part in kept]
        cost = self.packer.framing + sum(part.cost for part in kept) + self._markers(units)
        return Fit(kept, cost, left + fit.dropped, fit.unreached, overflow=True)

    def _markers(self, kept: list[Unit]) -> int:
        """Tokens of the gap markers (or summaries) a kept set of units needs."""
        return _gaps(sorted(unit.order for unit in kept), len(self._units)) * self._gap_cost

    def shrink(self, fit: Fit[Unit]) -> Fit[Unit] | None:
        smaller = self.packer.shrink(fit)
        if smaller is None or not smaller.parts:
            return smaller
        # Dropping a unit can open, widen or close a gap: re-price the markers.
        change = self._markers(_units_of(smaller)) - self._markers(_units_of(fit))
        return replace(smaller, cost=smaller.cost + change)

    # --- what is shown -------------------------------------------------------------------------

    def entries(self, fit: Fit[Unit]) -> tuple[Entry, ...]:
        """The kept history in order: each kept turn, its content the neutralised text (or
        placeholder) the section shows, and a user note wherever turns are missing.

        A gap marker or summary is a user note because every provider accepts one anywhere
        in a conversation; a mid-conversation system message is rejected by some
        (Anthropic's Messages API has no such role).
        """
        last = self._entries
        if last is not None and last[0] is fit:
            return last[1]  # the final fit is rendered, then read for the result
        out: list[Entry] = []
        expected = 0
        for unit in self.kept(fit):
            for index, turn in unit.turns:
                if index > expected:
                    out.append(Entry("user", self._stand_in(expected, index).text, None))
                cleared = self._is_cleared(unit, index)
                out.append(Entry(turn.role, self._shown(index, cleared), index, cleared))
                expected = index + 1
        if out and expected < len(self._turns):
            out.append(Entry("user", self._stand_in(expected, len(self._turns)).text, None))
        entries = tuple(out)
        self._entries = (fit, entries)
        return entries

    def _lines_of(self, fit: Fit[Unit]) -> list[str]:
        return [
            entry.content if entry.position is None else self._line(entry.position, entry.cleared)
            for entry in self.entries(fit)
        ]

    def render(self, fit: Fit[Unit]) -> str:
        return self.frame.wrap(self._lines_of(fit)) if fit.parts else ""

    def pieces(self, fit: Fit[Unit]) -> list[Piece]:
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

    # --- gaps: markers or summaries ---------------------------------------------------------

    def _stand_in(self, start: int, stop: int) -> _StandIn:
        """What stands for the turns ``start:stop``, decided once per request."""
        found = self._stand_ins.get((start, stop))
        if found is None:
            found = self._stand_ins[start, stop] = self._summary_or_marker(start, stop)
        return found

    def _summary_or_marker(self, start: int, stop: int) -> _StandIn:
        marker = gap_marker(stop - start)
        if self._summarize is None:
            return _StandIn(marker)
        key = self._span_key(start, stop)
        summary = self._summaries.get(key)
        outcome: SummaryOutcome = "cached"
        if summary is None:
            summary, outcome = _ask(self._summarize, self._asked(start, stop), start, stop)
        if summary is None:
            return _StandIn(marker, outcome)
        line = self._counter.rewritten(summary_line(stop - start, summary), neutralise_section)
        if self._counter.count(line) > self._summary_room:
            logger.warning(
                "history summary of %s turns (history[%s:%s]) is longer than summary_tokens "
                "(%s); the gap marker stands there",
                stop - start,
                start,
                stop,
                self._options.summary_tokens,
            )
            return _StandIn(marker, "too_long")
        if outcome == "summarized":
            self._summaries.put(key, summary)
        return _StandIn(line, outcome)

    def _asked(self, start: int, stop: int) -> Sequence[Turn]:
        """What the summariser gets for the turns ``start:stop``: those turns; with
        `rolling_summaries`, the cached summary of their longest summarised start, as the user
        turn the prompt would show, then the turns after that start."""
        if self._options.rolling_summaries:
            starts = self._unit_starts()
            between = starts[bisect.bisect_right(starts, start) : bisect.bisect_left(starts, stop)]
            for end in reversed(between):
                earlier = self._summaries.get(self._span_key(start, end))
                if earlier is not None:
                    said = Turn(role="user", content=summary_line(end - start, earlier))
                    return [said, *self._turns[end:stop]]
        return self._turns[start:stop]

    def _unit_starts(self) -> list[int]:
        """Where a run of left-out turns can end: each unit's first turn, then the end."""
        if not self._starts:
            self._starts = [unit.turns[0][0] for unit in self._units] + [len(self._turns)]
        return self._starts

    def _span_key(self, start: int, stop: int) -> bytes:
        """`span_key` of the turns ``start:stop``; the keys of every run from one start are
        taken in one pass over its turns (`SpanKeys`)."""
        keys = self._span_keys.get(start)
        if keys is None:
            keys = self._span_keys[start] = SpanKeys(self._turns, start, self._unit_starts())
        return keys.key(stop)

    # --- what the report says -----------------------------------------------------------------

    def gaps(self, fit: Fit[Unit]) -> list[tuple[int, int]]:
        """Each run of left-out turns as (start, stop) input indices, stop exclusive."""
        spans: list[tuple[int, int]] = []
        expected = 0
        for unit in self.kept(fit):
            start = unit.turns[0][0]
            if start > expected:
                spans.append((expected, start))
            expected = unit.turns[-1][0] + 1
        if fit.parts and expected < len(self._turns):
            spans.append((expected, len(self._turns)))
        return spans

    def drops(self, fit: Fit[Unit]) -> list[Dropped]:
        """A record per left-out turn, in the order the walk left their units out; a turn a
        summary stands in for is "summarized"."""
        return records(self.drop_runs(fit))

    def drop_runs(self, fit: Fit[Unit]) -> list[Dropped | DropRun]:
        """`drops(fit)`, with the turns never looked at as runs of records not built yet: a
        long history's report builds them only if it is read."""
        summarized = self._summarized(fit)
        out: list[Dropped | DropRun] = []
        for unit, reason, tokens in fit.dropped:
            for index, turn in unit.turns:
                why: DropReason = "summarized" if index in summarized else reason
                size = None if tokens is None else self._line_cost(index, False)
                key = _turn_key((index, turn))
                out.append(Dropped._unvalidated("history", "turn", key, why, size))
        # Often most of a long history is never looked at: its records wait in runs until read.
        unreached = [turn for unit in fit.unreached for turn in unit.turns]
        if not summarized:
            runs: Iterable[tuple[bool, Iterable[Indexed]]] = (
                [(False, unreached)] if unreached else []
            )
        else:
            runs = itertools.groupby(unreached, key=lambda turn: turn[0] in summarized)
        for covered, run in runs:
            ids = list(map(_turn_key, run))
            out.append(DropRun("history", "turn", "summarized" if covered else "over_budget", ids))
        return out

    def _summarized(self, fit: Fit[Unit]) -> set[int]:
        """The left-out turns a summary stands in for."""
        if self._summarize is None:
            return set()
        return {
            index
            for start, stop in self.gaps(fit)
            if self._stand_in(start, stop).outcome in ("summarized", "cached")
            for index in range(start, stop)
        }

    def summary_spans(self, fit: Fit[Unit]) -> list[SummarySpan]:
        """For the report, when a summariser is set: each gap and what stands there."""
        if self._summarize is None:
            return []
        return [
            SummarySpan(
                start=start,
                stop=stop,
                ids=tuple(_turn_key((i, self._turns[i])) for i in range(start, stop)),
                outcome=self._stand_in(start, stop).outcome or "none",
            )
            for start, stop in self.gaps(fit)
        ]

    def outcome(self, fit: Fit[Unit]) -> Outcome:
        return Outcome(
            entries=self.entries(fit),
            cleared=tuple(self.cleared(fit)),
            summaries=tuple(self.summary_spans(fit)),
        )

    def cleared(self, fit: Fit[Unit]) -> list[Dropped]:
        """A "cleared" record per kept turn shown as a placeholder, oldest first, with the
        tokens the turn cost before."""
        out: list[Dropped] = []
        for entry in self.entries(fit):
            if entry.cleared and entry.position is not None:
                index = entry.position
                key, before = _turn_key((index, self._turns[index])), self._line_cost(index, False)
                out.append(Dropped._unvalidated("history", "turn", key, "cleared", before))
        return out


def _ask(
    summarize: Summarize, covered: Sequence[Turn], start: int, stop: int
) -> tuple[str | None, SummaryOutcome]:
    """The summariser's text for the turns ``history[start:stop]``, or why there is none.
    Whatever it does, the request goes on: a gap marker stands where it gave no summary."""
    try:
        summary: object = summarize(covered)
    except Exception as error:  # a summariser's failure must not fail the request
        logger.warning(
            "history summariser raised %s for history[%s:%s]; the gap marker stands there",
            type(error).__name__,
            start,
            stop,
        )
        return None, "failed"
    if summary is None:
        return None, "none"
    if not isinstance(summary, str):
        if inspect.iscoroutine(summary):
            summary.close()  # never awaited: closed, so no "never awaited" warning follows
        logger.warning(
            "history summariser returned a %s for history[%s:%s], not a str or None; the gap "
            "marker stands there",
            type(summary).__name__,
            start,
            stop,
        )
        return None, "failed"
    try:
        check_text(summary)
    except ValueError:
        logger.warning(
            "history summariser returned invalid Unicode for history[%s:%s]; the gap marker "
            "stands there",
            start,
            stop,
        )
        return None, "failed"
    if not summary.strip():
        return None, "empty"
    return summary, "summarized"


def _units_of(fit: Fit[Unit]) -> list[Unit]:
    return [part.item for part in fit.parts]
