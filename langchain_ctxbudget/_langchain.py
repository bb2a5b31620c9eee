"""LangChain objects ⇄ ctxbudget inputs and results: documents, messages, tools, reports.

Every component of the adapter converts through here, so each rule is written once:
how a `Document` becomes a `Chunk` and a selected source a new `Document`, how a
message list becomes whole-turn units (an AI message and the tool results answering
its calls are one unit), how kept units come back as the original messages with the
core's gap markers, and what the report event carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ValidationError

from ctxbudget import (
    Assembled,
    Chunk,
    ContextAssembler,
    InputError,
    Principal,
    Role,
    Selection,
    Source,
    Tool,
    Turn,
)
from langchain_ctxbudget._convert import MetadataMapping, metadata_of, to_chunks

__all__ = [
    "REPORT_EVENT",
    "Unit",
    "assembled_report",
    "budgeted_documents",
    "chunks_of",
    "cited_documents",
    "documents_of",
    "in_run",
    "kept_units",
    "principal_for",
    "principal_of",
    "restore",
    "selection_report",
    "tool_of",
    "units_of",
]

REPORT_EVENT: Final = "ctxbudget_report"
"""Name of the custom callback event that carries an assembly's report."""


def _problem(error: ValidationError) -> str:
    """The first problem pydantic found, as "field: what is wrong"."""
    detail = error.errors(include_url=False)[0]
    message = detail["msg"].removeprefix("Value error, ")
    field = ".".join(map(str, detail["loc"]))
    return f"{field}: {message}" if field else message


# --- documents -----------------------------------------------------------------------------


def documents_of(value: object) -> list[Document]:
    """`value` as a list of `Document`; `InputError` naming the first item that is not one."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InputError(
            f"documents must be a list of langchain_core Document, but got {type(value).__name__}"
        )
    for index, document in enumerate(value):
        if not isinstance(document, Document):
            raise InputError(
                f"documents[{index}] is a {type(document).__name__}, expected a langchain_core "
                "Document (what a retriever returns)"
            )
    return list(value)


def chunks_of(documents: Sequence[Document], mapping: MetadataMapping) -> list[Chunk]:
    """Documents as chunks, through `mapping` (see `to_chunks`)."""
    return to_chunks([(d.id, d.page_content, d.metadata) for d in documents], mapping)


def budgeted_documents(
    assembler: ContextAssembler,
    documents: object,
    *,
    principal: Principal | None,
    max_tokens: int | None,
    mapping: MetadataMapping,
) -> tuple[list[Document], Selection]:
    """`documents` selected by the core's retrieved pipeline, as new cited Documents."""
    given = documents_of(documents)
    chunks = chunks_of(given, mapping)
    selection = assembler.select_sources(chunks, max_tokens=max_tokens, principal=principal)
    return cited_documents(selection, given, chunks, mapping), selection


def cited_documents(
    selection: Selection,
    documents: Sequence[Document],
    chunks: Sequence[Chunk],
    mapping: MetadataMapping,
) -> list[Document]:
    """The selected sources as new Documents in prompt order: the rendered source as
    ``page_content`` and ``metadata["citation"] = n``. Inputs are copied, never changed.

    An escalated whole document (not among the inputs) gets the metadata of the chunk
    the loader returned and ``metadata["covers"]``, the ids of the chunks it replaces.
    """
    originals = {chunk.id: document for chunk, document in zip(chunks, documents, strict=True)}
    out: list[Document] = []
    for source in selection.sources:
        original = originals.get(source.chunk.id)
        if source.document or original is None:
            metadata = metadata_of(source.chunk, mapping)
            metadata["covers"] = list(source.covers)
            document_id: str | None = source.chunk.id
        else:
            metadata = dict(original.metadata)
            document_id = original.id
        metadata["citation"] = source.n
        out.append(Document(page_content=source.text, metadata=metadata, id=document_id))
    return out


# --- messages ------------------------------------------------------------------------------

_ROLES: Final[dict[str, Role]] = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
"""Message type (or a ChatMessage's role) → the Turn role it is counted as."""


@dataclass(frozen=True)
class Unit:
    """Messages kept or dropped together, as the one `Turn` the core weighs."""

    start: int
    """Index of the unit's first message in the caller's list; where it goes back."""
    messages: tuple[BaseMessage, ...]
    turn: Turn


def _role(name: str, index: int, message: BaseMessage) -> Role:
    kind = str(getattr(message, "role", message.type)) if message.type == "chat" else message.type
    role = _ROLES.get(kind)
    if role is None:
        raise InputError(
            f"{name}[{index}] is a {type(message).__name__} of role {kind!r}, which no chat "
            f"API knows; use one of: {', '.join(sorted(_ROLES))}"
        )
    return role


def _text(message: BaseMessage) -> str:
    """What a message costs as text: its text, then its tool calls as name(arguments)."""
    parts = [str(message.text)]
    if isinstance(message, AIMessage):
        parts.extend(
            f"{call['name']}({json.dumps(call['args'], ensure_ascii=False, sort_keys=True)})"
            for call in message.tool_calls
        )
    return "\n".join(part for part in parts if part)


def _groups(name: str, messages: Sequence[BaseMessage]) -> list[list[int]]:
    """Message indices in units: an AI message with tool calls and the tool results that
    follow it and answer those calls form one unit; every other message is its own."""
    groups: list[list[int]] = []
    calls: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise InputError(
                f"{name}[{index}] is a {type(message).__name__}, expected a langchain_core "
                "BaseMessage (HumanMessage, AIMessage, ToolMessage, ...)"
            )
        if isinstance(message, ToolMessage) and message.tool_call_id in calls:
            groups[-1].append(index)
            continue
        groups.append([index])
        calls = (
            {c["id"] for c in message.tool_calls if c["id"]}
            if isinstance(message, AIMessage)
            else set()
        )
    return groups


def units_of(
    name: str, messages: object, *, skip: Callable[[BaseMessage], bool] | None = None
) -> list[Unit]:
    """`messages` as units in order, leaving out units whose first message `skip` matches.

    Units before the first human message join it, so the turn the core always keeps
    (its first) is the user's first message, with any greeting before it.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InputError(
            f"{name} must be a list of langchain_core messages, but got {type(messages).__name__}"
        )
    groups = [g for g in _groups(name, messages) if skip is None or not skip(messages[g[0]])]
    roles = {i: _role(name, i, messages[i]) for g in groups for i in g}
    first_human = next((k for k, g in enumerate(groups) if roles[g[0]] == "user"), 0)
    if first_human:
        groups[: first_human + 1] = [[i for g in groups[: first_human + 1] for i in g]]
    units: list[Unit] = []
    for group in groups:
        start = group[0]
        content = "\n".join(_text(messages[i]) for i in group)
        try:
            turn = Turn(role=roles[start], content=content, id=f"{name}[{start}]")
        except ValidationError as error:
            raise InputError(f"{name}[{start}] {_problem(error)}") from None
        units.append(Unit(start, tuple(messages[i] for i in group), turn))
    return units


def kept_units(units: Sequence[Unit], assembled: Assembled) -> set[int]:
    """Positions of the units the assembly kept: those its report does not list as dropped."""
    dropped = {d.id for d in assembled.report.dropped if d.claimant == "history"}
    return {k for k, unit in enumerate(units) if unit.turn.id not in dropped}


def restore(
    units: Sequence[Unit], kept: Collection[int], shown: Sequence[tuple[Role, str]]
) -> list[tuple[int, list[BaseMessage]]]:
    """Kept units as their original messages, and a `HumanMessage` with the core's gap
    marker where each run of dropped units starts, each at its position in the input.

    `shown` is the core's history as (role, text): one entry per kept unit and per gap,
    in order; the markers are taken from it, so their wording stays the core's.
    """
    if not kept:
        return []
    slots: list[tuple[int, list[BaseMessage] | None]] = []
    previous_kept = True
    for k, unit in enumerate(units):
        if k in kept:
            slots.append((unit.start, list(unit.messages)))
        elif previous_kept:
            slots.append((unit.start, None))
        previous_kept = k in kept
    return [
        (start, [HumanMessage(content=text)] if messages is None else messages)
        for (start, messages), (_, text) in zip(slots, shown, strict=True)
    ]


# --- tools ---------------------------------------------------------------------------------


def tool_of(index: int, tool: BaseTool | Mapping[str, Any]) -> Tool | None:
    """A LangChain tool (or tool dict) as the `Tool` the core budgets; None for a provider's
    built-in tool (web search, ...), which has no schema to weigh and is kept as it is."""
    try:
        schema = convert_to_openai_tool(tool)
    except (TypeError, ValueError) as error:
        raise InputError(f"tools[{index}] is not a tool LangChain can describe: {error}") from None
    function = schema.get("function")
    if not isinstance(function, dict):
        return None
    try:
        return Tool(
            name=function["name"],
            description=function.get("description") or "",
            parameters=function.get("parameters") or {},
        )
    except ValidationError as error:
        raise InputError(f"tools[{index}] {_problem(error)}") from None


# --- who is asking, and what happened ------------------------------------------------------


def principal_of(value: object, where: str) -> Principal | None:
    """A `Principal`, built from a mapping of its fields when need be."""
    if value is None or isinstance(value, Principal):
        return value
    if isinstance(value, Mapping):
        try:
            return Principal.model_validate(dict(value))
        except ValidationError as error:
            raise InputError(f"{where}: {_problem(error)}") from None
    raise InputError(
        f"{where} must be a ctxbudget.Principal or a mapping of its fields "
        f"(tenant=..., groups=[...]), but got {type(value).__name__}"
    )


def principal_for(default: Principal | None, config: RunnableConfig) -> Principal | None:
    """Who is asking in this call: ``config["configurable"]["principal"]``, else `default`."""
    configurable = config.get("configurable") or {}
    if "principal" not in configurable:
        return default
    return principal_of(configurable["principal"], "config['configurable']['principal']")


def in_run(config: RunnableConfig) -> bool:
    """Whether `config` belongs to a run, which a custom event must be attached to."""
    callbacks = config.get("callbacks")
    return isinstance(callbacks, BaseCallbackManager) and callbacks.parent_run_id is not None


def _sources(sources: Sequence[Source]) -> list[dict[str, Any]]:
    return [{"n": s.n, "id": s.chunk.id, "document_id": s.chunk.document_id} for s in sources]


def selection_report(selection: Selection) -> dict[str, Any]:
    """The custom-event payload for retrieved sources alone: sizes, drops, [n] → ids."""
    data = selection.model_dump(
        mode="json", include={"budget", "tokens", "trimmed", "escalated", "dropped"}
    )
    data["sources"] = _sources(selection.sources)
    return data


def assembled_report(assembled: Assembled) -> dict[str, Any]:
    """The custom-event payload for a whole prompt: the core's report and [n] → ids."""
    data = assembled.report.model_dump(mode="json")
    data["sources"] = _sources(assembled.sources)
    return data
