"""LlamaIndex adapter for ctxbudget: budgeted, numbered, fenced context for LlamaIndex engines.

`ContextBudgetPostprocessor` (a node postprocessor for query and chat engines: each
node it returns is one numbered source in a fence of its own), `ContextBudgetPromptHelper`
(response synthesizers pack whole sources, one fence per LLM call), `ContextBudgetMemory`
(a chat memory for chat engines and agents whose history fits its budget), `TokenCounter`
(an ingestion step that counts nodes once), `DocstoreLoader` (whole-document escalation
from an index's docstore), `principal_filters` / `PrincipalRetriever` with `AccessMarker`
(permission filters the vector store runs before retrieval), `check_response_citations`
(an answer's ``[n]`` against the numbers its source nodes were shown under). Thin: each
converts LlamaIndex objects and takes every rule from the `ctxbudget` core (ACLs, which
principal, ingest counts, fences, numbers, what a message costs, which turns are sent);
decisions are reported as LlamaIndex instrumentation events (`SourcesSelectedEvent`,
`ContextPackedEvent`, `HistoryTrimmedEvent`).
"""

import typing as _typing
from importlib import metadata as _metadata

try:
    import llama_index.core as _llama_index_core
except ImportError as _error:
    raise ImportError(
        "llamaindex_ctxbudget needs llama-index-core, which is not installed: "
        "pip install 'ctxbudget[llamaindex]'"
    ) from _error

from ctxbudget._deprecated import module_getattr as _module_getattr
from ctxbudget._public import rehome as _rehome
from llamaindex_ctxbudget._convert import NodeMetadataMapping, to_chunk
from llamaindex_ctxbudget.citations import check_response_citations, source_numbers
from llamaindex_ctxbudget.events import (
    ContextPackedEvent,
    HistoryTrimmedEvent,
    SourcesSelectedEvent,
)
from llamaindex_ctxbudget.filters import AccessMarker, PrincipalRetriever, principal_filters
from llamaindex_ctxbudget.ingestion import TokenCounter
from llamaindex_ctxbudget.loader import DocstoreLoader
from llamaindex_ctxbudget.memory import DEFAULT_SUMMARY_PROMPT, ContextBudgetMemory
from llamaindex_ctxbudget.postprocessor import (
    CitedNode,
    ContextBudgetPostprocessor,
    FencedNode,
    as_principal,
)
from llamaindex_ctxbudget.prompt_helper import ContextBudgetPromptHelper

__version__ = _metadata.version("ctxbudget")

# Old names for one release (CHANGELOG.md): each warns and returns what replaced it.
_RENAMED: dict[str, tuple[str, object]] = {
    "MetadataMapping": ("llamaindex_ctxbudget.NodeMetadataMapping", NodeMetadataMapping),
}
if not _typing.TYPE_CHECKING:
    __getattr__ = _module_getattr(__name__, _RENAMED)

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "AccessMarker",
    "CitedNode",
    "ContextBudgetMemory",
    "ContextBudgetPostprocessor",
    "ContextBudgetPromptHelper",
    "ContextPackedEvent",
    "DocstoreLoader",
    "FencedNode",
    "HistoryTrimmedEvent",
    "NodeMetadataMapping",
    "PrincipalRetriever",
    "SourcesSelectedEvent",
    "TokenCounter",
    "as_principal",
    "check_response_citations",
    "principal_filters",
    "source_numbers",
    "to_chunk",
]

_rehome(__name__, globals(), __all__)

del _llama_index_core
