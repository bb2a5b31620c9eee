"""The public surface: what `import ctxbudget` exports, what it drags in, what it ships."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from types import ModuleType

import pytest

import ctxbudget
import ctxbudget.eval
import ctxbudget.types
from tests.support.imports import loaded_after

# The surface, pinned: a name added, moved or removed here is a decision (CHANGELOG.md).
TOP_LEVEL = {
    # entry points and the results they return
    "ContextAssembler", "Assembled", "Report", "Dropped", "SummarySpan", "Source", "CitedSpan",
    "select_sources", "Selection", "trim_history", "TrimmedHistory", "Frame",
    # the data models and options an application builds
    "Budget", "Allocation", "CONTEXT_WINDOWS", "ModelInfo", "resolve_model", "server_window",
    "Chunk", "Turn", "ToolCall", "Tool", "Principal", "NO_SCOPE", "principal_for_call",
    "SourceOptions", "HistoryOptions", "AccessPolicy", "ConflictPolicy", "Dedup", "Escalation",
    # the errors
    "CtxBudgetError", "ContextBudgetError", "InvalidBudgetError", "InputError",
    "TokenizerError", "VocabularyError", "ProviderCountError",
    # the protocols, and the tokenizers and provider counts that implement them
    "Tokenizer", "DocumentLoader", "SectionLoader", "ProviderCount", "get_tokenizer",
    "tokenizer_from_file", "TiktokenTokenizer", "HuggingFaceTokenizer",
    "SentencePieceTokenizer", "CallableTokenizer", "EstimateTokenizer", "count_method_of",
    "AnthropicCount", "BedrockCount", "GeminiCount", "MAX_PROVIDER_COUNTS",
    # what an adapter author calls: fences, ACLs and permission filters, ingest, messages
    "fence_rule", "fence_sources", "fence_untrusted", "read_fenced", "read_fenced_all",
    "FencedSource", "neutralise", "neutralise_section", "flag_instructions",
    "scan_for_instructions", "Acl", "acl_from_metadata", "permitted", "ACCESS_KEY",
    "PermitFilter", "AllOf", "AnyOf", "Matches", "Missing", "permit_filter", "access_tokens",
    "permit_tokens", "filter_admits", "fold_filter", "INGEST_COUNT_KEYS", "ingest_count",
    "ingest_metadata", "INGEST_BATCH_COLUMNS", "PARSE_WARNINGS_KEY", "IngestBatch",
    "ingest_batch", "ingest_columns", "message_text", "CONVERSATION_START",
    # citations, caching and tracing
    "check_numbered", "CitationCheck", "CacheMonitor", "CacheUsage", "cache_usage",
    "span_attributes", "traced",
}  # fmt: skip

TYPES = {
    # provider message shapes
    "AnthropicMessage", "AnthropicPrompt", "AnthropicTool", "BedrockMessage", "BedrockPrompt",
    "BedrockTool", "GeminiContent", "GeminiFunction", "GeminiPrompt", "Message",
    "OpenAIMessage", "OpenAITool", "SearchResultBlock", "SearchResultPrompt",
    # the Literal names of option strings, and the sentinel's type
    "Claimant", "CLAIMANTS", "CountMethod", "DropReason", "FenceMode", "MessageStyle", "Order",
    "Role", "SourceFormat", "NoScope",
    # the caches an assembler exposes as attributes
    "CountCache", "HeaderCache", "ShingleCache", "TextCache",
}  # fmt: skip

EVAL = {
    "position_sensitivity", "PositionResult", "Distractors", "k_knee", "KneeResult",
    "ablation", "ablate", "AblationResult", "Field", "FIELDS", "VARIANTS",
    "assert_context_p95_below", "context_size_p95", "context_sizes", "Result", "Cell",
    "Spread", "Case", "load_cases", "load_chunks", "Model", "cached", "from_langchain",
    "from_llamaindex", "Retriever", "lexical_retriever", "Scorer", "grounded", "keyword_hit",
    "SimulatedModel", "simulated_generator", "synthetic_corpus", "DEFAULT_SYSTEM", "EvalError",
}  # fmt: skip

PUBLIC = [(ctxbudget, TOP_LEVEL), (ctxbudget.types, TYPES), (ctxbudget.eval, EVAL)]


def _isort_style(name: str) -> tuple[int, str]:
    # Constants, then classes, then functions: the order ruff keeps `__all__` in.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return (kind, name)


@pytest.mark.parametrize(("module", "names"), PUBLIC, ids=lambda v: getattr(v, "__name__", ""))
def test_all_is_the_pinned_surface(module: ModuleType, names: set[str]) -> None:
    assert set(module.__all__) == names


@pytest.mark.parametrize("module", [m for m, _ in PUBLIC], ids=lambda m: m.__name__)
def test_all_is_sorted(module: ModuleType) -> None:
    assert list(module.__all__) == sorted(module.__all__, key=_isort_style)


def _classes(module: ModuleType) -> list[type]:
    return [value for name in module.__all__ if isinstance(value := getattr(module, name), type)]


@pytest.mark.parametrize("module", [m for m, _ in PUBLIC], ids=lambda m: m.__name__)
def test_every_public_class_is_named_by_its_package(module: ModuleType) -> None:
    assert {cls.__name__: cls.__module__ for cls in _classes(module)} == {
        cls.__name__: module.__name__ for cls in _classes(module)
    }


@pytest.mark.parametrize("module", [m for m, _ in PUBLIC], ids=lambda m: m.__name__)
def test_every_public_class_pickles_by_its_public_path(module: ModuleType) -> None:
    for cls in _classes(module):
        assert f"{module.__name__}\n{cls.__name__}".encode() in pickle.dumps(cls, protocol=0)
        assert pickle.loads(pickle.dumps(cls)) is cls


def test_results_pickle_and_unpickle_by_their_public_path() -> None:
    chunks = [ctxbudget.Chunk(id="a", content="Refunds take 14 days.")]
    turns = [ctxbudget.Turn(role="user", content="Hi")]
    assembler = ctxbudget.ContextAssembler(tokenizer="o200k_base")
    values = [
        assembler.assemble(question="Refunds?", chunks=chunks).report,
        ctxbudget.select_sources(chunks, max_tokens=200, tokenizer="o200k_base"),
        ctxbudget.trim_history(turns, max_tokens=200, tokenizer="o200k_base"),
        ctxbudget.Budget.for_agent(128_000, reserve_output=4_000),
        ctxbudget.ContextBudgetError("history", 10, 5),
    ]
    for value in values:
        data = pickle.dumps(value)
        assert b"ctxbudget._" not in data
        again = pickle.loads(data)
        assert type(again) is type(value)
        assert repr(again) == repr(value)


def test_all_matches_the_public_names_defined_in_the_package() -> None:
    public = {
        name
        for name, value in vars(ctxbudget).items()
        if not name.startswith("_") and not isinstance(value, type(sys))
    }
    assert set(ctxbudget.__all__) == public


def test_every_name_in_all_resolves() -> None:
    for name in ctxbudget.__all__:
        assert getattr(ctxbudget, name) is not None


def test_import_does_not_import_frameworks_or_numpy() -> None:
    heavy = ("langchain_core", "llama_index", "numpy", "langchain", "rich", "matplotlib")
    assert loaded_after("import ctxbudget", [*heavy, "ctxbudget.eval"]) == set()


def test_package_ships_py_typed_marker() -> None:
    assert (Path(ctxbudget.__file__).parent / "py.typed").is_file()


def test_public_callables_have_docstrings() -> None:
    for name in ctxbudget.__all__:
        value = getattr(ctxbudget, name)
        if callable(value) and not isinstance(value, type(ctxbudget.types.Claimant)):
            assert value.__doc__, f"{name} has no docstring"


def _private(parts: tuple[str, ...]) -> bool:
    # `eval/` is the one public subpackage (`from ctxbudget.eval import ...`); its own
    # modules are private like the rest.
    if parts[0] == "eval" and len(parts) == 2:
        return parts[1].startswith("_")
    return any(part.startswith("_") for part in parts)


def test_every_module_of_the_package_is_private() -> None:
    # The public surface is exactly `ctxbudget.__all__`, `ctxbudget.types.__all__` and
    # `ctxbudget.eval.__all__`: modules are implementation.
    root = Path(ctxbudget.__file__).parent
    public = [
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if not _private(path.relative_to(root).parts)
    ]
    assert public == ["types.py"]


def test_no_public_module_attribute_leaks_from_the_package() -> None:
    # `eval` appears once something imports ctxbudget.eval: the public subpackage.
    modules = [n for n, v in vars(ctxbudget).items() if isinstance(v, type(sys))]
    assert all(name.startswith("_") or name in ("eval", "types") for name in modules), modules
