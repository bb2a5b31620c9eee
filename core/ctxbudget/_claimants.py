"""The parts of a prompt that compete for tokens, by name: what a budget allocates to."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["CLAIMANTS", "Claimant"]

Claimant = Literal["system", "question", "retrieved", "examples", "tools", "history", "memory"]
"""The parts of a prompt that compete for tokens."""

CLAIMANTS: tuple[Claimant, ...] = get_args(Claimant)
