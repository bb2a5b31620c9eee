"""A chunk's size in tokens bounded from its raw text, before it is neutralised or tokenized.

Selection walks candidates in rank order and must rule out one that cannot fit without
reading it closely (docs/speed.md, "Where the time goes"). Three numbers do that,
cheapest first, each from the chunk's raw text and the longest token of the tokenizer
(`per_token`, UTF-8 bytes):
`ceiling` ≥ `bound` ≥ `quick_bound`, and `bound` is a lower bound on what the neutralised
(and datamarked) text costs. `_pack.Packer` reads `ceiling` first (while it fits, nothing
else is computed), then `quick_bound` (when it alone is over, the chunk is oversize), then
`bound`. Each is written to be bound to its first arguments with `functools.partial`, so
a call is one Python frame per candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from weakref import WeakKeyDictionary

from ctxbudget._inputs import Chunk
from ctxbudget._normalised import removable_bytes
from ctxbudget._tokens import BoundedTokenizer, CountCache

__all__ = ["Estimates", "estimates"]

Estimates = tuple[Callable[[Chunk], int], Callable[[Chunk], int], Callable[[Chunk], int]]
"""A chunk's `bound`, `quick_bound` and `ceiling`, in that order."""


def estimates(counter: CountCache, *, datamarked: bool) -> Estimates:
    """`bound`, `quick_bound` and `ceiling` for the counter's tokenizer; all 0 when it does not
    say how long its tokens are (it is no `BoundedTokenizer`)."""
    per_token = _bytes_per_token(counter)
    if not per_token:
        return _unknown, _unknown, _unknown
    return (
        partial(bound, per_token, datamarked),
        partial(quick_bound, per_token, datamarked),
        partial(ceiling, per_token),
    )


_PER_TOKEN: WeakKeyDictionary[CountCache, int] = WeakKeyDictionary()


def _bytes_per_token(counter: CountCache) -> int:
    """The longest token of the counter's tokenizer in UTF-8 bytes; 0 when it does not say.

    Remembered per counter (an assembler keeps one for all its requests): the runtime
    protocol check costs about 20 µs, a sizeable share of a request's selection.
    """
    known = _PER_TOKEN.get(counter)
    if known is None:
        tokenizer = counter.tokenizer
        known = tokenizer.max_token_bytes if isinstance(tokenizer, BoundedTokenizer) else 0
        _PER_TOKEN[counter] = known
    return known


def _unknown(chunk: Chunk) -> int:
    return 0


def bound(per_token: int, datamarked: bool, chunk: Chunk) -> int:
    """A lower bound on the neutralised chunk's tokens: its UTF-8 bytes less those
    neutralising (and datamarking) can take out (`removable_bytes`), over `per_token`."""
    text = chunk.content
    kept = len(text.encode("utf-8")) - removable_bytes(text, datamarked=datamarked)
    return -(-kept // per_token)


def quick_bound(per_token: int, datamarked: bool, chunk: Chunk) -> int:
    """A number never above `bound`, from one C scan where `bound` takes several.

    The ASCII bytes neutralising keeps (it never shortens what it rewrites, and only
    characters its view changes can shrink), less the spaces and tabs datamarking may
    merge. A non-ASCII character takes 2 UTF-8 bytes at least, so there are at most
    (bytes - characters) of them: one encode, where encode("ascii", "ignore") calls its
    error handler once per non-ASCII run (2 ms on a 1 MB chunk).
    """
    text = chunk.content
    if text.isascii():
        kept = len(text)
    else:
        kept = max(2 * len(text) - len(text.encode("utf-8", "surrogatepass")), 0)
    if datamarked:
        kept -= text.count(" ") + text.count("\t")
    return kept // per_token


def ceiling(per_token: int, chunk: Chunk) -> int:
    """A number never below `bound`, with no scan of the text: at most 4 UTF-8 bytes a
    character, exactly 1 in ASCII text."""
    text = chunk.content
    return -(-(len(text) if text.isascii() else 4 * len(text)) // per_token)
