"""Valid Unicode text (core/ctxbudget/_text.py): the fast check agrees with the plain one, and
every text field of the input models refuses a lone surrogate, naming the field and its index,
and keeps any other text unchanged."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import Principal, Tool, Turn
from ctxbudget._text import check_text, check_text_fast
from tests.support.factories import chunk


def test_check_text_returns_valid_text_unchanged() -> None:
    assert check_text("caf\u00e9 \U0001f44d") == "caf\u00e9 \U0001f44d"


@given(st.text(st.characters(codec=None, exclude_categories=())))
def test_check_text_fast_agrees_with_check_text(text: str) -> None:
    try:
        expected: str | ValueError = check_text(text)
    except ValueError as error:
        expected = error
    if isinstance(expected, ValueError):
        with pytest.raises(ValueError, match=re.escape(str(expected))):
            check_text_fast(text)
    else:
        assert check_text_fast(text) is text


SURROGATE_MESSAGE = r"\n\s+Value error, contains a lone surrogate U\+D800 at index 2"


@pytest.mark.parametrize(
    ("field", "value", "location"),
    [
        ("content", "ab\ud800", "content"),
        ("title", "ab\ud800", "title"),
        ("heading_path", ("Returns", "ab\ud800"), r"heading_path\.1"),
        ("parse_warnings", ("ab\ud800",), r"parse_warnings\.0"),
        ("source", "ab\ud800", "source"),
        ("tenant", "ab\ud800", "tenant"),
    ],
)
def test_chunk_rejects_lone_surrogate_naming_field_and_index(
    field: str, value: object, location: str
) -> None:
    with pytest.raises(ValidationError, match=location + SURROGATE_MESSAGE):
        chunk(**{field: value})


@pytest.mark.parametrize("field", ["id", "document_id"])
def test_chunk_rejects_lone_surrogate_in_id_naming_index(field: str) -> None:
    with pytest.raises(ValidationError, match=field + SURROGATE_MESSAGE):
        chunk(**{field: "ab\ud800"})


def test_turn_rejects_lone_surrogate_in_content() -> None:
    with pytest.raises(ValidationError, match="content" + SURROGATE_MESSAGE):
        Turn(role="user", content="ab\ud800")


def test_tool_rejects_lone_surrogate_in_description() -> None:
    with pytest.raises(ValidationError, match="description" + SURROGATE_MESSAGE):
        Tool(name="search", description="ab\ud800")


def test_principal_rejects_lone_surrogate_in_tenant() -> None:
    with pytest.raises(ValidationError, match="tenant" + SURROGATE_MESSAGE):
        Principal(tenant="ab\ud800")


def test_chunk_lone_surrogate_message_names_low_surrogate() -> None:
    with pytest.raises(ValidationError, match=r"lone surrogate U\+DFFF at index 0"):
        chunk(content="\udfff tail")


@pytest.mark.parametrize(
    "text",
    [
        "Family: \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd",
        "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \u202ehidden\u202c",
        "cafe\u0301 Zalgo: Z\u0351\u0358a\u0364l\u036ag\u0363o",
        "\U0001d54f math, \u00a0nbsp, \ufeffbom",
    ],
    ids=["emoji", "rtl", "combining", "astral"],
)
def test_chunk_accepts_unicode_unchanged(text: str) -> None:
    made = chunk(content=text, title=text, heading_path=(text,))

    assert (made.content, made.title, made.heading_path) == (text, text, (text,))


def test_turn_accepts_combining_marks_unchanged() -> None:
    assert Turn(role="user", content="cafe\u0301").content == "cafe\u0301"


def test_chunk_accepts_one_megabyte_content() -> None:
    content = "refund policy " * 75_000

    assert chunk(content=content).content == content


def test_chunk_reports_surrogate_index_in_large_content() -> None:
    with pytest.raises(ValidationError, match=r"at index 1000000"):
        chunk(content="a" * 1_000_000 + "\ud800")
