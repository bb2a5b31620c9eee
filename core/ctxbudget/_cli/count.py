"""`ctxbudget count FILE...`: token counts with a model's own tokenizer, offline."""

from __future__ import annotations

import argparse
from typing import Final

from ctxbudget import count_method_of
from ctxbudget._cli.command import Command
from ctxbudget._cli.options import add_model, read_text, tokenizer
from ctxbudget._cli.outcome import count_note, print_json, terminal

__all__ = ["COMMAND"]

_NAME: Final = "count"
_HELP: Final = "count the tokens of files with a model's tokenizer"
_DESCRIPTION: Final = (
    "Count the tokens of each file (UTF-8 text) with the model's own tokenizer, as the "
    "assembler counts them; for Claude and Gemini, whose tokenizers are not public, an "
    "upper-bound estimate, labelled as such. Offline with the offline extra."
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="text files to count")
    add_model(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _run(args: argparse.Namespace) -> int:
    counter, model = tokenizer(args)
    method = count_method_of(counter)
    texts = [(path, read_text(path)) for path in args.files]
    rows = [(path, counter.count(text), len(text)) for path, text in texts]
    total = sum(tokens for _, tokens, _ in rows)
    if args.json:
        print_json(
            {
                "model": model,
                "encoding": counter.name,
                "method": method.label,
                "exact": method.exact,
                "margin": method.margin,
                "files": [{"path": p, "tokens": t, "characters": c} for p, t, c in rows],
                "total": total,
            }
        )
        return 0
    view = terminal()
    grid = view.table("file", "tokens", "characters", right=("tokens", "characters"))
    for path, tokens, characters in rows:
        grid.add_row(path, f"{tokens:,}", f"{characters:,}")
    if len(rows) > 1:
        grid.add_row("total", f"{total:,}", f"{sum(c for _, _, c in rows):,}")
    out = view.console()
    out.print(grid)
    note = count_note(method.exact, method.margin)
    how = "" if note is None else f": {note}"
    out.print(f"Counted with {counter.name} ({model}){how}.", soft_wrap=True)
    return 0


COMMAND: Final = Command(_NAME, _HELP, _DESCRIPTION, _add_arguments, _run)
