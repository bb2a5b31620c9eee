"""SentencePiece model files: telling one from a tiktoken-format file, and loading it.

A SentencePiece ``.model`` is a serialized protobuf (``ModelProto``), while Llama's file of
the same name is tiktoken-format text, so a file is told by its bytes, never by its name.
The ``sentencepiece`` extra is imported only when such a file is loaded.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Final

from ctxbudget._errors import TokenizerError

__all__ = ["INSTALL", "is_model", "processor"]

INSTALL: Final = "pip install 'ctxbudget[sentencepiece]'"

_PIECES: Final = 0x0A
"""The tag of ``ModelProto.pieces`` (field 1, length-delimited), which a serialized model
starts with; inside a piece, the same tag starts its ``piece`` string."""
_PIECE_FIELDS: Final = {0x0A: "bytes", 0x15: "fixed32", 0x18: "varint"}
"""The fields of ``ModelProto.SentencePiece``: piece (string), score (float), type (enum)."""


def _varint(raw: bytes, at: int) -> tuple[int, int] | None:
    """The varint at `at` and the offset after it, or None when `raw` has no varint there."""
    value = shift = 0
    for offset in range(at, min(at + 10, len(raw))):
        value |= (raw[offset] & 0x7F) << shift
        if not raw[offset] & 0x80:
            return value, offset + 1
        shift += 7
    return None


def is_model(raw: bytes) -> bool:
    """Whether `raw` starts as a SentencePiece model does: a first piece whose fields are
    exactly a piece string, a score and a type. A text file (tiktoken ranks, JSON) cannot."""
    if raw[:1] != bytes([_PIECES]):
        return False
    head = _varint(raw, 1)
    if head is None:
        return False
    length, at = head
    end = at + length
    if end > len(raw) or raw[at : at + 1] != bytes([_PIECES]):
        return False
    while at < end:
        kind = _PIECE_FIELDS.get(raw[at])
        at += 1
        if kind == "fixed32":
            at += 4
        elif kind == "varint":
            read = _varint(raw, at)
            if read is None:
                return False
            at = read[1]
        elif kind == "bytes":
            read = _varint(raw, at)
            if read is None:
                return False
            at = read[1] + read[0]
        else:
            return False
    return at == end


def processor(raw: bytes, what: str, install: str) -> Any:
    """A `sentencepiece.SentencePieceProcessor` of the model `raw` (loaded from these bytes,
    so the bytes a sha256 was checked on are the ones counted with). `what` says what needs
    it and `install` how to install it, for the errors."""
    if importlib.util.find_spec("sentencepiece") is None:
        raise TokenizerError(f"{what} needs sentencepiece: {install}")
    sentencepiece: Any = importlib.import_module("sentencepiece")
    try:
        return sentencepiece.SentencePieceProcessor(model_proto=raw)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerError(
            f"{what} failed: sentencepiece cannot load it as a model ({first}); give the "
            "model's own SentencePiece .model file"
        ) from None
