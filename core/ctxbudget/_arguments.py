"""The one check every public entry point runs on what it is given.

A wrong type is refused at the boundary, before anything reads the value, with one
message shape: ``<name> must be <what it takes>, not <type>; <how to build one>``. Only
the type's name is shown, never the value: an argument can be user content.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import TypeVar

from pydantic import BaseModel

from ctxbudget._errors import InputError

__all__ = [
    "ArgumentTypeError",
    "check_int",
    "check_optional",
    "check_token_range",
    "check_type",
    "sequence_of",
    "wrong_type",
]

_T = TypeVar("_T")


class ArgumentTypeError(InputError, TypeError):
    """An argument of the wrong type: a `TypeError` as Python's own, and an `InputError`
    as every input ctxbudget refuses, so either ``except`` catches it."""


def wrong_type(name: str, value: object, takes: str, fix: str = "") -> ArgumentTypeError:
    """The error for `value` given as `name`, which takes `takes`; `fix` says how to build one."""
    message = f"{name} must be {takes}, not {type(value).__name__}"
    return ArgumentTypeError(f"{message}; {fix}" if fix else message)


def check_type(name: str, value: object, kind: type[_T], takes: str, fix: str = "") -> _T:
    """`value` when it is a `kind`; `wrong_type` otherwise."""
    if isinstance(value, kind):
        return value
    raise wrong_type(name, value, takes, fix)


def check_optional(
    name: str, value: object, kind: type[_T], takes: str, fix: str = ""
) -> _T | None:
    """`value` when it is None or a `kind`; `wrong_type` otherwise (None is the default, so
    the message names only the type to build)."""
    if value is None or isinstance(value, kind):
        return value
    raise wrong_type(name, value, takes, fix)


def check_int(name: str, value: object) -> int:
    """`value` when it is an int (a bool is no count of tokens); `wrong_type` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(name, value, "an int")
    return value


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
