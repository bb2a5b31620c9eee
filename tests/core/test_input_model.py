"""Strict field names and a readable help() on the input models (core/ctxbudget/_input_model.py)."""

from __future__ import annotations

import inspect
import pydoc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ctxbudget import Chunk, Principal, Tool, Turn
from tests.support.factories import chunk

# --- strict field names -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "meant"),
    [
        ("tennant", "tenant"),
        ("tenant_id", "tenant"),
        ("org_id", "tenant"),
        ("gropus", "groups"),
        ("allowed_groups", "groups"),
        ("acl", "groups"),
        ("titel", "title"),
        ("contents", "content"),
    ],
)
def test_chunk_unknown_keyword_names_closest_field(keyword: str, meant: str) -> None:
    with pytest.raises(
        ValidationError,
        match=rf"unknown Chunk field '{keyword}'; did you mean '{meant}'\? "
        r"Extra data goes in metadata=\{\.\.\.\}",
    ):
        chunk(**{keyword: "acme"})


def test_chunk_unknown_keyword_without_close_field_says_where_data_goes() -> None:
    with pytest.raises(
        ValidationError, match=r"unknown Chunk field 'url'\. Extra data goes in metadata="
    ):
        chunk(url="https://example.com/refunds")


def test_chunk_unknown_keywords_are_all_named() -> None:
    with pytest.raises(
        ValidationError,
        match=r"unknown Chunk fields 'tennant' \(did you mean 'tenant'\?\), 'url'\. Extra data",
    ):
        chunk(tennant="acme", url="u")


def test_chunk_unknown_keyword_error_has_pydantics_extra_forbidden_type() -> None:
    with pytest.raises(ValidationError) as caught:
        chunk(tennant="acme")

    assert [e["type"] for e in caught.value.errors()] == ["extra_forbidden"]


def test_chunk_model_validate_rejects_unknown_key() -> None:
    with pytest.raises(ValidationError, match=r"unknown Chunk field 'gropus'; did you mean"):
        Chunk.model_validate({"id": "c1", "content": "x", "gropus": ["hr"]})


def test_chunk_model_validate_json_rejects_unknown_key() -> None:
    with pytest.raises(ValidationError, match=r"unknown Chunk field 'tenant_id'; did you mean"):
        Chunk.model_validate_json('{"id": "c1", "content": "x", "tenant_id": "acme"}')


def test_chunk_model_validate_rejects_non_mapping() -> None:
    with pytest.raises(ValidationError, match=r"Input should be a valid dictionary or instance"):
        Chunk.model_validate(["c1", "x"])


def test_chunk_model_validate_rejects_non_string_key() -> None:
    with pytest.raises(ValidationError, match=r"unknown Chunk field 1\. Extra data"):
        Chunk.model_validate({"id": "c1", "content": "x", 1: "y"})


def test_chunk_unknown_keyword_message_cuts_long_key_short() -> None:
    with pytest.raises(ValidationError) as caught:
        chunk(**{"x" * 100_000: 1})

    assert "'xxxxxxxxxx" in str(caught.value)
    assert len(str(caught.value)) < 500


def test_chunk_validation_error_does_not_quote_content() -> None:
    with pytest.raises(ValidationError) as caught:
        chunk(content="SECRET payroll figures", tennant="acme")

    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize(
    ("model", "fields", "message"),
    [
        (Turn, {"role": "user", "content": "hi", "rol": "user"}, "'rol'; did you mean 'role'"),
        (Turn, {"role": "user", "content": "hi", "vibe": "x"}, r"'vibe'\. Turn fields are: role, "),
        (Tool, {"name": "search", "parameter": {}}, "'parameter'; did you mean 'parameters'"),
        (Tool, {"name": "search", "schema": {}}, r"'schema'\. Tool fields are: name, description"),
        (Principal, {"tenant_id": "acme"}, "'tenant_id'; did you mean 'tenant'"),
        (Principal, {"group": ["hr"]}, "'group'; did you mean 'groups'"),
    ],
)
def test_model_unknown_keyword_names_closest_field(
    model: type[Turn | Tool | Principal], fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=rf"unknown {model.__name__} field {message}"):
        model(**fields)


@given(
    name=st.text(max_size=30).filter(lambda n: n not in Chunk.model_fields),
    value=st.none() | st.text(max_size=10) | st.integers() | st.lists(st.text(max_size=5)),
)
def test_chunk_never_accepts_a_keyword_that_is_not_a_field(name: str, value: object) -> None:
    made = None
    with pytest.raises(ValidationError, match="unknown Chunk field"):
        made = Chunk(**{"id": "c1", "content": "x", name: value})  # type: ignore[arg-type]

    assert made is None


# --- documentation ------------------------------------------------------------------------

MODELS = [Chunk, Turn, Tool, Principal]


@pytest.mark.parametrize("model", MODELS)
def test_model_json_schema_describes_every_field(model: type[BaseModel]) -> None:
    properties = model.model_json_schema()["properties"]

    assert [name for name, p in properties.items() if not p.get("description")] == []


@pytest.mark.parametrize("model", MODELS)
def test_model_help_lists_every_field_with_its_description(model: type[BaseModel]) -> None:
    text = pydoc.plain(pydoc.render_doc(model))
    shown = " ".join(word for word in text.split() if word != "|")  # unwrapped, margins gone

    for name, field in model.model_fields.items():
        assert f"{name}: " in shown
        assert " ".join(str(field.description).split()) in shown


@pytest.mark.parametrize("model", MODELS)
def test_model_json_schema_description_omits_help_field_list(model: type[BaseModel]) -> None:
    assert "Fields:" not in model.model_json_schema()["description"]


@pytest.mark.parametrize("model", MODELS)
def test_model_signature_shows_plain_types(model: type[BaseModel]) -> None:
    signature = str(inspect.signature(model))

    assert "Annotated" not in signature
    assert "Validator" not in signature


def test_chunk_signature_reads_as_written() -> None:
    signature = str(inspect.signature(Chunk))

    assert signature.startswith("(*, id: str, content: str, document_id: str = <factory>, ")
    assert "groups: frozenset[str] | None = None" in signature
    assert "tokens: int | None = None" in signature


@pytest.mark.parametrize("model", MODELS)
def test_model_has_no_public_validator_methods(model: type[BaseModel]) -> None:
    assert [name for name in vars(model) if "valid" in name and not name.startswith("_")] == []


def test_chunk_document_id_default_is_documented() -> None:
    schema = Chunk.model_json_schema()

    assert "Defaults to `id`" in schema["properties"]["document_id"]["description"]
    assert "Defaults to `id`" in pydoc.plain(pydoc.render_doc(Chunk))
    assert "document_id" not in schema["required"]
