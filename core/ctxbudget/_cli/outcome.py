"""What `demo` and `inspect` produce: one assembly, shown in a terminal or as one JSON document."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from ctxbudget import Assembled, Budget, Principal
from ctxbudget._cli.errors import CliError

__all__ = ["Outcome", "count_note", "document", "emit", "print_json"]


@dataclass(frozen=True)
class Outcome:
    """One assembly and what it was asked: the data both renderings read."""

    title: str
    question: str
    model: str
    budget: Budget
    result: Assembled
    principal: Principal | None
    notes: tuple[str, ...] = ()
    """Lines shown under the question (what a preset shows); ``notes`` in the JSON."""
    extra: tuple[tuple[str, Any], ...] = ()
    """Fields a command puts first in the JSON document."""


def document(outcome: Outcome) -> dict[str, Any]:
    """The JSON document: the prompt, what each [n] is (with its chunk's fields), the report."""
    result = outcome.result
    principal = outcome.principal
    return {
        **dict(outcome.extra),
        "question": outcome.question,
        "model": outcome.model,
        "principal": None if principal is None else principal.model_dump(mode="json"),
        "notes": list(outcome.notes),
        "prompt": result.text,
        "sources": [
            {
                "n": source.n,
                "id": source.chunk.id,
                "document_id": source.chunk.document_id,
                "document": source.document,
                "covers": list(source.covers),
                "text": source.text,
                "chunk": source.chunk.model_dump(mode="json"),
            }
            for source in result.sources
        ],
        "report": result.report.model_dump(mode="json"),
    }


def count_note(exact: bool | None, margin: float | None) -> str | None:
    """What a count that is not exact promises, in a few words; None for an exact one."""
    if exact is not False:
        return None
    if margin is not None:
        return f"an upper-bound estimate, {margin:.0%} above the worst ratio measured"
    return "not the model's own tokenizer, so not exact"


def print_json(data: object) -> None:
    """Exactly one JSON document on stdout (ASCII, so any terminal encoding can print it)."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def emit(outcome: Outcome, *, as_json: bool) -> None:
    """Print `outcome` as JSON, or as the terminal view (which needs rich)."""
    if as_json:
        print_json(document(outcome))
        return
    terminal().show(outcome)


def terminal() -> Any:
    """The terminal view module; a `CliError` with the install command when rich is missing."""
    try:
        from ctxbudget._cli import terminal
    except ImportError as exc:
        package = (exc.name or "rich").split(".")[0]
        raise CliError(
            f"the terminal view needs {package}: pip install 'ctxbudget[cli]' (or pass --json)"
        ) from None
    return terminal
