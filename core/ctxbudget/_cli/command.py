"""A subcommand: its name, its help, the options it adds, and what it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Command"]


@dataclass(frozen=True)
class Command:
    """One ``ctxbudget`` subcommand; `app.COMMANDS` lists them all."""

    name: str
    help: str
    """One line for ``ctxbudget --help``."""
    description: str
    """A paragraph for ``ctxbudget NAME --help``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    """Does the work and returns the exit status; raises `CliError` for what the user can fix."""
