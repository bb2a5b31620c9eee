"""`TextCache` and `HeaderCache`: bounded LRUs of what is computed from text alone."""

from __future__ import annotations

import pytest

from ctxbudget._sources.render import HeaderCache
from ctxbudget._textcache import TextCache


def test_text_cache_hit_does_not_compute_again() -> None:
    cache: TextCache[str, str] = TextCache(maxsize=2)
    assert cache.get("a", lambda: "A") == "A"
    assert cache.get("a", lambda: "other") == "A"
    assert cache.calls == 1


def test_text_cache_holds_a_none_value() -> None:
    cache: TextCache[str, str | None] = TextCache(maxsize=2)
    cache.get("a", lambda: None)
    assert cache.get("a", lambda: "computed") is None
    assert cache.calls == 1


def test_text_cache_at_maxsize_drops_least_recently_used() -> None:
    cache: TextCache[str, str] = TextCache(maxsize=2)
    cache.get("a", lambda: "a")
    cache.get("b", lambda: "b")
    cache.get("a", lambda: "a")  # "b" is now the least recently used
    cache.get("c", lambda: "c")
    assert cache.values() == ["a", "c"]
    assert len(cache) == 2


def test_text_cache_of_size_zero_holds_nothing() -> None:
    cache: TextCache[str, str] = TextCache(maxsize=0)
    assert cache.get("a", lambda: "A") == "A"
    assert len(cache) == 0
    assert cache.calls == 1


def test_text_cache_negative_maxsize_rejected() -> None:
    with pytest.raises(ValueError, match="maxsize must be >= 0, but got -1"):
        TextCache(maxsize=-1)


def test_header_cache_negative_maxsize_rejected() -> None:
    with pytest.raises(ValueError, match="maxsize must be >= 0, but got -1"):
        HeaderCache(maxsize=-1)
