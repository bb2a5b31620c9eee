"""OpenTelemetry spans from the LlamaIndex adapter: one per component call, under the
caller's span, carrying the figures of the core call it made and no forbidden id or text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeWithScore, TextNode
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from llamaindex_ctxbudget import (
    ContextBudgetMemory,
    ContextBudgetPostprocessor,
    ContextBudgetPromptHelper,
)
from tests.support.llamaindex_stack import FACTS, SECRET, RecordingLLM, build_index, fact
from tests.support.otel_spans import recorded_spans

_POSTPROCESS = "ctxbudget.llamaindex.ContextBudgetPostprocessor.postprocess_nodes"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as exporter:
        yield exporter


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def _query(llm: RecordingLLM) -> None:
    build_index().as_query_engine(
        llm=llm,
        similarity_top_k=FACTS + 1,
        node_postprocessors=[ContextBudgetPostprocessor(tokenizer="o200k_base", llm=llm)],
    ).query("When do the warehouses open?")


def test_postprocessor_span_nests_under_the_callers_span_with_the_selection(
    spans: InMemorySpanExporter, offline_settings: RecordingLLM
) -> None:
    with trace.get_tracer("app").start_as_current_span("framework") as parent:
        _query(offline_settings)
    (span,) = _named(spans, _POSTPROCESS)
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    (child,) = _children(spans, span)
    assert child.name == "ctxbudget.select_sources"
    attributes = dict(span.attributes or {})
    assert attributes == dict(child.attributes or {})
    assert attributes["ctxbudget.dropped.forbidden"] == 1
    assert attributes["ctxbudget.sources"] == FACTS


def test_no_forbidden_id_or_text_reaches_a_span(
    spans: InMemorySpanExporter, offline_settings: RecordingLLM
) -> None:
    _query(offline_settings)
    values = [
        value
        for s in spans.get_finished_spans()
        for attributes in (s.attributes, *(e.attributes for e in s.events))
        for value in (attributes or {}).values()
    ]
    assert "hr" not in values
    assert not any(SECRET in str(value) or "zq0start" in str(value) for value in values)


def test_async_postprocessor_opens_its_own_span(spans: InMemorySpanExporter) -> None:
    nodes = [NodeWithScore(node=TextNode(id_="n1", text=fact(1)), score=1.0)]
    postprocessor = ContextBudgetPostprocessor(tokenizer="o200k_base", max_tokens=500)
    asyncio.run(postprocessor.apostprocess_nodes(nodes))
    (span,) = _named(spans, "ctxbudget.llamaindex.ContextBudgetPostprocessor.apostprocess_nodes")
    assert (span.attributes or {})["ctxbudget.sources"] == 1


def test_prompt_helper_repack_opens_a_span(spans: InMemorySpanExporter) -> None:
    helper = ContextBudgetPromptHelper(tokenizer="o200k_base", context_window=1_000, num_output=100)
    helper.repack(PromptTemplate("Context:\n{context_str}\nAnswer: "), [fact(1), fact(2)])
    assert len(_named(spans, "ctxbudget.llamaindex.ContextBudgetPromptHelper.repack")) == 1


def test_memory_get_span_carries_the_trim(spans: InMemorySpanExporter) -> None:
    stored = [ChatMessage(role=("user", "assistant")[i % 2], content=fact(i)) for i in range(30)]
    memory = ContextBudgetMemory.from_defaults(
        tokenizer="o200k_base", token_limit=200, chat_history=stored
    )
    kept = memory.get()
    (span,) = _named(spans, "ctxbudget.llamaindex.ContextBudgetMemory.get")
    attributes = span.attributes or {}
    assert attributes["ctxbudget.budget"] == 200
    assert attributes["ctxbudget.history.gaps"] == 1
    assert attributes["ctxbudget.history.kept"] == len(kept) - 1  # the gap marker is no turn
