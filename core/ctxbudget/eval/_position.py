"""Position sensitivity: does the answer's place among N sources change what the model gets right?

Each case's gold chunk is placed at each relative position among distractors from
the pool, the prompt built by the real assembler with the arrangement fixed, and the
answer scored. Only the position changes between the cells of a size: the same
distractors, in the same order, surround the gold chunk at every position.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ctxbudget import Chunk, ContextAssembler
from ctxbudget.eval._calls import answer_all, check_workers
from ctxbudget.eval._cases import Case, as_cases, check_pool
from ctxbudget.eval._errors import EvalError
from ctxbudget.eval._prompts import (
    DEFAULT_SYSTEM,
    Request,
    assembled_exactly,
    assembler_for,
    check_sizes,
    check_system,
)
from ctxbudget.eval._result import SPREAD_NOTE, Result, format_cell, format_spread
from ctxbudget.eval._retrieve import nearest
from ctxbudget.eval._score import Scorer, check_score, keyword_hit
from ctxbudget.eval._stats import Cell, Spread, spread, summarise

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["Distractors", "PositionResult", "position_sensitivity"]

Distractors = Literal["random", "adjacent"]
"""How distractors are drawn from the pool: at random, or the nearest to the gold chunk."""


class PositionResult(Result):
    """Fraction correct per (size, position): ``result.score(60, 0.5)``."""

    title = "Position sensitivity (fraction correct by sources in the prompt and answer position)"

    def __init__(
        self,
        cells: Mapping[tuple[int, float], Cell],
        sources: Mapping[tuple[int, float], int],
        *,
        sizes: Sequence[int],
        positions: Sequence[float],
        seed: int,
        settings: Mapping[str, Any],
    ) -> None:
        super().__init__(n=next(iter(cells.values())).n, seed=seed, settings=settings)
        self.sizes = tuple(sizes)
        """The numbers of sources measured, as given."""
        self.positions = tuple(positions)
        """The relative positions measured: 0 is source [1], 1 the last source."""
        self._cells = dict(cells)
        self._sources = dict(sources)

    def cell(self, size: int, position: float) -> Cell:
        """Everything measured at `size` sources with the answer at `position`."""
        if (size, position) not in self._cells:
            raise KeyError(
                f"size {size} at position {position} was not measured; sizes: "
                f"{list(self.sizes)}, positions: {list(self.positions)}"
            )
        return self._cells[(size, position)]

    def score(self, size: int, position: float) -> float:
        """The fraction of cases answered correctly (the mean score)."""
        return self.cell(size, position).score

    def interval(self, size: int, position: float) -> tuple[float, float]:
        """The bootstrap 95% interval of `score`."""
        return self.cell(size, position).interval

    def n(self, size: int, position: float) -> int:
        """How many cases the cell holds."""
        return self.cell(size, position).n

    def source(self, size: int, position: float) -> int:
        """The [n] a case's one gold chunk had: ``round(position * (size - 1)) + 1`` (a case
        with g gold chunks has them from ``round(position * (size - g)) + 1`` on)."""
        self.cell(size, position)
        return self._sources[(size, position)]

    def spread(self, size: int) -> Spread:
        """How far apart the positions' scores are at `size`, and whether that could be noise."""
        return spread([self.cell(size, p) for p in self.positions])

    def records(self) -> list[dict[str, Any]]:
        return [
            {
                "size": size,
                "position": position,
                "source": self._sources[(size, position)],
                "n": cell.n,
                "score": cell.score,
                "low": cell.low,
                "high": cell.high,
                "noise_floor": cell.noise_floor,
            }
            for (size, position), cell in self._cells.items()
        ]

    def _columns(self) -> list[str]:
        return ["sources", *(f"at {p:g}" for p in self.positions), "spread"]

    def _rows(self) -> list[list[str]]:
        rows = []
        for size in self.sizes:
            cells = [self._cells[(size, p)] for p in self.positions]
            rows.append([str(size), *map(format_cell, cells), format_spread(cells)])
        return rows

    def _notes(self) -> list[str]:
        return [
            *super()._notes(),
            "at 0 = the answer is source [1]; at 1 = it is the last source",
            SPREAD_NOTE,
        ]

    def _draw(self, axes: Axes) -> None:
        for size in self.sizes:
            cells = [self._cells[(size, p)] for p in self.positions]
            axes.errorbar(
                self.positions,
                [c.score for c in cells],
                yerr=[[c.score - c.low for c in cells], [c.high - c.score for c in cells]],
                marker="o",
                capsize=3,
                label=f"{size} sources",
            )
        axes.set_xlabel("position of the answer (0 = first source, 1 = last)")
        axes.set_ylabel("fraction correct")
        axes.set_ylim(-0.05, 1.05)
        axes.legend()

    def __repr__(self) -> str:
        return f"PositionResult(sizes={self.sizes}, positions={self.positions}, n={self.cases})"


def position_sensitivity(
    generate: Callable[[str], str],
    cases: Iterable[Case | Mapping[str, Any]],
    pool: Sequence[Chunk],
    *,
    sizes: Sequence[int] = (6, 20, 60),
    positions: Sequence[float] = (0, 0.25, 0.5, 0.75, 1),
    distractors: Distractors = "random",
    assembler: ContextAssembler | None = None,
    system: str | None = DEFAULT_SYSTEM,
    scorer: Scorer = keyword_hit,
    workers: int = 4,
    progress: bool | None = None,
    seed: int = 0,
) -> PositionResult:
    """Score each case with its gold chunk at each position among `size` sources.

    Distractors come from `pool`, never a case's gold chunk nor a chunk holding all its
    keywords (it would answer the question too): ``"random"`` draws them at random
    (seeded; the 6 of a size-6 prompt are among the 19 of a size-20 one), ``"adjacent"``
    takes the nearest to the gold chunk (embedding cosine when every chunk has one, word
    overlap otherwise), in a seeded random order. The gold chunk(s) start at source
    ``round(position * (size - gold)) + 1``: position 0 is source [1], 1 the last.

    Prompts are built by the real assembler with the arrangement fixed (relevance order,
    no dedup, relevance floor or escalation) under a budget computed to hold every
    source; from `assembler`, when given, come the tokenizer, source format, datamarking,
    freshness and fence rule. A chunk the assembler leaves out is an `EvalError`.

    Example (no API key needed)::

        cases, pool = synthetic_corpus()
        print(position_sensitivity(simulated_generator(bias=0.4), cases, pool))
    """
    workers = check_workers(workers)
    cases = as_cases(cases)
    pool = check_pool(pool)
    sizes = check_sizes("sizes", sizes, 1)
    positions = _check_positions(positions)
    system = check_system(system)
    if distractors not in ("random", "adjacent"):
        raise EvalError(f'distractors must be "random" or "adjacent", but got {distractors!r}')

    planned: list[tuple[int, int, float, Request]] = []
    for index, case in enumerate(cases):
        drawn = _distractors(case, index, pool, sizes, distractors, seed)
        gold = case.gold
        for size in sizes:
            around = drawn(size - len(gold))
            for position in positions:
                start = round(position * (size - len(gold)))
                chunks = (*around[:start], *gold, *around[start:])
                planned.append((index, size, position, Request(case.question, chunks)))

    builder = assembler_for(assembler, system, (r for *_, r in planned), exact=True)
    prompts = [
        assembled_exactly(
            builder, system, request, f"{cases[i].label(i)}, size {size}, position {position:g}"
        ).text
        for i, size, position, request in planned
    ]
    answers = answer_all(generate, prompts, workers=workers, progress=progress)
    outcomes: dict[tuple[int, float], list[float]] = defaultdict(list)
    for (i, size, position, _), answer in zip(planned, answers, strict=True):
        outcomes[(size, position)].append(check_score(scorer(answer, cases[i]), scorer))
    return PositionResult(
        {key: summarise(values, seed=seed) for key, values in outcomes.items()},
        {(size, p): round(p * (size - 1)) + 1 for size, p in outcomes},
        sizes=sizes,
        positions=positions,
        seed=seed,
        settings={
            "sizes": list(sizes),
            "positions": list(positions),
            "distractors": distractors,
            "system": system,
            "model": getattr(generate, "model_id", None),
        },
    )


def _distractors(
    case: Case,
    index: int,
    pool: Sequence[Chunk],
    sizes: Sequence[int],
    how: Distractors,
    seed: int,
) -> Callable[[int], list[Chunk]]:
    """A function giving the `k` distractors of `case` for a prompt, checked to exist."""
    label = case.label(index)
    smallest, largest = min(sizes), max(sizes)
    if smallest < len(case.gold):
        raise EvalError(
            f"{label}: size {smallest} is smaller than its {len(case.gold)} gold chunks; "
            "every size must hold them all"
        )
    gold = {c.id for c in case.gold}
    candidates = [c for c in pool if c.id not in gold and not keyword_hit(c.content, case)]
    need = largest - len(case.gold)
    if need > len(candidates):
        raise EvalError(
            f"{label}: size {largest} needs {need} distractors, but the pool has only "
            f"{len(candidates)} chunks that are neither its gold nor hold all its keywords; "
            "pass a larger pool or smaller sizes"
        )
    if how == "random":
        drawn = random.Random(f"{seed}:{index}").sample(candidates, need)
        return lambda k: drawn[:k]
    near = nearest(case.gold, candidates)[:need]

    def adjacent(k: int) -> list[Chunk]:
        chosen = near[:k]
        random.Random(f"{seed}:{index}:{k}").shuffle(chosen)
        return chosen

    return adjacent


def _check_positions(positions: Sequence[float]) -> tuple[float, ...]:
    if isinstance(positions, str | bytes) or not isinstance(positions, Sequence) or not positions:
        raise EvalError(f"positions must be a non-empty sequence of numbers, but got {positions!r}")
    for value in positions:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise EvalError(f"positions must be numbers from 0 to 1, but got {value!r}")
    if len(set(positions)) < len(positions):
        raise EvalError(f"positions must not repeat a value, but got {list(positions)}")
    return tuple(positions)
