"""How much of an LLM call a prompt template leaves for sources, as LlamaIndex packs them.

`ContextBudgetPromptHelper` counts each template it is given; the postprocessor, which
sees no template, sizes its default budget so that LlamaIndex's own `PromptHelper`
never has to cut a source with LlamaIndex's default templates: their largest empty
prompt with the query, LlamaIndex's padding and, for refine, an answer of
``num_output`` tokens quoted back to the LLM. Given a chat engine's history, the
default templates are also those of the chat engines, with that history in them, as
the chat engines build them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from llama_index.core.base.llms.types import (
    CachePoint,
    ChatMessage,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.chat_engine.condense_plus_context import (
    DEFAULT_CONTEXT_PROMPT_TEMPLATE,
    DEFAULT_CONTEXT_REFINE_PROMPT_TEMPLATE,
)
from llama_index.core.chat_engine.context import DEFAULT_CONTEXT_TEMPLATE, DEFAULT_REFINE_TEMPLATE
from llama_index.core.chat_engine.utils import get_prefix_messages_with_context
from llama_index.core.llms import LLM
from llama_index.core.llms.structured_llm import StructuredLLM
from llama_index.core.prompts import (
    BasePromptTemplate,
    ChatPromptTemplate,
    PromptTemplate,
    SelectorPromptTemplate,
)
from llama_index.core.prompts.default_prompt_selectors import (
    DEFAULT_REFINE_PROMPT_SEL,
    DEFAULT_TEXT_QA_PROMPT_SEL,
    DEFAULT_TREE_SUMMARIZE_PROMPT_SEL,
)
from llama_index.core.prompts.prompt_utils import get_empty_prompt_messages, get_empty_prompt_txt
from llama_index.core.prompts.utils import SafeFormatter
from llama_index.core.response_synthesizers.refine import DEFAULT_RESPONSE_PADDING_SIZE

if TYPE_CHECKING:
    from llama_index.core.tools import BaseTool

__all__ = [
    "CONTEXT_VARIABLES",
    "MESSAGE_OVERHEAD",
    "context_copies",
    "default_packing_room",
    "message_tokens",
    "template_tokens",
]

MESSAGE_OVERHEAD: Final = 3
"""Tokens a chat message costs beyond its role and content (LlamaIndex's and OpenAI's estimate)."""

_DEFAULT_TEMPLATES: Final = (
    DEFAULT_TEXT_QA_PROMPT_SEL,
    DEFAULT_REFINE_PROMPT_SEL,
    DEFAULT_TREE_SUMMARIZE_PROMPT_SEL,
)
_CHAT_TEMPLATES: Final = (
    DEFAULT_CONTEXT_TEMPLATE,
    DEFAULT_REFINE_TEMPLATE,
    DEFAULT_CONTEXT_PROMPT_TEMPLATE,
    DEFAULT_CONTEXT_REFINE_PROMPT_TEMPLATE,
)
"""The context and refine templates of `ContextChatEngine` and `CondensePlusContextChatEngine`."""
CONTEXT_VARIABLES: Final = ("context_str", "context_msg")
"""The template variables LlamaIndex's synthesizers fill with the packed sources."""
_PADDING: Final = 5
"""LlamaIndex's `DEFAULT_PADDING`: what every packing but compact's and refine's keeps free."""


def message_tokens(message: ChatMessage, count: Callable[[str], int]) -> int:
    """What LlamaIndex's `TokenCounter.estimate_tokens_in_messages` counts for `message`, with
    `count`: its role, each text, tool call (as JSON) and thinking block, and the overhead."""
    tokens = count(message.role.value) + MESSAGE_OVERHEAD
    if message.role in (MessageRole.TOOL, MessageRole.FUNCTION):
        tokens -= 2
    for block in message.blocks:
        if isinstance(block, TextBlock):
            tokens += count(block.text)
        elif isinstance(block, ToolCallBlock):
            tokens += count(block.model_dump_json())
        elif isinstance(block, ThinkingBlock):
            tokens += block.num_tokens or count(block.content or "")
        elif not isinstance(block, CachePoint):
            tokens += block.estimate_tokens()  # media: LlamaIndex's own fixed estimates
    return tokens


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
        tokens = sum(message_tokens(m, count) for m in get_empty_prompt_messages(prompt))
    else:
        tokens = count(get_empty_prompt_txt(prompt))
    for tool in tools:
        tokens += count(json.dumps(tool.metadata.to_openai_tool()))
    if isinstance(llm, StructuredLLM):
        llm = llm.llm  # a structured LLM has no system prompt of its own
    return tokens + count((llm.system_prompt or "") if llm is not None else "")


def context_copies(prompt: BasePromptTemplate, llm: LLM | None) -> int:
    """How many times `prompt` shows the packed sources: the most often any of
    `CONTEXT_VARIABLES` appears in its text (in a chat template, its messages' texts)."""
    if isinstance(prompt, SelectorPromptTemplate):
        prompt = prompt.select(llm=llm)
    if isinstance(prompt, ChatPromptTemplate):
        texts = [
            b.text for m in prompt.message_templates for b in m.blocks if isinstance(b, TextBlock)
        ]
    elif isinstance(prompt, PromptTemplate):
        texts = [prompt.template]
    else:
        return 1
    found = [name for text in texts for name in SafeFormatter().parse(text)]
    return max((found.count(name) for name in CONTEXT_VARIABLES), default=0)


def _chat_templates(llm: LLM, history: Sequence[ChatMessage]) -> list[BasePromptTemplate]:
    """The chat engines' templates holding `history`, built as the chat engines build them."""
    role = llm.metadata.system_role
    return [
        ChatPromptTemplate.from_messages(
            get_prefix_messages_with_context(PromptTemplate(t), "", [], list(history), role)
        )
        for t in _CHAT_TEMPLATES
    ]


def default_packing_room(
    llm: LLM,
    num_output: int,
    query: str,
    count: Callable[[str], int],
    history: Sequence[ChatMessage] | None = None,
    templates: Sequence[BasePromptTemplate] | None = None,
) -> int:
    """The most source tokens LlamaIndex's own `PromptHelper` packs into one call without
    cutting, with its default templates (or the synthesizer's own `templates`) and this
    `query`, in every response mode; with `history`, also in the chat engines' templates
    holding that chat history.

    Compact and refine keep `DEFAULT_RESPONSE_PADDING_SIZE` (500) free; a refine step
    quotes the answer so far, up to `num_output` tokens, beside one source.
    """
    shown = [
        *(_DEFAULT_TEMPLATES if templates is None else templates),
        *([] if history is None else _chat_templates(llm, history)),
    ]
    template = max(
        template_tokens(t.partial_format(query_str=query), llm, (), count) for t in shown
    )
    reserve = max(DEFAULT_RESPONSE_PADDING_SIZE, num_output + _PADDING)
    return llm.metadata.context_window - num_output - reserve - template
