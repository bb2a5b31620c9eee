"""What the command reports as one line on stderr, and the exit status it returns."""

from __future__ import annotations

__all__ = ["CliError", "UsageError"]


class CliError(Exception):
    """A failure the user can fix (a file, its data, a budget, a model name): exit status 1."""

    code = 1


class UsageError(CliError):
    """The command line itself is wrong (an unknown option, a missing argument): exit status 2."""

    code = 2
