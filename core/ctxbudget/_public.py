"""Public classes named by the package that exports them, as httpx does.

Set on import of each public package, so a repr, a pickle or an error message names
`ctxbudget.Budget`, never `ctxbudget._budget.Budget`, and a class can move between private
modules without breaking a pickle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["rehome"]


def rehome(module: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Set `__module__` to `module` on every class among `names` in `namespace`."""
    for name in names:
        value = namespace[name]
        if isinstance(value, type):
            value.__module__ = module
