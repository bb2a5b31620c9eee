"""Where each claimant's section sits in the prompt and what frames it.

Stable parts (system, examples, tools) come first so the provider's prompt cache
can reuse them; the parts that vary per request follow, and the question is last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ctxbudget.budget import Claimant

__all__ = ["FRAMES", "ORDER", "PREFIX", "SECTION_SEPARATOR", "Frame"]

SECTION_SEPARATOR: Final = "\n\n"

ORDER: Final[tuple[Claimant, ...]] = (
    "system",
    "examples",
    "tools",
    "history",
    "memory",
    "retrieved",
    "question",
)
"""Section order in the prompt."""

PREFIX: Final[frozenset[Claimant]] = frozenset({"system", "examples", "tools"})
"""The sections that form the cacheable prefix."""


@dataclass(frozen=True)
class Frame:
    """The text around a section's items and between them."""

    open: str
    close: str
    separator: str

    def wrap(self, bodies: list[str]) -> str:
        """The section text for these item texts."""
        return self.open + self.separator.join(bodies) + self.close


FRAMES: Final[dict[Claimant, Frame]] = {
    "system": Frame("", "", SECTION_SEPARATOR),
    "examples": Frame("<examples>\n", "\n</examples>", SECTION_SEPARATOR),
    "tools": Frame("<tools>\n", "\n</tools>", SECTION_SEPARATOR),
    "history": Frame("<conversation>\n", "\n</conversation>", SECTION_SEPARATOR),
    "memory": Frame("<memory>\n", "\n</memory>", SECTION_SEPARATOR),
    "question": Frame("Question: ", "", ""),
}
"""Frames of the sections whose framing is fixed; retrieved's frame is the fence (`fence.py`)."""
