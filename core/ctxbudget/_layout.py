"""Where each claimant's section sits in the prompt, what frames it, and how turns are labelled.

Stable parts (system, examples, tools) come first so the provider's prompt cache
can reuse them; the parts that vary per request follow, and the question is last.
The tag names below are the one list of frames: the fence neutralises look-alikes
of every one of them, so no section can forge another's frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ctxbudget._claimants import Claimant
from ctxbudget._inputs import Role

__all__ = [
    "FRAMES",
    "FRAME_TAGS",
    "PREFIX",
    "ROLE_LABELS",
    "SECTIONS",
    "SECTION_ORDER",
    "SECTION_SEPARATOR",
    "TAIL",
    "Frame",
    "Section",
]

SECTION_SEPARATOR: Final = "\n\n"


@dataclass(frozen=True)
class Section:
    """One claimant's place in the prompt: its frame tag, and whether it is cacheable."""

    name: Claimant
    tag: str | None
    """The XML-like tag around the section; None for an unframed one."""
    prefix: bool
    """Part of the stable, cacheable prefix."""
    given: str
    """How the input is named in an error: "tools were" given but not allocated."""


SECTIONS: Final[tuple[Section, ...]] = (
    Section("system", None, prefix=True, given="a system prompt was"),
    Section("examples", "examples", prefix=True, given="examples were"),
    Section("tools", "tools", prefix=True, given="tools were"),
    Section("history", "conversation", prefix=False, given="history was"),
    Section("memory", "memory", prefix=False, given="memory was"),
    Section("retrieved", "retrieved_documents", prefix=False, given="chunks were"),
    Section("question", None, prefix=False, given="a question was"),
)
"""The one table of claimants, in prompt order; everything below is derived from it."""

SECTION_ORDER: Final[tuple[Claimant, ...]] = tuple(s.name for s in SECTIONS)
"""Section order in the prompt."""

PREFIX: Final[frozenset[Claimant]] = frozenset(s.name for s in SECTIONS if s.prefix)
"""The sections that form the cacheable prefix."""

TAIL: Final[tuple[Claimant, ...]] = tuple(
    s.name for s in SECTIONS if not s.prefix and s.name != "history"
)
"""The sections after the conversation: they form the last user message."""

FRAME_TAGS: Final[dict[Claimant, str]] = {s.name: s.tag for s in SECTIONS if s.tag is not None}
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


def _frame(section: Section) -> Frame:
    if section.name == "question":
        return Frame("Question: ", "", "")
    if section.tag is None:
        return Frame("", "", SECTION_SEPARATOR)
    return Frame(f"<{section.tag}>\n", f"\n</{section.tag}>", SECTION_SEPARATOR)


FRAMES: Final[dict[Claimant, Frame]] = {
    s.name: _frame(s) for s in SECTIONS if s.name != "retrieved"
}
"""Frames of the sections whose framing is fixed; retrieved's frame is the fence (`_fence.py`)."""
