"""`ContextBudgetPostprocessor`: cited nodes, budgets, principals, escalation, events."""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
from llama_index.core.prompts.default_prompt_selectors import (
    DEFAULT_REFINE_PROMPT_SEL,
    DEFAULT_TEXT_QA_PROMPT_SEL,
)
from llama_index.core.schema import (
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from ctxbudget import (
    AccessPolicy,
    Allocation,
    Budget,
    ContextAssembler,
    ContextBudgetError,
    InputError,
    Principal,
    SourceOptions,
    TiktokenTokenizer,
    read_fenced,
    select_sources,
)
from llamaindex_ctxbudget import (
    CitedNode,
    ContextBudgetPostprocessor,
    SourcesSelectedEvent,
    as_principal,
    to_chunk,
)
from tests.support.llamaindex_stack import RecordingLLM, recording_llm

ACME_HR = Principal(tenant="acme", groups=frozenset({"hr"}))


def scored(
    node_id: str,
    text: str,
    score: float,
    document: str | None = None,
    **metadata: object,
) -> NodeWithScore:
    relationships = {}
    if document is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
            node_id=document, metadata={"title": f"Doc {document}"}
        )
    node = TextNode(id_=node_id, text=text, metadata=metadata, relationships=relationships)
    return NodeWithScore(node=node, score=score)


def corpus() -> list[NodeWithScore]:
    return [
        scored("a", "EU customers may return unworn items within 60 days.", 0.9, title="Returns"),
        scored("b", "Refunds reach the card within 14 days of receipt.", 0.8, title="Refunds"),
        scored("c", "Salary bands are reviewed in April.", 0.95, tenant="acme", groups=["hr"]),
        scored("d", "Shipping to Norway takes five working days.", 0.5, title="Shipping"),
    ]


def postprocessor(**options: Any) -> ContextBudgetPostprocessor:
    return ContextBudgetPostprocessor(tokenizer="o200k_base", **options)


def selected(events: list[BaseEvent]) -> SourcesSelectedEvent:
    found = [e for e in events if isinstance(e, SourcesSelectedEvent)]
    assert len(found) == 1
    return found[0]


def test_postprocess_returns_cited_nodes_in_prompt_order() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    assert all(isinstance(n, CitedNode) for n in out)
    assert [n.metadata["citation"] for n in out] == [1, 2, 3]
    assert [n.node.node_id for n in out] == ["a", "b", "d"]


def test_postprocess_node_texts_are_the_core_framed_sources() -> None:
    nodes = corpus()
    out = postprocessor(max_tokens=1_000).postprocess_nodes(nodes)
    expected = select_sources(
        [to_chunk(n.node, score=n.score) for n in nodes],
        max_tokens=1_000,
        tokenizer="o200k_base",
        fence="per_source",
    )
    texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in out]
    assert texts == list(expected.framed_sources())
    assert "\n\n".join(texts) == expected.text


def test_postprocess_each_node_carries_its_own_fence_and_number() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    for n in out:
        found = read_fenced(n.node.get_content())
        assert found is not None
        assert found.n == n.metadata["citation"]


def test_postprocess_metadata_is_not_rendered_twice() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    node = out[1].node
    assert node.metadata == {"title": "Refunds", "citation": 2}
    assert node.get_content(metadata_mode=MetadataMode.LLM) == node.get_content()
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.get_content()


def test_postprocess_never_changes_its_inputs() -> None:
    nodes = corpus()
    before = copy.deepcopy(nodes)
    out = postprocessor().postprocess_nodes(nodes)
    assert nodes == before
    assert isinstance(out[0], CitedNode)
    assert out[0].originals[0] is nodes[0]
    out[0].node.metadata["changed"] = True
    assert "changed" not in nodes[0].node.metadata


def test_postprocess_keeps_the_score_and_relationships() -> None:
    node = scored("a", "Refunds take 14 days.", 0.7, document="returns")
    out = postprocessor().postprocess_nodes([node])
    assert out[0].score == 0.7
    assert out[0].node.ref_doc_id == "returns"


def test_postprocess_without_principal_leaves_out_restricted_nodes() -> None:
    out = postprocessor().postprocess_nodes(corpus())
    assert all("Salary" not in n.node.get_content() for n in out)


def test_postprocess_principal_at_construction_sees_its_nodes() -> None:
    out = postprocessor(principal=ACME_HR).postprocess_nodes(corpus())
    assert any("Salary" in n.node.get_content() for n in out)


def test_postprocess_principal_at_construction_refuses_another_scope() -> None:
    processor = postprocessor(principal=ACME_HR)
    with (
        as_principal(Principal(tenant="acme", groups=frozenset({"sales"}))),
        pytest.raises(InputError, match=r"as_principal names .* but this component was built for"),
    ):
        processor.postprocess_nodes(corpus())


def test_postprocess_principal_at_construction_refuses_an_anonymous_scope() -> None:
    with as_principal(None), pytest.raises(InputError, match=r"as_principal names None"):
        postprocessor(principal=ACME_HR).postprocess_nodes(corpus())


def test_postprocess_principal_at_construction_accepts_its_own_scope() -> None:
    with as_principal(ACME_HR):
        out = postprocessor(principal=ACME_HR).postprocess_nodes(corpus())
    assert any("Salary" in n.node.get_content() for n in out)


def test_as_principal_none_sees_public_nodes_only() -> None:
    with as_principal(None):
        out = postprocessor().postprocess_nodes(corpus())
    assert len(out) == 3
    assert all("Salary" not in n.node.get_content() for n in out)


def test_as_principal_nested_inner_wins_then_outer_again() -> None:
    processor = postprocessor()
    with as_principal(ACME_HR):
        with as_principal(Principal(tenant="acme", groups=frozenset({"sales"}))):
            inner = processor.postprocess_nodes(corpus())
        outer = processor.postprocess_nodes(corpus())
    assert all("Salary" not in n.node.get_content() for n in inner)
    assert any("Salary" in n.node.get_content() for n in outer)


def test_as_principal_refuses_what_is_not_a_principal() -> None:
    with (
        pytest.raises(InputError, match=r"as_principal takes a ctxbudget\.Principal or None"),
        as_principal({"tenant": "acme"}),  # type: ignore[arg-type]
    ):
        pass


def test_no_principal_required_by_the_access_policy_raises() -> None:
    processor = postprocessor(sources=SourceOptions(access=AccessPolicy(require_principal=True)))
    with pytest.raises(InputError, match="the access policy requires one"):
        processor.postprocess_nodes(corpus())


def test_postprocess_takes_a_query_bundle() -> None:
    out = postprocessor().postprocess_nodes(corpus(), query_bundle=QueryBundle("refunds?"))
    assert len(out) == 3


def test_postprocess_empty_selection_is_no_nodes(events: list[BaseEvent]) -> None:
    assert postprocessor().postprocess_nodes([]) == []
    assert selected(events).tokens == 0


def test_budget_comes_from_the_passed_llm(events: list[BaseEvent]) -> None:
    llm = recording_llm(window=8_000, reserve=1_000)
    postprocessor(llm=llm).postprocess_nodes(corpus())
    retrieved = Budget.for_context_window(8_000, reserve_output=1_000).allocation("retrieved")
    assert retrieved is not None
    assert selected(events).budget == retrieved.max


def test_budget_follows_settings_llm_at_query_time(
    events: list[BaseEvent], offline_settings: RecordingLLM
) -> None:
    processor = postprocessor()
    processor.postprocess_nodes(corpus())
    Settings.llm = recording_llm(window=16_000, reserve=2_000)
    processor.postprocess_nodes(corpus())
    first, second = (e for e in events if isinstance(e, SourcesSelectedEvent))
    assert first.budget < second.budget


def test_unknown_num_output_reserves_llamaindex_default(events: list[BaseEvent]) -> None:
    postprocessor(llm=recording_llm(None, window=8_000)).postprocess_nodes(corpus())
    retrieved = Budget.for_context_window(8_000, reserve_output=256).allocation("retrieved")
    assert retrieved is not None
    assert selected(events).budget == retrieved.max


def test_explicit_budget_is_used_whatever_the_llm(events: list[BaseEvent]) -> None:
    budget = Budget.default(total=3_000)
    postprocessor(budget=budget, llm=recording_llm(window=100_000)).postprocess_nodes(corpus())
    assert (
        selected(events).budget
        == ContextAssembler(tokenizer="o200k_base", budget=budget).select_sources([]).budget
    )


def test_assembler_brings_its_budget_and_options(events: list[BaseEvent]) -> None:
    assembler = ContextAssembler(
        tokenizer="o200k_base",
        budget=Budget.default(total=4_000),
        sources=SourceOptions(order="relevance"),
    )
    out = ContextBudgetPostprocessor(assembler).postprocess_nodes(corpus())
    assert [n.node.node_id for n in out] == ["a", "b", "d"]
    assert selected(events).budget == assembler.select_sources([]).budget


def test_max_tokens_limits_the_sources(events: list[BaseEvent]) -> None:
    out = postprocessor(max_tokens=70).postprocess_nodes(corpus())
    event = selected(events)
    assert event.budget == 70
    assert event.tokens <= 70
    assert event.trimmed
    assert len(out) < 3


def test_event_names_sources_and_drops_by_id_only(events: list[BaseEvent]) -> None:
    postprocessor().postprocess_nodes(corpus())
    event = selected(events)
    assert event.sources == ["a", "b", "d"]
    assert [(d.id, d.reason) for d in event.dropped] == [("c", "forbidden")]
    assert "Salary" not in str(event.model_dump())


def test_tokenizer_or_assembler_is_required() -> None:
    with pytest.raises(InputError, match=r"pass tokenizer= \(the model's tokenizer"):
        ContextBudgetPostprocessor()


def test_assembler_and_tokenizer_together_are_an_error() -> None:
    with pytest.raises(InputError, match="pass either assembler= or tokenizer="):
        ContextBudgetPostprocessor(ContextAssembler(tokenizer="o200k_base"), tokenizer="gpt-4o")


def test_class_names() -> None:
    assert ContextBudgetPostprocessor.class_name() == "ContextBudgetPostprocessor"
    assert CitedNode.class_name() == "CitedNode"


# --- whole-document escalation through the docstore ---------------------------------------

HANDBOOK = """# Handbook

## Holidays
Staff get 24 days of holiday a year.

## Expenses
Claims are paid within a month.

## Travel
Book trains for trips under four hours.
"""


def handbook_index(**metadata: object) -> VectorStoreIndex:
    document = Document(
        text=HANDBOOK, doc_id="handbook", metadata={"title": "Handbook", **metadata}
    )
    nodes = MarkdownNodeParser().get_nodes_from_documents([document])
    return VectorStoreIndex(nodes)


def test_docstore_sends_a_document_whole_in_place_of_its_nodes(events: list[BaseEvent]) -> None:
    index = handbook_index()
    retrieved = index.as_retriever(similarity_top_k=4).retrieve("holidays")
    out = ContextBudgetPostprocessor(
        tokenizer="o200k_base", docstore=index.docstore
    ).postprocess_nodes(retrieved)
    assert selected(events).escalated == "handbook"
    [whole] = out
    assert isinstance(whole, CitedNode)
    assert set(whole.metadata["covers"]) == {n.node.node_id for n in retrieved}
    assert whole.metadata["title"] == "Handbook"
    assert whole.node.ref_doc_id == "handbook"
    assert {id(o) for o in whole.originals} == {id(n) for n in retrieved}
    assert whole.score == max(n.score or 0 for n in retrieved)
    text = whole.node.get_content()
    assert text.index("Holidays") < text.index("Expenses") < text.index("Travel")


def test_docstore_escalation_with_an_assembler_keeps_its_budget(events: list[BaseEvent]) -> None:
    index = handbook_index()
    retrieved = index.as_retriever(similarity_top_k=4).retrieve("holidays")
    assembler = ContextAssembler(tokenizer="o200k_base", budget=Budget.default(total=3_000))
    ContextBudgetPostprocessor(assembler, docstore=index.docstore).postprocess_nodes(retrieved)
    event = selected(events)
    assert event.escalated == "handbook"
    assert event.budget == assembler.select_sources([]).budget


def test_docstore_escalation_rechecks_every_node_acl(events: list[BaseEvent]) -> None:
    document = Document(text=HANDBOOK, doc_id="handbook", metadata={"tenant": "acme"})
    nodes = MarkdownNodeParser().get_nodes_from_documents([document])
    nodes[-1].metadata["groups"] = ["travel-desk"]
    index = VectorStoreIndex(nodes)
    everything = index.as_retriever(similarity_top_k=4).retrieve("x")
    retrieved = [n for n in everything if "groups" not in n.node.metadata]
    processor = ContextBudgetPostprocessor(
        tokenizer="o200k_base", docstore=index.docstore, principal=Principal(tenant="acme")
    )
    out = processor.postprocess_nodes(retrieved)
    assert selected(events).escalated is None
    assert all("Book trains" not in n.node.get_content() for n in out)
    assert len(out) == len(retrieved)


# --- which principal, on every path a query takes -------------------------------------------

ACME = Principal(tenant="acme", groups=frozenset({"staff"}))
GLOBEX = Principal(tenant="globex", groups=frozenset({"staff"}))
PLANS = {
    "public": "The canteen opens at noon zqpublic.",
    "acme": "Acme plans a merger zqacme.",
    "globex": "Globex plans a recall zqglobex.",
}
SEEN_IN_SCOPE = ["query", "aquery", "to_thread"]
SCOPE_LOST = ["run_in_executor", "thread_pool", "thread"]


def plans_engine(llm: RecordingLLM, **options: Any) -> BaseQueryEngine:
    nodes = [
        TextNode(id_=name, text=text, metadata={} if name == "public" else {"tenant": name})
        for name, text in PLANS.items()
    ]
    return VectorStoreIndex(nodes).as_query_engine(
        llm=llm,
        similarity_top_k=3,
        node_postprocessors=[
            ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm, **options)
        ],
    )


def ask(engine: BaseQueryEngine, path: str) -> None:
    """One query, run the way `path` names: in this thread, awaited, or in a worker thread."""
    question = "What are the plans?"
    if path == "query":
        engine.query(question)
    elif path == "aquery":
        asyncio.run(engine.aquery(question))
    elif path == "to_thread":
        asyncio.run(asyncio.to_thread(engine.query, question))
    elif path == "run_in_executor":

        async def in_executor() -> None:
            await asyncio.get_running_loop().run_in_executor(None, engine.query, question)

        asyncio.run(in_executor())
    elif path == "thread_pool":
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(engine.query, question).result()
    else:
        assert path == "thread"
        errors: list[BaseException] = []

        def target() -> None:
            try:
                engine.query(question)
            except BaseException as error:  # re-raised in the test's thread
                errors.append(error)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]


def shown(llm: RecordingLLM) -> set[str]:
    [prompt] = llm.prompts
    return {name for name, text in PLANS.items() if text in prompt}


@pytest.mark.parametrize("path", SEEN_IN_SCOPE)
def test_per_query_principal_reaches_the_postprocessor(path: str) -> None:
    llm = recording_llm(5)
    with as_principal(ACME):
        ask(plans_engine(llm), path)
    assert shown(llm) == {"public", "acme"}


@pytest.mark.parametrize("path", SCOPE_LOST)
def test_per_query_principal_lost_in_a_worker_thread_sees_public_sources_only(path: str) -> None:
    llm = recording_llm(5)
    with as_principal(ACME):
        ask(plans_engine(llm), path)
    assert shown(llm) == {"public"}


@pytest.mark.parametrize("path", SEEN_IN_SCOPE + SCOPE_LOST)
def test_fixed_principal_is_served_without_a_scope(path: str) -> None:
    llm = recording_llm(5)
    ask(plans_engine(llm, principal=ACME), path)
    assert shown(llm) == {"public", "acme"}


@pytest.mark.parametrize("path", SEEN_IN_SCOPE)
def test_fixed_principal_refuses_another_scope_on_every_path(path: str) -> None:
    llm = recording_llm(5)
    with as_principal(GLOBEX), pytest.raises(InputError, match="built for"):
        ask(plans_engine(llm, principal=ACME), path)
    assert llm.prompts == []


@pytest.mark.parametrize("path", SCOPE_LOST)
def test_fixed_principal_in_a_worker_thread_serves_only_itself(path: str) -> None:
    # The scope (globex) is not visible there; the postprocessor answers for acme, the one
    # principal it was built for, never for someone a lost scope fell back to.
    llm = recording_llm(5)
    with as_principal(GLOBEX):
        ask(plans_engine(llm, principal=ACME), path)
    assert shown(llm) == {"public", "acme"}


@pytest.mark.parametrize("path", SCOPE_LOST)
def test_required_principal_lost_in_a_worker_thread_raises(path: str) -> None:
    llm = recording_llm(5)
    engine = plans_engine(llm, sources=SourceOptions(access=AccessPolicy(require_principal=True)))
    with as_principal(ACME), pytest.raises(InputError, match="the access policy requires one"):
        ask(engine, path)
    assert llm.prompts == []


def test_as_principal_none_in_a_query_sees_public_sources_only() -> None:
    llm = recording_llm(5)
    with as_principal(None):
        ask(plans_engine(llm), "query")
    assert shown(llm) == {"public"}


# --- source documents -------------------------------------------------------------------


def test_source_document_acl_applies_whatever_the_node_parser_copied() -> None:
    document = Document(text=PLANS["globex"], doc_id="recall", metadata={"tenant": "globex"})
    nodes = SentenceSplitter(include_metadata=False).get_nodes_from_documents([document])
    assert nodes[0].metadata == {}
    llm = recording_llm(5)
    with as_principal(ACME):
        VectorStoreIndex([*nodes, TextNode(id_="public", text=PLANS["public"])]).as_query_engine(
            llm=llm,
            similarity_top_k=3,
            node_postprocessors=[ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm)],
        ).query("What are the plans?")
    assert shown(llm) == {"public"}


def test_source_document_acl_comes_from_the_docstore_when_the_relationship_lacks_it() -> None:
    document = Document(text=PLANS["globex"], doc_id="recall", metadata={"tenant": "globex"})
    node = TextNode(
        id_="recall-0",
        text=PLANS["globex"],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="recall")},
    )
    index = VectorStoreIndex([node])
    index.docstore.add_documents([document])
    out = ContextBudgetPostprocessor(
        tokenizer="o200k_base", docstore=index.docstore, principal=ACME
    ).postprocess_nodes([NodeWithScore(node=node, score=1.0)])
    assert out == []


# --- what cannot be sent ----------------------------------------------------------------------


def test_postprocess_deeply_nested_metadata_is_an_input_error_naming_the_node() -> None:
    deep: dict[str, Any] = {}
    level = deep
    for _ in range(1_500):
        level["k"] = {}
        level = level["k"]
    node = NodeWithScore(node=TextNode(id_="deep", text="Text.", metadata={"d": deep}), score=1.0)
    with pytest.raises(InputError, match=r"node 'deep' metadata nests more than 64 levels"):
        postprocessor().postprocess_nodes([node])


def test_postprocess_sources_found_but_none_fits_raises() -> None:
    node = NodeWithScore(node=TextNode(id_="big", text="word " * 3_000), score=1.0)
    with pytest.raises(ContextBudgetError, match=r"were found but none fits \(big\)"):
        postprocessor(llm=recording_llm(window=3_900)).postprocess_nodes([node])


def test_postprocess_query_that_leaves_no_room_for_sources_raises() -> None:
    node = NodeWithScore(node=TextNode(id_="a", text="Refunds take 14 days."), score=1.0)
    query = QueryBundle("refunds " * 4_000)  # longer than the window: no room for sources
    with pytest.raises(ContextBudgetError, match=r"leave no room for sources"):
        postprocessor(llm=recording_llm(window=3_900)).postprocess_nodes([node], query_bundle=query)


def test_postprocess_query_that_leaves_no_room_with_nothing_found_is_empty() -> None:
    query = QueryBundle("refunds " * 4_000)
    assert postprocessor(llm=recording_llm(window=3_900)).postprocess_nodes([], query) == []


def test_postprocess_none_fits_without_a_floor_warns_naming_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = Budget(total=3_000, allocations=(Allocation("retrieved", min=0, max=500, priority=1),))
    node = NodeWithScore(node=TextNode(id_="big", text="word " * 3_000), score=1.0)
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assert postprocessor(budget=budget).postprocess_nodes([node]) == []
    assert "no source fits" in caplog.text
    assert "big" in caplog.text


def test_budget_from_the_llm_leaves_room_for_llamaindex_packing(
    events: list[BaseEvent], o200k: TiktokenTokenizer
) -> None:
    llm = recording_llm(5, window=1_000, reserve=100)
    query = QueryBundle("When do the warehouses open?")
    postprocessor(llm=llm).postprocess_nodes(corpus(), query_bundle=query)
    theirs = PromptHelper.from_llm_metadata(llm.metadata, tokenizer=o200k.encoding.encode)
    rooms = [
        theirs._get_available_chunk_size(
            template.partial_format(query_str=query.query_str), padding=500, llm=llm
        )
        for template in (DEFAULT_TEXT_QA_PROMPT_SEL, DEFAULT_REFINE_PROMPT_SEL)
    ]
    retrieved = Budget.for_context_window(1_000, reserve_output=100).allocation("retrieved")
    assert retrieved is not None
    assert retrieved.max is not None
    assert selected(events).budget <= min(rooms) < retrieved.max
