"""The things a prompt is built from: chunks, conversation turns, tools, and who is asking.

All are immutable pydantic models, so a request's inputs cannot change under the
assembler and every field is validated with a message naming it. Their shared base
(`_input_model.py`) makes field names strict; the ACL rules they apply live in
`_acl.py`, the JSON a tool's schema must be in `_json_data.py`. Also here: the check
that an entry point's argument is a sequence of one of these models, and of a
claimant's token range.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, PlainValidator, model_validator

from ctxbudget._acl import check_chunk_metadata
from ctxbudget._input_model import InputModel
from ctxbudget._json_data import JsonObject, json_object
from ctxbudget._text import Text, check_text_fast

__all__ = [
    "Chunk",
    "Principal",
    "Role",
    "Tool",
    "Turn",
]


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"must be a finite number, but got {value!r}")
    return value


def _non_empty(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


_Id = Annotated[str, AfterValidator(check_text_fast), AfterValidator(_non_empty)]
_Score = Annotated[float | None, AfterValidator(_finite)]


def _id_of(data: dict[str, Any]) -> str:
    """The default `document_id`: the chunk's own id.

    `id` is missing from `data` when it failed validation: pydantic before 2.14 still calls
    this factory then, and the chunk's ValidationError names `id` whatever is returned here.
    """
    return str(data.get("id", ""))


_NONE_MEANS_DEFAULT = ("document_id", "heading_path", "parse_warnings", "metadata")
"""Chunk fields where an explicit None means "use the default" (loaders fill gaps with None)."""


class Chunk(InputModel):
    """One retrieved passage, with what is known about where it came from.

    Unknown keyword arguments are errors; extra data goes in `metadata`, which is
    passed through and never rendered into the prompt. ACLs are read only from
    `tenant` and `groups`: ACL-looking `metadata` keys (``tenant_id``,
    ``allowed_groups``, ``acl``, ...; docs/inputs.md, "Inputs") are an error whatever else is
    set, because they would not be enforced. Only top-level `metadata` keys are
    checked, not nested ones.
    """

    id: _Id = Field(description="Unique within a request; reports and `sources` name chunks by it.")
    content: Text = Field(description="The passage text, rendered inside the fenced sources.")
    document_id: _Id = Field(
        default_factory=_id_of,
        description=(
            "The document this chunk was cut from. Defaults to `id` when left out or None, "
            "i.e. the chunk is taken to be a whole document; set it when several chunks "
            "come from one document."
        ),
    )
    title: Text | None = Field(
        default=None, description="The document's title, shown in the source header."
    )
    heading_path: tuple[Text, ...] = Field(
        default=(),
        description=(
            "Section headings from the document root down to this chunk, "
            'e.g. ("Returns", "EU"); shown in the source header.'
        ),
    )
    ordinal: int | None = Field(
        default=None,
        ge=0,
        description="Position of the chunk within its document; orders chunks of one document.",
    )
    score: _Score = Field(
        default=None, description="Retriever similarity; higher is better. Never rendered."
    )
    rerank_score: _Score = Field(
        default=None,
        description="Reranker score; when present it outranks `score`. Never rendered.",
    )
    effective_date: date | None = Field(
        default=None,
        description="When the content takes effect (a policy version); used by conflict policies.",
    )
    updated_at: datetime | None = Field(
        default=None, description="Last modification time; a stale source gets a freshness note."
    )
    source: Text | None = Field(
        default=None,
        description='The system it came from (e.g. "confluence"); for filtering, never rendered.',
    )
    parse_warnings: tuple[Text, ...] = Field(
        default=(),
        description=(
            "Problems found at ingest (OCR confidence, instruction-like text); "
            "rendered as a signal."
        ),
    )
    tenant: Text | None = Field(
        default=None,
        description="The tenant allowed to see the chunk; None means it carries no tenant ACL.",
    )
    groups: frozenset[Text] | None = Field(
        default=None,
        description=(
            "Groups allowed to see the chunk (membership of any one suffices; empty means "
            "nobody); None means the chunk carries no group ACL."
        ),
    )
    tokens: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Token count of `content` measured at ingest with the same tokenizer; trusted as given."
        ),
    )
    embedding: tuple[float, ...] | None = Field(
        default=None,
        description="The chunk's vector; lets deduplication compare meaning. Never rendered.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Anything else, passed through and never rendered. A key that looks like an "
            "access rule (tenant_id, allowed_groups, acl, ...) is refused: it would not be "
            "enforced; use `tenant` and `groups`."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _none_means_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(data.get(f, 0) is None for f in _NONE_MEANS_DEFAULT):
            return {k: v for k, v in data.items() if v is not None or k not in _NONE_MEANS_DEFAULT}
        return data

    @model_validator(mode="after")
    def _no_acl_in_metadata(self) -> Self:
        check_chunk_metadata(self.metadata)
        return self

    def __repr__(self) -> str:
        return f"Chunk(id={self.id!r}, document_id={self.document_id!r}, {len(self.content)} chars)"

    # pydantic's __str__ prints every field; content may be confidential and must not
    # reach a log line through "%s".
    __str__ = __repr__


Role = Literal["system", "user", "assistant", "tool"]


class Turn(InputModel):
    """One message of the conversation so far.

    An adapter passes one turn per framework message, so a gap marker's count is a count
    of messages; `group` keeps a tool call and its results together.
    """

    role: Role = Field(description="Who said it: system, user, assistant or tool.")
    content: Text = Field(description="What was said.")
    id: _Id | None = Field(
        default=None,
        description="Names the turn in reports; defaults to its position, e.g. history[3].",
    )
    group: _Id | None = Field(
        default=None,
        description=(
            "Consecutive turns with the same group are one unit, kept or dropped together: "
            "an assistant turn that calls tools and the tool turns answering it. None: the "
            "turn is a unit of its own."
        ),
    )
    name: _Id | None = Field(
        default=None,
        description=(
            "For a tool turn, the name of the tool whose result it is; shown when the result "
            "is cleared. Only tool turns take one."
        ),
    )

    @model_validator(mode="after")
    def _name_only_on_tool_turns(self) -> Self:
        if self.name is not None and self.role != "tool":
            raise ValueError(
                f"name is the tool's name of a tool turn, but this turn's role is "
                f"{self.role!r}; leave name out, or set role='tool'"
            )
        return self


class Tool(InputModel):
    """A tool the model may call, as it is described to the model."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
        description="Unique within a request; 1-64 letters, digits, _ . - (what providers accept).",
    )
    description: Text = Field(default="", description="What the tool does, as the model reads it.")
    parameters: Annotated[
        dict[str, Any], PlainValidator(json_object, json_schema_input_type=dict[str, Any])
    ] = Field(
        default_factory=JsonObject,
        description=(
            "JSON schema of the arguments. Checked to be JSON data (str keys, finite numbers, "
            "valid Unicode, at most 64 levels deep) and stored read-only."
        ),
    )
    score: _Score = Field(
        default=None,
        description=(
            "Relevance to this request; higher is kept first. Without scores, earlier "
            "is more relevant."
        ),
    )


class Principal(InputModel):
    """Who the prompt is built for; permission filters compare it with each chunk's ACL."""

    tenant: Text | None = Field(
        default=None,
        description="The principal's tenant; it sees chunks of this tenant and chunks without one.",
    )
    groups: frozenset[Text] = Field(
        default=frozenset(),
        description="The principal's groups; it sees a group-restricted chunk listing any of them.",
    )
