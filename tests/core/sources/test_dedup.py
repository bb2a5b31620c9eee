"""Near-duplicate detection (_sources/dedup.py): shingle Jaccard, containment, embedding cosine.

The precision tests build a corpus of distinct passages and near-copies of each
(boilerplate header/footer, whitespace and case changes, sub-windows): every copy
must go, and no distinct passage may.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from typing import Any, TypedDict

import pytest
from pydantic import ValidationError

import ctxbudget._sources.dedup
from ctxbudget import (
    Assembled,
    Chunk,
    ContextAssembler,
    Dropped,
    SourceOptions,
    TiktokenTokenizer,
)
from ctxbudget._sources.dedup import Dedup, Deduplicator, Shingles, cosine, jaccard, shingles
from tests.support.factories import budget_for

OFF = Dedup(jaccard=None, containment=None, cosine=None)


def words(prefix: str, n: int, start: int = 0) -> str:
    return " ".join(f"{prefix}{i}" for i in range(start, start + n))


def chunk(id: str, content: str, **fields: Any) -> Chunk:
    return Chunk(id=id, content=content, **fields)


def assembler(
    o200k: TiktokenTokenizer, *, dedup: Dedup | None = None, retrieved_max: int | None = None
) -> ContextAssembler:
    return ContextAssembler(
        tokenizer=o200k,
        budget=budget_for("retrieved", retrieved_max, total=100_000),
        sources=SourceOptions(dedup=Dedup() if dedup is None else dedup),
    )


def kept_ids(result: Assembled) -> set[str]:
    return {s.chunk.id for s in result.sources}


def ids_dropped(result: Assembled, reason: str) -> set[str]:
    return {d.id for d in result.report.dropped if d.reason == reason}


# --- shingles -----------------------------------------------------------------------------


def test_shingles_one_per_window() -> None:
    assert len(shingles(words("w", 12))) == 12 - 5 + 1


def test_shingles_case_folded() -> None:
    assert shingles("The Quick Brown Fox Jumps Over") == shingles("the quick brown fox jumps over")


def test_shingles_ignore_punctuation_and_whitespace() -> None:
    assert shingles("one, two;  three\n\tfour - five! six") == shingles(
        "one two three four five six"
    )


def test_shingles_short_text_gives_one_shingle() -> None:
    assert len(shingles("just three words")) == 1
    assert shingles("just three words") != shingles("just four words")


def test_shingles_exactly_size_words_gives_one_shingle() -> None:
    assert len(shingles(words("w", 5))) == 1


def test_shingles_no_words_gives_empty_set() -> None:
    assert shingles("") == frozenset()
    assert shingles(" -- !! ") == frozenset()


def test_shingles_size_parameter() -> None:
    assert len(shingles(words("w", 10), size=2)) == 9


# --- jaccard ------------------------------------------------------------------------------


# One-word shingles, for the set arithmetic of jaccard.
A, B, C, D = 1, 2, 3, 4


def test_jaccard_identical_is_one() -> None:
    s = shingles(words("w", 20))

    assert jaccard(s, s) == 1.0


def test_jaccard_disjoint_is_zero() -> None:
    assert jaccard(frozenset({A, B}), frozenset({C, D})) == 0.0


def test_jaccard_partial_overlap() -> None:
    assert jaccard(frozenset({A, B, C}), frozenset({B, C, D})) == 0.5


def test_jaccard_empty_is_zero() -> None:
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset({A}), frozenset()) == 0.0


# --- cosine -------------------------------------------------------------------------------


def test_cosine_identical_direction_is_one() -> None:
    assert cosine((1.0, 2.0, 3.0), (2.0, 4.0, 6.0)) == pytest.approx(1.0)


def test_cosine_orthogonal_is_zero() -> None:
    assert cosine((1.0, 0.0), (0.0, 1.0)) == 0.0


def test_cosine_opposite_is_minus_one() -> None:
    assert cosine((1.0, 0.0), (-1.0, 0.0)) == -1.0


def test_cosine_zero_vector_is_zero() -> None:
    assert cosine((0.0, 0.0), (1.0, 1.0)) == 0.0


def test_cosine_length_mismatch_is_zero() -> None:
    assert cosine((1.0, 0.0), (1.0, 0.0, 0.0)) == 0.0


# --- Dedup settings -----------------------------------------------------------------------


def test_dedup_defaults() -> None:
    settings = Dedup()

    assert (settings.jaccard, settings.containment, settings.cosine) == (0.5, 0.9, 0.90)
    assert settings.shingle_size == 5


@pytest.mark.parametrize("field", ["jaccard", "containment", "cosine"])
def test_dedup_threshold_zero_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match=rf"{field}\n\s+Input should be greater than 0"):
        Dedup(**{field: 0})


@pytest.mark.parametrize("field", ["jaccard", "containment", "cosine"])
def test_dedup_threshold_negative_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match=rf"{field}\n\s+Input should be greater than 0"):
        Dedup(**{field: -0.5})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["jaccard", "containment", "cosine"])
def test_dedup_threshold_above_one_rejected(field: str) -> None:
    with pytest.raises(
        ValidationError, match=rf"{field}\n\s+Input should be less than or equal to 1"
    ):
        Dedup(**{field: 1.5})  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["jaccard", "containment", "cosine"])
def test_dedup_threshold_one_accepted(field: str) -> None:
    assert getattr(Dedup(**{field: 1}), field) == 1


def test_dedup_shingle_size_zero_rejected() -> None:
    with pytest.raises(
        ValidationError, match=r"shingle_size\n\s+Input should be greater than or equal to 1"
    ):
        Dedup(shingle_size=0)


def test_dedup_unknown_option_rejected() -> None:
    with pytest.raises(ValidationError, match=r"threshold\n\s+Extra inputs are not permitted"):
        Dedup(threshold=0.5)  # type: ignore[call-arg]


# --- Deduplicator -------------------------------------------------------------------------


def test_deduplicator_nothing_kept_is_not_duplicate() -> None:
    assert Deduplicator(Dedup()).duplicates(chunk("a", words("w", 30)), []) is None


def test_deduplicator_returns_the_kept_chunk_duplicated() -> None:
    kept = [chunk("x", words("x", 30)), chunk("a", words("w", 30))]

    assert Deduplicator(Dedup()).duplicates(chunk("b", words("w", 30)), kept) is kept[1]


def test_deduplicator_jaccard_at_threshold_is_duplicate() -> None:
    # 13 words -> 9 shingles each; sharing 6 of them: 6 / (9 + 9 - 6) = 0.5.
    a = chunk("a", words("w", 13))
    b = chunk("b", words("w", 13, start=3))
    settings = Dedup(containment=None)

    assert Deduplicator(settings).duplicates(b, [a]) is a


def test_deduplicator_jaccard_below_threshold_is_distinct() -> None:
    # Sharing 5 of 9 shingles: 5 / 13 < 0.5.
    a = chunk("a", words("w", 13))
    b = chunk("b", words("w", 13, start=4))

    assert Deduplicator(Dedup(containment=None)).duplicates(b, [a]) is None


def test_deduplicator_containment_catches_short_sub_window() -> None:
    # 30 words out of 100: Jaccard 26/96 is low, but all of the window is inside the kept chunk.
    base = chunk("base", words("w", 100))
    window = chunk("window", words("w", 30, start=35))

    assert jaccard(shingles(base.content), shingles(window.content)) < 0.5
    assert Deduplicator(Dedup()).duplicates(window, [base]) is base


def test_deduplicator_containment_off_keeps_short_sub_window() -> None:
    base = chunk("base", words("w", 100))
    window = chunk("window", words("w", 30, start=35))

    assert Deduplicator(Dedup(containment=None)).duplicates(window, [base]) is None


def test_deduplicator_containment_is_of_the_candidate_not_the_kept() -> None:
    # The kept chunk sits inside the candidate: the candidate adds text, so it is not a copy.
    short = chunk("short", words("w", 30, start=35))
    long = chunk("long", words("w", 100))

    assert Deduplicator(Dedup()).duplicates(long, [short]) is None


def test_deduplicator_cosine_at_threshold_is_duplicate() -> None:
    # cos((1, 0), (3, 4)) = 3/5 exactly.
    a = chunk("a", words("a", 20), embedding=(1.0, 0.0))
    b = chunk("b", words("b", 20), embedding=(3.0, 4.0))

    assert Deduplicator(Dedup(cosine=0.6)).duplicates(b, [a]) is a
    assert Deduplicator(Dedup(cosine=0.61)).duplicates(b, [a]) is None


def test_deduplicator_cosine_needs_both_embeddings() -> None:
    a = chunk("a", words("a", 20), embedding=(1.0, 0.0))
    b = chunk("b", words("b", 20))

    assert Deduplicator(Dedup()).duplicates(b, [a]) is None


def test_deduplicator_embeddings_apart_with_text_dedup_off_is_distinct() -> None:
    a = chunk("a", words("w", 20), embedding=(1.0, 0.0))
    b = chunk("b", a.content, embedding=(0.0, 1.0))
    settings = Dedup(jaccard=None, containment=None)

    assert Deduplicator(settings).duplicates(b, [a]) is None


def test_deduplicator_candidate_without_words_is_distinct() -> None:
    a = chunk("a", "-- !! --")

    assert Deduplicator(Dedup()).duplicates(chunk("b", a.content), [a]) is None


def test_deduplicator_all_off_never_duplicate() -> None:
    a = chunk("a", words("w", 20), embedding=(1.0, 0.0))

    assert Deduplicator(OFF).duplicates(chunk("b", a.content, embedding=(1.0, 0.0)), [a]) is None


# --- end to end ---------------------------------------------------------------------------


def test_assemble_better_ranked_copy_wins(o200k: TiktokenTokenizer) -> None:
    text = words("w", 40)
    worse = chunk("worse", text, score=0.4)
    better = chunk("better", text, score=0.9)

    result = assembler(o200k).assemble(question="Q?", chunks=[worse, better])

    assert kept_ids(result) == {"better"}
    assert ids_dropped(result, "duplicate") == {"worse"}


def test_assemble_rerank_score_decides_which_copy_wins(o200k: TiktokenTokenizer) -> None:
    text = words("w", 40)
    first = chunk("first", text, score=0.9, rerank_score=0.1)
    second = chunk("second", text, score=0.1, rerank_score=0.8)

    result = assembler(o200k).assemble(question="Q?", chunks=[first, second])

    assert kept_ids(result) == {"second"}


def test_assemble_duplicate_reported_without_tokens(o200k: TiktokenTokenizer) -> None:
    text = words("w", 40)

    result = assembler(o200k).assemble(
        question="Q?", chunks=[chunk("a", text, score=0.9), chunk("b", text, score=0.5)]
    )

    assert result.report.dropped == (
        Dropped(claimant="retrieved", kind="chunk", id="b", reason="duplicate"),
    )


def test_assemble_duplicate_costs_no_budget(o200k: TiktokenTokenizer) -> None:
    x = chunk("x", words("x", 60), score=0.9)
    copy = chunk("x-copy", x.content.upper(), score=0.8)
    y = chunk("y", words("y", 60), score=0.7)
    both = assembler(o200k).assemble(question="Q?", chunks=[x, y])
    exact = both.report.sizes["retrieved"]

    result = assembler(o200k, retrieved_max=exact).assemble(question="Q?", chunks=[x, copy, y])

    assert kept_ids(result) == {"x", "y"}
    assert result.report.sizes["retrieved"] == exact
    assert result.text == both.text


def test_assemble_embedding_cosine_dedups_different_texts(o200k: TiktokenTokenizer) -> None:
    a = chunk("a", words("a", 40), score=0.9, embedding=(1.0, 0.0, 0.0))
    b = chunk("b", words("b", 40), score=0.5, embedding=(0.95, 0.3, 0.0))
    assert cosine(a.embedding or (), b.embedding or ()) >= 0.90

    result = assembler(o200k).assemble(question="Q?", chunks=[a, b])

    assert kept_ids(result) == {"a"}
    assert ids_dropped(result, "duplicate") == {"b"}


def test_assemble_embedding_cosine_below_threshold_keeps_both(o200k: TiktokenTokenizer) -> None:
    a = chunk("a", words("a", 40), score=0.9, embedding=(1.0, 0.0))
    b = chunk("b", words("b", 40), score=0.5, embedding=(0.8, 0.6))

    result = assembler(o200k).assemble(question="Q?", chunks=[a, b])

    assert kept_ids(result) == {"a", "b"}


def test_assemble_dedup_off_keeps_exact_copies(o200k: TiktokenTokenizer) -> None:
    text = words("w", 40)
    chunks = [chunk("a", text, embedding=(1.0, 0.0)), chunk("b", text, embedding=(1.0, 0.0))]

    result = assembler(o200k, dedup=OFF).assemble(question="Q?", chunks=chunks)

    assert kept_ids(result) == {"a", "b"}
    assert ids_dropped(result, "duplicate") == set()


def test_assemble_dedup_compares_only_with_kept(o200k: TiktokenTokenizer) -> None:
    # b copies a (Jaccard 0.66) and c copies b, but c is not a copy of a (Jaccard 0.41):
    # b is dropped, so c duplicates nothing that is in the prompt and stays.
    a = chunk("a", words("w", 100), score=0.9)
    b = chunk("b", words("w", 100, start=20), score=0.8)
    c = chunk("c", words("w", 100, start=40), score=0.7)

    result = assembler(o200k).assemble(question="Q?", chunks=[a, b, c])

    assert kept_ids(result) == {"a", "c"}
    assert ids_dropped(result, "duplicate") == {"b"}


# --- precision on a generated near-duplicate corpus ---------------------------------------

BOILERPLATE = "CONFIDENTIAL — Acme Corp internal"
LEGAL = (
    "CONFIDENTIAL — Acme Corp internal. Do not forward outside the company without written "
    "approval from the legal department."
)
_STOPWORDS = [
    *("the", "of", "and", "to", "in", "a", "is", "that", "for", "it"),
    *("as", "with", "on", "be", "by", "this", "are", "from", "or", "at"),
]


def _vocabulary(seed: int = 20240611, size: int = 4_000) -> list[str]:
    rng = random.Random(seed)
    onsets = ["b", "c", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br"]
    onsets += ["ch", "st", "tr", "pl", "gr", "sh"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    found: set[str] = set()
    while len(found) < size:
        syllables = rng.randint(2, 4)
        found.add("".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(found)


VOCABULARY = _vocabulary()
TOPIC = VOCABULARY[:150]
"""One narrow topic's words: passages drawn from it alone share much vocabulary."""


def _sentences(text_words: list[str], rng: random.Random) -> str:
    out: list[str] = []
    i = 0
    while i < len(text_words):
        step = rng.randint(6, 14)
        out.append(" ".join(text_words[i : i + step]).capitalize() + ".")
        i += step
    return " ".join(out)


def passage(seed: int, *, same_topic: bool = False) -> str:
    """80-200 words of prose-like text: common stopwords and 120 words of its own (or of
    the one shared topic), in sentences."""
    rng = random.Random(seed)
    own = rng.sample(TOPIC if same_topic else VOCABULARY, 120)
    n = rng.randint(80, 200)
    text_words = [
        rng.choice(_STOPWORDS) if rng.random() < 0.3 else rng.choice(own) for _ in range(n)
    ]
    return _sentences(text_words, rng)


def bordered(text: str, boilerplate: str = BOILERPLATE) -> str:
    return f"{boilerplate}\n{text}\n{boilerplate}"


def reformatted(text: str, seed: int) -> str:
    """Same words, different case and whitespace."""
    rng = random.Random(seed)
    gaps = iter(rng.choice(["  ", "\n", " \t ", "\n\n", " "]) for _ in range(len(text)))
    return re.sub(" ", lambda _: next(gaps), text).upper()


def sub_window(text: str) -> str:
    """An overlapping window covering 90% of the words, shifted off the start."""
    parts = text.split(" ")
    length = math.ceil(0.9 * len(parts))
    start = (len(parts) - length) // 2
    return " ".join(parts[start : start + length])


class Scenario(TypedDict):
    shared: str | None
    same_topic: bool


SCENARIOS: dict[str, Scenario] = {
    "distinct": {"shared": None, "same_topic": False},
    "shared-header-footer": {"shared": BOILERPLATE, "same_topic": False},
    "shared-legal-header-footer": {"shared": LEGAL, "same_topic": False},
    "same-topic-shared-legal": {"shared": LEGAL, "same_topic": True},
}


def corpus(scenario: str, n: int = 30) -> tuple[list[Chunk], dict[str, str]]:
    """Bases and their near-copies, each base ranked just before its copies; copy id -> base id.

    With a shared boilerplate every base carries it as header and footer, and the
    "bordered" copy is the body without it.
    """
    shared = SCENARIOS[scenario]["shared"]
    same_topic = SCENARIOS[scenario]["same_topic"]
    chunks: list[Chunk] = []
    copy_of: dict[str, str] = {}
    score = 1.0
    for i in range(n):
        body = passage(i, same_topic=same_topic)
        base = body if shared is None else bordered(body, str(shared))
        copies = {
            "bordered": bordered(base) if shared is None else body,
            "reformatted": reformatted(base, seed=i),
            "window": sub_window(base),
            "window-reformatted": reformatted(sub_window(base), seed=1_000 + i),
        }
        chunks.append(chunk(f"base{i}", base, score=score))
        score -= 0.001
        for kind, text in copies.items():
            chunks.append(chunk(f"base{i}-{kind}", text, score=score))
            copy_of[f"base{i}-{kind}"] = f"base{i}"
            score -= 0.001
    return chunks, copy_of


def test_corpus_passages_are_what_the_precision_tests_claim() -> None:
    texts = [passage(i) for i in range(30)]

    assert len(set(texts)) == 30
    assert all(80 <= len(re.findall(r"\w+", t)) <= 200 for t in texts)
    assert passage(7) == passage(7)
    assert all(len(sub_window(t).split()) >= 0.9 * len(t.split()) for t in texts)


def test_corpus_shared_boilerplate_overlaps_distinct_passages() -> None:
    # The legal boilerplate makes distinct passages share shingles, so the zero-false-drop
    # checks below are not vacuous, though the overlap stays well under the thresholds.
    chunks, copy_of = corpus("shared-legal-header-footer")
    bases = [shingles(c.content) for c in chunks if c.id not in copy_of]
    pairs = [(a, b) for a in bases for b in bases if a is not b]

    assert 0.05 < max(jaccard(a, b) for a, b in pairs) < 0.5
    assert 0.1 < max(len(a & b) / len(a) for a, b in pairs) < 0.9


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_dedup_precision_distinct_passages_never_duplicates(scenario: str) -> None:
    chunks, copy_of = corpus(scenario)
    bases = [c for c in chunks if c.id not in copy_of]
    dedup = Deduplicator(Dedup())

    false_hits = [
        (a.id, b.id) for a in bases for b in bases if a is not b and dedup.duplicates(a, [b])
    ]

    assert false_hits == []


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_dedup_precision_every_near_copy_matches_its_base(scenario: str) -> None:
    chunks, copy_of = corpus(scenario)
    bases = [c for c in chunks if c.id not in copy_of]
    dedup = Deduplicator(Dedup())

    matched = {
        c.id: getattr(dedup.duplicates(c, bases), "id", None) for c in chunks if c.id in copy_of
    }

    assert matched == copy_of


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_assemble_near_duplicate_corpus_drops_copies_only(
    o200k: TiktokenTokenizer, scenario: str
) -> None:
    chunks, copy_of = corpus(scenario)
    random.Random(5).shuffle(chunks)  # input order must not matter; rank decides

    result = assembler(o200k).assemble(question="Q?", chunks=chunks)

    assert ids_dropped(result, "duplicate") == set(copy_of)
    assert kept_ids(result) == {c.id for c in chunks} - set(copy_of)
    assert {d.reason for d in result.report.dropped} == {"duplicate"}


# --- laziness -----------------------------------------------------------------------------


@pytest.fixture
def shingled(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each text was shingled during the test."""
    calls: Counter[str] = Counter()
    real = ctxbudget._sources.dedup.shingles

    def spy(text: str, size: int = 5) -> Shingles:
        calls[text] += 1
        return real(text, size)

    monkeypatch.setattr(ctxbudget._sources.dedup, "shingles", spy)
    return calls


def test_assemble_dedup_never_shingles_past_the_stopping_point(
    o200k: TiktokenTokenizer, shingled: Counter[str]
) -> None:
    chunks = [chunk(f"c{i}", words(f"c{i}w", 50), score=1 - i / 100) for i in range(20)]
    two = assembler(o200k).assemble(question="Q?", chunks=chunks[:2]).report.sizes["retrieved"]
    three = assembler(o200k).assemble(question="Q?", chunks=chunks[:3]).report.sizes["retrieved"]

    result = assembler(o200k, retrieved_max=(two + three) // 2).assemble(
        question="Q?", chunks=chunks
    )

    assert kept_ids(result) == {"c0", "c1"}
    by_id = {c.content: c.id for c in chunks}
    assert {by_id[text] for text in shingled} == {"c0", "c1", "c2"}


def test_assemble_dedup_shingles_each_candidate_once(
    o200k: TiktokenTokenizer, shingled: Counter[str]
) -> None:
    chunks = [chunk(f"c{i}", words(f"c{i}w", 50), score=1 - i / 100) for i in range(8)]

    assembler(o200k).assemble(question="Q?", chunks=chunks)

    assert len(shingled) == 8
    assert set(shingled.values()) == {1}


def test_shingles_are_cached_per_text_not_only_per_id() -> None:
    # An escalated document can share its id with one of its chunks.
    dedup = Deduplicator(Dedup())
    part = Chunk(id="d", content="alpha beta gamma delta epsilon zeta eta theta")
    whole = Chunk(id="d", content="one two three four five six seven eight nine ten")
    candidate = Chunk(id="c", content="one two three four five six seven eight nine ten")
    assert dedup.duplicates(candidate, [part]) is None
    assert dedup.duplicates(candidate, [whole]) is whole
