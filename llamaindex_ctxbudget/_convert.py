"""LlamaIndex nodes -> `Chunk`: a pure mapping, one function, tested on its own.

A node brings its text, an id, the document it was cut from (the ``SOURCE``
relationship, i.e. ``ref_doc_id``, which also holds that document's metadata), a
metadata dict whose keys vary by reader and node parser, and a retrieval score beside
it in `NodeWithScore`. `NodeMetadataMapping` says which metadata keys fill which `Chunk`
field; `to_chunk` applies it and names the node and the key in every error. The ACL
comes from the core's one mapping (`ctxbudget.acl_from_metadata`), applied to the node
and to its source document alike; an ingest count is used only when
`ctxbudget.ingest_count` vouches for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, TypeVar

from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.storage.docstore.types import BaseDocumentStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ctxbudget import (
    ACCESS_KEY,
    INGEST_COUNT_KEYS,
    PARSE_WARNINGS_KEY,
    Acl,
    Chunk,
    InputError,
    acl_from_metadata,
    ingest_count,
)

__all__ = [
    "INGEST_KEYS",
    "MAX_METADATA_DEPTH",
    "ORDINAL_KEY",
    "WARNINGS_KEY",
    "NodeMetadataMapping",
    "source_metadata",
    "to_chunk",
]

ORDINAL_KEY: Final = "ctxbudget_ordinal"
"""Node metadata: the node's position within its source document."""
WARNINGS_KEY: Final = PARSE_WARNINGS_KEY
"""Node metadata: instruction-like text found at ingest, one warning per line (the core's
key, which `ctxbudget.ingest_batch` writes too)."""
INGEST_KEYS: Final = (*INGEST_COUNT_KEYS, ORDINAL_KEY, WARNINGS_KEY)
"""Every key `TokenCounter` writes: never passed on, never shown to the LLM or embedded."""

MAX_METADATA_DEPTH: Final = 64
"""How deeply node metadata may nest. The postprocessor copies it (`copy.deepcopy`, which
recurses) into the nodes it returns, and LlamaIndex prints it recursively when it hashes a
node; past a few hundred levels both fail with a bare RecursionError."""

_Keys = tuple[str, ...]
_ACL_FIX = "name it in NodeMetadataMapping(tenant=...) or (groups=...)"
"""How `acl_from_metadata` tells a user to map an access-rule key it cannot enforce."""


class NodeMetadataMapping(BaseModel):
    """Which node metadata keys fill which `Chunk` field; for each field the first key present
    (and not None) wins.

    Keys not named here pass through into `Chunk.metadata` (never rendered). The ACL is
    read as the core reads any framework's metadata (`ctxbudget.acl_from_metadata`): keys
    named for `tenant` and `groups` become the ACL fields and never ride along as data,
    two of them disagreeing is an error, and a key that looks like an access rule
    (``tenant_id``, ``allowed_groups``, ``acl``, ...) but is named for neither is an error
    whatever else is set: name it here so it is enforced.

    >>> NodeMetadataMapping(tenant=("tenant_id",)).tenant
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
        '"/Returns/EU/", split at `heading_separator`; from a str, the markdown heading the '
        "node's text opens with is added as its last heading (MarkdownNodeParser leaves the "
        "section's own heading out of header_path).",
    )
    heading_separator: str = Field(
        default="/",
        min_length=1,
        description="What separates the headings of a str heading path (MarkdownNodeParser's "
        "header_path_separator).",
    )
    tenant: _Keys = Field(
        default=("tenant",),
        description="The tenant allowed to see it: a str (or int id), or a list of one.",
    )
    groups: _Keys = Field(
        default=("groups",),
        description="Groups allowed to see it: a list of str (or int ids), or one str for one "
        "group.",
    )

    @model_validator(mode="after")
    def _each_key_once(self) -> NodeMetadataMapping:
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


def _heading_path(value: object, separator: str) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(separator) if part.strip())
    return tuple(value) if isinstance(value, list) else value


def _own_heading(content: str) -> str | None:
    """The markdown heading `content` opens with: MarkdownNodeParser's ``header_path`` holds
    the headings above a node's section, and the section's own opens its text."""
    line = content.partition("\n")[0]
    text = line.lstrip("#")
    if text == line or not text[:1].isspace():
        return None
    return text.strip() or None


def _where(node_id: str, used: Mapping[str, str], error: ValidationError) -> str:
    """The first validation problem, named by node id and metadata key."""
    detail = error.errors(include_url=False)[0]
    field = str(detail["loc"][0]) if detail["loc"] else ""
    message = detail["msg"].removeprefix("Value error, ")
    if field in used:
        return f"node {node_id!r} {used[field]} (Chunk.{field}): {message}"
    if field == "metadata" or not field:
        return f"node {node_id!r}: {message}"
    return f"node {node_id!r} (Chunk.{field}): {message}"


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether `value` nests containers more than `limit` levels deep (walked without
    recursion, so that the check itself cannot overflow the stack)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[object] = item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            children = item
        else:
            continue
        if depth == limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _check_depth(node: BaseNode) -> None:
    """`InputError` naming `node` when its metadata, or a related node's, nests too deeply."""
    places = [("metadata", node.metadata)] + [
        (f"{relation.name} relationship metadata", info.metadata)
        for relation, related in node.relationships.items()
        for info in (related if isinstance(related, list) else [related])
    ]
    for where, metadata in places:
        if _depth_exceeds(metadata, MAX_METADATA_DEPTH):
            raise InputError(
                f"node {node.node_id!r} {where} nests more than {MAX_METADATA_DEPTH} levels "
                "deep, which LlamaIndex cannot copy or print; flatten it (vector stores keep "
                "flat metadata only)"
            )


def source_metadata(
    node: BaseNode, docstore: BaseDocumentStore | None = None
) -> tuple[str | None, Mapping[str, Any]]:
    """The id and metadata of the document `node` was cut from.

    The ``SOURCE`` relationship carries the document's metadata, whatever the node parser
    copied onto the node (``include_metadata=False`` copies nothing). When it carries
    none (a vector store that keeps only the id), the document itself is looked up in
    `docstore`, if it holds it.
    """
    source = node.source_node
    if source is None:
        return None, {}
    if source.metadata or docstore is None:
        return source.node_id, source.metadata
    document = docstore.get_document(source.node_id, raise_error=False)
    return source.node_id, {} if document is None else document.metadata


def _acl(
    node_id: str, where: str, metadata: Mapping[str, Any], mapping: NodeMetadataMapping
) -> Acl:
    try:
        return acl_from_metadata(
            metadata, tenant=mapping.tenant, groups=mapping.groups, fix=_ACL_FIX
        )
    except InputError as error:
        raise InputError(f"node {node_id!r} {where}: {error}") from None


_T = TypeVar("_T")


def _shown(value: object) -> str:
    return repr(sorted(value)) if isinstance(value, frozenset) else repr(value)


def _agree(
    node_id: str, document: str | None, field: str, own: _T | None, inherited: _T | None
) -> _T | None:
    """The node's value of an ACL field, else its document's; an error when both differ."""
    if own is not None and inherited is not None and own != inherited:
        raise InputError(
            f"node {node_id!r} sets {field} {_shown(own)}, but its source document "
            f"{document!r} sets {_shown(inherited)}; a node is restricted like the document "
            "it was cut from, "
            "so one of them is wrong: make them agree"
        )
    return own if own is not None else inherited


def to_chunk(
    node: BaseNode,
    *,
    score: float | None = None,
    mapping: NodeMetadataMapping | None = None,
    tokenizer: str | None = None,
    docstore: BaseDocumentStore | None = None,
) -> Chunk:
    """`node` as a `Chunk`: its raw text (no metadata), id, source document, ACL and `score`.

    The ACL is the node's own and its source document's (`source_metadata`; `docstore`
    when the relationship does not carry it); they must agree where both set one.
    `tokenizer` is the name of the tokenizer the caller counts with: an ingest count is
    used only when ctxbudget's ingest wrote it for this very text and tokenizer
    (`ctxbudget.ingest_count`), else the text is counted. The ordinal is the ingest one
    (``ctxbudget_ordinal``), else the node's ``start_char_idx``. `InputError` names the
    node and the metadata key at fault.
    """
    mapping = NodeMetadataMapping() if mapping is None else mapping
    _check_depth(node)
    metadata = node.metadata
    document, document_metadata = source_metadata(node, docstore)
    own = _acl(node.node_id, "metadata", metadata, mapping)
    inherited = _acl(
        node.node_id, f"source document {document!r} metadata", document_metadata, mapping
    )
    content = node.get_content(metadata_mode=MetadataMode.NONE)
    fields: dict[str, Any] = {
        "tenant": _agree(node.node_id, document, "tenant", own.tenant, inherited.tenant),
        "groups": _agree(node.node_id, document, "groups", own.groups, inherited.groups),
    }
    used: dict[str, str] = {}
    if (title := _first(mapping.title, metadata, document_metadata)) is not None:
        used["title"], fields["title"] = f"metadata[{title[0]!r}]", title[1]
    if (path := _first(mapping.heading_path, metadata)) is not None:
        used["heading_path"] = f"metadata[{path[0]!r}]"
        fields["heading_path"] = _heading_path(path[1], mapping.heading_separator)
        if isinstance(path[1], str) and (heading := _own_heading(content)) is not None:
            fields["heading_path"] = (*fields["heading_path"], heading)
    if node.ref_doc_id is not None:
        used["document_id"], fields["document_id"] = "ref_doc_id", node.ref_doc_id
    if metadata.get(ORDINAL_KEY) is not None:
        used["ordinal"], fields["ordinal"] = f"metadata[{ORDINAL_KEY!r}]", metadata[ORDINAL_KEY]
    else:
        used["ordinal"], fields["ordinal"] = "start_char_idx", getattr(node, "start_char_idx", None)
    if tokenizer is not None:
        fields["tokens"] = ingest_count(metadata, content, tokenizer)
    if isinstance(warnings := metadata.get(WARNINGS_KEY), str) and warnings:
        fields["parse_warnings"] = tuple(warnings.split("\n"))
    taken = own.keys.union(INGEST_KEYS, (ACCESS_KEY,))  # AccessMarker's tokens: not data
    rest = {key: value for key, value in metadata.items() if key not in taken}
    try:
        return Chunk(
            id=node.node_id,
            content=content,
            score=score,
            embedding=None if node.embedding is None else tuple(node.embedding),
            metadata=rest,
            **fields,
        )
    except ValidationError as error:
        raise InputError(_where(node.node_id, used, error)) from None
