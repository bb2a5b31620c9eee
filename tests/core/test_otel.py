"""OpenTelemetry spans from the core entry points, read back from opentelemetry-sdk's
in-memory exporter: figures from the report, ids and numbers only, never text."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxbudget import (
    Allocation,
    Budget,
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    CtxBudgetError,
    InputError,
    Principal,
    Turn,
    select_sources,
    span_attributes,
    trim_history,
)
from tests.support.factories import budget_for, chunks, words
from tests.support.imports import loaded_after
from tests.support.otel_spans import recorded_spans


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as exporter:
        yield exporter


def _only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def test_assemble_span_carries_the_report_figures(spans: InMemorySpanExporter) -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=budget_for("retrieved", 400))
    result = assembler.assemble(system="Answer.", question="Why?", chunks=chunks(5))
    report = result.report
    attributes = _only(spans, "ctxbudget.assemble").attributes or {}
    assert attributes["gen_ai.request.model"] == "gpt-4o"
    assert attributes["ctxbudget.budget"] == report.budget
    assert attributes["ctxbudget.total"] == report.total
    assert attributes["ctxbudget.claimant.retrieved.used"] == report.sizes["retrieved"]
    assert attributes["ctxbudget.claimant.retrieved.granted"] == report.granted["retrieved"]
    assert attributes["ctxbudget.trimmed"] == report.trimmed
    assert attributes["ctxbudget.prefix.hash"] == report.prefix_hash
    assert attributes["ctxbudget.prefix.tokens"] == report.prefix_tokens
    assert attributes["ctxbudget.count.exact"] is True


def test_assemble_span_has_no_model_when_built_from_an_encoding(
    spans: InMemorySpanExporter,
) -> None:
    ContextAssembler(tokenizer="o200k_base").assemble(question="Why?")
    assert "gen_ai.request.model" not in (_only(spans, "ctxbudget.assemble").attributes or {})


def test_assemble_span_is_a_child_of_the_current_span(spans: InMemorySpanExporter) -> None:
    with trace.get_tracer("app").start_as_current_span("framework") as parent:
        ContextAssembler(tokenizer="o200k_base").assemble(question="Why?")
    span = _only(spans, "ctxbudget.assemble")
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id


def test_assemble_span_counts_drops_by_reason_without_ids(spans: InMemorySpanExporter) -> None:
    given = [
        Chunk(id="secret-1", content="board only", groups=frozenset({"board"})),
        Chunk(id="twin-a", content=words("same", 30)),
        Chunk(id="twin-b", content=words("same", 30)),
    ]
    ContextAssembler(tokenizer="o200k_base").assemble(
        question="Why?", chunks=given, principal=Principal(groups=frozenset({"sales"}))
    )
    attributes = _only(spans, "ctxbudget.assemble").attributes or {}
    assert attributes["ctxbudget.dropped.forbidden"] == 1
    assert attributes["ctxbudget.dropped.duplicate"] == 1
    assert not any("secret-1" in str(v) or "twin-b" in str(v) for v in attributes.values())


def test_assemble_span_names_the_claimants_that_trimmed_retrieval(
    spans: InMemorySpanExporter,
) -> None:
    budget = Budget(
        total=700,
        reserve_output=0,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", priority=0),
            Allocation("retrieved", max=600, priority=1),
        ),
    )
    result = ContextAssembler(tokenizer="o200k_base", budget=budget).assemble(
        system=words("rule", 120), question="Why?", chunks=chunks(10)
    )
    assert result.report.retrieval_trimmed
    attributes = _only(spans, "ctxbudget.assemble").attributes or {}
    assert attributes["ctxbudget.retrieval_trimmed"] is True
    assert attributes["ctxbudget.trimmed_by.system"] == result.report.trimmed_by["system"]


def test_select_sources_span_carries_the_selection(spans: InMemorySpanExporter) -> None:
    selection = select_sources(chunks(8), max_tokens=300, tokenizer="o200k_base")
    attributes = _only(spans, "ctxbudget.select_sources").attributes or {}
    assert attributes["ctxbudget.total"] == selection.tokens
    assert attributes["ctxbudget.budget"] == 300
    assert attributes["ctxbudget.sources"] == len(selection.sources)
    assert attributes["ctxbudget.dropped.over_budget"] == len(selection.dropped)


def test_assembler_select_sources_opens_one_span(spans: InMemorySpanExporter) -> None:
    ContextAssembler(tokenizer="o200k_base").select_sources(chunks(3))
    assert [s.name for s in spans.get_finished_spans()] == ["ctxbudget.select_sources"]


def test_trim_history_span_carries_the_history_figures(spans: InMemorySpanExporter) -> None:
    turns = [
        Turn(role="user" if i % 2 == 0 else "assistant", content=words("m", 40)) for i in range(9)
    ]
    trimmed = trim_history(turns, max_tokens=200, tokenizer="o200k_base")
    attributes = _only(spans, "ctxbudget.trim_history").attributes or {}
    assert attributes["ctxbudget.claimant.history.used"] == trimmed.tokens
    assert attributes["ctxbudget.history.gaps"] == len(trimmed.gaps)
    assert attributes["ctxbudget.dropped.over_budget"] == len(trimmed.dropped)


def test_trim_history_span_is_named_for_the_assembler_method(
    spans: InMemorySpanExporter,
) -> None:
    ContextAssembler(tokenizer="o200k_base").trim_history([Turn(role="user", content="hi")])
    assert [s.name for s in spans.get_finished_spans()] == ["ctxbudget.trim_history"]


def test_context_budget_error_sets_status_error_with_its_message(
    spans: InMemorySpanExporter,
) -> None:
    budget = budget_for("retrieved", None, total=40)
    with pytest.raises(ContextBudgetError) as raised:
        ContextAssembler(tokenizer="o200k_base", budget=budget).assemble(
            system=words("rule", 100), question="Why?"
        )
    span = _only(spans, "ctxbudget.assemble")
    assert span.status.status_code is StatusCode.ERROR
    (event,) = span.events
    assert event.name == "exception"
    assert event.attributes == {
        "exception.type": "ContextBudgetError",
        "exception.message": str(raised.value),
    }


def test_other_errors_are_recorded_by_type_only(spans: InMemorySpanExporter) -> None:
    assembler = ContextAssembler(tokenizer="o200k_base", budget=budget_for("retrieved", None))
    with pytest.raises(InputError, match="no 'memory' allocation"):
        assembler.assemble(question="Why?", memory="MEMORY TEXT")
    span = _only(spans, "ctxbudget.assemble")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "InputError"
    assert [dict(e.attributes or {}) for e in span.events] == [{"exception.type": "InputError"}]


def test_span_attributes_are_the_spans_attributes(spans: InMemorySpanExporter) -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o")
    result = assembler.assemble(question="Why?", chunks=chunks(2))
    recorded = dict(_only(spans, "ctxbudget.assemble").attributes or {})
    assert recorded == span_attributes(result.report, model="gpt-4o")


# Uppercase G-Z never occurs in a hex hash, a claimant, a reason or a model name.
_SECRET = st.text(alphabet="GHJKMNPQRSTVWXYZ", min_size=6, max_size=12)


@given(
    contents=st.lists(_SECRET, min_size=1, max_size=6, unique=True),
    forbidden=st.lists(st.booleans(), min_size=6, max_size=6),
    cap=st.integers(min_value=0, max_value=120),
    floor=st.integers(min_value=0, max_value=60),
)
def test_no_chunk_text_or_forbidden_id_reaches_a_span(
    contents: list[str], forbidden: list[bool], cap: int, floor: int
) -> None:
    given = [
        Chunk(
            id=f"{'X' + text if hidden else 'c' + str(i)}",
            content=f"{text} {text}",
            groups=frozenset({"board"}) if hidden else None,
        )
        for i, (text, hidden) in enumerate(zip(contents, forbidden, strict=False))
    ]
    secrets = [*contents, *(c.id for c in given if c.groups)]
    budget = Budget(
        total=400,
        reserve_output=0,
        allocations=(
            Allocation("question", priority=0),
            Allocation("retrieved", min=min(floor, cap), max=cap, priority=1),
        ),
    )
    assembler = ContextAssembler(tokenizer="o200k_base", budget=budget)
    principal = Principal(groups=frozenset({"sales"}))
    with recorded_spans() as exporter:
        for call in (
            lambda: assembler.assemble(question="Why?", chunks=given, principal=principal),
            lambda: assembler.select_sources(given, principal=principal),
        ):
            with contextlib.suppress(CtxBudgetError):
                call()
        finished = exporter.get_finished_spans()
    assert len(finished) == 2
    for span in finished:
        values = [*(span.attributes or {}).values()]
        values += [v for event in span.events for v in (event.attributes or {}).values()]
        text = repr(values) + span.status.description.__repr__()
        assert not any(secret in text for secret in secrets)


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_import_does_not_import_opentelemetry() -> None:
    assert loaded_after("import ctxbudget", ["opentelemetry"]) == set()


def test_spans_are_a_no_op_without_opentelemetry_api() -> None:
    out = _run(
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"  # import opentelemetry now raises ImportError
        "import ctxbudget\n"
        "result = ctxbudget.ContextAssembler(tokenizer='o200k_base').assemble(question='Why?')\n"
        "print(result.report.total > 0)"
    )
    assert out == "True"


def test_traced_assembly_leaves_unread_drop_records_unbuilt(spans: InMemorySpanExporter) -> None:
    many = chunks(300, words=30)
    report = ContextAssembler(tokenizer="o200k_base").assemble(question="Why?", chunks=many).report
    attributes = _only(spans, "ctxbudget.assemble").attributes or {}
    assert not isinstance(object.__getattribute__(report, "__dict__")["dropped"], tuple)
    assert attributes["ctxbudget.dropped.over_budget"] == len(report.dropped)
