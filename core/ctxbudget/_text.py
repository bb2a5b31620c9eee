"""Text a model can be sent: valid Unicode, with no lone UTF-16 surrogate.

Every string that reaches a prompt or a provider's JSON passes `check_text` (through
the `Text` field type of the input models, or directly), so a surrogate is refused
where it enters, with its index, not deep inside a tokenizer or an SDK.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

__all__ = ["Text", "check_text", "check_text_fast"]


def check_text(value: str) -> str:
    """Reject text no tokenizer or provider can encode: lone UTF-16 surrogates."""
    for index, char in enumerate(value):
        if "\ud800" <= char <= "\udfff":
            raise ValueError(
                f"contains a lone surrogate U+{ord(char):04X} at index {index}, which is not "
                "valid Unicode and cannot be sent to a model; decode the source with "
                "errors='replace' (or fix the text) before building the prompt"
            )
    return value


def check_text_fast(value: str) -> str:
    """`check_text(value)`, with a C loop for the text that passes."""
    # The scan above is per character; encoding is a C loop that fails exactly on
    # surrogates, so only failing text pays for the scan that finds the index.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return check_text(value)
    return value


Text = Annotated[str, AfterValidator(check_text_fast)]
"""A string that is valid Unicode (no lone surrogates)."""
