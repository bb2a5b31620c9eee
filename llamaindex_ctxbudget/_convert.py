"""LlamaIndex nodes -> `Chunk`: a pure mapping, one function, tested on its own.

A node brings its text, an id, the document it was cut from (the ``SOURCE``
relationship, i.e. ``ref_doc_id``), a metadata dict whose keys vary by reader and
node parser, and a retrieval score beside it in `NodeWithScore`. `MetadataMapping`
says which metadata keys fill which `Chunk` field; `to_chunk` applies it and names
the node and the key in every error. `TokenCounter` (ingestion) writes the
``ctxbudget_*`` keys read here, so queries never count a node again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from llama_index.core.schema import BaseNode, MetadataMode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxbudget import Chunk, InputError

__all__ = [
    "INGEST_KEYS",
    "ORDINAL_KEY",
    "TOKENIZER_KEY",
    "TOKENS_KEY",
    "WARNINGS_KEY",
    "MetadataMapping",
    "to_chunk",
]

TOKENS_KEY: Final = "ctxbudget_tokens"
"""Node metadata: the token count of the node's text, measured at ingest."""
TOKENIZER_KEY: Final = "ctxbudget_tokenizer"
"""Node metadata: the name of the tokenizer that measured it; a count is used only by an
assembler with the same tokenizer."""
ORDINAL_KEY: Final = "ctxbudget_ordinal"
"""Node metadata: the node's position within its source document."""
WARNINGS_KEY: Final = "ctxbudget_parse_warnings"
"""Node metadata: instruction-like text found at ingest, one warning per line. One string,
not a list, because many vector stores accept only flat scalar metadata."""
INGEST_KEYS: Final = (TOKENS_KEY, TOKENIZER_KEY, ORDINAL_KEY, WARNINGS_KEY)

_Keys = tuple[str, ...]


class MetadataMapping(BaseModel):
    """Which node metadata keys fill which `Chunk` field; for each field the first key present
    (and not None) wins.

    Keys not named here pass through into `Chunk.metadata` (never rendered). Keys named
    for `tenant` and `groups` are always taken out of the metadata, all of them, so an
    access rule never rides along as inert data; two of them disagreeing is an error.
    An unnamed key that looks like an access rule (``tenant_id``, ``allowed_groups``)
    on a node with neither is an error too: name it here so it is enforced.

    >>> MetadataMapping(tenant=("tenant_id",)).tenant
    ('tenant_id',)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: _Keys = Field(
        default=("title", "file_name"),
        description="The document title; looked up in the node's metadata, then in its source "
        "document's.",
    )
    heading_path: _Keys = Field(
        default=("header_path",),
        description="Section headings: a list of str, or one str such as MarkdownNodeParser's "
        '"/Returns/EU/", split at `heading_separator`.',
    )
    heading_separator: str = Field(
        default="/",
        min_length=1,
        description="What separates the headings of a str heading path (MarkdownNodeParser's "
        "header_path_separator).",
    )
    tenant: _Keys = Field(default=("tenant",), description="The tenant allowed to see it (str).")
    groups: _Keys = Field(
        default=("groups",),
        description="Groups allowed to see it: a list of str, or one str for one group.",
    )

    @model_validator(mode="after")
    def _each_key_once(self) -> MetadataMapping:
        owner: dict[str, str] = {}
        for field in ("title", "heading_path", "tenant", "groups"):
            for key in getattr(self, field):
                if key in owner:
                    raise ValueError(
                        f"metadata key {key!r} is mapped to both {owner[key]!r} and {field!r}; "
                        "a key fills one field: remove it from one of them"
                    )
                owner[key] = field
        return self


def _first(keys: Iterable[str], *metadatas: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first (key, value) among `keys` set in the first metadata that has one."""
    for metadata in metadatas:
        for key in keys:
            if metadata.get(key) is not None:
                return key, metadata[key]
    return None


def _groups(value: object) -> object:
    if isinstance(value, str):
        return frozenset({value})  # one group, never its characters
    if isinstance(value, list | tuple | set | frozenset):
        return frozenset(value)
    return value


def _acl(
    node_id: str, field: str, keys: _Keys, metadata: Mapping[str, Any]
) -> tuple[str, Any] | None:
    """The ACL value under `keys`, or None; an error when two of the keys disagree."""
    present = [key for key in keys if metadata.get(key) is not None]
    values = [_groups(metadata[key]) if field == "groups" else metadata[key] for key in present]
    if any(value != values[0] for value in values[1:]):
        raise InputError(
            f"node {node_id!r} metadata keys {', '.join(map(repr, present))} all set {field} "
            "but disagree; keep one, since either could be the rule meant"
        )
    return (present[0], values[0]) if present else None


def _heading_path(value: object, separator: str) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(separator) if part.strip())
    return tuple(value) if isinstance(value, list) else value


def _where(node_id: str, used: Mapping[str, str], error: ValidationError) -> str:
    """The first validation problem, named by node id and metadata key."""
    detail = error.errors(include_url=False)[0]
    field = str(detail["loc"][0]) if detail["loc"] else ""
    message = detail["msg"].removeprefix("Value error, ")
    if field in used:
        return f"node {node_id!r} {used[field]} (Chunk.{field}): {message}"
    if field == "metadata" or not field:
        return (
            f"node {node_id!r}: {message}; or name the key in MetadataMapping(tenant=..., "
            "groups=...) so it is enforced"
        )
    return f"node {node_id!r} (Chunk.{field}): {message}"


def to_chunk(
    node: BaseNode,
    *,
    score: float | None = None,
    mapping: MetadataMapping | None = None,
    tokenizer: str | None = None,
) -> Chunk:
    """`node` as a `Chunk`: its raw text (no metadata), id, source document and `score`.

    `tokenizer` is the name of the tokenizer the caller counts with: the ingest count
    (``ctxbudget_tokens``) is used only when ``ctxbudget_tokenizer`` names the same one.
    The ordinal is the ingest one (``ctxbudget_ordinal``), else the node's
    ``start_char_idx``. `InputError` names the node and the metadata key at fault.
    """
    mapping = MetadataMapping() if mapping is None else mapping
    metadata = node.metadata
    source = node.source_node
    document_metadata = source.metadata if source is not None else {}
    fields: dict[str, Any] = {}
    used: dict[str, str] = {}
    taken: set[str] = set(INGEST_KEYS)
    for field, keys in (("tenant", mapping.tenant), ("groups", mapping.groups)):
        taken.update(key for key in keys if key in metadata)
        found = _acl(node.node_id, field, keys, metadata)
        if found is not None:
            used[field], fields[field] = f"metadata[{found[0]!r}]", found[1]
    if (title := _first(mapping.title, metadata, document_metadata)) is not None:
        used["title"], fields["title"] = f"metadata[{title[0]!r}]", title[1]
    if (path := _first(mapping.heading_path, metadata)) is not None:
        used["heading_path"] = f"metadata[{path[0]!r}]"
        fields["heading_path"] = _heading_path(path[1], mapping.heading_separator)
    if node.ref_doc_id is not None:
        used["document_id"], fields["document_id"] = "ref_doc_id", node.ref_doc_id
    if metadata.get(ORDINAL_KEY) is not None:
        used["ordinal"], fields["ordinal"] = f"metadata[{ORDINAL_KEY!r}]", metadata[ORDINAL_KEY]
    else:
        used["ordinal"], fields["ordinal"] = "start_char_idx", getattr(node, "start_char_idx", None)
    if tokenizer is not None and metadata.get(TOKENIZER_KEY) == tokenizer:
        used["tokens"], fields["tokens"] = f"metadata[{TOKENS_KEY!r}]", metadata.get(TOKENS_KEY)
    if isinstance(warnings := metadata.get(WARNINGS_KEY), str) and warnings:
        fields["parse_warnings"] = tuple(warnings.split("\n"))
    rest = {key: value for key, value in metadata.items() if key not in taken}
    try:
        return Chunk(
            id=node.node_id,
            content=node.get_content(metadata_mode=MetadataMode.NONE),
            score=score,
            embedding=None if node.embedding is None else tuple(node.embedding),
            metadata=rest,
            **fields,
        )
    except ValidationError as error:
        raise InputError(_where(node.node_id, used, error)) from None
