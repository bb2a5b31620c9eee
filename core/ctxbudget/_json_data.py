"""JSON data a provider can receive, copied once into containers that cannot change.

A tool's parameter schema goes to the model on every request and into the cached
prefix, so it is checked to be JSON data (str keys, finite numbers, valid Unicode,
bounded depth and size) where it enters, with the path of whatever is not, and kept
read-only, so the prompt cannot change after the `Tool` is built.
"""

from __future__ import annotations

import math
from typing import Any, Final, NoReturn

from ctxbudget._acl import shown_key
from ctxbudget._text import check_text_fast

__all__ = ["JsonArray", "JsonObject", "frozen_json", "json_object"]


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        f"{type(self).__name__} is read-only: Tool.parameters cannot change after the Tool is "
        "built (the prompt and the cached prefix depend on it); build a new Tool instead, "
        "from a copy such as json.loads(json.dumps(tool.parameters))"
    )


class JsonObject(dict[str, Any]):
    """A JSON object that cannot be changed; still a `dict` to `json.dumps` and providers' SDKs."""

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[JsonObject], tuple[dict[str, Any]]]:
        # copy, deepcopy and pickle would otherwise refill it through __setitem__.
        return (JsonObject, (dict(self),))


class JsonArray(list[Any]):
    """A JSON array that cannot be changed; still a `list` to `json.dumps` and providers' SDKs."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __reduce__(self) -> tuple[type[JsonArray], tuple[list[Any]]]:
        return (JsonArray, (list(self),))


_SHORT_INT_BITS: Final = 64
"""An int this short always writes as text. json.dumps writes ints through str(), which
refuses more than ~4,300 digits, so only a longer int pays for the check that it can."""

_MAX_JSON_DEPTH = 64
"""Deepest nesting of objects and arrays accepted; real schemas nest a handful of levels."""

_MAX_JSON_VALUES = 100_000
"""Most values accepted, counting a shared list or dict each time it appears.

Shared references let a few kilobytes of Python describe exponentially large JSON;
this bounds the work. A schema this large would cost hundreds of thousands of
tokens on every request; providers cap far lower (OpenAI: 5,000 properties).
"""

_NOT_JSON: dict[type, str] = {
    tuple: "JSON has no tuple: use a list",
    set: "JSON has no set: use a sorted list, so the prompt is the same on every run",
    frozenset: "JSON has no set: use a sorted list, so the prompt is the same on every run",
    bytes: "JSON has no bytes: decode them to a str",
    bytearray: "JSON has no bytes: decode them to a str",
}

_Path = tuple["_Path | None", str | int]
"""A location as a linked list (parent, key or index), rendered only when it is reported."""


def _path_text(path: _Path) -> str:
    steps: list[str] = []
    parent: _Path | None = path
    while parent is not None:
        parent, step = parent
        if parent is None:
            steps.append(str(step))  # the field name at the root
        elif isinstance(step, int):
            steps.append(f"[{step}]")
        else:
            steps.append(f".{step}" if step.isidentifier() else f"[{shown_key(step)}]")
    return "".join(reversed(steps))


def _json_error(path: _Path, problem: str) -> ValueError:
    return ValueError(f"{_path_text(path)} {problem}")


_Pending = list[tuple[Any, Any, _Path, int]]
"""Containers still to fill: (the input, its read-only copy, path, depth)."""


def _json_copy(value: Any, path: _Path, depth: int, pending: _Pending) -> Any:
    """`value` if it is a valid JSON scalar; an empty read-only copy (queued) if a container."""
    if isinstance(value, str):
        try:
            return check_text_fast(value)
        except ValueError as error:
            raise _json_error(path, str(error)) from None
    if isinstance(value, dict | list):
        if depth >= _MAX_JSON_DEPTH:
            raise _json_error(
                path,
                f"nests deeper than {_MAX_JSON_DEPTH} levels (a dict or list that contains "
                "itself nests forever); flatten the schema, or use $ref for recursive types",
            )
        copy = JsonObject() if isinstance(value, dict) else JsonArray()
        pending.append((value, copy, path, depth + 1))
        return copy
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() > _SHORT_INT_BITS:
            try:
                repr(int(value))
            except ValueError:
                raise _json_error(
                    path,
                    "is an integer too long to write as text (json.dumps would fail); "
                    "use a number of at most a few hundred digits",
                ) from None
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _json_error(
                path,
                f"is {value!r}; JSON has no NaN or infinity and providers reject it: "
                "use a finite number, or null",
            )
        return value
    fix = _NOT_JSON.get(type(value)) or (
        "convert it first (a pydantic model: .model_dump(mode='json'); an enum: .value)"
    )
    raise _json_error(
        path,
        f"has type {type(value).__name__}, which is not JSON data (dict, list, str, int, "
        f"float, bool or None); {fix}",
    )


def frozen_json(root: dict[Any, Any], name: str) -> JsonObject:
    """A read-only copy of `root` that is JSON data, or a ValueError naming the path that is not.

    JSON data is what a provider receives: dicts with str keys, lists, str, int,
    float, bool and None; strings valid Unicode, floats finite. One pass over the
    data with an explicit stack, so depth is bounded by a check, not by recursion.
    """
    top = JsonObject()
    count = 0
    pending: _Pending = [(root, top, (None, name), 1)]
    while pending:
        value, copy, path, depth = pending.pop()
        count += len(value)
        if count > _MAX_JSON_VALUES:
            raise _json_error(
                (None, name),
                f"holds more than {_MAX_JSON_VALUES:,} values (a list or dict used in several "
                "places counts each time); no context window holds a schema this large: "
                "pass the schema itself, not data that reuses parts of it",
            )
        if isinstance(copy, JsonArray):
            list.extend(
                copy, [_json_copy(v, (path, i), depth, pending) for i, v in enumerate(value)]
            )
            continue
        for key, child in value.items():
            if not isinstance(key, str):
                raise _json_error(
                    path,
                    f"has key {shown_key(key)} ({type(key).__name__}); JSON object keys are "
                    f"strings: use {shown_key(str(key))}",
                )
            try:
                check_text_fast(key)
            except ValueError as error:
                raise _json_error(path, f"has a key that {error}") from None
            dict.__setitem__(copy, key, _json_copy(child, (path, key), depth, pending))
    return top


def json_object(value: Any) -> JsonObject:
    """`value` as a read-only JSON object; the validator of `Tool.parameters`."""
    if not isinstance(value, dict):
        raise ValueError(
            f"must be a JSON object (a dict holding the arguments' JSON schema), but got a "
            f"{type(value).__name__}"
        )
    return frozen_json(value, "parameters")
