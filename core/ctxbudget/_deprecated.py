"""Old names that keep working for one release, each use warning with the name that replaced it.

Every rename is listed in CHANGELOG.md; the old names leave in the release after 1.0.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

__all__ = ["module_getattr", "warn_renamed"]


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that `old` is now `new`; `stacklevel` 3 names the caller of the function that warns."""
    warnings.warn(
        f"{old} is deprecated and goes in the next release: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def module_getattr(
    module: str, renamed: Mapping[str, tuple[str, object]]
) -> Callable[[str], object]:
    """A PEP 562 module `__getattr__`: an old name (key) warns and returns its new object,
    whose public path is the first item of the value."""

    def attribute(name: str) -> object:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, value = renamed[name]
        warn_renamed(f"{module}.{name}", new)
        return value

    return attribute
