"""`ctxbudget demo`: retrieve from the sample handbook, assemble, show what reaches the model."""

from __future__ import annotations

import argparse
from typing import Final

from ctxbudget import Budget, ContextAssembler, Principal, SourceOptions, _demo
from ctxbudget._cli.command import Command
from ctxbudget._cli.errors import CliError
from ctxbudget._cli.options import (
    add_budget,
    add_json,
    add_model,
    add_principal,
    load_budget,
    tokenizer,
)
from ctxbudget._cli.outcome import Outcome, emit
from ctxbudget.types import Claimant

__all__ = ["COMMAND"]

_NAME: Final = "demo"
_HELP: Final = "assemble a prompt from the built-in sample handbook and show every decision"
_DESCRIPTION: Final = (
    "Retrieve from a small sample company handbook with BM25, assemble the prompt under a "
    "token budget, and show the prompt, a budget bar per claimant and every dropped item "
    "with its reason. Offline; needs the cli extra. --preset picks a question that shows "
    "one rule; without --question or --preset the first preset runs."
)

SENDS: Final[tuple[Claimant, ...]] = ("retrieved", "examples", "tools", "history")
"""What the demo sends besides system and question, which every budget has."""

TOP_K: Final = 12
"""Chunks the retriever returns, as a RAG app's top-k."""

MIN_RELEVANCE: Final = 0.3
"""The relevance floor: chunks under 30% of the best match's BM25 score are not sent."""

DEFAULT_GROUP: Final = "staff"


PRESETS: Final = {preset.name: preset for preset in _demo.PRESETS}

RESERVE_OUTPUT: Final = 500
"""The answer's reserve when a preset budgets for a small window, as `Budget.default()` keeps."""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    asked = parser.add_mutually_exclusive_group()
    asked.add_argument("--question", "-q", metavar="Q", help="your own question")
    asked.add_argument(
        "--preset",
        choices=list(PRESETS),
        metavar="NAME",
        help="a question that shows one rule: " + ", ".join(PRESETS),
    )
    add_budget(parser)
    add_model(parser)
    parser.add_argument(
        "--format",
        choices=("markdown", "xml"),
        default="markdown",
        help="how sources are shown to the model (default: markdown)",
    )
    add_principal(parser)
    add_json(parser)


def _run(args: argparse.Namespace) -> int:
    preset = PRESETS[args.preset] if args.preset else None
    if args.question is None and preset is None:
        preset = _demo.PRESETS[0]
    question: str = preset.question if preset else args.question
    if not question.strip():
        raise CliError("--question is empty; ask something, e.g. --question 'Can I return it?'")

    counter, model = tokenizer(args)
    window = preset.window if preset else None
    default = (
        Budget.default()
        if window is None
        else Budget.for_context_window(window, reserve_output=RESERVE_OUTPUT)
    )
    budget = load_budget(args.budget, total=args.total, default=default, needs=SENDS)
    try:
        # Cached per tokenizer: every tokenizer get_tokenizer builds is hashable.
        handbook = _demo.handbook(counter)  # type: ignore[arg-type]
    except ImportError as exc:
        raise CliError(f"ctxbudget demo needs {exc.name}: pip install 'ctxbudget[cli]'") from None
    groups = frozenset(args.groups or [DEFAULT_GROUP])
    principal = Principal(tenant=_demo.TENANT, groups=groups)
    assembler = ContextAssembler(
        tokenizer=counter,
        budget=budget,
        sources=SourceOptions(
            source_format=args.format,
            min_relevance=MIN_RELEVANCE,
            conflict_policy="prefer_newer",
            loader=handbook,
        ),
    )
    result = assembler.assemble(
        system=_demo.SYSTEM,
        examples=_demo.EXAMPLES,
        tools=_demo.TOOLS,
        history=_demo.HISTORY,
        chunks=handbook.retrieve(question, k=TOP_K),
        question=question,
        principal=principal,
        now=_demo.NOW,
    )
    title = f"ctxbudget demo: preset {preset.name}" if preset else "ctxbudget demo"
    as_whom = f"Asking as: tenant {_demo.TENANT}, groups {', '.join(sorted(groups))}"
    notes = (f"Shows: {preset.shows}.", as_whom) if preset else (as_whom,)
    emit(
        Outcome(
            title=title,
            question=question,
            model=model,
            budget=budget,
            result=result,
            principal=principal,
            notes=notes,
            extra=(("preset", preset.name if preset else None),),
        ),
        as_json=args.json,
    )
    return 0


COMMAND: Final = Command(_NAME, _HELP, _DESCRIPTION, _add_arguments, _run)
