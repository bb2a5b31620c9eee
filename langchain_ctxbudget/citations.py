"""Citations in an LCEL chain: numbered documents fenced once, and the answer checked.

The numbers come from selection alone (`ContextBudgetCompressor`, `ContextBudgetTransformer`,
`ContextBudgetRetriever` or ``ContextBudgetRunnable(output="context+sources")``): each
selected `Document` carries ``metadata["citation"]`` and its rendered ``[n]`` source as
``page_content``. `fence_numbered` puts such documents in one fence by the core's
`ctxbudget.fence_sources`, and `CheckCitations` compares an answer with their numbers by
`ctxbudget.check_numbered`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from langchain_core.callbacks import CallbackManagerForChainRun
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableSerializable

from ctxbudget import CitationCheck, FencedSource, InputError, check_numbered, fence_sources
from langchain_ctxbudget._langchain import documents_of

__all__ = ["CITATION_KEY", "FENCE_KEY", "CheckCitations", "citation_of", "fence_numbered"]

CITATION_KEY: Final = "citation"
"""The metadata key of a selected document's number: the ``[n]`` its source shows."""
FENCE_KEY: Final = "fence"
"""The metadata key of what opens the fence a selected document was chosen for (its tag and
untrusted-data notice), so a later step fences it as its selection would."""


def citation_of(index: int, document: Document) -> int:
    """The number `document` was selected as; `InputError` when it carries none."""
    n = document.metadata.get(CITATION_KEY)
    if not isinstance(n, int) or isinstance(n, bool):
        raise InputError(
            f"documents[{index}] has no int metadata[{CITATION_KEY!r}] (got {n!r}): only "
            "documents selected by a ctxbudget component carry the number their source shows"
        )
    return n


def fence_numbered(documents: Sequence[Document]) -> str:
    """Selected documents, which already carry their ``[n]`` headers, as one fenced block
    with their numbers unchanged (no header rendered twice).

    Each must be a selected source as its component returned it: page content unchanged, a
    number used once, all from one selection. `InputError` otherwise, naming the document:
    a number is never reassigned.
    """
    sources: list[FencedSource] = []
    for index, document in enumerate(documents):
        n = citation_of(index, document)
        opening = document.metadata.get(FENCE_KEY)
        if not isinstance(opening, str):
            raise InputError(
                f"documents[{index}] is source [{n}] but has no metadata[{FENCE_KEY!r}]: pass "
                "documents as a ctxbudget component selected them"
            )
        sources.append(FencedSource(n, opening, document.page_content))
    try:
        return fence_sources(sources)
    except InputError as error:
        raise InputError(
            f"the numbered documents cannot be fenced as they are: {error}. Pass the documents "
            "of one selection, unchanged (a step that edits page_content or merges two "
            "retrievers' results must come before the ctxbudget component)"
        ) from None


def _answer_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return value.text
    raise InputError(
        f"the answer must be a str or a message (the chat model's AIMessage), but got "
        f"{type(value).__name__}"
    )


class CheckCitations(RunnableSerializable[Mapping[str, Any], dict[str, Any]]):
    """Checks the model's answer against the sources it was shown, in the chain.

    Takes a dict holding the answer (an `AIMessage` or str) and the selected source
    documents (``ContextBudgetRunnable(output="context+sources")``'s ``"sources"``), and
    returns the same dict plus ``"citations"``: a `ctxbudget.CitationCheck` (numbers cited,
    numbers that point nowhere, sources never cited).

    >>> from langchain_core.documents import Document
    >>> source = Document("[1] Refunds\\n5 days.", metadata={"citation": 1})
    >>> CheckCitations().invoke({"answer": "See [2].", "sources": [source]})["citations"].unknown
    (2,)
    """

    answer_key: str = "answer"
    """The input key of the model's answer."""
    sources_key: str = "sources"
    """The input key of the source documents."""
    output_key: str = "citations"
    """The output key of the check."""

    def invoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """`input` with the citation check of its answer added."""
        return self._call_with_config(self._check, input, config)

    def _check(
        self,
        input: Mapping[str, Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> dict[str, Any]:
        if not isinstance(input, Mapping):
            raise InputError(
                f"CheckCitations takes a dict with {self.answer_key!r} and {self.sources_key!r}, "
                f"but got {type(input).__name__}"
            )
        missing = [key for key in (self.answer_key, self.sources_key) if key not in input]
        if missing:
            raise InputError(
                f"CheckCitations needs the key(s) {', '.join(map(repr, missing))}; got "
                f"{', '.join(map(repr, input)) or 'none'}: assign the answer and keep the "
                "sources, e.g. RunnablePassthrough.assign(answer=prompt | model)"
            )
        sources = documents_of(
            input[self.sources_key],
            name=self.sources_key,
            origin="the sources a ctxbudget component selected",
        )
        numbers = [citation_of(index, document) for index, document in enumerate(sources)]
        check: CitationCheck = check_numbered(_answer_text(input[self.answer_key]), numbers)
        return {**input, self.output_key: check}
