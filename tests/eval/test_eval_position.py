"""Position sensitivity: exact placement, fixed distractors, recovered bias, clear errors."""

from __future__ import annotations

import re

import pytest

from ctxbudget import Chunk, ContextAssembler, Dedup, SourceOptions
from ctxbudget.eval import (
    Case,
    EvalError,
    PositionResult,
    position_sensitivity,
    simulated_generator,
    synthetic_corpus,
)
from tests.support.eval_recorder import Recorder

Corpus = tuple[list[Case], list[Chunk]]
_HEADER = re.compile(r"^\[(\d+)\]", re.MULTILINE)


def _source_of(prompt: str, content: str) -> int:
    """The [n] whose header line stands right above `content` in `prompt`."""
    header = prompt[: prompt.index(content)].rstrip("\n").rsplit("\n", 1)[-1]
    return int(header[1 : header.index("]")])


def _contents(prompt: str) -> list[str]:
    """Each source's content, in prompt order (the line after its header)."""
    return [prompt[m.end() :].split("\n", 2)[1] for m in _HEADER.finditer(prompt)]


@pytest.mark.parametrize("size", [1, 2, 5, 6, 20])
def test_gold_chunk_is_the_source_at_round_position_times_n_minus_1_plus_1(
    corpus: Corpus, recorder: Recorder, size: int
) -> None:
    cases, pool = corpus
    positions = (0, 0.25, 0.5, 0.75, 1)
    result = position_sensitivity(recorder, cases[:2], pool, sizes=(size,), positions=positions)
    expected = [round(p * (size - 1)) + 1 for p in positions]
    assert [result.source(size, p) for p in positions] == expected
    for case in cases[:2]:
        # Positions that round to one source build one prompt, asked once.
        prompts = [p for p in recorder.prompts if p.endswith(case.question)]
        assert all(len(_HEADER.findall(p)) == size for p in prompts)
        assert sorted(_source_of(p, case.gold[0].content) for p in prompts) == sorted(set(expected))


def test_same_distractors_in_the_same_order_at_every_position(
    corpus: Corpus, recorder: Recorder
) -> None:
    cases, pool = corpus
    position_sensitivity(recorder, cases[:1], pool, sizes=(8,), workers=1)
    gold = cases[0].gold[0].content
    around = [[c for c in _contents(p) if c != gold] for p in recorder.prompts]
    assert len(around) == 5
    assert all(a == around[0] for a in around)
    assert len(around[0]) == 7


def test_random_distractors_of_a_smaller_size_are_among_a_larger_ones(
    corpus: Corpus, recorder: Recorder
) -> None:
    cases, pool = corpus
    position_sensitivity(recorder, cases[:1], pool, sizes=(4, 12), positions=(0,), workers=1)
    small, large = (_contents(p)[1:] for p in recorder.prompts)
    assert small == large[:3]


def test_distractors_depend_on_the_seed(corpus: Corpus) -> None:
    cases, pool = corpus
    draws = []
    for seed in (0, 1):
        model = Recorder()
        position_sensitivity(model, cases[:1], pool, sizes=(6,), positions=(0,), seed=seed)
        draws.append(_contents(model.prompts[0]))
    assert draws[0][0] == draws[1][0]  # the gold chunk
    assert draws[0][1:] != draws[1][1:]


def test_distractors_never_hold_the_answer(recorder: Recorder) -> None:
    gold = Chunk(id="g", content="The amber falcon keeps its key in locker 4417.")
    copy = Chunk(id="copy", content="Locker 4417 holds the amber falcon's key.")
    others = [
        Chunk(id=f"d{i}", content=f"The teal wren keeps its key in locker {i}.") for i in range(3)
    ]
    case = Case(question="Where is the key?", keywords=["locker 4417"], gold=gold)
    position_sensitivity(recorder, [case], [gold, copy, *others], sizes=(4,), positions=(0,))
    assert "holds the amber" not in recorder.prompts[0]


def test_adjacent_distractors_are_the_nearest_by_words(recorder: Recorder) -> None:
    gold = Chunk(id="g", content="The amber falcon keeps its spare key in locker 4417.")
    near = [
        Chunk(id="n1", content="The amber falcon keeps its spare hat in a box."),
        Chunk(id="n2", content="The amber falcon keeps a spare key in a drawer."),
    ]
    far = [Chunk(id=f"f{i}", content=f"Quarterly revenue rose {i} percent.") for i in range(5)]
    case = Case(question="Where is the key?", keywords=["locker 4417"], gold=gold)
    position_sensitivity(
        recorder, [case], [*far, *near, gold], sizes=(3,), positions=(0,), distractors="adjacent"
    )
    assert sorted(_contents(recorder.prompts[0])[1:]) == sorted(c.content for c in near)


def test_adjacent_distractors_use_embeddings_when_every_chunk_has_one(recorder: Recorder) -> None:
    # By words, "w1" is nearest; by embedding, "e1" is.
    gold = Chunk(id="g", content="The amber falcon key is in locker 4417.", embedding=(1.0, 0.0))
    by_words = Chunk(id="w1", content="The amber falcon key is in a drawer.", embedding=(0.0, 1.0))
    by_vector = Chunk(id="e1", content="Quarterly revenue rose.", embedding=(0.9, 0.1))
    zero = Chunk(id="z", content="Nothing at all.", embedding=(0.0, 0.0))
    case = Case(question="Where is the key?", keywords=["locker 4417"], gold=gold)
    position_sensitivity(
        recorder,
        [case],
        [by_words, zero, by_vector, gold],
        sizes=(2,),
        positions=(0,),
        distractors="adjacent",
    )
    assert _contents(recorder.prompts[0])[1] == by_vector.content


def test_several_gold_chunks_stand_together(recorder: Recorder) -> None:
    _, pool = synthetic_corpus(cases=2, pool=12, seed=0)
    case = Case(question="Both keys?", keywords=["x"], gold=[pool[0], pool[1]])
    position_sensitivity(recorder, [case], pool[2:], sizes=(6,), positions=(0, 0.5, 1), workers=1)
    for prompt, first in zip(recorder.prompts, (1, 3, 5), strict=True):
        assert _source_of(prompt, pool[0].content) == first
        assert _source_of(prompt, pool[1].content) == first + 1


def test_the_simulators_bias_is_recovered() -> None:
    # The simulator misses the middle of 60 sources 40% of the time: the middle cell's
    # interval must hold 60%. Fewer sources are missed less (40% * 19/59 at 20).
    cases, pool = synthetic_corpus(cases=120, pool=256, seed=0)
    model = simulated_generator(bias=0.4)
    result = position_sensitivity(model, cases, pool, sizes=(20, 60), positions=(0.5,))
    low, high = result.interval(60, 0.5)
    source = result.source(60, 0.5)
    assert low <= 1 - model.miss_rate((source - 1) / 59, 60) <= high
    assert result.n(60, 0.5) == 120
    assert result.score(20, 0.5) > high


def test_the_ends_are_never_missed(corpus: Corpus) -> None:
    cases, pool = corpus
    model = simulated_generator(bias=1.0, saturation=2)
    result = position_sensitivity(model, cases, pool, sizes=(20,), positions=(0, 0.5, 1))
    assert result.score(20, 0) == result.score(20, 1) == 1.0
    assert result.score(20, 0.5) < 0.5
    assert result.spread(20).label == "beyond noise"


def test_an_unbiased_simulator_gives_a_flat_row_labelled_noise(corpus: Corpus) -> None:
    cases, pool = corpus
    result = position_sensitivity(simulated_generator(bias=0.0), cases, pool, sizes=(6,))
    assert result.spread(6)[:2] == (0.0, "within noise floor")


def test_the_users_assembler_gives_format_but_not_order_or_dedup(recorder: Recorder) -> None:
    gold = Chunk(id="g", content="The amber falcon keeps its key in locker 4417.")
    twins = [
        Chunk(id=f"t{i}", content="The teal wren keeps its hat in the old mill.") for i in (1, 2)
    ]
    assembler = ContextAssembler(
        tokenizer="cl100k_base",
        sources=SourceOptions(source_format="xml", order="sandwich", dedup=Dedup(jaccard=0.1)),
    )
    case = Case(question="Where is the key?", keywords=["locker 4417"], gold=gold)
    position_sensitivity(
        recorder, [case], [gold, *twins], sizes=(3,), positions=(1,), assembler=assembler
    )
    prompt = recorder.prompts[0]
    assert prompt.count("<document index=") == 3
    assert prompt.index('<document index="3"') < prompt.index("locker 4417")


def test_a_custom_scorer_is_used(corpus: Corpus) -> None:
    cases, pool = corpus
    result = position_sensitivity(
        Recorder(lambda p: "x" * 3),
        cases,
        pool,
        sizes=(6,),
        positions=(0,),
        scorer=lambda answer, case: len(answer) / 4,
    )
    assert result.score(6, 0) == 0.75


def test_result_accessors_name_what_was_measured(corpus: Corpus, recorder: Recorder) -> None:
    cases, pool = corpus
    result = position_sensitivity(recorder, cases, pool, sizes=(6,), positions=(0, 1))
    assert isinstance(result, PositionResult)
    assert result.cell(6, 0).noise_floor == result.noise_floor == 1 / 8
    assert result.settings["distractors"] == "random"
    assert repr(result) == "PositionResult(sizes=(6,), positions=(0, 1), n=8)"
    with pytest.raises(KeyError, match=r"size 20 at position 0.5 was not measured; sizes: \[6\]"):
        result.score(20, 0.5)


def test_a_chunk_the_assembler_leaves_out_is_an_error(recorder: Recorder) -> None:
    gold = Chunk(id="g", content="The key is in locker 4417.", tenant="acme")
    pool = [Chunk(id=f"d{i}", content=f"Other note {i}.") for i in range(3)]
    case = Case(question="Where?", keywords=["locker 4417"], gold=gold)
    with pytest.raises(
        EvalError,
        match=r"cases\[0\], size 3, position 0.5: the prompt must hold all 3 chunks in order, "
        r"but the assembler left out 'g' \(forbidden\); .* remove chunks with an ACL",
    ):
        position_sensitivity(recorder, [case], pool, sizes=(3,), positions=(0.5,))
    assert recorder.prompts == []


def test_a_pool_too_small_for_a_size_is_an_error(corpus: Corpus, recorder: Recorder) -> None:
    cases, pool = corpus
    with pytest.raises(
        EvalError,
        match=r"case 'q000': size 60 needs 59 distractors, but the pool has only 29 chunks",
    ):
        position_sensitivity(recorder, cases, pool, sizes=(6, 60))


def test_a_size_smaller_than_the_gold_is_an_error(corpus: Corpus, recorder: Recorder) -> None:
    _, pool = corpus
    case = Case(question="q", keywords=["k"], gold=pool[:2])
    with pytest.raises(EvalError, match=r"cases\[0\]: size 1 is smaller than its 2 gold chunks"):
        position_sensitivity(recorder, [case], pool, sizes=(1, 6))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sizes": ()}, "sizes must be a non-empty sequence of ints"),
        ({"sizes": (6, 0)}, "sizes must be ints >= 1, but got 0"),
        ({"sizes": (6, 6)}, r"sizes must not repeat a value, but got \[6, 6\]"),
        ({"positions": (0, 1.5)}, "positions must be numbers from 0 to 1, but got 1.5"),
        ({"positions": (0, True)}, "positions must be numbers from 0 to 1, but got True"),
        ({"positions": "0.5"}, "positions must be a non-empty sequence of numbers"),
        ({"positions": (0.5, 0.5)}, "positions must not repeat a value"),
        ({"distractors": "similar"}, 'distractors must be "random" or "adjacent"'),
        ({"system": 3}, "system must be a str or None, but got int"),
        ({"workers": 0}, "workers must be an int >= 1, but got 0"),
    ],
)
def test_bad_options_are_errors(
    corpus: Corpus, recorder: Recorder, options: dict[str, object], message: str
) -> None:
    cases, pool = corpus
    with pytest.raises(EvalError, match=message):
        position_sensitivity(recorder, cases, pool, **options)  # type: ignore[arg-type]
