"""ctxbudget: build the prompt a RAG or agent app sends to its model, under a hard token budget.

The retriever returned twenty chunks; the model reads one string. `ContextAssembler`
owns everything between: floors and priorities per claimant, whole-item trimming,
numbered and fenced sources, a cache-friendly layout, and a report of every decision.
"""

import logging as _logging
import typing as _typing
from importlib import metadata as _metadata

from ctxbudget import types
from ctxbudget._acl import Acl, acl_from_metadata
from ctxbudget._assemble import ContextAssembler
from ctxbudget._budget import CONTEXT_WINDOWS, Allocation, Budget
from ctxbudget._cache_monitor import CacheMonitor, CacheUsage, cache_usage
from ctxbudget._citations import CitationCheck, check_numbered
from ctxbudget._conversation import HistoryOptions
from ctxbudget._deprecated import module_getattr as _module_getattr
from ctxbudget._errors import (
    ContextBudgetError,
    CtxBudgetError,
    InputError,
    InvalidBudgetError,
    TokenizerError,
    VocabularyError,
)
from ctxbudget._estimates import EstimateTokenizer
from ctxbudget._exact import MAX_PROVIDER_COUNTS
from ctxbudget._fence import fence_rule
from ctxbudget._filters import (
    ACCESS_KEY,
    AllOf,
    AnyOf,
    Matches,
    Missing,
    PermitFilter,
    access_tokens,
    filter_admits,
    fold_filter,
    permit_filter,
    permit_tokens,
)
from ctxbudget._ingest import INGEST_COUNT_KEYS, ingest_count, ingest_metadata
from ctxbudget._ingest_batch import (
    INGEST_BATCH_COLUMNS,
    PARSE_WARNINGS_KEY,
    IngestBatch,
    ingest_batch,
    ingest_columns,
)
from ctxbudget._inputs import Chunk, Principal, Tool, Turn
from ctxbudget._layout import Frame
from ctxbudget._models import ModelInfo, resolve_model
from ctxbudget._neutralise import neutralise, neutralise_section
from ctxbudget._otel import span_attributes, traced
from ctxbudget._principal import NO_SCOPE, principal_for_call
from ctxbudget._provider import (
    AnthropicCount,
    BedrockCount,
    GeminiCount,
    ProviderCount,
    ProviderCountError,
)
from ctxbudget._public import rehome as _rehome
from ctxbudget._report import Dropped, Report, SummarySpan
from ctxbudget._result import CONVERSATION_START, Assembled, CitedSpan, Source
from ctxbudget._scan import flag_instructions, scan_for_instructions
from ctxbudget._servers import server_window
from ctxbudget._sources.conflicts import ConflictPolicy
from ctxbudget._sources.dedup import Dedup
from ctxbudget._sources.escalate import DocumentLoader, Escalation, SectionLoader
from ctxbudget._sources.fenced import (
    FencedSource,
    fence_sources,
    fence_untrusted,
    read_fenced,
    read_fenced_all,
)
from ctxbudget._sources.permit import AccessPolicy, permitted
from ctxbudget._sources.pipeline import SourceOptions
from ctxbudget._standalone import Selection, TrimmedHistory, select_sources, trim_history
from ctxbudget._tokens import (
    CallableTokenizer,
    HuggingFaceTokenizer,
    SentencePieceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    count_method_of,
    get_tokenizer,
    tokenizer_from_file,
)
from ctxbudget._turns import ToolCall, message_text

__version__ = _metadata.version("ctxbudget")

# A library's records reach the application's handlers, never stderr on their own.
_logging.getLogger("ctxbudget").addHandler(_logging.NullHandler())

__all__ = [
    "ACCESS_KEY",
    "CONTEXT_WINDOWS",
    "CONVERSATION_START",
    "INGEST_BATCH_COLUMNS",
    "INGEST_COUNT_KEYS",
    "MAX_PROVIDER_COUNTS",
    "NO_SCOPE",
    "PARSE_WARNINGS_KEY",
    "AccessPolicy",
    "Acl",
    "AllOf",
    "Allocation",
    "AnthropicCount",
    "AnyOf",
    "Assembled",
    "BedrockCount",
    "Budget",
    "CacheMonitor",
    "CacheUsage",
    "CallableTokenizer",
    "Chunk",
    "CitationCheck",
    "CitedSpan",
    "ConflictPolicy",
    "ContextAssembler",
    "ContextBudgetError",
    "CtxBudgetError",
    "Dedup",
    "DocumentLoader",
    "Dropped",
    "Escalation",
    "EstimateTokenizer",
    "FencedSource",
    "Frame",
    "GeminiCount",
    "HistoryOptions",
    "HuggingFaceTokenizer",
    "IngestBatch",
    "InputError",
    "InvalidBudgetError",
    "Matches",
    "Missing",
    "ModelInfo",
    "PermitFilter",
    "Principal",
    "ProviderCount",
    "ProviderCountError",
    "Report",
    "SectionLoader",
    "Selection",
    "SentencePieceTokenizer",
    "Source",
    "SourceOptions",
    "SummarySpan",
    "TiktokenTokenizer",
    "Tokenizer",
    "TokenizerError",
    "Tool",
    "ToolCall",
    "TrimmedHistory",
    "Turn",
    "VocabularyError",
    "access_tokens",
    "acl_from_metadata",
    "cache_usage",
    "check_numbered",
    "count_method_of",
    "fence_rule",
    "fence_sources",
    "fence_untrusted",
    "filter_admits",
    "flag_instructions",
    "fold_filter",
    "get_tokenizer",
    "ingest_batch",
    "ingest_columns",
    "ingest_count",
    "ingest_metadata",
    "message_text",
    "neutralise",
    "neutralise_section",
    "permit_filter",
    "permit_tokens",
    "permitted",
    "principal_for_call",
    "read_fenced",
    "read_fenced_all",
    "resolve_model",
    "scan_for_instructions",
    "select_sources",
    "server_window",
    "span_attributes",
    "tokenizer_from_file",
    "traced",
    "trim_history",
]

# Old names for one release (CHANGELOG.md): each warns and returns what replaced it. Hidden
# from type checkers, which then flag the old names and still catch a misspelt one.
_RENAMED: dict[str, tuple[str, object]] = {
    "BudgetError": ("ctxbudget.InvalidBudgetError", InvalidBudgetError),
    "TokenCounter": ("ctxbudget.types.CountCache", types.CountCache),
    "trim_turns": ("ctxbudget.trim_history", trim_history),
}
# What an application annotates with but does not build moved to ctxbudget.types.
_RENAMED |= {
    name: (f"ctxbudget.types.{name}", getattr(types, name))
    for name in types.__all__
    if name not in ("CountCache", "DropReason")
}
if not _typing.TYPE_CHECKING:
    __getattr__ = _module_getattr(__name__, _RENAMED)

_rehome(__name__, globals(), __all__)
