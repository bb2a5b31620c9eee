"""`ContextBudgetRetriever`: any retriever's documents selected for the call's principal."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import RunnableConfig, ensure_config, patch_config
from pydantic import ConfigDict, Field

from ctxbudget import ContextAssembler, Principal, traced
from langchain_ctxbudget._convert import DocumentMetadataMapping
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    budgeted_documents,
    call_principal,
    selection_report,
)

__all__ = ["ContextBudgetRetriever"]


class ContextBudgetRetriever(BaseRetriever):
    """A retriever whose documents are selected, numbered and cited within the budget, for
    the principal of each call.

    `retriever` runs first (with the call's config, as a child run), then the core's
    retrieved pipeline keeps what fits; documents come back as `ContextBudgetCompressor`
    returns them (the rendered ``[n]`` source as ``page_content``,
    ``metadata["citation"] = n``), and the report is dispatched as the custom event
    ``"ctxbudget_report"``. The call's config reaches the selection on every path:
    ``invoke``, ``ainvoke``, ``batch``, ``abatch``, ``stream``, ``with_config`` and as a
    step of a chain, where `ContextualCompressionRetriever` hands its compressor none.

    Who is asking: built with `principal`, it serves that principal only, and a call whose
    config names anyone else (None included) is refused; built without, each call's
    ``config["configurable"]["principal"]``, and a call naming nobody sees unrestricted
    documents only::

        retriever = ContextBudgetRetriever(retriever=store.as_retriever(), assembler=assembler)
        retriever.invoke(question, {"configurable": {"principal": Principal(tenant="acme")}})
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    retriever: RetrieverLike
    """The retriever whose documents are budgeted (any Runnable from a query to Documents)."""
    assembler: ContextAssembler
    """The budget, tokenizer and source options."""
    principal: Principal | None = None
    """The one principal this retriever serves; None takes it from each call's config."""
    max_tokens: int | None = None
    """The block's limit; None uses the budget's ``retrieved`` allocation (its min stays
    the floor: sources found but none sent raise above it)."""
    mapping: DocumentMetadataMapping = Field(default_factory=DocumentMetadataMapping)
    """Which `Document.metadata` keys fill which `Chunk` field."""

    @traced("ctxbudget.langchain.ContextBudgetRetriever.invoke")
    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Retrieve and budget the documents for `input`, for the config's principal."""
        config = ensure_config(config)
        # BaseRetriever hands _get_relevant_documents no config: it travels as an argument.
        return super().invoke(input, config, **kwargs, call_config=config)

    @traced("ctxbudget.langchain.ContextBudgetRetriever.ainvoke")
    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """`invoke`, with the base retriever and the report event on the async path."""
        config = ensure_config(config)
        return await super().ainvoke(input, config, **kwargs, call_config=config)

    def _get_relevant_documents(  # type: ignore[override]  # takes the config invoke passes
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        call_config: RunnableConfig,
    ) -> list[Document]:
        principal = call_principal(self.principal, call_config)
        child = patch_config(call_config, callbacks=run_manager.get_child())
        selected, report = self._select(self.retriever.invoke(query, child), principal)
        dispatch_custom_event(REPORT_EVENT, report, config={"callbacks": run_manager.get_child()})
        return selected

    async def _aget_relevant_documents(  # type: ignore[override]  # as _get_relevant_documents
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        call_config: RunnableConfig,
    ) -> list[Document]:
        principal = call_principal(self.principal, call_config)
        child = patch_config(call_config, callbacks=run_manager.get_child())
        selected, report = self._select(await self.retriever.ainvoke(query, child), principal)
        await adispatch_custom_event(
            REPORT_EVENT, report, config={"callbacks": run_manager.get_child()}
        )
        return selected

    def _select(
        self, documents: object, principal: Principal | None
    ) -> tuple[list[Document], dict[str, Any]]:
        selected, selection = budgeted_documents(
            self.assembler,
            documents,
            principal=principal,
            max_tokens=self.max_tokens,
            mapping=self.mapping,
        )
        return selected, selection_report(selection)
