"""What components are built from: an assembler or its arguments, and the LLM's window."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import LLMMetadata

from ctxbudget import (
    Budget,
    ContextAssembler,
    InputError,
    SourceOptions,
    TokenizerError,
    count_method_of,
)
from llamaindex_ctxbudget import (
    ContextBudgetMemory,
    ContextBudgetPostprocessor,
    ContextBudgetPromptHelper,
)
from llamaindex_ctxbudget._config import budget_for, build_assembler, num_output_of
from tests.support.llamaindex_stack import RecordingChatLLM


def test_build_assembler_from_its_arguments() -> None:
    options = SourceOptions(order="relevance")
    built = build_assembler(
        None, tokenizer="gpt-4o", sources=options, budget=Budget.default(total=3_000)
    )
    assert built.counter.tokenizer.name == "o200k_base"
    assert built.sources == options
    assert built.budget.total == 3_000


def test_build_assembler_passes_an_assembler_through() -> None:
    assembler = ContextAssembler(tokenizer="o200k_base")
    assert build_assembler(assembler, tokenizer=None, sources=None) is assembler


def test_build_assembler_needs_a_tokenizer() -> None:
    with pytest.raises(InputError, match=r"pass tokenizer= \(the model's tokenizer"):
        build_assembler(None, tokenizer=None, sources=SourceOptions())


@pytest.mark.parametrize(
    "extra",
    [{"tokenizer": "gpt-4o"}, {"sources": SourceOptions()}, {"budget": Budget.default()}],
)
def test_build_assembler_with_both_is_an_error(extra: dict[str, object]) -> None:
    arguments: dict[str, object] = {"tokenizer": None, "sources": None, **extra}
    with pytest.raises(InputError, match="not both"):
        build_assembler(ContextAssembler(tokenizer="o200k_base"), **arguments)  # type: ignore[arg-type]


def test_num_output_unknown_is_llamaindex_default() -> None:
    assert num_output_of(LLMMetadata(num_output=-1)) == 256


def test_num_output_known_is_kept() -> None:
    assert num_output_of(LLMMetadata(num_output=1_000)) == 1_000


def test_budget_for_sizes_the_window() -> None:
    budget = budget_for(LLMMetadata(context_window=32_000, num_output=2_000))
    assert budget == Budget.for_context_window(32_000, reserve_output=2_000)


@pytest.mark.parametrize(
    ("model", "method"),
    [
        ("gpt-4o", "tiktoken:o200k_base"),
        ("openai:gpt-4.1-mini", "tiktoken:o200k_base"),
        ("claude-sonnet-4-5", "estimate:claude-v3"),
    ],
)
def test_components_take_the_tokenizer_the_llms_model_name_resolves_to(
    model: str, method: str
) -> None:
    llm = RecordingChatLLM(model=model)
    built = [
        ContextBudgetPostprocessor(llm=llm)._tokenizer,
        ContextBudgetMemory.from_defaults(llm=llm)._assembler.counter.tokenizer,
        ContextBudgetPromptHelper.from_llm(llm)._assembler.counter.tokenizer,
    ]
    assert [count_method_of(t).label for t in built] == [method] * 3


def test_llm_whose_model_name_names_no_tokenizer_says_to_pass_one() -> None:
    llm = RecordingChatLLM(model="unknown")
    with pytest.raises(TokenizerError, match=r"RecordingChatLLM's model name 'unknown' .* pass "):
        ContextBudgetPostprocessor(llm=llm)
