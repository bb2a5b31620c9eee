"""The terminal view, drawn with rich: styled on a terminal, plain text everywhere else.

Plain means no escape code at all (not even bold): stdout is not a terminal, or
``NO_COLOR`` is set (https://no-color.org). Prompt text is printed as `Text`, never
as rich markup, so ``[1]`` in a prompt stays ``[1]``, and without wrapping, so it can
be copied as the model would read it; the view's own prose is word-wrapped to the width.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxbudget import Budget, Report
from ctxbudget._cli.outcome import Outcome, count_note
from ctxbudget._cli.prose import PIPE_WIDTH, wrap

__all__ = ["REASONS", "console", "plain", "show", "table"]

REASONS: Final = {
    "forbidden": "the principal may not see it",
    "below_floor": "under the relevance floor",
    "duplicate": "a near-copy of a better-ranked source",
    "empty": "no visible text",
    "oversize": "larger than all of its claimant's space",
    "over_budget": "did not fit in the space left",
}
"""Each drop reason in a few words, as `Dropped.reason` describes it."""

_BAR = 20
"""Width of a budget bar, in characters."""


def plain() -> bool:
    """Whether to print without styles: stdout is not a terminal, or NO_COLOR is set."""
    return bool(os.environ.get("NO_COLOR")) or not sys.stdout.isatty()


def console() -> Console:
    """A console on stdout: styled on a terminal, plain text otherwise."""
    if plain():
        # No colour system at all: rich then writes no escape code, not even bold.
        return Console(
            file=sys.stdout,
            color_system=None,
            force_terminal=False,
            highlight=False,
            emoji=False,
            width=None if sys.stdout.isatty() else PIPE_WIDTH,
        )
    return Console(file=sys.stdout, highlight=False, emoji=False)


def table(*columns: str, right: Sequence[str] = ()) -> Table:
    """A borderless table with these columns; those in `right` are right-aligned."""
    grid = Table(box=None, show_edge=False, pad_edge=False)
    for column in columns:
        grid.add_column(column, overflow="fold", justify="right" if column in right else "left")
    return grid


def show(outcome: Outcome) -> None:
    """The prompt, its sources, a budget bar per claimant, every dropped item, then notes."""
    out = console()
    result, report = outcome.result, outcome.result.report
    out.rule(Text(outcome.title, style="bold"))
    question = Text(wrap(f"Question: {outcome.question}", out.width))
    question.stylize("bold", 0, len("Question:"))
    out.print(question, soft_wrap=True)
    for note in outcome.notes:
        out.print(Text(wrap(note, out.width), style="italic"), soft_wrap=True)
    out.rule(f"Prompt: {report.total:,} of {report.budget:,} tokens ({outcome.model})")
    out.print(Text(result.text), soft_wrap=True)

    out.rule(f"Sources: {len(result.sources)}")
    sources = table("[n]", "chunk", "document")
    for source in result.sources:
        sources.add_row(
            f"[{source.n}]",
            source.chunk.id,
            f"whole, in place of {len(source.covers)} chunks"
            if source.document
            else source.chunk.document_id,
        )
    out.print(sources if result.sources else "No source reached the prompt.")

    out.rule("Budget")
    out.print(_budget(outcome.budget, report))

    out.rule(f"Dropped: {len(report.dropped)}")
    # Most drops are ruled out uncounted (`Dropped.tokens` is None): a column only when counted.
    counted = any(item.tokens is not None for item in report.dropped)
    dropped = table(
        "claimant", "kind", "id", "reason", *(["tokens"] if counted else []), right=("tokens",)
    )
    for item in report.dropped:
        row: list[str | Text] = [
            item.claimant,
            item.kind,
            item.id,
            Text(item.reason, style="yellow"),
        ]
        if counted:
            row.append("" if item.tokens is None else f"{item.tokens:,}")
        dropped.add_row(*row)
    out.print(dropped if report.dropped else "Nothing was dropped.")
    for reason in dict.fromkeys(item.reason for item in report.dropped):
        out.print(Text.assemble(("  " + reason, "yellow"), f": {REASONS[reason]}"))
    out.rule()
    for line in _summary(report):
        out.print(Text(wrap(line, out.width)), soft_wrap=True)


def _budget(budget: Budget, report: Report) -> Table:
    """One row per allocation in serving order: a bar of what it used of its cap."""
    grid = table("claimant", "priority", "used", "tokens", "note", right=("priority", "tokens"))
    grid.columns[2].no_wrap = True
    for allocation in budget.by_priority():
        name = allocation.name
        used = report.sizes.get(name, 0)
        cap = budget.available if allocation.max is None else min(allocation.max, budget.available)
        notes = [f"floor {allocation.min:,}"] if allocation.min else []
        if name == "retrieved" and report.retrieval_trimmed:
            notes.append(
                "trimmed by " + ", ".join(f"{k} {v:,}" for k, v in report.trimmed_by.items())
            )
        elif name in report.trimmed:
            notes.append("trimmed")
        grid.add_row(
            name, str(allocation.priority), _bar(used, cap), f"{used:,} / {cap:,}", ", ".join(notes)
        )
    grid.add_row(
        Text("prompt", style="bold"),
        "",
        _bar(report.total, report.budget),
        f"{report.total:,} / {report.budget:,}",
        f"{budget.reserve_output:,} more kept for the answer",
    )
    return grid


def _bar(used: int, cap: int) -> Text:
    """`used` of `cap` as `_BAR` cells; anything used shows at least one full cell."""
    full = 0 if cap <= 0 else min(_BAR, round(_BAR * used / cap))
    if used and not full:
        full = 1
    return Text.assemble(("█" * full, "green"), ("░" * (_BAR - full), "dim"))


def _summary(report: Report) -> list[str]:
    lines = []
    if report.escalated:
        lines.append(f"Escalated: {report.escalated} was sent whole in place of its chunks.")
    if report.final_check_drops:
        lines.append(
            f"The exact count of the final text dropped {report.final_check_drops} more item(s)."
        )
    lines.append(
        f"Cacheable prefix: {report.prefix_tokens:,} tokens, sha256 {report.prefix_hash[:16]}…"
    )
    lines.extend(f"Prefix warning: {warning}" for warning in report.prefix_warnings)
    note = count_note(report.count_exact, report.count_margin)
    if note is not None:
        lines.append(f"Counted with {report.count_method}: {note}.")
    return lines
