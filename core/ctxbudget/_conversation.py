"""How the history claimant shrinks before and while it drops turns: tool-result clearing and
summaries (README "Agents and chat").

Tool results dominate an agent's context, and an old one is rarely read again: clearing
it (a placeholder in place of its content, the turn itself kept) frees its space without
splitting a call from its result. Only when clearing is not enough do whole turns go,
and a summary of them can stand where the gap marker would. Summaries are remembered by
the turns they cover, so a long session pays one summary call per span, not per request.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ctxbudget._inputs import Turn

__all__ = ["HistoryOptions", "Summarize", "SummaryCache", "span_key"]

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
            '(README "Summaries": the second assembly passes summarize=...)'
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
        "turns are left out; its text (neutralised, labelled as a summary) stands where the gap "
        "marker would. None, blank text, an exception or a text over summary_tokens falls back "
        "to the gap marker, reported in Report.summaries. None: gap markers only.",
    )
    summary_tokens: int = Field(
        default=256,
        ge=1,
        description="Tokens reserved for each summary while deciding which turns fit, so the "
        "kept turns do not depend on the summary's text; a longer summary falls back to the "
        "gap marker.",
    )


def span_key(turns: Sequence[Turn]) -> bytes:
    """The cache key of a run of turns: a digest of each one's role, tool name and content.

    Ids and groups are left out: a framework that renumbers its messages still covers the
    same conversation.
    """
    digest = hashlib.sha256()
    for turn in turns:
        for field in (turn.role, turn.name or "", turn.content):
            data = field.encode("utf-8", "surrogatepass")
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    return digest.digest()[:16]


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
