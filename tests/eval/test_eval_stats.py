"""Cells: mean, noise floor 1/n, a seeded bootstrap 95% interval; spreads and the sign test."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget.eval._stats import RESAMPLES, sign_test, spread, summarise


def test_cell_noise_floor_is_one_case() -> None:
    assert summarise([1.0] * 40, seed=0).noise_floor == 1 / 40


def test_interval_of_identical_outcomes_is_a_point() -> None:
    cell = summarise([1.0] * 25, seed=0)
    assert (cell.score, cell.interval) == (1.0, (1.0, 1.0))


def test_interval_is_deterministic_for_a_seed() -> None:
    outcomes = [1.0, 0.0] * 20
    assert summarise(outcomes, seed=3) == summarise(outcomes, seed=3)


def test_interval_matches_the_normal_approximation_for_a_large_n() -> None:
    # 200 cases at p = 0.5: the 95% interval is p ± 1.96 * sqrt(p(1-p)/n) ≈ ± 0.069.
    cell = summarise([1.0, 0.0] * 100, seed=0)
    half = 1.96 * math.sqrt(0.25 / 200)
    assert abs(cell.low - (0.5 - half)) <= 0.015
    assert abs(cell.high - (0.5 + half)) <= 0.015


def test_interval_is_the_middle_95_percent_of_resampled_means() -> None:
    assert RESAMPLES == 2_000
    cell = summarise([0.0] * 19 + [1.0], seed=0)
    # A single success among 20: a resample misses it with chance 0.95**20 ≈ 0.36, so the
    # 2.5th percentile of the means is 0.
    assert cell.low == 0.0
    assert 0.1 <= cell.high <= 0.2


def test_intervals_hold_the_true_rate_about_95_times_in_100() -> None:
    # 100 samples of 40 cases from a model right 60% of the time: a 95% interval holds
    # 0.6 for about 95 of them (binomial sd ~2.2; the percentile bootstrap runs a little low).
    covered = 0
    for sample in range(100):
        rng = random.Random(sample)
        outcomes = [1.0 if rng.random() < 0.6 else 0.0 for _ in range(40)]
        cell = summarise(outcomes, seed=sample)
        covered += cell.low <= 0.6 <= cell.high
    assert 88 <= covered <= 100


@given(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=30), st.integers(0, 9))
def test_interval_holds_the_mean_within_the_outcomes(outcomes: list[float], seed: int) -> None:
    cell = summarise(outcomes, seed=seed)
    assert min(outcomes) <= cell.low <= cell.score + 1e-12
    assert cell.score - 1e-12 <= cell.high <= max(outcomes)
    assert cell.n == len(outcomes)
    assert cell.outcomes == tuple(outcomes)


def test_spread_within_one_case_is_labelled_noise() -> None:
    a = summarise([1.0] * 20, seed=0)
    b = summarise([1.0] * 19 + [0.0], seed=0)
    width, label, _ = spread([a, b])
    assert (round(width, 9), label) == (0.05, "within noise floor")


def test_spread_of_a_few_cases_at_100_percent_could_be_noise() -> None:
    # 30 of 30 against 26 of 30: the bootstrap intervals ([1, 1] and about [0.73, 0.97])
    # do not touch, but four cases one way has p = 2 / 2**4 = 0.125.
    a = summarise([1.0] * 30, seed=0)
    b = summarise([1.0] * 26 + [0.0] * 4, seed=0)
    assert b.high < a.low == 1.0
    assert spread([a, b]) == (a.score - b.score, "could be noise", 0.125)


def test_spread_p_value_counts_every_pair_of_cells() -> None:
    # Eleven cases one way between best and worst: p = 2 / 2**11, times 10 pairs of 5 cells.
    best = summarise([1.0] * 30, seed=0)
    worst = summarise([1.0] * 19 + [0.0] * 11, seed=0)
    _, label, p = spread([best, best, worst, best, best])
    assert (label, p) == ("beyond noise", 10 * 2 / 2**11)


def test_sign_test_leaves_out_ties_and_is_two_sided() -> None:
    assert sign_test([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert sign_test([1, 0, 1], [0, 1, 0]) == 1.0  # 2 up, 1 down: p = 2 * 4/8, capped
    assert sign_test([1] * 6 + [0.5], [0] * 6 + [0.5]) == 2 / 2**6
    assert sign_test([0] * 6, [1] * 6) == 2 / 2**6


def test_cell_repr_shows_score_and_interval() -> None:
    assert repr(summarise([1.0], seed=0)) == "Cell(n=1, score=1.000, interval=(1.000, 1.000))"
