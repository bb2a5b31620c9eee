"""What a chat message sends, as plain data: every part counted, dropped or refused.

A LangChain message carries more than its text: content blocks of many kinds, tool
calls, ``additional_kwargs`` that provider integrations turn into request fields. A
budget that counts only the text lets the rest through uncounted, so each part meets
one rule (docs/langchain.md, "What a message costs"):

- text (a str content, str items and ``text`` blocks): neutralised with
  `ctxbudget.neutralise_section`, counted and sent as neutralised text; a text block
  is rebuilt as ``{"type": "text", "text": ...}``, without its other keys;
- tool calls and invalid tool calls of an AI message: counted as
  ``name(arguments JSON)`` and kept, and so is a legacy ``additional_kwargs["function_call"]``;
- ``reasoning``, ``thinking`` and ``redacted_thinking`` blocks of an AI message: kept as
  they are (a provider verifies their signature) and counted as their JSON;
- a ``tool_use``, ``tool_call`` or ``function_call`` block that repeats one of the
  message's tool calls, and ``additional_kwargs["tool_calls"]`` (the provider's form of
  the tool calls LangChain parsed): dropped, the calls are sent from ``tool_calls``;
- the message's ``name`` and the tool-call ids: counted as they are;
- a part sent as it is (reasoning, tool calls, names, ids) that neutralising would change is
  counted as its ASCII escape, which costs at least as much (`ctxbudget.message_text`);
- anything else (image, audio, file, video and document blocks, unknown blocks, other
  non-empty ``additional_kwargs``): refused with an `InputError` naming the message and
  the part, since it could not be counted.

No framework import: the helpers take plain dicts and strings, as the messages hold them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxbudget import InputError, ToolCall, message_text, neutralise_section

__all__ = ["Content", "Parts", "message_parts"]

Content = str | list[str | dict[str, Any]]
"""A message's content as LangChain holds it."""

_REASONING: Final = frozenset({"reasoning", "thinking", "redacted_thinking"})
"""Blocks a model wrote about its own reasoning; providers check their signatures."""
_CALL_ID: Final = {"tool_use": "id", "tool_call": "id", "function_call": "call_id"}
"""Blocks that repeat a tool call in the content, and the key holding the call's id."""
_MEDIA: Final = frozenset(
    {"image", "image_url", "audio", "input_audio", "file", "video", "document", "media"}
)
"""Blocks that are not text: their cost is the provider's own (per pixel, per second)."""


@dataclass(frozen=True)
class Parts:
    """What a message sends: its rebuilt content and ``additional_kwargs``, and the text of
    its `Turn` (what it costs)."""

    content: Content
    additional_kwargs: dict[str, Any]
    text: str


def message_parts(
    where: str,
    *,
    content: Content,
    additional_kwargs: Mapping[str, Any],
    ai: bool,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    invalid_tool_calls: Sequence[Mapping[str, Any]] = (),
    name: str | None = None,
    tool_call_id: str | None = None,
    neutralise: Callable[[str], str] = neutralise_section,
) -> Parts:
    """What one message sends, and what it costs by the core's rule (`ctxbudget.message_text`).

    Args:
        where: the message, for errors (``history[3]``).
        ai: whether the message is the model's own: only it may carry reasoning, tool
            calls and a legacy function call.
        neutralise: `ctxbudget.neutralise_section`, or the same remembered across requests
            (``lambda text: counter.rewritten(text, neutralise_section)``).
    """
    calls = [
        *(_call(f"{where}.tool_calls[{i}]", c, invalid=False) for i, c in enumerate(tool_calls)),
        *(
            _call(f"{where}.invalid_tool_calls[{i}]", c, invalid=True)
            for i, c in enumerate(invalid_tool_calls)
        ),
    ]
    ids = [str(call["id"]) for call in [*tool_calls, *invalid_tool_calls] if call.get("id")]
    rebuilt, texts, kept = _content(
        where, content, ai=ai, call_ids=frozenset(ids), neutralise=neutralise
    )
    kwargs, function_call = _kwargs(where, additional_kwargs, ai=ai)
    verbatim = [part for part in (name, *ids, tool_call_id, *kept) if part]
    text = message_text(
        texts=texts, tool_calls=[*calls, *function_call], verbatim=verbatim, neutralise=neutralise
    )
    return Parts(rebuilt, kwargs, text)


def _call(where: str, call: Mapping[str, Any], *, invalid: bool) -> ToolCall:
    """A tool call as counted: its name and its arguments as the JSON text providers get
    (an invalid call's arguments are that text already)."""
    name = call.get("name") or ""
    if invalid:
        return ToolCall(str(name), str(call.get("args") or ""))
    try:
        arguments = json.dumps(call.get("args", {}), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InputError(
            f"{where} args are not JSON data ({error}), so what is sent cannot be counted; "
            "use str, numbers, bools, None, lists and dicts with str keys"
        ) from None
    return ToolCall(str(name), arguments)


def _reasoning(where: str, block: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A reasoning block kept as it is: its JSON (what it costs) and a copy read from it."""
    try:
        text = json.dumps(block, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise InputError(
            f"{where} is not JSON data ({error}), so what is sent cannot be counted"
        ) from None
    copy: dict[str, Any] = json.loads(text)
    return text, copy


def _content(
    where: str,
    content: Content,
    *,
    ai: bool,
    call_ids: frozenset[str],
    neutralise: Callable[[str], str],
) -> tuple[Content, list[str], list[str]]:
    """The content as sent, its neutralised texts, and the JSON of the blocks kept verbatim."""
    if isinstance(content, str):
        shown = neutralise(content)
        return shown, [shown], []
    blocks: list[str | dict[str, Any]] = []
    texts: list[str] = []
    verbatim: list[str] = []
    for index, block in enumerate(content):
        part = f"{where}.content[{index}]"
        if isinstance(block, str):
            shown = neutralise(block)
            blocks.append(shown)
            texts.append(shown)
            continue
        kind = block.get("type") if isinstance(block, Mapping) else None
        if not isinstance(kind, str):
            raise InputError(
                f"{part} is a {type(block).__name__} without a str 'type'; a content block is "
                "a str or a dict such as {'type': 'text', 'text': ...}"
            )
        if kind == "text" and isinstance(block.get("text"), str):
            shown = neutralise(block["text"])
            blocks.append({"type": "text", "text": shown})
            texts.append(shown)
        elif ai and kind in _REASONING:
            cost, kept = _reasoning(part, block)
            blocks.append(kept)
            verbatim.append(cost)
        elif ai and kind in _CALL_ID:
            if block.get(_CALL_ID[kind]) not in call_ids:
                raise InputError(
                    f"{part} is a {kind!r} block that none of the message's tool calls "
                    "matches by id, so it would be sent uncounted; put the call in "
                    "AIMessage(tool_calls=[...])"
                )
        elif kind in _MEDIA:
            raise InputError(
                f"{part} is a {kind!r} block: ctxbudget counts text only, and its cost is the "
                "provider's own; keep it out of the budgeted messages, or describe it in text"
            )
        else:
            raise InputError(
                f"{part} is a {kind!r} block, which ctxbudget has no rule to count"
                f"{'' if ai else ' in a message that is not an AIMessage'}; send it as text "
                "blocks, or leave it out"
            )
    return blocks, texts, verbatim


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and not value)


def _kwargs(
    where: str, kwargs: Mapping[str, Any], *, ai: bool
) -> tuple[dict[str, Any], list[ToolCall]]:
    """The ``additional_kwargs`` as sent, and the legacy function call among them."""
    kept: dict[str, Any] = {}
    calls: list[ToolCall] = []
    for key, value in kwargs.items():
        if _empty(value) or (ai and key == "tool_calls"):
            continue  # nothing to send; or what LangChain parsed into tool_calls, counted there
        part = f"{where}.additional_kwargs[{key!r}]"
        if ai and key == "function_call":
            name, arguments = _function_call(part, value)
            calls.append(ToolCall(name, arguments))
            kept[key] = {"name": name, "arguments": arguments}
            continue
        raise InputError(
            f"{part} holds a {type(value).__name__} that provider integrations may send, and "
            "ctxbudget has no rule to count it; remove the key (or set it to None) before "
            "the messages are budgeted"
        )
    return kept, calls


def _function_call(where: str, value: object) -> tuple[str, str]:
    if isinstance(value, Mapping) and set(value) == {"name", "arguments"}:
        name, arguments = value["name"], value["arguments"]
        if isinstance(name, str) and isinstance(arguments, str):
            return name, arguments
    raise InputError(
        f"{where} must be {{'name': str, 'arguments': str}}, the legacy OpenAI function call; "
        f"got {type(value).__name__} {str(value)[:60]!r}"
    )
