"""A griffe extension: the `>>>` examples in our docstrings shown as code on the API pages.

Our docstrings carry one short doctest without an ``Examples:`` heading (CONVENTIONS.md);
griffe reads `>>>` only under that heading, so Markdown would show the lines as nested
quotes and read ``[1]`` in an output line as a link. This puts each run of `>>>` lines and
their output inside a ``pycon`` fence.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """`text` with each doctest (a `>>>` line up to the next blank line) inside a fence."""
    out: list[str] = []
    in_example = in_fence = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and not in_example and line.startswith(">>>"):
            out.append("```pycon")
            in_example = True
        elif in_example and not line.strip():
            out.append("```")
            in_example = False
        out.append(line)
    if in_example:
        out.append("```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fence every docstring's doctests when griffe loads an object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
