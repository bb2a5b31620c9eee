"""Word-wrapping the command's own prose (notes, summaries, the count's note, errors).

A terminal's width is ``COLUMNS`` when set, else the terminal's size, as argparse and rich
read it, so ``--help``, the view and these lines wrap alike. Widths are terminal cells
(a CJK character takes two), as rich measures them, so the view's columns and its prose
agree; rich itself is not needed, so ``count`` wraps without it.
"""

from __future__ import annotations

import shutil
import unicodedata
from typing import Final, TextIO

__all__ = ["PIPE_WIDTH", "cells", "terminal_width", "wrap"]

PIPE_WIDTH: Final = 100
"""Line width of the view when stdout is not a terminal: ids and notes fit without folding."""


def terminal_width(stream: TextIO) -> int | None:
    """The columns of the terminal `stream` writes to; None when it is not a terminal."""
    return shutil.get_terminal_size().columns if stream.isatty() else None


def cells(text: str) -> int:
    """How many terminal cells `text` takes: wide characters two, combining marks none."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def wrap(text: str, width: int) -> str:
    """`text` word-wrapped to `width` cells, with no trailing space; a word longer than a
    line (a path, a URL) is kept whole on a line of its own, so it can be copied."""
    lines: list[str] = []
    line, used = "", 0
    for word in text.split():
        size = cells(word)
        if line and used + 1 + size > width:
            lines.append(line)
            line, used = "", 0
        line, used = (f"{line} {word}", used + 1 + size) if line else (word, size)
    lines.append(line)
    return "\n".join(lines)
