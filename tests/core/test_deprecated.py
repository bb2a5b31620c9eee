"""Old names kept for one release: each warns with its new name and gives the new thing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import ctxbudget
import ctxbudget.eval
import ctxbudget.types
from ctxbudget.eval import _cli

# old top-level name -> (new public path, the new object)
RENAMED = {
    "BudgetError": ("ctxbudget.InvalidBudgetError", ctxbudget.InvalidBudgetError),
    "trim_turns": ("ctxbudget.trim_history", ctxbudget.trim_history),
    "TokenCounter": ("ctxbudget.types.CountCache", ctxbudget.types.CountCache),
}
MOVED_TO_TYPES = [
    "AnthropicMessage",
    "AnthropicPrompt",
    "AnthropicTool",
    "BedrockMessage",
    "BedrockPrompt",
    "BedrockTool",
    "CLAIMANTS",
    "Claimant",
    "CountMethod",
    "FenceMode",
    "GeminiContent",
    "GeminiFunction",
    "GeminiPrompt",
    "HeaderCache",
    "Message",
    "MessageStyle",
    "NoScope",
    "OpenAIMessage",
    "OpenAITool",
    "Order",
    "Role",
    "SearchResultBlock",
    "SearchResultPrompt",
    "ShingleCache",
    "SourceFormat",
    "TextCache",
]
RENAMED |= {
    name: (f"ctxbudget.types.{name}", getattr(ctxbudget.types, name)) for name in MOVED_TO_TYPES
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_top_level_name_warns_and_returns_the_new_object(old: str) -> None:
    new, value = RENAMED[old]
    with pytest.warns(DeprecationWarning, match=rf"ctxbudget\.{old} is deprecated.*use {new}$"):
        assert getattr(ctxbudget, old) is value


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_top_level_name_is_not_in_all(old: str) -> None:
    assert old not in ctxbudget.__all__


def test_old_name_imports_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="use ctxbudget.InvalidBudgetError"):
        from ctxbudget import BudgetError  # type: ignore[attr-defined]
    assert BudgetError is ctxbudget.InvalidBudgetError


def test_unknown_top_level_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'ctxbudget' has no attribute 'Nonesuch'"):
        ctxbudget.Nonesuch  # type: ignore[attr-defined]  # noqa: B018


def test_select_sources_old_options_keyword_warns_and_is_sources() -> None:
    chunks = [ctxbudget.Chunk(id="a", content="Refunds take 14 days.")]
    kept = ctxbudget.SourceOptions(datamark=True)
    new = ctxbudget.select_sources(chunks, max_tokens=500, tokenizer="o200k_base", sources=kept)
    with pytest.warns(DeprecationWarning, match=r"select_sources\(options=...\).*use sources=$"):
        old = ctxbudget.select_sources(
            chunks,
            max_tokens=500,
            tokenizer="o200k_base",
            options=kept,  # type: ignore[call-arg]
        )
    assert old == new


def test_trim_history_old_options_keyword_warns_and_is_history() -> None:
    turns = [ctxbudget.Turn(role="user", content="Hi")]
    keep = ctxbudget.HistoryOptions(keep_tool_results=1)
    new = ctxbudget.trim_history(turns, max_tokens=100, tokenizer="o200k_base", history=keep)
    with pytest.warns(DeprecationWarning, match=r"trim_history\(options=...\).*use history=$"):
        old = ctxbudget.trim_history(
            turns,
            max_tokens=100,
            tokenizer="o200k_base",
            options=keep,  # type: ignore[call-arg]
        )
    assert old == new


def test_old_and_new_keyword_together_is_a_type_error() -> None:
    turns = [ctxbudget.Turn(role="user", content="Hi")]
    with pytest.raises(TypeError, match=r"trim_history\(\) got both history= and .* options="):
        ctxbudget.trim_history(
            turns,
            max_tokens=100,
            tokenizer="o200k_base",
            history=None,
            options=None,  # type: ignore[call-arg]
        )


def test_report_squeezed_by_warns_and_is_trimmed_by() -> None:
    report = ctxbudget.ContextAssembler(tokenizer="o200k_base").assemble(question="Hi").report
    with pytest.warns(DeprecationWarning, match=r"Report\.squeezed_by is deprecated.*trimmed_by$"):
        assert report.squeezed_by is report.trimmed_by


def test_report_squeezed_by_is_read_only() -> None:
    report = ctxbudget.ContextAssembler(tokenizer="o200k_base").assemble(question="Hi").report
    with pytest.raises(ValidationError, match="Instance is frozen"):
        report.squeezed_by = {}  # type: ignore[misc]


@pytest.mark.parametrize(
    ("old", "new"),
    [("fence_open", "open"), ("fence_close", "close"), ("separator", "separator")],
)
def test_selection_fence_fields_warn_and_read_the_frame(old: str, new: str) -> None:
    chunks = [ctxbudget.Chunk(id=name, content=f"Fact {name}.") for name in "ab"]
    selection = ctxbudget.select_sources(chunks, max_tokens=500, tokenizer="o200k_base")
    with pytest.warns(DeprecationWarning, match=rf"Selection\.{old} is deprecated.*frame\.{new}$"):
        value = getattr(selection, old)
    assert value == getattr(selection.frame, new) != ""


@pytest.mark.parametrize("old", ["cli_main", "load_model"])
def test_eval_command_entry_points_warn_and_are_the_commands_own(old: str) -> None:
    with pytest.warns(DeprecationWarning, match=rf"ctxbudget\.eval\.{old} is deprecated"):
        assert getattr(ctxbudget.eval, old) is getattr(_cli, old)
    assert old not in ctxbudget.eval.__all__
