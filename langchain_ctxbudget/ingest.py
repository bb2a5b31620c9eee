"""`TokenCountTransformer`: token counts stored at ingest, so requests need not count again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document

from ctxbudget import Tokenizer, get_tokenizer, ingest_metadata
from langchain_ctxbudget._langchain import documents_of

__all__ = ["TokenCountTransformer"]


class TokenCountTransformer(BaseDocumentTransformer):
    """Stores each document's token count in its metadata, as ctxbudget's ingest writes it.

    Returns new Documents whose metadata adds ``ctxbudget_tokens``, ``ctxbudget_tokenizer``
    and ``ctxbudget_digest`` (`ctxbudget.ingest_metadata`: flat values every vector store
    keeps). A request with the same tokenizer then uses the count instead of counting the
    text; a count made for another text or tokenizer, or any other count in metadata, is
    ignored and the text counted. Run it after splitting, before the vector store::

        chunks = TokenCountTransformer("gpt-4o").transform_documents(splitter.split_documents(docs))
    """

    def __init__(self, tokenizer: str | Tokenizer) -> None:
        """`tokenizer`: the one requests count with (the assembler's), a name or a `Tokenizer`."""
        if isinstance(tokenizer, str):
            tokenizer = get_tokenizer(tokenizer)
        elif not isinstance(tokenizer, Tokenizer):
            raise TypeError(
                f"tokenizer must be a model/encoding name or a Tokenizer, not "
                f"{type(tokenizer).__name__}; wrap a function in CallableTokenizer(fn, name=...)"
            )
        self.tokenizer = tokenizer

    def transform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> Sequence[Document]:
        """The documents with their counts; the inputs are not changed."""
        if kwargs:
            raise TypeError(
                f"transform_documents() got unexpected keyword argument(s) "
                f"{', '.join(map(repr, kwargs))}; it takes none"
            )
        return [
            Document(
                page_content=document.page_content,
                metadata={
                    **document.metadata,
                    **ingest_metadata(document.page_content, self.tokenizer),
                },
                id=document.id,
            )
            for document in documents_of(documents)
        ]
