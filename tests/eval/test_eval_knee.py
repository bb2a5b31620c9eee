"""The k knee: the top k chunks per k, correctness, groundedness, tokens, cost index, knee."""

from __future__ import annotations

import re

import pytest

from ctxbudget import Allocation, Budget, Chunk, ContextAssembler
from ctxbudget.eval import Case, EvalError, KneeResult, k_knee, lexical_retriever
from tests.support.eval_recorder import Recorder

Corpus = tuple[list[Case], list[Chunk]]
_HEADER = re.compile(r"^\[\d+\]", re.MULTILINE)


def _ranked(pool: list[Chunk]) -> list[Chunk]:
    return pool  # a retriever that returns the pool in its order, whatever the question


def test_each_k_sends_the_first_k_chunks(corpus: Corpus, recorder: Recorder) -> None:
    cases, pool = corpus
    k_knee(recorder, cases[:1], lambda q: _ranked(pool), ks=(1, 3, 5), workers=1)
    assert [len(_HEADER.findall(p)) for p in recorder.prompts] == [1, 3, 5]
    assert pool[2].content in recorder.prompts[1]
    assert pool[3].content not in recorder.prompts[1]


def test_correctness_follows_whether_the_gold_chunk_was_sent(corpus: Corpus) -> None:
    cases, pool = corpus

    # Echoing the prompt is right exactly when the gold chunk was sent. Case i's gold is
    # pool[i]: k chunks hold it for the cases i < k.
    result = k_knee(Recorder(lambda p: p), cases, lambda q: _ranked(pool), ks=(2, 4, 8))
    assert [result.score(k) for k in (2, 4, 8)] == [2 / 8, 4 / 8, 8 / 8]
    assert result.knee == 8
    assert result.n(2) == 8
    assert result.interval(8) == (1.0, 1.0)


def test_groundedness_needs_citations_to_sources_with_the_keywords(corpus: Corpus) -> None:
    cases, pool = corpus
    retrieve = lexical_retriever(pool)
    cited = k_knee(Recorder(lambda p: _gold_sentence(p) + " [1]"), cases, retrieve, ks=(3,))
    uncited = k_knee(Recorder(_gold_sentence), cases, retrieve, ks=(3,))
    assert cited.grounded(3).score == 1.0
    assert uncited.grounded(3).score == 0.0
    assert cited.score(3) == uncited.score(3) == 1.0


def _gold_sentence(prompt: str) -> str:
    # The lexical retriever puts the gold note first: answer with its first sentence.
    return prompt.split("\n[1]", 1)[1].split("\n", 2)[1].split(". ")[0]


def test_tokens_grow_with_k_and_the_cost_index_is_relative(corpus: Corpus) -> None:
    cases, pool = corpus
    result = k_knee(Recorder(), cases, lexical_retriever(pool), ks=(6, 2, 4))
    assert result.ks == (2, 4, 6)
    assert result.tokens(2) < result.tokens(4) < result.tokens(6)
    assert result.cost_index(2) == 1.0
    assert result.cost_index(6) == pytest.approx(result.tokens(6) / result.tokens(2))


def test_the_knee_is_the_smallest_k_within_one_case_of_the_best(corpus: Corpus) -> None:
    _, pool = corpus

    def answer(prompt: str) -> str:  # right whenever at least 4 sources were sent
        return "locker" if len(_HEADER.findall(prompt)) >= 4 else ""

    always = Case(question="Q?", keywords=["locker"], gold=pool[0])
    result = k_knee(Recorder(answer), [always] * 4, lambda q: pool, ks=(2, 4, 6))
    assert result.knee == 4
    assert repr(result) == "KneeResult(ks=(2, 4, 6), n=4, knee=4)"


def test_a_given_assembler_is_used_as_it_is(corpus: Corpus, recorder: Recorder) -> None:
    cases, pool = corpus
    small = Budget(total=200, allocations=(Allocation("retrieved", max=80, priority=1),))
    result = k_knee(
        recorder,
        cases[:2],
        lexical_retriever(pool),
        ks=(1, 8),
        assembler=ContextAssembler(tokenizer="o200k_base", budget=small),
    )
    assert result.records()[1]["sources"] < 8  # the app's budget dropped some


def test_a_retriever_returning_no_sequence_is_an_error(corpus: Corpus, recorder: Recorder) -> None:
    cases, _ = corpus
    with pytest.raises(EvalError, match=r"retrieve\(<case 'q000' question>\) must be a sequence"):
        k_knee(recorder, cases, lambda q: iter([]))  # type: ignore[arg-type,return-value]


def test_unmeasured_k_is_a_key_error(corpus: Corpus, recorder: Recorder) -> None:
    cases, pool = corpus
    result = k_knee(recorder, cases[:1], lambda q: pool, ks=(1,))
    assert isinstance(result, KneeResult)
    with pytest.raises(KeyError, match=r"k=3 was not measured; ks: \[1\]"):
        result.tokens(3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ks": (3, 0)}, "ks must be ints >= 1, but got 0"),
        ({"ks": "3"}, "ks must be a non-empty sequence of ints"),
        ({"workers": 0}, "workers must be an int >= 1"),
        ({"system": b"x"}, "system must be a str or None"),
    ],
)
def test_bad_options_are_errors(
    corpus: Corpus, recorder: Recorder, options: dict[str, object], message: str
) -> None:
    cases, pool = corpus
    with pytest.raises(EvalError, match=message):
        k_knee(recorder, cases, lambda q: pool, **options)  # type: ignore[arg-type]
