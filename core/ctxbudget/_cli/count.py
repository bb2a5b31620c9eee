"""`ctxbudget count [FILE...]`: token counts with a model's own tokenizer, offline.

Plain text only, so it works with the core alone (no ``cli`` extra, no rich). ``-`` or no
FILE reads standard input, as ``wc`` does; with no FILE at a terminal it is a usage error,
since waiting there for typed text looks like a hang.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

from ctxbudget import count_method_of
from ctxbudget._cli.command import Command
from ctxbudget._cli.errors import UsageError
from ctxbudget._cli.options import add_model, decode_text, read_text, tokenizer
from ctxbudget._cli.outcome import count_note, print_json
from ctxbudget._cli.prose import PIPE_WIDTH, cells, terminal_width, wrap

__all__ = ["COMMAND", "STDIN"]

_NAME: Final = "count"
_HELP: Final = "count the tokens of files with a model's tokenizer"
_DESCRIPTION: Final = (
    "Count the tokens of each file (UTF-8 text) with the model's own tokenizer, as the "
    "assembler counts them; for Claude and Gemini, whose tokenizers are not public, an "
    "upper-bound estimate, labelled as such. FILE - (or no FILE, in a pipe) reads standard "
    "input. Offline with the offline extra; needs no other extra."
)

STDIN: Final = "-"
"""The FILE that names standard input, as for cat and wc."""

_GAP: Final = "  "
"""Between two columns of the table."""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help=f"text files to count; {STDIN} (or none, in a pipe) reads standard input",
    )
    add_model(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _run(args: argparse.Namespace) -> int:
    paths = _paths(args.files)
    counter, model = tokenizer(args)
    method = count_method_of(counter)
    texts = [(path, _read(path)) for path in paths]
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
    grid = [(path, f"{tokens:,}", f"{characters:,}") for path, tokens, characters in rows]
    if len(rows) > 1:
        grid.append(("total", f"{total:,}", f"{sum(c for _, _, c in rows):,}"))
    for line in _table(("file", "tokens", "characters"), grid):
        print(line)
    note = count_note(method.exact, method.margin)
    how = "" if note is None else f": {note}"
    print(wrap(f"Counted with {counter.name} ({model}){how}.", _width()))
    return 0


def _paths(files: list[str]) -> list[str]:
    """The FILEs as given; standard input when there are none and it is not a terminal."""
    if not files:
        if sys.stdin.isatty():
            raise UsageError(
                f"give FILE..., or pipe the text in (or pass {STDIN} to read standard input); "
                "see 'ctxbudget count --help'"
            )
        return [STDIN]
    if files.count(STDIN) > 1:
        raise UsageError(f"{STDIN} (standard input) can be read once; give it once")
    return files


def _read(path: str) -> str:
    if path == STDIN:
        return decode_text(sys.stdin.buffer.read(), "standard input")
    return read_text(path)


def _table(header: tuple[str, str, str], rows: list[tuple[str, str, str]]) -> list[str]:
    """The header and rows as aligned columns: the first left-aligned, numbers to the right."""
    widths = [max(cells(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        first = row[0] + " " * (widths[0] - cells(row[0]))
        numbers = (" " * (widths[i] - cells(row[i])) + row[i] for i in range(1, len(row)))
        lines.append(_GAP.join((first, *numbers)).rstrip())
    return lines


def _width() -> int:
    return terminal_width(sys.stdout) or PIPE_WIDTH


COMMAND: Final = Command(_NAME, _HELP, _DESCRIPTION, _add_arguments, _run)
