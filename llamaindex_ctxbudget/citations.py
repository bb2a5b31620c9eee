"""An engine's answer checked against the sources it was shown, by the numbers they showed.

`ContextBudgetPostprocessor` returns each source as a node whose text is the source in a
fence of its own, ``[n]`` header included; the node reaches ``response.source_nodes``
whatever LlamaIndex's synthesizer does with it (and a later postprocessor that builds new
`NodeWithScore` objects keeps the node). The number a node was shown under is read back
from that text by the core's `ctxbudget.read_fenced`, never from metadata a later step
could change: a node whose text no longer reads as a fenced source was sent without a
number (as untrusted data) and can be cited by none.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    PydanticResponse,
    StreamingResponse,
)
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.core.schema import MetadataMode, NodeWithScore

from ctxbudget import CitationCheck, InputError, check_numbered, read_fenced

__all__ = ["check_response_citations", "source_numbers"]


def source_numbers(nodes: Sequence[NodeWithScore]) -> list[int]:
    """The number each of `nodes` was shown to the LLM under, in order; a node sent without
    one (its text is no fenced source) is left out."""
    numbers: list[int] = []
    for node in nodes:
        read = read_fenced(node.node.get_content(metadata_mode=MetadataMode.LLM))
        if read is not None:
            numbers.append(read.n)
    return numbers


def _text(response: RESPONSE_TYPE | AgentChatResponse) -> str:
    if isinstance(response, StreamingResponse | PydanticResponse):
        text = response.get_response().response  # reads a stream to its end, as str() does
    elif isinstance(response, AsyncStreamingResponse):
        text = response.response_txt
    else:
        text = response.response
    if text is None:
        raise InputError(
            "the response has no text yet: for an async streaming response, check the "
            "response that `await response.get_response()` returns"
        )
    return text


def check_response_citations(response: RESPONSE_TYPE | AgentChatResponse) -> CitationCheck:
    """The ``[n]`` citations of a query engine's (or chat engine's) answer against the
    numbers its ``source_nodes`` were shown under (`ctxbudget.CitationCheck`).

    >>> check_response_citations(engine.query("How long?")).unknown  # doctest: +SKIP
    ()
    """
    text = _text(response)
    numbers = source_numbers(response.source_nodes)
    if response.source_nodes and not numbers:
        raise InputError(
            f"none of the response's {len(response.source_nodes)} source nodes was shown with "
            "a number: add ContextBudgetPostprocessor to the engine's node_postprocessors"
        )
    return check_numbered(text, numbers)
