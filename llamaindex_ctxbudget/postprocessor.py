"""`ContextBudgetPostprocessor`: budgeted, numbered, fenced sources for query and chat engines."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    TextNode,
)
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import BaseDocumentStore

from ctxbudget import (
    Budget,
    ContextAssembler,
    Principal,
    Selection,
    Source,
    SourceOptions,
    Tokenizer,
)
from llamaindex_ctxbudget._blocks import REGISTRY, SEPARATOR, block_of
from llamaindex_ctxbudget._config import budget_for, build_assembler, num_output_of
from llamaindex_ctxbudget._convert import MetadataMapping, to_chunk
from llamaindex_ctxbudget.events import SourcesSelectedEvent, dispatcher
from llamaindex_ctxbudget.loader import DocstoreLoader

__all__ = ["CitedNode", "ContextBudgetPostprocessor", "as_principal"]

_PRINCIPAL: ContextVar[Principal | None] = ContextVar("ctxbudget_principal", default=None)


@contextmanager
def as_principal(principal: Principal) -> Iterator[None]:
    """Answer the queries run inside this block for `principal`.

    LlamaIndex passes a postprocessor only the nodes and the query, so who is asking
    travels in a context variable: it follows the call into threads started with
    ``asyncio.to_thread`` and into awaited coroutines, and never leaks across requests.
    It takes precedence over the postprocessor's own `principal`.

    >>> with as_principal(Principal(tenant="acme")):  # doctest: +SKIP
    ...     engine.query("How long do refunds take?")
    """
    token = _PRINCIPAL.set(principal)
    try:
        yield
    finally:
        _PRINCIPAL.reset(token)


class CitedNode(NodeWithScore):
    """A selected source: ``node.text`` is what the model reads as ``[citation]``.

    ``node.metadata`` is the original node's, plus ``citation``, all excluded from LLM
    and embedding text (the ``[n]`` header already shows what matters). `originals`
    are the retrieved nodes it shows, unchanged: one, or for a document sent whole,
    every retrieved node it covers (``node.metadata["covers"]`` lists their ids).
    """

    citation: int
    originals: list[NodeWithScore]

    @classmethod
    def class_name(cls) -> str:
        return "CitedNode"


class ContextBudgetPostprocessor(BaseNodePostprocessor):
    """Selects, deduplicates, numbers and fences retrieved nodes within a token budget.

    Drop it into ``index.as_query_engine(node_postprocessors=[...])`` or a chat engine.
    The nodes it returns are new `CitedNode` objects in prompt order (inputs are never
    changed); their texts joined as LlamaIndex joins them are the core's fenced block:
    the first opens the fence with its untrusted-data notice, the last closes it. Response
    modes that make several LLM calls (refine, tree_summarize over several pieces) need
    `ContextBudgetPromptHelper` to fence each call.

    The budget is the assembler's (or `budget`), else derived from the LLM's context
    window and ``num_output`` (`llm`, else ``Settings.llm`` at query time). Who is
    asking: `as_principal` around the query, else `principal`. With `docstore` (e.g.
    ``index.docstore``), a document several of whose nodes were selected (3, by default)
    is sent whole in their place when it fits and the principal may see all of it.

    >>> ContextBudgetPostprocessor(tokenizer="gpt-4o", docstore=index.docstore)  # doctest: +SKIP
    """

    principal: Principal | None = Field(
        default=None, description="Who is asking, when no as_principal block says."
    )
    max_tokens: int | None = Field(
        default=None, description="The sources' limit; None: the budget's retrieved allocation."
    )
    mapping: MetadataMapping = Field(
        default_factory=MetadataMapping,
        description="Which node metadata keys fill which Chunk field (ACLs included).",
    )

    _fixed: ContextAssembler | None = PrivateAttr(default=None)
    _tokenizer: Tokenizer = PrivateAttr()
    _options: SourceOptions = PrivateAttr()
    _llm: LLM | None = PrivateAttr(default=None)
    _by_window: dict[tuple[int, int], ContextAssembler] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        assembler: ContextAssembler | None = None,
        *,
        tokenizer: str | Tokenizer | None = None,
        budget: Budget | None = None,
        sources: SourceOptions | None = None,
        llm: LLM | None = None,
        docstore: BaseDocumentStore | None = None,
        principal: Principal | None = None,
        max_tokens: int | None = None,
        mapping: MetadataMapping | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        """
        Args:
            assembler: the tokenizer, source options and budget; or pass `tokenizer`
                (and optionally `sources`, `budget`) to build one.
            llm: the LLM whose window sizes the budget when no budget is given.
            docstore: enables whole-document escalation through `DocstoreLoader`
                (it replaces ``sources.loader``).
        """
        fields: dict[str, Any] = {
            "principal": principal,
            "max_tokens": max_tokens,
            "mapping": MetadataMapping() if mapping is None else mapping,
            "callback_manager": callback_manager or CallbackManager(),
        }
        super().__init__(**fields)
        built = build_assembler(assembler, tokenizer=tokenizer, sources=sources, budget=budget)
        self._tokenizer = built.counter.tokenizer
        self._options = built.sources
        if docstore is not None:
            loader = DocstoreLoader(docstore, mapping=self.mapping, tokenizer=self._tokenizer.name)
            self._options = self._options.model_copy(update={"loader": loader})
            built = ContextAssembler(
                tokenizer=self._tokenizer, budget=built.budget, sources=self._options
            )
        if assembler is not None or budget is not None:
            self._fixed = built
        self._llm = llm

    @classmethod
    def class_name(cls) -> str:
        return "ContextBudgetPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        assembler = self._assembler()
        name = assembler.counter.tokenizer.name
        chunks = [
            to_chunk(n.node, score=n.score, mapping=self.mapping, tokenizer=name) for n in nodes
        ]
        scoped = _PRINCIPAL.get()
        selection = assembler.select_sources(
            chunks,
            max_tokens=self.max_tokens,
            principal=self.principal if scoped is None else scoped,
        )
        dispatcher.event(
            SourcesSelectedEvent(
                tokens=selection.tokens,
                budget=selection.budget,
                sources=[s.chunk.id for s in selection.sources],
                dropped=list(selection.dropped),
                escalated=selection.escalated,
                trimmed=selection.trimmed,
            )
        )
        return cited_nodes(selection, nodes)

    def _assembler(self) -> ContextAssembler:
        """The assembler for this query: the fixed one, else one sized to the LLM's window."""
        if self._fixed is not None:
            return self._fixed
        metadata = (self._llm or Settings.llm).metadata
        key = (metadata.context_window, num_output_of(metadata))
        found = self._by_window.get(key)
        if found is None:
            built = ContextAssembler(
                tokenizer=self._tokenizer, budget=budget_for(metadata), sources=self._options
            )
            found = self._by_window.setdefault(key, built)
        return found


def cited_nodes(selection: Selection, nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """The selected sources as new nodes in prompt order, their texts registered for
    `ContextBudgetPromptHelper`: each node's, and all of them joined as LlamaIndex joins
    them (``"\\n\\n"`` when packing, ``"\\n"`` in simple_summarize)."""
    block = block_of(selection)
    if block is None:
        return []
    texts = list(block.sources)
    texts[0] = block.open + texts[0]
    texts[-1] = texts[-1] + block.close
    for index, text in enumerate(texts):
        REGISTRY.add(text, block, [index])
    REGISTRY.add("\n".join(texts), block)
    REGISTRY.add(SEPARATOR.join(texts), block)
    given = {n.node.node_id: n for n in nodes}
    return [_cited(s, text, given) for s, text in zip(selection.sources, texts, strict=True)]


def _cited(source: Source, text: str, given: dict[str, NodeWithScore]) -> CitedNode:
    """Source `source` as a new node carrying `text`; the retrieved nodes are only read."""
    metadata: dict[str, Any]
    if source.document:
        originals = [given[i] for i in source.covers if i in given]
        scores = [o.score for o in originals if o.score is not None]
        score = max(scores) if scores else None
        # The whole document: its own metadata, as its nodes' SOURCE relationship holds it
        # (a shared SOURCE is what made them one document; covers lists input nodes only).
        document = originals[0].node.source_node
        assert document is not None
        metadata = {**copy.deepcopy(document.metadata), "covers": list(source.covers)}
        relationships: dict[NodeRelationship, Any] = {
            NodeRelationship.SOURCE: copy.deepcopy(document)
        }
        start = end = None
    else:
        original = given[source.chunk.id]
        originals, score = [original], original.score
        metadata = copy.deepcopy(original.node.metadata)
        relationships = copy.deepcopy(original.node.relationships)
        start = getattr(original.node, "start_char_idx", None)
        end = getattr(original.node, "end_char_idx", None)
    metadata["citation"] = source.n
    node = TextNode(
        id_=source.chunk.id,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=list(metadata),
        excluded_embed_metadata_keys=list(metadata),
        relationships=relationships,
        start_char_idx=start,
        end_char_idx=end,
    )
    return CitedNode(node=node, score=score, citation=source.n, originals=originals)
