"""The simulator: a known miss rate, deterministic answers, both source formats; the corpus."""

from __future__ import annotations

import pytest

from ctxbudget import Chunk, ContextAssembler, SourceOptions
from ctxbudget.eval import EvalError, keyword_hit, simulated_generator, synthetic_corpus


def _prompt(chunks: list[Chunk], question: str, fmt: str = "markdown") -> str:
    ranked = [c.model_copy(update={"rerank_score": float(-i)}) for i, c in enumerate(chunks)]
    options = SourceOptions(order="relevance", source_format=fmt)  # type: ignore[arg-type]
    assembler = ContextAssembler(tokenizer="o200k_base", sources=options)
    return assembler.assemble(system="Cite like [1].", question=question, chunks=ranked).text


NOTES = [
    Chunk(id="a", content="The teal wren keeps its hat in the old mill."),
    Chunk(id="b", content="The amber falcon keeps its spare key in locker 4417."),
    Chunk(id="c", content="The amber heron keeps a spare coat by the river."),
]
QUESTION = "Where does the amber falcon keep its spare key?"


@pytest.mark.parametrize(
    ("position", "sources", "rate"),
    [(0, 60, 0.0), (1, 60, 0.0), (0.5, 60, 0.4), (0.5, 120, 0.4), (0.25, 60, 0.3), (0.5, 1, 0.0)],
)
def test_miss_rate_peaks_in_the_middle_of_long_prompts(
    position: float, sources: int, rate: float
) -> None:
    assert simulated_generator(bias=0.4).miss_rate(position, sources) == pytest.approx(rate)


def test_miss_rate_shrinks_with_fewer_sources() -> None:
    model = simulated_generator(bias=0.4, saturation=60)
    assert model.miss_rate(0.5, 30) == pytest.approx(0.4 * 29 / 59)


@pytest.mark.parametrize("fmt", ["markdown", "xml"])
def test_answers_from_the_source_sharing_most_words_and_cites_it(fmt: str) -> None:
    answer = simulated_generator(bias=0.0)(_prompt(NOTES, QUESTION, fmt))
    assert answer == "The amber falcon keeps its spare key in locker 4417. [2]"


def test_answers_are_deterministic() -> None:
    # At bias 1 with 3 sources saturated, the middle source is always missed.
    prompt = _prompt(NOTES, QUESTION)
    model = simulated_generator(bias=1.0, saturation=3)
    assert model(prompt) == model(prompt)
    assert "locker 4417" not in model(prompt)


def test_a_prompt_without_sources_gets_no_answer() -> None:
    assert (
        simulated_generator()("Question: anything?") == "I cannot find the answer in the sources."
    )


def test_model_id_names_the_settings() -> None:
    model = simulated_generator(bias=0.25, saturation=10, seed=3)
    assert model.model_id == "simulated(bias=0.25, saturation=10, seed=3)"
    assert repr(model) == "SimulatedModel(bias=0.25, saturation=10, seed=3)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bias": 1.5}, "bias must be a number from 0 to 1, but got 1.5"),
        ({"bias": True}, "bias must be a number from 0 to 1"),
        ({"saturation": 1}, "saturation must be an int >= 2, but got 1"),
        ({"saturation": 2.5}, "saturation must be an int >= 2"),
    ],
)
def test_bad_settings_are_errors(options: dict[str, float], message: str) -> None:
    with pytest.raises(EvalError, match=message):
        simulated_generator(**options)  # type: ignore[arg-type]


def test_synthetic_corpus_cases_are_answered_by_their_gold_alone() -> None:
    cases, pool = synthetic_corpus(cases=30, pool=90, seed=4)
    assert len(cases) == 30
    assert len({c.id for c in pool}) == 90
    for case in cases:
        holders = [c.id for c in pool if keyword_hit(c.content, case)]
        assert holders == [case.gold[0].id]


def test_synthetic_corpus_carries_stale_and_warned_chunks() -> None:
    _, pool = synthetic_corpus(cases=1, pool=14)
    assert sum(c.updated_at is not None for c in pool) == 2
    assert sum(bool(c.parse_warnings) for c in pool) == 2


def test_synthetic_corpus_is_deterministic_for_a_seed() -> None:
    assert synthetic_corpus(seed=2) == synthetic_corpus(seed=2)
    assert synthetic_corpus(seed=2) != synthetic_corpus(seed=3)


@pytest.mark.parametrize(("cases", "pool"), [(0, 10), (11, 10), (10, 257)])
def test_synthetic_corpus_rejects_impossible_sizes(cases: int, pool: int) -> None:
    with pytest.raises(EvalError, match="synthetic_corpus needs 1 <= cases <= pool <= 256"):
        synthetic_corpus(cases=cases, pool=pool)
