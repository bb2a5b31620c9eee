"""Conflict policies: what the model should do when sources of different dates disagree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

from ctxbudget._inputs import Chunk

__all__ = ["ConflictPolicy", "conflict_instruction", "dates_differ"]

ConflictPolicy = Literal["prefer_newer", "surface_both", "abstain"]

_INSTRUCTIONS: Final[dict[ConflictPolicy, str]] = {
    "prefer_newer": (
        "Sources marked with different effective dates may disagree; where they do, "
        "follow the one with the latest effective date."
    ),
    "surface_both": (
        "Sources marked with different effective dates may disagree; where they do, give "
        "each version with its effective date and source number instead of choosing one."
    ),
    "abstain": (
        "Sources marked with different effective dates may disagree; where they do on the "
        "point asked, say that the sources conflict and do not answer from either."
    ),
}


def conflict_instruction(policy: ConflictPolicy) -> str:
    """The sentence added to the fence notice when kept sources differ in effective date."""
    return _INSTRUCTIONS[policy]


def dates_differ(chunks: Iterable[Chunk]) -> bool:
    """Whether the sources carry at least two distinct effective dates."""
    return len({c.effective_date for c in chunks if c.effective_date is not None}) >= 2
