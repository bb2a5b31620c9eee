"""Ingest counts in framework metadata (_ingest.py): read back only for the very text,
tokenizer and count that ctxbudget's own ingest stored; anything else is counted again."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    INGEST_COUNT_KEYS,
    CallableTokenizer,
    TiktokenTokenizer,
    TokenizerError,
    ingest_count,
    ingest_metadata,
)
from ctxbudget._ingest import DIGEST_KEY, TOKENIZER_KEY, TOKENS_KEY, count_digest
from tests.support.tokenizers import fake_count

TEXT = "Refunds take 14 days from delivery; gift cards are final."


def test_ingest_count_reads_back_what_ingest_metadata_stored(o200k: TiktokenTokenizer) -> None:
    metadata = ingest_metadata(TEXT, o200k)

    assert ingest_count(metadata, TEXT, o200k.name) == o200k.count(TEXT)


def test_ingest_metadata_is_flat_str_and_int_values_under_its_keys(
    o200k: TiktokenTokenizer,
) -> None:
    metadata = ingest_metadata(TEXT, o200k)

    assert tuple(metadata) == INGEST_COUNT_KEYS
    assert metadata[TOKENS_KEY] == o200k.count(TEXT)
    assert metadata[TOKENIZER_KEY] == "o200k_base"
    assert isinstance(metadata[DIGEST_KEY], str)


def test_ingest_count_beside_other_metadata_is_read(o200k: TiktokenTokenizer) -> None:
    metadata = {"title": "Refunds", "tokens": 3, **ingest_metadata(TEXT, o200k)}

    assert ingest_count(metadata, TEXT, o200k.name) == o200k.count(TEXT)


def test_ingest_count_of_a_changed_text_is_none(o200k: TiktokenTokenizer) -> None:
    metadata = ingest_metadata(TEXT, o200k)

    assert ingest_count(metadata, TEXT + " Except sale items.", o200k.name) is None


def test_ingest_count_for_another_tokenizer_is_none(
    o200k: TiktokenTokenizer, cl100k: TiktokenTokenizer
) -> None:
    metadata = ingest_metadata(TEXT, o200k)

    assert ingest_count(metadata, TEXT, cl100k.name) is None


def test_ingest_count_relabelled_as_another_tokenizer_is_none(
    o200k: TiktokenTokenizer, cl100k: TiktokenTokenizer
) -> None:
    metadata = {**ingest_metadata(TEXT, o200k), TOKENIZER_KEY: cl100k.name}

    assert ingest_count(metadata, TEXT, cl100k.name) is None


def test_ingest_count_with_a_forged_digest_is_none(o200k: TiktokenTokenizer) -> None:
    metadata = {**ingest_metadata(TEXT, o200k), DIGEST_KEY: "0" * 32}

    assert ingest_count(metadata, TEXT, o200k.name) is None


def test_ingest_count_changed_beside_its_digest_is_none(o200k: TiktokenTokenizer) -> None:
    # The count a document claims for itself: the digest of its real count does not vouch.
    metadata = {**ingest_metadata(TEXT, o200k), TOKENS_KEY: 1}

    assert ingest_count(metadata, TEXT, o200k.name) is None


def test_ingest_count_copied_from_another_text_is_none(o200k: TiktokenTokenizer) -> None:
    # A document's metadata, copied onto a node cut from it.
    metadata = ingest_metadata(TEXT + " " + TEXT, o200k)

    assert ingest_count(metadata, TEXT, o200k.name) is None


@pytest.mark.parametrize("count", [True, False, -1, "12", 12.0, None, [12]])
def test_ingest_count_that_is_not_a_count_is_none(count: Any) -> None:
    # With a digest made for the value by hand: only the value itself is wrong.
    metadata = {
        TOKENS_KEY: count,
        TOKENIZER_KEY: "twelve",
        DIGEST_KEY: count_digest(TEXT, "twelve", count),
    }

    assert ingest_count(metadata, TEXT, "twelve") is None


class Broken:
    """A tokenizer (by the protocol alone) whose count is no count."""

    def __init__(self, count: object) -> None:
        self._count = count

    @property
    def name(self) -> str:
        return "broken"

    def count(self, text: str) -> int:
        return self._count  # type: ignore[return-value]


@pytest.mark.parametrize("count", [-1, True, 2.5, "3"])
def test_ingest_metadata_refuses_a_count_that_is_not_one(count: object) -> None:
    with pytest.raises(
        TokenizerError,
        match=rf"^tokenizer 'broken' returned {re.escape(repr(count))} for a 57-character text; "
        r"a token count must be an int >= 0$",
    ):
        ingest_metadata(TEXT, Broken(count))


@pytest.mark.parametrize("key", INGEST_COUNT_KEYS)
def test_ingest_count_missing_a_key_is_none(key: str, o200k: TiktokenTokenizer) -> None:
    metadata = ingest_metadata(TEXT, o200k)
    del metadata[key]

    assert ingest_count(metadata, TEXT, o200k.name) is None


def test_ingest_count_of_empty_metadata_is_none() -> None:
    assert ingest_count({}, TEXT, "o200k_base") is None


def test_ingest_count_zero_for_an_empty_text_stands(o200k: TiktokenTokenizer) -> None:
    assert ingest_count(ingest_metadata("", o200k), "", o200k.name) == 0


def test_ingest_metadata_of_a_text_with_a_lone_surrogate_round_trips() -> None:
    tokenizer = CallableTokenizer(fake_count, name="fake-words")
    text = "broken \ud800 pdf text"

    assert ingest_count(ingest_metadata(text, tokenizer), text, tokenizer.name) == fake_count(text)


def test_ingest_count_does_not_change_the_metadata(o200k: TiktokenTokenizer) -> None:
    metadata = ingest_metadata(TEXT, o200k)
    before = dict(metadata)
    ingest_count(metadata, TEXT + "!", o200k.name)

    assert metadata == before


FAKE = CallableTokenizer(fake_count, name="fake-words")


@given(st.text(max_size=200), st.text(max_size=200))
def test_ingest_count_stands_for_exactly_the_text_it_was_made_for(text: str, other: str) -> None:
    metadata = ingest_metadata(text, FAKE)

    assert ingest_count(metadata, text, FAKE.name) == fake_count(text)
    assert ingest_count(metadata, other, FAKE.name) == (fake_count(text) if other == text else None)


@given(st.text(max_size=100), st.integers(-5, 10_000), st.sampled_from(INGEST_COUNT_KEYS))
def test_ingest_count_with_any_value_changed_is_none_or_the_same(
    text: str, value: int, key: str
) -> None:
    metadata: dict[str, Any] = ingest_metadata(text, FAKE)
    changed = {**metadata, key: value}

    found = ingest_count(changed, text, FAKE.name)

    assert found is None or (changed == metadata and found == fake_count(text))
