"""The things a prompt is built from: chunks, conversation turns, tools, and who is asking.

All are immutable pydantic models, so a request's inputs cannot change under the
assembler and every field is validated with a message naming it. Field names are
strict: a misspelt keyword is an error naming the closest field, never data that
is quietly kept, because a misspelt ACL keyword kept as data would leave a
restricted chunk public.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import operator
import textwrap
import types
from collections.abc import Sequence
from datetime import date, datetime
from itertools import repeat
from typing import (
    Annotated,
    Any,
    Literal,
    NoReturn,
    Self,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ctxbudget._acl import acl_meaning, shown_key
from ctxbudget._errors import InputError

__all__ = [
    "Chunk",
    "Principal",
    "Role",
    "Text",
    "Tool",
    "Turn",
    "check_text",
    "check_token_range",
    "sequence_of",
]


def check_text(value: str) -> str:
    """Reject text no tokenizer or provider can encode: lone UTF-16 surrogates."""
    for index, char in enumerate(value):
        if "\ud800" <= char <= "\udfff":
            raise ValueError(
                f"contains a lone surrogate U+{ord(char):04X} at index {index}, which is not "
                "valid Unicode and cannot be sent to a model; decode the source with "
                "errors='replace' (or fix the text) before building the prompt"
            )
    return value


def _check_text_fast(value: str) -> str:
    # The scan above is per character; encoding is a C loop that fails exactly on
    # surrogates, so only failing text pays for the scan that finds the index.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return check_text(value)
    return value


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"must be a finite number, but got {value!r}")
    return value


Text = Annotated[str, AfterValidator(_check_text_fast)]
"""A string that is valid Unicode (no lone surrogates)."""


def _non_empty(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


_Id = Annotated[str, AfterValidator(_check_text_fast), AfterValidator(_non_empty)]
_Score = Annotated[float | None, AfterValidator(_finite)]


# --- strict field names --------------------------------------------------------------------


def _closest_field(key: object, fields: list[str]) -> str | None:
    """The field `key` was probably meant to be: its ACL meaning first, else closest spelling."""
    if not isinstance(key, str):
        return None
    meant = acl_meaning(key)
    if meant in fields:
        return meant
    close = difflib.get_close_matches(key, fields, n=1)
    return close[0] if close else None


def _unknown_fields_message(model: type[BaseModel], unknown: list[object]) -> str:
    """Name each unknown key with the field it was probably meant to be, and where data goes."""
    fields = list(model.model_fields)
    if "metadata" in fields:
        fix = "Extra data goes in metadata={...}."
    else:
        fix = f"{model.__name__} fields are: {', '.join(fields)}."
    meant = [_closest_field(key, fields) for key in unknown]
    if len(unknown) == 1:
        hint = f"; did you mean {meant[0]!r}?" if meant[0] else "."
        return f"unknown {model.__name__} field {shown_key(unknown[0])}{hint} {fix}"
    named = [
        shown_key(key) + (f" (did you mean {m!r}?)" if m else "")
        for key, m in zip(unknown, meant, strict=True)
    ]
    return f"unknown {model.__name__} fields {', '.join(named)}. {fix}"


# --- readable help() -----------------------------------------------------------------------


def _plain(annotation: Any) -> Any:
    """`annotation` without `Annotated[...]` metadata: the type a reader needs, not validators."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _plain(args[0])
    if origin is Union or origin is types.UnionType:
        return functools.reduce(operator.or_, map(_plain, args))
    if origin is None or origin is Literal:
        return annotation
    return origin[tuple(map(_plain, args))]


_FIELDS_HEADING = "\n\nFields:\n"


def _schema_description(schema: dict[str, Any], model: type[BaseModel]) -> None:
    # The field list appended to the docstring for help() is already in the schema's
    # per-field descriptions; the model's own description is what precedes it.
    schema["description"] = str(schema["description"]).split(_FIELDS_HEADING)[0]


class _Input(BaseModel):
    """The shared base of the input models: strict field names and a readable help()."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        str_strip_whitespace=False,
        # An error must not quote its input: chunk text may be confidential, and the repr
        # of hostile data (a list shared at every level) can be exponentially long.
        hide_input_in_errors=True,
        json_schema_extra=_schema_description,
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [key for key in data if key not in cls.model_fields]
            if unknown:
                # pydantic's own type for an unknown field, so code matching on it still works.
                raise PydanticCustomError("extra_forbidden", _unknown_fields_message(cls, unknown))
        return data

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Show plain types in the signature and each field's description in help()."""
        super().__pydantic_init_subclass__(**kwargs)
        signature = inspect.signature(cls)
        fields = cls.model_fields
        parameters = [
            p.replace(annotation=_plain(fields[p.name].annotation))
            for p in signature.parameters.values()
        ]
        cls.__signature__ = signature.replace(parameters=parameters)
        lines = [inspect.cleandoc(cls.__doc__ or "")]
        for p in parameters:
            lines.append(f"    {p.name}: {inspect.formatannotation(p.annotation)}")
            lines.append(
                textwrap.indent(textwrap.fill(fields[p.name].description or "", 80), " " * 8)
            )
        cls.__doc__ = lines[0] + _FIELDS_HEADING + "\n".join(lines[1:])


# --- JSON data -----------------------------------------------------------------------------


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        f"{type(self).__name__} is read-only: Tool.parameters cannot change after the Tool is "
        "built (the prompt and the cached prefix depend on it); build a new Tool instead, "
        "from a copy such as json.loads(json.dumps(tool.parameters))"
    )


class _JsonObject(dict[str, Any]):
    """A JSON object that cannot be changed; still a `dict` to `json.dumps` and providers' SDKs."""

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[_JsonObject], tuple[dict[str, Any]]]:
        # copy, deepcopy and pickle would otherwise refill it through __setitem__.
        return (_JsonObject, (dict(self),))


class _JsonArray(list[Any]):
    """A JSON array that cannot be changed; still a `list` to `json.dumps` and providers' SDKs."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __reduce__(self) -> tuple[type[_JsonArray], tuple[list[Any]]]:
        return (_JsonArray, (list(self),))


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
            return _check_text_fast(value)
        except ValueError as error:
            raise _json_error(path, str(error)) from None
    if isinstance(value, dict | list):
        if depth >= _MAX_JSON_DEPTH:
            raise _json_error(
                path,
                f"nests deeper than {_MAX_JSON_DEPTH} levels (a dict or list that contains "
                "itself nests forever); flatten the schema, or use $ref for recursive types",
            )
        copy = _JsonObject() if isinstance(value, dict) else _JsonArray()
        pending.append((value, copy, path, depth + 1))
        return copy
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        # json.dumps writes ints through str(), which refuses more than ~4,300 digits.
        if value.bit_length() > 64:
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


def _frozen_json(root: dict[Any, Any], name: str) -> _JsonObject:
    """A read-only copy of `root` that is JSON data, or a ValueError naming the path that is not.

    JSON data is what a provider receives: dicts with str keys, lists, str, int,
    float, bool and None; strings valid Unicode, floats finite. One pass over the
    data with an explicit stack, so depth is bounded by a check, not by recursion.
    """
    top = _JsonObject()
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
        if isinstance(copy, _JsonArray):
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
                _check_text_fast(key)
            except ValueError as error:
                raise _json_error(path, f"has a key that {error}") from None
            dict.__setitem__(copy, key, _json_copy(child, (path, key), depth, pending))
    return top


def _json_object(value: Any) -> _JsonObject:
    """`value` as a read-only JSON object; the validator of `Tool.parameters`."""
    if not isinstance(value, dict):
        raise ValueError(
            f"must be a JSON object (a dict holding the arguments' JSON schema), but got a "
            f"{type(value).__name__}"
        )
    return _frozen_json(value, "parameters")


# --- the models ----------------------------------------------------------------------------


def _id_of(data: dict[str, Any]) -> str:
    """The default `document_id`: the chunk's own id."""
    return str(data["id"])


_NONE_MEANS_DEFAULT = ("document_id", "heading_path", "parse_warnings", "metadata")
"""Chunk fields where an explicit None means "use the default" (loaders fill gaps with None)."""


class Chunk(_Input):
    """One retrieved passage, with what is known about where it came from.

    Unknown keyword arguments are errors; extra data goes in `metadata`, which is
    passed through and never rendered into the prompt. ACLs are read only from
    `tenant` and `groups`: ACL-looking `metadata` keys (``tenant_id``,
    ``allowed_groups``, ``acl``, ...; README "Inputs") are an error whatever else is
    set, because they would not be enforced. Only top-level `metadata` keys are
    checked, not nested ones.
    """

    id: _Id = Field(description="Unique within a request; reports and `sources` name chunks by it.")
    content: Text = Field(description="The passage text, rendered inside the fenced sources.")
    document_id: _Id = Field(
        default_factory=_id_of,
        description=(
            "The document this chunk was cut from. Defaults to `id` when left out or None, "
            "i.e. the chunk is taken to be a whole document; set it when several chunks "
            "come from one document."
        ),
    )
    title: Text | None = Field(
        default=None, description="The document's title, shown in the source header."
    )
    heading_path: tuple[Text, ...] = Field(
        default=(),
        description=(
            "Section headings from the document root down to this chunk, "
            'e.g. ("Returns", "EU"); shown in the source header.'
        ),
    )
    ordinal: int | None = Field(
        default=None,
        ge=0,
        description="Position of the chunk within its document; orders chunks of one document.",
    )
    score: _Score = Field(
        default=None, description="Retriever similarity; higher is better. Never rendered."
    )
    rerank_score: _Score = Field(
        default=None,
        description="Reranker score; when present it outranks `score`. Never rendered.",
    )
    effective_date: date | None = Field(
        default=None,
        description="When the content takes effect (a policy version); used by conflict policies.",
    )
    updated_at: datetime | None = Field(
        default=None, description="Last modification time; a stale source gets a freshness note."
    )
    source: Text | None = Field(
        default=None,
        description='The system it came from (e.g. "confluence"); for filtering, never rendered.',
    )
    parse_warnings: tuple[Text, ...] = Field(
        default=(),
        description=(
            "Problems found at ingest (OCR confidence, instruction-like text); "
            "rendered as a signal."
        ),
    )
    tenant: Text | None = Field(
        default=None,
        description="The tenant allowed to see the chunk; None means it carries no tenant ACL.",
    )
    groups: frozenset[Text] | None = Field(
        default=None,
        description=(
            "Groups allowed to see the chunk (membership of any one suffices; empty means "
            "nobody); None means the chunk carries no group ACL."
        ),
    )
    tokens: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Token count of `content` measured at ingest with the same tokenizer; trusted as given."
        ),
    )
    embedding: tuple[float, ...] | None = Field(
        default=None,
        description="The chunk's vector; lets deduplication compare meaning. Never rendered.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Anything else, passed through and never rendered. A key that looks like an "
            "access rule (tenant_id, allowed_groups, acl, ...) is refused: it would not be "
            "enforced; use `tenant` and `groups`."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _none_means_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(data.get(f, 0) is None for f in _NONE_MEANS_DEFAULT):
            return {k: v for k, v in data.items() if v is not None or k not in _NONE_MEANS_DEFAULT}
        return data

    @model_validator(mode="after")
    def _no_acl_in_metadata(self) -> Self:
        found = [k for k, v in self.metadata.items() if v is not None and acl_meaning(k)]
        if found:
            meant = {acl_meaning(k) for k in found}
            fields = " and/or ".join(f"{f}=..." for f in ("tenant", "groups") if f in meant)
            keys = ", ".join(map(shown_key, found))
            which = (
                f"keys {keys} look like access rules"
                if len(found) > 1
                else (f"key {keys} looks like an access rule")
            )
            raise ValueError(
                f"metadata {which}, but metadata is never enforced, so it would not restrict "
                f"who sees the chunk; set {fields} on the Chunk instead, or rename the key if "
                "it is not an access rule"
            )
        return self

    def __repr__(self) -> str:
        return f"Chunk(id={self.id!r}, document_id={self.document_id!r}, {len(self.content)} chars)"

    # pydantic's __str__ prints every field; content may be confidential and must not
    # reach a log line through "%s".
    __str__ = __repr__


Role = Literal["system", "user", "assistant", "tool"]


class Turn(_Input):
    """One message of the conversation so far.

    An adapter passes one turn per framework message, so a gap marker's count is a count
    of messages; `group` keeps a tool call and its results together.
    """

    role: Role = Field(description="Who said it: system, user, assistant or tool.")
    content: Text = Field(description="What was said.")
    id: _Id | None = Field(
        default=None,
        description="Names the turn in reports; defaults to its position, e.g. history[3].",
    )
    group: _Id | None = Field(
        default=None,
        description=(
            "Consecutive turns with the same group are one unit, kept or dropped together: "
            "an assistant turn that calls tools and the tool turns answering it. None: the "
            "turn is a unit of its own."
        ),
    )
    name: _Id | None = Field(
        default=None,
        description=(
            "For a tool turn, the name of the tool whose result it is; shown when the result "
            "is cleared. Only tool turns take one."
        ),
    )

    @model_validator(mode="after")
    def _name_only_on_tool_turns(self) -> Self:
        if self.name is not None and self.role != "tool":
            raise ValueError(
                f"name is the tool's name of a tool turn, but this turn's role is "
                f"{self.role!r}; leave name out, or set role='tool'"
            )
        return self


class Tool(_Input):
    """A tool the model may call, as it is described to the model."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
        description="Unique within a request; 1-64 letters, digits, _ . - (what providers accept).",
    )
    description: Text = Field(default="", description="What the tool does, as the model reads it.")
    parameters: Annotated[
        dict[str, Any], PlainValidator(_json_object, json_schema_input_type=dict[str, Any])
    ] = Field(
        default_factory=_JsonObject,
        description=(
            "JSON schema of the arguments. Checked to be JSON data (str keys, finite numbers, "
            "valid Unicode, at most 64 levels deep) and stored read-only."
        ),
    )
    score: _Score = Field(
        default=None,
        description=(
            "Relevance to this request; higher is kept first. Without scores, earlier "
            "is more relevant."
        ),
    )


class Principal(_Input):
    """Who the prompt is built for; permission filters compare it with each chunk's ACL."""

    tenant: Text | None = Field(
        default=None,
        description="The principal's tenant; it sees chunks of this tenant and chunks without one.",
    )
    groups: frozenset[Text] = Field(
        default=frozenset(),
        description="The principal's groups; it sees a group-restricted chunk listing any of them.",
    )


_M = TypeVar("_M", bound=BaseModel)


def sequence_of(name: str, values: object, kind: type[_M]) -> list[_M]:
    """`values` as a list of `kind`, or an `InputError` naming the first item that is not one."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InputError(
            f"{name} must be a sequence of {kind.__name__}, but got {type(values).__name__}"
        )
    if not all(map(isinstance, values, repeat(kind))):  # one C-speed pass over the items
        index, value = next((i, v) for i, v in enumerate(values) if not isinstance(v, kind))
        raise InputError(
            f"{name}[{index}] is a {type(value).__name__}, expected ctxbudget.{kind.__name__}; "
            f"build it with {kind.__name__}(...) or {kind.__name__}.model_validate(data)"
        )
    return list(values)


def check_token_range(max_tokens: object, min_tokens: object) -> tuple[int, int]:
    """A `max_tokens` / `min_tokens` pair as given to a single claimant; `InputError` otherwise."""
    cap, floor = _token_count("max_tokens", max_tokens), _token_count("min_tokens", min_tokens)
    if floor > cap:
        raise InputError(
            f"min_tokens ({floor}) is greater than max_tokens ({cap}); lower min_tokens or "
            "raise max_tokens"
        )
    return cap, floor


def _token_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{name} must be an int >= 0, but got {value!r}")
    return value
