"""The public surface of ctxbudget.eval: what it exports, and what importing it drags in."""

from __future__ import annotations

import sys

import ctxbudget.eval
from tests.support.imports import loaded_after


def _isort_style(name: str) -> tuple[int, str]:
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return (kind, name)


def test_all_is_sorted() -> None:
    assert list(ctxbudget.eval.__all__) == sorted(ctxbudget.eval.__all__, key=_isort_style)


def test_all_matches_the_public_names_defined_in_the_package() -> None:
    public = {
        name
        for name, value in vars(ctxbudget.eval).items()
        if not name.startswith("_") and not isinstance(value, type(sys))
    }
    assert set(ctxbudget.eval.__all__) == public


def test_public_callables_have_docstrings() -> None:
    for name in ctxbudget.eval.__all__:
        value = getattr(ctxbudget.eval, name)
        if callable(value) and isinstance(value, type | type(test_all_is_sorted)):
            assert value.__doc__, f"{name} has no docstring"


def test_no_public_module_attribute_leaks_from_the_package() -> None:
    modules = [n for n, v in vars(ctxbudget.eval).items() if isinstance(v, type(sys))]
    assert all(name.startswith("_") for name in modules), modules


def test_import_does_not_import_rich_matplotlib_frameworks_or_numpy() -> None:
    heavy = ("rich", "matplotlib", "numpy", "langchain_core", "llama_index", "langchain")
    assert loaded_after("import ctxbudget.eval", heavy) == set()
