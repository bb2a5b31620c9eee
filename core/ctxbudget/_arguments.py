"""The one check every public entry point runs on what it is given.

A wrong type is refused at the boundary, before anything reads the value, with one
message shape: ``<name> must be <what it takes>, not <type>; <how to build one>``. Only
the type's name is shown, never the value: an argument can be user content.
"""

from __future__ import annotations

from typing import TypeVar

from ctxbudget._errors import InputError

__all__ = ["ArgumentTypeError", "check_int", "check_optional", "check_type", "wrong_type"]

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
