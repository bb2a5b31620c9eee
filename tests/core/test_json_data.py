"""Tool.parameters as read-only JSON data (core/ctxbudget/_json_data.py)."""

from __future__ import annotations

import copy
import enum
import json
import pickle
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import Tool
from tests.support.cputime import paired_times

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
