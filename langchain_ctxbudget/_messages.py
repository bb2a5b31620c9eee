"""LangChain message lists ⇄ the core's turns: one `Turn` per message, and back.

Every history path of the adapter (`trim_history`, the runnable's dict input, the agent
middleware) converts through `conversation_of` and `Conversation.sent`, so the rules of
docs/agents.md, "Agents and chat" are applied once:

- every message is one `Turn`, so a gap marker's count is a count of messages; an AI
  message with tool calls and the `ToolMessage` results answering them (a legacy function
  call and its `FunctionMessage`) share a `Turn.group`, kept or dropped whole, and a tool
  turn carries the tool's name (`Turn.name`), which a cleared result shows;
- messages before the first human message join its group, so the first unit (which the
  core keeps when it fits) is the user's first message with any greeting before it —
  unless that message is the latest, which is sent alone, and the greeting is the first;
- system messages are not turns: wherever they stand, they are sent first, before the
  conversation, as LangChain's Anthropic integration requires (it takes one run of
  system messages, and raises on a second one later);
- a result that answers no call, and a call left unanswered before the conversation moves
  on, are refused: no provider accepts them;
- kept messages come back rebuilt as they were counted (`_langchain.sent_message`), a
  cleared tool result with the core's placeholder as its content, a gap marker or summary
  as a `HumanMessage`, and a `HumanMessage` with the core's ``[conversation start]`` note
  first when the conversation would otherwise open with the model (OpenAI's and
  Anthropic's styles of `Assembled.messages` do the same).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue
from pydantic import ValidationError

from ctxbudget import CONVERSATION_START, InputError, TrimmedHistory, Turn, neutralise_section
from ctxbudget.types import CountCache, Role
from langchain_ctxbudget._content import Parts
from langchain_ctxbudget._langchain import parts_of, problem, sent_message

__all__ = ["Conversation", "conversation_of", "message_list", "positions_of"]

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
class Conversation:
    """A message list as the core weighs it: its system messages apart, and one `Turn` per
    other message."""

    name: str
    """What the caller calls the list (``messages``, ``history``): turns are ``name[i]``."""
    messages: tuple[BaseMessage, ...]
    """The caller's messages (message-likes converted), never changed."""
    parts: tuple[Parts, ...]
    """What each message sends and costs (`_content`)."""
    roles: tuple[Role, ...]
    system: tuple[int, ...]
    """Indices of the system messages."""
    system_turns: tuple[Turn, ...]
    """The system messages as turns, to count them."""
    turns: tuple[Turn, ...]
    positions: tuple[int, ...]
    """Each turn's message index."""

    def system_texts(self) -> list[str]:
        """The system messages' texts as they are sent (neutralised, every part counted)."""
        return [self.parts[index].text for index in self.system]

    def system_messages(self) -> list[BaseMessage]:
        return [sent_message(self.messages[i], self.parts[i]) for i in self.system]

    def messages_of(self, turns: Sequence[Turn]) -> list[BaseMessage]:
        """`turns` as the messages they would be sent as: this conversation's as rebuilt, any
        other (the core's earlier summary, with `rolling_summaries`) as a `HumanMessage`."""
        index = {turn.id: self.positions[k] for k, turn in enumerate(self.turns)}
        return [
            HumanMessage(content=turn.content)
            if turn.id not in index
            else sent_message(self.messages[index[turn.id]], self.parts[index[turn.id]])
            for turn in turns
        ]

    def sent(
        self,
        history: Sequence[tuple[Role, str]],
        turns: Sequence[int | None],
        cleared: Collection[int],
    ) -> list[BaseMessage]:
        """The core's kept history as messages: `history` entries, `turns` their turn index
        (None for a gap marker or summary), `cleared` the turns sent as their placeholder."""
        out: list[BaseMessage] = []
        first: Role | None = None
        for (_, text), turn in zip(history, turns, strict=True):
            if turn is None:
                out.append(HumanMessage(content=text))
                first = first or "user"
                continue
            index = self.positions[turn]
            parts = self.parts[index]
            if turn in cleared:
                parts = replace(parts, content=text)
            out.append(sent_message(self.messages[index], parts))
            first = first or self.roles[index]
        if first is not None and first != "user":
            out.insert(0, HumanMessage(content=CONVERSATION_START))
        return out


def positions_of(trimmed: TrimmedHistory) -> list[int | None]:
    """For each of `trimmed.messages`, the turn it is, or None for what stands in a gap: the
    core puts one entry in each run of left-out turns (`gaps`), before the turn after it."""
    entries: list[tuple[int, int | None]] = [(k, k) for k in trimmed.kept]
    entries += [(start, None) for start, _ in trimmed.gaps]
    return [turn for _, turn in sorted(entries, key=lambda entry: entry[0])]


def message_list(name: str, messages: object) -> list[BaseMessage]:
    """`messages` as `BaseMessage` objects, as `trim_messages` reads them: a `PromptValue`,
    or a list of messages and message-likes (``("human", "hi")``, ``{"role": "user",
    "content": "hi"}``, a str for a human message); `InputError` naming the first it cannot
    read."""
    if isinstance(messages, PromptValue):
        return messages.to_messages()
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InputError(
            f"{name} must be a list of langchain_core messages, but got {type(messages).__name__}"
        )
    out: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, BaseMessage):
            out.append(message)
            continue
        try:
            [converted] = convert_to_messages([message])
        except (ValueError, NotImplementedError, TypeError) as error:
            reason = str(error).splitlines()[0]
            raise InputError(
                f"{name}[{index}] ({type(message).__name__}) is not a message LangChain can "
                f"read ({reason}); use a langchain_core message (HumanMessage, AIMessage, "
                "ToolMessage, ...), a (role, content) tuple or a {'role': ..., 'content': ...} "
                "dict"
            ) from None
        out.append(converted)
    return out


def _role(name: str, index: int, message: BaseMessage) -> Role:
    kind = str(getattr(message, "role", message.type)) if message.type == "chat" else message.type
    role = _ROLES.get(kind)
    if role is None:
        raise InputError(
            f"{name}[{index}] is a {type(message).__name__} of role {kind!r}, which no chat "
            f"API knows; use one of: {', '.join(sorted(_ROLES))}"
        )
    return role


@dataclass
class _Call:
    """The AI message whose tool calls the following results answer."""

    group: str
    names: dict[str, str]
    """Every call id of the message → its tool's name."""
    pending: set[str]
    """Ids of the valid tool calls no result has answered yet."""
    function: str | None
    """The name of a legacy function call the message made, until a FunctionMessage answers."""
    where: str


def _opened(name: str, index: int, message: BaseMessage) -> _Call | None:
    """The calls an AI message makes, or None when it makes none."""
    if not isinstance(message, AIMessage):
        return None
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    names = {str(c["id"]): str(c.get("name") or "") for c in calls if c.get("id")}
    function = message.additional_kwargs.get("function_call")
    function_name = function.get("name") if isinstance(function, dict) else None
    if not names and function_name is None:
        return None
    pending = {str(c["id"]) for c in message.tool_calls if c["id"]}
    where = f"{name}[{index}]"
    function_call = None if function_name is None else str(function_name)
    return _Call(where, names, pending, function_call, where)


def _groups(
    name: str, messages: Sequence[BaseMessage], order: Sequence[int]
) -> tuple[dict[int, str], dict[int, str]]:
    """For the messages at `order` (the non-system ones, in order): the group of each that
    is in one, and the tool name of each result."""
    groups: dict[int, str] = {}
    tools: dict[int, str] = {}
    call: _Call | None = None
    for index in order:
        message = messages[index]
        if isinstance(message, ToolMessage):
            if call is None or message.tool_call_id not in call.names:
                raise InputError(
                    f"{name}[{index}] is a ToolMessage answering tool call "
                    f"{message.tool_call_id!r}, which the AI message before it did not make; "
                    "providers reject a tool result without its call: put it right after the "
                    "AIMessage whose tool_calls has that id (other results may come between), "
                    "or leave it out"
                )
            call.pending.discard(message.tool_call_id)
            groups[index] = call.group
            tools[index] = call.names[message.tool_call_id] or message.name or ""
            continue
        if isinstance(message, FunctionMessage):
            if call is None or call.function is None:
                raise InputError(
                    f"{name}[{index}] is a FunctionMessage that follows no AI message with a "
                    "function_call; put it right after the call it answers, or leave it out"
                )
            groups[index] = call.group
            tools[index] = message.name or call.function
            call.function = None
            continue
        if call is not None and call.pending:
            missing = ", ".join(map(repr, sorted(call.pending)))
            raise InputError(
                f"{call.where} makes tool call(s) {missing} that no ToolMessage answers before "
                f"{name}[{index}]; providers reject a call without its result: add a "
                "ToolMessage(tool_call_id=...) for each right after it, or leave the call out"
            )
        call = _opened(name, index, message)
        if call is not None:
            groups[index] = call.group
    return groups, tools


def conversation_of(
    name: str, messages: object, *, counter: CountCache | None = None
) -> Conversation:
    """`messages` as a `Conversation`: one turn per non-system message, named ``name[i]``
    by its index in the caller's list. Texts are neutralised through `counter` when given
    (an assembler's: a conversation resends its turns on every request)."""
    given = message_list(name, messages)
    roles = tuple(_role(name, index, message) for index, message in enumerate(given))
    neutralise: Callable[[str], str] = neutralise_section
    if counter is not None:
        neutralise = functools.partial(_remembered, counter)
    parts = tuple(parts_of(name, index, message, neutralise) for index, message in enumerate(given))
    system = tuple(index for index, role in enumerate(roles) if role == "system")
    order = [index for index, role in enumerate(roles) if role != "system"]
    groups, tools = _groups(name, given, order)
    first_human = next((k for k, index in enumerate(order) if roles[index] == "user"), 0)
    # Not when that message is the latest: it is sent anyway, and a greeting joined to it
    # would make the unit that must fit larger than the message it has to send.
    joined = order[: first_human + 1] if 0 < first_human < len(order) - 1 else ()
    for index in joined:
        groups[index] = f"{name}[{order[0]}]"
    turns = {
        index: _turn(
            name, index, roles[index], parts[index].text, groups.get(index), tools.get(index)
        )
        for index in range(len(given))
    }
    return Conversation(
        name,
        tuple(given),
        parts,
        roles,
        system,
        tuple(turns[index] for index in system),
        tuple(turns[index] for index in order),
        tuple(order),
    )


def _turn(
    name: str, index: int, role: Role, text: str, group: str | None, tool: str | None
) -> Turn:
    try:
        return Turn(role=role, content=text, id=f"{name}[{index}]", group=group, name=tool or None)
    except ValidationError as error:
        raise InputError(f"{name}[{index}] {problem(error)}") from None


def _remembered(counter: CountCache, text: str) -> str:
    return counter.rewritten(text, neutralise_section)
