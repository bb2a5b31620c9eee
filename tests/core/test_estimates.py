"""Upper-bound counts for Claude and Gemini (core/ctxbudget/_estimates.py).

The best offline reference for Claude's counts is the ratio of Claude's count to o200k's per
kind of text. ctok 1.3 (a reconstruction of Claude's counts from recorded API answers) would
be a better one, but it needs Python >= 3.12 and this suite runs on 3.11, so the reference
here is ctok's published ratios from the tokenizers-beyond-openai note (section 3.5), stated
below on their own, not read from the code under test. Gemini has no offline reference at all.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    ContextAssembler,
    EstimateTokenizer,
    TiktokenTokenizer,
    count_method_of,
    get_tokenizer,
)
from ctxbudget.types import CountCache
from tests.support.factories import chunk

# Claude's count over o200k's on the note's samples (ctok v3, v4.7, v4.8; section 3.5).
# "english" is the larger of the English prose and GPL-3 figures, "code" of the snippet and
# json/decoder.py.
PUBLISHED = {
    "claude-sonnet-4-5": {"english": 1.08, "code": 1.26, "zh": 1.74, "ja": 1.27, "emoji": 1.75},
    "claude-opus-4-7": {"english": 1.59, "code": 1.68, "zh": 1.81, "ja": 1.33, "emoji": 1.96},
    "claude-opus-4-8": {"english": 1.55, "code": 1.64, "zh": 1.70, "ja": 1.24, "emoji": 1.87},
}
MODELS = sorted(PUBLISHED)

O200K = get_tokenizer("o200k_base")

_PROSE = (
    "the refund policy is paid within five business days of receiving item customer support "
    "warehouse shipping order account password reset manager approved budget quarter report "
    "however although because therefore international"
)
_WORDS = _PROSE.split()
_IDENTIFIERS = ["x", "items", "total", "self", "count", "result", "_cache", "node", "value"]
_CODE_LINES = [
    "def {0}({1}):",
    "    return {0} + {1}",
    "    for {0} in {1}:",
    "        {0}[{1}] = {0}.get({1}, 0) + 1",
    "class {0}:",
    "    # {0} is cached per {1}",
    "if {0} is None and {1} > 10:",
    '    raise ValueError(f"{{{0}}} must be > 0, got {{{1}}}")',
    "{0} = [{1} for {1} in range(100)]",
]
_HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_KANA = st.characters(min_codepoint=0x3041, max_codepoint=0x30FA)
_EMOJI = st.one_of(
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
    st.sampled_from(
        [
            "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # family: ZWJ sequence
            "\U0001f1eb\U0001f1f7",  # a flag: two regional indicators
            "\U0001f44d\U0001f3fd",  # a skin tone
            "1\ufe0f\u20e3",  # a keycap
            "\u2764\ufe0f",  # a heart with its emoji presentation selector
        ]
    ),
)


def _english() -> st.SearchStrategy[str]:
    sentence = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=20).map(
        lambda words: " ".join(words).capitalize() + "."
    )
    return st.lists(sentence, min_size=1, max_size=8).map(" ".join)


def _code() -> st.SearchStrategy[str]:
    line = st.tuples(
        st.sampled_from(_CODE_LINES), st.sampled_from(_IDENTIFIERS), st.sampled_from(_IDENTIFIERS)
    ).map(lambda t: t[0].format(t[1], t[2]))
    return st.lists(line, min_size=1, max_size=15).map("\n".join)


KINDS: dict[str, st.SearchStrategy[str]] = {
    "english": _english(),
    "code": _code(),
    "zh": st.lists(st.one_of(_HAN, st.sampled_from("\uff0c\u3002")), min_size=1, max_size=80).map(
        "".join
    ),
    "ja": st.lists(
        st.one_of(_KANA, _HAN, st.sampled_from("\u3001\u3002")), min_size=1, max_size=80
    ).map("".join),
    "emoji": st.lists(_EMOJI, min_size=1, max_size=40).map("".join),
}


def reference(model: str, kind: str, text: str) -> int:
    """The published ratio for this kind of text times o200k's count, rounded up."""
    return math.ceil(PUBLISHED[model][kind] * O200K.count(text))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("model", MODELS)
@given(data=st.data())
def test_estimate_is_never_below_the_published_ratio_for_the_kind_of_text(
    model: str, kind: str, data: st.DataObject
) -> None:
    text = data.draw(KINDS[kind])

    assert get_tokenizer(model).count(text) >= reference(model, kind, text)


@pytest.mark.parametrize("model", MODELS)
@given(
    segments=st.lists(
        st.sampled_from(sorted(KINDS)).flatmap(lambda k: KINDS[k].map(lambda t: (k, t))),
        min_size=2,
        max_size=6,
    )
)
def test_estimate_of_mixed_text_is_never_below_its_kinds_ratios_summed(
    model: str, segments: list[tuple[str, str]]
) -> None:
    text = "\n\n".join(t for _, t in segments)

    expected = sum(PUBLISHED[model][k] * O200K.count(t) for k, t in segments)

    assert get_tokenizer(model).count(text) >= math.ceil(expected)


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.5-pro"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@given(data=st.data())
def test_gemini_estimate_is_at_least_the_largest_ratio_measured_for_any_family(
    model: str, kind: str, data: st.DataObject
) -> None:
    # No Gemini ratio was ever measured offline: it takes the largest one measured.
    text = data.draw(KINDS[kind])
    largest = max(PUBLISHED[m][kind] for m in MODELS)

    assert get_tokenizer(model).count(text) >= math.ceil(largest * O200K.count(text))


@pytest.mark.parametrize("model", [*MODELS, "gemini-2.5-flash"])
@given(text=st.text())
def test_estimate_of_any_text_is_at_least_o200k(model: str, text: str) -> None:
    assert get_tokenizer(model).count(text) >= O200K.count(text)


@given(text=st.text())
def test_estimate_lower_bound_is_at_most_its_count(text: str) -> None:
    counter = CountCache(get_tokenizer("claude-sonnet-4-5"))

    assert counter.lower_bound(text) <= counter.count(text)


def test_estimate_of_latin_text_is_its_bound_times_o200k() -> None:
    text = "Refunds are paid within 5 business days of receiving the item."

    # 1.26 (the worst Latin-script ratio of Claude 3 to 4.6) plus 10%: 1.386.
    assert get_tokenizer("claude-sonnet-4-5").count(text) == math.ceil(1.386 * O200K.count(text))


def test_estimate_of_empty_text_is_zero() -> None:
    assert get_tokenizer("claude-sonnet-4-5").count("") == 0


@pytest.mark.parametrize(
    ("model", "label"),
    [
        ("claude-sonnet-4-5", "estimate:claude-v3"),
        ("claude-opus-4-7", "estimate:claude-v4.7"),
        ("claude-opus-4-8", "estimate:claude-v4.8"),
        ("gemini-2.5-flash", "estimate:gemini"),
    ],
)
def test_estimate_is_labelled_inexact_with_its_margin(model: str, label: str) -> None:
    tokenizer = get_tokenizer(model)
    method = count_method_of(tokenizer)

    assert isinstance(tokenizer, EstimateTokenizer)
    assert (tokenizer.name, method.label, method.exact, method.margin) == (label, label, False, 0.1)


def test_estimate_by_its_label_is_the_same_tokenizer() -> None:
    tokenizer = get_tokenizer("claude-sonnet-4-5")

    assert get_tokenizer(tokenizer.name) is tokenizer


def test_estimate_is_not_joined_from_parts() -> None:
    # Join counting holds for tiktoken's own encodings only: an estimate counts the whole text.
    assert not isinstance(get_tokenizer("claude-sonnet-4-5"), TiktokenTokenizer)


def test_estimate_keeps_the_assembled_prompt_within_budget() -> None:
    assembler = ContextAssembler(tokenizer="claude-sonnet-4-5")
    chunks = [
        chunk(id=f"c{i}", content=f"{_WORDS[i]} \u4e2d\u6587 \U0001f389 " * 200) for i in range(20)
    ]

    result = assembler.assemble(question="What is the refund policy?", chunks=chunks)

    assert result.sources
    assert get_tokenizer("claude-sonnet-4-5").count(result.text) == result.report.total
    assert result.report.total <= assembler.budget.available
