"""LangChain adapter for ctxbudget: budgeted, numbered, fenced context as LangChain components.

`ContextBudgetRunnable` (an LCEL step), `ContextBudgetRetriever` (any retriever, budgeted
for each call's principal), `ContextBudgetTransformer` and `ContextBudgetCompressor`
(document post-processing), `TokenCountTransformer` (token counts stored at ingest),
`trim_history` (chat history by whole turns), `CheckCitations` (an answer's ``[n]``
checked against the sources it was shown), `AccessMarker` with the store filters of
`langchain_ctxbudget.filters` (permission filters before retrieval), `CacheMonitorHandler`
(prompt-cache hits fed to a `ctxbudget.CacheMonitor`);
`langchain_ctxbudget.middleware.ContextBudgetMiddleware` for agents built with
``langchain`` 1.x. Thin: each converts LangChain objects, calls the `ctxbudget` core
once, and converts back.
"""

import typing as _typing
from importlib import metadata as _metadata

try:
    import langchain_core as _langchain_core
except ImportError as _error:
    raise ImportError(
        "langchain_ctxbudget needs langchain-core, which is not installed: "
        "pip install 'ctxbudget[langchain]'"
    ) from _error

from ctxbudget._deprecated import module_getattr as _module_getattr
from ctxbudget._public import rehome as _rehome
from langchain_ctxbudget._convert import DocumentMetadataMapping
from langchain_ctxbudget.cache_monitor import CacheMonitorHandler
from langchain_ctxbudget.citations import CheckCitations, fence_numbered
from langchain_ctxbudget.compressor import ContextBudgetCompressor
from langchain_ctxbudget.filters import AccessMarker
from langchain_ctxbudget.history import history_trimmer, trim_history
from langchain_ctxbudget.ingest import TokenCountTransformer
from langchain_ctxbudget.retriever import ContextBudgetRetriever
from langchain_ctxbudget.runnable import (
    ContextBudgetRunnable,
    ContextWithSources,
    SourcedContext,
)
from langchain_ctxbudget.transformer import ContextBudgetTransformer

__version__ = _metadata.version("ctxbudget")

# Old names for one release (CHANGELOG.md): each warns and returns what replaced it.
_RENAMED: dict[str, tuple[str, object]] = {
    "MetadataMapping": ("langchain_ctxbudget.DocumentMetadataMapping", DocumentMetadataMapping),
}
if not _typing.TYPE_CHECKING:
    __getattr__ = _module_getattr(__name__, _RENAMED)

__all__ = [
    "AccessMarker",
    "CacheMonitorHandler",
    "CheckCitations",
    "ContextBudgetCompressor",
    "ContextBudgetRetriever",
    "ContextBudgetRunnable",
    "ContextBudgetTransformer",
    "ContextWithSources",
    "DocumentMetadataMapping",
    "SourcedContext",
    "TokenCountTransformer",
    "fence_numbered",
    "history_trimmer",
    "trim_history",
]

_rehome(__name__, globals(), __all__)

del _langchain_core
