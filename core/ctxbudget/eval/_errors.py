"""The one exception the measurement harness adds to ctxbudget's hierarchy."""

from __future__ import annotations

from ctxbudget import CtxBudgetError

__all__ = ["EvalError"]


class EvalError(CtxBudgetError, ValueError):
    """An experiment that cannot run as asked: a bad case or case file, a pool too small
    for the sizes asked, a chunk the assembler left out, a generator that returned no text."""
