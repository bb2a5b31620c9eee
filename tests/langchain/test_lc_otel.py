"""OpenTelemetry spans from the LangChain adapter: one per component call, under the
caller's span, carrying the figures of the core call it made and no forbidden id or text."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, get_args

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxbudget import ContextAssembler, InputError, Principal
from langchain_ctxbudget import ContextBudgetRunnable, trim_history
from tests.support.langchain_agents import agent_model, run_agent
from tests.support.langchain_stack import (
    Path,
    RecordingChatModel,
    chain_for,
    corpus,
    small_budget,
    vector_retriever,
)
from tests.support.otel_spans import recorded_spans

_ADAPTER_SPAN: dict[Path, tuple[str, str]] = {
    "runnable": ("ContextBudgetRunnable.invoke", "select_sources"),
    "dict": ("ContextBudgetRunnable.invoke", "assemble"),
    "transformer": ("ContextBudgetTransformer.transform_documents", "select_sources"),
    "compressor": ("ContextBudgetCompressor.compress_documents", "select_sources"),
    "retriever": ("ContextBudgetRetriever.invoke", "select_sources"),
}
_FORBIDDEN = [d for d in corpus() if "groups" in d.metadata or "tenant" in d.metadata]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as exporter:
        yield exporter


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _child(exporter: InMemorySpanExporter, parent: ReadableSpan) -> ReadableSpan:
    (child,) = [
        s
        for s in exporter.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return child


@pytest.mark.parametrize("path", get_args(Path))
def test_component_span_nests_under_the_callers_span_with_the_core_figures(
    spans: InMemorySpanExporter, path: Path
) -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    chain = chain_for(path, vector_retriever(corpus()), assembler, RecordingChatModel())
    with trace.get_tracer("app").start_as_current_span("framework") as parent:
        chain.invoke("How long do refunds take?")
    component, core = _ADAPTER_SPAN[path]
    (span,) = _named(spans, f"ctxbudget.langchain.{component}")
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    child = _child(spans, span)
    assert child.name == f"ctxbudget.{core}"
    assert dict(span.attributes or {}) == dict(child.attributes or {})
    assert (span.attributes or {})["ctxbudget.dropped.forbidden"] == len(_FORBIDDEN)


@pytest.mark.parametrize("path", get_args(Path))
def test_no_forbidden_id_or_text_reaches_a_span(spans: InMemorySpanExporter, path: Path) -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    chain_for(path, vector_retriever(corpus()), assembler, RecordingChatModel()).invoke(
        "How long do refunds take?"
    )
    recorded = repr(
        [
            (s.attributes, [e.attributes for e in s.events], s.status.description)
            for s in spans.get_finished_spans()
        ]
    )
    for document in _FORBIDDEN:
        assert str(document.id) not in recorded
        assert document.page_content not in recorded


def test_runnable_ainvoke_opens_its_own_span(spans: InMemorySpanExporter) -> None:
    ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o"))
    asyncio.run(ctx.ainvoke([Document("Refunds take 14 days.", id="d1")]))
    (span,) = _named(spans, "ctxbudget.langchain.ContextBudgetRunnable.ainvoke")
    assert (span.attributes or {})["ctxbudget.sources"] == 1


def test_middleware_span_per_model_call_carries_the_assembly(
    spans: InMemorySpanExporter,
) -> None:
    run_agent(agent_model(), [HumanMessage("Where is order 17?")])
    calls = _named(spans, "ctxbudget.langchain.ContextBudgetMiddleware.wrap_model_call")
    assert len(calls) == 2
    for call in calls:
        assert _child(spans, call).name == "ctxbudget.assemble"
        assert (call.attributes or {})["gen_ai.request.model"] == "gpt-4o"


def test_trim_history_span_carries_the_trim(spans: InMemorySpanExporter) -> None:
    messages: list[Any] = [HumanMessage("hi"), AIMessage("hello"), HumanMessage("again")]
    kept = trim_history(messages, max_tokens=100, tokenizer="gpt-4o")
    (span,) = _named(spans, "ctxbudget.langchain.trim_history")
    assert (span.attributes or {})["ctxbudget.history.kept"] == len(kept)


def test_a_component_error_sets_the_span_status(spans: InMemorySpanExporter) -> None:
    ctx = ContextBudgetRunnable(
        assembler=ContextAssembler(tokenizer="gpt-4o"), principal=Principal(tenant="acme")
    )
    with pytest.raises(InputError, match="takes a list of Documents"):
        ctx.invoke(42)  # type: ignore[arg-type]
    (span,) = _named(spans, "ctxbudget.langchain.ContextBudgetRunnable.invoke")
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.status.description == "InputError"
