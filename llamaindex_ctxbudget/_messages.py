"""LlamaIndex chat messages as the `Turn`s the core budgets, and back: every part counted,
dropped or refused (docs/llamaindex.md, "Chat engines and
agents").

A `ChatMessage` holds content blocks and ``additional_kwargs``, and LLM integrations send
both (OpenAI's merges ``additional_kwargs`` into the message it sends). Each part meets
one rule; the text of a message's `Turn` is `ctxbudget.message_text` over what it sends:

- text blocks: neutralised (`ctxbudget.neutralise_section`) and made inert to LlamaIndex's
  prompt templates (`inert`), counted and sent that way;
- tool calls of an assistant message (``ToolCallBlock`` blocks, or OpenAI- or
  Anthropic-shaped ``additional_kwargs["tool_calls"]``): counted as ``name(arguments)``
  with their ids, sent as they are; thinking blocks: counted as their JSON, sent as they
  are (providers verify their signatures);
- ``tool_call_id`` and ``name`` in ``additional_kwargs``: counted and sent as they are;
- cache points: sent as they are, counted as nothing (a cache breakpoint, not content);
  empty ``additional_kwargs`` values: dropped (nothing to send);
- image, audio, video and document blocks, citation blocks, any other
  ``additional_kwargs`` key: refused with an `InputError` naming the message and the part.

Messages become turns one to one, so a gap marker counts messages; an assistant message
with tool calls and the tool messages after it are one `Turn.group`. The conversation
sent starts at the first user message, as a request must: system messages before it go
with it (one unit), any other message before it (an assistant's greeting) is left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from llama_index.core.base.llms.types import (
    AudioBlock,
    CachePoint,
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from pydantic import BaseModel, ValidationError

from ctxbudget import InputError, ToolCall, TrimmedHistory, Turn, message_text
from ctxbudget.types import Role

__all__ = ["Conversation", "conversation", "inert", "sent_messages"]

_ROLES: Final[dict[MessageRole, Role]] = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}
"""A LlamaIndex role -> the Turn role it is counted as."""

_MEDIA: Final = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)
"""Blocks that are not text: their cost is the provider's own (per pixel, per second)."""

_VERBATIM_KWARGS: Final = ("tool_call_id", "name")
"""``additional_kwargs`` keys sent as message fields, counted as they are."""

_TEMPLATE_VARIABLE: Final = re.compile(r"\{([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\}", re.ASCII)
"""What LlamaIndex's prompt templates fill in a message's text (``SafeFormatter.parse``).
Linear: each match starts at a brace and stops at the first character that cannot go on."""

_START: Final = "start"
"""The group of the system messages before the first user message and that message."""


def inert(text: str) -> str:
    """`text` with every ``{name}`` written ``{ name }``, which LlamaIndex's templates leave alone.

    Chat engines put the history into a prompt template, which fills each ``{name}`` it
    knows: a message saying ``{context_str}`` would repeat every source inside it, uncounted.
    """
    return _TEMPLATE_VARIABLE.sub(r"{ \1 }", text)


@dataclass(frozen=True)
class _Parts:
    """What one message sends (rebuilt) and costs; the tool names of the calls it makes."""

    message: ChatMessage
    text: str
    calls: dict[str, str]
    """Each tool call's id -> its tool's name."""


def _json(where: str, value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InputError(
            f"{where} is not JSON data ({error}), so what is sent cannot be counted; use str, "
            "numbers, bools, None, lists and dicts with str keys"
        ) from None


def _block_call(where: str, block: ToolCallBlock) -> ToolCall:
    kwargs = block.tool_kwargs
    return ToolCall(block.tool_name, kwargs if isinstance(kwargs, str) else _json(where, kwargs))


def _kwarg_call(where: str, call: object) -> tuple[ToolCall, str]:
    """A call of ``additional_kwargs["tool_calls"]`` and its id: OpenAI's shape (``function``
    with ``name`` and ``arguments``) or Anthropic's (``name`` and ``input``)."""
    data = call.model_dump() if isinstance(call, BaseModel) else call
    if isinstance(data, Mapping):
        ident = data.get("id")
        function = data.get("function")
        if isinstance(function, Mapping):
            name, arguments = function.get("name"), function.get("arguments")
            if isinstance(name, str) and isinstance(arguments, str):
                return ToolCall(name, arguments), str(ident or "")
        elif isinstance(data.get("name"), str) and "input" in data:
            return ToolCall(data["name"], _json(where, data["input"])), str(ident or "")
    raise InputError(
        f"{where} is a {type(call).__name__} that is neither an OpenAI tool call "
        "({'id', 'function': {'name', 'arguments'}}) nor an Anthropic one ({'id', 'name', "
        "'input'}), so what is sent cannot be counted; put the call in a ToolCallBlock"
    )


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


def _parts(
    where: str, message: ChatMessage, role: Role, neutralise: Callable[[str], str]
) -> _Parts:
    """What `message` sends and costs, by the rules of this module's docstring."""
    assistant = role == "assistant"
    blocks: list[Any] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    verbatim: list[str] = []
    names: dict[str, str] = {}
    for index, block in enumerate(message.blocks):
        part = f"{where}.blocks[{index}]"
        if isinstance(block, TextBlock):
            shown = inert(neutralise(block.text))
            blocks.append(TextBlock(text=shown))
            texts.append(shown)
        elif isinstance(block, CachePoint):
            blocks.append(block.model_copy(deep=True))
        elif assistant and isinstance(block, ToolCallBlock):
            calls.append(_block_call(part, block))
            if block.tool_call_id:
                verbatim.append(block.tool_call_id)
                names[block.tool_call_id] = block.tool_name
            blocks.append(block.model_copy(deep=True))
        elif assistant and isinstance(block, ThinkingBlock):
            verbatim.append(_json(part, block.model_dump(mode="json")))
            blocks.append(block.model_copy(deep=True))
        elif isinstance(block, _MEDIA):
            raise InputError(
                f"{part} is a {block.block_type!r} block: ctxbudget counts text only, and its "
                "cost is the provider's own; keep it out of the memory, or describe it in text"
            )
        else:
            kind = getattr(block, "block_type", type(block).__name__)
            note = "" if assistant else " in a message that is not the assistant's"
            raise InputError(
                f"{part} is a {kind!r} block, which ctxbudget has no rule to count{note}; "
                "send its text as a TextBlock, or leave it out"
            )
    kept: dict[str, Any] = {}
    for key, value in message.additional_kwargs.items():
        part = f"{where}.additional_kwargs[{key!r}]"
        if _empty(value):
            continue
        if key in _VERBATIM_KWARGS and isinstance(value, str):
            verbatim.append(value)
        elif assistant and key == "tool_calls" and isinstance(value, list):
            for index, call in enumerate(value):
                counted, ident = _kwarg_call(f"{part}[{index}]", call)
                calls.append(counted)
                if ident:
                    verbatim.append(ident)
                    names[ident] = counted.name
        else:
            raise InputError(
                f"{part} holds a {type(value).__name__} that LLM integrations send with the "
                "message, and ctxbudget has no rule to count it; remove the key (or set it to "
                "None) before the message goes into the memory"
            )
        kept[key] = value
    text = message_text(texts=texts, tool_calls=calls, verbatim=verbatim, neutralise=neutralise)
    rebuilt = ChatMessage(role=message.role, blocks=blocks, additional_kwargs=kept)
    return _Parts(rebuilt, text, names)


def _role(where: str, message: object) -> Role:
    if not isinstance(message, ChatMessage):
        raise InputError(
            f"{where} is a {type(message).__name__}, expected a LlamaIndex ChatMessage"
        )
    return _ROLES[message.role]


@dataclass(frozen=True)
class Conversation:
    """The stored messages as the core weighs them: one `Turn` each, in order."""

    turns: list[Turn]
    sent: list[ChatMessage]
    """Each turn's message as it is sent when kept whole."""
    positions: list[int]
    """Each turn's index among the stored messages."""
    left_out: int
    """Messages before the first user message that are not sent (a greeting)."""


def _groups(
    where: str, messages: Sequence[ChatMessage], roles: Sequence[Role], first_user: int
) -> Iterator[str | None]:
    """Each message's `Turn.group`: the start group (system messages before the first user
    message, and that message), a tool call's group (the call and its results), or None."""
    start = _START if "system" in roles[:first_user] else None
    calls: str | None = None
    for index, (message, role) in enumerate(zip(messages, roles, strict=True)):
        if index < first_user:
            yield start if role == "system" else None  # the others are left out
        elif index == first_user:
            calls = None
            yield start
        elif role == "tool":
            if calls is None:
                raise InputError(
                    f"{where}[{index}] is a tool result, but the message before it is neither "
                    "an assistant message with tool calls nor one of their results; a result "
                    "must follow its call: restore the call, or leave the result out"
                )
            yield calls
        elif role == "assistant" and _makes_calls(message):
            calls = f"calls@{index}"
            yield calls
        else:
            calls = None
            yield None


def _makes_calls(message: ChatMessage) -> bool:
    return any(isinstance(b, ToolCallBlock) for b in message.blocks) or not _empty(
        message.additional_kwargs.get("tool_calls")
    )


def conversation(
    where: str, messages: Sequence[ChatMessage], neutralise: Callable[[str], str]
) -> Conversation:
    """`messages` as turns: each its message's text (`_parts`), tool calls and their results
    in one group, a tool turn named by its tool; the messages before the first user message,
    system messages excepted, left out."""
    roles = [_role(f"{where}[{index}]", message) for index, message in enumerate(messages)]
    first_user = roles.index("user") if "user" in roles else len(roles)
    turns: list[Turn] = []
    sent: list[ChatMessage] = []
    positions: list[int] = []
    names: dict[str, str] = {}
    groups = _groups(where, messages, roles, first_user)
    for index, (message, role, group) in enumerate(zip(messages, roles, groups, strict=True)):
        if index < first_user and role != "system":
            continue
        parts = _parts(f"{where}[{index}]", message, role, neutralise)
        names = parts.calls if parts.calls else names
        try:
            turn = Turn(
                role=role,
                content=parts.text,
                id=f"{where}[{index}]",
                group=group,
                name=_tool_name(message, names) if role == "tool" else None,
            )
        except ValidationError as error:
            detail = error.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
            raise InputError(f"{where}[{index}]: {detail}") from None
        turns.append(turn)
        sent.append(parts.message)
        positions.append(index)
    left_out = sum(1 for role in roles[:first_user] if role != "system")
    return Conversation(turns, sent, positions, left_out)


def _tool_name(message: ChatMessage, calls: Mapping[str, str]) -> str | None:
    """A tool result's tool: its ``name``, else the name of the call its id answers."""
    name = message.additional_kwargs.get("name")
    if not isinstance(name, str) or not name:
        name = calls.get(str(message.additional_kwargs.get("tool_call_id") or ""))
    return inert(name) if name else None


def sent_messages(given: Conversation, trimmed: TrimmedHistory) -> list[ChatMessage]:
    """The trimmed history as the messages to send, in order: each kept turn's message, a
    cleared result as its placeholder (ids kept), and a user message with the core's gap
    marker (or summary) wherever turns are missing."""
    places = sorted(
        [(index, False) for index in trimmed.kept] + [(start, True) for start, _ in trimmed.gaps]
    )
    cleared = set(trimmed.cleared)
    out: list[ChatMessage] = []
    for (index, gap), (_, content) in zip(places, trimmed.messages, strict=True):
        if gap:
            out.append(ChatMessage(role=MessageRole.USER, content=content))
        elif index in cleared:
            kept = given.sent[index]
            out.append(
                ChatMessage(
                    role=kept.role,
                    content=content,
                    additional_kwargs=dict(kept.additional_kwargs),
                )
            )
        else:
            out.append(given.sent[index].model_copy(deep=True))
    return out
