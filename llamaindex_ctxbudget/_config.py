"""What the components are built from: an assembler (or its arguments), and the LLM's window.

Each component takes a `ContextAssembler`, or the tokenizer, `SourceOptions` and
`HistoryOptions` to build one; the budget comes from the assembler, or is derived from the LLM's
``metadata.context_window`` and ``num_output`` the way LlamaIndex's own
`PromptHelper.from_llm_metadata` reads them.
"""

from __future__ import annotations

from llama_index.core.base.llms.types import LLMMetadata
from llama_index.core.constants import DEFAULT_NUM_OUTPUTS

from ctxbudget import (
    Budget,
    ContextAssembler,
    HistoryOptions,
    InputError,
    SourceOptions,
    Tokenizer,
)

__all__ = ["budget_for", "build_assembler", "num_output_of"]


def build_assembler(
    assembler: ContextAssembler | None,
    *,
    tokenizer: str | Tokenizer | None,
    sources: SourceOptions | None,
    budget: Budget | None = None,
    history: HistoryOptions | None = None,
) -> ContextAssembler:
    """`assembler` itself, or one built from `tokenizer`, `sources`, `budget` and `history`."""
    if assembler is None:
        if tokenizer is None:
            raise InputError(
                "pass tokenizer= (the model's tokenizer, e.g. tokenizer='gpt-4o') or "
                "assembler=ContextAssembler(...)"
            )
        return ContextAssembler(
            tokenizer=tokenizer, budget=budget, sources=sources, history=history
        )
    if any(given is not None for given in (tokenizer, sources, budget, history)):
        raise InputError(
            "pass either assembler= or tokenizer=/sources=/budget=/options=, not both: an "
            "assembler already has its tokenizer, source and history options and budget"
        )
    return assembler


def num_output_of(metadata: LLMMetadata) -> int:
    """Tokens the LLM may answer with; LlamaIndex's default (256) when it says -1 (unknown)."""
    return metadata.num_output if metadata.num_output > 0 else DEFAULT_NUM_OUTPUTS


def budget_for(metadata: LLMMetadata) -> Budget:
    """The default budget layout sized to the LLM's context window, its answer reserved."""
    return Budget.for_context_window(
        metadata.context_window, reserve_output=num_output_of(metadata)
    )
