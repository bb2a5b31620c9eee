"""LangChain objects ⇄ ctxbudget inputs and results: documents, messages, tools, reports.

Every component of the adapter converts through here, so each conversion is written
once: how a `Document` becomes a `Chunk` and a selected source a new `Document`, what a
message sends and how it is rebuilt to carry only what was counted (`_messages` makes
message lists into turns), who a call is answered for, and what the report event carries.
The rules themselves are the core's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
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
    Principal,
    Selection,
    Source,
    Tool,
    principal_for_call,
)
from ctxbudget.types import NoScope
from langchain_ctxbudget._content import Parts, message_parts
from langchain_ctxbudget._convert import DocumentMetadataMapping, metadata_of, to_chunks

__all__ = [
    "REPORT_EVENT",
    "assembled_report",
    "budgeted_documents",
    "call_principal",
    "chunks_of",
    "cited_documents",
    "config_principal",
    "documents_of",
    "in_run",
    "parts_of",
    "principal_of",
    "problem",
    "refuse_provider_count_with_tool_turns",
    "selection_report",
    "sent_message",
    "tool_of",
]

REPORT_EVENT: Final = "ctxbudget_report"
"""Name of the custom callback event that carries an assembly's report."""


def problem(error: ValidationError) -> str:
    """The first problem pydantic found, as "field: what is wrong"."""
    detail = error.errors(include_url=False)[0]
    message = detail["msg"].removeprefix("Value error, ")
    field = ".".join(map(str, detail["loc"]))
    return f"{field}: {message}" if field else message


# --- documents -----------------------------------------------------------------------------


def documents_of(
    value: object, *, name: str = "documents", origin: str = "what a retriever returns"
) -> list[Document]:
    """`value` as a list of `Document`; `InputError` naming the first item that is not one
    (`name` is what the caller calls the list, `origin` where such documents come from)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InputError(
            f"{name} must be a list of langchain_core Document, but got {type(value).__name__}"
        )
    for index, document in enumerate(value):
        if not isinstance(document, Document):
            raise InputError(
                f"{name}[{index}] is a {type(document).__name__}, expected a langchain_core "
                f"Document ({origin})"
            )
    return list(value)


def chunks_of(
    documents: Sequence[Document], mapping: DocumentMetadataMapping, assembler: ContextAssembler
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
    mapping: DocumentMetadataMapping,
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
    mapping: DocumentMetadataMapping,
) -> list[Document]:
    """The selected sources as new Documents in prompt order: the rendered source as
    ``page_content``, ``metadata["citation"] = n`` and ``metadata["fence"]``, what opens
    the selection's fence (`langchain_ctxbudget.citations.fence_numbered` reads both). Inputs
    are copied, never changed.

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
        metadata["fence"] = selection.frame.open
        out.append(Document(page_content=source.text, metadata=metadata, id=document_id))
    return out


# --- messages ------------------------------------------------------------------------------


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
        raise InputError(f"tools[{index}] {problem(error)}") from None


# --- who is asking, and what happened ------------------------------------------------------


def principal_of(value: object, where: str) -> Principal | None:
    """A `Principal`, built from a mapping of its fields when need be."""
    if value is None or isinstance(value, Principal):
        return value
    if isinstance(value, Mapping):
        try:
            return Principal.model_validate(dict(value))
        except ValidationError as error:
            raise InputError(f"{where}: {problem(error)}") from None
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


def refuse_provider_count_with_tool_turns(
    assembler: ContextAssembler, has_tool_turns: bool, *, where: str
) -> None:
    """Fail closed where a provider count would measure another request than the one sent:
    the count measures tool calls and results as the core writes them, as text
    (`Assembled.messages`), while LangChain sends them as tool blocks."""
    provider = assembler.provider_count
    if provider is None or not has_tool_turns:
        return
    raise InputError(
        f"{where} cannot use the provider count ({provider.label}) on a conversation with "
        "tool calls or tool results: the count measures them as text, while LangChain sends "
        "them to the model as tool blocks, so the figure would be of another request; use an "
        "assembler without provider_count (the offline count of a Claude or Gemini model is an "
        "upper bound with a margin)"
    )
