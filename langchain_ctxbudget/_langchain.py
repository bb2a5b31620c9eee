"""LangChain objects ⇄ ctxbudget inputs and results: documents, messages, tools, reports.

Every component of the adapter converts through here, so each conversion is written
once: how a `Document` becomes a `Chunk` and a selected source a new `Document`, how a
message list becomes whole-turn units (an AI message and the tool results answering
its calls are one unit) of rebuilt messages that carry only what was counted, how kept
units come back with the core's gap markers, who a call is answered for, and what the
report event carries. The rules themselves are the core's.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ValidationError

from ctxbudget import (
    NO_SCOPE,
    Assembled,
    Chunk,
    ContextAssembler,
    InputError,
    NoScope,
    Principal,
    Role,
    Selection,
    Source,
    TokenCounter,
    Tool,
    Turn,
    neutralise_section,
    principal_for_call,
)
from langchain_ctxbudget._content import Parts, message_parts
from langchain_ctxbudget._convert import MetadataMapping, metadata_of, to_chunks

__all__ = [
    "REPORT_EVENT",
    "Unit",
    "assembled_report",
    "budgeted_documents",
    "call_principal",
    "chunks_of",
    "cited_documents",
    "config_principal",
    "documents_of",
    "in_run",
    "kept_units",
    "parts_of",
    "principal_of",
    "restore",
    "selection_report",
    "sent_message",
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


def chunks_of(
    documents: Sequence[Document], mapping: MetadataMapping, assembler: ContextAssembler
) -> list[Chunk]:
    """Documents as chunks, through `mapping`, trusting only ingest counts made for the
    assembler's tokenizer (see `to_chunks`)."""
    return to_chunks(
        [(d.id, d.page_content, d.metadata) for d in documents],
        mapping,
        tokenizer=assembler.counter.tokenizer.name,
    )


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
    chunks = chunks_of(given, mapping, assembler)
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
    given: tuple[BaseMessage, ...]
    """The caller's messages, never changed."""
    parts: tuple[Parts, ...]
    """What each of them sends (`_content`), which the turn's text counts."""
    turn: Turn

    def sent(self) -> list[BaseMessage]:
        """The unit's messages as they are sent (`sent_message`); built only for kept units."""
        return [sent_message(m, p) for m, p in zip(self.given, self.parts, strict=True)]


def _role(name: str, index: int, message: BaseMessage) -> Role:
    kind = str(getattr(message, "role", message.type)) if message.type == "chat" else message.type
    role = _ROLES.get(kind)
    if role is None:
        raise InputError(
            f"{name}[{index}] is a {type(message).__name__} of role {kind!r}, which no chat "
            f"API knows; use one of: {', '.join(sorted(_ROLES))}"
        )
    return role


def parts_of(
    name: str, index: int, message: BaseMessage, neutralise: Callable[[str], str]
) -> Parts:
    """What `message` sends and costs (`_content` says which part is counted, dropped or
    refused)."""
    ai = isinstance(message, AIMessage)
    return message_parts(
        f"{name}[{index}]",
        content=message.content,
        additional_kwargs=message.additional_kwargs,
        ai=ai,
        tool_calls=message.tool_calls if isinstance(message, AIMessage) else (),
        invalid_tool_calls=message.invalid_tool_calls if isinstance(message, AIMessage) else (),
        name=message.name,
        tool_call_id=message.tool_call_id if isinstance(message, ToolMessage) else None,
        neutralise=neutralise,
    )


def sent_message(message: BaseMessage, parts: Parts) -> BaseMessage:
    """`message` as it is sent: a new message of the standard class for its type with the
    same id, name, tool calls (arguments copied) and tool-call id, and the content and
    ``additional_kwargs`` of `parts`. What providers never send a model is not carried:
    response and usage metadata, a tool result's ``artifact``, an invalid call's ``error``.
    """
    common: dict[str, Any] = {"content": parts.content, "id": message.id, "name": message.name}
    if isinstance(message, AIMessage):
        return AIMessage(
            **common,
            additional_kwargs=parts.additional_kwargs,
            tool_calls=[
                tool_call(name=c["name"], args=copy.deepcopy(c["args"]), id=c["id"])
                for c in message.tool_calls
            ],
            invalid_tool_calls=[
                invalid_tool_call(name=c["name"], args=c["args"], id=c["id"])
                for c in message.invalid_tool_calls
            ],
        )
    if isinstance(message, ToolMessage):
        return ToolMessage(**common, tool_call_id=message.tool_call_id, status=message.status)
    if isinstance(message, ChatMessage):
        return ChatMessage(**common, role=message.role)
    if isinstance(message, FunctionMessage):
        return FunctionMessage(**common)
    if isinstance(message, SystemMessage):
        return SystemMessage(**common)
    return HumanMessage(**common)


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
    name: str,
    messages: object,
    *,
    skip: Callable[[BaseMessage], bool] | None = None,
    counter: TokenCounter | None = None,
) -> list[Unit]:
    """`messages` as units in order, leaving out units whose first message `skip` matches.

    Units before the first human message join it, so the turn the core always keeps
    (its first) is the user's first message, with any greeting before it. Each turn's
    text is what its messages send (`parts_of`), neutralised through `counter` when given
    (an assembler's: a conversation resends its turns on every request); the inputs are
    not changed.
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
    neutralise = neutralise_section
    if counter is not None:
        neutralise = functools.partial(_remembered, counter)
    units: list[Unit] = []
    for group in groups:
        start = group[0]
        parts = tuple(parts_of(name, i, messages[i], neutralise) for i in group)
        try:
            turn = Turn(
                role=roles[start],
                content="\n".join(p.text for p in parts),
                id=f"{name}[{start}]",
            )
        except ValidationError as error:
            raise InputError(f"{name}[{start}] {_problem(error)}") from None
        units.append(Unit(start, tuple(messages[i] for i in group), parts, turn))
    return units


def _remembered(counter: TokenCounter, text: str) -> str:
    return counter.rewritten(text, neutralise_section)


def kept_units(units: Sequence[Unit], assembled: Assembled) -> set[int]:
    """Positions of the units the assembly kept: those its report does not list as dropped."""
    dropped = {d.id for d in assembled.report.dropped if d.claimant == "history"}
    return {k for k, unit in enumerate(units) if unit.turn.id not in dropped}


def restore(
    units: Sequence[Unit], kept: Collection[int], shown: Sequence[tuple[Role, str]]
) -> list[tuple[int, list[BaseMessage]]]:
    """Kept units as the messages they send, and a `HumanMessage` with the core's gap marker
    where each run of dropped units starts, each at its position in the input.

    `shown` is the core's history as (role, text): one entry per kept unit and per gap,
    in order; the markers are taken from it, so their wording stays the core's.
    """
    if not kept:
        return []
    slots: list[tuple[int, list[BaseMessage] | None]] = []
    previous_kept = True
    for k, unit in enumerate(units):
        if k in kept:
            slots.append((unit.start, unit.sent()))
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


_CONFIG_PRINCIPAL: Final = "config['configurable']['principal']"


def config_principal(config: RunnableConfig) -> Principal | NoScope | None:
    """Who the call's config names: ``config["configurable"]["principal"]`` (None is the
    anonymous caller), or `NO_SCOPE` when it names nobody."""
    configurable = config.get("configurable") or {}
    if "principal" not in configurable:
        return NO_SCOPE
    return principal_of(configurable["principal"], _CONFIG_PRINCIPAL)


def call_principal(fixed: Principal | None, config: RunnableConfig) -> Principal | None:
    """Who a call is answered for, by the core's one rule (`ctxbudget.principal_for_call`):
    a component built for `fixed` serves it only; one built without takes the config's."""
    return principal_for_call(fixed, config_principal(config), where=_CONFIG_PRINCIPAL)


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
