"""Parsing the command line, dispatching to a command, and turning failures into one line.

Every failure is one line on stderr, ``ctxbudget: <what to change>`` (word-wrapped when
stderr is a terminal), never a traceback: exit status 2 when the command line is wrong
(an unknown option, a missing argument), 1 when what it names is (a file, its data, a
budget, a model name).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Final, NoReturn

from ctxbudget import CtxBudgetError
from ctxbudget._cli import count, demo, inspect_chunks, prose
from ctxbudget._cli.command import Command
from ctxbudget._cli.errors import CliError, UsageError

__all__ = ["COMMANDS", "main", "parser"]

COMMANDS: Final[tuple[Command, ...]] = (demo.COMMAND, inspect_chunks.COMMAND, count.COMMAND)
"""Every subcommand, in the order ``--help`` lists them. Add a command here, and only here."""

DEFAULT_COMMAND: Final = demo.COMMAND.name
"""What bare ``ctxbudget`` (or ``ctxbudget --json``, options only) runs."""

_TOP_LEVEL: Final = frozenset({"-h", "--help", "--version"})

EVAL: Final = "eval"
"""The measurement harness, which has its own parser (`ctxbudget.eval._cli.cli_main`)."""

EVAL_HELP: Final = "measure ordering, k and metadata on your model: position, knee, ablation"


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised as `UsageError` instead of printed with the usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; see '{self.prog} --help'")


def parser() -> argparse.ArgumentParser:
    """The whole command line: ``--version`` and one subparser per entry of `COMMANDS`."""
    top = _Parser(
        prog="ctxbudget",
        description="Build the prompt a RAG or agent app sends to its model, under a hard "
        f"token budget, and show every decision. Without a command, runs {DEFAULT_COMMAND}.",
        epilog="Exit status: 0 done, 1 a failure (file, data, budget, model), 2 a usage error.",
    )
    top.add_argument("--version", action="store_true", help="print the version and exit")
    commands = top.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    # Listed for --help and the usage error's choices only: `main` hands ``eval ...`` to the
    # harness's parser before this one runs, so the other commands never import the harness.
    commands.add_parser(EVAL, help=EVAL_HELP, add_help=False)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ctxbudget`` with `argv` (default: the process's arguments); return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == EVAL:  # its own parser; plain `ctxbudget` never imports it
        from ctxbudget.eval._cli import cli_main

        try:
            return cli_main(args[1:], prog="ctxbudget eval")
        except SystemExit as exc:  # argparse: --help, or a usage error (2)
            return exc.code if isinstance(exc.code, int) else 0
    if not args or (args[0].startswith("-") and args[0] not in _TOP_LEVEL):
        args.insert(0, DEFAULT_COMMAND)
    try:
        parsed = parser().parse_args(args)
        if parsed.version:
            print(f"ctxbudget {version('ctxbudget')}")
            return 0
        status: int = parsed.run(parsed)
    except SystemExit as exc:  # --help printed its text
        return exc.code if isinstance(exc.code, int) else 0
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except CtxBudgetError as exc:
        return _fail(str(exc), 1)
    except BrokenPipeError:
        # The reader went away (`ctxbudget demo | head`): stop quietly, as cat does.
        _silence_stdout()
        return 1
    except UnicodeEncodeError as exc:
        return _fail(
            f"this terminal's encoding ({exc.encoding}) cannot show {exc.object[exc.start]!r}; "
            "set PYTHONIOENCODING=utf-8, or pass --json",
            1,
        )
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"cannot read{where}: {exc.strerror or exc}", 1)
    except KeyboardInterrupt:
        return 130
    return status


def _fail(message: str, code: int) -> int:
    line = f"ctxbudget: {' '.join(message.splitlines())}"
    # Wrapped only for a reader at a terminal: a log or a script gets the one line to grep.
    columns = prose.terminal_width(sys.stderr)
    print(line if columns is None else prose.wrap(line, columns), file=sys.stderr)
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in tests)
        pass
