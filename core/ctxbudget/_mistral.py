"""Mistral's tekken tokenizers, built from the vocabulary files `mistral-common` ships.

The ``mistral`` extra installs `mistral-common` for its data files only: the file is read,
checked against a pinned sha256 and handed to tiktoken's own `Encoding`, which is what
mistral-common's `Tekkenizer` does itself, so its heavy import chain (numpy, pillow,
pydantic schemas) is never paid at run time.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
from importlib import resources
from typing import Final

import tiktoken

from ctxbudget._errors import TokenizerError, VocabularyError

__all__ = ["TEKKEN_SHA256", "tekken_encoding"]

TEKKEN_SHA256: Final = {
    "tekken_240718": "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516",
    "tekken_240911": "1948e2d48b0e7377f1bb5f1210f1ae5f984934e75713fc07e2452729b8365316",
}
"""The tekken files of mistral-common 1.12, by name, with the sha256 each must have. A file
that differs is refused: a wrong vocabulary miscounts silently."""

_PACKAGE: Final = "mistral_common"

INSTALL: Final = "pip install 'ctxbudget[mistral]'"


def available() -> bool:
    """Whether the ``mistral`` extra (mistral-common, for its vocabulary files) is installed."""
    return importlib.util.find_spec(_PACKAGE) is not None


def read_tekken(name: str) -> bytes:
    """The raw tekken JSON `name`, verified against its pinned sha256."""
    expected = TEKKEN_SHA256[name]
    if not available():
        raise TokenizerError(
            f"counting with Mistral's {name} tokenizer needs its vocabulary file from "
            f"mistral-common: {INSTALL}"
        )
    raw = resources.files(_PACKAGE).joinpath("data", f"{name}.json").read_bytes()
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected:
        raise VocabularyError(
            f"mistral-common's {name}.json has sha256 {actual}, but ctxbudget pins {expected}; "
            "refusing to count with it. Install the pinned version with "
            f"`{INSTALL}`, or pass the file's tokenizer yourself as a Tokenizer."
        )
    return raw


def parse_tekken(raw: bytes, name: str) -> tiktoken.Encoding:
    """A tiktoken `Encoding` of a tekken JSON file's ordinary (non-special) vocabulary.

    Ranks are the file's first ``default_vocab_size - default_num_special_tokens`` entries
    under its own split pattern; the special tokens sit below them in Mistral's ids, which
    changes ids but not counts, and they are not parsed in text, as with every tokenizer here.
    """
    data = json.loads(raw)
    config = data["config"]
    size = config["default_vocab_size"] - config["default_num_special_tokens"]
    ranks = {
        base64.b64decode(entry["token_bytes"]): entry["rank"] for entry in data["vocab"][:size]
    }
    return tiktoken.Encoding(
        name=name, pat_str=config["pattern"], mergeable_ranks=ranks, special_tokens={}
    )


def tekken_encoding(name: str) -> tiktoken.Encoding:
    """The verified tekken vocabulary `name` (a key of `TEKKEN_SHA256`) as a tiktoken `Encoding`."""
    return parse_tekken(read_tekken(name), name)
