"""Chunk, Turn, Tool and Principal as validated, immutable inputs (core/ctxbudget/_inputs.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxbudget import Chunk, Principal, Tool, Turn
from ctxbudget._inputs import Role
from tests.support.factories import chunk

# --- immutability -------------------------------------------------------------------------


def test_chunk_is_frozen() -> None:
    with pytest.raises(ValidationError, match=r"content\n\s+Instance is frozen"):
        chunk().content = "changed"


def test_turn_is_frozen() -> None:
    with pytest.raises(ValidationError, match=r"role\n\s+Instance is frozen"):
        Turn(role="user", content="hi").role = "assistant"


def test_tool_is_frozen() -> None:
    with pytest.raises(ValidationError, match=r"name\n\s+Instance is frozen"):
        Tool(name="search").name = "other"


def test_principal_is_frozen() -> None:
    with pytest.raises(ValidationError, match=r"tenant\n\s+Instance is frozen"):
        Principal(tenant="acme").tenant = "other"


def test_chunk_heading_path_list_becomes_tuple() -> None:
    assert chunk(heading_path=["Returns", "EU"]).heading_path == ("Returns", "EU")


def test_chunk_groups_set_becomes_frozenset() -> None:
    assert chunk(groups={"sales"}).groups == frozenset({"sales"})


def test_principal_groups_default_empty_frozenset() -> None:
    assert Principal().groups == frozenset()


# --- normalisation ------------------------------------------------------------------------


def test_chunk_metadata_keeps_extra_data() -> None:
    assert chunk(metadata={"url": "https://example.com/refunds"}).metadata == {
        "url": "https://example.com/refunds"
    }


def test_chunk_model_validate_does_not_mutate_input() -> None:
    data = {"id": "c1", "content": "x", "metadata": None, "heading_path": None}

    Chunk.model_validate(data)

    assert data == {"id": "c1", "content": "x", "metadata": None, "heading_path": None}


def test_chunk_metadata_none_becomes_empty_dict() -> None:
    assert chunk(metadata=None).metadata == {}


def test_chunk_metadata_defaults_to_empty_dict() -> None:
    assert chunk().metadata == {}


def test_chunk_heading_path_none_becomes_empty_tuple() -> None:
    assert chunk(heading_path=None).heading_path == ()


def test_chunk_parse_warnings_none_becomes_empty_tuple() -> None:
    assert chunk(parse_warnings=None).parse_warnings == ()


def test_chunk_document_id_defaults_to_id() -> None:
    assert chunk(id="doc-7").document_id == "doc-7"


def test_chunk_document_id_none_defaults_to_id() -> None:
    assert chunk(id="doc-7", document_id=None).document_id == "doc-7"


def test_chunk_document_id_kept_when_given() -> None:
    assert chunk(id="doc-7#3", document_id="doc-7").document_id == "doc-7"


# --- field rejections ---------------------------------------------------------------------


def test_chunk_rejects_empty_id() -> None:
    with pytest.raises(ValidationError, match=r"id\n\s+Value error, must not be empty"):
        chunk(id="")


def test_chunk_rejects_empty_document_id() -> None:
    with pytest.raises(ValidationError, match=r"document_id\n\s+Value error, must not be empty"):
        chunk(document_id="")


def test_turn_rejects_empty_id() -> None:
    with pytest.raises(ValidationError, match=r"id\n\s+Value error, must not be empty"):
        Turn(role="user", content="hi", id="")


@pytest.mark.parametrize("field", ["score", "rerank_score"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_chunk_rejects_non_finite_score(field: str, value: float) -> None:
    with pytest.raises(
        ValidationError, match=rf"{field}\n\s+Value error, must be a finite number, but got"
    ):
        chunk(**{field: value})


def test_tool_rejects_nan_score() -> None:
    with pytest.raises(ValidationError, match=r"score\n\s+Value error, must be a finite number"):
        Tool(name="search", score=float("nan"))


def test_chunk_accepts_negative_finite_score() -> None:
    assert chunk(score=-1.5).score == -1.5


@pytest.mark.parametrize("field", ["tokens", "ordinal"])
def test_chunk_rejects_negative_count(field: str) -> None:
    with pytest.raises(
        ValidationError, match=rf"{field}\n\s+Input should be greater than or equal to 0"
    ):
        chunk(**{field: -1})


@pytest.mark.parametrize("field", ["tokens", "ordinal"])
def test_chunk_accepts_zero_count(field: str) -> None:
    assert getattr(chunk(**{field: 0}), field) == 0


def test_chunk_rejects_non_string_content() -> None:
    with pytest.raises(ValidationError, match=r"content\n\s+Input should be a valid string"):
        chunk(content=3)


def test_turn_rejects_non_string_content() -> None:
    with pytest.raises(ValidationError, match=r"content\n\s+Input should be a valid string"):
        Turn(role="user", content=3)  # type: ignore[arg-type]


def test_chunk_rejects_non_dict_metadata() -> None:
    with pytest.raises(ValidationError, match=r"metadata\n\s+Input should be a valid dictionary"):
        chunk(metadata=["x"])


def test_chunk_requires_content() -> None:
    with pytest.raises(ValidationError, match=r"content\n\s+Field required"):
        Chunk(id="c1")  # type: ignore[call-arg]


def test_chunk_requires_id_without_document_id() -> None:
    # document_id defaults to id: its factory must not fail when id is missing.
    with pytest.raises(ValidationError, match=r"for Chunk\nid\n\s+Field required"):
        Chunk(content="t")  # type: ignore[call-arg]


@pytest.mark.parametrize("name", ["search", "kb.search_v2", "get-weather", "A" * 64])
def test_tool_accepts_valid_name(name: str) -> None:
    assert Tool(name=name).name == name


@pytest.mark.parametrize("name", ["", "two words", "A" * 65, "na\u00efve", "call()", "a/b"])
def test_tool_rejects_invalid_name(name: str) -> None:
    with pytest.raises(
        ValidationError, match=r"name\n\s+String should match pattern '\^\[A-Za-z0-9_\.\\-\]"
    ):
        Tool(name=name)


@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_turn_accepts_known_role(role: Role) -> None:
    assert Turn(role=role, content="hi").role == role


@pytest.mark.parametrize("role", ["bot", "User", "human", ""])
def test_turn_rejects_unknown_role(role: str) -> None:
    with pytest.raises(
        ValidationError,
        match=r"role\n\s+Input should be 'system', 'user', 'assistant' or 'tool'",
    ):
        Turn(role=role, content="hi")  # type: ignore[arg-type]


# --- confidentiality ----------------------------------------------------------------------


def test_chunk_repr_omits_content() -> None:
    made = chunk(id="c1", content="SECRET payroll figures")

    assert "SECRET" not in repr(made)
    assert repr(made) == "Chunk(id='c1', document_id='c1', 22 chars)"


def test_chunk_str_omits_content() -> None:
    # f"{chunk}" and logging's "%s" use str(), not repr().
    made = chunk(id="c1", content="SECRET payroll figures")

    assert "SECRET" not in str(made)
