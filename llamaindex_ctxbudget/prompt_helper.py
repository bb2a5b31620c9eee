"""`ContextBudgetPromptHelper`: response synthesizers pack whole, numbered, fenced sources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.constants import DEFAULT_CONTEXT_WINDOW, DEFAULT_NUM_OUTPUTS
from llama_index.core.indices.prompt_helper import DEFAULT_PADDING, PromptHelper
from llama_index.core.llms import LLM
from llama_index.core.node_parser import TokenTextSplitter
from llama_index.core.prompts import BasePromptTemplate

from ctxbudget import (
    ContextAssembler,
    ContextBudgetError,
    FencedSource,
    InputError,
    SourceOptions,
    Tokenizer,
    traced,
)
from ctxbudget.types import CountCache
from llamaindex_ctxbudget._config import build_assembler, llm_tokenizer, num_output_of
from llamaindex_ctxbudget._packing import SEPARATOR, Packed, Unit, pack, read
from llamaindex_ctxbudget._room import context_copies, template_tokens
from llamaindex_ctxbudget.events import ContextPackedEvent, dispatcher

if TYPE_CHECKING:
    from llama_index.core.tools import BaseTool

__all__ = ["ContextBudgetPromptHelper"]


class _TokenList:
    """`PromptHelper`'s tokenizer interface (str -> list, counted by len) over our counter,
    so the base class never builds LlamaIndex's default tokenizer (a download)."""

    def __init__(self, counter: CountCache) -> None:
        self._counter = counter

    def __call__(self, text: str) -> list[int]:
        return [0] * self._counter.count(text)


class _Context(list[str]):
    """`truncate`'s result. simple_summarize formats this list straight into its prompt
    (``context_str=[...]``); as text it reads as the context, not as a Python list."""

    def __str__(self) -> str:
        return SEPARATOR.join(self)


class _SourceSplitter(TokenTextSplitter):
    """The splitter `get_text_splitter_given_prompt` returns: it splits between whole
    sources only, as `repack` does, never inside one and with no overlap."""

    _helper: ContextBudgetPromptHelper = PrivateAttr()
    _space: int = PrivateAttr()

    def __init__(
        self, helper: ContextBudgetPromptHelper, space: int, tokenizer: _TokenList
    ) -> None:
        super().__init__(chunk_size=max(space, 1), chunk_overlap=0, tokenizer=tokenizer)
        self._helper = helper
        self._space = space

    def _split_text(self, text: str, chunk_size: int) -> list[str]:
        return [*self._helper._pack([text], self._space)] or [""]


class ContextBudgetPromptHelper(PromptHelper):
    """A `PromptHelper` whose packing keeps sources whole, numbered and fenced.

    `repack`, `truncate` and `get_text_splitter_given_prompt` never cut inside a
    source and add no overlap: each LLM call gets whole sources inside one
    untrusted-data fence, each with the ``[n]`` the postprocessor gave it, in the order
    they came (whatever a later postprocessor did to it). A text that is not a source
    from `ContextBudgetPostprocessor` (tree_summarize's summaries, a node another
    postprocessor added, anything that fails the core's check) is fenced as untrusted
    data and never numbered. Nothing is dropped: a source larger than a call's space,
    or (`truncate`, simple_summarize) sources that need more than one call, raise
    `ContextBudgetError` saying what to change. The space is what the prompt template
    (its chat history and the LLM's system prompt and tools included) leaves of
    ``context_window`` after ``num_output``; when the template alone does not fit,
    `ContextBudgetError` says so, where LlamaIndex's own helper raised "Calculated
    available context size -N was not non-negative".

    Use it as ``Settings.prompt_helper = ContextBudgetPromptHelper.from_llm(llm, ...)``
    or ``get_response_synthesizer(prompt_helper=...)``.
    """

    _assembler: ContextAssembler = PrivateAttr()

    def __init__(
        self,
        assembler: ContextAssembler | None = None,
        *,
        tokenizer: str | Tokenizer | None = None,
        sources: SourceOptions | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        num_output: int = DEFAULT_NUM_OUTPUTS,
        chunk_size_limit: int | None = None,
    ) -> None:
        """
        Args:
            assembler: the tokenizer (its budget is not used: the space is the LLM's
                window); or pass `tokenizer`.
            chunk_size_limit: an upper limit on the tokens of sources per LLM call.
        """
        built = build_assembler(assembler, tokenizer=tokenizer, sources=sources)
        super().__init__(
            context_window=context_window,
            num_output=num_output,
            chunk_overlap_ratio=0.0,
            chunk_size_limit=chunk_size_limit,
            tokenizer=_TokenList(built.counter),
        )
        self._assembler = built

    @classmethod
    def from_llm(
        cls,
        llm: LLM,
        assembler: ContextAssembler | None = None,
        *,
        tokenizer: str | Tokenizer | None = None,
        sources: SourceOptions | None = None,
        chunk_size_limit: int | None = None,
    ) -> ContextBudgetPromptHelper:
        """A helper sized to `llm`'s ``metadata.context_window`` and ``num_output``, counting
        with `tokenizer`, else the tokenizer `llm`'s model name resolves to."""
        metadata = llm.metadata
        if assembler is None and tokenizer is None:
            tokenizer = llm_tokenizer(llm)
        return cls(
            assembler,
            tokenizer=tokenizer,
            sources=sources,
            context_window=metadata.context_window,
            num_output=num_output_of(metadata),
            chunk_size_limit=chunk_size_limit,
        )

    @classmethod
    def class_name(cls) -> str:
        return "ContextBudgetPromptHelper"

    @traced("ctxbudget.llamaindex.ContextBudgetPromptHelper.repack")
    def repack(
        self,
        prompt: BasePromptTemplate,
        text_chunks: Sequence[str],
        padding: int = DEFAULT_PADDING,
        llm: LLM | None = None,
        tools: list[BaseTool] | None = None,
    ) -> list[str]:
        """`text_chunks` as few fenced contexts as fit, each with whole sources in order.

        Returns ``[""]`` for no text, as LlamaIndex's helper does (callers index the
        first context).
        """
        contexts: list[str] = [
            *self._pack(text_chunks, self._space(prompt, 1, padding, llm, tools))
        ]
        return contexts or [""]

    @traced("ctxbudget.llamaindex.ContextBudgetPromptHelper.truncate")
    def truncate(
        self,
        prompt: BasePromptTemplate,
        text_chunks: Sequence[str],
        padding: int = DEFAULT_PADDING,
        llm: LLM | None = None,
        tools: list[BaseTool] | None = None,
    ) -> list[str]:
        """One fenced context holding all of `text_chunks`; `ContextBudgetError` when they
        need more than one call, since truncating would drop sources unseen."""
        space = self._space(prompt, 1, padding, llm, tools)
        contexts = self._pack(text_chunks, space)
        if len(contexts) > 1:
            held = sum(len(c.numbers) for c in contexts)
            raise ContextBudgetError(
                "retrieved",
                sum(self._assembler.counter.count(c) for c in contexts),
                space,
                f"{held:,} source(s) need {len(contexts):,} LLM calls of {space:,} tokens, and "
                "this response mode (simple_summarize) sends one; lower the postprocessor's "
                "max_tokens, or use a response mode that makes several calls (compact, "
                "refine, tree_summarize)",
            )
        return _Context(contexts)

    def get_text_splitter_given_prompt(
        self,
        prompt: BasePromptTemplate,
        num_chunks: int = 1,
        padding: int = DEFAULT_PADDING,
        llm: LLM | None = None,
        tools: list[BaseTool] | None = None,
    ) -> TokenTextSplitter:
        """A splitter that packs whole sources into `num_chunks` equal shares of the space."""
        space = self._space(prompt, num_chunks, padding, llm, tools)
        return _SourceSplitter(self, space, _TokenList(self._assembler.counter))

    def _pack(self, texts: Sequence[str], space: int) -> list[Packed]:
        """`texts` packed into contexts of at most `space` tokens, and reported."""
        units = read(texts)
        packed = pack(units, space, self._assembler.counter.count, self._unfit(space))
        dispatcher.event(
            ContextPackedEvent(
                space=space,
                numbers=[context.numbers for context, _ in packed],
                untrusted=[context.untrusted for context, _ in packed],
                tokens=[tokens for _, tokens in packed],
            )
        )
        return [context for context, _ in packed]

    def _unfit(self, space: int) -> _Unfit:
        return _Unfit(space, self.context_window, self.num_output)

    def _space(
        self,
        prompt: BasePromptTemplate,
        num_chunks: int,
        padding: int,
        llm: LLM | None,
        tools: list[BaseTool] | None,
    ) -> int:
        """Tokens for sources per call: the window, less `num_output` and the template.

        `padding` (LlamaIndex's room for formatting; 500 in compact and refine, for the
        answer a later refine prompt quotes) is kept while it leaves at least half the
        room: refine repacks with the real answer anyway, so it is a hint, not a need.
        A template that would show the sources more than once is an `InputError`.
        """
        copies = context_copies(prompt, llm)
        if copies > 1:
            raise InputError(
                f"the prompt template holds {{context_str}} (or {{context_msg}}) {copies} "
                "times, and LlamaIndex fills each with the sources, uncounted; a chat history "
                "message that contains it does this in a chat engine: use ContextBudgetMemory "
                "(it sends such text inert), or remove it from the history or the template"
            )
        template = template_tokens(
            prompt,
            llm,
            self._get_tools_from_llm(llm=llm, tools=tools),
            self._assembler.counter.count,
        )
        room = self.context_window - self.num_output - template
        if room <= 0:
            raise ContextBudgetError(
                "template",
                template + self.num_output,
                self.context_window,
                f"the prompt template ({template:,} tokens, its chat history and system "
                f"prompt included) and num_output ({self.num_output:,}) leave no room for "
                f"sources in a context window of {self.context_window:,} tokens; shorten the "
                "chat history (e.g. the chat engine's memory token_limit) or the system "
                "prompt, or lower num_output",
            )
        space = (room - min(padding, room // 2)) // max(num_chunks, 1)
        if self.chunk_size_limit is not None:
            space = min(space, self.chunk_size_limit)
        return space


class _Unfit:
    """The error for a text that does not fit an LLM call even alone."""

    def __init__(self, space: int, window: int, num_output: int) -> None:
        self._space, self._window, self._num_output = space, window, num_output

    def __call__(self, unit: Unit, tokens: int) -> ContextBudgetError:
        what = (
            f"source [{unit.n}]"
            if isinstance(unit, FencedSource)
            else "a text that is not a ctxbudget source (a summary, or a node another "
            "postprocessor added)"
        )
        return ContextBudgetError(
            "retrieved",
            tokens,
            self._space,
            f"{what} needs {tokens:,} tokens in its fence, more than the {self._space:,} an "
            f"LLM call has for sources (context window {self._window:,}, less num_output "
            f"{self._num_output:,} and the prompt template, its chat history and system "
            "prompt included); lower the postprocessor's max_tokens or split documents into "
            "smaller nodes, shorten the chat history (e.g. the chat engine's memory "
            "token_limit), or use an LLM with a larger context window",
        )
