"""The base of the input models: strict field names, and a help() that reads like a manual.

A misspelt keyword is an error naming the field it was probably meant to be, never data
that is quietly kept, because a misspelt ACL keyword kept as data would leave a
restricted chunk public. `help(Chunk)` lists each field with its plain type and its
description, not pydantic's validators.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import operator
import textwrap
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from ctxbudget._acl import acl_meaning, shown_key

__all__ = ["InputModel"]


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


class InputModel(BaseModel):
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
