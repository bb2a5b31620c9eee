"""`ContextBudgetRunnable`: budgeted, numbered, fenced context as one LCEL step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

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
from pydantic import ConfigDict, Field

from ctxbudget import (
    Budget,
    BudgetError,
    ContextAssembler,
    InputError,
    Principal,
    SourceOptions,
    Tokenizer,
    TokenizerError,
    get_tokenizer,
)
from langchain_ctxbudget._convert import MetadataMapping
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    assembled_report,
    call_principal,
    chunks_of,
    documents_of,
    kept_units,
    restore,
    selection_report,
    tool_of,
    units_of,
)

__all__ = ["ContextBudgetRunnable"]

_PROMPT_KEYS: Final = ("question", "documents", "history", "system", "tools", "examples", "memory")
"""The keys of the dict input; `question` is required."""

Input = list[Document] | dict[str, Any]
Output = str | ChatPromptValue


class ContextBudgetRunnable(RunnableSerializable[Input, Output]):
    """Budgeted, deduplicated, numbered, fenced context for an LCEL chain (README "LangChain").

    - A list of `Document` in (what a retriever returns) → the fenced, numbered sources
      block as a `str`, chosen within the budget's ``retrieved`` allocation alone, so
      ``{"context": retriever | ctx, "question": RunnablePassthrough()} | prompt | model``
      works unchanged.
    - A dict in (``question``, and optionally ``documents``, ``history`` as messages,
      ``system``, ``tools``, ``examples``, ``memory``) → the whole prompt as a
      `ChatPromptValue`: the stable prefix as one system message first, kept history
      (an AI message with tool calls stays with its tool results; gap markers where
      turns were left out), then one human message with the sources and the question.
      History messages are rebuilt as they are counted: texts neutralised, every part
      counted or refused (README "What a message costs").

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
    """The budget, tokenizer and source options; build one per app and share it."""
    principal: Principal | None = None
    """The one principal this runnable serves; None takes it from each call's config."""
    cache_control: bool = False
    """Mark the end of the stable prefix with Anthropic's ``cache_control`` (dict input).
    Leave False for providers that reject unknown content-block keys (OpenAI)."""
    mapping: MetadataMapping = Field(default_factory=MetadataMapping)
    """Which `Document.metadata` keys fill which `Chunk` field."""

    @classmethod
    def for_model(
        cls,
        chat_model: BaseChatModel,
        *,
        reserve_output: int,
        tokenizer: str | Tokenizer | None = None,
        sources: SourceOptions | None = None,
        principal: Principal | None = None,
        cache_control: bool | None = None,
        mapping: MetadataMapping | None = None,
    ) -> ContextBudgetRunnable:
        """A runnable sized to `chat_model`: the budget from its ``profile["max_input_tokens"]``
        (`Budget.for_context_window`), the tokenizer from its model name.

        Args:
            reserve_output: tokens kept free for the answer (required: it depends on your
                answers, see `Budget.for_context_window`).
            tokenizer: overrides the tokenizer named by the model (needed for models
                tiktoken does not know, e.g. Claude: pass a `HuggingFaceTokenizer` or a
                `CallableTokenizer`).
            cache_control: None marks the prefix for Anthropic models (LangSmith provider
                ``"anthropic"``) only.
        """
        name = cls._model_name(chat_model)
        window = (chat_model.profile or {}).get("max_input_tokens")
        if not isinstance(window, int):
            raise BudgetError(
                f"{type(chat_model).__name__} has no profile['max_input_tokens'], so its "
                "context window is unknown; pass profile={'max_input_tokens': ...} to the chat "
                "model, or build ContextBudgetRunnable(assembler=ContextAssembler(budget="
                "Budget.for_context_window(<tokens>, reserve_output=...), tokenizer=...))"
            )
        if tokenizer is None:
            if name is None:
                raise TokenizerError(
                    f"{type(chat_model).__name__} names no model (model_name or model), so its "
                    "tokenizer is unknown; pass tokenizer=... (a tiktoken model or encoding "
                    "name, or a Tokenizer)"
                )
            try:
                tokenizer = get_tokenizer(name)
            except TokenizerError as error:
                raise TokenizerError(
                    f"{error}; pass tokenizer=... to for_model (a HuggingFaceTokenizer or "
                    "CallableTokenizer for models tiktoken does not know)"
                ) from None
        if cache_control is None:
            cache_control = chat_model._get_ls_params().get("ls_provider") == "anthropic"
        assembler = ContextAssembler(
            tokenizer=tokenizer,
            budget=Budget.for_context_window(window, reserve_output=reserve_output),
            sources=sources,
        )
        return cls(
            assembler=assembler,
            principal=principal,
            cache_control=cache_control,
            mapping=MetadataMapping() if mapping is None else mapping,
        )

    @staticmethod
    def _model_name(chat_model: BaseChatModel) -> str | None:
        for attribute in ("model_name", "model"):
            value = getattr(chat_model, attribute, None)
            if isinstance(value, str) and value:
                return value
        return None

    def invoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Output:
        """Build the context block (list input) or the whole prompt (dict input)."""
        return self._call_with_config(self._run, input, config, run_type="prompt")

    async def ainvoke(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Output:
        """`invoke`, dispatching the report event on the async callback path."""
        return await self._acall_with_config(self._arun, input, config, run_type="prompt")

    def _run(
        self, input: Input, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Output:
        output, report = self._build(input, config)
        dispatch_custom_event(REPORT_EVENT, report, config=config)
        return output

    async def _arun(
        self, input: Input, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> Output:
        output, report = self._build(input, config)
        await adispatch_custom_event(REPORT_EVENT, report, config=config)
        return output

    def _build(self, input: object, config: RunnableConfig) -> tuple[Output, dict[str, Any]]:
        principal = call_principal(self.principal, config)
        if isinstance(input, Mapping):
            return self._prompt(input, principal)
        if isinstance(input, Sequence) and not isinstance(input, str | bytes):
            chunks = chunks_of(documents_of(input), self.mapping, self.assembler)
            selection = self.assembler.select_sources(chunks, principal=principal)
            return selection.text, selection_report(selection)
        raise InputError(
            f"ContextBudgetRunnable takes a list of Documents (a retriever's output) or a dict "
            f"with {', '.join(_PROMPT_KEYS)}; got {type(input).__name__}"
        )

    def _prompt(
        self, values: Mapping[str, Any], principal: Principal | None
    ) -> tuple[ChatPromptValue, dict[str, Any]]:
        unknown = [key for key in values if key not in _PROMPT_KEYS]
        if unknown:
            raise InputError(
                f"unknown input key(s) {', '.join(map(repr, unknown))}; the dict input takes "
                f"{', '.join(_PROMPT_KEYS)}"
            )
        if "question" not in values:
            raise InputError(
                "the dict input needs 'question', the user's question as a str; it is sent "
                "once, last"
            )
        tools = values.get("tools", [])
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise InputError(f"tools must be a list of tools, but got {type(tools).__name__}")
        described = [tool_of(index, tool) for index, tool in enumerate(tools)]
        units = units_of("history", values.get("history", []), counter=self.assembler.counter)
        documents = documents_of(values.get("documents", []))
        assembled = self.assembler.assemble(
            question=values["question"],
            system=values.get("system"),
            chunks=chunks_of(documents, self.mapping, self.assembler),
            history=[unit.turn for unit in units],
            tools=[tool for tool in described if tool is not None],
            examples=values.get("examples"),
            memory=values.get("memory"),
            principal=principal,
        )
        messages: list[BaseMessage] = []
        if assembled.prefix:
            content: str | list[str | dict[str, Any]] = assembled.prefix_text
            if self.cache_control:
                content = [dict(b) for b in assembled.messages(style="anthropic")["system"]]
            messages.append(SystemMessage(content=content))
        for _, kept in restore(units, kept_units(units, assembled), assembled.history):
            messages.extend(kept)
        messages.append(HumanMessage(content=assembled.tail))
        return ChatPromptValue(messages=messages), assembled_report(assembled)
