"""`TokenCounter`: count and scan nodes once, at ingest, so queries never do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from ctxbudget import Tokenizer, get_tokenizer, ingest_metadata, scan_for_instructions
from llamaindex_ctxbudget._convert import INGEST_KEYS, ORDINAL_KEY, WARNINGS_KEY

__all__ = ["TokenCounter"]


class TokenCounter(TransformComponent):
    """An `IngestionPipeline` step that stores, in each node's metadata, its token count,
    the instruction-like text found in it (a parse warning shown in its source header)
    and its position in its source document.

    The count is stored as the core's ingest writes it (`ctxbudget.ingest_metadata`:
    ``ctxbudget_tokens`` beside the tokenizer's name and a digest of the text), so a
    query trusts it only for this very text and tokenizer: a count a document set
    itself, or one left from before the text changed, is recounted. These keys and
    ``ctxbudget_ordinal``, ``ctxbudget_parse_warnings`` are excluded from LLM and
    embedding text. Put it last, after the node parser and anything that changes node
    text. Picklable for ``pipeline.run(num_workers=...)`` when the tokenizer is a name
    (or a picklable `Tokenizer`); ordinals count the nodes of each document within one
    worker's batch, which holds whole documents when the node parser runs in the same
    pipeline.

    >>> steps = [SentenceSplitter(), TokenCounter(tokenizer="gpt-4o")]  # doctest: +SKIP
    >>> IngestionPipeline(transformations=steps).run(documents=docs)  # doctest: +SKIP
    """

    tokenizer: str | Tokenizer = Field(
        description="The model's tokenizer: a model or encoding name, or a ctxbudget Tokenizer."
    )

    @classmethod
    def class_name(cls) -> str:
        return "CtxBudgetTokenCounter"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Annotate `nodes` in place (as LlamaIndex transformations do) and return them."""
        tokenizer = (
            get_tokenizer(self.tokenizer) if isinstance(self.tokenizer, str) else self.tokenizer
        )
        seen: dict[str, int] = {}
        for node in nodes:
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            document = node.ref_doc_id or node.node_id
            seen[document] = seen.get(document, -1) + 1
            node.metadata.update(ingest_metadata(text, tokenizer))
            node.metadata[ORDINAL_KEY] = seen[document]
            warnings = scan_for_instructions(text)
            if warnings:
                node.metadata[WARNINGS_KEY] = "\n".join(warnings)
            else:
                node.metadata.pop(WARNINGS_KEY, None)
            node.excluded_llm_metadata_keys = _with(node.excluded_llm_metadata_keys)
            node.excluded_embed_metadata_keys = _with(node.excluded_embed_metadata_keys)
        return nodes


def _with(keys: list[str]) -> list[str]:
    """`keys` and the ingest keys, each once, in order."""
    return [*keys, *(k for k in INGEST_KEYS if k not in keys)]
