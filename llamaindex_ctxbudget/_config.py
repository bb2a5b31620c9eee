"""What the components are built from: an assembler (or its arguments), and the LLM's window.

Each component takes a `ContextAssembler`, or the tokenizer, `SourceOptions` and
`HistoryOptions` to build one; the budget comes from the assembler, or is derived from the LLM's
``metadata.context_window`` and ``num_output`` the way LlamaIndex's own
`PromptHelper.from_llm_metadata` reads them.
"""

from __future__ import annotations

from llama_index.core.base.llms.types import LLMMetadata
from llama_index.core.constants import DEFAULT_NUM_OUTPUTS
from llama_index.core.llms import LLM

from ctxbudget import (
    Budget,
    ContextAssembler,
    HistoryOptions,
    InputError,
    SourceOptions,
    Tokenizer,
    TokenizerError,
    get_tokenizer,
)

__all__ = ["budget_for", "build_assembler", "llm_tokenizer", "num_output_of"]


def build_assembler(
    assembler: ContextAssembler | None,
    *,
    tokenizer: str | Tokenizer | None,
    sources: SourceOptions | None,
    budget: Budget | None = None,
    history: HistoryOptions | None = None,
    llm: LLM | None = None,
) -> ContextAssembler:
    """`assembler` itself, or one built from `tokenizer` (by default the tokenizer the `llm`'s
    model name resolves to, docs/tokenizers.md, "Counting other models"), `sources`, `budget` and
    `history`."""
    if assembler is None:
        if tokenizer is None:
            tokenizer = llm_tokenizer(llm)
        return ContextAssembler(
            tokenizer=tokenizer, budget=budget, sources=sources, history=history
        )
    if any(given is not None for given in (tokenizer, sources, budget, history)):
        raise InputError(
            "pass either assembler= or tokenizer=/sources=/budget=/options=, not both: an "
            "assembler already has its tokenizer, source and history options and budget"
        )
    return assembler


def llm_tokenizer(llm: LLM | None) -> Tokenizer:
    """The tokenizer `llm`'s ``metadata.model_name`` resolves to (`ctxbudget.get_tokenizer`:
    provider prefixes, Ollama tags and Bedrock ids read as for every other name)."""
    if llm is None:
        raise InputError(
            "pass tokenizer= (the model's tokenizer, e.g. tokenizer='gpt-4o'), llm= (whose "
            "model name names it) or assembler=ContextAssembler(...)"
        )
    name = llm.metadata.model_name
    try:
        return get_tokenizer(name)
    except TokenizerError as error:
        raise TokenizerError(
            f"{type(llm).__name__}'s model name {name!r} names no tokenizer ctxbudget can "
            f"count with ({error}); pass tokenizer=... (a model or encoding name, or a "
            "Tokenizer)"
        ) from None


def num_output_of(metadata: LLMMetadata) -> int:
    """Tokens the LLM may answer with; LlamaIndex's default (256) when it says -1 (unknown)."""
    return metadata.num_output if metadata.num_output > 0 else DEFAULT_NUM_OUTPUTS


def budget_for(metadata: LLMMetadata) -> Budget:
    """The default budget layout sized to the LLM's context window, its answer reserved."""
    return Budget.for_context_window(
        metadata.context_window, reserve_output=num_output_of(metadata)
    )
