"""Document metadata ⇄ `Chunk` fields: a pure mapping, no framework import.

A LangChain `Document` is three things: an optional id, its text and a metadata
dict whose keys vary by loader and vector store. `MetadataMapping` says which keys
fill which `Chunk` field; `to_chunks` applies it to many documents at once, naming
the document index and the metadata key in every error, and `metadata_of` goes
back from a `Chunk` to metadata (for a whole document the core loaded itself).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxbudget import Chunk, InputError

__all__ = ["MetadataMapping", "RawDocument", "metadata_of", "to_chunks"]

RawDocument = tuple[str | None, str, Mapping[str, Any]]
"""A document as plain data: (id or None, text, metadata)."""

_Keys = tuple[str, ...]

_ACL_FIELDS: Final = ("tenant", "groups")


class MetadataMapping(BaseModel):
    """Which `Document.metadata` keys fill which `Chunk` field; for each field the first
    key present (and not None) wins.

    Keys not named here pass through into `Chunk.metadata` (never rendered). Keys
    named for `tenant` and `groups` are always taken out of the metadata, all of them,
    so an access rule can never ride along as inert data; two of them disagreeing is
    an error.

    >>> MetadataMapping(tenant=("tenant", "org_id")).tenant
    ('tenant', 'org_id')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: _Keys = Field(
        default=("document_id", "doc_id", "source"),
        description="The document a chunk was cut from; chunks of one document share it.",
    )
    title: _Keys = Field(default=("title",), description="The document title (str).")
    heading_path: _Keys = Field(
        default=("heading_path", "headers"),
        description='Section headings: a list of str, or one str such as "A > B".',
    )
    ordinal: _Keys = Field(
        default=("ordinal", "chunk_index", "start_index"),
        description="Position of the chunk in its document (int >= 0).",
    )
    score: _Keys = Field(default=("score", "relevance_score"), description="Retriever score.")
    rerank_score: _Keys = Field(default=("rerank_score",), description="Reranker score.")
    effective_date: _Keys = Field(
        default=("effective_date",), description="A date or an ISO date string."
    )
    updated_at: _Keys = Field(
        default=("updated_at", "last_modified"),
        description="A datetime, an ISO string or a Unix timestamp.",
    )
    tenant: _Keys = Field(default=("tenant",), description="The tenant allowed to see it (str).")
    groups: _Keys = Field(
        default=("groups",),
        description="Groups allowed to see it: a list of str, or one str for one group.",
    )
    tokens: _Keys = Field(
        default=("tokens",), description="Token count measured at ingest (same tokenizer)."
    )
    parse_warnings: _Keys = Field(
        default=("parse_warnings",), description="Ingest warnings: a list of str, or one str."
    )

    @model_validator(mode="after")
    def _each_key_once(self) -> MetadataMapping:
        owner: dict[str, str] = {}
        for field, keys in self._fields():
            for key in keys:
                if key in owner:
                    raise ValueError(
                        f"metadata key {key!r} is mapped to both {owner[key]!r} and {field!r}; "
                        "a key fills one field: remove it from one of them"
                    )
                owner[key] = field
        return self

    def _fields(self) -> Iterable[tuple[str, _Keys]]:
        return ((name, getattr(self, name)) for name in type(self).model_fields)


def _content_id(content: str) -> str:
    """A stable id for a document that has none: a hash of its text."""
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{digest[:16]}"


def _heading_path(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(">") if part.strip())
    return value


def _groups(value: object) -> object:
    if isinstance(value, str):
        return frozenset({value})  # one group, never its characters
    if isinstance(value, list | tuple | set | frozenset):
        return frozenset(value)
    return value


def _warnings(value: object) -> object:
    return (value,) if isinstance(value, str) else value


def _document_id(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


_SHAPE: Final = {
    "document_id": _document_id,
    "heading_path": _heading_path,
    "groups": _groups,
    "parse_warnings": _warnings,
}
"""Fields whose metadata value takes a shape of its own before `Chunk` validates it."""


def _where(index: int, used: Mapping[str, str], error: ValidationError) -> str:
    """The first validation problem, named by document index and metadata key."""
    detail = error.errors(include_url=False)[0]
    field = str(detail["loc"][0]) if detail["loc"] else ""
    message = detail["msg"].removeprefix("Value error, ")
    if field in used:
        return f"documents[{index}] metadata[{used[field]!r}] (Chunk.{field}): {message}"
    if field == "content":
        return f"documents[{index}] page_content: {message}"
    if field == "id":
        return f"documents[{index}] id: {message}"
    if not field:  # the chunk-level check: an ACL-looking key the mapping does not name
        return (
            f"documents[{index}]: {message}; or name the key in MetadataMapping(tenant=..., "
            "groups=...) so it is enforced"
        )
    return f"documents[{index}] metadata: {message}"


def _to_chunk(
    index: int, document: RawDocument, mapping: MetadataMapping, *, chunk_id: str
) -> Chunk:
    """One document as a `Chunk`; `InputError` naming ``documents[index]`` and the key."""
    _, content, metadata = document
    fields: dict[str, Any] = {}
    used: dict[str, str] = {}
    taken: set[str] = set()
    for field, keys in mapping._fields():
        present = [key for key in keys if metadata.get(key) is not None]
        if field in _ACL_FIELDS:
            taken.update(key for key in keys if key in metadata)
            values = [_groups(metadata[key]) for key in present]
            if any(value != values[0] for value in values[1:]):
                raise InputError(
                    f"documents[{index}] metadata keys {', '.join(map(repr, present))} all set "
                    f"{field} but disagree; keep one, since either could be the rule meant"
                )
        if present:
            used[field] = present[0]
            taken.add(present[0])
            shape = _SHAPE.get(field)
            value = metadata[present[0]]
            fields[field] = shape(value) if shape else value
    rest = {key: value for key, value in metadata.items() if key not in taken}
    try:
        return Chunk(id=chunk_id, content=content, metadata=rest, **fields)
    except ValidationError as error:
        raise InputError(_where(index, used, error)) from None


def to_chunks(
    documents: Sequence[RawDocument], mapping: MetadataMapping | None = None
) -> list[Chunk]:
    """Documents as chunks, in order. A document without an id gets a hash of its text;
    identical texts without ids get ``-2``, ``-3``... in order, so ids stay unique."""
    mapping = MetadataMapping() if mapping is None else mapping
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for index, document in enumerate(documents):
        given = document[0]
        if given is None:
            base = _content_id(document[1])
            seen[base] = seen.get(base, 0) + 1
            chunk_id = base if seen[base] == 1 else f"{base}-{seen[base]}"
        else:
            chunk_id = given
        chunks.append(_to_chunk(index, document, mapping, chunk_id=chunk_id))
    return chunks


def metadata_of(chunk: Chunk, mapping: MetadataMapping | None = None) -> dict[str, Any]:
    """A chunk's fields back as metadata, under each field's first key; unset fields left out.

    `to_chunks` reads this back to an equal chunk (given the same id), for every field the
    mapping names a key for; `source` and `embedding` are not mapped.
    """
    mapping = MetadataMapping() if mapping is None else mapping
    out: dict[str, Any] = dict(chunk.metadata)
    for field, keys in mapping._fields():
        value = getattr(chunk, field)
        if (
            not keys
            or value is None
            or value == ()
            or (field == "document_id" and value == chunk.id)
        ):
            continue
        if field == "heading_path" or field == "parse_warnings":
            value = list(value)
        elif field == "groups":
            value = sorted(value)
        out[keys[0]] = value
    return out
