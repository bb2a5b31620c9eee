"""Test cases: a question, the keywords a correct answer contains, and the chunk(s) holding it.

Cases come as `Case` objects, as mappings with the same keys, or from a JSONL file
whose ``gold`` names chunk ids in a chunks JSONL file. Every error names the place
to fix: the case's index, or the file and line, and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxbudget import Chunk
from ctxbudget.eval._errors import EvalError

__all__ = ["Case", "as_cases", "check_pool", "load_cases", "load_chunks"]


class Case(BaseModel):
    """One question with a known answer.

    >>> case = Case(question="How long do refunds take?", keywords=["14 days"],
    ...             gold=Chunk(id="c1", content="Refunds take 14 days."))
    >>> [c.id for c in case.gold]
    ['c1']
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    question: str = Field(description="The question as a user would ask it.")
    keywords: tuple[str, ...] = Field(
        description="What a correct answer contains, every one of them (case and spaces ignored)."
    )
    gold: tuple[Chunk, ...] = Field(
        description="The chunk, or the chunks, that hold the answer; a single Chunk is accepted."
    )
    id: str | None = Field(default=None, description="Names the case in errors and exports.")

    if TYPE_CHECKING:  # what callers may pass; pydantic converts it to the fields' types

        def __init__(
            self,
            *,
            question: str,
            keywords: Sequence[str],
            gold: Chunk | Sequence[Chunk],
            id: str | None = None,
        ) -> None: ...

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("needs at least one keyword a correct answer contains")
        if any(not k.strip() for k in value):
            raise ValueError("a keyword is blank; every keyword must have visible text")
        return value

    @field_validator("gold", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, Chunk | Mapping) else value

    @field_validator("gold")
    @classmethod
    def _gold(cls, value: tuple[Chunk, ...]) -> tuple[Chunk, ...]:
        if not value:
            raise ValueError("needs at least one chunk that holds the answer")
        ids = [c.id for c in value]
        if len(set(ids)) < len(ids):
            raise ValueError(f"chunk ids must be unique, but got {ids}")
        return value

    def label(self, index: int) -> str:
        """How errors name this case: its id, else its index."""
        return f"case {self.id!r}" if self.id is not None else f"cases[{index}]"


def as_cases(cases: Iterable[Case | Mapping[str, Any]]) -> list[Case]:
    """`cases` as `Case` objects; an `EvalError` names the first bad one and its field."""
    if isinstance(cases, str | bytes | Mapping | Case):
        raise EvalError(
            f"cases must be a list of Case or mappings, but got one {type(cases).__name__}; "
            "wrap it in a list"
        )
    out: list[Case] = []
    for index, case in enumerate(cases):
        if isinstance(case, Case):
            out.append(case)
        elif isinstance(case, Mapping):
            out.append(_validate(case, f"cases[{index}]"))
        else:
            raise EvalError(
                f"cases[{index}] is a {type(case).__name__}; expected a Case or a mapping with "
                "question, keywords and gold"
            )
    if not out:
        raise EvalError("no cases given; an experiment needs at least one case")
    return out


def check_pool(pool: Sequence[Chunk], what: str = "pool") -> list[Chunk]:
    """`pool` as a list of chunks with unique ids, or an `EvalError` naming the problem."""
    if isinstance(pool, str | bytes) or not isinstance(pool, Sequence):
        raise EvalError(f"{what} must be a sequence of Chunk, but got {type(pool).__name__}")
    seen: set[str] = set()
    for index, chunk in enumerate(pool):
        if not isinstance(chunk, Chunk):
            raise EvalError(
                f"{what}[{index}] is a {type(chunk).__name__}, expected ctxbudget.Chunk"
            )
        if chunk.id in seen:
            raise EvalError(
                f"{what}[{index}]: chunk id {chunk.id!r} appears twice; ids must be unique"
            )
        seen.add(chunk.id)
    return list(pool)


def load_chunks(path: str | Path) -> list[Chunk]:
    """Chunks from a JSONL file, one `Chunk` object per line (blank lines are skipped)."""
    chunks: list[Chunk] = []
    lines: dict[str, int] = {}
    for line, data in _objects(path):
        try:
            chunk = Chunk.model_validate(data)
        except ValidationError as exc:
            raise EvalError(f"{path} line {line}: {_problem(exc)}") from None
        if chunk.id in lines:
            raise EvalError(
                f"{path} line {line}: chunk id {chunk.id!r} was already used on line "
                f"{lines[chunk.id]}; ids must be unique"
            )
        lines[chunk.id] = line
        chunks.append(chunk)
    if not chunks:
        raise EvalError(f"{path} holds no chunks; write one JSON object per line")
    return chunks


def load_cases(path: str | Path, chunks: Sequence[Chunk]) -> list[Case]:
    """Cases from a JSONL file: per line ``{"question": ..., "keywords": [...], "gold": ...}``.

    ``gold`` is a chunk id or a list of them, looked up in `chunks` (e.g. `load_chunks`);
    an optional ``id`` names the case.
    """
    by_id = {c.id: c for c in check_pool(chunks, "chunks")}
    cases: list[Case] = []
    for line, data in _objects(path):
        where = f"{path} line {line}"
        gold = data.get("gold")
        ids = [gold] if isinstance(gold, str) else gold
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise EvalError(
                f"{where}: field 'gold' must be a chunk id or a list of chunk ids, but got "
                f"{_kind(gold)}"
            )
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise EvalError(
                f"{where}: field 'gold': chunk id {missing[0]!r} is not among the {len(by_id)} "
                "chunks given; check the chunks file"
            )
        cases.append(_validate({**data, "gold": [by_id[i] for i in ids]}, where))
    if not cases:
        raise EvalError(f"{path} holds no cases; write one JSON object per line")
    return cases


def _objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) for each non-blank line of a JSONL file."""
    with Path(path).open(encoding="utf-8") as lines:
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise EvalError(
                    f"{path} line {number}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from None
            if not isinstance(data, dict):
                raise EvalError(
                    f"{path} line {number}: expected a JSON object, but got {_kind(data)}"
                )
            yield number, data


def _validate(data: Mapping[str, Any], where: str) -> Case:
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise EvalError(f"{where}: {_problem(exc)}") from None


def _problem(exc: ValidationError) -> str:
    """The first error of `exc` as "field 'a.b[0]': message"."""
    error = exc.errors(include_input=False)[0]
    field = ""
    for part in error["loc"]:
        field += f"[{part}]" if isinstance(part, int) else f".{part}" if field else str(part)
    message = error["msg"].removeprefix("Value error, ")
    return f"field {field!r}: {message}" if field else message


def _kind(value: object) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"
