"""Document metadata ⇄ `Chunk` fields: a pure mapping, no framework import.

A LangChain `Document` is three things: an optional id, its text and a metadata
dict whose keys vary by loader and vector store. `DocumentMetadataMapping` says which keys
fill which `Chunk` field; `to_chunks` applies it to many documents at once, naming
the document index and the metadata key in every error, and `metadata_of` goes
back from a `Chunk` to metadata (for a whole document the core loaded itself).
The access rule is read by the core's `acl_from_metadata` and a stored token count
by its `ingest_count`: the adapter decides neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxbudget import Chunk, InputError, acl_from_metadata, ingest_count

__all__ = ["DocumentMetadataMapping", "RawDocument", "metadata_of", "to_chunks"]

RawDocument = tuple[str | None, str, Mapping[str, Any]]
"""A document as plain data: (id or None, text, metadata)."""

_Keys = tuple[str, ...]
_ACL_FIX = "name it in DocumentMetadataMapping(tenant=...) or (groups=...)"
"""How `acl_from_metadata` tells a user to map an access-rule key it cannot enforce."""

_ACL_FIELDS: Final = ("tenant", "groups")
_NOT_FIELDS: Final = ("heading_levels",)
"""Mapping entries that fill a `Chunk` field by a rule of their own, not key by key."""


class DocumentMetadataMapping(BaseModel):
    """Which `Document.metadata` keys fill which `Chunk` field; for each field the first
    key present (and not None) wins.

    Keys not named here pass through into `Chunk.metadata` (never rendered). The
    access rule is read by `ctxbudget.acl_from_metadata`: every key named for `tenant`
    and `groups` is taken out of the metadata, two of them disagreeing is an error, and
    so is any other key that looks like an access rule (``tenant_id``,
    ``allowed_groups``, ...), whatever else is set: name it here to enforce it.

    >>> DocumentMetadataMapping(tenant=("tenant", "org_id")).tenant
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
    heading_levels: _Keys = Field(
        default=tuple(f"Header {level}" for level in range(1, 7)),
        description="Keys of one heading each, outermost first (MarkdownHeaderTextSplitter's "
        '"Header 1", "Header 2", ...): the heading path, when no `heading_path` key is set.',
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
    parse_warnings: _Keys = Field(
        default=("parse_warnings",), description="Ingest warnings: a list of str, or one str."
    )

    @model_validator(mode="after")
    def _each_key_once(self) -> DocumentMetadataMapping:
        owner: dict[str, str] = {}
        for field, keys in self._fields():
            for key in keys:
                if owner.get(key) == field:
                    raise ValueError(f"metadata key {key!r} is named twice for {field!r}")
                if key in owner:
                    raise ValueError(
                        f"metadata key {key!r} is mapped to both {owner[key]!r} and {field!r}; "
                        "a key fills one field: remove it from one of them"
                    )
                owner[key] = field
        return self

    def _fields(self) -> Iterable[tuple[str, _Keys]]:
        return ((name, getattr(self, name)) for name in type(self).model_fields)


def _heading_path(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(">") if part.strip())
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
    return f"documents[{index}] {field}: {message}"


def _to_chunk(
    index: int, document: RawDocument, mapping: DocumentMetadataMapping, *, tokenizer: str | None
) -> Chunk:
    """One document as a `Chunk`; `InputError` naming ``documents[index]`` and the key."""
    given, content, metadata = document
    try:
        acl = acl_from_metadata(
            metadata, tenant=mapping.tenant, groups=mapping.groups, fix=_ACL_FIX
        )
    except InputError as error:
        raise InputError(f"documents[{index}] {error}") from None
    fields: dict[str, Any] = {"tenant": acl.tenant, "groups": acl.groups}
    used: dict[str, str] = {}
    taken: set[str] = set(acl.keys)
    for field, keys in mapping._fields():
        if field in _ACL_FIELDS or field in _NOT_FIELDS:
            continue
        present = next((key for key in keys if metadata.get(key) is not None), None)
        if present is not None:
            used[field] = present
            taken.add(present)
            shape = _SHAPE.get(field)
            value = metadata[present]
            fields[field] = shape(value) if shape else value
    if "heading_path" not in used:
        levels = [key for key in mapping.heading_levels if metadata.get(key) is not None]
        if levels:
            used["heading_path"] = levels[0]
            taken.update(levels)
            fields["heading_path"] = tuple(metadata[key] for key in levels)
    if tokenizer is not None:
        fields["tokens"] = ingest_count(metadata, content, tokenizer)
    rest = {key: value for key, value in metadata.items() if key not in taken}
    # Made for a document without one: its position, never its text (ids travel in reports,
    # events and logs, where a digest of a forbidden text would let it be guessed).
    chunk_id = f"documents[{index}]" if given is None else given
    try:
        return Chunk(id=chunk_id, content=content, metadata=rest, **fields)
    except ValidationError as error:
        raise InputError(_where(index, used, error)) from None


def to_chunks(
    documents: Sequence[RawDocument],
    mapping: DocumentMetadataMapping | None = None,
    *,
    tokenizer: str | None = None,
) -> list[Chunk]:
    """Documents as chunks, in order. A document without an id gets ``documents[i]``, its
    position in this call.

    Args:
        tokenizer: the name of the tokenizer requests are counted with; a count stored by
            ctxbudget's ingest for exactly this text and tokenizer (`ctxbudget.ingest_count`)
            becomes `Chunk.tokens`, any other count in metadata is ignored.
    """
    mapping = DocumentMetadataMapping() if mapping is None else mapping
    return [
        _to_chunk(index, document, mapping, tokenizer=tokenizer)
        for index, document in enumerate(documents)
    ]


def metadata_of(chunk: Chunk, mapping: DocumentMetadataMapping | None = None) -> dict[str, Any]:
    """A chunk's fields back as metadata, under each field's first key; unset fields left out.

    `to_chunks` reads this back to an equal chunk (given the same id), for every field the
    mapping names a key for; `source` and `embedding` are not mapped.
    """
    mapping = DocumentMetadataMapping() if mapping is None else mapping
    out: dict[str, Any] = dict(chunk.metadata)
    for field, keys in mapping._fields():
        if field in _NOT_FIELDS:
            continue
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
