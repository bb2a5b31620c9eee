# Case folding and look-alike characters are the subject of these tests.
# ruff: noqa: RUF001, RUF003
"""Dedup's fast paths (_sources/dedup.py) give exactly what their definitions give.

Words are read from the UTF-8 bytes with one translate and a few replacements instead of
`re.findall(r"\\w+", text.casefold())`, windows are kept as the hashes of their tuples of
words, and a pair is ruled out by set sizes before any intersection. Each is compared here
with the straightforward definition: over arbitrary Unicode, over an alphabet of the
characters that make case folding and `\\w` tricky, over hand-picked edges, and over every
code point for the Unicode facts the fast path relies on.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxbudget._sources.dedup
from ctxbudget import Chunk
from ctxbudget._sources.dedup import (
    _MAX_REWRITES,
    Dedup,
    Deduplicator,
    Shingles,
    _fold,
    _words,
    shingles,
)
from tests.support.cputime import MAX_GROWTH, MAX_RATIO, ORDINARY_ASCII, SIZE, fill, paired_times
from tests.support.factories import recorded

_WORD = re.compile(r"\w+")


def reference_words(text: str) -> list[bytes]:
    """The definition: `\\w+` runs of the case-folded text, each UTF-8 encoded."""
    return [word.encode("utf-8") for word in _WORD.findall(text.casefold())]


def reference_shingles(text: str, size: int) -> frozenset[tuple[str, ...]]:
    """The definition as first written: windows as tuples of the case-folded words."""
    words = _WORD.findall(text.casefold())
    if len(words) <= size:
        return frozenset({tuple(words)}) if words else frozenset()
    return frozenset(zip(*(words[i:] for i in range(size)), strict=False))


def hashed(windows: frozenset[tuple[str, ...]]) -> Shingles:
    """Tuples of words as `shingles` holds them: the hash of the UTF-8 encoded words."""
    return frozenset(hash(tuple(word.encode("utf-8") for word in window)) for window in windows)


def reference_same(candidate: str, kept: str, settings: Dedup) -> bool:
    """The text verdict as first written: intersect, then compare both ratios."""
    mine = reference_shingles(candidate, settings.shingle_size)
    theirs = reference_shingles(kept, settings.shingle_size)
    if (settings.jaccard is None and settings.containment is None) or not mine:
        return False
    inter = len(mine & theirs)
    if not inter:
        return False
    if (
        settings.jaccard is not None
        and inter / (len(mine) + len(theirs) - inter) >= settings.jaccard
    ):
        return True
    return settings.containment is not None and inter / len(mine) >= settings.containment


EDGES = (
    "İıßẞKſﬁﬀŉǰΣσςΐͅ"  # folds that change length, reach ASCII or carry a non-word mark
    "_٣²½ªǅ"  # word characters that are not letters, a titlecase one
    "éÉüÜ\u0301\u200b\ufeff"  # accents, a combining mark, invisible format characters
    "\u00a0\u2028\u3000\x1c\x85"  # whitespace Python splits on but bytes.split does not
    "—–’“”…€🙂東京，。·"  # punctuation, symbols, emoji, CJK
)
"""Characters at the edges of case folding and of `\\w`."""

edgy_text = st.text(
    st.one_of(
        st.characters(codec="ascii"),
        st.sampled_from(string.ascii_letters),
        st.sampled_from(" \t\n"),
        st.sampled_from(EDGES),
    )
)
"""Mostly ASCII, so that the bytes path (not the dense-text fallback) reads it."""

any_text = st.text(st.characters(exclude_categories=()))
"""Any code point, lone surrogates included."""


# --- words --------------------------------------------------------------------------------


@given(text=any_text)
def test_words_equal_the_definition_for_any_text(text: str) -> None:
    assert _words(text) == reference_words(text)


@given(text=edgy_text)
def test_words_equal_the_definition_over_the_edge_alphabet(text: str) -> None:
    assert _words(text) == reference_words(text)


@given(text=st.one_of(any_text, edgy_text))
def test_words_from_bytes_equal_the_definition_for_dense_and_varied_text(text: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ctxbudget._sources.dedup, "_DENSE", 0)
        patch.setattr(ctxbudget._sources.dedup, "_MAX_REWRITES", sys.maxunicode)
        assert _words(text) == reference_words(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " \t\n ",
        "-- !! ..",
        "plain ascii, with PUNCTUATION; and_underscores 42",
        "İstanbul",  # İ folds to i + a combining dot, which is no word character
        "STRASSE Straße STRAẞE",  # ß and ẞ fold to ss
        "ﬁne ﬀ",  # ligatures fold to ASCII letters
        "\u212aelvin",  # the Kelvin sign folds to k
        "ŉ ǰ ΐ",  # folds of two or three characters, with a combining mark
        "ΣΑΣ σας",  # final sigma: case folding has no context
        "a\u0345b",  # a combining mark that is no word character but folds to one (ι)
        "x_y __init__",
        "٣٤ ²½ ª",  # non-ASCII digits, numbers and letters are word characters
        "e\u0301 cafe\u0301",  # a combining accent parts the word
        "a\u00a0b a\u2028b a\u3000b a\x1cb a\x85b",  # whitespace outside ASCII
        "don’t — “quoted” … done",
        "€49.90 and 🙂x🙂",
        "東京（東京）、大阪。",
        "\ud800abc \udfffdef",  # lone surrogates: no UTF-8
        "\x00a\x1fb\x7fc",
        "ǅemal Ǆ",  # a titlecase letter
    ],
)
def test_words_equal_the_definition_on_edges(text: str) -> None:
    assert _words(text) == reference_words(text)


@pytest.mark.parametrize(
    "text",
    [
        "Müller's café in Zürich — €49.90, see §4.2 🙂",
        "Délai de rétractation: 14 jours à compter de la réception.",
        "Die RÜCKERSTATTUNG erfolgt über die ursprüngliche Zahlungsmethode, außer ẞ.",
        "The company’s “refund” policy — it’s simple… don’t worry.",
    ],
)
def test_words_of_mostly_ascii_text_need_no_regex(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = reference_words(text)

    def forbidden(text: str) -> list[bytes]:
        raise AssertionError("read by the regular expression")

    monkeypatch.setattr(ctxbudget._sources.dedup, "_words_by_regex", forbidden)
    assert _words(text) == expected


def test_words_of_dense_non_ascii_text_come_from_the_regex(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "Возврат средств в течение 14 дней"
    calls = recorded(monkeypatch, "ctxbudget._sources.dedup._words_by_regex")
    assert _words(text) == reference_words(text)
    assert calls == [text]


def test_words_with_many_distinct_rewrites_come_from_the_regex(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 80 distinct emoji among mostly ASCII: more rewrites than passes over the text allowed.
    text = " ".join(f"w{i} {chr(0x1F600 + i)}" for i in range(80))
    calls = recorded(monkeypatch, "ctxbudget._sources.dedup._words_by_regex")
    assert _words(text) == reference_words(text)
    assert calls == [text]


# --- linear time on hostile text (as tests/security/test_redos.py measures it) --------------

REWRITTEN = "".join(map(chr, range(0x410, 0x430))) + "ΩΔΘ"
"""Capitals, each rewritten in the bytes: as many as are allowed, and more."""

HOSTILE: dict[str, Callable[[int], str]] = {
    "most-rewrites-allowed": lambda size: fill(
        "".join(f"{c}xx " for c in REWRITTEN[:_MAX_REWRITES]), size
    ),
    "one-rewrite-too-many": lambda size: fill(
        "".join(f"{c}xx " for c in REWRITTEN[: _MAX_REWRITES + 1]), size
    ),
    "dense-non-ascii": lambda size: fill("Возврат средств Прочее ", size),
    "punctuation-only": lambda size: fill("—“”… ", size),
    "one-long-word": lambda size: "a" * size,
    "whitespace-only": lambda size: " " * size,
}


def test_hostile_rewrites_reach_past_the_cap() -> None:
    assert len(set(REWRITTEN)) > _MAX_REWRITES


@pytest.mark.parametrize("shape", HOSTILE.values(), ids=HOSTILE.keys())
def test_shingles_of_hostile_text_cost_about_what_ordinary_text_costs(
    shape: Callable[[int], str],
) -> None:
    hostile, usual = paired_times(shingles, shape(2 * SIZE), fill(ORDINARY_ASCII, 2 * SIZE))
    assert hostile / usual < MAX_RATIO


@pytest.mark.parametrize("shape", HOSTILE.values(), ids=HOSTILE.keys())
def test_shingles_of_hostile_text_four_times_as_long_cost_about_four_times_as_much(
    shape: Callable[[int], str],
) -> None:
    small, large = paired_times(shingles, shape(SIZE), shape(4 * SIZE))
    assert large / small < MAX_GROWTH


# --- the Unicode facts the bytes path relies on, over every code point ----------------------


def test_case_folding_is_idempotent_and_never_empty_for_every_code_point() -> None:
    # So a rewritten character's fold holds no character that another rewrite would change.
    wrong = [
        hex(point)
        for point in range(sys.maxunicode + 1)
        if not (fold := chr(point).casefold()) or fold.casefold() != fold
    ]
    assert wrong == []


def test_fold_keeps_exactly_the_alnum_characters_that_are_their_own_fold() -> None:
    # The bytes path keeps a character when `isalnum() and casefold() == itself`: the same
    # characters `_fold` keeps, since `\w` is `isalnum()` or "_" in Python's re.
    wrong = [
        hex(point)
        for point in range(128, sys.maxunicode + 1)
        if ((c := chr(point)).isalnum() and c.casefold() == c) != (_fold(c) == c)
    ]
    assert wrong == []


# --- shingles -----------------------------------------------------------------------------


@given(text=st.one_of(any_text, edgy_text), size=st.integers(1, 6))
def test_shingles_equal_the_definition(text: str, size: int) -> None:
    windows = reference_shingles(text, size)
    found = shingles(text, size)
    assert found == hashed(windows)
    assert len(found) == len(windows)  # no two windows share a hash


def test_shingles_hold_case_folded_utf8_words() -> None:
    assert shingles("Straße ÜBER Café", 2) == {
        hash((b"strasse", "über".encode())),
        hash(("über".encode(), "café".encode())),
    }


# --- pair verdicts ------------------------------------------------------------------------

vocabulary_text = st.lists(
    st.sampled_from(["refund", "Order", "days", "the", "item", "é", "—"]), max_size=40
).map(" ".join)
threshold = st.one_of(
    st.none(),
    st.sampled_from([0.1, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 0.9, 1.0]),
    st.floats(min_value=0.0, max_value=1.0, exclude_min=True),
)


@given(
    candidate=vocabulary_text,
    kept=vocabulary_text,
    jaccard=threshold,
    containment=threshold,
    size=st.integers(1, 4),
)
def test_pair_verdicts_equal_the_definition(
    candidate: str, kept: str, jaccard: float | None, containment: float | None, size: int
) -> None:
    settings = Dedup(jaccard=jaccard, containment=containment, cosine=None, shingle_size=size)
    chunks = Chunk(id="c", content=candidate or "x"), Chunk(id="k", content=kept or "x")
    found = Deduplicator(settings).duplicates(chunks[0], [chunks[1]])
    expected = reference_same(chunks[0].content, chunks[1].content, settings)
    assert (found is chunks[1]) is expected


def test_pair_of_a_subset_at_exactly_the_jaccard_threshold_is_duplicate() -> None:
    # 2 shingles, all inside the kept chunk's 4: Jaccard 2 / 4 = 0.5, the size bound's own value.
    candidate = Chunk(id="c", content="w1 w2 w3 w4 w5 w6")
    kept = Chunk(id="k", content="w0 w1 w2 w3 w4 w5 w6 w7")
    settings = Dedup(jaccard=0.5, containment=None)
    assert Deduplicator(settings).duplicates(candidate, [kept]) is kept


@given(
    candidate=vocabulary_text,
    kept=st.lists(vocabulary_text, min_size=1, max_size=5),
    jaccard=threshold,
    containment=threshold,
)
def test_verdicts_against_several_kept_equal_the_first_pair_by_definition(
    candidate: str, kept: list[str], jaccard: float | None, containment: float | None
) -> None:
    settings = Dedup(jaccard=jaccard, containment=containment, cosine=None, shingle_size=2)
    chunk = Chunk(id="c", content=candidate or "x")
    others = [Chunk(id=f"k{i}", content=text or "x") for i, text in enumerate(kept)]
    expected = next((o for o in others if reference_same(chunk.content, o.content, settings)), None)
    assert Deduplicator(settings).duplicates(chunk, others) is expected
