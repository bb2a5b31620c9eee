"""`TextCache`, `RewriteCache` and `HeaderCache`: bounded LRUs of what is computed from text
alone, and the text key they share."""

from __future__ import annotations

import pytest

from ctxbudget._sources.render import HeaderCache
from ctxbudget._textcache import SHORT_TEXT, RewriteCache, TextCache, text_key


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


class RecordingRewrite:
    """A pure rewrite that upper-cases "x" and records every text it was given."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> str:
        self.calls.append(text)
        return text.replace("x", "X")


def test_rewrite_cache_rewritten_with_repeated_text_rewrites_once() -> None:
    cache = RewriteCache(maxsize=16)
    rewrite = RecordingRewrite()
    assert [cache.rewritten("a x", rewrite) for _ in range(3)] == ["a X"] * 3
    assert rewrite.calls == ["a x"]


def test_rewrite_cache_rewritten_with_unchanged_text_returns_the_text_itself() -> None:
    cache = RewriteCache(maxsize=16)
    text = "".join(["no change ", "here"])  # a new object, not an interned constant
    cache.rewritten(text, RecordingRewrite())
    assert cache.rewritten(text, RecordingRewrite()) is text


def test_rewrite_cache_rewritten_keeps_no_copy_of_unchanged_text() -> None:
    cache = RewriteCache(maxsize=16)
    cache.rewritten("plain", RecordingRewrite())
    assert list(cache.values()) == [None]


def test_rewrite_cache_rewritten_keeps_each_rewrite_apart() -> None:
    cache = RewriteCache(maxsize=16)
    cache.rewritten("x", RecordingRewrite())
    assert cache.rewritten("x", str.upper) == "X"
    assert cache.rewritten("ax", lambda t: t[::-1]) == "xa"


def test_rewrite_cache_rewritten_at_maxsize_rewrites_least_recently_used_text_again() -> None:
    cache = RewriteCache(maxsize=2)
    rewrite = RecordingRewrite()
    for text in ["a", "b", "a", "c", "b"]:  # "c" evicts "b", the least recently used
        cache.rewritten(text, rewrite)
    assert rewrite.calls == ["a", "b", "c", "b"]


def test_text_key_of_a_short_text_is_the_text_and_of_a_long_one_a_digest() -> None:
    short, long = "s" * SHORT_TEXT, "l" * (SHORT_TEXT + 1)
    assert text_key(short) is short
    assert isinstance(text_key(long), bytes)
    assert len(text_key(long)) == 16
