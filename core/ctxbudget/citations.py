"""Checking an answer's ``[n]`` citations against the sources that were sent."""

from __future__ import annotations

import re
from typing import Final

from pydantic import BaseModel, ConfigDict

__all__ = ["CitationCheck", "check_citations", "cited_numbers"]

# [3], [1, 2], [1][2], [2-4]; not [x], nor dates like [2024-01-01].
_GROUP: Final = re.compile(r"\[(\d{1,4}(?:\s*(?:,|-|\u2013)\s*\d{1,4})*)\]")
_ELEMENT: Final = re.compile(r"^(\d+)(?:\s*(?:-|\u2013)\s*(\d+))?$")
_MAX_RANGE: Final = 50


class CitationCheck(BaseModel):
    """Which citations in an answer point nowhere, and which sources went uncited."""

    model_config = ConfigDict(frozen=True)

    cited: tuple[int, ...]
    """Source numbers the answer cites, ascending, each once."""
    unknown: tuple[int, ...]
    """Numbers cited that no source carries: a fabricated or stale citation."""
    uncited: tuple[int, ...]
    """Sources sent to the model that the answer never cites."""

    @property
    def ok(self) -> bool:
        """No citation points nowhere."""
        return not self.unknown


def cited_numbers(answer: str) -> list[int]:
    """Every source number cited in `answer`, ascending, each once; ranges are expanded."""
    numbers: set[int] = set()
    for group in _GROUP.finditer(answer):
        found: set[int] = set()
        for element in group.group(1).split(","):
            match = _ELEMENT.match(element.strip())
            if match is None:  # "2024-01-01": not a number, not a range
                found.clear()
                break
            start = int(match.group(1))
            stop = int(match.group(2)) if match.group(2) else start
            if not 0 <= stop - start <= _MAX_RANGE:  # "[1-2024]", "[4-2]": not citations
                found.clear()
                break
            found.update(range(start, stop + 1))
        numbers |= found
    return sorted(numbers)


def check_citations(answer: str, available: int) -> CitationCheck:
    """Compare the citations in `answer` with sources numbered 1..`available`."""
    cited = cited_numbers(answer)
    known = set(range(1, available + 1))
    return CitationCheck(
        cited=tuple(cited),
        unknown=tuple(n for n in cited if n not in known),
        uncited=tuple(sorted(known - set(cited))),
    )
