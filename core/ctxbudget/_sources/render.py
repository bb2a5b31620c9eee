"""How a source reads in the prompt: a numbered header, then the (neutralised) content.

Every token either helps or competes. The header carries what changes how the
content should be read — title, heading path, a freshness note when stale, a parse
warning when present, the effective date when a conflict policy needs it — and
never scores, the source system, ordinals or anything derived from the content.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final
from weakref import WeakKeyDictionary

from ctxbudget._fence import SourceFormat
from ctxbudget._inputs import Chunk
from ctxbudget._neutralise import neutralise, neutralise_field, neutralise_header

if TYPE_CHECKING:
    from ctxbudget._tokens import CountCache

__all__ = ["HeaderCache", "RenderOptions", "header", "header_cache", "render_source"]

_SPACES: Final = re.compile(r"\s+")


@dataclass(frozen=True)
class RenderOptions:
    """What a header may show, fixed per request."""

    fmt: SourceFormat = "markdown"
    stale_after: timedelta | None = None
    """A source last updated longer ago than this gets a freshness note; None: never."""
    now: datetime | None = None
    """The reference time for staleness (aware, UTC if naive)."""
    effective_dates: bool = False
    """Show effective dates (a conflict policy is set and the sources differ in date)."""


@functools.lru_cache(maxsize=4_096)
def _clean(text: str, fmt: SourceFormat) -> str:
    # Header fields come from the documents too: one line, no structure look-alikes, and
    # in markdown none of the annotations `header` adds after them (docs/sources.md,
    # "Hostile content"). XML attributes are quoted: a field cannot spell another attribute.
    line = _SPACES.sub(" ", text).strip()
    return neutralise_field(line) if fmt == "markdown" else neutralise(line, fmt=fmt)


def _stale_since(chunk: Chunk, options: RenderOptions) -> str | None:
    if options.stale_after is None or options.now is None or chunk.updated_at is None:
        return None
    updated = chunk.updated_at
    if updated.tzinfo is None:
        updated = updated.replace(tzinfo=UTC)
    now = options.now if options.now.tzinfo is not None else options.now.replace(tzinfo=UTC)
    if now - updated <= options.stale_after:
        return None
    return updated.date().isoformat()


def _section(heading_path: tuple[str, ...], title: str | None, fmt: SourceFormat) -> str:
    path = [_clean(h, fmt) for h in heading_path if h.strip()]
    if path and title and path[0] == _clean(title, fmt):
        path = path[1:]  # "Returns policy — Returns policy > EU" repeats itself
    return " > ".join(path)


class HeaderCache:
    """Source headers by their number and the text of the fields they show, at most
    `maxsize` (least recently used first out); thread-safe. Reported like the count cache:
    `len()`, `.calls` for the headers rendered, `.maxsize`.

    A `functools.lru_cache` per assembler: a header is looked up several times per request,
    and the C LRU costs a fraction of a Python one on each hit.
    """

    def __init__(self, *, maxsize: int) -> None:
        """`maxsize`: headers held at most (the assembler's `cache_size`)."""
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, but got {maxsize}")
        self._maxsize = maxsize
        self.render = functools.lru_cache(maxsize=maxsize)(_header)
        """`_header`, remembered by its arguments."""

    def __len__(self) -> int:
        return self.render.cache_info().currsize

    @property
    def calls(self) -> int:
        """How many headers were actually rendered (misses)."""
        return self.render.cache_info().misses

    @property
    def maxsize(self) -> int:
        """Headers held at most."""
        return self._maxsize


_HEADERS: WeakKeyDictionary[CountCache, HeaderCache] = WeakKeyDictionary()
_LOCK: Final = threading.Lock()


def header_cache(counter: CountCache) -> HeaderCache:
    """The source headers of an assembler's token `counter`, as many at most as it counts
    texts; made on first use and gone with it."""
    with _LOCK:
        cache = _HEADERS.get(counter)
        if cache is None:
            cache = _HEADERS[counter] = HeaderCache(maxsize=counter.maxsize)
        return cache


def header(
    n: int, chunk: Chunk, options: RenderOptions, *, cache: HeaderCache | None = None
) -> str:
    """The header of source `n` (markdown: one line; XML: the opening tag), from `cache`
    when one with the same number and shown fields was rendered before: a follow-up's new
    Chunk objects, and every chunk of one document at one number, render the same header
    (costing renders each several times)."""
    effective = (
        chunk.effective_date.isoformat()
        if options.effective_dates and chunk.effective_date is not None
        else None
    )
    render = _header if cache is None else cache.render
    return render(
        n,
        chunk.title,
        chunk.heading_path,
        chunk.parse_warnings,
        effective,
        _stale_since(chunk, options),
        options.fmt,
    )


def _header(
    n: int,
    title_field: str | None,
    heading_path: tuple[str, ...],
    parse_warnings: tuple[str, ...],
    effective: str | None,
    stale: str | None,
    fmt: SourceFormat,
) -> str:
    title = _clean(title_field, fmt) if title_field else ""
    section = _section(heading_path, title_field, fmt)
    warning = "; ".join(_clean(w, fmt) for w in parse_warnings if w.strip())
    if fmt == "xml":
        attributes = [("index", str(n)), ("title", title), ("section", section)]
        attributes += [("effective", effective or ""), ("updated", stale or "")]
        if stale:
            attributes.append(("freshness", "may be out of date"))
        attributes.append(("warning", warning))
        rendered = " ".join(f'{k}="{_attr(v)}"' for k, v in attributes if v)
        return f"<document {rendered}>"
    parts = []
    if title:
        parts.append(title)
    if section:
        parts.append(f"— {section}" if title else section)
    if effective:
        parts.append(f"(effective {effective})")
    if stale:
        parts.append(f"(updated {stale}; may be out of date)")
    if warning:
        parts.append(f"⚠ {warning}")
    return f"[{n}] {_joined(' '.join(parts))}" if parts else f"[{n}]"


@functools.lru_cache(maxsize=4_096)
def _joined(rest: str) -> str:
    # Each field was cleaned on its own; where two join, or the last meets the content on
    # the next line, they could still spell a tag ("</retrieved" + " — documents>").
    return neutralise_header(rest)


def render_source(
    n: int, chunk: Chunk, content: str, options: RenderOptions, *, cache: HeaderCache | None = None
) -> str:
    """Source `n` as the model reads it; `content` is the chunk's neutralised text; `cache`
    as for `header`."""
    if options.fmt == "xml":
        return f"{header(n, chunk, options, cache=cache)}\n{content}\n</document>"
    return f"{header(n, chunk, options, cache=cache)}\n{content}"


# The fullwidth quotation mark too: a reader takes it for the quote that ends a value.
_ATTRIBUTE_ESCAPES: Final = str.maketrans(
    {"&": "&amp;", '"': "&quot;", "\uff02": "&quot;", "<": "&lt;", ">": "&gt;"}
)


def _attr(value: str) -> str:
    return value.translate(_ATTRIBUTE_ESCAPES)
