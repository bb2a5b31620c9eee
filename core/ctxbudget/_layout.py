"""Where each claimant's section sits in the prompt, what frames it, and how turns are labelled.

Stable parts (system, examples, tools) come first so the provider's prompt cache
can reuse them; the parts that vary per request follow, and the question is last.
The tag names below are the one list of frames: the fence neutralises look-alikes
of every one of them, so no section can forge another's frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ctxbudget._budget import Claimant
from ctxbudget._inputs import Role

__all__ = [
    "FRAMES",
    "FRAME_TAGS",
    "ORDER",
    "PREFIX",
    "ROLE_LABELS",
    "SECTION_SEPARATOR",
    "Frame",
]

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

FRAME_TAGS: Final[dict[Claimant, str]] = {
    "examples": "examples",
    "tools": "tools",
    "history": "conversation",
    "memory": "memory",
    "retrieved": "retrieved_documents",
}
"""The XML-like tag around each framed section; retrieved's is the untrusted-data fence."""

ROLE_LABELS: Final[dict[Role, str]] = {
    "system": "System",
    "user": "User",
    "assistant": "Assistant",
    "tool": "Tool",
}
"""How a turn of each role is labelled in the conversation section."""


@dataclass(frozen=True)
class Frame:
    """The text around a section's items and between them."""

    open: str
    close: str
    separator: str

    def wrap(self, bodies: list[str]) -> str:
        """The section text for these item texts."""
        return self.open + self.separator.join(bodies) + self.close


def _tagged(claimant: Claimant) -> Frame:
    tag = FRAME_TAGS[claimant]
    return Frame(f"<{tag}>\n", f"\n</{tag}>", SECTION_SEPARATOR)


FRAMES: Final[dict[Claimant, Frame]] = {
    "system": Frame("", "", SECTION_SEPARATOR),
    "examples": _tagged("examples"),
    "tools": _tagged("tools"),
    "history": _tagged("history"),
    "memory": _tagged("memory"),
    "question": Frame("Question: ", "", ""),
}
"""Frames of the sections whose framing is fixed; retrieved's frame is the fence (`_fence.py`)."""
