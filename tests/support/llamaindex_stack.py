"""Test support for the LlamaIndex adapter: LLMs that record their prompts and chat messages,
and readers of what a prompt shows, written independently of the library (tag strings and a
regex)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index.core import VectorStoreIndex, get_response_synthesizer
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.response_synthesizers import ResponseMode
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from llamaindex_ctxbudget import ContextBudgetPostprocessor, ContextBudgetPromptHelper

FACTS = 12
SECRET = "Salary bands for 2025 are reviewed by the board in April."
FENCE_OPEN = "<retrieved_documents>"
FENCE_CLOSE = "</retrieved_documents>"
_HEADER = re.compile(r"^\[(\d+)\]", re.MULTILINE)
_NUMBER = re.compile(r"\[(\d+)\] ")
"""A source header's number wherever a prompt shows it, also inside a Python list's repr
(LlamaIndex's own simple_summarize formats a list into its prompt)."""


class RecordingLLM(MockLLM):
    """`MockLLM` that keeps every prompt it is sent; its window and reserve are settable.

    With ``max_tokens`` it answers that many words ("text text ..."), else it echoes;
    `answer`, when set, is what it answers instead.
    """

    prompts: list[str] = Field(default_factory=list)
    window: int = 3_900
    reserve: int | None = None
    answer: str | None = None
    chat_model: bool = False
    """Say it is a chat model: LlamaIndex then picks its chat templates, and the messages
    reach `complete` as one prompt (``system: ...``, ``user: ...``)."""

    @property
    def metadata(self) -> LLMMetadata:
        reserve = self.reserve if self.reserve is not None else (self.max_tokens or -1)
        return LLMMetadata(
            context_window=self.window, num_output=reserve, is_chat_model=self.chat_model
        )

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        if self.answer is not None:
            return CompletionResponse(text=self.answer)
        response: CompletionResponse = super().complete(prompt, formatted=formatted, **kwargs)
        return response


def recording_llm(
    max_tokens: int | None = 5,
    *,
    window: int = 3_900,
    reserve: int | None = None,
    chat_model: bool = False,
) -> RecordingLLM:
    llm = RecordingLLM(max_tokens=max_tokens)
    llm.window = window
    llm.reserve = reserve
    llm.chat_model = chat_model
    return llm


class RecordingChatLLM(CustomLLM):
    """A chat model that keeps the messages of every chat call and the prompt of every
    completion (a condense step, a summary), and answers `answer` (numbered per call)."""

    calls: list[list[ChatMessage]] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    window: int = 4_096
    reserve: int = 256
    answer: str = "Answer {n}."
    model: str = "unknown"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.window,
            num_output=self.reserve,
            is_chat_model=True,
            model_name=self.model,
        )

    def _reply(self) -> str:
        return self.answer.replace("{n}", str(len(self.calls) + len(self.prompts)))

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        text = self._reply()
        self.calls.append([m.model_copy(deep=True) for m in messages])
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = self._reply()
        self.prompts.append(prompt)
        return CompletionResponse(text=text)

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return self.complete(prompt, formatted, **kwargs)

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("the tests do not stream")


def numbers(prompt: str) -> list[int]:
    """The [n] source numbers a prompt shows at line starts, in order."""
    return [int(n) for n in _HEADER.findall(prompt)]


def fenced(prompt: str) -> str:
    """The one fenced block of `prompt`; fails unless there is exactly one fence pair."""
    assert prompt.count(FENCE_OPEN) == 1, prompt
    assert prompt.count(FENCE_CLOSE) == 1, prompt
    start, end = prompt.index(FENCE_OPEN), prompt.index(FENCE_CLOSE)
    assert start < end
    return prompt[start : end + len(FENCE_CLOSE)]


def fence_spans(prompt: str) -> list[tuple[int, int]]:
    """Where each fence of `prompt` stands, tags included; fails on a closing tag outside a
    fence, a fence left open, or one opened inside another."""
    spans: list[tuple[int, int]] = []
    position = 0
    while True:
        start = prompt.find(FENCE_OPEN, position)
        stray = prompt.find(FENCE_CLOSE, position)
        if start < 0:
            assert stray < 0, f"a closing tag outside any fence at {stray}"
            return spans
        assert stray < 0 or stray > start, f"a closing tag outside any fence at {stray}"
        end = prompt.find(FENCE_CLOSE, start)
        assert end >= 0, f"the fence opened at {start} is never closed"
        inner = prompt.find(FENCE_OPEN, start + len(FENCE_OPEN))
        assert inner < 0 or inner > end, f"a fence opens at {inner} inside the one at {start}"
        spans.append((start, end + len(FENCE_CLOSE)))
        position = end + len(FENCE_CLOSE)


def check_prompt(
    prompt: str,
    markers: Mapping[str, int],
    *,
    forbidden: Sequence[str] = (),
    limit: int,
    count: Callable[[str], int],
) -> set[int]:
    """Assert what one LLM call received, and return the numbers of the sources it showed.

    `markers` maps a word found only in one source to that source's number: wherever the
    word appears, it is inside a fence, and the header nearest before it in that fence has
    the source's number. No header number repeats; no `forbidden` text appears; the
    prompt is at most `limit` tokens by `count` (an independent tokenizer).
    """
    assert count(prompt) <= limit, f"{count(prompt)} tokens > {limit}"
    for text in forbidden:
        assert text not in prompt
    spans = fence_spans(prompt)
    shown = [int(n) for n in _NUMBER.findall(prompt)]
    repeated = [n for n, times in Counter(shown).items() if times > 1]
    assert not repeated, f"numbers {repeated} repeat in one call"
    seen: set[int] = set()
    for marker, number in markers.items():
        for found in re.finditer(re.escape(marker), prompt):
            inside = [(s, e) for s, e in spans if s < found.start() < e]
            assert inside, f"{marker!r} of [{number}] is outside every fence"
            start, _ = inside[0]
            headers = _NUMBER.findall(prompt, start, found.start())
            assert headers, f"{marker!r} of [{number}] has no header before it in its fence"
            assert int(headers[-1]) == number, (
                f"{marker!r} shown as [{headers[-1]}], not [{number}]"
            )
            seen.add(number)
    return seen


class ListPostprocessor(BaseNodePostprocessor):
    """A later postprocessor that only reorders or filters: reverse, drop_first, drop_last,
    keep_one, or top_n (a reranker's shape: new scores, best first, the first `top_n`)."""

    operation: str
    top_n: int = 2

    @classmethod
    def class_name(cls) -> str:
        return "ListPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if self.operation == "reverse":
            return nodes[::-1]
        if self.operation == "drop_first":
            return nodes[1:]
        if self.operation == "drop_last":
            return nodes[:-1]
        if self.operation == "keep_one":
            return nodes[1:2] or nodes[:1]
        assert self.operation == "top_n", self.operation
        rescored = [NodeWithScore(node=n.node, score=float(i)) for i, n in enumerate(nodes)]
        return sorted(rescored, key=lambda n: -(n.score or 0))[: self.top_n]


def fact(i: int) -> str:
    """Fact `i`, between two words found nowhere else: its start and its end."""
    return f"zq{i}start Warehouse {i} opens at {i % 12 + 6} o'clock on weekdays. zq{i}end"


def build_index() -> VectorStoreIndex:
    def node(node_id: str, text: str, **metadata: object) -> TextNode:
        source = RelatedNodeInfo(node_id=f"doc-{node_id}", metadata=metadata)
        return TextNode(
            id_=node_id,
            text=text,
            metadata=dict(metadata),
            relationships={NodeRelationship.SOURCE: source},
        )

    nodes = [node(f"fact-{i}", fact(i), title=f"Site {i}") for i in range(FACTS)]
    nodes.append(node("hr", SECRET, tenant="acme", groups=["hr"]))
    return VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))


def query_engine(
    llm: RecordingLLM,
    mode: str,
    *,
    ours: bool = True,
    max_tokens: int | None = None,
    later: BaseNodePostprocessor | None = None,
) -> BaseQueryEngine:
    """A query engine over `build_index()`: our postprocessor first (then `later`), and our
    prompt helper in the synthesizer when `ours`, else LlamaIndex's own."""
    helper = ContextBudgetPromptHelper.from_llm(llm, tokenizer="o200k_base") if ours else None
    synthesizer = get_response_synthesizer(
        llm=llm, response_mode=ResponseMode(mode), prompt_helper=helper
    )
    ours_first = ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm, max_tokens=max_tokens)
    return build_index().as_query_engine(
        llm=llm,
        similarity_top_k=FACTS + 1,
        node_postprocessors=[ours_first] if later is None else [ours_first, later],
        response_synthesizer=synthesizer,
    )
