"""`ContextBudgetRunnable`: budgeted, numbered, fenced context as one LCEL step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field, PrivateAttr

from ctxbudget import (
    Assembled,
    Chunk,
    ContextAssembler,
    HistoryOptions,
    InputError,
    Principal,
    SourceOptions,
    Tokenizer,
    Tool,
    permitted,
    traced,
)
from langchain_ctxbudget._convert import DocumentMetadataMapping
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    assembled_report,
    call_principal,
    chunks_of,
    cited_documents,
    documents_of,
    refuse_provider_count_with_tool_turns,
    selection_report,
    tool_of,
)
from langchain_ctxbudget._messages import Conversation, conversation_of
from langchain_ctxbudget._model import model_budget, model_tokenizer
from langchain_ctxbudget._summaries import Summarize, Summarizer, SummarizeWith, summarizer_of
from langchain_ctxbudget.citations import FENCE_KEY, citation_of, fence_numbered

__all__ = ["ContextBudgetRunnable", "ContextWithSources", "SourcedContext"]

_PROMPT_KEYS: Final = ("question", "documents", "history", "system", "tools", "examples", "memory")
"""The keys of the dict input; `question` is required unless `history` is continued."""


class SourcedContext(TypedDict):
    """What `ContextBudgetRunnable.with_sources` returns: the block and what it shows."""

    context: str
    """The fenced, numbered sources block, as the default output."""
    sources: list[Document]
    """The sources it shows, in prompt order: each its rendered ``[n]`` source as
    ``page_content`` with ``metadata["citation"] = n`` (what `CheckCitations` reads)."""


Input = list[Document] | dict[str, Any]
Output = str | ChatPromptValue


class ContextBudgetRunnable(RunnableSerializable[Input, Output]):
    """Budgeted, deduplicated, numbered, fenced context for an LCEL chain (docs/langchain.md,
    "LangChain").

    - A list of `Document` in (what a retriever returns) → the fenced, numbered sources
      block as a `str`, chosen within the budget's ``retrieved`` allocation alone, so
      ``{"context": retriever | ctx, "question": RunnablePassthrough()} | prompt | model``
      works unchanged.
      `with_sources` gives ``{"context": str, "sources": [Document]}`` instead, the block
      and the documents it shows, for `CheckCitations` after the model. Documents a
      ctxbudget component already selected (a
      ``ContextualCompressionRetriever`` with `ContextBudgetCompressor`, the transformer,
      `ContextBudgetRetriever`) are fenced as they are, their numbers unchanged, and
      refused when the block would exceed the ``retrieved`` allocation.
    - A dict in (``question``, and optionally ``documents``, ``history`` as messages or
      message-likes, ``system``, ``tools``, ``examples``, ``memory``) → the whole prompt as
      a `ChatPromptValue`: the stable prefix as one system message first (the history's
      system messages join it), kept history (docs/agents.md, "Agents and chat": the first human
      turn, the most recent; old tool results cleared, then gap markers or summaries where
      messages were left out; an AI message with tool calls stays with its tool results),
      then one human message with the sources and the question. Without a ``question``
      the history is continued: its latest message is always sent (or `ContextBudgetError`
      names it) and the prompt ends with it, or with the sources after it. History messages
      are rebuilt as they are counted: texts neutralised, every part counted or refused
      (docs/langchain.md, "What a message costs").

    Who is asking: built with `principal`, it serves that principal only, and a call whose
    config names anyone else (None included) is refused; built without, each call's
    ``config["configurable"]["principal"]`` (a `Principal` or a mapping of its fields),
    and a call naming nobody sees unrestricted documents only. Each run dispatches the
    custom event ``"ctxbudget_report"`` with the assembly report, so it shows in LangSmith
    and in ``astream_events``. Text is passed as values, never made into a template, so
    content with ``{`` and ``}`` arrives unchanged. Retrieval that found permitted sources
    but could send none raises `ContextBudgetError` when the ``retrieved`` allocation has
    a min, and logs a warning naming them otherwise.

    >>> ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o"))
    >>> ctx.invoke([Document("Refunds take 5 days.", id="a")]).count("[1]")
    1
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    assembler: ContextAssembler
    """The budget, tokenizer, source and history options; build one per app and share it."""
    principal: Principal | None = None
    """The one principal this runnable serves; None takes it from each call's config."""
    cache_control: bool = False
    """Mark the end of the stable prefix with Anthropic's ``cache_control`` (dict input).
    Leave False for providers that reject unknown content-block keys (OpenAI)."""
    mapping: DocumentMetadataMapping = Field(default_factory=DocumentMetadataMapping)
    """Which `Document.metadata` keys fill which `Chunk` field."""
    summarize: SummarizeWith | None = None
    """What writes the summaries standing where history messages were left out (dict input):
    a chat model (awaited with ``ainvoke`` by ``ainvoke``) or a function of the left-out
    messages returning str or None; None leaves it to ``assembler.history.summarize``."""
    _summarizer: Summarizer | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._summarizer = summarizer_of(self.summarize, where="ContextBudgetRunnable")

    @classmethod
    def for_model(
        cls,
        chat_model: BaseChatModel,
        *,
        reserve_output: int,
        tokenizer: str | Tokenizer | None = None,
        sources: SourceOptions | None = None,
        history: HistoryOptions | None = None,
        principal: Principal | None = None,
        cache_control: bool | None = None,
        mapping: DocumentMetadataMapping | None = None,
        summarize: SummarizeWith | None = None,
    ) -> ContextBudgetRunnable:
        """A runnable sized to `chat_model`: the budget from its ``profile["max_input_tokens"]``
        (`Budget.for_context_window`), the tokenizer from its model name.

        Args:
            reserve_output: tokens kept free for the answer (required: it depends on your
                answers, see `Budget.for_context_window`).
            tokenizer: overrides the tokenizer named by the model (needed for models
                ctxbudget cannot count: pass a `HuggingFaceTokenizer` or a
                `CallableTokenizer`).
            cache_control: None marks the prefix for Anthropic models (LangSmith provider
                ``"anthropic"``) only.
        """
        if tokenizer is None:
            tokenizer = model_tokenizer(chat_model, where="for_model")
        if cache_control is None:
            cache_control = chat_model._get_ls_params().get("ls_provider") == "anthropic"
        assembler = ContextAssembler(
            tokenizer=tokenizer,
            budget=model_budget(
                chat_model, reserve_output=reserve_output, where="ContextBudgetRunnable"
            ),
            sources=sources,
            history=history,
        )
        return cls(
            assembler=assembler,
            principal=principal,
            cache_control=cache_control,
            mapping=DocumentMetadataMapping() if mapping is None else mapping,
            summarize=summarize,
        )

    @traced("ctxbudget.langchain.ContextBudgetRunnable.invoke")
    def invoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Output:
        """Build the context block (list input) or the whole prompt (dict input)."""
        return self._call_with_config(self._run, input, config, run_type="prompt")

    @traced("ctxbudget.langchain.ContextBudgetRunnable.ainvoke")
    async def ainvoke(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Output:
        """`invoke`, dispatching the report event on the async callback path and awaiting
        summaries."""
        return await self._acall_with_config(self._arun, input, config, run_type="prompt")

    def _run(
        self, input: Input, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Output:
        principal = call_principal(self.principal, config)
        output: Output
        if isinstance(input, Mapping):
            prompt = self._prompt(input, principal)
            summarize = None
            if self._summarizer is not None:
                summarize = self._summarizer.sync(prompt.conversation, words=self._words())
            output, report = prompt.result(prompt.assemble(summarize))
        else:
            output, _, report = self._sources(input, principal)
        dispatch_custom_event(REPORT_EVENT, report, config=config)
        return output

    async def _arun(
        self, input: Input, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> Output:
        principal = call_principal(self.principal, config)
        output: Output
        if isinstance(input, Mapping):
            prompt = self._prompt(input, principal)
            if self._summarizer is None:
                assembled = prompt.assemble(None)
            else:
                assembled = await self._summarizer.two_pass(
                    prompt.conversation, prompt.assemble, words=self._words()
                )
            output, report = prompt.result(assembled)
        else:
            output, _, report = self._sources(input, principal)
        await adispatch_custom_event(REPORT_EVENT, report, config=config)
        return output

    def with_sources(self) -> ContextWithSources:
        """This runnable for a retriever's documents, returning the block and the documents it
        shows (``{"context": str, "sources": [Document]}``) for `CheckCitations` after the
        model; `create_retrieval_chain` keeps its ``context`` documents the same way."""
        return ContextWithSources(context=self)

    def _words(self) -> int:
        return max(self.assembler.history.summary_tokens // 2, 1)

    def _sources(
        self, input: object, principal: Principal | None
    ) -> tuple[str, list[Document], dict[str, Any]]:
        provider = self.assembler.provider_count
        if provider is not None:
            # The block goes into a prompt this runnable never sees, so the count would
            # measure neither what is sent nor anything at all (select_sources makes none).
            raise InputError(
                f"this assembler has a provider count ({provider.label}), which measures the "
                "whole prompt, but a list of Documents gives only the sources block, which "
                "your prompt wraps in text the count never sees; pass a dict input, e.g. "
                '{"documents": retriever, "question": RunnablePassthrough()} | ctx | model, '
                "so this runnable builds the prompt the count measures, or use an assembler "
                "without provider_count"
            )
        if isinstance(input, Sequence) and not isinstance(input, str | bytes):
            documents = documents_of(input)
            if any(FENCE_KEY in document.metadata for document in documents):
                text, sources, report = self._numbered(documents, principal)
            else:
                chunks = chunks_of(documents, self.mapping, self.assembler)
                selection = self.assembler.select_sources(chunks, principal=principal)
                text, report = selection.text, selection_report(selection)
                sources = cited_documents(selection, documents, chunks, self.mapping)
            return text, sources, report
        raise InputError(
            f"ContextBudgetRunnable takes a list of Documents (a retriever's output) or a dict "
            f"with {', '.join(_PROMPT_KEYS)}; got {type(input).__name__}"
        )

    def _numbered(
        self, documents: list[Document], principal: Principal | None
    ) -> tuple[str, list[Document], dict[str, Any]]:
        """Documents a ctxbudget component selected: fenced as they are, within the budget,
        each permitted to this call's principal again (they may have been chosen for another)."""
        text = fence_numbered(documents)
        chunks = chunks_of(documents, self.mapping, self.assembler)
        access = self.assembler.sources.access
        forbidden = [c.id for c in chunks if not permitted(c, principal, access)]
        if forbidden:
            raise InputError(
                f"numbered document(s) {', '.join(forbidden)} may not be seen by this call's "
                "principal: they were selected for another; select for the principal asking"
            )
        tokens = self.assembler.counter.count(text)
        # The limit a selection of this assembler is made under, by the core's own rule.
        limit = self.assembler.select_sources([]).budget
        if tokens > limit:
            raise InputError(
                f"the {len(documents)} numbered documents take {tokens} tokens fenced, over the "
                f"{limit} of the retrieved allocation; give the component that selected them "
                f"max_tokens={limit} or less (their numbers are never reassigned to drop some)"
            )
        sources = [
            {"n": citation_of(i, d), "id": d.id, "document_id": None}
            for i, d in enumerate(documents)
        ]
        report = {"budget": limit, "tokens": tokens, "numbered": True, "sources": sources}
        return text, [d.model_copy(deep=True) for d in documents], report

    def _prompt(self, values: Mapping[str, Any], principal: Principal | None) -> _Prompt:
        unknown = [key for key in values if key not in _PROMPT_KEYS]
        if unknown:
            raise InputError(
                f"unknown input key(s) {', '.join(map(repr, unknown))}; the dict input takes "
                f"{', '.join(_PROMPT_KEYS)}"
            )
        conversation = conversation_of(
            "history", values.get("history", []), counter=self.assembler.counter
        )
        refuse_provider_count_with_tool_turns(
            self.assembler,
            any(t.role == "tool" for t in conversation.turns),
            where="ContextBudgetRunnable",
        )
        question = values.get("question")
        if question is None and not conversation.turns:
            raise InputError(
                "the dict input needs 'question', the user's question as a str (it is sent "
                "once, last), or a 'history' to continue without one"
            )
        if question is None and conversation.turns[-1].role == "assistant":
            raise InputError(
                f"the dict input has no 'question', so it continues the history, which must "
                f"then end with the user's message or tool results, but "
                f"{conversation.turns[-1].id} is an AI message; pass the user's next message "
                "as 'question'"
            )
        tools = values.get("tools", [])
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise InputError(f"tools must be a list of tools, but got {type(tools).__name__}")
        described = [tool_of(index, tool) for index, tool in enumerate(tools)]
        system = "\n\n".join(
            text for text in (values.get("system"), *conversation.system_texts()) if text
        )
        return _Prompt(
            self.assembler,
            self.cache_control,
            conversation,
            chunks=chunks_of(
                documents_of(values.get("documents", [])), self.mapping, self.assembler
            ),
            tools=tuple(tool for tool in described if tool is not None),
            values=values,
            system=system or None,
            principal=principal,
        )


class ContextWithSources(RunnableSerializable[list[Document], SourcedContext]):
    """`ContextBudgetRunnable.with_sources`: the list input's block and its source documents."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    context: ContextBudgetRunnable
    """The runnable whose block and sources are returned."""

    def invoke(
        self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> SourcedContext:
        """The block and the documents it shows, as `ContextBudgetRunnable` builds them."""
        return self._call_with_config(self._run, input, config, run_type="prompt")

    async def ainvoke(
        self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> SourcedContext:
        """`invoke`, dispatching the report event on the async callback path."""
        return await self._acall_with_config(self._arun, input, config, run_type="prompt")

    def _selected(self, input: object, config: RunnableConfig) -> tuple[SourcedContext, Any]:
        principal = call_principal(self.context.principal, config)
        text, sources, report = self.context._sources(input, principal)
        return {"context": text, "sources": sources}, report

    def _run(
        self, input: list[Document], run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> SourcedContext:
        output, report = self._selected(input, config)
        dispatch_custom_event(REPORT_EVENT, report, config=config)
        return output

    async def _arun(
        self,
        input: list[Document],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> SourcedContext:
        output, report = self._selected(input, config)
        await adispatch_custom_event(REPORT_EVENT, report, config=config)
        return output


@dataclass(frozen=True)
class _Prompt:
    """A dict input, converted: what the core assembles, and the prompt made of its result."""

    assembler: ContextAssembler
    cache_control: bool
    conversation: Conversation
    chunks: list[Chunk]
    tools: tuple[Tool, ...]
    values: Mapping[str, Any]
    system: str | None
    """The input's system text and the history's system messages, as counted."""
    principal: Principal | None

    def assemble(self, summarize: Summarize | None) -> Assembled:
        return self.assembler.assemble(
            question=self.values.get("question"),
            system=self.system,
            chunks=self.chunks,
            history=self.conversation.turns,
            tools=self.tools,
            examples=self.values.get("examples"),
            memory=self.values.get("memory"),
            principal=self.principal,
            summarize=summarize,
        )

    def result(self, assembled: Assembled) -> tuple[ChatPromptValue, dict[str, Any]]:
        """The prompt: the prefix as one system message, the kept history, the tail."""
        messages: list[BaseMessage] = []
        if assembled.prefix:
            content: str | list[str | dict[str, Any]] = assembled.prefix_text
            if self.cache_control:
                content = [dict(b) for b in assembled.messages(style="anthropic")["system"]]
            messages.append(SystemMessage(content=content))
        messages += self.conversation.sent(
            assembled.history, assembled.history_turns, set(assembled.cleared)
        )
        if assembled.tail:
            messages.append(HumanMessage(content=assembled.tail))
        return ChatPromptValue(messages=messages), assembled_report(assembled)
