"""Types for running the `ctxbudget` command in tests (the `cli` fixture: tests/cli/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ran:
    """What one run of the command left: exit status, stdout, stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Run = Callable[..., Ran]
"""A fixture that runs the command with these arguments."""
