"""The cacheable prefix: its hash, and a lint for text that changes per request.

Provider prompt caches match a byte-identical prefix. One timestamp in the system
prompt makes every request a miss, silently; so we look for the usual suspects.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Final

__all__ = ["prefix_hash", "volatile_parts"]

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"

_VOLATILE: Final = (
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"), "a timestamp"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "a date"),
    (re.compile(rf"\b{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b", re.IGNORECASE), "a date"),
    (re.compile(rf"\b\d{{1,2}} {_MONTH},? \d{{4}}\b", re.IGNORECASE), "a date"),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b"), "a time of day"),
    (re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b"), "a Unix timestamp"),
    (
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
        "a UUID",
    ),
    (
        re.compile(r"\b(?:today is|current (?:date|time)|the time is|now is)\b", re.IGNORECASE),
        "a current-date phrase",
    ),
)


def prefix_hash(text: str) -> str:
    """sha256 of the prefix text, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def volatile_parts(section: str, text: str) -> list[str]:
    """Warnings for things in `text` that look like they change on every request."""
    return list(_volatile(section, text))


@functools.lru_cache(maxsize=64)
def _volatile(section: str, text: str) -> tuple[str, ...]:
    # The prefix is the same request after request (that is the point of it): scan it once.
    warnings: list[str] = []
    seen: set[str] = set()
    for pattern, what in _VOLATILE:
        match = pattern.search(text)
        if match is None or what in seen:
            continue
        seen.add(what)
        warnings.append(
            f"{section} contains {what} ({match.group(0)!r}), which looks like it changes per "
            "request and would defeat the prompt cache; if it does, pass it as memory (after "
            "the cache boundary) instead"
        )
    return tuple(warnings)
