"""What one framework chat message costs, as the text of its `Turn`: one rule for both adapters.

`trim_history` (`ctxbudget._standalone`) trims the turns built from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ctxbudget._neutralise import neutralise_section

__all__ = ["ToolCall", "message_text"]


class ToolCall(NamedTuple):
    """A tool call as a chat message carries it: the tool's name and its arguments as JSON."""

    name: str
    arguments: str
    """The arguments as the JSON text the provider receives."""


def message_text(
    *,
    texts: Sequence[str] = (),
    tool_calls: Sequence[ToolCall] = (),
    verbatim: Sequence[str] = (),
    neutralise: Callable[[str], str] = neutralise_section,
) -> str:
    """What one framework chat message costs, as the text of its `Turn` (docs/adapters.md,
    "Writing an adapter"): its texts, each tool call as ``name(arguments)``, then the parts
    sent back verbatim (a model's signed reasoning, names, ids), one per line; empty parts left out.

    Both adapters count a message through this, so the same message costs the same in
    either. Pass texts already neutralised (`neutralise_section`): they are sent that way.
    Tool calls and verbatim parts are sent as they are, while the history neutralises the
    whole turn before counting it, and neutralising can shorten a text (invisible tag
    characters go): such a part is written as its ASCII escape (``\\uXXXX``, ``[`` too, so
    no line reads as a source header), which costs at least as much and which neutralising
    leaves alone. `neutralise` may be the same rule remembered across requests.
    """

    def sent(part: str) -> str:
        if neutralise(part) == part:
            return part
        return json.dumps(part, ensure_ascii=True)[1:-1].replace("[", "\\u005b")

    parts = [
        *texts,
        *(f"{sent(call.name)}({sent(call.arguments)})" for call in tool_calls),
        *map(sent, verbatim),
    ]
    return "\n".join(part for part in parts if part)
