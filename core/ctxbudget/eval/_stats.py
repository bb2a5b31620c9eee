"""One cell of a result table: n outcomes, their mean, the noise floor and a bootstrap interval.

A difference smaller than one case (1/n) is noise whatever the interval says, and
two cells whose 95% intervals overlap are not shown apart by the data: both are
labelled, so nobody reads noise as a trend.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RESAMPLES", "Cell", "SpreadLabel", "spread", "summarise"]

RESAMPLES: Final = 2_000
"""Bootstrap resamples per cell."""

SpreadLabel = Literal["within noise floor", "intervals overlap", "intervals separate"]


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


def spread(cells: Sequence[Cell]) -> tuple[float, SpreadLabel]:
    """How far apart the cells' scores are, and whether that could be noise.

    "within noise floor": the spread is at most one case (1/n). "intervals overlap":
    some value lies in every cell's 95% interval. Otherwise "intervals separate".
    """
    scores = [c.score for c in cells]
    width = max(scores) - min(scores)
    if width <= max(c.noise_floor for c in cells) + 1e-12:
        return width, "within noise floor"
    if max(c.low for c in cells) <= min(c.high for c in cells):
        return width, "intervals overlap"
    return width, "intervals separate"
