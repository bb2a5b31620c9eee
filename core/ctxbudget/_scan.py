"""Ingest-time scan for instruction-like text: a signal in the header, never a gate.

Documents legitimately contain imperatives ("Click Save", "Do not operate while
wet"), so nothing is dropped. What is flagged are the shapes prompt injections
take: instructions addressed to an AI, "ignore previous instructions", chat-role
markers, hidden characters (tag characters and variation selectors that smuggle
text past a reader), and markdown images whose URL carries a query (the classic
way to exfiltrate data through a rendered answer). Warnings name the pattern,
never quote the text, because they are rendered into the prompt.
"""

from __future__ import annotations

import re
from typing import Final

from ctxbudget._inputs import Chunk

__all__ = ["flag_instructions", "scan_for_instructions"]

_FLAGS = re.IGNORECASE | re.MULTILINE

# Every pattern is linear in its input: possessive quantifiers, bounded gaps, and no
# class that can run past the structure that ends it (an image's alt text stops at
# the next bracket), so no shape of text makes a scan backtrack.
_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|"
            r"above|earlier|all|any|your|the)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|"
            r"guidelines|directions|context)\b",
            _FLAGS,
        ),
        "asks to ignore earlier instructions",
    ),
    (
        re.compile(
            r"\b(?:(?:dear|attention|note to|hey)\s++)?(?:AI|assistant|chatbot|LLM|language model|"
            r"GPT|Claude|model)\b\s*+[,:]\s*+(?:please\s++)?(?:you\s++(?:must|should|will)\s++)?"
            r"(?:ignore|do|tell|send|reveal|print|output|respond|reply|say|include|write|"
            r"forward|email|call|execute|run|visit|open|summari[sz]e|translate)\b",
            _FLAGS,
        ),
        "addresses instructions to an AI",
    ),
    (
        re.compile(
            r"\b(?:you are now|from now on,? you|act as (?:an?|the)\b|pretend (?:to be|you are)|"
            r"your new (?:instructions|task|role)|new instructions\s*+:|system prompt)",
            _FLAGS,
        ),
        "tries to change the assistant's role or instructions",
    ),
    (
        re.compile(
            r"^[ \t>*_#]*+(?:human|user|assistant|system|developer|tool)[ \t*_]*+:"
            r"|<\|[a-z_]{2,30}+\|>|\[/?INST\]|<</?SYS>>",
            _FLAGS,
        ),
        "contains chat-role markers",
    ),
    (
        re.compile(
            r"!\[[^\[\]\n]*+\]\(\s*+<?https?://[^\s()<>\[\]?]*+\?[^\s()<>\[\]]*+>?\)",
            re.IGNORECASE,
        ),
        "contains a markdown image with a URL query (a data-exfiltration pattern)",
    ),
    (
        re.compile(
            # Unicode tag characters (ASCII smuggling); a run of variation selectors, or
            # a supplementary one anywhere but after a CJK ideograph (one selector per
            # hidden byte); a run of zero-width, bidi or filler characters.
            "[\U000e0000-\U000e007f]"
            "|[\ufe00-\ufe0f\U000e0100-\U000e01ef]{2,}+"
            "|[\U000e0100-\U000e01ef]"
            "(?<![\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
            "[\U000e0100-\U000e01ef])"
            "|[\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
            "\u2066-\u206f\u3164\ufeff\uffa0]{3,}+"
        ),
        "contains hidden characters",
    ),
)


def scan_for_instructions(text: str) -> list[str]:
    """Parse warnings for instruction-like text in `text`, one per kind found; [] if clean."""
    return [warning for pattern, warning in _PATTERNS if pattern.search(text)]


def flag_instructions(chunk: Chunk) -> Chunk:
    """`chunk` with `scan_for_instructions` findings added to its parse warnings (once each)."""
    found = [w for w in scan_for_instructions(chunk.content) if w not in chunk.parse_warnings]
    if not found:
        return chunk
    return chunk.model_copy(update={"parse_warnings": (*chunk.parse_warnings, *found)})
