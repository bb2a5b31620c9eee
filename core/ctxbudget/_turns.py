"""Conversation history on its own: turns and a token budget in, the turns to send out.

`trim_turns` is the history claimant of `ContextAssembler` (README "How each claimant
shrinks") without the rest of the prompt: the latest unit, the first, then the most
recent that fit, old tool results cleared first, a gap marker (or a summary) wherever
turns are missing, and the exact count of the result. The adapters use it to trim a
framework's message list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._arguments import check_int, check_type
from ctxbudget._budget import Allocation
from ctxbudget._conversation import HistoryOptions, Summarize, SummaryCache
from ctxbudget._exact import settle
from ctxbudget._history import HistoryClaim
from ctxbudget._inputs import Role, Turn, check_token_range, sequence_of
from ctxbudget._neutralise import neutralise_section
from ctxbudget._otel import traced_entry
from ctxbudget._report import Dropped, SummarySpan, nothing_in
from ctxbudget._tokens import TokenCounter, Tokenizer, tokenizer_of

__all__ = [
    "ToolCall",
    "TrimmedHistory",
    "history_options",
    "message_text",
    "trim_turns",
    "trim_with",
]


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
    """What one framework chat message costs, as the text of its `Turn` (README "Writing an
    adapter"): its texts, each tool call as ``name(arguments)``, then the parts sent back
    verbatim (a model's signed reasoning, names, ids), one per line; empty parts left out.

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


class TrimmedHistory(BaseModel):
    """The turns that fit a token budget, in order, and where turns were left out."""

    model_config = ConfigDict(frozen=True)

    messages: tuple[tuple[Role, str], ...] = Field(
        description="Kept turns as (role, content) in order, with a gap marker (or a summary) "
        "as a user note wherever turns are missing; a cleared tool result's content is its "
        "placeholder."
    )
    kept: tuple[int, ...] = Field(description="Indices of the kept turns in the input, ascending.")
    gaps: tuple[tuple[int, int], ...] = Field(
        description="Each run of left-out turns as (start, stop) input indices, stop exclusive."
    )
    text: str = Field(description="The history section as the prompt shows it; '' when empty.")
    tokens: int = Field(description="Exact token count of text.")
    budget: int = Field(description="The max_tokens the history was trimmed to.")
    dropped: tuple[Dropped, ...] = Field(description="Every turn left out, by id or position.")
    cleared: tuple[int, ...] = Field(
        default=(),
        exclude_if=nothing_in,
        description="Indices of the kept tool turns whose content was replaced by a placeholder "
        "(in messages), ascending. Left out of dumps when empty.",
    )
    summaries: tuple[SummarySpan, ...] = Field(
        default=(),
        exclude_if=nothing_in,
        description="When a summariser is set: each run of left-out turns and whether a summary "
        "or the gap marker stands there. Left out of dumps when empty.",
    )


@traced_entry("ctxbudget.trim_turns")
def trim_turns(
    turns: Sequence[Turn],
    *,
    max_tokens: int,
    tokenizer: str | Tokenizer,
    min_tokens: int = 0,
    options: HistoryOptions | None = None,
) -> TrimmedHistory:
    """Keep the latest unit, the first and the most recent units that fit in `max_tokens`,
    counted exactly; old tool results are cleared before whole units go (`options`).

    Raises `ContextBudgetError` when the latest unit alone does not fit. No summary outlives
    the call, so a summarised run ends where the fewest turns are left out (`summary_headroom`
    pays only in a session); for repeated calls prefer `ContextAssembler.trim_history`, which
    keeps token counts and summaries cached across requests.
    """
    options = history_options("options", options)
    return trim_with(
        TokenCounter(tokenizer_of(tokenizer)),
        turns,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        options=options.model_copy(update={"summary_headroom": 0}),
        summaries=SummaryCache(),
    )


def history_options(name: str, options: object) -> HistoryOptions:
    """An entry point's history options: `HistoryOptions()` for None, else checked."""
    if options is None:
        return HistoryOptions()
    return check_type(
        name,
        options,
        HistoryOptions,
        "a HistoryOptions",
        "build it with HistoryOptions(keep_tool_results=..., summarize=..., ...)",
    )


def trim_with(
    counter: TokenCounter,
    turns: Sequence[Turn],
    *,
    max_tokens: int,
    min_tokens: int,
    options: HistoryOptions,
    summaries: SummaryCache,
    summarize: Summarize | None = None,
) -> TrimmedHistory:
    """`trim_turns` with a given counter and summary cache (the assembler's, which outlive a
    call); `summarize` overrides `options.summarize` for this call."""
    turns = sequence_of("turns", turns, Turn)
    max_tokens = check_int("max_tokens", max_tokens)
    max_tokens, min_tokens = check_token_range(max_tokens, check_int("min_tokens", min_tokens))
    allocation = Allocation("history", min=min_tokens, max=max_tokens, priority=1)
    claim = HistoryClaim(
        allocation,
        turns,
        counter=counter,
        options=options,
        summarize=summarize,
        summaries=summaries,
    )
    _, rendered = settle({"history": claim}, max_tokens, counter)
    fit = rendered.fits["history"]
    entries = claim.entries(fit)
    return TrimmedHistory(
        messages=tuple((entry.role, entry.content) for entry in entries),
        kept=tuple(entry.position for entry in entries if entry.position is not None),
        gaps=tuple(claim.gaps(fit)),
        text=rendered.text,
        tokens=rendered.total,
        budget=max_tokens,
        dropped=tuple(claim.drops(fit)),
        cleared=tuple(e.position for e in entries if e.cleared and e.position is not None),
        summaries=tuple(claim.summary_spans(fit)),
    )
