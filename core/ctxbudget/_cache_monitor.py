"""`CacheMonitor`: the provider's prompt-cache hits per prefix hash, and a warning when they stop.

A cache layout saves input cost only while the prefix stays byte-identical; one timestamp
in the system prompt turns every request into a miss, silently. The monitor is fed each
request's usage (as the provider reported it) with the request's `Report`, keeps the hit
rate per `prefix_hash` over a window, and warns when a prefix that should be cached stops
hitting, or when prefix hashes change more often than the deploys that change them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from ctxbudget._claimants import Claimant
from ctxbudget._errors import InputError
from ctxbudget._otel import add_event
from ctxbudget._report import Report

__all__ = ["CacheMonitor", "CacheUsage", "cache_usage"]

logger = logging.getLogger("ctxbudget")

_SHAPES: Final = (
    "an OpenAI ChatCompletion or its usage (prompt_tokens, "
    "prompt_tokens_details.cached_tokens), an OpenAI Responses response or its usage "
    "(input_tokens, input_tokens_details.cached_tokens), an Anthropic Message or its usage "
    "(input_tokens, cache_read_input_tokens, cache_creation_input_tokens), a LangChain "
    "AIMessage or its usage_metadata (input_tokens, input_token_details.cache_read / "
    "cache_creation), a LlamaIndex ChatResponse or CompletionResponse (its raw response), "
    "or any of these as a dict"
)
# Prefix hashes remembered at once: a prefix that changes per request makes one per request.
_HASHES: Final = 1_024


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """One request's input tokens as the provider counted them, and how many the cache served."""

    input_tokens: int
    """Every input token of the request, cached or not."""
    cache_read: int
    """Input tokens read from the provider's prompt cache."""
    cache_creation: int
    """Input tokens written to the cache (0 where the provider does not say)."""


def _has(value: object, key: str) -> bool:
    return key in value if isinstance(value, Mapping) else hasattr(value, key)


def _get(value: object, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)


def _tokens(value: object, key: str) -> int:
    found = _get(value, key)
    if found is None:
        return 0
    if isinstance(found, bool) or not isinstance(found, int) or found < 0:
        raise InputError(f"usage {key} must be an int >= 0, but got {found!r}")
    return found


def cache_usage(usage: object) -> CacheUsage:
    """The `CacheUsage` in a provider's response or usage object, SDK type or dict.

    Raises `InputError` naming the accepted shapes for anything else.
    """
    for wrapper in ("usage_metadata", "usage", "raw"):
        # A response (or message) carrying its usage: read the usage inside it.
        inner = _get(usage, wrapper)
        if inner is not None:
            return cache_usage(inner)
    # OpenAI: the input count includes cached tokens; details say how many were read/written.
    for total, details in (
        ("prompt_tokens", "prompt_tokens_details"),  # chat completions
        ("input_tokens", "input_tokens_details"),  # responses
    ):
        if _has(usage, details) or (total == "prompt_tokens" and _has(usage, total)):
            found = _get(usage, details) or {}
            return CacheUsage(
                _tokens(usage, total),
                _tokens(found, "cached_tokens"),
                _tokens(found, "cache_write_tokens"),
            )
    if _has(usage, "input_token_details") or _has(usage, "total_tokens"):
        # LangChain usage_metadata: input_tokens is the sum of every input token type.
        kinds = _get(usage, "input_token_details") or {}
        return CacheUsage(
            _tokens(usage, "input_tokens"),
            _tokens(kinds, "cache_read"),
            _tokens(kinds, "cache_creation"),
        )
    if _has(usage, "input_tokens"):  # Anthropic: input_tokens excludes cache reads and writes
        read = _tokens(usage, "cache_read_input_tokens")
        created = _tokens(usage, "cache_creation_input_tokens")
        return CacheUsage(_tokens(usage, "input_tokens") + read + created, read, created)
    raise InputError(f"cannot read prompt-cache usage from {type(usage).__name__}; pass {_SHAPES}")


@dataclass(frozen=True, slots=True)
class _Seen:
    """One request of a prefix: when, the tokens the cache could serve, and those it did."""

    at: float
    cacheable: int
    cached: int


@dataclass(frozen=True, slots=True)
class _New:
    """A prefix hash first seen in this deploy: when, and the sections that differ from the
    request before it."""

    at: float
    changed: tuple[str, ...]


class CacheMonitor:
    """Prompt-cache hit rates per prefix hash over a window, and warnings when they fall.

    Thread-safe: one monitor per process, fed every request (docs/observability.md,
    "Cache monitoring").

    >>> monitor = CacheMonitor(window=50, deploy="v1")
    """

    def __init__(
        self,
        *,
        window: int | timedelta = 100,
        min_hit_rate: float = 0.5,
        min_requests: int = 5,
        min_cacheable_tokens: int = 1_024,
        deploy: str | None = None,
        max_new_prefixes: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """
        Args:
            window: the last this many requests of each prefix (and of the deploy), or the
                requests within this long.
            min_hit_rate: warn when the share of a prefix's cacheable tokens the cache served
                falls below this.
            min_requests: requests of one prefix in the window before its rate is judged
                (its first request, which writes the cache, not counted).
            min_cacheable_tokens: prefixes shorter than this are not expected to be cached
                (OpenAI and Anthropic cache from 1,024 tokens).
            deploy: the running deploy or version; prefix changes are judged within one.
            max_new_prefixes: warn when more new prefix hashes than this appear within one
                deploy and window: something in the prefix changes per request.
            clock: seconds, for a time window.
        """
        if isinstance(window, bool) or not isinstance(window, int | timedelta):
            raise TypeError(f"window must be an int or a timedelta, not {type(window).__name__}")
        if isinstance(window, int) and window < 1:
            raise ValueError(f"window must be >= 1 request, but got {window}")
        if isinstance(window, timedelta) and window <= timedelta(0):
            raise ValueError(f"window must be a positive timedelta, but got {window}")
        if not 0 <= min_hit_rate <= 1:
            raise ValueError(f"min_hit_rate must be between 0 and 1, but got {min_hit_rate}")
        for name, value in (
            ("min_requests", min_requests),
            ("min_cacheable_tokens", min_cacheable_tokens),
            ("max_new_prefixes", max_new_prefixes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, but got {value!r}")
        self._count = window if isinstance(window, int) else None
        self._span = window.total_seconds() if isinstance(window, timedelta) else None
        self.min_hit_rate = min_hit_rate
        self.min_requests = min_requests
        self.min_cacheable_tokens = min_cacheable_tokens
        self.max_new_prefixes = max_new_prefixes
        self._clock = clock
        self._lock = threading.Lock()
        self._prefixes: OrderedDict[str, deque[_Seen]] = OrderedDict()
        self._low: set[str] = set()
        self._deploy = deploy
        self._new: deque[_New] = deque(maxlen=self._count)
        self._last: Mapping[Claimant, str] | None = None
        self._churning = False

    def set_deploy(self, deploy: str) -> None:
        """A new deploy is running: the prefix may change once, and changes count afresh."""
        with self._lock:
            self._deploy = deploy
            self._new.clear()
            self._churning = False

    def observe(self, usage: object, report: Report | Mapping[str, Any]) -> CacheUsage:
        """Record one request: its provider usage (see `cache_usage`) and its `Report` (or
        the report as a dict, as the adapters' report events carry it)."""
        read = cache_usage(usage)
        if not isinstance(report, Report):
            report = _report_of(report)
        add_event(
            "ctxbudget.cache.usage",
            {
                "gen_ai.usage.input_tokens": read.input_tokens,
                "gen_ai.usage.cache_read.input_tokens": read.cache_read,
                "gen_ai.usage.cache_creation.input_tokens": read.cache_creation,
                "ctxbudget.prefix.hash": report.prefix_hash,
                "ctxbudget.prefix.tokens": report.prefix_tokens,
            },
        )
        with self._lock:
            now = self._clock()
            self._observe_churn(now, report)
            self._observe_rate(now, report, read)
        return read

    def hit_rate(self, prefix_hash: str) -> float | None:
        """The share of the prefix's cacheable tokens the cache served in the window (its first
        request not counted); None before any such request."""
        with self._lock:
            seen = self._prefixes.get(prefix_hash)
            if seen is None:
                return None
            self._prune(seen, self._clock())
            return _rate(seen)

    def hit_rates(self) -> dict[str, float | None]:
        """`hit_rate` of every prefix hash in memory, most recently seen last."""
        with self._lock:
            now = self._clock()
            for seen in self._prefixes.values():
                self._prune(seen, now)
            return {key: _rate(seen) for key, seen in self._prefixes.items()}

    def _prune(self, seen: deque[_Seen] | deque[_New], now: float) -> None:
        """Drop what is older than a time window (a count window drops by its maxlen)."""
        if self._span is not None:
            while seen and now - seen[0].at > self._span:
                seen.popleft()

    def _observe_rate(self, now: float, report: Report, read: CacheUsage) -> None:
        key = report.prefix_hash
        seen = self._prefixes.get(key)
        if seen is None:  # its first request writes the cache: nothing to judge it by
            self._prefixes[key] = deque(maxlen=self._count)
            if len(self._prefixes) > _HASHES:
                old, _ = self._prefixes.popitem(last=False)
                self._low.discard(old)
            return
        self._prefixes.move_to_end(key)
        cacheable = min(report.prefix_tokens, read.input_tokens)
        seen.append(_Seen(now, cacheable, min(read.cache_read, cacheable)))
        self._prune(seen, now)
        if report.prefix_tokens < self.min_cacheable_tokens or len(seen) < self.min_requests:
            return
        rate = _rate(seen)
        if rate is None or rate >= self.min_hit_rate:
            self._low.discard(key)
            return
        if key in self._low:  # warned already; again once it recovers and falls
            return
        self._low.add(key)
        message = (
            f"prompt-cache hit rate for prefix {key[:12]} ({report.prefix_tokens:,} cacheable "
            f"tokens) is {rate:.0%} over its last {len(seen):,} requests, below "
            f"{self.min_hit_rate:.0%}: the provider is not serving the prefix from its cache"
        )
        record = {"prefix_hash": key, "hit_rate": rate, "requests": len(seen)}
        logger.warning(message, extra={"ctxbudget_cache": record})
        add_event(
            "ctxbudget.cache.hit_rate_low",
            {"ctxbudget.prefix.hash": key, "ctxbudget.cache.hit_rate": rate},
        )

    def _observe_churn(self, now: float, report: Report) -> None:
        sections = report.prefix_sections
        if report.prefix_hash not in self._prefixes:
            changed: tuple[str, ...] = ()
            if self._last is not None:
                names = set(sections) | set(self._last)
                changed = tuple(sorted(n for n in names if sections.get(n) != self._last.get(n)))
            self._new.append(_New(now, changed))
        self._last = sections
        self._prune(self._new, now)
        if len(self._new) <= self.max_new_prefixes:
            self._churning = False
            return
        if self._churning:
            return
        self._churning = True
        which = Counter(name for new in self._new for name in new.changed)
        named = ", ".join(f"{name} {n:,} times" for name, n in which.most_common())
        deploy = "" if self._deploy is None else f" within deploy {self._deploy!r}"
        message = (
            f"{len(self._new):,} new prompt-cache prefixes{deploy} in the window (changed from "
            f"the request before: {named or 'unknown'}): something in it changes per request (the "
            "classic: a timestamp in the system prompt), so every request misses the cache; "
            "move what varies after the cache boundary (memory) or pin it per deploy"
        )
        logger.warning(
            message,
            extra={
                "ctxbudget_cache": {
                    "new_prefixes": len(self._new),
                    "deploy": self._deploy,
                    "changed": dict(which),
                }
            },
        )
        add_event(
            "ctxbudget.cache.prefix_churn",
            {
                "ctxbudget.cache.new_prefixes": len(self._new),
                "ctxbudget.cache.changed_sections": tuple(which),
            },
        )


def _rate(seen: deque[_Seen]) -> float | None:
    cacheable = sum(s.cacheable for s in seen)
    return None if not cacheable else sum(s.cached for s in seen) / cacheable


def _report_of(data: Mapping[str, Any]) -> Report:
    if not isinstance(data, Mapping) or "prefix_hash" not in data:
        raise InputError(
            f"report must be a Report or a report dict with prefix_hash (an assembly's, not "
            f"a selection's or a history trim's: those have no prefix), but got "
            f"{type(data).__name__}"
        )
    return Report.model_validate(data)
