"""Options several commands share, and reading what they name: budgets, models, text files."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from pathlib import Path

from ctxbudget import Budget, BudgetError, Claimant, Tokenizer, get_tokenizer
from ctxbudget._cli.errors import CliError

__all__ = [
    "add_budget",
    "add_json",
    "add_model",
    "add_principal",
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
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="M",
        help="model whose tokenizer counts, as a framework names it (gpt-4o, openai:gpt-4o, "
        "claude-sonnet-4-5, gemini-2.5-flash, a Bedrock id ...), or a tiktoken encoding "
        f"(default: {DEFAULT_MODEL})",
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


def tokenizer(model: str) -> Tokenizer:
    """The tokenizer for `model` (`get_tokenizer`: one model-name rule for the library and the
    command line); an unknown name raises `TokenizerError` saying how to pick one."""
    return get_tokenizer(model)


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
        except BudgetError as exc:
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
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(
            f"{what} {path} is not UTF-8 text (byte {exc.start} cannot be decoded); "
            "convert it to UTF-8"
        ) from None


def _missing(path: str) -> str:
    return "is a directory; give a file" if Path(path).is_dir() else "does not exist"
