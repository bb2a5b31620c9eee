"""How a source reads in the prompt: a numbered header line, then the content verbatim."""

from __future__ import annotations

from ctxbudget.inputs import Chunk

__all__ = ["header", "render_source"]


def header(n: int, chunk: Chunk) -> str:
    """The source's header line: ``[n] Title``."""
    return f"[{n}] {chunk.title}" if chunk.title else f"[{n}]"


def render_source(n: int, chunk: Chunk) -> str:
    """A numbered source block as the model reads it."""
    return f"{header(n, chunk)}\n{chunk.content}"
