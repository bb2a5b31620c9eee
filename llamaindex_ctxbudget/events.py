"""What the components decided, as LlamaIndex instrumentation events.

Dispatched through ``llama_index.core.instrumentation``, so any event handler added
to the root dispatcher (``get_dispatcher().add_event_handler(...)``), including
observability integrations, sees them inside the query's span. Ids and numbers only,
never text: handlers often log what they receive.
"""

from __future__ import annotations

# Re-exported by llama_index.core.instrumentation without an __all__, hence the ignore.
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.events import BaseEvent

from ctxbudget import Dropped, SummarySpan
from ctxbudget._deprecated import warn_renamed

__all__ = ["ContextPackedEvent", "HistoryTrimmedEvent", "SourcesSelectedEvent", "dispatcher"]

dispatcher = get_dispatcher(__name__)


class SourcesSelectedEvent(BaseEvent):
    """`ContextBudgetPostprocessor` chose the sources for one query."""

    tokens: int
    """The exact token count of the sources, each in its own fence, joined by blank lines."""
    budget: int
    """The limit they were selected under."""
    sources: list[str]
    """The node id shown as [1], [2], ... in order; for a document sent whole, its id."""
    dropped: list[Dropped]
    """Every node left out, with its reason (forbidden, duplicate, over_budget, ...)."""
    escalated: str | None
    """The document sent whole in place of its nodes, if any."""
    trimmed: bool
    """Some node was left out for lack of space."""

    @classmethod
    def class_name(cls) -> str:
        return "SourcesSelectedEvent"


class ContextPackedEvent(BaseEvent):
    """`ContextBudgetPromptHelper` packed texts into the context of one or more LLM calls."""

    space: int
    """Tokens the prompt template, its history and ``num_output`` left for sources."""
    numbers: list[list[int]]
    """Per LLM call, the [n] of the sources it gets, in order."""
    untrusted: list[int]
    """Per LLM call, how many texts that are not sources it gets (fenced as data)."""
    tokens: list[int]
    """Per LLM call, the exact token count of its fenced context."""

    @property
    def pieces(self) -> list[list[int]]:
        """Deprecated: read `numbers`."""
        warn_renamed("ContextPackedEvent.pieces", "ContextPackedEvent.numbers")
        return self.numbers

    @classmethod
    def class_name(cls) -> str:
        return "ContextPackedEvent"


class HistoryTrimmedEvent(BaseEvent):
    """`ContextBudgetMemory` budgeted the stored conversation for one LLM call."""

    tokens: int
    """The exact token count of the history as ctxbudget renders it (its frame included)."""
    limit: int
    """The limit it was trimmed to: the memory's token_limit, less initial_token_count."""
    sent: list[str]
    """The stored messages sent, by position (``chat_history[3]``), in order."""
    dropped: list[Dropped]
    """Every stored message left out (over_budget, oversize, summarized)."""
    cleared: list[str]
    """The tool results sent as a placeholder in place of their content."""
    summaries: list[SummarySpan]
    """With a summariser: each run left out and whether a summary stands there."""
    left_out: int
    """Messages before the first user message, which a request cannot start with."""

    @classmethod
    def class_name(cls) -> str:
        return "HistoryTrimmedEvent"
