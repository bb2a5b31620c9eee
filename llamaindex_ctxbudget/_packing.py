"""Sources that LlamaIndex hands on as strings, read back and packed whole into LLM calls.

A prompt helper gets node texts, never nodes. Each text the postprocessor made is one
source in its own fence (`Selection.framed_sources`), which the core reads back and
verifies (`ctxbudget.read_fenced_all`: the text came back through LlamaIndex, so it is
checked at this boundary): its number travels in the text, so nothing needs to remember
it. Packing puts the sources of one call in one fence (`ctxbudget.fence_sources`, one
notice), sources sharing the frame the core read them in (`FencedSource.frame`), and
fences every other text as untrusted data (`ctxbudget.fence_untrusted`: neutralised,
never numbered). A packed context is a `Packed` string that carries what
it holds, because LlamaIndex passes it back to be packed again (refine, compact).
Framework-free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Final

from ctxbudget import (
    ContextBudgetError,
    FencedSource,
    Frame,
    fence_sources,
    fence_untrusted,
    read_fenced_all,
)

__all__ = ["SEPARATOR", "Packed", "Unit", "pack", "read"]

Unit = FencedSource | str
"""What a context holds: a source read back from its fence, or a text fenced as data."""

SEPARATOR: Final = "\n\n"
"""What stands between two fences in one context (as between sections of a prompt)."""

_JOIN: Final = 1
"""The estimated tokens of one separator (blank lines merge with what follows)."""


class Packed(str):
    """A context the prompt helper packed, and the units it holds (in prompt order)."""

    units: tuple[Unit, ...]

    @classmethod
    def of(cls, units: Sequence[Unit]) -> Packed:
        """`units` rendered: consecutive sources sharing a fence opening in one fence,
        consecutive other texts in one untrusted-data fence."""
        packed = cls(SEPARATOR.join(_fences(units)))
        packed.units = tuple(units)
        return packed

    @property
    def numbers(self) -> list[int]:
        """The [n] of each source it holds, in order."""
        return [u.n for u in self.units if isinstance(u, FencedSource)]

    @property
    def untrusted(self) -> int:
        """How many texts it holds that are not sources."""
        return sum(1 for u in self.units if not isinstance(u, FencedSource))


def _fences(units: Sequence[Unit]) -> Iterator[str]:
    run: list[Unit] = []
    for unit in units:
        if run and not _same_fence(run[-1], unit):
            yield _fence(run)
            run = []
        run.append(unit)
    if run:
        yield _fence(run)


def _same_fence(one: Unit, other: Unit) -> bool:
    if isinstance(one, FencedSource) and isinstance(other, FencedSource):
        return one.frame == other.frame
    return isinstance(one, str) and isinstance(other, str)


def _fence(run: list[Unit]) -> str:
    sources = [u for u in run if isinstance(u, FencedSource)]
    return (
        fence_sources(sources)
        if sources
        else fence_untrusted([u for u in run if isinstance(u, str)])
    )


def read(texts: Sequence[str]) -> list[Unit]:
    """The units `texts` hold, in order.

    A `Packed` context holds its own units; a text that is nothing but framed sources
    (`ctxbudget.read_fenced_all`) separated by whitespace holds those sources; any
    other non-blank text is one text to fence as data, whatever it contains. A source
    claiming a number already read is data too (a number names one source in a call);
    the very same source given twice is read once.
    """
    units: list[Unit] = []
    for text in texts:
        if isinstance(text, Packed):
            units.extend(text.units)
        elif text.strip():
            framed = read_fenced_all(text)
            units.extend([text] if framed is None else framed)
    return _numbered_once(units)


def _numbered_once(units: list[Unit]) -> list[Unit]:
    seen: dict[int, FencedSource] = {}
    kept: list[Unit] = []
    for unit in units:
        if not isinstance(unit, FencedSource):
            kept.append(unit)
            continue
        first = seen.get(unit.n)
        if first is None:
            seen[unit.n] = unit
            kept.append(unit)
        elif first != unit:
            kept.append(fence_sources([unit]))  # another source under a number in use: data
    return kept


def pack(
    units: Sequence[Unit],
    space: int,
    count: Callable[[str], int],
    unfit: Callable[[Unit, int], ContextBudgetError],
) -> list[tuple[Packed, int]]:
    """`units` in order, in as few contexts of at most `space` tokens as greedy packing makes,
    each with its exact count; `unfit(unit, tokens)` is raised for a unit too large alone.

    Linear: when all of them fit one context (one exact count says so), that is it.
    Otherwise each unit's text is counted once (`count` caches), a context is filled by
    the sum of those counts and its fences', and counted exactly once; when the sum was
    low and the exact count is over, its last unit moves on to the next context.
    """
    if not units:
        return []
    whole = Packed.of(units)
    tokens = count(whole)
    if tokens <= space:
        return [(whole, tokens)]
    costs = [count(u.text if isinstance(u, FencedSource) else u) for u in units]
    frames: dict[Frame | None, int] = {}
    packed: list[tuple[Packed, int]] = []
    start = 0
    while start < len(units):
        end, estimate = start, 0
        while end < len(units):
            opens = end == start or not _same_fence(units[end - 1], units[end])
            step = costs[end] + (_frame(units[end], frames, count) if opens else _JOIN)
            if end > start and estimate + step > space:
                break
            estimate += step
            end += 1
        context = Packed.of(units[start:end])
        tokens = count(context)
        while tokens > space and end - start > 1:
            end -= 1
            context = Packed.of(units[start:end])
            tokens = count(context)
        if tokens > space:
            raise unfit(units[start], tokens)
        packed.append((context, tokens))
        start = end
    return packed


def _frame(unit: Unit, frames: dict[Frame | None, int], count: Callable[[str], int]) -> int:
    """The tokens a fence around `unit` adds: measured once per fence (None: the data fence)."""
    if not isinstance(unit, FencedSource):
        if None not in frames:
            frames[None] = count(fence_untrusted([""]))
        return frames[None]
    if unit.frame not in frames:
        frames[unit.frame] = count(unit.frame.wrap([unit.text])) - count(unit.text)
    return frames[unit.frame]
