"""One cell of a result table: n outcomes, their mean, the noise floor and a bootstrap interval.

A difference smaller than one case (1/n) is noise whatever else the data say. A
larger one is checked with an exact paired sign test, which holds at 0% and 100%
where a bootstrap interval shrinks to a point (all of 30 cases right gives [1, 1]):
so nobody reads noise as a trend.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "RESAMPLES",
    "Cell",
    "Spread",
    "SpreadLabel",
    "difference",
    "sign_test",
    "spread",
    "summarise",
]

RESAMPLES: Final = 2_000
"""Bootstrap resamples per cell."""

SpreadLabel = Literal["within noise floor", "could be noise", "beyond noise"]
"""Whether a difference between cells could be noise (see `spread`)."""

_SIGNIFICANT: Final = 0.05


class Cell(BaseModel):
    """The outcomes of every case in one cell (one size and position, one k, one variant)."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(description="How many cases the cell holds.")
    score: float = Field(description="The mean outcome: the fraction correct for 0/1 scores.")
    low: float = Field(description="Lower end of the bootstrap 95% interval of the mean.")
    high: float = Field(description="Upper end of the bootstrap 95% interval of the mean.")
    outcomes: tuple[float, ...] = Field(description="Each case's outcome, in case order.")

    @property
    def noise_floor(self) -> float:
        """What one case moves the mean by: 1/n."""
        return 1 / self.n

    @property
    def interval(self) -> tuple[float, float]:
        """The bootstrap 95% interval as (low, high)."""
        return (self.low, self.high)

    def __repr__(self) -> str:
        return (
            f"Cell(n={self.n}, score={self.score:.3f}, interval=({self.low:.3f}, {self.high:.3f}))"
        )


def summarise(outcomes: Sequence[float], *, seed: int) -> Cell:
    """Mean and percentile bootstrap 95% interval of `outcomes` (at least one).

    The resampling is seeded: the same outcomes and seed always give the same interval.
    """
    n = len(outcomes)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(outcomes, k=n)) / n for _ in range(RESAMPLES))
    return Cell(
        n=n,
        score=sum(outcomes) / n,
        low=means[int(RESAMPLES * 0.025)],
        high=means[int(RESAMPLES * 0.975) - 1],
        outcomes=tuple(outcomes),
    )


class Spread(NamedTuple):
    """How far apart some cells are, and whether that could be noise."""

    width: float
    """The best cell's score minus the worst's."""
    label: SpreadLabel
    p: float
    """The sign test's p-value for best against worst, times the number of pairs."""


def spread(cells: Sequence[Cell]) -> Spread:
    """The spread of the cells' scores (over the same cases, in the same order).

    "within noise floor": at most one case (1/n) apart. Otherwise the best cell is
    compared with the worst, case by case, with an exact sign test whose p-value is
    multiplied by the number of pairs of cells (Bonferroni: the two were picked after
    looking): below 0.05 is "beyond noise", else "could be noise".
    """
    best = max(cells, key=lambda c: c.score)
    worst = min(cells, key=lambda c: c.score)
    width = best.score - worst.score
    pairs = len(cells) * (len(cells) - 1) // 2
    p = min(1.0, sign_test(best.outcomes, worst.outcomes) * pairs)
    if width <= max(c.noise_floor for c in cells) + 1e-12:
        return Spread(width, "within noise floor", p)
    return Spread(width, "beyond noise" if p < _SIGNIFICANT else "could be noise", p)


def sign_test(first: Sequence[float], second: Sequence[float]) -> float:
    """Two-sided exact sign test of paired outcomes: the chance of a split of the cases
    that differ at least this uneven if neither side were better. Ties are left out."""
    above = sum(a > b for a, b in zip(first, second, strict=True))
    below = sum(a < b for a, b in zip(first, second, strict=True))
    differ = above + below
    tail = sum(math.comb(differ, k) for k in range(max(above, below), differ + 1))
    return min(1.0, 2 * tail / (1 << differ))


def difference(label: SpreadLabel, p: float) -> str:
    """``beyond noise (p=0.004)``: a label with its p-value when it took one."""
    return label if label == "within noise floor" else f"{label} (p={p:.2g})"
