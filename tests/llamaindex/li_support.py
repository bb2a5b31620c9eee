"""Test support for the LlamaIndex adapter: an LLM that records its prompts, prompt readers."""

from __future__ import annotations

import re
from typing import Any

from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockLLM

FENCE_OPEN = "<retrieved_documents>"
FENCE_CLOSE = "</retrieved_documents>"
_HEADER = re.compile(r"^\[(\d+)\]", re.MULTILINE)


class RecordingLLM(MockLLM):
    """`MockLLM` that keeps every prompt it is sent; its window and reserve are settable.

    With ``max_tokens`` it answers that many words ("text text ..."), else it echoes.
    """

    prompts: list[str] = Field(default_factory=list)
    window: int = 3_900
    reserve: int | None = None

    @property
    def metadata(self) -> LLMMetadata:
        reserve = self.reserve if self.reserve is not None else (self.max_tokens or -1)
        return LLMMetadata(context_window=self.window, num_output=reserve)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        response: CompletionResponse = super().complete(prompt, formatted=formatted, **kwargs)
        return response


def recording_llm(
    max_tokens: int | None = 5, *, window: int = 3_900, reserve: int | None = None
) -> RecordingLLM:
    llm = RecordingLLM(max_tokens=max_tokens)
    llm.window = window
    llm.reserve = reserve
    return llm


def numbers(prompt: str) -> list[int]:
    """The [n] source numbers a prompt shows, in order."""
    return [int(n) for n in _HEADER.findall(prompt)]


def fenced(prompt: str) -> str:
    """The one fenced block of `prompt`; fails unless there is exactly one fence pair."""
    assert prompt.count(FENCE_OPEN) == 1, prompt
    assert prompt.count(FENCE_CLOSE) == 1, prompt
    start, end = prompt.index(FENCE_OPEN), prompt.index(FENCE_CLOSE)
    assert start < end
    return prompt[start : end + len(FENCE_CLOSE)]
