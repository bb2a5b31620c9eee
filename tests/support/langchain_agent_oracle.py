"""What a provider accepts and what a trimmed history must show, written here from the
docs/agents.md, "In LangChain", and the providers' rules, not from the adapter's code.

- OpenAI: the messages as langchain-core converts them for OpenAI
  (`convert_to_openai_messages`), validated by the SDK's request type; every assistant
  tool call answered by tool messages right after it, no tool message without its call.
- Anthropic: langchain-anthropic is not installed here, so its documented formatting
  (``ChatAnthropic._format_messages``) is restated: one run of system messages, leading,
  becomes ``system`` (a second run raises "Received multiple non-consecutive system
  messages"); consecutive human and tool messages merge into one user message (a tool
  result as a ``tool_result`` block); an AI message is its non-empty text and a
  ``tool_use`` block per tool call. The request must then open with the user, alternate
  roles, answer every ``tool_use`` in the next user message and only those; the SDK's
  request type validates it.
- The history: the messages kept are the caller's (matched by id), in order; every gap
  marker or summary counts exactly the messages left out where it stands; the latest
  message is kept; a cleared tool result shows the placeholder with its tool's name.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)

from ctxbudget import neutralise_section
from tests.support.provider_sdks import anthropic_valid, openai_valid

GAP = re.compile(r"\[… (\d+) messages? omitted …\]")
SUMMARY = re.compile(r"\[Summary of (\d+) earlier messages?: .*\]", re.DOTALL)
CLEARED = re.compile(r"\[tool result cleared: (?:(\S+), )?([\d,]+) tokens\]")
START = "[conversation start]"


def announced(message: BaseMessage) -> int | None:
    """How many messages a gap marker or summary says it stands for; None for others."""
    if not isinstance(message, HumanMessage) or not isinstance(message.content, str):
        return None
    found = GAP.fullmatch(message.content) or SUMMARY.fullmatch(message.content)
    return None if found is None else int(found.group(1))


# --- providers ---------------------------------------------------------------------------------


def check_openai(messages: Sequence[BaseMessage]) -> None:
    """The request OpenAI would get: valid by the SDK's type, every call answered in place."""
    converted: list[dict[str, Any]] = convert_to_openai_messages(list(messages))
    openai_valid(converted)
    waiting: set[str] = set()
    for index, message in enumerate(converted):
        role = message["role"]
        if role == "tool":
            assert message["tool_call_id"] in waiting, f"orphan tool message at {index}"
            waiting.discard(message["tool_call_id"])
            continue
        assert not waiting, f"tool calls {waiting} unanswered before message {index}"
        if role == "assistant":
            waiting = {call["id"] for call in message.get("tool_calls", [])}
    assert not waiting, f"tool calls {waiting} unanswered at the end"


def anthropic_prompt(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """`messages` as LangChain's Anthropic integration formats them (see the module doc)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    began = False
    for message in messages:
        if isinstance(message, SystemMessage):
            assert not began, "Received multiple non-consecutive system messages."
            system.append(message.text)
            continue
        began = True
        if isinstance(message, ToolMessage):
            role = "user"
            blocks: list[dict[str, Any]] = [
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.text,
                }
            ]
        elif isinstance(message, AIMessage):
            role = "assistant"
            blocks = [{"type": "text", "text": message.text}] if message.text.strip() else []
            blocks += [
                {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["args"]}
                for call in message.tool_calls
            ]
        else:
            role = "user"
            blocks = [{"type": "text", "text": message.text}]
        if turns and turns[-1]["role"] == role == "user":
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    prompt: dict[str, Any] = {"messages": turns}
    if system:
        prompt["system"] = [{"type": "text", "text": text} for text in system]
    return prompt


def check_anthropic(messages: Sequence[BaseMessage]) -> None:
    """The request Anthropic would get: user first, alternating, every tool_use answered
    in the next user message and nothing else answered; valid by the SDK's type."""
    prompt = anthropic_prompt(messages)
    turns = prompt["messages"]
    assert turns[0]["role"] == "user", "the first message is not the user's"
    for one, other in itertools.pairwise(turns):
        assert one["role"] != other["role"], "roles do not alternate"
    called: set[str] = set()
    for turn in turns:
        blocks = turn["content"]
        assert blocks, f"an empty {turn['role']} message"
        if turn["role"] == "assistant":
            called = {b["id"] for b in blocks if b["type"] == "tool_use"}
            continue
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert set(answered) == called, f"tool_use {called} answered by {answered}"
        kinds = [b["type"] for b in blocks]
        assert kinds == sorted(kinds, key=lambda kind: kind != "tool_result"), (
            "a tool_result after text in a user message"
        )
        called = set()
    anthropic_valid(prompt)


# --- the history ------------------------------------------------------------------------------


@dataclass
class ReadBack:
    """A sent history matched to the caller's messages."""

    kept: list[str]
    """Ids of the caller's non-system messages that were sent, in order."""
    stand_ins: list[tuple[int, int]]
    """Each gap marker or summary: (messages it announces, messages left out there)."""


def read_back(given: Sequence[BaseMessage], sent: Sequence[BaseMessage]) -> ReadBack:
    """Match `sent` (system messages first, then the history) to `given` by message id."""
    systems = [m.id for m in given if isinstance(m, SystemMessage)]
    lead = [m.id for m in sent[: len(systems)] if isinstance(m, SystemMessage)]
    assert lead == systems, "every system message is sent first, in order"
    rest = list(sent[len(systems) :])
    assert not any(isinstance(m, SystemMessage) for m in rest), "a system message after the first"
    assert rest, "no history is sent"
    assert isinstance(rest[0], HumanMessage), "the history does not open with a human"
    order = [m.id for m in given if not isinstance(m, SystemMessage)]
    position = 0
    kept: list[str] = []
    stand_ins: list[tuple[int, int]] = []
    pending: int | None = None
    for k, message in enumerate(rest):
        said = announced(message)
        if said is not None and message.id is None:
            assert pending is None, "two stand-ins for one gap"
            pending = said
            continue
        if k == 0 and message.id is None and message.content == START:
            continue
        found = order.index(message.id, position)
        if pending is not None:
            stand_ins.append((pending, found - position))
            pending = None
        else:
            assert found == position, f"messages {order[position:found]} left out unannounced"
        kept.append(str(message.id))
        position = found + 1
    assert pending is None, "a stand-in at the end: the latest message is missing"
    assert position == len(order), "the latest message is not sent"
    return ReadBack(kept, stand_ins)


def check_history(given: Sequence[BaseMessage], sent: Sequence[BaseMessage]) -> ReadBack:
    """Every rule of a sent history that does not depend on the budget."""
    back = read_back(given, sent)
    assert all(said == missing for said, missing in back.stand_ins), back.stand_ins
    by_id = {m.id: m for m in given}
    calls = {
        call["id"]: call["name"] for m in given if isinstance(m, AIMessage) for call in m.tool_calls
    }
    for message in sent:
        original = by_id.get(message.id)
        if not isinstance(original, ToolMessage):
            continue
        assert isinstance(message, ToolMessage)
        assert message.tool_call_id == original.tool_call_id
        if message.content != neutralise_section(original.text):
            cleared = CLEARED.fullmatch(str(message.content))
            assert cleared is not None, message.content
            assert cleared.group(1) == calls[original.tool_call_id]
    check_openai(sent)
    check_anthropic(sent)
    return back


def assert_tool_calls_answered(messages: list[BaseMessage]) -> None:
    """Every AI tool call is followed by its results, and every result follows its call."""
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            answer = messages[index + 1]
            assert isinstance(answer, ToolMessage)
            assert answer.tool_call_id == message.tool_calls[0]["id"]
        if isinstance(message, ToolMessage):
            call = messages[index - 1]
            assert isinstance(call, AIMessage)
            assert call.tool_calls[0]["id"] == message.tool_call_id
