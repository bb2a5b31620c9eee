"""Checking an answer's ``[n]`` citations against the sources that were sent."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CitationCheck", "check_citations", "check_numbered", "cited_numbers"]

# What answers write: [3], [ 5 ], [1, 2], [1,2], [1; 2], [1][2], [2-4], [2 - 4], and
# IEEE's [1]-[3] (unspaced only: "[1] - [3] disagree" cites two); any dash (hyphen,
# en/em dash, minus), fullwidth and lenticular brackets, fullwidth and ideographic commas,
# digits of any script, up to three spaces of any kind around each. Not [x], dates like
# [2024-01-01], nor ranges like [1-2024].
# Every quantifier is bounded, so each "[" costs a bounded scan: linear in the answer.
_SPACE: Final = r"\s{0,3}"
_OPEN: Final = "[\\[\uff3b\u3010]"  # "[", fullwidth, lenticular
_CLOSE: Final = "[\\]\uff3d\u3011]"
_LIST: Final = ",;\uff0c\uff1b\u3001"  # comma, semicolon, fullwidth both, ideographic comma
_DASH: Final = "\\-\u2010-\u2014\u2212\uff0d"  # hyphens, figure/en/em dash, minus, fullwidth
_STEP: Final = f"(?:{_SPACE}[{_LIST}{_DASH}]{_SPACE}|{_CLOSE}[{_DASH}]{_OPEN})"
_MAX_ITEMS: Final = 64  # numbers in one bracket; a longer list is not a citation
_GROUP: Final = re.compile(
    f"{_OPEN}{_SPACE}(\\d{{1,4}}(?:{_STEP}\\d{{1,4}}){{0,{_MAX_ITEMS - 1}}}){_SPACE}{_CLOSE}"
)
_SPLIT: Final = re.compile(f"[{_LIST}]")
_ELEMENT: Final = re.compile(f"(\\d{{1,4}})(?:{_SPACE}[{_DASH}]{_SPACE}(\\d{{1,4}}))?")
_BRACKETS: Final = str.maketrans("", "", "[]\uff3b\uff3d\u3010\u3011")
_MAX_RANGE: Final = 50


class CitationCheck(BaseModel):
    """Which citations in an answer point nowhere, and which sources went uncited."""

    model_config = ConfigDict(frozen=True)

    cited: tuple[int, ...] = Field(
        description="Source numbers the answer cites, ascending, each once; ranges expanded."
    )
    unknown: tuple[int, ...] = Field(
        description="Numbers cited that no source carries: a fabricated or stale citation."
    )
    uncited: tuple[int, ...] = Field(
        description="Sources sent to the model that the answer never cites."
    )

    @property
    def ok(self) -> bool:
        """No citation points nowhere."""
        return not self.unknown


def cited_numbers(answer: str) -> list[int]:
    """Every source number cited in `answer`, ascending, each once; ranges are expanded.

    Reads the ways answers write citations: ``[3]``, ``[ 5 ]``, ``[1, 2]``, ``[1; 2]``,
    ``[1][2]``, ``[2-4]`` and ``[2 - 4]`` with any dash, ``[1]-[3]``, and the fullwidth
    and lenticular brackets, commas and digits of CJK text.
    A bracket that holds anything else (``[x]``, a date like ``[2024-01-01]``, a range
    like ``[1-2024]`` or ``[4-2]``) cites nothing.
    """
    numbers: set[int] = set()
    for group in _GROUP.finditer(answer):
        numbers.update(_group_numbers(group.group(1)))
    return sorted(numbers)


def _group_numbers(inner: str) -> list[int]:
    """The numbers one bracket group cites, or none when any element is not a citation."""
    found: list[int] = []
    for element in _SPLIT.split(inner.translate(_BRACKETS)):
        match = _ELEMENT.fullmatch(element.strip())
        if match is None:  # "2024-01-01": not a number, not a range
            return []
        start = int(match.group(1))
        stop = int(match.group(2)) if match.group(2) else start
        if not 0 <= stop - start <= _MAX_RANGE:  # "[1-2024]", "[4-2]": not citations
            return []
        found.extend(range(start, stop + 1))
    return found


def check_citations(answer: str, available: int) -> CitationCheck:
    """Compare the citations in `answer` with sources numbered 1..`available`."""
    return check_numbered(answer, range(1, available + 1))


def check_numbered(answer: str, numbers: Iterable[int]) -> CitationCheck:
    """Compare the citations in `answer` with the sources the model was shown as `numbers`.

    For sources whose numbers are not 1..n: those a framework kept of a selection, or that
    came numbered from an earlier step.
    """
    cited = cited_numbers(answer)
    known = set(numbers)
    return CitationCheck(
        cited=tuple(cited),
        unknown=tuple(n for n in cited if n not in known),
        uncited=tuple(sorted(known - set(cited))),
    )
