"""Exact join counting (_joins.py) for the open-weight vocabularies, against a full encode.

The same three layers as tests/core/test_joins.py, on Llama 3 (cl100k's pattern without
possessive loops), Llama 4 (o200k's), Qwen 2.5/3 (single digits) and Qwen 3.5 (marks count as
letters), whose tokenizers normalize to NFC first: hypothesis compares joined counts with full
encodes on adversarial alphabets (with characters NFC composes across a join), every hard
pair splits real counts for (a stride through) every code point of its classes, and the
verification mode covers each family. Skipped where an extra is absent.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxbudget._joins
from ctxbudget import TiktokenTokenizer, get_tokenizer
from ctxbudget import _vocab as vocab
from ctxbudget._joins import Counted, JoinCounter, Piece, hard, join_counter, stable
from ctxbudget._tokens import VERIFY_JOINS
from ctxbudget.types import CountCache
from tests.support.join_cases import CONTEXTS, FRAGMENTS, SEPARATORS, roles, stride

FAMILIES = ["llama3", "llama4", "qwen2.5", "qwen3.5"]
"""One vocabulary per split pattern (qwen3 shares qwen2.5's file and pattern)."""

COMPOSING = [
    "e", "\u0301", "\u0327", "a\u030a", "\u212b", "\u2126", "\u037e", "\u0344", "\uf900",
    "\u1100", "\u1161", "\u11a8", "\uac00", "\u0b47", "\u0b3e", "\u0cbf", "\u0cd5",
    "\u09c7", "\u09be", "\u0dd9", "\u0dca", "\U00011347", "\U0001133e",
]  # fmt: skip
"""Characters NFC composes, decomposes or reorders: combining marks, precomposed letters,
singletons, Hangul jamo, Indic vowel signs that compose with the sign before them."""

fragment = st.sampled_from(FRAGMENTS + COMPOSING)
adversarial = st.lists(fragment, max_size=12).map("".join)
long_run = st.tuples(fragment, st.integers(16, 160)).map(lambda r: r[0] * r[1])
texts = st.one_of(
    adversarial,
    st.text(max_size=40),
    long_run,
    st.lists(long_run | adversarial, max_size=4).map("".join),
)
surrogate = st.integers(0xD800, 0xDFFF).map(chr)


def _skip_without(name: str) -> pytest.MarkDecorator:
    v = vocab.VOCABULARIES[name]
    return pytest.mark.skipif(
        not vocab.available(name),
        reason=f"the {v.extra} extra ({v.distribution}) is not installed: {v.install}",
    )


families = pytest.mark.parametrize(
    "family", [pytest.param(name, marks=_skip_without(name)) for name in FAMILIES]
)


def tokenizer(family: str) -> TiktokenTokenizer:
    found = get_tokenizer(family)
    assert isinstance(found, TiktokenTokenizer)
    return found


def full(family: str, text: str) -> int:
    return tokenizer(family).count(text)


def joined(family: str, pieces: list[Piece]) -> int:
    return CountCache(tokenizer(family)).count_joined(pieces)


def cuts(family: str, x: str, y: str) -> bool:
    """Whether the counter of `family` may cut between `x` and `y`."""
    return hard(x, y) and (tokenizer(family).normalization is None or stable(y))


@pytest.fixture(autouse=True)
def verified(monkeypatch: pytest.MonkeyPatch) -> None:
    # These tests compare with a full encode themselves; one below checks the mode.
    monkeypatch.delenv(VERIFY_JOINS, raising=False)


@families
def test_join_counter_admits_the_vocabularys_pattern(family: str) -> None:
    assert isinstance(join_counter(tokenizer(family).encoding), JoinCounter)


@families
@given(a=texts, separator=st.sampled_from(SEPARATORS), b=texts)
def test_joined_count_of_two_parts_and_a_separator_equals_full_encode(
    family: str, a: str, separator: str, b: str
) -> None:
    assert joined(family, [a, separator, b]) == full(family, a + separator + b)


@families
@given(parts=st.lists(texts, max_size=8), separator=st.sampled_from(SEPARATORS))
def test_joined_count_of_many_parts_equals_full_encode(
    family: str, parts: list[str], separator: str
) -> None:
    pieces: list[Piece] = []
    for part in parts:
        pieces += [separator, part] if pieces else [part]
    assert joined(family, pieces) == full(family, separator.join(parts))


@families
@given(parts=st.lists(st.lists(texts | surrogate, max_size=4).map("".join), max_size=5))
def test_joined_count_with_lone_surrogates_equals_full_encode(
    family: str, parts: list[str]
) -> None:
    assert joined(family, list(parts)) == full(family, "".join(parts))


@families
@given(text=texts)
def test_split_at_every_position_the_counter_cuts_keeps_the_count(family: str, text: str) -> None:
    whole = full(family, text)
    for index in range(1, len(text)):
        if cuts(family, text[index - 1], text[index]):
            assert full(family, text[:index]) + full(family, text[index:]) == whole


@families
@given(parts=st.lists(texts, min_size=1, max_size=5), error=st.integers(-3, 3))
def test_joined_count_uses_ingest_counts_as_given(
    family: str, parts: list[str], error: int
) -> None:
    counter = CountCache(tokenizer(family))
    at = len(parts) // 2
    middle = parts[at]
    claimed = full(family, middle) + error
    pieces: list[Piece] = [Counted(p, claimed) if i == at else p for i, p in enumerate(parts)]
    joins = join_counter(tokenizer(family).encoding, tokenizer(family).normalization)
    assert joins is not None
    used = joins.measure(middle).measured  # else its text is counted in a window
    assert counter.count_joined(pieces) == full(family, "".join(parts)) + (error if used else 0)


@families
def test_every_hard_pair_splits_the_count_for_every_class_member(family: str) -> None:
    found = tokenizer(family)
    pairs = [(x, y) for x, y in roles(stride()) if cuts(family, x, y)]
    whole, left, right = [], [], []
    for index, (x, y) in enumerate(pairs):
        before, after = CONTEXTS[index % len(CONTEXTS)]
        whole.append(before + x + y + after)
        left.append(before + x)
        right.append(y + after)
    if found.normalization is not None:
        whole, left, right = (
            [unicodedata.normalize(found.normalization, text) for text in batch]
            for batch in (whole, left, right)
        )
    counts = [
        list(map(len, found.encoding.encode_ordinary_batch(batch, num_threads=2)))
        for batch in (whole, left, right)
    ]
    wrong = [
        (whole[i], counts[0][i], counts[1][i] + counts[2][i])
        for i in range(len(pairs))
        if counts[0][i] != counts[1][i] + counts[2][i]
    ]
    assert len(pairs) > 1_000
    assert wrong == []


@pytest.mark.parametrize(
    ("char", "is_stable"),
    [
        ("a", True),
        (" ", True),
        ("\uac00", True),  # a precomposed Hangul syllable starts a new one
        ("\u0301", False),  # a combining mark
        ("\u1161", False),  # a Hangul vowel composes with the consonant before it
        ("\u11a8", False),  # and a final consonant with the syllable before it
        ("\u0cd5", False),  # a Kannada length mark composes with the vowel sign before it
        ("\u212b", False),  # ANGSTROM SIGN: NFC maps it to another character
    ],
)
def test_stable_characters_are_starters_nfc_keeps_apart(char: str, is_stable: bool) -> None:
    assert stable(char) is is_stable


def test_characters_that_compose_backward_are_found_in_every_plane() -> None:
    found = ctxbudget._joins._composes_backward()
    assert {"\u1161", "\u11a8", "\u0cd5", "\u0b3e", "\U0001133e"} <= found
    assert all(unicodedata.combining(char) == 0 for char in found)


@_skip_without("qwen2.5")
def test_qwen_counter_never_cuts_before_a_character_nfc_may_compose() -> None:
    # "1" then a combining mark is a hard pair, but NFC could merge across it: no cut there.
    joins = join_counter(tokenizer("qwen2.5").encoding, "NFC")
    assert joins is not None
    text = "1\u0301" * 40

    assert hard("1", "\u0301")
    assert joins.measure("1\u0301").first == -1
    assert joins.measure(text).first == 2  # after the mark, before the next digit
    assert joined("qwen2.5", [text, " ", text]) == full("qwen2.5", text + " " + text)


@families
def test_verify_mode_raises_when_the_joins_are_wrong(
    monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    monkeypatch.setenv(VERIFY_JOINS, "1")
    monkeypatch.setattr(JoinCounter, "total", lambda self, parts: 1)
    with pytest.raises(
        RuntimeError, match=rf"counted 1 tokens by their joins but a full {family} encode gives"
    ):
        CountCache(tokenizer(family)).count_joined(["Hello", " world", "!!"])
