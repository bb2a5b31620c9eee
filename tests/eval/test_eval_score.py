"""Scoring: the keyword hit, the groundedness proxy, and scorer results checked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Assembled, Chunk, ContextAssembler
from ctxbudget.eval import Case, EvalError, grounded, keyword_hit
from ctxbudget.eval._score import check_score

CASE = Case(
    question="How long do refunds take?",
    keywords=["14 days", "Form R-2"],
    gold=Chunk(id="c1", content="Refunds take 14 days with Form R-2."),
)


def test_keyword_hit_needs_every_keyword() -> None:
    assert keyword_hit("It takes 14 days.", CASE) == 0.0
    assert keyword_hit("It takes 14 days; file Form R-2.", CASE) == 1.0


def test_keyword_hit_ignores_case_and_whitespace() -> None:
    assert keyword_hit("14\n  DAYS, via form\tr-2", CASE) == 1.0


def test_keyword_hit_normalises_compatibility_characters() -> None:
    # Fullwidth digits and letters (NFKC) read as their ASCII forms.
    assert keyword_hit("\uff11\uff14 days, \uff46\uff4f\uff52\uff4d R-2", CASE) == 1.0


@given(st.lists(st.sampled_from([" ", "\n", "\t", "\u00a0"]), max_size=3))
def test_keyword_hit_is_unchanged_by_inserted_whitespace(spaces: list[str]) -> None:
    gap = "".join(spaces)
    assert keyword_hit(f"14{gap}days and Form{gap}R-2", CASE) == 1.0


@pytest.fixture(scope="module")
def prompt() -> Assembled:
    other = Chunk(id="c2", content="Exchanges are free.", rerank_score=0.1)
    gold = CASE.gold[0].model_copy(update={"rerank_score": 0.9})
    return ContextAssembler(tokenizer="o200k_base").assemble(
        question=CASE.question, chunks=[gold, other]
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("14 days with Form R-2 [1].", 1.0),
        ("14 days with Form R-2 [1][2].", 1.0),
        ("14 days with Form R-2.", 0.0),  # cites nothing
        ("14 days with Form R-2 [1][3].", 0.0),  # [3] does not exist
        ("Exchanges are free [2].", 0.0),  # the cited source lacks the keywords
    ],
)
def test_grounded_needs_valid_citations_holding_the_keywords(
    prompt: Assembled, answer: str, expected: float
) -> None:
    assert grounded(answer, CASE, prompt) == expected


@pytest.mark.parametrize("value", [0, 1, 0.5, True])
def test_check_score_accepts_numbers_from_zero_to_one(value: float) -> None:
    assert check_score(value, keyword_hit) == float(value)


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), "1", None])
def test_check_score_names_the_scorer(value: object) -> None:
    with pytest.raises(EvalError, match=r"scorer keyword_hit returned .*; a score must be a"):
        check_score(value, keyword_hit)
