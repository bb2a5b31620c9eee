"""Options several commands share, and reading what they name: budgets, models, text files."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from pathlib import Path

from ctxbudget import (
    Budget,
    InvalidBudgetError,
    Tokenizer,
    TokenizerError,
    get_tokenizer,
    tokenizer_from_file,
)
from ctxbudget._cli.errors import CliError, UsageError
from ctxbudget._tokens import PATTERN_NAMES
from ctxbudget.types import Claimant

__all__ = [
    "add_budget",
    "add_json",
    "add_model",
    "add_principal",
    "decode_text",
    "load_budget",
    "positive_int",
    "read_text",
    "tokenizer",
]

DEFAULT_MODEL = "gpt-4o"


def positive_int(value: str) -> int:
    """An argparse type: a whole number above 0."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {number}")
    return number


def add_model(parser: argparse.ArgumentParser) -> None:
    """``--model``, or ``--tokenizer-file`` (with ``--pattern`` and ``--sha256``) in its place:
    the two ways to say what counts, read by `tokenizer`."""
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--model",
        metavar="M",
        help="model whose tokenizer counts, as a framework names it (gpt-4o, openai:gpt-4o, "
        "claude-sonnet-4-5, gemini-2.5-flash, a Bedrock id ...), or a tiktoken encoding "
        f"(default: {DEFAULT_MODEL})",
    )
    chosen.add_argument(
        "--tokenizer-file",
        metavar="PATH",
        help="count with the model's own tokenizer file instead: a tokenizer.json, tekken.json, "
        "SentencePiece .model (Gemma 3's for Gemini), or tiktoken-format ranks file (.tiktoken, "
        "Llama's tokenizer.model) with --pattern",
    )
    parser.add_argument(
        "--pattern",
        metavar="P",
        help="the split pattern of a tiktoken-format --tokenizer-file: a regex or one of "
        f"{', '.join(sorted(PATTERN_NAMES))}",
    )
    parser.add_argument(
        "--sha256", metavar="HEX", help="refuse a --tokenizer-file whose sha256 is not HEX"
    )


def add_budget(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--budget", metavar="FILE", help="a budget file, .toml or .json (default: Budget.default())"
    )
    parser.add_argument(
        "--total", type=positive_int, metavar="N", help="override the budget's total tokens"
    )


def add_principal(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as",
        dest="groups",
        action="append",
        metavar="GROUP",
        help="ask as a member of GROUP (repeat for several groups)",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document (prompt, sources, report) instead of the view",
    )


def tokenizer(args: argparse.Namespace) -> tuple[Tokenizer, str]:
    """The tokenizer ``--model`` or ``--tokenizer-file`` names, and the name to show for it
    (the model, or the file's path). `get_tokenizer` and `tokenizer_from_file` read them, as
    for the library; a model without an offline tokenizer gets the command line's remedy."""
    if args.tokenizer_file is None:
        for option in ("pattern", "sha256"):
            if getattr(args, option) is not None:
                raise UsageError(f"--{option} applies to --tokenizer-file PATH; pass one")
        model: str = args.model or DEFAULT_MODEL
        try:
            return get_tokenizer(model), model
        except TokenizerError as exc:
            raise CliError(
                f"{exc}; on the command line, pass --tokenizer-file PATH (the model's own "
                "tokenizer.json, tekken.json or SentencePiece .model, or a tiktoken-format file "
                "with --pattern) in place of --model"
            ) from None
    path: str = args.tokenizer_file
    if not Path(path).is_file():
        raise CliError(f"--tokenizer-file {path} {_missing(path)}")
    counter = tokenizer_from_file(path, pattern=args.pattern, sha256=args.sha256)
    return counter, path


def load_budget(
    path: str | None, *, total: int | None, default: Budget, needs: Collection[Claimant]
) -> Budget:
    """The budget in `path` (else `default`), with `total` replaced when given.

    `needs` are the claimants the command sends: a file without an allocation for one
    is refused up front, naming the table to add.
    """
    if path is not None:
        if not Path(path).is_file():
            raise CliError(f"budget file {path} {_missing(path)}")
        budget = Budget.from_file(path, needs=needs)
    else:
        budget = default
    if total is not None:
        try:
            budget = Budget.parse({**budget.model_dump(), "total": total})
        except InvalidBudgetError as exc:
            raise CliError(f"--total {total}: {exc}") from None
    return budget


def read_text(path: str, what: str = "file") -> str:
    """The UTF-8 text of `path`, or a `CliError` saying why it cannot be read."""
    file = Path(path)
    if not file.exists():
        raise CliError(f"{what} {path} {_missing(path)}")
    try:
        data = file.read_bytes()
    except IsADirectoryError:
        raise CliError(f"{what} {path} is a directory; give a file") from None
    except OSError as exc:
        raise CliError(f"cannot read {what} {path}: {exc.strerror}") from None
    return decode_text(data, f"{what} {path}")


def decode_text(data: bytes, name: str) -> str:
    """`data` as UTF-8 text (a byte-order mark dropped), or a `CliError` naming `name`."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{name} is not UTF-8 text (byte {exc.start} cannot be decoded); convert it to UTF-8"
        ) from None


def _missing(path: str) -> str:
    return "is a directory; give a file" if Path(path).is_dir() else "does not exist"
