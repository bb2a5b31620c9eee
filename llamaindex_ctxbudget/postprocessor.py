"""`ContextBudgetPostprocessor`: budgeted, numbered, fenced sources for query and chat engines."""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import FrameType
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.chat_engine.condense_plus_context import (
    DEFAULT_CONTEXT_PROMPT_TEMPLATE,
    DEFAULT_CONTEXT_REFINE_PROMPT_TEMPLATE,
)
from llama_index.core.chat_engine.context import DEFAULT_CONTEXT_TEMPLATE, DEFAULT_REFINE_TEMPLATE
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.llms import LLM
from llama_index.core.memory import BaseMemory
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    TextNode,
)
from llama_index.core.settings import Settings
from llama_index.core.storage.docstore.types import BaseDocumentStore
from llama_index.core.utilities.token_counting import TokenCounter as LlamaTokenCounter

from ctxbudget import (
    NO_SCOPE,
    Budget,
    ContextAssembler,
    ContextBudgetError,
    InputError,
    Principal,
    Selection,
    Source,
    SourceOptions,
    Tokenizer,
    fence_untrusted,
    principal_for_call,
    read_fenced,
    traced,
)
from ctxbudget.types import NoScope
from llamaindex_ctxbudget._config import budget_for, build_assembler, num_output_of
from llamaindex_ctxbudget._convert import NodeMetadataMapping, to_chunk
from llamaindex_ctxbudget._room import default_packing_room
from llamaindex_ctxbudget.events import SourcesSelectedEvent, dispatcher
from llamaindex_ctxbudget.loader import DocstoreLoader
from llamaindex_ctxbudget.memory import ContextBudgetMemory
from llamaindex_ctxbudget.prompt_helper import ContextBudgetPromptHelper

__all__ = ["CitedNode", "ContextBudgetPostprocessor", "FencedNode", "as_principal"]

_HISTORY_ENGINES = (ContextChatEngine, CondensePlusContextChatEngine)
"""Chat engines whose answer prompt holds the chat history beside the sources."""

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


class FencedNode(TextNode):
    """A selected source's node: its text is the source in a fence of its own. Read in any
    other shape (a later postprocessor rewrote the text, or gave it metadata the LLM sees),
    its content is sent as untrusted data in a fence of its own, without a number: never
    bare, whichever prompt helper packs it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As `TextNode`'s, whose own ``__init__`` is what takes ``metadata=`` by name."""
        super().__init__(*args, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "CtxBudgetFencedNode"

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> str:
        content = super().get_content(metadata_mode)
        if read_fenced(content) is not None:
            return content
        return fence_untrusted([content])


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
    node's relationship does not carry it. With `memory` (a chat engine's memory), the
    derived budget also leaves room for the chat history the engine will send with the
    sources (what the memory returns, in LlamaIndex's chat templates), read on every query.

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
    mapping: NodeMetadataMapping = Field(
        default_factory=NodeMetadataMapping,
        description="Which node metadata keys fill which Chunk field (ACLs included).",
    )

    _fixed: ContextAssembler | None = PrivateAttr(default=None)
    _tokenizer: Tokenizer = PrivateAttr()
    _options: SourceOptions = PrivateAttr()
    _llm: LLM | None = PrivateAttr(default=None)
    _docstore: BaseDocumentStore | None = PrivateAttr(default=None)
    _by_window: dict[tuple[int, int], ContextAssembler] = PrivateAttr(default_factory=dict)
    _memory: BaseMemory | None = PrivateAttr(default=None)

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
        mapping: NodeMetadataMapping | None = None,
        memory: BaseMemory | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        """
        Args:
            assembler: the tokenizer, source options and budget; or pass `tokenizer`
                (and optionally `sources`, `budget`) to build one.
            llm: the LLM whose window sizes the budget when no budget is given, and whose
                model name names the tokenizer when neither `tokenizer` nor `assembler` is.
            docstore: enables whole-document escalation through `DocstoreLoader`
                (it replaces ``sources.loader``) and supplies source documents' metadata.
            memory: the memory of the chat engine this postprocessor serves: the sources
                leave room for the history it returns and, for a `ContextBudgetMemory`, the
                user's message. Another memory needs `ContextBudgetPromptHelper` as
                ``Settings.prompt_helper`` (else each query is an `InputError`).
        """
        fields: dict[str, Any] = {
            "principal": principal,
            "max_tokens": max_tokens,
            "mapping": NodeMetadataMapping() if mapping is None else mapping,
            "callback_manager": callback_manager or CallbackManager(),
        }
        super().__init__(**fields)
        built = build_assembler(
            assembler, tokenizer=tokenizer, sources=sources, budget=budget, llm=llm
        )
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
        if memory is not None and (self._fixed is not None or max_tokens is not None):
            raise InputError(
                "memory= sizes the sources to what the chat history leaves of the LLM's "
                "window, and assembler=/budget=/max_tokens= fix their limit: pass one or the "
                "other (llm= and sources= go with memory=)"
            )
        self._llm = llm
        self._docstore = docstore
        self._memory = memory

    @classmethod
    def class_name(cls) -> str:
        return "ContextBudgetPostprocessor"

    @traced("ctxbudget.llamaindex.ContextBudgetPostprocessor.postprocess_nodes")
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        memory = self._memory
        engine = self._engine(inspect.currentframe())
        self._refuse_unsized_chat(engine)
        history = None if memory is None else memory.get()
        return self._select(nodes, _asked(query_bundle, memory), history, _packing_of(engine))

    @traced("ctxbudget.llamaindex.ContextBudgetPostprocessor.apostprocess_nodes")
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        memory = self._memory
        engine = self._engine(inspect.currentframe())
        self._refuse_unsized_chat(engine)
        history = None if memory is None else await memory.aget()
        # In a worker thread, as LlamaIndex runs every postprocessor's sync code from async
        # callers (a thread started this way sees the as_principal block).
        return await asyncio.to_thread(
            self._select, nodes, _asked(query_bundle, memory), history, _packing_of(engine)
        )

    def _engine(self, frame: FrameType | None) -> object | None:
        """The engine among the callers that holds this postprocessor (a query or chat
        engine's ``_node_postprocessors``), or None when it is called otherwise."""
        while frame is not None:
            engine = frame.f_locals.get("self")
            if any(p is self for p in getattr(engine, "_node_postprocessors", None) or ()):
                return engine
            frame = frame.f_back
        return None

    def _refuse_unsized_chat(self, engine: object | None) -> None:
        """An `InputError` when a chat engine that sends its history beside the sources calls
        this postprocessor, LlamaIndex's own PromptHelper packs, and the sources cannot leave
        that helper the room it needs: the postprocessor was not given the engine's memory
        (it cannot see the history), or the engine has a system prompt or templates of its
        own (the room is that of LlamaIndex's defaults). That helper would then cut a source
        out of its fence. `ContextBudgetPromptHelper` never cuts, so it needs neither."""
        if isinstance(Settings._prompt_helper, ContextBudgetPromptHelper):
            return
        if not isinstance(engine, _HISTORY_ENGINES):
            return
        name = type(engine).__name__
        if self._memory is None:
            why = "this ContextBudgetPostprocessor was not given its memory"
            fix = (
                "build the engine with memory=ContextBudgetMemory.from_defaults(...) and pass "
                "the same memory= to the postprocessor, or set"
            )
        elif _own_prompts(engine):
            why = "it has a system prompt or templates of its own, which the room is not sized for"
            fix = "set"
        else:
            return
        raise InputError(
            f"{name} sends its chat history beside the sources, and {why}, so LlamaIndex's "
            f"own PromptHelper could cut a source out of its fence: {fix} "
            "Settings.prompt_helper = ContextBudgetPromptHelper.from_llm(llm, tokenizer=...)"
        )

    def _select(
        self,
        nodes: list[NodeWithScore],
        asked: tuple[str, ...],
        history: list[ChatMessage] | None,
        packing: _Packing | None,
    ) -> list[NodeWithScore]:
        principal = principal_for_call(self.principal, _PRINCIPAL.get(), where="as_principal")
        templates = None if packing is None else packing.templates
        assembler, max_tokens = self._assembler(asked, history, templates, found=bool(nodes))
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
        if packing is not None:
            _refuse_cut(selection, asked, history, packing)
        return cited_nodes(selection, nodes)

    def _assembler(
        self,
        asked: tuple[str, ...],
        history: list[ChatMessage] | None,
        templates: tuple[BasePromptTemplate, ...] | None,
        *,
        found: bool,
    ) -> tuple[ContextAssembler, int | None]:
        """The assembler for this query and the sources' limit: the fixed assembler and
        `max_tokens`, else an assembler sized to the LLM's window and (unless `max_tokens`
        says otherwise) the least of its retrieved allocation and the room LlamaIndex's own
        packing leaves for sources beside the query and the chat `history`. No room at all,
        while nodes were `found` and retrieval has a floor, is a `ContextBudgetError`."""
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
        count = sized.counter.count
        room = min(
            default_packing_room(llm, num_output, q, count, history, templates) for q in asked
        )
        floor = 0 if retrieved is None else retrieved.min
        if found and room <= 0 and floor > 0:
            what = "the query" if history is None else "the query, the chat history"
            fix = "" if history is None else " or the memory's token_limit"
            raise ContextBudgetError(
                "retrieved",
                floor,
                max(room, 0),
                f"{what} and LlamaIndex's prompt templates leave no room for sources in the "
                f"LLM's window of {metadata.context_window:,} tokens (num_output "
                f"{num_output:,}), and retrieval's min ({floor:,}) says the request needs them; "
                f"shorten the query{fix}, or use an LLM with a larger window",
            )
        return sized, max(min(cap, room), 0)


@dataclass(frozen=True)
class _Packing:
    """How the query engine calling a postprocessor packs its sources: LlamaIndex's own
    `PromptHelper`, with the synthesizer's templates and LLM, counting with its tokenizer."""

    templates: tuple[BasePromptTemplate, ...] | None
    """None: LlamaIndex's default templates (a chat engine's, with its history)."""
    count: Callable[[str], int]
    llm: LLM


def _packing_of(engine: object | None) -> _Packing | None:
    """The packing of `engine`'s synthesizer when it is LlamaIndex's own `PromptHelper`;
    None for `ContextBudgetPromptHelper` (it never cuts) or an engine without one. A chat
    engine builds its synthesizer after postprocessing, from ``Settings.prompt_helper`` or a
    new helper counting with ``Settings.tokenizer``, with its default prompts (others are
    refused, `_refuse_unsized_chat`)."""
    if isinstance(engine, _HISTORY_ENGINES):
        chat_helper = Settings._prompt_helper
        if isinstance(chat_helper, ContextBudgetPromptHelper):
            return None
        if isinstance(chat_helper, PromptHelper):
            count = chat_helper._token_counter.get_string_tokens
        else:
            count = LlamaTokenCounter().get_string_tokens
        return _Packing(None, count, engine._llm)
    synthesizer = getattr(engine, "_response_synthesizer", None)
    helper = getattr(synthesizer, "_prompt_helper", None)
    llm = getattr(synthesizer, "_llm", None)
    if isinstance(helper, ContextBudgetPromptHelper) or not isinstance(helper, PromptHelper):
        return None
    if not isinstance(llm, LLM):
        return None
    templates = tuple(
        value
        for key, value in vars(synthesizer).items()
        if key.endswith("_template") and isinstance(value, BasePromptTemplate)
    )
    return _Packing(templates, helper._token_counter.get_string_tokens, llm)


def _refuse_cut(
    selection: Selection,
    asked: tuple[str, ...],
    history: list[ChatMessage] | None,
    packing: _Packing,
) -> None:
    """An `InputError` when LlamaIndex's own `PromptHelper`, counting with its own tokenizer
    and the synthesizer's templates, would not fit the selected sources in one call and so
    would cut one out of its fence: a `max_tokens=` or budget above its room, or a
    ``Settings.tokenizer`` that counts more than the postprocessor's tokenizer."""
    if not selection.sources:
        return
    num_output = num_output_of(packing.llm.metadata)
    room = min(
        default_packing_room(packing.llm, num_output, q, packing.count, history, packing.templates)
        for q in asked
    )
    need = packing.count("\n\n".join(selection.framed_sources()))
    if need > room:
        raise InputError(
            f"LlamaIndex's own PromptHelper packs this query engine's sources, and by its "
            f"count the {len(selection.sources)} selected need {need:,} tokens where it "
            f"leaves {max(room, 0):,} beside its templates: it would cut a source out of its "
            "fence. Pass prompt_helper=ContextBudgetPromptHelper.from_llm(llm, tokenizer=...) "
            "to get_response_synthesizer (or set it as Settings.prompt_helper), or lower the "
            "postprocessor's max_tokens/budget, or set Settings.tokenizer to the "
            "postprocessor's tokenizer"
        )


def _own_prompts(engine: ContextChatEngine | CondensePlusContextChatEngine) -> bool:
    """Whether `engine` sends a system prompt, prefix messages or templates other than
    LlamaIndex's defaults, the ones the sources' room is sized for (`_room`)."""
    if isinstance(engine, ContextChatEngine):
        templates = (engine._context_template, engine._context_refine_template)
        defaults = (DEFAULT_CONTEXT_TEMPLATE, DEFAULT_REFINE_TEMPLATE)
        extra = bool(engine._prefix_messages)
    else:
        templates = (engine._context_prompt_template, engine._context_refine_prompt_template)
        defaults = (DEFAULT_CONTEXT_PROMPT_TEMPLATE, DEFAULT_CONTEXT_REFINE_PROMPT_TEMPLATE)
        extra = bool(engine._system_prompt)
    return extra or any(
        getattr(t, "template", None) != d for t, d in zip(templates, defaults, strict=True)
    )


def _query_str(query: QueryBundle | None) -> str:
    return "" if query is None else query.query_str


def _asked(query: QueryBundle | None, memory: BaseMemory | None) -> tuple[str, ...]:
    """The queries whose room the sources leave: the retrieval query and, with a
    `ContextBudgetMemory`, the engine's user message (`last_input`), since a condense step
    retrieves with a short question while the answer call sends the message. Another memory
    shows no message, so only `ContextBudgetPromptHelper` (which never cuts) can vouch."""
    if memory is None:
        return (_query_str(query),)
    if not isinstance(memory, ContextBudgetMemory):
        if isinstance(Settings._prompt_helper, ContextBudgetPromptHelper):
            return (_query_str(query),)
        raise InputError(
            f"memory= is a {type(memory).__name__}, which does not show the user's message a "
            "chat engine sends beside the sources (a condense step retrieves with another "
            "question), so LlamaIndex's own PromptHelper could cut a source out of its fence: "
            "use ContextBudgetMemory, or set Settings.prompt_helper = "
            "ContextBudgetPromptHelper.from_llm(llm, tokenizer=...)"
        )
    return (_query_str(query), memory.last_input)


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
    node = FencedNode(
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
