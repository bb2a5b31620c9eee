"""LlamaIndex: ``response.source_nodes`` carry the number the LLM saw, and the answer is checked
against them; on a real `VectorStoreIndex` query engine, in every response mode."""

from __future__ import annotations

import pytest
from llama_index.core import Document, VectorStoreIndex, get_response_synthesizer
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode

from ctxbudget import ContextAssembler, InputError
from llamaindex_ctxbudget import (
    ContextBudgetPostprocessor,
    check_response_citations,
    source_numbers,
    to_chunk,
)
from tests.support.llamaindex_stack import (
    ListPostprocessor,
    RecordingLLM,
    build_index,
    numbers,
    query_engine,
    recording_llm,
)

MODES = [
    "compact",
    "refine",
    "tree_summarize",
    "simple_summarize",
    "accumulate",
    "compact_accumulate",
]


def _shown(llm: RecordingLLM) -> set[int]:
    """Every source number the LLM's prompts showed."""
    return {n for prompt in llm.prompts for n in numbers(prompt)}


@pytest.mark.parametrize("mode", MODES)
def test_source_nodes_carry_the_numbers_the_llm_saw(mode: str) -> None:
    llm = recording_llm(window=2_000)
    llm.answer = "See [1]."
    response = query_engine(llm, mode, max_tokens=600).query("When do the warehouses open?")
    assert set(source_numbers(response.source_nodes)) == _shown(llm)
    assert [n.node.metadata["citation"] for n in response.source_nodes] == source_numbers(
        response.source_nodes
    )


@pytest.mark.parametrize("mode", MODES)
def test_response_citations_are_checked_against_the_source_nodes(mode: str) -> None:
    llm = recording_llm(window=2_000)
    llm.answer = "Site 1 opens at 7 [1]; also [99]."
    response = query_engine(llm, mode, max_tokens=600).query("When do the warehouses open?")
    check = check_response_citations(response)
    assert check.cited == (1, 99)
    assert check.unknown == (99,)
    assert set(check.uncited) == _shown(llm) - {1}


def test_response_citations_after_a_reranker_keep_the_numbers_shown() -> None:
    llm = recording_llm(window=2_000)
    llm.answer = "[1] [2] [3]"
    later = ListPostprocessor(operation="top_n", top_n=2)
    response = query_engine(llm, "compact", max_tokens=600, later=later).query(
        "When do the warehouses open?"
    )
    check = check_response_citations(response)
    assert set(source_numbers(response.source_nodes)) == _shown(llm)
    assert len(_shown(llm)) == 2
    assert set(check.unknown) == {1, 2, 3} - _shown(llm)


def test_response_citations_with_llamaindexs_own_prompt_helper() -> None:
    llm = recording_llm(window=2_000)
    llm.answer = "[2]"
    response = query_engine(llm, "compact", ours=False, max_tokens=600).query(
        "When do the warehouses open?"
    )
    check = check_response_citations(response)
    assert set(check.uncited) | set(check.cited) == _shown(llm)


def test_source_node_whose_text_was_rewritten_has_no_number() -> None:
    llm = recording_llm(window=2_000)
    response = query_engine(llm, "compact", max_tokens=600).query("When do the warehouses open?")
    first = response.source_nodes[0]
    assert isinstance(first.node, TextNode)
    first.node.text = "Rewritten by a later step."
    assert first.node.metadata["citation"] not in source_numbers(response.source_nodes)


def test_response_without_the_postprocessor_is_refused() -> None:
    nodes = [NodeWithScore(node=TextNode(text="Plain text."), score=1.0)]
    with pytest.raises(InputError, match="add ContextBudgetPostprocessor"):
        check_response_citations(Response(response="[1]", source_nodes=nodes))


def test_response_without_text_is_refused() -> None:
    with pytest.raises(InputError, match="the response has no text yet"):
        check_response_citations(Response(response=None, source_nodes=[]))


def test_streaming_response_is_checked_once_read() -> None:
    llm = recording_llm(None, window=2_000)  # streams its prompt back: it cites every source
    synthesizer = get_response_synthesizer(llm=llm, streaming=True)
    first = ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm, max_tokens=600)
    engine = build_index().as_query_engine(
        llm=llm, node_postprocessors=[first], response_synthesizer=synthesizer
    )
    response = engine.query("When do the warehouses open?")
    assert isinstance(response, StreamingResponse)
    check = check_response_citations(response)
    assert check.cited == tuple(sorted(source_numbers(response.source_nodes)))
    assert check.uncited == ()


def test_response_without_source_nodes_cites_nothing_known() -> None:
    check = check_response_citations(Response(response="[1]", source_nodes=[]))
    assert check.unknown == (1,)


# --- heading paths from MarkdownNodeParser ----------------------------------------------------

_HANDBOOK_MD = (
    "# Security handbook\nWho owns security.\n\n## Keys\nRotate keys every 90 days.\n\n"
    "### Storage\nKeep keys in the vault."
)


def _handbook_nodes(**metadata: str) -> list[BaseNode]:
    document = Document(text=_HANDBOOK_MD, metadata=metadata)
    return MarkdownNodeParser().get_nodes_from_documents([document])


def test_markdown_header_path_includes_the_sections_own_heading_in_the_prompt() -> None:
    llm = recording_llm(window=2_000)
    postprocessor = ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm)
    engine = VectorStoreIndex(_handbook_nodes()).as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[postprocessor]
    )
    engine.query("Where are keys kept?")
    [prompt] = llm.prompts
    headers = {line.partition(" ")[2] for line in prompt.splitlines() if numbers(line)}
    assert headers == {
        "Security handbook",
        "Security handbook > Keys",
        "Security handbook > Keys > Storage",
    }


def test_markdown_header_path_under_a_title_does_not_repeat_it() -> None:
    chunks = [to_chunk(node) for node in _handbook_nodes(title="Security handbook")]
    assert [c.heading_path for c in chunks] == [
        ("Security handbook",),
        ("Security handbook", "Keys"),
        ("Security handbook", "Keys", "Storage"),
    ]
    selection = ContextAssembler(tokenizer="o200k_base").select_sources(chunks)
    assert [s.text.partition("\n")[0] for s in selection.sources] == [
        "[1] Security handbook",
        "[2] Security handbook — Keys",
        "[3] Security handbook — Keys > Storage",
    ]


def test_header_path_of_a_node_not_opening_with_a_heading_is_kept_as_is() -> None:
    node = TextNode(text="Plain text.", metadata={"header_path": "/A/B/"})
    assert to_chunk(node).heading_path == ("A", "B")


def test_header_path_as_a_list_is_kept_as_is() -> None:
    node = TextNode(text="# C\nText.", metadata={"header_path": ["A", "B"]})
    assert to_chunk(node).heading_path == ("A", "B")
