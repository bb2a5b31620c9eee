"""Scoring answers: the default keyword hit, and the groundedness proxy of the k experiment.

A scorer is any ``(answer, case) -> float`` in [0, 1]; `keyword_hit` is deterministic
and needs no model, so a re-run scores the same answers the same way.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable

from ctxbudget import Assembled
from ctxbudget.eval._cases import Case
from ctxbudget.eval._errors import EvalError

__all__ = ["Scorer", "check_score", "grounded", "keyword_hit", "normalise"]

Scorer = Callable[[str, Case], float]
"""Scores one answer to one case: 1.0 correct, 0.0 wrong, anything between for partial credit."""


def normalise(text: str) -> str:
    """`text` compatibility-normalised (NFKC), case-folded, with every whitespace removed."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def keyword_hit(answer: str, case: Case) -> float:
    """1.0 when every keyword of `case` is in `answer`, ignoring case and whitespace; else 0.0.

    >>> case = Case(question="When?", keywords=["14 days"], gold=Chunk(id="c", content="..."))
    >>> keyword_hit("Refunds take 14  Days.", case)
    1.0
    """
    text = normalise(answer)
    return 1.0 if all(normalise(k) in text for k in case.keywords) else 0.0


def grounded(answer: str, case: Case, prompt: Assembled) -> float:
    """1.0 when `answer` cites at least one source, every citation exists, and the cited
    sources together contain every keyword; else 0.0. A proxy: it shows the answer points
    at evidence that holds the answer, not that the answer follows from it."""
    check = prompt.check_citations(answer)
    if not check.cited or check.unknown:
        return 0.0
    cited = normalise("".join(prompt.sources[n - 1].text for n in check.cited))
    return 1.0 if all(normalise(k) in cited for k in case.keywords) else 0.0


def check_score(value: object, scorer: Scorer) -> float:
    """A scorer's result as a float in [0, 1], or an `EvalError` naming the scorer."""
    if isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    name = getattr(scorer, "__qualname__", type(scorer).__name__)
    raise EvalError(f"scorer {name} returned {value!r}; a score must be a number from 0 to 1")
