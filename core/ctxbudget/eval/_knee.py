"""The k knee: how correctness, grounding and input tokens change with the number of chunks sent.

Past the knee, more chunks cost tokens (and often accuracy) without helping: the
smallest k whose correctness is within one case of the best is where to stop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxbudget import ContextAssembler
from ctxbudget.eval._calls import answer_all, check_workers
from ctxbudget.eval._cases import Case, as_cases
from ctxbudget.eval._prompts import (
    DEFAULT_SYSTEM,
    Request,
    assembler_for,
    check_sizes,
    check_system,
)
from ctxbudget.eval._result import SPREAD_NOTE, Result, format_cell, format_spread
from ctxbudget.eval._retrieve import Retriever, retrieve_all
from ctxbudget.eval._score import Scorer, check_score, grounded, keyword_hit
from ctxbudget.eval._stats import Cell, summarise

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["KneeResult", "k_knee"]


class KneeResult(Result):
    """Per k: fraction correct, fraction grounded, input tokens and a cost index."""

    title = "k knee (correctness, groundedness and input tokens by chunks sent)"

    def __init__(
        self,
        correct: Mapping[int, Cell],
        grounded: Mapping[int, Cell],
        tokens: Mapping[int, float],
        sources: Mapping[int, float],
        *,
        seed: int,
        settings: Mapping[str, Any],
    ) -> None:
        super().__init__(n=next(iter(correct.values())).n, seed=seed, settings=settings)
        self.ks = tuple(sorted(correct))
        """The ks measured, ascending."""
        self._correct = dict(correct)
        self._grounded = dict(grounded)
        self._tokens = dict(tokens)
        self._sources = dict(sources)

    def cell(self, k: int) -> Cell:
        """Correctness at `k`."""
        if k not in self._correct:
            raise KeyError(f"k={k} was not measured; ks: {list(self.ks)}")
        return self._correct[k]

    def score(self, k: int) -> float:
        """The fraction of cases answered correctly with the top `k` chunks."""
        return self.cell(k).score

    def interval(self, k: int) -> tuple[float, float]:
        """The bootstrap 95% interval of `score`."""
        return self.cell(k).interval

    def n(self, k: int) -> int:
        """How many cases the cell holds."""
        return self.cell(k).n

    def grounded(self, k: int) -> Cell:
        """Groundedness at `k`: answers citing only real sources that hold every keyword."""
        self.cell(k)
        return self._grounded[k]

    def tokens(self, k: int) -> float:
        """Mean prompt tokens at `k`."""
        self.cell(k)
        return self._tokens[k]

    def cost_index(self, k: int) -> float:
        """Mean prompt tokens at `k` relative to the smallest k (1.0 there)."""
        return self.tokens(k) / self._tokens[self.ks[0]]

    @property
    def knee(self) -> int:
        """The smallest k whose correctness is within the noise floor (one case) of the best."""
        best = max(c.score for c in self._correct.values())
        return next(k for k in self.ks if best - self._correct[k].score <= self.noise_floor + 1e-12)

    def records(self) -> list[dict[str, Any]]:
        return [
            {
                "k": k,
                "n": self._correct[k].n,
                "score": self._correct[k].score,
                "low": self._correct[k].low,
                "high": self._correct[k].high,
                "noise_floor": self._correct[k].noise_floor,
                "grounded": self._grounded[k].score,
                "grounded_low": self._grounded[k].low,
                "grounded_high": self._grounded[k].high,
                "tokens": self._tokens[k],
                "cost_index": self.cost_index(k),
                "sources": self._sources[k],
            }
            for k in self.ks
        ]

    def _columns(self) -> list[str]:
        return ["k", "correct", "grounded", "input tokens", "cost index", "sources kept"]

    def _rows(self) -> list[list[str]]:
        return [
            [
                str(k),
                format_cell(self._correct[k]),
                format_cell(self._grounded[k]),
                f"{self._tokens[k]:,.0f}",
                f"{self.cost_index(k):.2f}",
                f"{self._sources[k]:.1f}",
            ]
            for k in self.ks
        ]

    def _notes(self) -> list[str]:
        return [
            *super()._notes(),
            f"spread of correctness over k: {format_spread(list(self._correct.values()))}",
            f"knee: k = {self.knee} (the smallest k within one case of the best)",
            SPREAD_NOTE,
        ]

    def _draw(self, axes: Axes) -> None:
        for label, cells in (("correct", self._correct), ("grounded", self._grounded)):
            values = [cells[k] for k in self.ks]
            axes.errorbar(
                self.ks,
                [c.score for c in values],
                yerr=[[c.score - c.low for c in values], [c.high - c.score for c in values]],
                marker="o",
                capsize=3,
                label=label,
            )
        axes.axvline(self.knee, linestyle=":", color="grey", label=f"knee (k = {self.knee})")
        axes.set_xlabel("k (chunks sent)")
        axes.set_ylabel("fraction of cases")
        axes.set_ylim(-0.05, 1.05)
        axes.legend()

    def __repr__(self) -> str:
        return f"KneeResult(ks={self.ks}, n={self.cases}, knee={self.knee})"


def k_knee(
    generate: Callable[[str], str],
    cases: Iterable[Case | Mapping[str, Any]],
    retrieve: Retriever,
    *,
    ks: Sequence[int] = (3, 4, 6, 8, 12, 20),
    assembler: ContextAssembler | None = None,
    system: str | None = DEFAULT_SYSTEM,
    scorer: Scorer = keyword_hit,
    workers: int = 4,
    progress: bool | None = None,
    seed: int = 0,
) -> KneeResult:
    """Score each case with the first k chunks `retrieve` returns for its question, per k.

    With `assembler`, prompts are built as your app builds them (its budget, order and
    dedup are part of what is measured); without, a default assembler under a budget
    that holds every chunk. Groundedness is a proxy: the answer cites at least one
    source, cites none that does not exist, and the cited sources hold every keyword.
    The cost index is the mean prompt size relative to the smallest k.
    """
    workers = check_workers(workers)
    cases = as_cases(cases)
    ks = check_sizes("ks", ks, 1)
    system = check_system(system)
    retrieved = retrieve_all(retrieve, cases, max(ks))
    requests = [
        (i, k, Request(case.question, tuple(retrieved[i][:k])))
        for i, case in enumerate(cases)
        for k in ks
    ]
    builder = assembler_for(assembler, system, (r for *_, r in requests), exact=False)
    prompts = [
        builder.assemble(system=system, question=r.question, chunks=r.chunks) for *_, r in requests
    ]
    answers = answer_all(generate, [p.text for p in prompts], workers=workers, progress=progress)
    correct: dict[int, list[float]] = {k: [] for k in ks}
    grounding: dict[int, list[float]] = {k: [] for k in ks}
    tokens: dict[int, list[int]] = {k: [] for k in ks}
    kept: dict[int, list[int]] = {k: [] for k in ks}
    for (i, k, _), prompt, answer in zip(requests, prompts, answers, strict=True):
        correct[k].append(check_score(scorer(answer, cases[i]), scorer))
        grounding[k].append(grounded(answer, cases[i], prompt))
        tokens[k].append(prompt.report.total)
        kept[k].append(len(prompt.sources))
    return KneeResult(
        {k: summarise(v, seed=seed) for k, v in correct.items()},
        {k: summarise(v, seed=seed) for k, v in grounding.items()},
        {k: sum(v) / len(v) for k, v in tokens.items()},
        {k: sum(v) / len(v) for k, v in kept.items()},
        seed=seed,
        settings={"ks": list(ks), "system": system, "model": getattr(generate, "model_id", None)},
    )
