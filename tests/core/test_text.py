"""Valid Unicode text (core/ctxbudget/_text.py): the fast check agrees with the plain one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget._text import check_text, check_text_fast


def test_check_text_returns_valid_text_unchanged() -> None:
    assert check_text("caf\u00e9 \U0001f44d") == "caf\u00e9 \U0001f44d"


@given(st.text(st.characters(codec=None, exclude_categories=())))
def test_check_text_fast_agrees_with_check_text(text: str) -> None:
    try:
        expected: str | ValueError = check_text(text)
    except ValueError as error:
        expected = error
    if isinstance(expected, ValueError):
        with pytest.raises(ValueError, match=str(expected).split(",")[0]):
            check_text_fast(text)
    else:
        assert check_text_fast(text) is text
