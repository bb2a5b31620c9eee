"""Fenced sources as LlamaIndex passes them around: node texts, joined contexts, packed pieces.

LlamaIndex hands a prompt helper plain strings (each node's text, or several joined
into one), never the nodes. So every text this adapter produces is registered with
the fenced block it belongs to and the sources it holds. The prompt helper looks the
strings up and repacks whole sources with their numbers unchanged, instead of
cutting the text or rendering it a second time. Framework-free.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from ctxbudget import Dropped, Selection

__all__ = ["REGISTRY", "SEPARATOR", "Block", "Piece", "block_of", "split"]

SEPARATOR: Final = "\n\n"
"""What stands between two sources inside the fence, as the core joins them."""


@dataclass(frozen=True)
class Block:
    """Rendered sources inside one fence: ``open + SEPARATOR.join(sources) + close``."""

    open: str
    """The fence tag and its untrusted-data notice, up to the first source."""
    close: str
    """The closing fence tag, after the last source."""
    sources: tuple[str, ...]
    """Each source as the prompt shows it: its [n] header and content (`Source.text`)."""
    ids: tuple[str, ...]
    """The chunk (node) id of each source, for reports."""
    tokens: int | None = None
    """The exact token count of `text`, when known."""

    @property
    def text(self) -> str:
        return self.open + SEPARATOR.join(self.sources) + self.close

    def take(self, indices: Sequence[int], tokens: int | None = None) -> Block:
        """The sources at `indices`, in the same fence."""
        return Block(
            self.open,
            self.close,
            tuple(self.sources[i] for i in indices),
            tuple(self.ids[i] for i in indices),
            tokens,
        )


class Piece(NamedTuple):
    """One packed prompt context and its exact token count."""

    block: Block
    tokens: int


def block_of(selection: Selection) -> Block | None:
    """`selection.text` as a `Block`; None when no source was kept."""
    if not selection.sources:
        return None
    text = selection.text
    first, last = selection.sources[0].text, selection.sources[-1].text
    end = text.rindex(last) + len(last)
    return Block(
        open=text[: text.index(first)],
        close=text[end:],
        sources=tuple(s.text for s in selection.sources),
        ids=tuple(s.chunk.id for s in selection.sources),
        tokens=selection.tokens,
    )


def split(
    block: Block, space: int, count: Callable[[str], int]
) -> tuple[list[Piece], list[Dropped]]:
    """`block`'s sources packed in order into fenced pieces of at most `space` tokens each.

    Whole sources only, numbers unchanged, no overlap; a source that does not fit even
    alone is dropped as ``oversize``. Counts are exact (`count` of each piece's text).

    Stand-in for a core ``Selection.split(max_tokens)``; until the core has one, the
    packing is greedy in prompt order and costs a count per source when the whole block
    does not fit (the whole block's count is usually known: no tokenizing at all).
    """
    whole = block.tokens if block.tokens is not None else count(block.text)
    if whole <= space:
        return [Piece(replace(block, tokens=whole), whole)], []
    pieces: list[Piece] = []
    dropped: list[Dropped] = []
    current: list[int] = []
    tokens = 0
    for index in range(len(block.sources)):
        trial = count(block.take([*current, index]).text)
        if trial <= space:
            current.append(index)
            tokens = trial
            continue
        if current:
            pieces.append(Piece(block.take(current, tokens), tokens))
        alone = count(block.take([index]).text) if current else trial
        current, tokens = ([index], alone) if alone <= space else ([], 0)
        if not current:
            dropped.append(
                Dropped(
                    claimant="retrieved",
                    kind="chunk",
                    id=block.ids[index],
                    reason="oversize",
                    tokens=alone,
                )
            )
    if current:
        pieces.append(Piece(block.take(current, tokens), tokens))
    return pieces, dropped


class _Registry:
    """Texts this adapter produced, each mapped to the block it belongs to and the indices
    of the sources it holds.

    Keys are stripped (LlamaIndex strips texts before joining them). Bounded: the
    oldest entries go first; a text no longer registered is treated as plain text.
    """

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._entries: OrderedDict[str, tuple[Block, tuple[int, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, text: str, block: Block, indices: Sequence[int] | None = None) -> str:
        """Remember that `text` holds `block`'s sources at `indices` (all by default)."""
        held = tuple(range(len(block.sources)) if indices is None else indices)
        key = text.strip()
        with self._lock:
            self._entries[key] = (block, held)
            self._entries.move_to_end(key)
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)
        return text

    def resolve(self, texts: Sequence[str]) -> Block | None:
        """The sources `texts` hold, in order, when every one of them is registered and all
        share one fence; None otherwise (the texts are then plain text). Texts that make up
        a whole block, in order, give that block back, its exact count included."""
        with self._lock:
            found = [self._entries.get(t.strip()) for t in texts if t.strip()]
        entries = [e for e in found if e is not None]
        if not entries or len(entries) < len(found):
            return None
        first = entries[0][0]
        if all(block is first for block, _ in entries):
            indices = [i for _, held in entries for i in held]
            whole = indices == list(range(len(first.sources)))
            return first if whole else first.take(indices)
        if any((b.open, b.close) != (first.open, first.close) for b, _ in entries):
            return None
        parts = [block.take(held) for block, held in entries]
        return Block(
            first.open,
            first.close,
            tuple(s for p in parts for s in p.sources),
            tuple(i for p in parts for i in p.ids),
        )


REGISTRY: Final = _Registry(maxsize=4_096)
"""Shared by every postprocessor and prompt helper in the process (the strings they pass
between them through LlamaIndex carry no other identity)."""
