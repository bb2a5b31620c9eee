"""`ContextBudgetPromptHelper`: repack, truncate and the text splitter keep sources whole."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.node_parser.text.utils import truncate_text
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate, SelectorPromptTemplate
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools import FunctionTool
from pydantic import BaseModel

from ctxbudget import (
    ContextAssembler,
    ContextBudgetError,
    InputError,
    SourceOptions,
    TiktokenTokenizer,
)
from llamaindex_ctxbudget import (
    ContextBudgetPostprocessor,
    ContextBudgetPromptHelper,
    ContextPackedEvent,
)
from tests.llamaindex.li_support import FENCE_OPEN, fenced, numbers, recording_llm

QA = PromptTemplate("Context:\n{context_str}\nQuestion: What now?\nAnswer: ")
FACTS = [f"Fact {i}: the warehouse in city {i} opens at {i + 6} o'clock." for i in range(6)]


def helper(context_window: int = 1_000, **options: Any) -> ContextBudgetPromptHelper:
    return ContextBudgetPromptHelper(
        tokenizer="o200k_base",
        context_window=context_window,
        num_output=100,
        **options,
    )


def node_texts(*texts: str) -> list[str]:
    """The texts LlamaIndex hands the helper after `ContextBudgetPostprocessor`."""
    nodes = [
        NodeWithScore(node=TextNode(id_=f"n{i}", text=t), score=1 - i / 10)
        for i, t in enumerate(texts)
    ]
    out = ContextBudgetPostprocessor(tokenizer="o200k_base", max_tokens=10_000).postprocess_nodes(
        nodes
    )
    return [n.node.get_content() for n in out]


def packed(events: list[BaseEvent]) -> list[ContextPackedEvent]:
    return [e for e in events if isinstance(e, ContextPackedEvent)]


def test_repack_of_postprocessed_nodes_is_their_block_without_counting() -> None:
    texts = node_texts(*FACTS)
    ours = helper()
    calls = ours._assembler.counter.calls
    assert ours.repack(QA, texts) == ["\n\n".join(texts)]
    # The template is counted; the sources' count is the postprocessor's.
    assert ours._assembler.counter.calls - calls == 1


def test_repack_of_plain_texts_numbers_and_fences_them() -> None:
    [piece] = helper().repack(QA, FACTS)
    assert numbers(fenced(piece)) == [1, 2, 3, 4, 5, 6]
    for fact in FACTS:
        assert piece.count(fact) == 1


def test_repack_splits_between_whole_sources_keeping_numbers(o200k: TiktokenTokenizer) -> None:
    ours = helper(context_window=250)
    pieces = ours.repack(QA, node_texts(*FACTS))
    assert len(pieces) > 1
    assert [n for p in pieces for n in numbers(fenced(p))] == [1, 2, 3, 4, 5, 6]
    space = 250 - 100 - o200k.count(QA.format(context_str=""))
    for piece in pieces:
        assert o200k.count(piece) <= space
    assert sum(p.count(fact) for p in pieces for fact in FACTS) == len(FACTS)


def test_repack_of_a_piece_is_the_piece() -> None:
    # Refine asks again for each piece: one piece back ends its loop.
    ours = helper(context_window=250)
    for piece in ours.repack(QA, node_texts(*FACTS)):
        assert ours.repack(QA, [piece]) == [piece]


def test_repack_never_adds_overlap() -> None:
    pieces = helper(context_window=250).repack(QA, FACTS)
    assert sum(p.count(fact) for p in pieces for fact in FACTS) == len(FACTS)


def test_repack_drops_a_source_larger_than_the_space(
    events: list[BaseEvent], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="llamaindex_ctxbudget")
    pieces = helper(context_window=250).repack(QA, ["word " * 400, FACTS[0]])
    assert len(pieces) == 1
    assert FACTS[0] in pieces[0]
    assert "word word" not in pieces[0]
    [event] = packed(events)
    assert [(d.id, d.reason) for d in event.dropped] == [("text-0", "oversize")]
    assert "did not fit the" in caplog.text
    assert "text-0" in caplog.text


def test_repack_with_nothing_that_fits_is_one_empty_context(events: list[BaseEvent]) -> None:
    assert helper(context_window=250).repack(QA, ["word " * 400]) == [""]
    assert packed(events)[0].pieces == []


def test_repack_of_no_text_is_one_empty_context() -> None:
    assert helper().repack(QA, []) == [""]


def test_repack_drops_empty_and_duplicate_texts(events: list[BaseEvent]) -> None:
    [piece] = helper().repack(QA, [FACTS[0], "   ", FACTS[0]])
    assert numbers(fenced(piece)) == [1]
    reasons = {(d.id, d.reason) for d in packed(events)[0].dropped}
    assert reasons == {("text-1", "empty"), ("text-2", "duplicate")}


def test_repack_reports_pieces_by_id_and_tokens(
    events: list[BaseEvent], o200k: TiktokenTokenizer
) -> None:
    [piece] = helper().repack(QA, FACTS[:2])
    [event] = packed(events)
    assert event.pieces == [["text-0", "text-1"]]
    assert event.tokens == [o200k.count(piece)]


def test_repack_respects_the_template_tokens(o200k: TiktokenTokenizer) -> None:
    long = PromptTemplate("Rules: " + "be careful. " * 50 + "\n{context_str}")
    ours = helper(context_window=400)
    space = 400 - 100 - o200k.count(long.format(context_str=""))
    for piece in ours.repack(long, FACTS):
        assert o200k.count(piece) <= space


def test_repack_respects_the_llm_system_prompt(events: list[BaseEvent]) -> None:
    ours = helper()
    ours.repack(QA, FACTS, llm=recording_llm())
    ours.repack(QA, FACTS, llm=recording_llm().model_copy(update={"system_prompt": "Be brief."}))
    first, second = packed(events)
    assert second.space < first.space


def test_repack_counts_the_tools_a_structured_llm_adds(events: list[BaseEvent]) -> None:
    class Answer(BaseModel):
        text: str

    ours = helper()
    ours.repack(QA, FACTS, llm=recording_llm())
    ours.repack(QA, FACTS, llm=recording_llm().as_structured_llm(Answer))
    first, second = packed(events)
    assert second.space < first.space


def test_repack_counts_tools_given(events: list[BaseEvent]) -> None:
    def lookup(order: str) -> str:
        """Find an order by number."""
        return order

    ours = helper()
    ours.repack(QA, FACTS)
    ours.repack(QA, FACTS, tools=[FunctionTool.from_defaults(fn=lookup)])
    first, second = packed(events)
    assert second.space < first.space


def test_repack_counts_chat_templates_per_message(
    events: list[BaseEvent], o200k: TiktokenTokenizer
) -> None:
    chat = ChatPromptTemplate.from_messages(
        [
            ChatMessage(role=MessageRole.SYSTEM, content="Use the context: {context_str}"),
            ChatMessage(role=MessageRole.USER, content="What now?"),
        ]
    )
    helper().repack(chat, FACTS)
    expected = sum(
        o200k.count(role) + o200k.count(text) + 3
        for role, text in (("system", "Use the context: "), ("user", "What now?"))
    )
    assert packed(events)[0].space == 1_000 - 100 - expected - 5


def test_repack_selector_template_uses_the_selected_one(events: list[BaseEvent]) -> None:
    ours = helper()
    ours.repack(SelectorPromptTemplate(default_template=QA), FACTS)
    ours.repack(QA, FACTS)
    first, second = packed(events)
    assert first.space == second.space


def test_padding_is_kept_while_it_leaves_half_the_room(events: list[BaseEvent]) -> None:
    ours = helper(context_window=3_000)
    ours.repack(QA, FACTS, padding=0)
    ours.repack(QA, FACTS, padding=500)
    ours.repack(QA, FACTS, padding=5_000)
    none, some, capped = (e.space for e in packed(events))
    assert some == none - 500
    assert capped == none - none // 2


def test_chunk_size_limit_caps_the_space(events: list[BaseEvent]) -> None:
    helper(chunk_size_limit=40).repack(QA, FACTS)
    assert packed(events)[0].space == 40


def test_template_over_the_window_is_a_context_budget_error() -> None:
    long = PromptTemplate("History: " + "we talked. " * 400 + "\n{context_str}")
    with pytest.raises(ContextBudgetError, match="leave no room for sources") as error:
        helper(context_window=1_000).repack(long, FACTS)
    assert error.value.claimant == "template"
    assert error.value.needed > error.value.left == 1_000


def test_truncate_keeps_the_sources_one_call_fits(events: list[BaseEvent]) -> None:
    result = helper(context_window=250).truncate(QA, node_texts(*FACTS))
    [piece] = result
    shown = numbers(fenced(piece))
    assert shown == list(range(1, len(shown) + 1))
    assert len(shown) < len(FACTS)
    [event] = packed(events)
    assert {d.reason for d in event.dropped} == {"over_budget"}
    assert len(event.dropped) == len(FACTS) - len(shown)


def test_truncate_formats_as_its_context_not_a_list() -> None:
    # simple_summarize passes truncate's list straight into the template.
    result = helper().truncate(QA, ["\n".join(node_texts(*FACTS))])
    assert QA.format(context_str=result) == QA.format(context_str=result[0])
    assert str(result).startswith(FENCE_OPEN)


def test_truncate_with_nothing_that_fits_is_empty() -> None:
    assert helper(context_window=250).truncate(QA, ["word " * 400]) == []


def test_text_splitter_splits_between_whole_sources(o200k: TiktokenTokenizer) -> None:
    splitter = helper(context_window=250).get_text_splitter_given_prompt(QA)
    assert splitter.chunk_overlap == 0
    pieces = splitter.split_text("\n\n".join(node_texts(*FACTS)))
    assert len(pieces) > 1
    assert [n for p in pieces for n in numbers(fenced(p))] == [1, 2, 3, 4, 5, 6]
    assert truncate_text("\n\n".join(node_texts(*FACTS)), splitter) == pieces[0]


def test_text_splitter_shares_the_space_between_chunks(events: list[BaseEvent]) -> None:
    ours = helper()
    ours.get_text_splitter_given_prompt(QA, num_chunks=1).split_text(FACTS[0])
    ours.get_text_splitter_given_prompt(QA, num_chunks=3).split_text(FACTS[0])
    one, three = packed(events)
    assert three.space == one.space // 3


def test_from_llm_reads_window_and_num_output() -> None:
    ours = ContextBudgetPromptHelper.from_llm(
        recording_llm(window=8_000, reserve=700), tokenizer="o200k_base"
    )
    assert (ours.context_window, ours.num_output) == (8_000, 700)


def test_from_llm_unknown_num_output_is_llamaindex_default() -> None:
    ours = ContextBudgetPromptHelper.from_llm(recording_llm(None), tokenizer="o200k_base")
    assert ours.num_output == 256


def test_assembler_brings_its_source_options() -> None:
    assembler = ContextAssembler(tokenizer="o200k_base", sources=SourceOptions(source_format="xml"))
    [piece] = ContextBudgetPromptHelper(assembler).repack(QA, FACTS[:1])
    assert '<document index="1">' in piece


def test_tokenizer_or_assembler_is_required() -> None:
    with pytest.raises(InputError, match="pass tokenizer="):
        ContextBudgetPromptHelper()


def test_class_name() -> None:
    assert ContextBudgetPromptHelper.class_name() == "ContextBudgetPromptHelper"


def test_base_class_token_counter_counts_with_our_tokenizer(o200k: TiktokenTokenizer) -> None:
    # Any LlamaIndex code that reaches PromptHelper's own counter counts as we do (and
    # LlamaIndex's default tokenizer, a download, is never built).
    text = "Refunds take 14 days."
    assert helper()._token_counter.get_string_tokens(text) == o200k.count(text)
