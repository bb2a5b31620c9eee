"""A bad budget as one sentence that names the place to fix in the file's own syntax.

`Budget.parse` turns pydantic's validation errors into messages such as
``[allocations.retrieved] min must be 0 or more, but is -1``, written for the TOML or
JSON the budget came from.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Literal

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ctxbudget._claimants import CLAIMANTS

__all__ = ["AllocationError", "Syntax", "displayed", "explain"]

Syntax = Literal["toml", "json"]
"""The file syntax a budget's error messages are written in."""


class AllocationError(ValueError):
    """A validator's complaint about one allocation, kept apart from where that allocation is,
    so `Budget.parse` can say where in the file's own syntax."""

    def __init__(self, problem: str, *, allocation: str) -> None:
        self.problem = problem
        self.allocation = allocation
        super().__init__(f"allocation {allocation!r}: {problem}")


_BUDGET_FIELDS = ("total", "reserve_output", "allocations")
_ALLOCATION_FIELDS = ("name", "min", "max", "priority")
_PLACEHOLDERS = {
    "total": "<tokens>",
    "reserve_output": "<tokens>",
    "min": "<tokens>",
    "max": "<tokens>",
    "priority": "<n>",
    "name": '"<claimant>"',
}
_WHY = {
    "priority": " (0 is never trimmed; higher numbers are trimmed first)",
    "name": f" (one of {', '.join(CLAIMANTS)})",
    "total": " (the model's context window)",
}


def explain(error: ValidationError, data: object, syntax: Syntax) -> str:
    """One sentence for all of `error`'s problems, each placed in `data` in `syntax`."""
    where = _Places(data, syntax)
    return "; ".join(_problem(detail, where) for detail in error.errors())


class _Places:
    """Names places in the budget data the way its file writes them."""

    def __init__(self, data: object, syntax: Syntax) -> None:
        self.syntax = syntax
        allocations = data.get("allocations") if isinstance(data, Mapping) else None
        self.keys: list[str] | None = (
            [str(k) for k in allocations] if isinstance(allocations, Mapping) else None
        )
        self.items: list[object] = (
            list(allocations) if isinstance(allocations, list | tuple) else []
        )

    def table(self, index: int) -> str:
        """The allocation at `index` of the validated list, as the file names it."""
        if self.keys is not None:
            return _key_path(self.keys[index], self.syntax)
        item = self.items[index] if index < len(self.items) else None
        name = item.get("name") if isinstance(item, Mapping) else None
        if self.syntax == "json":
            return f"allocations[{index}]"
        named = f" (name = {json.dumps(name)})" if isinstance(name, str) else ""
        return f"[[allocations]] #{index + 1}{named}"

    def named(self, name: str) -> str:
        """The allocation called `name` (the last one, when it appears twice)."""
        if self.keys is not None and name in self.keys:
            return self.table(self.keys.index(name))
        names = [i.get("name") if isinstance(i, Mapping) else None for i in self.items]
        if name in names:
            return self.table(len(names) - 1 - names[::-1].index(name))
        return f"allocation {name!r}"

    def field(self, loc: tuple[int | str, ...]) -> tuple[str | None, str]:
        """(the allocation's table or None at top level, the field) for a field's location."""
        if len(loc) >= 3 and loc[0] == "allocations" and isinstance(loc[1], int):
            return self.table(loc[1]), str(loc[2])
        return None, str(loc[0])

    def add(self, field: str, table: str | None) -> str:
        value = _PLACEHOLDERS.get(field, "...")
        line = f"{field} = {value}" if self.syntax == "toml" else f'"{field}": {value}'
        if table is None:
            spot = "at the top of the file" if self.syntax == "toml" else "to the top-level object"
        else:
            spot = f"to {table}"
        return f"add {line} {spot}{_WHY.get(field, '')}"


def _problem(detail: ErrorDetails, where: _Places) -> str:
    loc = detail["loc"]
    kind = detail["type"]
    value = displayed(detail["input"])
    ctx = detail.get("ctx", {})
    if kind == "value_error":
        error = ctx.get("error")
        if isinstance(error, AllocationError):
            label = (
                where.table(loc[1])
                if len(loc) == 2 and isinstance(loc[1], int)
                else where.named(error.allocation)
            )
            return f"{label}: {error.problem}"
        return str(error)
    if kind == "model_type" and not loc:
        shape = "a table" if where.syntax == "toml" else "an object"
        return f"a budget must be {shape} with total, reserve_output and allocations"
    if kind == "tuple_type" and loc == ("allocations",):
        shape = (
            "[allocations.<claimant>] tables or [[allocations]] tables"
            if where.syntax == "toml"
            else "an object of claimant names or a list of objects"
        )
        return f"allocations must be {shape}, but is {value}"
    if kind == "model_type" and len(loc) == 2 and isinstance(loc[1], int):
        shape = "a table" if where.syntax == "toml" else "an object"
        settings = "priority (and optionally min and max)"
        return f"{where.table(loc[1])} must be {shape} with {settings}, but is {value}"
    if kind == "missing" and loc == ("allocations",):
        example = (
            "an [allocations.retrieved] table with max = 3000 and priority = 1"
            if where.syntax == "toml"
            else '"allocations": {"retrieved": {"max": 3000, "priority": 1}}'
        )
        return f"add one allocation per part of the prompt you send, e.g. {example}"
    table, field = where.field(loc)
    place = field if table is None else f"{table}{' ' if where.syntax == 'toml' else '.'}{field}"
    if kind == "missing":
        return where.add(field, table)
    if kind == "extra_forbidden":
        known = _BUDGET_FIELDS if table is None else _ALLOCATION_FIELDS
        close = difflib.get_close_matches(field, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        top = "the top of the file" if where.syntax == "toml" else "the top-level object"
        name = field if field.isidentifier() and field.isascii() else displayed(field)
        return f"remove {name} from {table or top}: it takes only {', '.join(known)}{hint}"
    if kind == "literal_error" and where.keys is not None and table is not None:
        return f"{table} is not a claimant; name the table after one of {', '.join(CLAIMANTS)}"
    if kind == "literal_error":
        return f"{place} must be one of {', '.join(CLAIMANTS)}, but is {value}"
    if kind == "greater_than":
        return f"{place} must be greater than {ctx['gt']}, but is {value}"
    if kind == "greater_than_equal":
        return f"{place} must be {ctx['ge']} or more, but is {value}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{place} must be a whole number, but is {value}"
    message = detail["msg"]
    return f"{place}: {message[:1].lower()}{message[1:]}"


def _key_path(key: str, syntax: Syntax) -> str:
    """The allocation under `key` as TOML's table header or a JavaScript-style JSON path,
    quoting the key only where the syntax needs it."""
    if syntax == "toml":
        bare = key != "" and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
        return f"[allocations.{key if bare else json.dumps(key)}]"
    if key.isidentifier() and key.isascii():
        return f"allocations.{key}"
    return f"allocations[{json.dumps(key)}]"


def displayed(value: object) -> str:
    """A value as the file would write it, shortened to stay within one readable sentence."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
