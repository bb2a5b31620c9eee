"""What a budgeted LlamaIndex history must look like, written here from docs/agents.md, "In
LlamaIndex" and the providers' rules, not from the adapter's code.

- Sent: the stored messages from the first user message on (system messages before it
  too), in order, each matched to the stored message it is by a tag word in its text, or
  for a cleared tool result by its ``tool_call_id``; wherever messages are missing, one user
  message ``[… N messages omitted …]`` (or ``[Summary of N earlier messages: …]``) with N
  exactly the number missing there; the latest stored message always sent. (A tool result
  is matched by its ``tool_call_id``, an assistant message with tool calls by their ids.)
- Valid: the first message that is not a system message is the user's; every tool result
  follows the assistant message whose call it answers, with only results between them,
  and every call of a sent assistant message is answered right after it.
- Size: the history rendered as ctxbudget's conversation section (docs/results.md, "History
  on its own"): framed, a line ``Label: text`` per message, a marker or summary as its own line;
  a message's text is its texts, each tool call as ``name(arguments)``, then its ids and
  name, one per line (docs/langchain.md, "What a message costs"), a cleared result its placeholder.
  Counted with tiktoken's encoding itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

GAP = re.compile(r"\[… (\d+) messages? omitted …\]")
SUMMARY = re.compile(r"\[Summary of (\d+) earlier messages?: .*\]", re.DOTALL)
CLEARED = re.compile(r"\[tool result cleared: (?:(\S+), )?([\d,]+) tokens\]")
TAG = re.compile(r"\bzqm\d+\b")
LABELS = {
    MessageRole.SYSTEM: "System",
    MessageRole.USER: "User",
    MessageRole.ASSISTANT: "Assistant",
    MessageRole.TOOL: "Tool",
}


def tagged(i: int, text: str = "") -> str:
    """A message text that the oracle can find again: tag ``zqm{i}`` first."""
    return f"zqm{i} {text}".rstrip()


def announced(message: ChatMessage) -> int | None:
    """How many messages a gap marker or summary says it stands for; None for others."""
    if message.role != MessageRole.USER:
        return None
    text = message.content or ""
    found = GAP.fullmatch(text) or SUMMARY.fullmatch(text)
    return None if found is None else int(found.group(1))


def _calls(message: ChatMessage) -> list[ToolCallBlock]:
    return [b for b in message.blocks if isinstance(b, ToolCallBlock)]


def _texts(message: ChatMessage) -> list[str]:
    return [b.text for b in message.blocks if isinstance(b, TextBlock) and b.text]


def line(message: ChatMessage) -> str:
    """A sent message's line in the conversation section."""
    if announced(message) is not None:
        return message.content or ""
    parts = _texts(message)
    parts += [
        f"{c.tool_name}({json.dumps(c.tool_kwargs, ensure_ascii=False)})" for c in _calls(message)
    ]
    cleared = CLEARED.fullmatch(message.content or "") is not None
    if not cleared:
        parts += [c.tool_call_id for c in _calls(message) if c.tool_call_id]
        parts += [
            str(v) for k, v in message.additional_kwargs.items() if k in ("tool_call_id", "name")
        ]
    return f"{LABELS[message.role]}: " + "\n".join(parts)


def section(history: Sequence[ChatMessage]) -> str:
    if not history:
        return ""
    return "<conversation>\n" + "\n\n".join(map(line, history)) + "\n</conversation>"


def sendable(stored: Sequence[ChatMessage]) -> list[int]:
    """The stored messages a history may send: system messages, and all from the first user
    message on."""
    roles = [m.role for m in stored]
    first = roles.index(MessageRole.USER) if MessageRole.USER in roles else len(roles)
    return [i for i, m in enumerate(stored) if i >= first or m.role == MessageRole.SYSTEM]


def _is(stored: ChatMessage, sent: ChatMessage) -> bool:
    if stored.role != sent.role:
        return False
    if stored.role == MessageRole.TOOL:
        return stored.additional_kwargs.get("tool_call_id") == sent.additional_kwargs.get(
            "tool_call_id"
        )
    if _calls(stored):
        return [c.tool_call_id for c in _calls(stored)] == [c.tool_call_id for c in _calls(sent)]
    mine, theirs = TAG.search(stored.content or ""), TAG.search(sent.content or "")
    assert mine is not None, f"an untagged message in the test's conversation: {stored}"
    return theirs is not None and mine.group() == theirs.group()


@dataclass
class Kept:
    """What a history sent, read back: the stored messages kept, and each marker's count
    beside the number of messages missing where it stands."""

    kept: list[int]
    markers: list[tuple[int, int]]
    cleared: list[int]


def read_back(stored: Sequence[ChatMessage], history: Sequence[ChatMessage]) -> Kept:
    candidates = sendable(stored)
    kept: list[int] = []
    markers: list[tuple[int, int]] = []
    cleared: list[int] = []
    position = 0
    pending: int | None = None
    for message in history:
        said = announced(message)
        if said is not None:
            assert pending is None, "two markers in a row"
            pending = said
            continue
        found = next(
            k for k in range(position, len(candidates)) if _is(stored[candidates[k]], message)
        )
        if pending is not None:
            markers.append((pending, found - position))
            pending = None
        else:
            assert found == position, f"messages {position}..{found - 1} left out with no marker"
        kept.append(candidates[found])
        if CLEARED.fullmatch(message.content or ""):
            cleared.append(candidates[found])
        position = found + 1
    assert pending is None, "a marker at the end: the latest message is missing"
    assert position == len(candidates) or not history, "the latest message is missing"
    return Kept(kept, markers, cleared)


def check_valid(history: Sequence[ChatMessage]) -> None:
    """A request every provider accepts, as far as the history goes."""
    speaking = [m for m in history if m.role != MessageRole.SYSTEM]
    assert not speaking or speaking[0].role == MessageRole.USER, "opens with the assistant"
    waiting: set[str] = set()
    for message in history:
        if message.role == MessageRole.TOOL:
            ident = message.additional_kwargs.get("tool_call_id")
            assert ident in waiting, f"tool result {ident!r} without its call right before it"
            waiting.discard(ident)
            continue
        assert not waiting, f"calls {sorted(waiting)} unanswered"
        waiting = {c.tool_call_id for c in _calls(message) if c.tool_call_id}
    assert not waiting, f"calls {sorted(waiting)} unanswered"


def check_history(
    stored: Sequence[ChatMessage],
    history: Sequence[ChatMessage],
    *,
    limit: int,
    count: Callable[[str], int],
) -> Kept:
    """Everything above, for one history sent for `stored`; returns what was kept."""
    assert count(section(history)) <= limit, f"{count(section(history))} tokens > {limit}"
    check_valid(history)
    kept = read_back(stored, history)
    assert all(said == missing for said, missing in kept.markers), kept.markers
    missing = sum(missing for _, missing in kept.markers)
    assert len(kept.kept) + missing == len(sendable(stored))
    return kept
