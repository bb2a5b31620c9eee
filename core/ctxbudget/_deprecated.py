"""Old names that keep working for one release, each use warning with the name that replaced it.

Every rename is listed in CHANGELOG.md; the old names leave in the release after 1.0.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

__all__ = ["module_getattr", "renamed_keyword", "warn_renamed"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


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


def renamed_keyword(
    function: str, old: str, new: str
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A decorator: the keyword `old` of `function` still works, warning, as `new`."""

    def decorate(wrapped: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(wrapped)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"{function}() got both {new}= and its old name {old}=")
                warn_renamed(f"{function}({old}=...)", f"{new}=")
                kwargs[new] = kwargs.pop(old)
            return wrapped(*args, **kwargs)

        return call

    return decorate
