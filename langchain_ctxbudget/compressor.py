"""`ContextBudgetCompressor`: the budget as a step of `ContextualCompressionRetriever`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks, adispatch_custom_event, dispatch_custom_event
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import ConfigDict, Field

from ctxbudget import ContextAssembler, Principal
from langchain_ctxbudget._convert import MetadataMapping
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    budgeted_documents,
    in_run,
    principal_for,
    selection_report,
)

__all__ = ["ContextBudgetCompressor"]


class ContextBudgetCompressor(BaseDocumentCompressor):
    """Keeps the retrieved documents that fit the budget, cited ``[n]`` in prompt order.

    Works as ``ContextualCompressionRetriever(base_compressor=...)`` and inside a
    ``DocumentCompressorPipeline``. Selection is by rank (rerank score, score, then
    the retriever's order), not by `query`: the question belongs in the prompt.
    Output as `ContextBudgetTransformer`; inputs are not changed. Inside a retriever
    run, the report is dispatched as the custom event ``"ctxbudget_report"``.

    Who is asking: ``config["configurable"]["principal"]`` of the chain the retriever
    runs in, else `principal`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    assembler: ContextAssembler
    """The budget, tokenizer and source options."""
    principal: Principal | None = None
    """Who is asking when the running chain's config names nobody."""
    max_tokens: int | None = None
    """The block's limit; None uses the budget's ``retrieved`` allocation."""
    mapping: MetadataMapping = Field(default_factory=MetadataMapping)
    """Which `Document.metadata` keys fill which `Chunk` field."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Select and cite `documents` within the budget."""
        selected, report = self._select(documents)
        config: RunnableConfig = {"callbacks": callbacks}
        if in_run(config):
            dispatch_custom_event(REPORT_EVENT, report, config=config)
        return selected

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
        principal = principal_for(self.principal, ensure_config())
        selected, selection = budgeted_documents(
            self.assembler,
            documents,
            principal=principal,
            max_tokens=self.max_tokens,
            mapping=self.mapping,
        )
        return selected, selection_report(selection)
