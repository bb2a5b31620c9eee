"""Old names kept for one release: each warns with its new name and gives the new thing."""

from __future__ import annotations

import pytest

import ctxbudget

# old top-level name -> (new public path, the new object)
RENAMED = {
    "BudgetError": ("ctxbudget.InvalidBudgetError", ctxbudget.InvalidBudgetError),
    "trim_turns": ("ctxbudget.trim_history", ctxbudget.trim_history),
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_top_level_name_warns_and_returns_the_new_object(old: str) -> None:
    new, value = RENAMED[old]
    with pytest.warns(DeprecationWarning, match=rf"ctxbudget\.{old} is deprecated.*use {new}$"):
        assert getattr(ctxbudget, old) is value


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_top_level_name_is_not_in_all(old: str) -> None:
    assert old not in ctxbudget.__all__


def test_old_name_imports_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="use ctxbudget.InvalidBudgetError"):
        from ctxbudget import BudgetError
    assert BudgetError is ctxbudget.InvalidBudgetError


def test_unknown_top_level_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'ctxbudget' has no attribute 'Nonesuch'"):
        ctxbudget.Nonesuch  # noqa: B018
