"""Metadata ablation: correctness with and without each header field, against the same chunks.

The core renders title, heading path, a freshness note and parse warnings, and
never renders scores or a date on every source. Each variant changes one thing in
the chunks before they are assembled, so the header the model reads changes in just
that way (see `VARIANTS`); every other part of the prompt stays the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from ctxbudget import Chunk, ContextAssembler
from ctxbudget.eval._calls import answer_all, check_workers
from ctxbudget.eval._cases import Case, as_cases
from ctxbudget.eval._errors import EvalError
from ctxbudget.eval._prompts import (
    DEFAULT_SYSTEM,
    Request,
    assembler_for,
    check_sizes,
    check_system,
)
from ctxbudget.eval._result import Result, format_cell
from ctxbudget.eval._retrieve import Retriever, retrieve_all
from ctxbudget.eval._score import Scorer, check_score, keyword_hit
from ctxbudget.eval._stats import Cell, difference, spread, summarise

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["FIELDS", "VARIANTS", "AblationResult", "Field", "ablate", "ablation"]

Field = Literal["heading_path", "title", "freshness", "parse_warnings", "score", "dates_on_all"]

FIELDS: Final[tuple[Field, ...]] = (
    "heading_path",
    "title",
    "freshness",
    "parse_warnings",
    "score",
    "dates_on_all",
)
"""The header fields `ablation` measures by default."""

VARIANTS: Final[Mapping[str, str]] = {
    "heading_path": "- heading_path: every chunk's heading_path is emptied",
    "title": "- title: every chunk's title is removed",
    "freshness": "- freshness: every chunk's updated_at is removed, so no source is marked stale",
    "parse_warnings": "- parse_warnings: every chunk's parse_warnings are removed",
    "score": "+ score: '(relevance 0.83)' (rerank_score, else score) is added to the title",
    "dates_on_all": "+ dates_on_all: '(dated 2024-05-01)' (effective_date, else updated_at) "
    "is added to every title",
}
"""What each variant does to the chunks: `-` removes a field the core shows, `+` adds
to the title one it never shows. A chunk without the field is left as it is."""


def ablate(chunk: Chunk, field: Field) -> Chunk:
    """`chunk` as the `field` variant sends it (see `VARIANTS`)."""
    return _CHANGES[field](chunk)


def _with_score(chunk: Chunk) -> Chunk:
    score = chunk.rerank_score if chunk.rerank_score is not None else chunk.score
    return chunk if score is None else _titled(chunk, f"(relevance {score:.2f})")


def _with_date(chunk: Chunk) -> Chunk:
    day = chunk.effective_date or (chunk.updated_at.date() if chunk.updated_at else None)
    return chunk if day is None else _titled(chunk, f"(dated {day.isoformat()})")


def _titled(chunk: Chunk, note: str) -> Chunk:
    title = f"{chunk.title} {note}" if chunk.title else note
    return chunk.model_copy(update={"title": title})


_CHANGES: Final[Mapping[str, Callable[[Chunk], Chunk]]] = {
    "heading_path": lambda c: c.model_copy(update={"heading_path": ()}),
    "title": lambda c: c.model_copy(update={"title": None}),
    "freshness": lambda c: c.model_copy(update={"updated_at": None}),
    "parse_warnings": lambda c: c.model_copy(update={"parse_warnings": ()}),
    "score": _with_score,
    "dates_on_all": _with_date,
}


class AblationResult(Result):
    """Correctness per variant, and each variant's difference from the baseline."""

    title = "Metadata ablation (fraction correct with and without each header field)"

    def __init__(
        self,
        cells: Mapping[str, Cell],
        deltas: Mapping[str, Cell],
        changed: Mapping[str, int],
        *,
        seed: int,
        settings: Mapping[str, Any],
    ) -> None:
        super().__init__(n=cells["baseline"].n, seed=seed, settings=settings)
        self.variants = tuple(cells)
        """"baseline", then the fields measured."""
        self._cells = dict(cells)
        self._deltas = dict(deltas)
        self._changed = dict(changed)

    def cell(self, variant: str) -> Cell:
        """Correctness of `variant` ("baseline" or a field)."""
        if variant not in self._cells:
            raise KeyError(f"{variant!r} was not measured; variants: {list(self.variants)}")
        return self._cells[variant]

    def score(self, variant: str) -> float:
        """The fraction of cases answered correctly."""
        return self.cell(variant).score

    def interval(self, variant: str) -> tuple[float, float]:
        """The bootstrap 95% interval of `score`."""
        return self.cell(variant).interval

    def n(self, variant: str) -> int:
        """How many cases the cell holds."""
        return self.cell(variant).n

    def delta(self, variant: str) -> Cell:
        """Per-case score minus the baseline's, with a paired bootstrap interval."""
        self.cell(variant)
        return self._deltas[variant]

    def changed(self, variant: str) -> int:
        """How many cases' prompts the variant changed; 0 means no chunk carries the field."""
        self.cell(variant)
        return self._changed[variant]

    def records(self) -> list[dict[str, Any]]:
        return [
            {
                "variant": variant,
                "n": cell.n,
                "score": cell.score,
                "low": cell.low,
                "high": cell.high,
                "noise_floor": cell.noise_floor,
                "delta": self._deltas[variant].score,
                "delta_low": self._deltas[variant].low,
                "delta_high": self._deltas[variant].high,
                "prompts_changed": self._changed[variant],
            }
            for variant, cell in self._cells.items()
        ]

    def _label(self, variant: str) -> str:
        return variant if variant == "baseline" else VARIANTS[variant].partition(":")[0]

    def _note(self, variant: str) -> str:
        if variant == "baseline":
            return ""
        if self._changed[variant] == 0:
            return "no prompt changed: no chunk carries it"
        _, label, p = spread([self._cells["baseline"], self._cells[variant]])
        return difference(label, p)

    def _columns(self) -> list[str]:
        return ["variant", "correct", "vs baseline", "prompts changed", "note"]

    def _rows(self) -> list[list[str]]:
        return [
            [
                self._label(v),
                format_cell(self._cells[v]),
                "" if v == "baseline" else format_cell(self._deltas[v], signed=True),
                f"{self._changed[v]}/{self.cases}",
                self._note(v),
            ]
            for v in self.variants
        ]

    def _notes(self) -> list[str]:
        return [
            *super()._notes(),
            "vs baseline: mean per-case difference, paired bootstrap 95% interval; note: exact "
            "paired sign test against the baseline (a difference of one case is noise)",
            *(VARIANTS[v] for v in self.variants if v != "baseline"),
        ]

    def _draw(self, axes: Axes) -> None:
        cells = [self._cells[v] for v in self.variants]
        places = list(range(len(cells)))
        axes.barh(
            places,
            [c.score for c in cells],
            xerr=[[c.score - c.low for c in cells], [c.high - c.score for c in cells]],
            capsize=3,
        )
        axes.set_yticks(places, [self._label(v) for v in self.variants])
        axes.invert_yaxis()
        axes.set_xlabel("fraction correct")
        axes.set_xlim(0, 1.05)

    def __repr__(self) -> str:
        return f"AblationResult(variants={self.variants}, n={self.cases})"


def ablation(
    generate: Callable[[str], str],
    cases: Iterable[Case | Mapping[str, Any]],
    retrieve: Retriever,
    *,
    fields: Sequence[Field] = FIELDS,
    k: int = 6,
    assembler: ContextAssembler | None = None,
    system: str | None = DEFAULT_SYSTEM,
    scorer: Scorer = keyword_hit,
    workers: int = 4,
    progress: bool | None = None,
    seed: int = 0,
) -> AblationResult:
    """Score each case with its first `k` retrieved chunks as they are (the baseline) and
    as each variant of `fields` changes them (`VARIANTS` says how).

    With `assembler`, prompts are built as your app builds them; without, by a default
    assembler under a budget that holds every chunk. A variant that changes no prompt is
    labelled so: no chunk carries that field, and its row measures nothing.
    """
    workers = check_workers(workers)
    cases = as_cases(cases)
    (k,) = check_sizes("k", [k], 1)
    system = check_system(system)
    measured = _check_fields(fields)
    variants: list[str] = ["baseline", *measured]
    retrieved = retrieve_all(retrieve, cases, k)
    requests = [
        (i, variant, Request(case.question, tuple(_variant(c, variant) for c in retrieved[i])))
        for i, case in enumerate(cases)
        for variant in variants
    ]
    builder = assembler_for(assembler, system, (r for *_, r in requests), exact=False)
    prompts = [
        builder.assemble(system=system, question=r.question, chunks=r.chunks).text
        for *_, r in requests
    ]
    answers = answer_all(generate, prompts, workers=workers, progress=progress)
    scores: dict[str, list[float]] = {v: [] for v in variants}
    texts: dict[str, list[str]] = {v: [] for v in variants}
    for (i, variant, _), prompt, answer in zip(requests, prompts, answers, strict=True):
        scores[variant].append(check_score(scorer(answer, cases[i]), scorer))
        texts[variant].append(prompt)
    base = scores["baseline"]
    return AblationResult(
        {v: summarise(scores[v], seed=seed) for v in variants},
        {
            v: summarise([a - b for a, b in zip(scores[v], base, strict=True)], seed=seed)
            for v in variants
        },
        {
            v: sum(a != b for a, b in zip(texts[v], texts["baseline"], strict=True))
            for v in variants
        },
        seed=seed,
        settings={
            "fields": list(measured),
            "k": k,
            "system": system,
            "model": getattr(generate, "model_id", None),
        },
    )


def _variant(chunk: Chunk, variant: str) -> Chunk:
    return chunk if variant == "baseline" else _CHANGES[variant](chunk)


def _check_fields(fields: Sequence[str]) -> tuple[str, ...]:
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
        raise EvalError(f"fields must be a non-empty sequence of field names, but got {fields!r}")
    for field in fields:
        if field not in VARIANTS:
            raise EvalError(f"unknown field {field!r}; fields: {', '.join(FIELDS)}")
    if len(set(fields)) < len(fields):
        raise EvalError(f"fields must not repeat a value, but got {list(fields)}")
    return tuple(fields)
