"""Chunk, Turn, Tool and Principal as validated, immutable inputs (core/ctxbudget/_inputs.py)."""

from __future__ import annotations

import copy
import enum
import inspect
import json
import pickle
import pydoc
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ctxbudget import Chunk, Principal, Tool, Turn
from ctxbudget._inputs import Role, check_text
from tests.support.cputime import paired_times
from tests.support.factories import chunk

SURROGATE_MESSAGE = r"\n\s+Value error, contains a lone surrogate U\+D800 at index 2"


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


# --- text validity ------------------------------------------------------------------------


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


def test_check_text_returns_valid_text_unchanged() -> None:
    assert check_text("caf\u00e9 \U0001f44d") == "caf\u00e9 \U0001f44d"


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


# --- ACL-looking metadata -----------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["tenant_id", "TenantId", "org", "allowed-groups", "ACL", "group_ids", "visibility"]
)
def test_chunk_rejects_acl_metadata_without_acl_fields(key: str) -> None:
    with pytest.raises(
        ValidationError,
        match=rf"metadata key '{key}' looks like an access rule, but metadata is never "
        r"enforced, so it would not restrict who sees the chunk",
    ):
        chunk(metadata={key: "hr"})


def test_chunk_acl_metadata_error_names_the_field_to_set() -> None:
    with pytest.raises(ValidationError, match=r"set tenant=\.\.\. on the Chunk instead"):
        chunk(metadata={"tenant_id": "acme"})


def test_chunk_acl_metadata_error_names_every_key_and_field() -> None:
    with pytest.raises(
        ValidationError,
        match=r"metadata keys 'tenant_id', 'acl' look like access rules.*"
        r"set tenant=\.\.\. and/or groups=\.\.\. on the Chunk instead",
    ):
        chunk(metadata={"tenant_id": "acme", "acl": ["hr"], "url": "u"})


@pytest.mark.parametrize("acl", [{"tenant": "acme"}, {"groups": {"hr"}}, {"groups": frozenset()}])
def test_chunk_rejects_acl_metadata_even_when_acl_fields_are_set(acl: dict[str, Any]) -> None:
    # A partial ACL is no licence: tenant_id="globex" beside tenant="acme" would go unenforced.
    with pytest.raises(ValidationError, match=r"metadata key 'tenant_id' looks like an access"):
        chunk(metadata={"tenant_id": "globex"}, **acl)


def test_chunk_acl_metadata_key_with_none_value_is_allowed() -> None:
    assert chunk(metadata={"tenant": None}).metadata == {"tenant": None}


@pytest.mark.parametrize("key", ["owner", "author", "users", "source_url", "tenantless"])
def test_chunk_descriptive_metadata_key_is_allowed(key: str) -> None:
    assert chunk(metadata={key: "x"}).metadata == {key: "x"}


def test_chunk_metadata_nested_acl_keys_are_not_searched() -> None:
    # Documented limit: only top-level keys are checked.
    assert chunk(metadata={"origin": {"tenant_id": "acme"}}).metadata == {
        "origin": {"tenant_id": "acme"}
    }


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


# --- tool parameters ----------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Search terms, e.g. \u201crefund\u201d"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 2**64, "default": 5},
        "mode": {"enum": ["fast", "exact", None], "x-weight": 0.5, "x-strict": True},
    },
    "required": ["query"],
}


def test_tool_parameters_keep_json_schema_as_given() -> None:
    tool = Tool(name="search", parameters=SCHEMA)

    assert tool.parameters == SCHEMA
    assert json.dumps(tool.parameters) == json.dumps(SCHEMA)


def test_tool_parameters_default_is_empty_object() -> None:
    assert Tool(name="search").parameters == {}


def test_tool_model_dump_gives_plain_json_data() -> None:
    dumped = Tool(name="search", parameters=SCHEMA).model_dump()["parameters"]

    assert dumped == SCHEMA
    assert type(dumped) is dict
    assert type(dumped["required"]) is list


def test_tool_parameters_are_a_copy_of_the_input() -> None:
    schema = copy.deepcopy(SCHEMA)
    tool = Tool(name="search", parameters=schema)

    schema["required"].append("limit")

    assert tool.parameters["required"] == ["query"]


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.__setitem__("type", "array"),
        lambda p: p.update(type="array"),
        lambda p: p.pop("type"),
        lambda p: p["properties"].clear(),
        lambda p: p["required"].append("limit"),
        lambda p: p["required"].__setitem__(0, "limit"),
        lambda p: p["required"].extend(["limit"]),
    ],
    ids=["setitem", "update", "pop", "nested-clear", "append", "list-setitem", "extend"],
)
def test_tool_parameters_are_read_only(change: Callable[[Any], object]) -> None:
    tool = Tool(name="search", parameters=SCHEMA)

    with pytest.raises(TypeError, match=r"is read-only: Tool\.parameters cannot change"):
        change(tool.parameters)

    assert tool.parameters == SCHEMA


@pytest.mark.parametrize(
    "clone",
    [
        copy.copy,
        copy.deepcopy,
        lambda t: pickle.loads(pickle.dumps(t)),
        lambda t: t.model_copy(deep=True),
    ],
    ids=["copy", "deepcopy", "pickle", "model_copy"],
)
def test_tool_parameters_survive_copies_read_only(clone: Callable[[Tool], Tool]) -> None:
    copied = clone(Tool(name="search", parameters=SCHEMA))

    assert copied.parameters == SCHEMA
    with pytest.raises(TypeError, match="read-only"):
        copied.parameters["required"].append("limit")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_tool_parameters_reject_non_finite_number_naming_path(value: float) -> None:
    schema = {"properties": {"x": {"enum": [1, 2, value]}}}

    with pytest.raises(
        ValidationError,
        match=r"parameters\n\s+Value error, parameters\.properties\.x\.enum\[2\] is -?(nan|inf); "
        r"JSON has no NaN or infinity and providers reject it: use a finite number, or null",
    ):
        Tool(name="search", parameters=schema)


def test_tool_parameters_reject_nan_from_json() -> None:
    with pytest.raises(ValidationError, match=r"parameters\.default is nan"):
        Tool.model_validate_json('{"name": "search", "parameters": {"default": NaN}}')


@pytest.mark.parametrize(
    ("value", "kind", "fix"),
    [
        (("a", "b"), "tuple", "JSON has no tuple: use a list"),
        ({"a"}, "set", "JSON has no set: use a sorted list"),
        (frozenset({"a"}), "frozenset", "JSON has no set: use a sorted list"),
        (b"a", "bytes", "JSON has no bytes: decode them to a str"),
        (bytearray(b"a"), "bytearray", "JSON has no bytes: decode them to a str"),
        (object(), "object", r"convert it first \(a pydantic model: \.model_dump\(mode='json'\)"),
        (date(2026, 1, 1), "date", "convert it first"),
    ],
)
def test_tool_parameters_reject_non_json_value_naming_path(
    value: object, kind: str, fix: str
) -> None:
    with pytest.raises(
        ValidationError,
        match=rf"parameters\.properties\.x\.default has type {kind}, which is not JSON data "
        rf"\(dict, list, str, int, float, bool or None\); {fix}",
    ):
        Tool(name="search", parameters={"properties": {"x": {"default": value}}})


def test_tool_parameters_reject_non_string_key() -> None:
    with pytest.raises(
        ValidationError,
        match=r"parameters\.properties has key 3 \(int\); JSON object keys are strings: use '3'",
    ):
        Tool(name="search", parameters={"properties": {3: {"type": "string"}}})


def test_tool_parameters_reject_lone_surrogate_in_value() -> None:
    with pytest.raises(
        ValidationError,
        match=r"parameters\.required\[1\] contains a lone surrogate U\+D800 at index 2",
    ):
        Tool(name="search", parameters={"required": ["q", "ab\ud800"]})


def test_tool_parameters_reject_lone_surrogate_in_key_naming_path() -> None:
    with pytest.raises(
        ValidationError,
        match=r"parameters\['a b'\] has a key that contains a lone surrogate U\+DC00 at index 1",
    ):
        Tool(name="search", parameters={"a b": {"k\udc00": 1}})


def test_tool_parameters_reject_integer_too_long_for_json() -> None:
    with pytest.raises(ValidationError, match=r"parameters\.maximum is an integer too long"):
        Tool(name="search", parameters={"maximum": 10**5_000})


def test_tool_parameters_accept_str_and_int_subclasses() -> None:
    class Mode(enum.StrEnum):
        FAST = "fast"

    class Size(enum.IntEnum):
        ONE = 1

    tool = Tool(name="search", parameters={"enum": [Mode.FAST], "max": Size.ONE})

    assert json.dumps(tool.parameters) == '{"enum": ["fast"], "max": 1}'


@pytest.mark.parametrize("value", [[], "schema", None])
def test_tool_parameters_reject_non_object(value: object) -> None:
    with pytest.raises(
        ValidationError,
        match=r"parameters\n\s+Value error, must be a JSON object \(a dict holding the "
        r"arguments' JSON schema\), but got a",
    ):
        Tool(name="search", parameters=value)  # type: ignore[arg-type]


def nested(levels: int) -> dict[str, Any]:
    """A dict `levels` objects deep (the outermost counts as one)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_tool_parameters_accept_64_levels() -> None:
    assert Tool(name="search", parameters=nested(64)).parameters == nested(64)


def test_tool_parameters_reject_65_levels_naming_path() -> None:
    with pytest.raises(ValidationError, match=r"parameters(\.a){64} nests deeper than 64 levels"):
        Tool(name="search", parameters=nested(65))


def test_tool_parameters_reject_self_reference_without_recursion_error() -> None:
    looped: dict[str, Any] = {}
    looped["items"] = [looped]

    with pytest.raises(ValidationError, match=r"a dict or list that contains itself nests forever"):
        Tool(name="search", parameters=looped)


def test_tool_parameters_reject_shared_lists_that_expand_past_the_value_limit() -> None:
    # 2**40 values in JSON from 40 small lists in Python: refused after a bounded walk.
    shared: list[Any] = [0]
    for _ in range(40):
        shared = [shared, shared]

    with pytest.raises(
        ValidationError, match=r"parameters holds more than 100,000 values"
    ) as caught:
        Tool(name="search", parameters={"items": shared})

    assert len(str(caught.value)) < 1_000  # the error does not repr its input


def test_tool_parameters_deep_nesting_costs_no_more_than_flat() -> None:
    # Same number of containers and of scalars; only the shape differs. A path copied
    # per level would make the deep shape about 30 times slower.
    def chain() -> list[Any]:
        value: list[Any] = ["s"]
        for _ in range(61):
            value = ["s", value]
        return value

    n = 20_000
    flat: dict[str, Any] = {"properties": {f"p{i}": {"type": "string"} for i in range(n)}}
    deep: dict[str, Any] = {"properties": {f"p{i}": chain() for i in range(n // 62)}}

    deep_seconds, flat_seconds = paired_times(
        lambda parameters: Tool(name="search", parameters=parameters), deep, flat
    )
    assert deep_seconds < 4 * flat_seconds


json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(st.dictionaries(st.text(), json_data, max_size=4))
def test_tool_parameters_round_trip_any_json_data(parameters: dict[str, Any]) -> None:
    tool = Tool(name="search", parameters=parameters)

    assert tool.parameters == parameters
    assert json.dumps(tool.parameters) == json.dumps(parameters)
