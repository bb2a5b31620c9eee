"""`ctxbudget inspect CHUNKS.jsonl --question Q`: the demo's view for your own retrieved chunks."""

from __future__ import annotations

import argparse
from typing import Final

from ctxbudget import Budget, Chunk, ContextAssembler, Principal, SourceOptions, Turn
from ctxbudget._cli.command import Command
from ctxbudget._cli.errors import CliError
from ctxbudget._cli.jsonl import read_jsonl
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

_NAME: Final = "inspect"
_HELP: Final = "assemble your own retrieved chunks (JSONL) and show every decision"
_DESCRIPTION: Final = (
    "Assemble the chunks in CHUNKS.jsonl (one Chunk per line, as Chunk.model_dump_json() "
    "writes them) for a question, and show the prompt, a budget bar per claimant and every "
    "dropped item with its reason; --json prints the prompt, sources and report for scripts. "
    "Chunks with a tenant or groups are shown only to a principal given with --tenant/--as."
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("chunks", metavar="CHUNKS.jsonl", help="one Chunk per line")
    parser.add_argument("--question", "-q", required=True, metavar="Q", help="the user's question")
    parser.add_argument(
        "--history", metavar="FILE", help="conversation so far: one Turn per line (JSONL)"
    )
    add_budget(parser)
    add_model(parser)
    parser.add_argument(
        "--format",
        choices=("markdown", "xml"),
        default="markdown",
        help="how sources are shown to the model (default: markdown)",
    )
    parser.add_argument("--tenant", metavar="T", help="ask as a principal of tenant T")
    add_principal(parser)
    add_json(parser)


def _run(args: argparse.Namespace) -> int:
    question: str = args.question
    if not question.strip():
        raise CliError("--question is empty; pass the question the chunks were retrieved for")
    chunks = read_jsonl(args.chunks, Chunk)
    history = read_jsonl(args.history, Turn) if args.history else []
    needs: tuple[Claimant, ...] = ("retrieved", "history") if history else ("retrieved",)
    counter, model = tokenizer(args)
    budget = load_budget(args.budget, total=args.total, default=Budget.default(), needs=needs)
    principal = (
        Principal(tenant=args.tenant, groups=frozenset(args.groups or ()))
        if args.tenant is not None or args.groups
        else None
    )
    assembler = ContextAssembler(
        tokenizer=counter, budget=budget, sources=SourceOptions(source_format=args.format)
    )
    result = assembler.assemble(
        question=question, chunks=chunks, history=history, principal=principal
    )
    emit(
        Outcome(
            title=f"ctxbudget inspect {args.chunks}",
            question=question,
            model=model,
            budget=budget,
            result=result,
            principal=principal,
            notes=(f"{len(chunks)} chunks, {len(history)} history turns",),
        ),
        as_json=args.json,
    )
    return 0


COMMAND: Final = Command(_NAME, _HELP, _DESCRIPTION, _add_arguments, _run)
