"""`ContextBudgetPromptHelper`: response synthesizers pack whole, numbered, fenced sources."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.constants import DEFAULT_CONTEXT_WINDOW, DEFAULT_NUM_OUTPUTS
from llama_index.core.indices.prompt_helper import DEFAULT_PADDING, PromptHelper
from llama_index.core.llms import LLM
from llama_index.core.llms.structured_llm import StructuredLLM
from llama_index.core.node_parser import TokenTextSplitter
from llama_index.core.prompts import (
    BasePromptTemplate,
    ChatPromptTemplate,
    SelectorPromptTemplate,
)
from llama_index.core.prompts.prompt_utils import get_empty_prompt_messages, get_empty_prompt_txt

from ctxbudget import (
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    Dropped,
    SourceOptions,
    TokenCounter,
    Tokenizer,
)
from llamaindex_ctxbudget._blocks import REGISTRY, SEPARATOR, Piece, block_of, split
from llamaindex_ctxbudget._config import build_assembler, num_output_of
from llamaindex_ctxbudget.events import ContextPackedEvent, dispatcher

if TYPE_CHECKING:
    from llama_index.core.tools import BaseTool

__all__ = ["ContextBudgetPromptHelper"]

logger = logging.getLogger("llamaindex_ctxbudget")

_MESSAGE_OVERHEAD = 3
"""Tokens a chat message costs beyond its role and content (LlamaIndex's and OpenAI's estimate)."""


class _TokenList:
    """`PromptHelper`'s tokenizer interface (str -> list, counted by len) over our counter,
    so the base class never builds LlamaIndex's default tokenizer (a download)."""

    def __init__(self, counter: TokenCounter) -> None:
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
        return self._helper._repack_into([text], self._space)


class ContextBudgetPromptHelper(PromptHelper):
    """A `PromptHelper` whose packing keeps sources whole, numbered and fenced.

    `repack`, `truncate` and `get_text_splitter_given_prompt` never cut inside a
    source and add no overlap: each LLM call gets whole sources, their ``[n]`` numbers
    unchanged, inside one untrusted-data fence. Sources from
    `ContextBudgetPostprocessor` keep the numbers it gave them; other texts are
    numbered here, once, in order. The space is what the prompt template (its chat
    history and the LLM's system prompt and tools included) leaves of
    ``context_window`` after ``num_output``. A source larger than that is dropped and
    reported (``ContextPackedEvent``, and a warning); when even the template does not
    fit, `ContextBudgetError` says so, where LlamaIndex's own helper raised
    "Calculated available context size -N was not non-negative".

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
            assembler: the tokenizer and source options (its budget is not used: the
                space is the LLM's window); or pass `tokenizer` (and `sources`).
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
        """A helper sized to `llm`'s ``metadata.context_window`` and ``num_output``."""
        metadata = llm.metadata
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

    def repack(
        self,
        prompt: BasePromptTemplate,
        text_chunks: Sequence[str],
        padding: int = DEFAULT_PADDING,
        llm: LLM | None = None,
        tools: list[BaseTool] | None = None,
    ) -> list[str]:
        """`text_chunks` as few fenced contexts as fit, each with whole sources in order.

        Returns ``[""]`` when no source fits: callers index the first piece.
        """
        return self._repack_into(text_chunks, self._space(prompt, 1, padding, llm, tools))

    def truncate(
        self,
        prompt: BasePromptTemplate,
        text_chunks: Sequence[str],
        padding: int = DEFAULT_PADDING,
        llm: LLM | None = None,
        tools: list[BaseTool] | None = None,
    ) -> list[str]:
        """One fenced context: the sources that fit one call, in order; the rest dropped."""
        space = self._space(prompt, 1, padding, llm, tools)
        pieces, dropped = self._pack(text_chunks, space)
        dropped += [
            Dropped(claimant="retrieved", kind="chunk", id=i, reason="over_budget")
            for piece in pieces[1:]
            for i in piece.block.ids
        ]
        self._report(space, pieces[:1], dropped)
        return _Context(REGISTRY.add(p.block.text, p.block) for p in pieces[:1])

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

    def _repack_into(self, texts: Sequence[str], space: int) -> list[str]:
        pieces, dropped = self._pack(texts, space)
        self._report(space, pieces, dropped)
        return [REGISTRY.add(p.block.text, p.block) for p in pieces] or [""]

    def _pack(self, texts: Sequence[str], space: int) -> tuple[list[Piece], list[Dropped]]:
        """Whole sources of `texts` in pieces of at most `space` tokens, and what was left out.

        Texts this adapter produced keep their sources and numbers; any other text is one
        source, numbered here through the core's pipeline (which drops empty texts and
        duplicates, and never cuts one).
        """
        block = REGISTRY.resolve(texts)
        dropped: list[Dropped] = []
        if block is None:
            chunks = [Chunk(id=f"text-{i}", content=text) for i, text in enumerate(texts)]
            selection = self._assembler.select_sources(chunks, max_tokens=sys.maxsize, min_tokens=0)
            block, dropped = block_of(selection), list(selection.dropped)
        if block is None:
            return [], dropped
        pieces, oversize = split(block, space, self._assembler.counter.count)
        return pieces, dropped + oversize

    def _report(self, space: int, pieces: list[Piece], dropped: list[Dropped]) -> None:
        dispatcher.event(
            ContextPackedEvent(
                space=space,
                pieces=[list(p.block.ids) for p in pieces],
                tokens=[p.tokens for p in pieces],
                dropped=dropped,
            )
        )
        unfit = [d.id for d in dropped if d.reason in ("oversize", "over_budget")]
        if unfit:
            logger.warning(
                "%d source(s) did not fit the %d tokens the prompt template left for sources "
                "and were dropped whole: %s",
                len(unfit),
                space,
                ", ".join(unfit),
                extra={"ctxbudget": {"space": space, "dropped": unfit}},
            )

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
        """
        template = self._template_tokens(prompt, llm, tools)
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

    def _template_tokens(
        self, prompt: BasePromptTemplate, llm: LLM | None, tools: list[BaseTool] | None
    ) -> int:
        """What the prompt costs without its sources: template text or messages, the tools
        a structured LLM adds, and the LLM's own system prompt."""
        count = self._assembler.counter.count
        if isinstance(prompt, SelectorPromptTemplate):
            prompt = prompt.select(llm=llm)
        if isinstance(prompt, ChatPromptTemplate):
            tokens = sum(
                count(m.role.value) + count(m.content or "") + _MESSAGE_OVERHEAD
                for m in get_empty_prompt_messages(prompt)
            )
        else:
            tokens = count(get_empty_prompt_txt(prompt))
        for tool in self._get_tools_from_llm(llm=llm, tools=tools):
            tokens += count(json.dumps(tool.metadata.to_openai_tool()))
        if isinstance(llm, StructuredLLM):
            llm = llm.llm  # a structured LLM has no system prompt of its own
        return tokens + count((llm.system_prompt or "") if llm is not None else "")
