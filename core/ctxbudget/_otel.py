"""OpenTelemetry spans for each assembly and each adapter call: ids and numbers, never text.

opentelemetry-api is optional (``pip install 'ctxbudget[otel]'``): without it every hook is
a no-op, and `import ctxbudget` never imports it (the first traced call looks for it).
Each span is a child of the current span, so it nests under the framework's own span when
the framework's instrumentation started one. The attributes come from one function,
`span_attributes`, fed the core's own result; an adapter's span carries the attributes of
the core call it made, recorded by that call, so no adapter re-derives them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar

from ctxbudget._errors import ContextBudgetError
from ctxbudget._report import Report, drop_counts

if TYPE_CHECKING:
    from ctxbudget._standalone import Selection, TrimmedHistory

__all__ = ["AttributeValue", "add_event", "span_attributes", "traced", "traced_entry"]

AttributeValue = str | bool | int | float | Sequence[str]
"""What a span attribute holds here: OpenTelemetry's scalar and string-sequence types."""

P = ParamSpec("P")
R = TypeVar("R")

_SCOPE: Final = "ctxbudget"
# GenAI semantic conventions name this figure; every other attribute is ctxbudget's own.
_MODEL: Final = "gen_ai.request.model"

_api: Any = None
_looked = False

# The innermost adapter span of this call, which takes the attributes of the core call it makes.
_adapter_span: ContextVar[Any] = ContextVar("ctxbudget_adapter_span", default=None)


def _trace() -> Any:
    """`opentelemetry.trace`, or None when opentelemetry-api is not installed."""
    global _api, _looked
    if not _looked:
        try:
            from opentelemetry import trace as api
        except ImportError:
            api = None  # type: ignore[assignment]
        _api, _looked = api, True
    return _api


def span_attributes(
    outcome: Report | Selection | TrimmedHistory, *, model: str | None = None
) -> dict[str, AttributeValue]:
    """The span attributes for one result: ids and numbers only, never text.

    Dropped items are counted by reason and never named: a forbidden chunk's id is not
    the principal's to see, and a span outlives the request in a shared backend.
    `model` is the model the prompt is for, when known (``gen_ai.request.model``).
    """
    from ctxbudget._standalone import Selection

    attributes: dict[str, AttributeValue] = {} if model is None else {_MODEL: model}
    if isinstance(outcome, Report):
        attributes.update(_report_attributes(outcome))
    elif isinstance(outcome, Selection):
        attributes.update(
            {
                "ctxbudget.budget": outcome.budget,
                "ctxbudget.total": outcome.tokens,
                "ctxbudget.claimant.retrieved.used": outcome.tokens,
                "ctxbudget.trimmed": ("retrieved",) if outcome.trimmed else (),
                "ctxbudget.sources": len(outcome.sources),
                **_dropped(outcome),
            }
        )
        if outcome.escalated is not None:
            attributes["ctxbudget.escalated"] = outcome.escalated
    else:
        attributes.update(
            {
                "ctxbudget.budget": outcome.budget,
                "ctxbudget.total": outcome.tokens,
                "ctxbudget.claimant.history.used": outcome.tokens,
                "ctxbudget.history.kept": len(outcome.kept),
                "ctxbudget.history.gaps": len(outcome.gaps),
                "ctxbudget.history.cleared": len(outcome.cleared),
                **_dropped(outcome),
            }
        )
    return attributes


def _report_attributes(report: Report) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        "ctxbudget.budget": report.budget,
        "ctxbudget.total": report.total,
        "ctxbudget.unused": report.unused,
        "ctxbudget.trimmed": report.trimmed,
        "ctxbudget.retrieval_trimmed": report.retrieval_trimmed,
        "ctxbudget.prefix.hash": report.prefix_hash,
        "ctxbudget.prefix.tokens": report.prefix_tokens,
        "ctxbudget.prefix.warnings": len(report.prefix_warnings),
        "ctxbudget.tool_schema_tokens": report.tool_schema_tokens,
        "ctxbudget.final_check_drops": report.final_check_drops,
        "ctxbudget.history.cleared": len(report.cleared),
        "ctxbudget.count.exact": report.count_exact,
        **_dropped(report),
    }
    for name, granted in report.granted.items():
        attributes[f"ctxbudget.claimant.{name}.granted"] = granted
    for name, used in report.sizes.items():
        attributes[f"ctxbudget.claimant.{name}.used"] = used
    for name, held in report.trimmed_by.items():
        attributes[f"ctxbudget.trimmed_by.{name}"] = held
    if report.escalated is not None:
        attributes["ctxbudget.escalated"] = report.escalated
    if report.count_method is not None:
        attributes["ctxbudget.count.method"] = report.count_method
    if report.count_margin is not None:
        attributes["ctxbudget.count.margin"] = report.count_margin
    return attributes


def _dropped(outcome: Report | Selection | TrimmedHistory) -> dict[str, AttributeValue]:
    by_reason = drop_counts(outcome)
    return {
        "ctxbudget.dropped": by_reason.total(),
        **{f"ctxbudget.dropped.{reason}": n for reason, n in sorted(by_reason.items())},
    }


def _outcome(result: object) -> Report | Selection | TrimmedHistory | None:
    """The core result a traced call returned, if it is one."""
    from ctxbudget._result import Assembled
    from ctxbudget._standalone import Selection, TrimmedHistory

    if isinstance(result, Assembled):
        return result.report
    if isinstance(result, Selection | TrimmedHistory):
        return result
    return None


@contextmanager
def _span(name: str, *, adapter: bool) -> Iterator[Any]:
    """A span named `name` under the current one, ERROR when the call raises; None without
    opentelemetry-api."""
    trace = _trace()
    if trace is None:
        yield None
        return
    # A tracer per span, not one cached: it follows whichever provider is set now.
    tracer = trace.get_tracer(_SCOPE)
    with tracer.start_as_current_span(
        name, record_exception=False, set_status_on_exception=False
    ) as span:
        token = _adapter_span.set(span) if adapter else None
        try:
            yield span
        except BaseException as error:
            _record_error(trace, span, error)
            raise
        finally:
            if token is not None:
                _adapter_span.reset(token)


def _record_error(trace: Any, span: Any, error: BaseException) -> None:
    """The error on the span: type always; the message only for `ContextBudgetError`, whose
    messages carry claimants, numbers and permitted ids (any other may quote an input)."""
    kind = type(error).__qualname__
    attributes = {"exception.type": kind}
    if isinstance(error, ContextBudgetError):
        attributes["exception.message"] = str(error)
    span.add_event("exception", attributes)
    span.set_status(trace.Status(trace.StatusCode.ERROR, attributes.get("exception.message", kind)))


def _record(span: Any, result: object, model: str | None) -> None:
    # Attributes cost a pass over the result: only for a span that records.
    outcome = None if span is None or not span.is_recording() else _outcome(result)
    if outcome is None:
        return
    attributes = span_attributes(outcome, model=model)
    span.set_attributes(attributes)
    outer = _adapter_span.get()
    if outer is not None and outer is not span:
        outer.set_attributes(attributes)


def traced(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run an adapter's entry point (sync or async) in a span named `name`, under the current
    span; the core call it makes sets the span's attributes (docs/observability.md,
    "Tracing")."""
    return _decorator(name, adapter=True, model=None)


def traced_entry(
    name: str, *, model: Callable[[Any], str | None] | None = None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a core entry point in a span named `name`, its result (`Assembled`, `Selection`,
    `TrimmedHistory`) setting the attributes; `model` reads the model name from self."""
    return _decorator(name, adapter=False, model=model)


def _decorator(
    name: str, *, adapter: bool, model: Callable[[Any], str | None] | None
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        def model_of(args: tuple[Any, ...]) -> str | None:
            return None if model is None or not args else model(args[0])

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                with _span(name, adapter=adapter) as span:
                    result = await function(*args, **kwargs)
                    _record(span, result, model_of(args))
                    return result

            return run_async  # type: ignore[return-value]

        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with _span(name, adapter=adapter) as span:
                result = function(*args, **kwargs)
                _record(span, result, model_of(args))
                return result

        return run

    return decorate


def add_event(name: str, attributes: Mapping[str, AttributeValue]) -> bool:
    """Add an event to the current span, if one is recording; whether one was."""
    trace = _trace()
    if trace is None:
        return False
    span = trace.get_current_span()
    if not span.is_recording():
        return False
    span.add_event(name, dict(attributes))
    return True
