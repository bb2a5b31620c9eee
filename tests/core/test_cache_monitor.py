"""`CacheMonitor` and `cache_usage`: usage shapes built from the SDKs' own types, hit rates per
prefix hash over a window, and the warnings (log and span event) when the cache stops hitting."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

import pytest
from anthropic.types import Message, TextBlock, Usage
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion
from openai.types.completion_usage import PromptTokensDetails
from openai.types.responses import ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxbudget import (
    Allocation,
    Budget,
    CacheMonitor,
    CacheUsage,
    ContextAssembler,
    InputError,
    Report,
    cache_usage,
)
from tests.support.factories import words
from tests.support.otel_spans import recorded_spans

_ASSEMBLER = ContextAssembler(
    tokenizer="o200k_base",
    budget=Budget(
        total=8_000,
        allocations=(Allocation("system", priority=0), Allocation("question", priority=0)),
    ),
)
SYSTEM = "You answer from the sources. " + words("rule", 400)


def report(system: str = SYSTEM) -> Report:
    return _ASSEMBLER.assemble(system=system, question="Why?").report


REPORT = report()


def openai_usage(prompt: int, cached: int) -> CompletionUsage:
    return CompletionUsage(
        prompt_tokens=prompt,
        completion_tokens=5,
        total_tokens=prompt + 5,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=cached),
    )


def anthropic_usage(uncached: int, read: int, created: int = 0) -> Usage:
    return Usage(
        input_tokens=uncached,
        output_tokens=5,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=created,
    )


@pytest.fixture
def monitor() -> CacheMonitor:
    return CacheMonitor(window=10, min_requests=3)


# --- reading usage -----------------------------------------------------------------------------


def test_cache_usage_reads_openai_completion_usage() -> None:
    assert cache_usage(openai_usage(2_000, 1_536)) == CacheUsage(2_000, 1_536, 0)


def test_cache_usage_reads_an_openai_chat_completion() -> None:
    completion = ChatCompletion(
        id="c1",
        choices=[],
        created=0,
        model="gpt-4o",
        object="chat.completion",
        usage=openai_usage(1_500, 1_024),
    )
    assert cache_usage(completion) == CacheUsage(1_500, 1_024, 0)


def test_cache_usage_reads_an_openai_chat_completion_as_a_dict() -> None:
    usage = openai_usage(1_500, 1_024).model_dump()
    assert cache_usage({"id": "c1", "usage": usage}) == CacheUsage(1_500, 1_024, 0)


def test_cache_usage_reads_openai_usage_without_details_as_no_hit() -> None:
    usage = CompletionUsage(prompt_tokens=900, completion_tokens=1, total_tokens=901)
    assert cache_usage(usage) == CacheUsage(900, 0, 0)


def test_cache_usage_reads_openai_responses_usage() -> None:
    usage = ResponseUsage(
        input_tokens=3_000,
        input_tokens_details=InputTokensDetails(cached_tokens=2_048, cache_write_tokens=100),
        output_tokens=10,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=3_010,
    )
    assert cache_usage(usage) == CacheUsage(3_000, 2_048, 100)


def test_cache_usage_adds_anthropic_cache_reads_and_writes_to_its_input_tokens() -> None:
    assert cache_usage(anthropic_usage(50, 1_200, 300)) == CacheUsage(1_550, 1_200, 300)


def test_cache_usage_reads_an_anthropic_message() -> None:
    message = Message(
        id="m1",
        content=[TextBlock(type="text", text="See [1].")],
        model="claude-sonnet-4-5",
        role="assistant",
        stop_reason="end_turn",
        type="message",
        usage=anthropic_usage(40, 1_100),
    )
    assert cache_usage(message) == CacheUsage(1_140, 1_100, 0)


def test_cache_usage_reads_langchain_usage_metadata() -> None:
    message = AIMessage(
        "See [1].",
        usage_metadata={
            "input_tokens": 1_400,
            "output_tokens": 5,
            "total_tokens": 1_405,
            "input_token_details": {"cache_read": 1_100, "cache_creation": 200},
        },
    )
    assert cache_usage(message) == CacheUsage(1_400, 1_100, 200)


def test_cache_usage_reads_a_llamaindex_responses_raw_usage() -> None:
    raw = {"id": "c1", "usage": openai_usage(1_300, 1_152).model_dump()}
    response = ChatResponse(message=ChatMessage(role="assistant", content="ok"), raw=raw)
    assert cache_usage(response) == CacheUsage(1_300, 1_152, 0)


def test_cache_usage_of_an_unknown_shape_names_the_accepted_ones() -> None:
    with pytest.raises(InputError, match=r"cannot read prompt-cache usage from int; pass an Open"):
        cache_usage(42)


def test_cache_usage_of_a_message_without_usage_is_an_error() -> None:
    with pytest.raises(InputError, match="cannot read prompt-cache usage from AIMessage"):
        cache_usage(AIMessage("no usage reported"))


def test_cache_usage_negative_count_is_an_error() -> None:
    with pytest.raises(InputError, match=r"usage prompt_tokens must be an int >= 0, but got -1"):
        cache_usage({"prompt_tokens": -1})


# --- hit rates ---------------------------------------------------------------------------------


def test_hit_rate_leaves_out_the_request_that_wrote_the_cache(monitor: CacheMonitor) -> None:
    monitor.observe(anthropic_usage(REPORT.prefix_tokens, 0, REPORT.prefix_tokens), REPORT)
    assert monitor.hit_rate(REPORT.prefix_hash) is None
    monitor.observe(anthropic_usage(10, REPORT.prefix_tokens), REPORT)
    assert monitor.hit_rate(REPORT.prefix_hash) == 1.0


def test_hit_rate_counts_at_most_the_prefix_per_request(monitor: CacheMonitor) -> None:
    # OpenAI caches history too: a read beyond the prefix is not a better hit.
    for _ in range(3):
        monitor.observe(openai_usage(5 * REPORT.prefix_tokens, 4 * REPORT.prefix_tokens), REPORT)
    assert monitor.hit_rate(REPORT.prefix_hash) == 1.0


def test_hit_rate_falling_below_the_threshold_warns_once(
    monitor: CacheMonitor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ctxbudget")
    for _ in range(6):
        monitor.observe(openai_usage(REPORT.prefix_tokens + 20, 0), REPORT)
    warnings = [r for r in caplog.records if "hit rate" in r.getMessage()]
    assert len(warnings) == 1
    assert f"prefix {REPORT.prefix_hash[:12]}" in warnings[0].getMessage()
    assert "is 0% over its last 3 requests, below 50%" in warnings[0].getMessage()
    assert warnings[0].__dict__["ctxbudget_cache"]["prefix_hash"] == REPORT.prefix_hash


def test_hit_rate_warns_again_after_it_recovers_and_falls(
    monitor: CacheMonitor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ctxbudget")
    hit, miss = openai_usage(REPORT.prefix_tokens, REPORT.prefix_tokens), openai_usage(2_000, 0)
    for usage in [miss] * 4 + [hit] * 10 + [miss] * 10:
        monitor.observe(usage, REPORT)
    assert len([r for r in caplog.records if "hit rate" in r.getMessage()]) == 2


def test_short_prefix_is_not_expected_to_be_cached(
    monitor: CacheMonitor, caplog: pytest.LogCaptureFixture
) -> None:
    short = report("Answer from the sources.")
    assert short.prefix_tokens < 1_024
    for _ in range(6):
        monitor.observe(openai_usage(900, 0), short)
    assert not caplog.records


def test_hit_rate_warning_adds_a_span_event(monitor: CacheMonitor) -> None:
    with recorded_spans() as exporter:
        with trace.get_tracer("app").start_as_current_span("request"):
            for _ in range(4):
                monitor.observe(openai_usage(REPORT.prefix_tokens, 0), REPORT)
        (span,) = exporter.get_finished_spans()
    names = [e.name for e in span.events]
    assert names.count("ctxbudget.cache.usage") == 4
    (low,) = [e for e in span.events if e.name == "ctxbudget.cache.hit_rate_low"]
    assert (low.attributes or {})["ctxbudget.prefix.hash"] == REPORT.prefix_hash


def test_usage_event_carries_the_genai_usage_attributes(monitor: CacheMonitor) -> None:
    exporter: InMemorySpanExporter
    with recorded_spans() as exporter:
        with trace.get_tracer("app").start_as_current_span("request"):
            monitor.observe(anthropic_usage(30, 1_000, 70), REPORT)
        (span,) = exporter.get_finished_spans()
    (event,) = span.events
    assert dict(event.attributes or {}) == {
        "gen_ai.usage.input_tokens": 1_100,
        "gen_ai.usage.cache_read.input_tokens": 1_000,
        "gen_ai.usage.cache_creation.input_tokens": 70,
        "ctxbudget.prefix.hash": REPORT.prefix_hash,
        "ctxbudget.prefix.tokens": REPORT.prefix_tokens,
    }


def test_time_window_forgets_old_requests() -> None:
    now = [0.0]
    monitor = CacheMonitor(window=timedelta(minutes=5), min_requests=1, clock=lambda: now[0])
    monitor.observe(openai_usage(REPORT.prefix_tokens, 0), REPORT)
    monitor.observe(openai_usage(REPORT.prefix_tokens, 0), REPORT)
    now[0] = 600.0
    monitor.observe(openai_usage(REPORT.prefix_tokens, REPORT.prefix_tokens), REPORT)
    assert monitor.hit_rate(REPORT.prefix_hash) == 1.0


def test_hit_rates_lists_every_prefix_in_memory(monitor: CacheMonitor) -> None:
    other = report(f"{SYSTEM} Other.")
    for r in (REPORT, other, REPORT):
        monitor.observe(openai_usage(r.prefix_tokens, r.prefix_tokens), r)
    assert monitor.hit_rates() == {other.prefix_hash: None, REPORT.prefix_hash: 1.0}


def test_count_window_keeps_the_last_requests_of_a_prefix() -> None:
    monitor = CacheMonitor(window=2)
    for cached in (0, 0, 0, REPORT.prefix_tokens, REPORT.prefix_tokens):
        monitor.observe(openai_usage(REPORT.prefix_tokens, cached), REPORT)
    assert monitor.hit_rate(REPORT.prefix_hash) == 1.0


def test_observe_takes_the_report_as_its_event_dict(monitor: CacheMonitor) -> None:
    data: dict[str, Any] = {**REPORT.model_dump(mode="json"), "sources": []}
    monitor.observe(openai_usage(2_000, 0), data)
    monitor.observe(openai_usage(2_000, 1_024), data)
    assert monitor.hit_rate(REPORT.prefix_hash) == 1_024 / REPORT.prefix_tokens


def test_observe_of_a_selection_report_is_an_error(monitor: CacheMonitor) -> None:
    with pytest.raises(InputError, match="a report dict with prefix_hash"):
        monitor.observe(openai_usage(2_000, 0), {"budget": 300, "tokens": 10})


@given(
    reads=st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 5_000)), min_size=2, max_size=20)
)
def test_hit_rate_is_a_share(reads: list[tuple[int, int]]) -> None:
    monitor = CacheMonitor(window=8)
    for prompt, cached in reads:
        monitor.observe(openai_usage(prompt, cached), REPORT)
    rate = monitor.hit_rate(REPORT.prefix_hash)
    assert rate is None or 0.0 <= rate <= 1.0


def test_monitor_is_thread_safe() -> None:
    monitor = CacheMonitor(window=10_000)
    monitor.observe(openai_usage(REPORT.prefix_tokens, 0), REPORT)  # writes the cache

    def feed() -> None:
        for i in range(200):
            cached = REPORT.prefix_tokens if i % 2 else 0
            monitor.observe(openai_usage(REPORT.prefix_tokens, cached), REPORT)

    threads = [threading.Thread(target=feed) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert monitor.hit_rate(REPORT.prefix_hash) == 0.5


# --- prefix changes ----------------------------------------------------------------------------


def _stamped(i: int) -> Report:
    return report(f"{SYSTEM}\nRequest {i} at 2026-12-02T01:{i:02d}:00Z.")


@pytest.fixture
def stamped() -> list[Report]:
    return [_stamped(i) for i in range(6)]


def test_prefix_changing_within_a_deploy_warns_naming_the_section(
    stamped: list[Report], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ctxbudget")
    monitor = CacheMonitor(deploy="v7", max_new_prefixes=3)
    for r in stamped:
        monitor.observe(openai_usage(r.prefix_tokens, 0), r)
    (warning,) = [r for r in caplog.records if "new prompt-cache prefixes" in r.getMessage()]
    message = warning.getMessage()
    assert "4 new prompt-cache prefixes within deploy 'v7' in the window" in message
    assert "(changed from the request before: system 3 times)" in message
    assert "a timestamp in the system prompt" in message


def test_one_prefix_per_deploy_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    monitor = CacheMonitor(deploy="v1", max_new_prefixes=1)
    for i in range(4):
        r = report(f"{SYSTEM} Release {i}.")
        monitor.set_deploy(f"v{i}")
        for _ in range(3):
            monitor.observe(openai_usage(r.prefix_tokens, r.prefix_tokens), r)
    assert not caplog.records


def test_interleaved_prefixes_do_not_count_as_changes(caplog: pytest.LogCaptureFixture) -> None:
    monitor = CacheMonitor(max_new_prefixes=2)
    tenants = [report(f"{SYSTEM} Tenant {t}.") for t in "ab"]
    for _ in range(10):
        for r in tenants:
            monitor.observe(openai_usage(r.prefix_tokens, r.prefix_tokens), r)
    assert not caplog.records


def test_prefix_churn_adds_a_span_event(stamped: list[Report]) -> None:
    monitor = CacheMonitor(max_new_prefixes=3)
    with recorded_spans() as exporter:
        with trace.get_tracer("app").start_as_current_span("request"):
            for r in stamped:
                monitor.observe(openai_usage(r.prefix_tokens, 0), r)
        (span,) = exporter.get_finished_spans()
    (churn,) = [e for e in span.events if e.name == "ctxbudget.cache.prefix_churn"]
    assert (churn.attributes or {})["ctxbudget.cache.changed_sections"] == ("system",)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window": 0}, "window must be >= 1 request, but got 0"),
        ({"window": timedelta(0)}, "window must be a positive timedelta"),
        ({"min_hit_rate": 1.5}, "min_hit_rate must be between 0 and 1, but got 1.5"),
        ({"min_requests": -1}, "min_requests must be an int >= 0, but got -1"),
    ],
)
def test_monitor_options_are_validated(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CacheMonitor(**options)
