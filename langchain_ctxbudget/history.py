"""`trim_history`: a chat history cut to a token budget by the core's history rules."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableLambda

from ctxbudget import (
    ContextAssembler,
    ContextBudgetError,
    HistoryOptions,
    InputError,
    Tokenizer,
    TrimmedHistory,
    traced,
)
from ctxbudget._deprecated import renamed_keyword
from langchain_ctxbudget._messages import Conversation, conversation_of, positions_of
from langchain_ctxbudget._model import model_tokenizer
from langchain_ctxbudget._summaries import Summarize, SummarizeWith, summarizer_of

__all__ = ["history_trimmer", "trim_history"]

Messages = Sequence[Any] | PromptValue
"""LangChain messages, or what ``trim_messages`` also reads: ``("human", "hi")``,
``{"role": "user", "content": "hi"}``, a str for a human message, a `PromptValue`."""


class _Trimmer:
    """`trim_history`'s work, with one assembler for its token counts and summaries:
    remembered across calls by `history_trimmer`, new for each `trim_history`."""

    def __init__(
        self,
        tokenizer: str | Tokenizer | BaseChatModel,
        history: HistoryOptions | None,
        summarize: SummarizeWith | None,
    ) -> None:
        if isinstance(tokenizer, BaseChatModel):
            tokenizer = model_tokenizer(tokenizer, where="trim_history")
        self.assembler = ContextAssembler(tokenizer=tokenizer, history=history)
        self.summarizer = summarizer_of(summarize, where="trim_history")

    def _prepare(self, messages: object, max_tokens: int) -> tuple[Conversation, int]:
        """The conversation, and the tokens left for its turns once its system messages
        (always kept) are counted."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
            raise InputError(f"max_tokens must be an int >= 0, but got {max_tokens!r}")
        conversation = conversation_of("messages", messages, counter=self.assembler.counter)
        if not conversation.system:
            return conversation, max_tokens
        needed = self.assembler.trim_history(
            conversation.system_turns, max_tokens=sys.maxsize, min_tokens=0
        ).tokens
        if needed > max_tokens:
            raise ContextBudgetError(
                "history",
                needed,
                max_tokens,
                "system messages are always kept; raise max_tokens or shorten them",
            )
        return conversation, max_tokens - needed

    def _trim(
        self, conversation: Conversation, left: int, summarize: Summarize | None
    ) -> TrimmedHistory:
        return self.assembler.trim_history(
            conversation.turns, max_tokens=left, min_tokens=0, summarize=summarize
        )

    def _words(self) -> int:
        return max(self.assembler.history.summary_tokens // 2, 1)

    @traced("ctxbudget.langchain.trim_history")
    def trim(self, messages: object, max_tokens: int) -> list[BaseMessage]:
        conversation, left = self._prepare(messages, max_tokens)
        if not conversation.turns:
            return conversation.system_messages()
        summarize = None
        if self.summarizer is not None:
            summarize = self.summarizer.sync(conversation, words=self._words())
        return _sent(conversation, self._trim(conversation, left, summarize))

    @traced("ctxbudget.langchain.trim_history")
    async def atrim(self, messages: object, max_tokens: int) -> list[BaseMessage]:
        conversation, left = self._prepare(messages, max_tokens)
        if not conversation.turns:
            return conversation.system_messages()
        if self.summarizer is None:
            return _sent(conversation, self._trim(conversation, left, None))
        trimmed = await self.summarizer.two_pass(
            conversation,
            lambda summarize: self._trim(conversation, left, summarize),
            words=self._words(),
        )
        return _sent(conversation, trimmed)


def _sent(conversation: Conversation, trimmed: TrimmedHistory) -> list[BaseMessage]:
    history = conversation.sent(trimmed.messages, positions_of(trimmed), set(trimmed.cleared))
    return [*conversation.system_messages(), *history]


@renamed_keyword("trim_history", "options", "history")
def trim_history(
    messages: Messages,
    *,
    max_tokens: int,
    tokenizer: str | Tokenizer | BaseChatModel,
    history: HistoryOptions | None = None,
    summarize: SummarizeWith | None = None,
) -> list[BaseMessage]:
    """The messages that fit in `max_tokens` (docs/agents.md, "In LangChain"): every system
    message, first; then the latest message, the first human turn, and the most recent
    turns that fit, old tool results cleared before any turn goes, and a gap marker (or a
    summary) where messages are left out.

    Turns are whole: an `AIMessage` with tool calls and the `ToolMessage` results that
    answer it are kept or dropped together, and the result is a valid request for every
    provider: after the system messages it opens with a human message (a gap marker
    counts; a conversation opening with the model gets ``[conversation start]`` first),
    and a system message from mid-conversation is moved up to the others, as LangChain's
    Anthropic integration accepts system messages only in one run. A cleared result keeps
    its `ToolMessage` and ``tool_call_id``, with ``[tool result cleared: search, 543
    tokens]`` as its content. Messages come back as new messages of the same classes, ids
    and tool calls, their texts neutralised, every part counted or refused (docs/langchain.md,
    "What a message costs"); the inputs are not changed. Counts are exact, with the model's
    tokenizer, over the turns as ctxbudget renders them (``User: …``).

    Args:
        messages: LangChain messages, or message-likes as ``trim_messages`` reads them.
        tokenizer: a tiktoken model or encoding name, a `Tokenizer`, or a chat model whose
            model name resolves to one.
        history: tool-result clearing and summaries (`HistoryOptions`; clearing is on).
        summarize: writes the summary standing where messages were left out: a chat model
            (sent a short summary prompt with the excerpt) or a function of the left-out
            messages returning str or None. It overrides ``history.summarize``.

    Compared with ``langchain_core.messages.trim_messages(strategy="last",
    include_system=True, start_on="human")``, which keeps one system message at index 0
    and a suffix of the conversation: this also keeps the first human turn (it states
    the topic), tells the model where and how many messages are missing instead of
    splicing distant turns together, never separates tool calls from their results,
    keeps every system message, and counts exactly rather than approximately. It never
    cuts a message in part.

    Raises:
        ContextBudgetError: the system messages alone, or the latest message (with its
            tool call, when it is a result), do not fit in `max_tokens`; the error names it.
        InputError: a message it cannot read or count, a tool result without its call, a
            call left unanswered.
    """
    return _Trimmer(tokenizer, history, summarize).trim(messages, max_tokens)


@renamed_keyword("history_trimmer", "options", "history")
def history_trimmer(
    *,
    max_tokens: int,
    tokenizer: str | Tokenizer | BaseChatModel,
    history: HistoryOptions | None = None,
    summarize: SummarizeWith | None = None,
) -> Runnable[Messages, list[BaseMessage]]:
    """`trim_history` as a Runnable, for a chain: ``history_trimmer(...) | prompt | model``.

    It remembers token counts and summaries across calls (a conversation resends its
    messages every turn, and a summary is written once per run of left-out messages);
    ``ainvoke`` awaits a chat model's summaries (``ainvoke``) between two passes, so the
    event loop never waits on one.
    """
    trimmer = _Trimmer(tokenizer, history, summarize)

    def trim(messages: Messages) -> list[BaseMessage]:
        return trimmer.trim(messages, max_tokens)

    async def atrim(messages: Messages) -> list[BaseMessage]:
        return await trimmer.atrim(messages, max_tokens)

    return RunnableLambda(trim, afunc=atrim, name="trim_history")
