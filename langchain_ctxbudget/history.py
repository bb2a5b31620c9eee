"""`trim_history`: a chat history cut to a token budget by whole turns, with gap markers."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableLambda

from ctxbudget import ContextBudgetError, Tokenizer, trim_turns
from langchain_ctxbudget._langchain import restore, units_of

__all__ = ["history_trimmer", "trim_history"]


def _is_system(message: BaseMessage) -> bool:
    return isinstance(message, SystemMessage)


def trim_history(
    messages: Sequence[BaseMessage], *, max_tokens: int, tokenizer: str | Tokenizer
) -> list[BaseMessage]:
    """The messages that fit in `max_tokens`: every system message, the first human turn,
    then the most recent turns that fit, and a gap marker where turns are left out.

    Turns are whole: an `AIMessage` with tool calls and the `ToolMessage` results that
    answer it are kept or dropped together, so the result is always a valid request.
    Messages come back in order as new messages of the same classes, ids and tool calls,
    with their texts neutralised as the core's own messages are, and every part counted
    or refused (README "What a message costs"); the inputs are not changed. A gap marker
    is a `HumanMessage` such as ``[… 12 messages omitted …]``. Counts are exact, with the
    model's tokenizer, over the turns as ctxbudget renders them (``User: …``); system
    messages are counted first and the rest trimmed to what remains.

    Compared with ``langchain_core.messages.trim_messages(strategy="last",
    include_system=True, start_on="human")``, which keeps one system message at index
    0 and a suffix of the conversation: this also keeps the first human turn (it
    states the topic), tells the model where turns are missing instead of splicing
    distant turns together, never separates tool calls from their results, keeps every
    system message, and counts exactly rather than approximately. `trim_messages` can
    cut a message in part (``allow_partial``) or keep a prefix (``strategy="first"``);
    this never cuts a message.

    Raises:
        ContextBudgetError: the system messages alone do not fit in `max_tokens`.
    """
    pinned = units_of("messages", messages, skip=lambda m: not _is_system(m))
    units = units_of("messages", messages, skip=_is_system)
    left = max_tokens
    if pinned:
        turns = [unit.turn for unit in pinned]
        fixed = trim_turns(turns, max_tokens=max_tokens, tokenizer=tokenizer)
        if len(fixed.kept) < len(turns):
            needed = trim_turns(turns, max_tokens=sys.maxsize, tokenizer=tokenizer).tokens
            raise ContextBudgetError(
                "history",
                needed,
                max_tokens,
                "system messages are always kept; raise max_tokens or shorten them",
            )
        left -= fixed.tokens
    trimmed = trim_turns([unit.turn for unit in units], max_tokens=left, tokenizer=tokenizer)
    placed = restore(units, set(trimmed.kept), trimmed.messages)
    placed.extend((unit.start, unit.sent()) for unit in pinned)
    placed.sort(key=lambda item: item[0])
    return [message for _, group in placed for message in group]


def history_trimmer(
    *, max_tokens: int, tokenizer: str | Tokenizer
) -> Runnable[Sequence[BaseMessage], list[BaseMessage]]:
    """`trim_history` as a Runnable, for a chain: ``history_trimmer(...) | prompt | model``."""

    def trim(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        return trim_history(messages, max_tokens=max_tokens, tokenizer=tokenizer)

    return RunnableLambda(trim, name="trim_history")
