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
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, TextNode
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import BaseDocumentStore

from ctxbudget import (
    NO_SCOPE,
    Budget,
    ContextAssembler,
    ContextBudgetError,
    InputError,
    NoScope,
    Principal,
    Selection,
    Source,
    SourceOptions,
    Tokenizer,
    principal_for_call,
)
from llamaindex_ctxbudget._config import budget_for, build_assembler, num_output_of
from llamaindex_ctxbudget._convert import MetadataMapping, to_chunk
from llamaindex_ctxbudget._room import default_packing_room
from llamaindex_ctxbudget.events import SourcesSelectedEvent, dispatcher
from llamaindex_ctxbudget.loader import DocstoreLoader

__all__ = ["CitedNode", "ContextBudgetPostprocessor", "as_principal"]

_PRINCIPAL: ContextVar[Principal | NoScope | None] = ContextVar(
    "ctxbudget_principal", default=NO_SCOPE
)


@contextmanager
def as_principal(principal: Principal | None) -> Iterator[None]:
    """Answer the queries run inside this block for `principal`; None is the anonymous
    caller, who sees only unrestricted sources.

    LlamaIndex passes a postprocessor only the nodes and the query, so who is asking
    travels in a context variable: it follows the call into awaited coroutines, asyncio
    tasks and ``asyncio.to_thread``, and never leaks across requests. A thread started
    otherwise (``loop.run_in_executor``, a ``ThreadPoolExecutor``, ``threading.Thread``)
    does not see it: there, a postprocessor built with ``principal=`` answers for that
    principal, and one built without answers for nobody (unrestricted sources only).

    >>> with as_principal(Principal(tenant="acme")):  # doctest: +SKIP
    ...     engine.query("How long do refunds take?")
    """
    if principal is not None and not isinstance(principal, Principal):
        raise InputError(
            f"as_principal takes a ctxbudget.Principal or None, but got {type(principal).__name__}"
        )
    token = _PRINCIPAL.set(principal)
    try:
        yield
    finally:
        _PRINCIPAL.reset(token)


class CitedNode(NodeWithScore):
    """A selected source: ``node.text`` is what the model reads as ``[citation]``, inside a
    fence of its own (tag, untrusted-data notice, ``[n]`` header, content).

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
    changed), each carrying its own fence and number, so whatever reorders or filters
    them later, every source stays fenced and numbered. `ContextBudgetPromptHelper`
    merges them into one fence per LLM call.

    The budget is the assembler's (or `budget`), else derived from the LLM's context
    window and ``num_output`` (`llm`, else ``Settings.llm`` at query time); the derived
    one also leaves the room LlamaIndex's own `PromptHelper` keeps for its padding, its
    default templates with the query and a refine answer, so that it never has to cut a
    source. Who is asking: `principal`, for a postprocessor that serves one principal
    (an `as_principal` block naming anyone else is an error), else the `as_principal`
    block around the query (none: unrestricted sources only). With `docstore` (e.g.
    ``index.docstore``), a document several of whose nodes were selected (3, by default)
    is sent whole in their place when it fits and the principal may see all of it; the
    docstore also supplies a source document's metadata (its ACL and title) when a
    node's relationship does not carry it.

    >>> ContextBudgetPostprocessor(tokenizer="gpt-4o", docstore=index.docstore)  # doctest: +SKIP
    """

    principal: Principal | None = Field(
        default=None,
        description="The one principal this postprocessor serves; None: whoever each query's "
        "as_principal block names.",
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
    _docstore: BaseDocumentStore | None = PrivateAttr(default=None)
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
                (it replaces ``sources.loader``) and supplies source documents' metadata.
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
        self._docstore = docstore

    @classmethod
    def class_name(cls) -> str:
        return "ContextBudgetPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        principal = principal_for_call(self.principal, _PRINCIPAL.get(), where="as_principal")
        assembler, max_tokens = self._assembler(query_bundle, found=bool(nodes))
        name = assembler.counter.tokenizer.name
        chunks = [
            to_chunk(
                n.node, score=n.score, mapping=self.mapping, tokenizer=name, docstore=self._docstore
            )
            for n in nodes
        ]
        selection = assembler.select_sources(
            chunks, max_tokens=max_tokens, principal=principal, fence="per_source"
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

    def _assembler(
        self, query: QueryBundle | None, *, found: bool
    ) -> tuple[ContextAssembler, int | None]:
        """The assembler for this query and the sources' limit: the fixed assembler and
        `max_tokens`, else an assembler sized to the LLM's window and (unless `max_tokens`
        says otherwise) the least of its retrieved allocation and the room LlamaIndex's own
        packing leaves for sources. No room at all, while nodes were `found` and retrieval
        has a floor, is a `ContextBudgetError`."""
        if self._fixed is not None:
            return self._fixed, self.max_tokens
        llm = self._llm or Settings.llm
        metadata = llm.metadata
        num_output = num_output_of(metadata)
        key = (metadata.context_window, num_output)
        sized = self._by_window.get(key)
        if sized is None:
            built = ContextAssembler(
                tokenizer=self._tokenizer, budget=budget_for(metadata), sources=self._options
            )
            sized = self._by_window.setdefault(key, built)
        if self.max_tokens is not None:
            return sized, self.max_tokens
        retrieved = sized.budget.allocation("retrieved")
        cap = (
            sized.budget.available if retrieved is None or retrieved.max is None else retrieved.max
        )
        query_str = "" if query is None else query.query_str
        room = default_packing_room(llm, num_output, query_str, sized.counter.count)
        floor = 0 if retrieved is None else retrieved.min
        if found and room <= 0 and floor > 0:
            raise ContextBudgetError(
                "retrieved",
                floor,
                max(room, 0),
                f"the query and LlamaIndex's prompt templates leave no room for sources in "
                f"the LLM's window of {metadata.context_window:,} tokens (num_output "
                f"{num_output:,}), and retrieval's min ({floor:,}) says the request needs them; "
                "shorten the query, or use an LLM with a larger window",
            )
        return sized, max(min(cap, room), 0)


def cited_nodes(selection: Selection, nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """The selected sources as new nodes in prompt order, each node's text its source in a
    fence of its own (`Selection.framed_sources`)."""
    given = {n.node.node_id: n for n in nodes}
    return [
        _cited(source, text, given)
        for source, text in zip(selection.sources, selection.framed_sources(), strict=True)
    ]


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
