"""Exceptions raised by ctxbudget.

    CtxBudgetError                 base: catch this to catch everything we raise
    ├── ContextBudgetError         a floor or a priority-0 part cannot fit
    ├── TokenizerError             no tokenizer for a model name, or a bad one
    │   └── VocabularyError        an offline vocabulary failed its sha256 check
    ├── InputError                 inputs that contradict each other or the budget
    └── InvalidBudgetError         a budget that cannot be used (also a ValueError)

Field-level problems in the data models (`Chunk`, `Budget`, ...) surface as
pydantic's `ValidationError`, whose messages name the field and the fix;
`Budget.parse` and `Budget.from_file` turn a budget's into one `InvalidBudgetError` sentence.
"""

from __future__ import annotations

__all__ = [
    "ContextBudgetError",
    "CtxBudgetError",
    "InputError",
    "InvalidBudgetError",
    "TokenizerError",
    "VocabularyError",
]


class CtxBudgetError(Exception):
    """Base class for every error ctxbudget raises on purpose."""


class ContextBudgetError(CtxBudgetError):
    """A claimant's floor, or a never-trimmed (priority 0) part, does not fit.

    Carries the numbers so callers can log or react without parsing the message.
    """

    def __init__(self, claimant: str, needed: int, left: int, detail: str = "") -> None:
        self.claimant = claimant
        self.needed = needed
        self.left = left
        self.detail = detail
        message = f"{claimant!r} needs {needed:,} tokens but only {left:,} are left"
        if detail:
            message = f"{message}: {detail}"
        super().__init__(message)

    def __reduce__(self) -> tuple[type[ContextBudgetError], tuple[str, int, int, str]]:
        return (type(self), (self.claimant, self.needed, self.left, self.detail))


class TokenizerError(CtxBudgetError):
    """No tokenizer could be built for what was asked."""


class VocabularyError(TokenizerError):
    """An offline tokenizer vocabulary is missing or does not match its published hash."""


class InputError(CtxBudgetError, ValueError):
    """Inputs to `assemble` that are individually valid but contradict each other or the budget."""


class InvalidBudgetError(CtxBudgetError, ValueError):
    """A budget that cannot be used, said in one sentence that names what to change."""
