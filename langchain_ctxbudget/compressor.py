"""`ContextBudgetCompressor`: the budget as a step of `ContextualCompressionRetriever`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks, adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field, model_validator

from ctxbudget import ContextAssembler, InputError, traced
from langchain_ctxbudget._convert import DocumentMetadataMapping
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    budgeted_documents,
    in_run,
    selection_report,
)

__all__ = ["ContextBudgetCompressor"]

logger = logging.getLogger("ctxbudget.langchain")

_PER_CALL = (
    "ContextualCompressionRetriever passes a compressor no config, so it cannot tell who "
    "is asking; for documents restricted by tenant or groups use "
    "ContextBudgetRetriever(retriever=..., assembler=...), which takes "
    "config['configurable']['principal'] on every call"
)


class ContextBudgetCompressor(BaseDocumentCompressor):
    """Keeps the retrieved documents that fit the budget, cited ``[n]`` in prompt order.

    Works as ``ContextualCompressionRetriever(base_compressor=...)`` and inside a
    ``DocumentCompressorPipeline``. Selection is by rank (rerank score, score, then
    the retriever's order), not by `query`: the question belongs in the prompt.
    Output as `ContextBudgetTransformer`; inputs are not changed. Inside a retriever
    run, the report is dispatched as the custom event ``"ctxbudget_report"``.

    Who is asking: nobody. A compressor is handed documents and the query, never the
    call's config, so a principal it found elsewhere could be another call's; it
    answers for no principal, which sees unrestricted documents only, and logs a
    warning when it left restricted ones out. For per-user documents use
    `ContextBudgetRetriever`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    assembler: ContextAssembler
    """The budget, tokenizer and source options."""
    max_tokens: int | None = None
    """The block's limit; None uses the budget's ``retrieved`` allocation (its min stays
    the floor: sources found but none sent raise above it)."""
    mapping: DocumentMetadataMapping = Field(default_factory=DocumentMetadataMapping)
    """Which `Document.metadata` keys fill which `Chunk` field."""

    @model_validator(mode="before")
    @classmethod
    def _no_principal(cls, data: Any) -> Any:
        if isinstance(data, dict) and "principal" in data:
            raise ValueError(f"ContextBudgetCompressor takes no principal: {_PER_CALL}")
        return data

    @traced("ctxbudget.langchain.ContextBudgetCompressor.compress_documents")
    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Select and cite the unrestricted `documents` within the budget."""
        selected, report = self._select(documents)
        config: RunnableConfig = {"callbacks": callbacks}
        if in_run(config):
            dispatch_custom_event(REPORT_EVENT, report, config=config)
        return selected

    @traced("ctxbudget.langchain.ContextBudgetCompressor.acompress_documents")
    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """`compress_documents`, dispatching the report on the async callback path."""
        selected, report = self._select(documents)
        config: RunnableConfig = {"callbacks": callbacks}
        if in_run(config):
            await adispatch_custom_event(REPORT_EVENT, report, config=config)
        return selected

    def _select(self, documents: Sequence[Document]) -> tuple[list[Document], dict[str, Any]]:
        if self.assembler.sources.access.require_principal:
            raise InputError(
                "the access policy requires a principal (AccessPolicy(require_principal=True)), "
                f"and ContextBudgetCompressor answers for none: {_PER_CALL}"
            )
        selected, selection = budgeted_documents(
            self.assembler,
            documents,
            principal=None,
            max_tokens=self.max_tokens,
            mapping=self.mapping,
        )
        restricted = sum(d.reason == "forbidden" for d in selection.dropped)
        if restricted:
            logger.warning(
                "ContextBudgetCompressor left out %d document(s) that only a principal may see: "
                "it answers for none. %s",
                restricted,
                _PER_CALL,
                extra={"ctxbudget_restricted": restricted},
            )
        return selected, selection_report(selection)
