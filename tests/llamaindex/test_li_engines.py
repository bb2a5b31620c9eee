"""End to end on the real framework: what the LLM receives from query and chat engines.

A `VectorStoreIndex` with `MockEmbedding`, an LLM that records every prompt, the
postprocessor and the prompt helper; assertions are on the recorded prompts: the
budget, whole sources, numbering, one fence per call, forbidden text absent.
"""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import Document, Settings, VectorStoreIndex, get_response_synthesizer
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.response_synthesizers import ResponseMode

from ctxbudget import ContextBudgetError, Principal, TiktokenTokenizer
from llamaindex_ctxbudget import (
    ContextBudgetPostprocessor,
    ContextBudgetPromptHelper,
    ContextPackedEvent,
    as_principal,
)
from tests.llamaindex.li_support import FENCE_OPEN, RecordingLLM, fenced, numbers, recording_llm

FACTS = [
    "EU customers may return unworn items within 60 days of delivery.",
    "Refunds reach the original card within 14 days of receipt.",
    "Store credit never expires and can be used online or in store.",
    "Exchanges for a different size ship free of charge within the EU.",
    "Gift cards cannot be refunded or exchanged for cash.",
]
SECRET = "Salary bands for 2025 are reviewed by the board in April."
MODES = ["compact", "refine", "tree_summarize", "simple_summarize"]


def build_index() -> VectorStoreIndex:
    documents = [
        Document(text=fact, doc_id=f"policy-{i}", metadata={"title": f"Policy {i}"})
        for i, fact in enumerate(FACTS)
    ]
    documents.append(
        Document(text=SECRET, doc_id="hr", metadata={"tenant": "acme", "groups": ["hr"]})
    )
    return VectorStoreIndex.from_documents(documents)


def engine(
    index: VectorStoreIndex, llm: RecordingLLM, mode: str, max_tokens: int | None = None
) -> BaseQueryEngine:
    synthesizer = get_response_synthesizer(
        llm=llm,
        response_mode=ResponseMode(mode),
        prompt_helper=ContextBudgetPromptHelper.from_llm(llm, tokenizer="o200k_base"),
    )
    return index.as_query_engine(
        llm=llm,
        similarity_top_k=len(FACTS) + 1,
        node_postprocessors=[
            ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm, max_tokens=max_tokens)
        ],
        response_synthesizer=synthesizer,
    )


def assert_sources_reached_the_model(prompts: list[str], o200k: TiktokenTokenizer) -> None:
    """Each prompt: within the window, one fence, whole sources numbered in order; all
    prompts together: every public fact once, numbered 1..k, the secret nowhere."""
    seen: list[int] = []
    for prompt in prompts:
        assert o200k.count(prompt) <= 3_900 - 5
        block = fenced(prompt)
        shown = numbers(block)
        assert shown == sorted(shown)
        seen += shown
        assert SECRET not in prompt
    assert seen == list(range(1, len(FACTS) + 1))
    for fact in FACTS:
        assert sum(fenced(p).count(fact) for p in prompts) == 1


@pytest.mark.parametrize("mode", MODES)
def test_query_engine_prompts_hold_whole_numbered_fenced_sources(
    mode: str, o200k: TiktokenTokenizer
) -> None:
    llm = recording_llm(5)
    response = engine(build_index(), llm, mode).query("What is the returns policy?")
    assert llm.prompts
    assert_sources_reached_the_model(llm.prompts, o200k)
    assert [n.metadata["citation"] for n in response.source_nodes] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("mode", MODES)
def test_query_engine_async_matches_sync(mode: str, o200k: TiktokenTokenizer) -> None:
    sync_llm, async_llm = recording_llm(5), recording_llm(5)
    index = build_index()
    engine(index, sync_llm, mode).query("What is the returns policy?")
    asyncio.run(engine(index, async_llm, mode).aquery("What is the returns policy?"))
    assert_sources_reached_the_model(async_llm.prompts, o200k)
    assert sorted(async_llm.prompts) == sorted(sync_llm.prompts)


def test_query_engine_principal_per_query_sees_its_sources() -> None:
    llm = recording_llm(5)
    query_engine = engine(build_index(), llm, "compact")
    with as_principal(Principal(tenant="acme", groups=frozenset({"hr"}))):
        query_engine.query("salaries?")
    query_engine.query("salaries?")
    assert SECRET in llm.prompts[0]
    assert SECRET not in llm.prompts[1]


def test_prompt_helper_via_settings(
    o200k: TiktokenTokenizer, offline_settings: RecordingLLM
) -> None:
    Settings.prompt_helper = ContextBudgetPromptHelper.from_llm(
        Settings.llm, tokenizer="o200k_base"
    )
    build_index().as_query_engine(
        similarity_top_k=len(FACTS) + 1,
        response_mode="refine",
        node_postprocessors=[ContextBudgetPostprocessor(tokenizer="o200k_base")],
    ).query("What is the returns policy?")
    assert len(offline_settings.prompts) == len(FACTS)
    assert_sources_reached_the_model(offline_settings.prompts, o200k)


def test_postprocessor_alone_fences_a_single_call_prompt(o200k: TiktokenTokenizer) -> None:
    # LlamaIndex's own PromptHelper joins the node texts: the first opens the fence, the
    # last closes it.
    llm = recording_llm(5)
    build_index().as_query_engine(
        llm=llm,
        similarity_top_k=len(FACTS) + 1,
        node_postprocessors=[ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm)],
    ).query("What is the returns policy?")
    assert_sources_reached_the_model(llm.prompts, o200k)


def test_refine_with_a_growing_answer_repacks_and_ends(
    o200k: TiktokenTokenizer, events: list[BaseEvent]
) -> None:
    # Long answers leave less room each refine step: pieces are split again, never cut,
    # and the refine loop ends after one call per source at most.
    llm = recording_llm(125, window=340, reserve=60)
    query_engine = engine(build_index(), llm, "compact", max_tokens=1_000)
    query_engine.query("What is the returns policy?")
    splits = [e for e in events if isinstance(e, ContextPackedEvent) and len(e.pieces) > 1]
    assert len(splits) >= 2  # compact's first packing, then a refine step's repacking
    assert 1 < len(llm.prompts) <= len(FACTS)
    shown: list[int] = []
    for prompt in llm.prompts:
        assert o200k.count(prompt) <= 340 - 60
        shown += numbers(fenced(prompt))
    assert sorted(shown) == list(range(1, len(FACTS) + 1))


# --- chat engines after long conversations -------------------------------------------------

CHAT_ENGINES = [ContextChatEngine, CondensePlusContextChatEngine]
RAMBLING = " Some background about my order and what happened with it." * 12


def chat_engine(
    cls: type[ContextChatEngine | CondensePlusContextChatEngine],
    llm: RecordingLLM,
    history: int,
    o200k: TiktokenTokenizer,
) -> ContextChatEngine | CondensePlusContextChatEngine:
    # A memory that keeps `history` tokens of recent turns. (The default Memory does the
    # same over an aiosqlite store that leaks connections, which pytest turns into errors.)
    memory = ChatMemoryBuffer.from_defaults(token_limit=history, tokenizer_fn=o200k.encoding.encode)
    return cls.from_defaults(
        build_index().as_retriever(similarity_top_k=3),
        llm=llm,
        memory=memory,
        node_postprocessors=[ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm)],
    )


def chat(engine: ContextChatEngine | CondensePlusContextChatEngine, turns: int) -> None:
    for turn in range(turns):
        engine.chat(f"Question {turn}: how do returns work?{RAMBLING}")


@pytest.mark.parametrize("cls", CHAT_ENGINES)
def test_chat_engine_without_our_helper_runs_out_of_room(
    cls: type[ContextChatEngine | CondensePlusContextChatEngine], o200k: TiktokenTokenizer
) -> None:
    # The control: LlamaIndex's own helper, same engine, same conversation as below.
    llm = recording_llm(5, window=4_096, reserve=1_024)
    Settings.prompt_helper = PromptHelper.from_llm_metadata(
        llm.metadata, tokenizer=o200k.encoding.encode
    )
    with pytest.raises(ValueError, match=r"Chunk size -\d+ is not positive"):
        chat(chat_engine(cls, llm, 2_600, o200k), 50)


@pytest.mark.parametrize("cls", CHAT_ENGINES)
def test_chat_engine_fits_sources_after_50_turns(
    cls: type[ContextChatEngine | CondensePlusContextChatEngine], o200k: TiktokenTokenizer
) -> None:
    llm = recording_llm(5, window=4_096, reserve=1_024)
    Settings.prompt_helper = ContextBudgetPromptHelper.from_llm(llm, tokenizer="o200k_base")
    chat(chat_engine(cls, llm, 2_600, o200k), 50)
    for prompt in llm.prompts:
        assert o200k.count(prompt) <= 4_096 - 1_024
        assert SECRET not in prompt
    answers = [p for p in llm.prompts if FENCE_OPEN in p]
    # Turns whose history left too little room had every source dropped whole (reported).
    assert len(answers) >= 40
    for prompt in answers:
        shown = numbers(fenced(prompt))
        assert shown == sorted(shown)
        assert set(shown) <= {1, 2, 3}


def resume(engine: ContextChatEngine | CondensePlusContextChatEngine) -> None:
    """One question after a stored 50-turn conversation."""
    earlier = [
        ChatMessage(role=role, content=f"Turn {turn}.{RAMBLING}")
        for turn in range(50)
        for role in (MessageRole.USER, MessageRole.ASSISTANT)
    ]
    engine.chat("And the refund?", chat_history=earlier)


@pytest.mark.parametrize("cls", CHAT_ENGINES)
def test_resumed_chat_without_our_helper_has_negative_room(
    cls: type[ContextChatEngine | CondensePlusContextChatEngine], o200k: TiktokenTokenizer
) -> None:
    # The control for the test below: LlamaIndex's upstream issue 16235.
    llm = recording_llm(5, window=4_096, reserve=1_024)
    Settings.prompt_helper = PromptHelper.from_llm_metadata(
        llm.metadata, tokenizer=o200k.encoding.encode
    )
    with pytest.raises(ValueError, match=r"Calculated available context size -\d+ was not"):
        resume(chat_engine(cls, llm, 3_000, o200k))


@pytest.mark.parametrize("cls", CHAT_ENGINES)
def test_resumed_chat_with_no_room_left_says_what_to_shorten(
    cls: type[ContextChatEngine | CondensePlusContextChatEngine], o200k: TiktokenTokenizer
) -> None:
    # The history alone fills what num_output leaves: nothing can fit, and the error says so.
    llm = recording_llm(5, window=4_096, reserve=1_024)
    Settings.prompt_helper = ContextBudgetPromptHelper.from_llm(llm, tokenizer="o200k_base")
    with pytest.raises(ContextBudgetError, match=r"shorten the chat history") as error:
        resume(chat_engine(cls, llm, 3_000, o200k))
    assert error.value.claimant == "template"
    assert error.value.left == 4_096


@pytest.mark.parametrize("cls", CHAT_ENGINES)
def test_chat_engine_with_no_room_left_says_what_to_shorten(
    cls: type[ContextChatEngine | CondensePlusContextChatEngine], o200k: TiktokenTokenizer
) -> None:
    # The history alone fills what num_output leaves: nothing can fit, and the error says so.
    llm = recording_llm(5, window=4_096, reserve=1_024)
    Settings.prompt_helper = ContextBudgetPromptHelper.from_llm(llm, tokenizer="o200k_base")
    with pytest.raises(ContextBudgetError, match=r"shorten the chat history") as error:
        chat(chat_engine(cls, llm, 3_000, o200k), 50)
    assert error.value.claimant == "template"
    assert error.value.left == 4_096
