"""`ContextBudgetMemory`: a LlamaIndex chat memory whose history is budgeted by the core."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms import LLM
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore

from ctxbudget import (
    Budget,
    ContextAssembler,
    HistoryOptions,
    InputError,
    Tokenizer,
    TrimmedHistory,
    Turn,
    fence_untrusted,
    neutralise_section,
    traced,
)
from ctxbudget._deprecated import renamed_keyword
from llamaindex_ctxbudget._config import budget_for, build_assembler
from llamaindex_ctxbudget._messages import Conversation, conversation, inert, sent_messages
from llamaindex_ctxbudget.events import HistoryTrimmedEvent, dispatcher

__all__ = ["DEFAULT_SUMMARY_PROMPT", "ContextBudgetMemory"]

DEFAULT_SUMMARY_PROMPT: Final = (
    "Summarise the earlier part of a conversation, below, in a few sentences: what the user "
    "asked or said, and what was found, answered or decided. Write only the summary.\n\n"
    "{conversation}"
)
"""The summariser's prompt; ``{conversation}`` is the left-out messages, fenced as data."""

_WHERE: Final = "chat_history"

_Summarize = Callable[[Sequence[Turn]], str | None]


def _limit_of(budget: Budget) -> int:
    """The history allocation's max, capped by what the budget has available."""
    history = budget.allocation("history")
    cap = None if history is None else history.max
    return budget.available if cap is None else min(cap, budget.available)


def _inert_summaries(summarize: _Summarize) -> _Summarize:
    """`summarize` whose summaries are inert to LlamaIndex's templates, as every text sent is;
    whatever else it returns or raises reaches the core, which reports it."""

    def inert_summary(turns: Sequence[Turn]) -> str | None:
        summary = summarize(turns)
        return inert(summary) if isinstance(summary, str) else summary

    return inert_summary


class ContextBudgetMemory(BaseChatStoreMemory):
    """A chat memory that stores the conversation whole and sends the part that fits.

    `get` budgets the stored messages by the core's history rule (docs/llamaindex.md,
    "Chat engines and agents"): the latest message (or tool call with its results) always,
    the first user message, then the most recent that fit within `token_limit`, old tool
    results cleared first, a gap marker (or a summary, with ``summarize=``) wherever
    messages are left out. Each message is sent rebuilt as it was counted: texts
    neutralised, every part counted or refused (docs/langchain.md, "What a message costs").
    `get_all` returns the stored messages uncut and unchanged. Drop it into a chat engine or
    an agent::

        memory = ContextBudgetMemory.from_defaults(tokenizer="gpt-4o", llm=llm)
        engine = index.as_chat_engine(chat_mode="condense_plus_context", memory=memory)
    """

    token_limit: int = Field(
        gt=0,
        description="The history's limit in tokens, counted exactly as ctxbudget renders it.",
    )

    _assembler: ContextAssembler = PrivateAttr()
    _summarizer: LLM | None = PrivateAttr(default=None)
    _summary_prompt: str = PrivateAttr(default=DEFAULT_SUMMARY_PROMPT)
    _input: str = PrivateAttr(default="")

    def __init__(
        self,
        assembler: ContextAssembler,
        *,
        token_limit: int,
        summarize: LLM | None = None,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
    ) -> None:
        """Prefer `from_defaults`; see there."""
        fields: dict[str, Any] = {
            "token_limit": token_limit,
            "chat_store": chat_store or SimpleChatStore(),
            "chat_store_key": chat_store_key,
        }
        super().__init__(**fields)
        if summarize is not None and not isinstance(summarize, LLM):
            raise InputError(
                f"summarize must be a LlamaIndex LLM, but got {type(summarize).__name__}; for "
                "a function of ctxbudget Turns, pass history=HistoryOptions(summarize=...)"
            )
        if summarize is not None and assembler.history.summarize is not None:
            raise InputError(
                "pass summarize= (an LLM) or HistoryOptions(summarize=...), not both: each "
                "writes the summaries"
            )
        if "{conversation}" not in summary_prompt:
            raise InputError(
                "summary_prompt must contain {conversation}, where the messages to summarise "
                f"go, but got {summary_prompt[:60]!r}"
            )
        self._assembler = assembler
        self._summarizer = summarize
        self._summary_prompt = summary_prompt

    @classmethod
    def class_name(cls) -> str:
        return "ContextBudgetMemory"

    @property
    def last_input(self) -> str:
        """The latest `input` given to `get`/`aget`: a chat engine's user message, which a
        condense step replaces before retrieval. A linked postprocessor leaves it room."""
        return self._input

    @classmethod
    @renamed_keyword("ContextBudgetMemory.from_defaults", "options", "history")
    def from_defaults(  # type: ignore[override]
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        *,
        tokenizer: str | Tokenizer | None = None,
        assembler: ContextAssembler | None = None,
        token_limit: int | None = None,
        history: HistoryOptions | None = None,
        summarize: LLM | None = None,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
    ) -> ContextBudgetMemory:
        """A memory holding `chat_history` (if given) in `chat_store`.

        Args:
            llm: the LLM whose window sizes `token_limit` when it is not given: the history
                allocation of the budget the postprocessor derives from the same window.
            tokenizer: the model's tokenizer (by default the one `llm`'s model name names);
                or pass `assembler`, whose budget's history allocation is the limit when
                neither `token_limit` nor `llm` is given.
            history: tool-result clearing and summaries (`HistoryOptions`).
            summarize: an LLM that writes the summary of messages left out (``complete``,
                or ``acomplete`` in `aget`), called only when messages are left out and
                once per run of them; a failure leaves the gap marker.
            summary_prompt: its prompt, with ``{conversation}`` where the messages go.
        """
        built = build_assembler(
            assembler, tokenizer=tokenizer, sources=None, history=history, llm=llm
        )
        if token_limit is None:
            token_limit = _limit_of(built.budget if llm is None else budget_for(llm.metadata))
        memory = cls(
            built,
            token_limit=token_limit,
            summarize=summarize,
            summary_prompt=summary_prompt,
            chat_store=chat_store,
            chat_store_key=chat_store_key,
        )
        if chat_history is not None:
            memory.set(chat_history)
        return memory

    # --- what the LLM gets ---------------------------------------------------------------------

    @traced("ctxbudget.llamaindex.ContextBudgetMemory.get")
    def get(
        self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """The stored conversation within `token_limit` (less `initial_token_count`, tokens
        the caller spends beside it), as the messages to send. `input` is not used: what is
        kept depends on the conversation only; it is kept as `last_input`."""
        self._remember(input)
        given = self._conversation(self.get_all(), kwargs)
        llm = self._summarizer
        if llm is None:
            return sent_messages(given, self._trim(given, initial_token_count, None))

        def summarize(turns: Sequence[Turn]) -> str:
            return inert(llm.complete(self._prompt(turns)).text)

        return sent_messages(given, self._trim(given, initial_token_count, summarize))

    @traced("ctxbudget.llamaindex.ContextBudgetMemory.aget")
    async def aget(
        self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any
    ) -> list[ChatMessage]:
        """`get` for async callers: the summariser's ``acomplete`` in the core's two passes
        (docs/agents.md, "Summaries"): the first records what the core asks to summarise, the second
        uses the summaries awaited in between."""
        self._remember(input)
        given = self._conversation(await self.aget_all(), kwargs)
        if self._summarizer is None:
            return sent_messages(given, self._trim(given, initial_token_count, None))
        llm = self._summarizer
        # What the first pass asks for is what the second asks again: the run's turns, or
        # with rolling_summaries the earlier summary and the turns after it.
        asked: list[tuple[Turn, ...]] = []

        def record(turns: Sequence[Turn]) -> None:
            asked.append(tuple(turns))

        self._trim(given, initial_token_count, record, report=False)
        written: dict[tuple[Turn, ...], str | Exception] = {}
        for covered in asked:
            try:
                written[covered] = (await llm.acomplete(self._prompt(covered))).text
            except Exception as error:  # the core reports it and leaves the gap marker
                written[covered] = error

        def summarize(turns: Sequence[Turn]) -> str | None:
            text = written.get(tuple(turns))
            if isinstance(text, Exception):
                raise text
            return None if text is None else inert(text)

        return sent_messages(given, self._trim(given, initial_token_count, summarize))

    def _remember(self, input: str | None) -> None:
        if input is not None:
            self._input = input

    def _conversation(self, messages: list[ChatMessage], kwargs: dict[str, Any]) -> Conversation:
        if kwargs:
            raise InputError(
                f"ContextBudgetMemory.get takes input= and initial_token_count=, but got "
                f"{', '.join(sorted(kwargs))}"
            )
        counter = self._assembler.counter
        return conversation(
            _WHERE, messages, lambda text: counter.rewritten(text, neutralise_section)
        )

    def _trim(
        self,
        given: Conversation,
        initial_token_count: int,
        summarize: _Summarize | None,
        *,
        report: bool = True,
    ) -> TrimmedHistory:
        if not 0 <= initial_token_count < self.token_limit:
            raise InputError(
                f"initial_token_count must be >= 0 and below token_limit ({self.token_limit:,}), "
                f"but got {initial_token_count:,}"
            )
        limit = self.token_limit - initial_token_count
        own = self._assembler.history.summarize
        if summarize is None and own is not None:
            summarize = _inert_summaries(own)
        trimmed = self._assembler.trim_history(
            given.turns, max_tokens=limit, min_tokens=0, summarize=summarize
        )
        if report:
            dispatcher.event(
                HistoryTrimmedEvent(
                    tokens=trimmed.tokens,
                    limit=limit,
                    sent=[given.turns[index].id or "" for index in trimmed.kept],
                    dropped=list(trimmed.dropped),
                    cleared=[given.turns[index].id or "" for index in trimmed.cleared],
                    summaries=list(trimmed.summaries),
                    left_out=given.left_out,
                )
            )
        return trimmed

    def _prompt(self, turns: Sequence[Turn]) -> str:
        """The summariser's prompt for `turns`: their text, as sent, fenced as data."""
        lines = "\n".join(f"{turn.role.title()}: {turn.content}" for turn in turns)
        return self._summary_prompt.replace("{conversation}", fence_untrusted([lines]))
