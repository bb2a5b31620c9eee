"""The things a prompt is built from: chunks, conversation turns, tools, and who is asking.

All are immutable pydantic models, so a request's inputs cannot change under the
assembler and every field is validated with a message naming it.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = ["Chunk", "Principal", "Role", "Text", "Tool", "Turn", "check_text"]


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

_FROZEN = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)


class Chunk(BaseModel):
    """One retrieved passage, with what is known about where it came from.

    Unknown keyword arguments are kept in `metadata`, which is passed through and
    never rendered into the prompt.
    """

    model_config = _FROZEN

    id: _Id
    """Unique within a request; reports and `sources` refer to chunks by it."""
    content: Text
    document_id: _Id
    """The document this chunk was cut from; defaults to `id` (a chunk that is a whole document)."""
    title: Text | None = None
    heading_path: tuple[Text, ...] = ()
    """Section headings from the document root down to this chunk, e.g. ("Returns", "EU")."""
    ordinal: Annotated[int, Field(ge=0)] | None = None
    """Position of the chunk within its document; orders chunks of one document."""
    score: _Score = None
    """Retriever similarity; higher is better. Never rendered."""
    rerank_score: _Score = None
    """Reranker score; when present it outranks `score`. Never rendered."""
    effective_date: date | None = None
    """The date the content takes effect (a policy version); used by conflict policies."""
    updated_at: datetime | None = None
    """Last modification time; a stale source gets a freshness note."""
    source: Text | None = None
    """The system it came from (e.g. "confluence"). Used for filtering, never rendered."""
    parse_warnings: tuple[Text, ...] = ()
    """Problems found at ingest (OCR confidence, instruction-like text); rendered as a signal."""
    tenant: Text | None = None
    groups: frozenset[Text] | None = None
    """Groups allowed to see the chunk; None means the chunk carries no group ACL."""
    tokens: Annotated[int, Field(ge=0)] | None = None
    """Token count of `content` measured at ingest with the same tokenizer; trusted as given."""
    embedding: tuple[float, ...] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        extra = {k: data.pop(k) for k in list(data) if k not in cls.model_fields}
        metadata = data.get("metadata")
        if metadata is None:
            metadata = {}
        if extra:
            if not isinstance(metadata, dict):
                return data | {"metadata": metadata}  # let field validation report it
            metadata = {**metadata, **extra}
        data["metadata"] = metadata
        for field in ("heading_path", "parse_warnings"):
            if data.get(field) is None:
                data[field] = ()
        if data.get("document_id") is None and "id" in data:
            data["document_id"] = data["id"]
        return data

    def __repr__(self) -> str:
        return f"Chunk(id={self.id!r}, document_id={self.document_id!r}, {len(self.content)} chars)"

    # pydantic's __str__ prints every field; content may be confidential and must not
    # reach a log line through "%s".
    __str__ = __repr__


Role = Literal["system", "user", "assistant", "tool"]


class Turn(BaseModel):
    """One message of the conversation so far."""

    model_config = _FROZEN

    role: Role
    content: Text
    id: _Id | None = None
    """Names the turn in reports; defaults to its position, e.g. ``history[3]``."""


class Tool(BaseModel):
    """A tool the model may call, as it is described to the model."""

    model_config = _FROZEN

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")]
    """Unique within a request; 1-64 letters, digits, ``_ . -`` (what providers accept)."""
    description: Text = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    """JSON schema of the arguments."""
    score: _Score = None
    """Relevance to this request; higher is kept first. Without scores, earlier is more relevant."""


class Principal(BaseModel):
    """Who the prompt is built for; permission filters compare it with each chunk's ACL."""

    model_config = _FROZEN

    tenant: Text | None = None
    groups: frozenset[Text] = frozenset()
