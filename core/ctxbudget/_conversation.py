"""How the history claimant shrinks before and while it drops turns: tool-result clearing and
summaries (docs/agents.md, "Agents and chat").

Tool results dominate an agent's context, and an old one is rarely read again: clearing
it (a placeholder in place of its content, the turn itself kept) frees its space without
splitting a call from its result. Only when clearing is not enough do whole turns go,
and a summary of them can stand where the gap marker would. Summaries are remembered by
the turns they cover, and the end of a summarised run stays where a cached summary ends
while everything after it fits; when it must move, it moves a share of the history's
space further (`summary_headroom`), so a growing session pays a summary call every few
requests, not on every one.
"""

from __future__ import annotations

import bisect
import hashlib
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ctxbudget._inputs import Turn

__all__ = ["HistoryOptions", "SpanKeys", "Summarize", "SummaryCache", "span_key"]

Summarize = Callable[[Sequence[Turn]], str | None]
"""Writes a summary of the turns about to be left out; None when it has none (yet)."""


def _sync_summarizer(value: Summarize | None) -> Summarize | None:
    if value is not None and (
        inspect.iscoroutinefunction(value)
        or inspect.iscoroutinefunction(type(value).__call__)  # an object with async __call__
    ):
        raise ValueError(
            "must be a plain function returning str or None, but got an async one; assembly "
            "does not await: run your async summariser between two assemblies instead "
            '(docs/agents.md, "Summaries": the second assembly passes summarize=...)'
        )
    return value


class HistoryOptions(BaseModel):
    """How history makes room before it drops whole turns, and what stands where it did.

    >>> assembler = ContextAssembler(tokenizer="gpt-4o", history=HistoryOptions(
    ...     keep_tool_results=5, never_clear=frozenset({"get_user"})))
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    clear_tool_results: bool = Field(
        default=True,
        description="When history does not fit, first replace the content of old tool results "
        "by a placeholder naming the tool and the size it had, oldest first; only then drop "
        "whole turns. False: drop whole turns only.",
    )
    keep_tool_results: int = Field(
        default=3,
        ge=0,
        description="How many of the most recent tool results stay whole while whole turns "
        "can still go instead: one is cleared only where its call and it would otherwise be "
        "dropped. Older results are cleared first, oldest first, as soon as history does not "
        "fit. The latest unit's results are never cleared: the model is answering them.",
    )
    clear_at_least: int = Field(
        default=0,
        ge=0,
        description="When clearing at all, clear tool results worth at least this many tokens, "
        "so an edit that invalidates the provider's prompt cache is worth it (Anthropic's "
        "clear_at_least).",
    )
    never_clear: frozenset[str] = Field(
        default=frozenset(),
        description="Tool names (Turn.name) whose results are never cleared.",
    )
    summarize: Annotated[Summarize | None, AfterValidator(_sync_summarizer)] = Field(
        default=None,
        description="Called with the turns about to be left out, one run at a time, only when "
        "turns are left out and no summary of that run is cached; its text (neutralised, "
        "labelled as a summary) stands where the gap marker would. None, blank text, an "
        "exception or a text over summary_tokens falls back to the gap marker, reported in "
        "Report.summaries. None: gap markers only.",
    )
    summary_tokens: int = Field(
        default=256,
        ge=1,
        description="Tokens reserved for each summary while deciding which turns fit, so the "
        "kept turns do not depend on the summary's text; a longer summary falls back to the "
        "gap marker.",
    )
    summary_headroom: float = Field(
        default=0.25,
        ge=0,
        lt=1,
        description="With a summariser: a summarised run keeps its end (its summary cached, "
        "no call) while the turns after it fit. When they no longer do, the end moves past the "
        "fewest turns that make room, then past further turns worth this share of history's "
        "grant, so that the next requests fit without moving it: one summary call per move. "
        "0: the fewest turns on every request, a new run and a new call whenever the end moves.",
    )
    rolling_summaries: bool = Field(
        default=False,
        description="When the end of a run moves and a summary of its start is cached, "
        "summarize gets that summary as a user turn, '[Summary of N earlier messages: ...]', "
        "then the run's turns after it: each call summarises only what is new. False: "
        "summarize gets every turn of the run.",
    )


def span_key(turns: Sequence[Turn]) -> bytes:
    """The cache key of a run of turns: a digest of each one's role, tool name and content.

    Ids and groups are left out: a framework that renumbers its messages still covers the
    same conversation.
    """
    digest = hashlib.sha256()
    for turn in turns:
        _feed(digest, turn)
    return digest.digest()[:16]


def _feed(digest: hashlib._Hash, turn: Turn) -> None:
    for field in (turn.role, turn.name or "", turn.content):
        data = field.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)


class SpanKeys:
    """`span_key` of ``turns[start:stop]`` for each stop a request weighs, every turn hashed
    once: the keys of all the runs from one start cost one pass over their turns."""

    def __init__(self, turns: Sequence[Turn], start: int, stops: Sequence[int]) -> None:
        """`stops`: increasing, every stop that may be asked for (those up to `start` are
        skipped); the key at each is taken on the way past it."""
        self._turns = turns
        self._stops = stops
        self._next = bisect.bisect_right(stops, start)
        self._at = start
        self._digest = hashlib.sha256()
        self._keys: dict[int, bytes] = {}

    def key(self, stop: int) -> bytes:
        """`span_key(turns[start:stop])`, for `stop` one of the stops after `start`."""
        while stop not in self._keys:
            upto = self._stops[self._next]
            self._next += 1
            for turn in self._turns[self._at : upto]:
                _feed(self._digest, turn)
            self._at = upto
            self._keys[upto] = self._digest.digest()[:16]  # digest() leaves the state as it was
        return self._keys[stop]


class SummaryCache:
    """Summaries by the turns they cover: a bounded LRU, thread-safe, one per assembler."""

    def __init__(self, maxsize: int = 1_024) -> None:
        self._maxsize = maxsize
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> str | None:
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
            return text

    def put(self, key: bytes, text: str) -> None:
        with self._lock:
            self._texts[key] = text
            self._texts.move_to_end(key)
            while len(self._texts) > self._maxsize:
                self._texts.popitem(last=False)
