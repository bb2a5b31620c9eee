"""How much of an LLM call a prompt template leaves for sources, as LlamaIndex packs them.

`ContextBudgetPromptHelper` counts each template it is given; the postprocessor, which
sees no template, sizes its default budget so that LlamaIndex's own `PromptHelper`
never has to cut a source with LlamaIndex's default templates: their largest empty
prompt with the query, LlamaIndex's padding and, for refine, an answer of
``num_output`` tokens quoted back to the LLM.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from llama_index.core.llms import LLM
from llama_index.core.llms.structured_llm import StructuredLLM
from llama_index.core.prompts import BasePromptTemplate, ChatPromptTemplate, SelectorPromptTemplate
from llama_index.core.prompts.default_prompt_selectors import (
    DEFAULT_REFINE_PROMPT_SEL,
    DEFAULT_TEXT_QA_PROMPT_SEL,
    DEFAULT_TREE_SUMMARIZE_PROMPT_SEL,
)
from llama_index.core.prompts.prompt_utils import get_empty_prompt_messages, get_empty_prompt_txt
from llama_index.core.response_synthesizers.refine import DEFAULT_RESPONSE_PADDING_SIZE

if TYPE_CHECKING:
    from llama_index.core.tools import BaseTool

__all__ = ["MESSAGE_OVERHEAD", "default_packing_room", "template_tokens"]

MESSAGE_OVERHEAD: Final = 3
"""Tokens a chat message costs beyond its role and content (LlamaIndex's and OpenAI's estimate)."""

_DEFAULT_TEMPLATES: Final = (
    DEFAULT_TEXT_QA_PROMPT_SEL,
    DEFAULT_REFINE_PROMPT_SEL,
    DEFAULT_TREE_SUMMARIZE_PROMPT_SEL,
)
_PADDING: Final = 5
"""LlamaIndex's `DEFAULT_PADDING`: what every packing but compact's and refine's keeps free."""


def template_tokens(
    prompt: BasePromptTemplate,
    llm: LLM | None,
    tools: Sequence[BaseTool],
    count: Callable[[str], int],
) -> int:
    """What `prompt` costs without its sources: template text or messages, `tools` (as the
    provider receives them) and the LLM's own system prompt."""
    if isinstance(prompt, SelectorPromptTemplate):
        prompt = prompt.select(llm=llm)
    if isinstance(prompt, ChatPromptTemplate):
        tokens = sum(
            count(m.role.value) + count(m.content or "") + MESSAGE_OVERHEAD
            for m in get_empty_prompt_messages(prompt)
        )
    else:
        tokens = count(get_empty_prompt_txt(prompt))
    for tool in tools:
        tokens += count(json.dumps(tool.metadata.to_openai_tool()))
    if isinstance(llm, StructuredLLM):
        llm = llm.llm  # a structured LLM has no system prompt of its own
    return tokens + count((llm.system_prompt or "") if llm is not None else "")


def default_packing_room(llm: LLM, num_output: int, query: str, count: Callable[[str], int]) -> int:
    """The most source tokens LlamaIndex's own `PromptHelper` packs into one call without
    cutting, with its default templates and this `query`, in every response mode.

    Compact and refine keep `DEFAULT_RESPONSE_PADDING_SIZE` (500) free; a refine step
    quotes the answer so far, up to `num_output` tokens, beside one source.
    """
    template = max(
        template_tokens(t.partial_format(query_str=query), llm, (), count)
        for t in _DEFAULT_TEMPLATES
    )
    reserve = max(DEFAULT_RESPONSE_PADDING_SIZE, num_output + _PADDING)
    return llm.metadata.context_window - num_output - reserve - template
