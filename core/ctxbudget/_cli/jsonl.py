"""Reading JSONL of ctxbudget models (one `Chunk` or `Turn` per line), with errors by line.

The format is what ``model_dump_json()`` writes, one object per line. Lines are split
on ``\\n`` only: JSON may hold U+2028 and other Unicode line breaks unescaped inside
strings, and `str.splitlines` would cut such an object in two.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ctxbudget._cli.errors import CliError
from ctxbudget._cli.options import read_text

__all__ = ["read_jsonl"]

M = TypeVar("M", bound=BaseModel)

_VALUE_ERROR = "Value error, "


def read_jsonl(path: str, model: type[M]) -> list[M]:
    """One `model` per non-blank line of `path`; a `CliError` names the line and field."""
    items: list[M] = []
    for number, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise CliError(f"{path}, line {number}: {_first_problem(exc, model)}") from None
    if not items:
        raise CliError(
            f"{path} holds no {model.__name__}; write one per line, as "
            f"{model.__name__}.model_dump_json() does"
        )
    return items


def _first_problem(error: ValidationError, model: type[BaseModel]) -> str:
    """The first problem pydantic found, as "field: what is wrong" (and how many more)."""
    # A field whose default is computed from others adds an error of its own when they fail.
    problems = [
        problem
        for problem in error.errors(include_url=False, include_input=False)
        if problem["type"] != "default_factory_not_called"
    ]
    first = problems[0]
    message = first["msg"].removeprefix(_VALUE_ERROR)
    if first["type"] == "json_invalid":
        message = f"not valid JSON ({message.removeprefix('Invalid JSON: ')})"
    elif first["type"] == "model_type":
        message = f"expected a JSON object of {model.__name__} fields"
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"
