"""`TokenCounter`: count and scan nodes once, at ingest, so queries never do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from ctxbudget import Tokenizer, get_tokenizer, scan_for_instructions
from llamaindex_ctxbudget._convert import (
    INGEST_KEYS,
    ORDINAL_KEY,
    TOKENIZER_KEY,
    TOKENS_KEY,
    WARNINGS_KEY,
)

__all__ = ["TokenCounter"]


class TokenCounter(TransformComponent):
    """An `IngestionPipeline` step that stores, in each node's metadata, its token count,
    the instruction-like text found in it (a parse warning shown in its source header)
    and its position in its source document.

    The keys (``ctxbudget_tokens``, ``ctxbudget_tokenizer``, ``ctxbudget_ordinal``,
    ``ctxbudget_parse_warnings``) are excluded from LLM and embedding text. The
    postprocessor trusts the count when its assembler uses the same tokenizer, so a query
    never tokenizes a node on its own. Put it last, after the node parser and anything
    that changes node text. Picklable for ``pipeline.run(num_workers=...)`` when the
    tokenizer is a name (or a picklable `Tokenizer`); ordinals count the nodes of each
    document within one worker's batch, which holds whole documents when the node parser
    runs in the same pipeline.

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
            node.metadata[TOKENS_KEY] = tokenizer.count(text)
            node.metadata[TOKENIZER_KEY] = tokenizer.name
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
