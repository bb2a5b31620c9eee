"""Token counts made once at ingest, stored in a framework object's metadata, and read back.

A count stands in for tokenizing the text on every request, and in the final exact
count too, so a wrong one would let a prompt past its budget. Metadata is not ours
alone: a document's metadata is copied onto every node cut from it, loaders and users
write keys, a text may change after it was counted. So a count is read back only when
ctxbudget's own ingest wrote it for this very text and tokenizer: beside it stand the
tokenizer's name and a digest of the name, the count and the text (`ingest_metadata`,
`ingest_count`), so a changed text, tokenizer or count is counted again.

The digest is not keyed: it tells a count made for other data from the right one, not
a count forged on purpose by whoever writes the metadata and knows this scheme. Counts
that stand are still never below what the text's bytes must cost (docs/inputs.md, "Inputs").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

from ctxbudget._errors import TokenizerError
from ctxbudget._tokens import Tokenizer

__all__ = [
    "DIGEST_KEY",
    "INGEST_COUNT_KEYS",
    "TOKENIZER_KEY",
    "TOKENS_KEY",
    "count_digest",
    "ingest_count",
    "ingest_metadata",
]

TOKENS_KEY: Final = "ctxbudget_tokens"
"""Metadata key: the token count of the text, measured at ingest."""
TOKENIZER_KEY: Final = "ctxbudget_tokenizer"
"""Metadata key: the name of the tokenizer that measured it."""
DIGEST_KEY: Final = "ctxbudget_digest"
"""Metadata key: a digest of the tokenizer's name, the count and the text measured."""
INGEST_COUNT_KEYS: Final = (TOKENS_KEY, TOKENIZER_KEY, DIGEST_KEY)


def count_digest(text: str, tokenizer: str, tokens: int) -> str:
    data = f"{tokenizer}\x00{tokens}\x00{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:32]


def ingest_metadata(text: str, tokenizer: Tokenizer) -> dict[str, Any]:
    """The metadata an ingest step stores beside `text`: its count, the tokenizer, the digest.

    Flat str and int values, which every vector store accepts. `TokenizerError` when the
    tokenizer's count is not an int >= 0: a count that could not stand is never stored.
    """
    tokens = tokenizer.count(text)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise TokenizerError(
            f"tokenizer {tokenizer.name!r} returned {tokens!r} for a {len(text)}-character "
            "text; a token count must be an int >= 0"
        )
    return {
        TOKENS_KEY: tokens,
        TOKENIZER_KEY: tokenizer.name,
        DIGEST_KEY: count_digest(text, tokenizer.name, tokens),
    }


def ingest_count(metadata: Mapping[str, Any], text: str, tokenizer: str) -> int | None:
    """The count `ingest_metadata` stored in `metadata` for exactly `text` and the tokenizer
    named `tokenizer`; None when there is none, or it was made for another text or tokenizer
    (then the text is counted as usual)."""
    tokens = metadata.get(TOKENS_KEY)
    if (
        isinstance(tokens, bool)
        or not isinstance(tokens, int)
        or tokens < 0
        or metadata.get(TOKENIZER_KEY) != tokenizer
        or metadata.get(DIGEST_KEY) != count_digest(text, tokenizer, tokens)
    ):
        return None
    return tokens
