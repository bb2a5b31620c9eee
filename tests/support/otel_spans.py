"""Spans recorded in memory by opentelemetry-sdk, one provider per test.

OpenTelemetry lets a process set its global tracer provider once. Each test sets a fresh
one and puts the previous state back after, as the SDK's own tests do
(``opentelemetry.test.globals_test.reset_trace_globals``), so no test sees another's spans
and the rest of the suite runs with no provider, as before. ctxbudget looks the tracer up
at each span, so it always uses the provider set now.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


@contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """An exporter that holds every span finished inside the block."""
    saved = (trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = saved


@contextmanager
def tracer_provider_restored() -> Iterator[None]:
    """Whatever sets the global tracer provider inside the block (an example of the docs) is
    undone after it, so the rest of the suite runs with no provider. The block gets a fresh
    set-once guard: setting a provider flips the guard in place, so a block that reused the
    saved one would leave the next block unable to set its own."""
    saved = (trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER)
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    try:
        yield
    finally:
        provider = trace._TRACER_PROVIDER
        if provider is not saved[1] and isinstance(provider, TracerProvider):
            provider.shutdown()
        trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = saved
