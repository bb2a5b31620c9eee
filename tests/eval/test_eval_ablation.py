"""Metadata ablation: what each variant does to the header, and how the table reads it."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from ctxbudget import Chunk, ContextAssembler, SourceOptions
from ctxbudget.eval import FIELDS, VARIANTS, Case, EvalError, ablate, ablation, lexical_retriever
from tests.support.eval_recorder import Recorder

Corpus = tuple[list[Case], list[Chunk]]

FULL = Chunk(
    id="c1",
    content="Refunds take 14 days.",
    title="Returns policy",
    heading_path=("Returns", "EU customers"),
    updated_at=datetime(2020, 3, 1, tzinfo=UTC),
    effective_date=date(2020, 2, 1),
    parse_warnings=("OCR confidence 0.71",),
    score=0.42,
    rerank_score=0.83,
)
BARE = Chunk(id="c2", content="Shipping is free.")
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _header(chunk: Chunk) -> str:
    """The [1] header line the real assembler renders for `chunk`."""
    assembler = ContextAssembler(tokenizer="o200k_base", sources=SourceOptions())
    result = assembler.assemble(question="q", chunks=[chunk], now=NOW)
    return result.sources[0].text.split("\n", 1)[0]


def test_baseline_header_shows_title_path_freshness_and_warning() -> None:
    assert _header(FULL) == (
        "[1] Returns policy — Returns > EU customers (updated 2020-03-01; may be out of date) "
        "⚠ OCR confidence 0.71"
    )


@pytest.mark.parametrize(
    ("field", "header"),
    [
        (
            "heading_path",
            "[1] Returns policy (updated 2020-03-01; may be out of date) ⚠ OCR confidence 0.71",
        ),
        (
            "title",
            "[1] Returns > EU customers (updated 2020-03-01; may be out of date) "
            "⚠ OCR confidence 0.71",
        ),
        ("freshness", "[1] Returns policy — Returns > EU customers ⚠ OCR confidence 0.71"),
        (
            "parse_warnings",
            "[1] Returns policy — Returns > EU customers (updated 2020-03-01; may be out of date)",
        ),
        (
            "score",
            "[1] Returns policy (relevance 0.83) — Returns > EU customers (updated 2020-03-01; "
            "may be out of date) ⚠ OCR confidence 0.71",
        ),
        (
            "dates_on_all",
            "[1] Returns policy (dated 2020-02-01) — Returns > EU customers (updated 2020-03-01; "
            "may be out of date) ⚠ OCR confidence 0.71",
        ),
    ],
)
def test_each_variant_changes_the_header_in_its_one_way(field: str, header: str) -> None:
    assert _header(ablate(FULL, field)) == header  # type: ignore[arg-type]
    assert field in VARIANTS


def test_score_variant_falls_back_to_the_retriever_score() -> None:
    chunk = FULL.model_copy(update={"rerank_score": None, "title": None})
    assert ablate(chunk, "score").title == "(relevance 0.42)"


def test_dates_variant_falls_back_to_the_update_time() -> None:
    assert ablate(FULL.model_copy(update={"effective_date": None}), "dates_on_all").title == (
        "Returns policy (dated 2020-03-01)"
    )


@pytest.mark.parametrize("field", FIELDS)
def test_a_chunk_without_the_field_is_sent_as_it_is(field: str) -> None:
    assert _header(ablate(BARE, field)) == _header(BARE)  # type: ignore[arg-type]


def test_ablation_compares_each_variant_with_the_baseline(corpus: Corpus) -> None:
    cases, pool = corpus

    def answer(prompt: str) -> str:  # loses the answer whenever titles are missing
        return prompt if "Field notes:" in prompt else ""

    result = ablation(Recorder(answer), cases, lexical_retriever(pool), fields=("title", "score"))
    assert result.variants == ("baseline", "title", "score")
    assert (result.score("baseline"), result.score("title"), result.score("score")) == (1, 0, 1)
    assert result.delta("title").score == -1.0
    assert result.delta("title").interval == (-1.0, -1.0)
    assert result.changed("title") == result.changed("score") == 8
    assert result.n("title") == 8
    assert result.interval("baseline") == (1.0, 1.0)


def test_a_variant_that_changes_no_prompt_says_so(recorder: Recorder) -> None:
    case = Case(question="Shipping?", keywords=["free"], gold=BARE)
    result = ablation(recorder, [case], lambda q: [BARE], fields=("title", "parse_warnings"))
    assert result.changed("title") == 0
    assert "no prompt changed: no chunk carries it" in str(result)


def test_a_difference_of_one_case_is_labelled_noise(corpus: Corpus) -> None:
    cases, pool = corpus
    flaky = {c.question for c in cases[:1]}

    def answer(prompt: str) -> str:  # one case fails without titles, the rest never do
        missing = "Field notes:" not in prompt and prompt.rsplit("Question: ", 1)[1] in flaky
        return "" if missing else prompt

    result = ablation(Recorder(answer), cases, lexical_retriever(pool), fields=("title",))
    assert "within noise floor" in str(result)
    assert repr(result) == "AblationResult(variants=('baseline', 'title'), n=8)"


def test_notes_give_the_sign_test_against_the_baseline(corpus: Corpus) -> None:
    cases, pool = corpus
    lost = {c.question for c in cases[:3]}

    def answer(prompt: str) -> str:  # three of eight cases fail without titles
        missing = "Field notes:" not in prompt and prompt.rsplit("Question: ", 1)[1] in lost
        return "" if missing else prompt

    retrieve = lexical_retriever(pool)
    some = ablation(Recorder(answer), cases, retrieve, fields=("title",))
    assert "could be noise (p=0.25)" in str(some)
    every = ablation(Recorder(lambda p: p if "Field notes:" in p else ""), cases, retrieve)
    assert "beyond noise (p=0.0078)" in str(every)


def test_unmeasured_variant_is_a_key_error(recorder: Recorder) -> None:
    case = Case(question="Shipping?", keywords=["free"], gold=BARE)
    result = ablation(recorder, [case], lambda q: [BARE], fields=("title",))
    with pytest.raises(
        KeyError, match=r"'score' was not measured; variants: \['baseline', 'title'"
    ):
        result.delta("score")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fields": ("title", "author")}, "unknown field 'author'; fields: heading_path, title"),
        ({"fields": "title"}, "fields must be a non-empty sequence of field names"),
        ({"fields": ()}, "fields must be a non-empty sequence"),
        ({"fields": ("title", "title")}, "fields must not repeat a value"),
        ({"k": 0}, "k must be ints >= 1, but got 0"),
    ],
)
def test_bad_options_are_errors(
    recorder: Recorder, options: dict[str, object], message: str
) -> None:
    case = Case(question="Shipping?", keywords=["free"], gold=BARE)
    with pytest.raises(EvalError, match=message):
        ablation(recorder, [case], lambda q: [BARE], **options)  # type: ignore[arg-type]
