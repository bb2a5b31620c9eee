"""The public surface: what `import ctxbudget` exports, what it drags in, what it ships."""

from __future__ import annotations

import sys
from pathlib import Path

import ctxbudget
from tests.support.imports import loaded_after


def _isort_style(name: str) -> tuple[int, str]:
    # Constants, then classes, then functions: the order ruff keeps `__all__` in.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return (kind, name)


def test_all_is_sorted() -> None:
    assert list(ctxbudget.__all__) == sorted(ctxbudget.__all__, key=_isort_style)


def test_all_matches_the_public_names_defined_in_the_package() -> None:
    public = {
        name
        for name, value in vars(ctxbudget).items()
        if not name.startswith("_") and not isinstance(value, type(sys))
    }
    assert set(ctxbudget.__all__) == public


def test_every_name_in_all_resolves() -> None:
    for name in ctxbudget.__all__:
        assert getattr(ctxbudget, name) is not None


def test_import_does_not_import_frameworks_or_numpy() -> None:
    heavy = ("langchain_core", "llama_index", "numpy", "langchain", "rich", "matplotlib")
    assert loaded_after("import ctxbudget", [*heavy, "ctxbudget.eval"]) == set()


def test_package_ships_py_typed_marker() -> None:
    assert (Path(ctxbudget.__file__).parent / "py.typed").is_file()


def test_public_callables_have_docstrings() -> None:
    for name in ctxbudget.__all__:
        value = getattr(ctxbudget, name)
        if callable(value) and not isinstance(value, type(ctxbudget.Claimant)):
            assert value.__doc__, f"{name} has no docstring"


def _private(parts: tuple[str, ...]) -> bool:
    # `eval/` is the one public subpackage (`from ctxbudget.eval import ...`); its own
    # modules are private like the rest.
    if parts[0] == "eval" and len(parts) == 2:
        return parts[1].startswith("_")
    return any(part.startswith("_") for part in parts)


def test_every_module_of_the_package_is_private() -> None:
    # The public surface is exactly `ctxbudget.__all__` and `ctxbudget.eval.__all__`:
    # modules are implementation.
    root = Path(ctxbudget.__file__).parent
    public = [
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if not _private(path.relative_to(root).parts)
    ]
    assert public == []


def test_no_public_module_attribute_leaks_from_the_package() -> None:
    # `eval` appears once something imports ctxbudget.eval: the public subpackage.
    modules = [n for n, v in vars(ctxbudget).items() if isinstance(v, type(sys))]
    assert all(name.startswith("_") or name == "eval" for name in modules), modules
