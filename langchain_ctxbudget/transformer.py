"""`ContextBudgetTransformer`: retrieved documents selected, numbered and arranged in budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document

from ctxbudget import NO_SCOPE, ContextAssembler, Principal, principal_for_call, traced
from ctxbudget.types import NoScope
from langchain_ctxbudget._convert import DocumentMetadataMapping
from langchain_ctxbudget._langchain import budgeted_documents, principal_of

__all__ = ["ContextBudgetTransformer"]


class ContextBudgetTransformer(BaseDocumentTransformer):
    """Keeps the documents that fit the retrieved budget: permitted, above the relevance
    floor, deduplicated, best first, whole documents escalated, arranged for reading.

    Returns new Documents in prompt order, each with its rendered source (``[n]`` header
    and neutralised text) as ``page_content``, ``metadata["citation"] = n`` and
    ``metadata["fence"]``; the input Documents are not changed. The fence is not part of
    any one Document: `ContextBudgetRunnable` (or `fence_numbered`) fences them as they are.

    Who is asking: built with `principal`, it serves that principal only; built without,
    each call's ``principal=``, and a call naming nobody sees unrestricted documents only.

    >>> transformer = ContextBudgetTransformer(ContextAssembler(tokenizer="gpt-4o"))
    >>> [d.metadata["citation"] for d in transformer.transform_documents([Document("Hi.")])]
    [1]
    """

    def __init__(
        self,
        assembler: ContextAssembler,
        *,
        principal: Principal | None = None,
        max_tokens: int | None = None,
        mapping: DocumentMetadataMapping | None = None,
    ) -> None:
        """
        Args:
            principal: the one principal served; a call naming anyone else (None included)
                is refused. None: each call names its own (``principal=``).
            max_tokens: the block's limit; None uses the budget's ``retrieved`` allocation
                (its min stays the floor: sources found but none sent raise above it).
            mapping: which metadata keys fill which `Chunk` field.
        """
        self.assembler = assembler
        self.principal = principal
        self.max_tokens = max_tokens
        self.mapping = DocumentMetadataMapping() if mapping is None else mapping

    @traced("ctxbudget.langchain.ContextBudgetTransformer.transform_documents")
    def transform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> Sequence[Document]:
        """Select and cite `documents`; ``principal=`` (a `Principal`, a mapping of its
        fields, or None for the anonymous caller) names who is asking in this call."""
        scope: Principal | NoScope | None = NO_SCOPE
        if "principal" in kwargs:
            scope = principal_of(kwargs.pop("principal"), "principal=")
        if kwargs:
            raise TypeError(
                f"transform_documents() got unexpected keyword argument(s) "
                f"{', '.join(map(repr, kwargs))}; it takes principal="
            )
        selected, _ = budgeted_documents(
            self.assembler,
            documents,
            principal=principal_for_call(self.principal, scope, where="principal="),
            max_tokens=self.max_tokens,
            mapping=self.mapping,
        )
        return selected
