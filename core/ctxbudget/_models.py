"""One model-name rule: what a name a user or a framework writes means, and what is known of it.

`resolve_model` is the only place a model name is read. `get_tokenizer`, `Budget.for_model`,
the adapters' ``for_model`` and the command line all call it, so a name means one model
everywhere. It strips what frameworks and providers add around a model's own name (a
LangChain ``provider:`` prefix, ``azure/``, a Hugging Face organisation, a Bedrock region,
vendor and version, a Vertex ``@date``, an Ollama ``:tag``), then matches a known family.
A name it does not know is an error, never a guess: a wrong tokenizer miscounts silently.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import tiktoken
import tiktoken.model

from ctxbudget._errors import TokenizerError

__all__ = [
    "CONTEXT_WINDOWS",
    "PROVIDERS",
    "ModelInfo",
    "UnknownModelError",
    "match_model",
    "resolve_model",
]

V = TypeVar("V")

PROVIDERS: Final = frozenset(
    {
        "anthropic",
        "anthropic_bedrock",
        "azure_ai",
        "azure_openai",
        "baseten",
        "bedrock",
        "bedrock_converse",
        "bedrock_mantle_anthropic",
        "bedrock_mantle_openai",
        "cohere",
        "deepseek",
        "fireworks",
        "google_anthropic_vertex",
        "google_genai",
        "google_vertexai",
        "groq",
        "huggingface",
        "ibm",
        "langsmith",
        "litellm",
        "meta",
        "mistralai",
        "nvidia",
        "ollama",
        "openai",
        "openrouter",
        "perplexity",
        "together",
        "upstage",
        "xai",
    }
)
"""The prefixes LangChain's `init_chat_model` splits off ``provider:model`` (langchain 1.5,
`_BUILTIN_PROVIDERS`). Only these are split at the first colon: ``llama3.1:8b`` and
``…-v1:0`` have colons of their own."""

CONTEXT_WINDOWS: Mapping[str, int] = {
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5-chat-latest": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o-latest": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-3.5-turbo": 16_385,
    "gpt-3.5-turbo-instruct": 4_096,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
}
"""Context windows (input plus output, in tokens) of current OpenAI models whose tokenizer
tiktoken knows, as OpenAI's model pages give them.

A model name resolves by `resolve_model`, as for `get_tokenizer`: case-insensitive, the
exact name first, else the longest listed name followed by ``-`` (``gpt-4o-2024-08-06`` is
a ``gpt-4o`` model, ``gpt-4o-mini-2024-07-18`` a ``gpt-4o-mini``). Variants whose window
differs from their family's are listed by name (``o1-mini``, ``gpt-5-chat-latest``), so the
family rule does not give them their family's larger window.
"""

_OPENAI_SOURCE: Final = "OpenAI model pages (platform.openai.com/docs/models)"

_INPUT_LIMITS: Mapping[str, int] = {"gpt-5": 272_000}
"""Models whose input has a limit of its own below window - output (resolved like
`CONTEXT_WINDOWS`): gpt-5's 400,000 tokens are at most 272,000 of input plus 128,000 of output."""

_OUTPUT_LIMITS: Mapping[str, int] = {"gpt-5": 128_000}

_OLLAMA_OPENAI: Mapping[str, str] = {"gpt-oss": "o200k_harmony"}
"""OpenAI open-weight models under their Ollama name (``gpt-oss:20b``), which tiktoken's
``gpt-oss-`` family does not match."""


@dataclass(frozen=True)
class _Limits:
    tokenizer: str
    window: int | None
    output: int | None
    source: str


_ANTHROPIC_DOCS: Final = (
    "Anthropic models overview (platform.claude.com/docs/en/about-claude/models)"
)
_PROFILE: Final = "LangChain model profile (langchain-anthropic 1.7, from models.dev)"

# Claude's tokenizer generations, as ctok 1.3 separates them by measurement: Claude 3 to
# Opus 4.6 share one, Opus 4.7 has another, 4.8 on a third.
_CLAUDE: Mapping[str, _Limits] = {
    "claude-3-haiku": _Limits("estimate:claude-v3", 200_000, 4_096, _ANTHROPIC_DOCS),
    "claude-3-opus": _Limits("estimate:claude-v3", 200_000, 4_096, _ANTHROPIC_DOCS),
    "claude-3-5-haiku": _Limits("estimate:claude-v3", 200_000, 8_192, _ANTHROPIC_DOCS),
    "claude-3-5-sonnet": _Limits("estimate:claude-v3", 200_000, 8_192, _ANTHROPIC_DOCS),
    "claude-3-7-sonnet": _Limits("estimate:claude-v3", 200_000, 64_000, _ANTHROPIC_DOCS),
    "claude-sonnet-4": _Limits("estimate:claude-v3", 200_000, 64_000, _ANTHROPIC_DOCS),
    "claude-opus-4": _Limits("estimate:claude-v3", 200_000, 32_000, _ANTHROPIC_DOCS),
    "claude-opus-4-1": _Limits("estimate:claude-v3", 200_000, 32_000, _ANTHROPIC_DOCS),
    "claude-sonnet-4-5": _Limits("estimate:claude-v3", 200_000, 64_000, _PROFILE),
    "claude-haiku-4-5": _Limits("estimate:claude-v3", 200_000, 64_000, _PROFILE),
    "claude-opus-4-5": _Limits("estimate:claude-v3", 200_000, 64_000, _PROFILE),
    "claude-opus-4-6": _Limits("estimate:claude-v3", 1_000_000, 128_000, _PROFILE),
    "claude-sonnet-4-6": _Limits("estimate:claude-v3", 1_000_000, 128_000, _PROFILE),
    "claude-opus-4-7": _Limits("estimate:claude-v4.7", 1_000_000, 128_000, _PROFILE),
    "claude-opus-4-8": _Limits("estimate:claude-v4.8", 1_000_000, 128_000, _PROFILE),
}
"""Claude models by their name without a date: the estimate that counts for them
(docs/tokenizers.md, "Counting other models") and their window and output limit. The 200,000
windows are without Anthropic's 1M-context beta header; pass that window yourself when you
send it."""

_GEMINI_SOURCE: Final = (
    "LangChain model profile (langchain-google-genai 4.4); Vertex AI Gemini 2.5 model pages"
)

_NO_WINDOW: Final = "not in ctxbudget's table"

_GEMINI: Mapping[str, _Limits] = {
    "gemini-2.5-pro": _Limits("estimate:gemini", 1_048_576, 65_536, _GEMINI_SOURCE),
    "gemini-2.5-flash": _Limits("estimate:gemini", 1_048_576, 65_536, _GEMINI_SOURCE),
    "gemini-2.5-flash-lite": _Limits("estimate:gemini", 1_048_576, 65_536, _GEMINI_SOURCE),
    "gemini-2.0-flash": _Limits("estimate:gemini", None, None, _NO_WINDOW),
    "gemini-2.0-flash-lite": _Limits("estimate:gemini", None, None, _NO_WINDOW),
    "gemini-3-pro": _Limits("estimate:gemini", None, None, _NO_WINDOW),
    "gemini-3-flash": _Limits("estimate:gemini", None, None, _NO_WINDOW),
}

_SERVER_WINDOW: Final = (
    "an open-weight model's window is the server's setting (Ollama num_ctx, vLLM "
    "--max-model-len), not the model's"
)


@dataclass(frozen=True)
class _OpenFamily:
    """An open-weight family: how its names start, and what ctxbudget can count it with."""

    family: str
    pattern: re.Pattern[str]
    trained_window: str
    examples: tuple[str, ...]
    """Names the nearest-name hint of an unknown model may offer."""
    tokenizers: tuple[tuple[re.Pattern[str], str], ...] = ()
    """The family's models ctxbudget counts exactly (how their names start, and the
    vocabulary's name in `_vocab.VOCABULARIES`), first match wins."""
    remedy: str = ""
    """Why a name of the family that no entry of `tokenizers` matches cannot be counted
    (empty when every name matches one)."""


_OPEN: Final[tuple[_OpenFamily, ...]] = (
    _OpenFamily(
        "llama-4",
        re.compile(r"(meta-)?llama-?(v)?4"),
        "up to 10M tokens (Scout) and 1M (Maverick), llama-models README",
        ("llama4", "llama-4-scout-17b-16e-instruct"),
        ((re.compile(""), "llama4"),),
    ),
    _OpenFamily(
        "llama-3",
        re.compile(r"(meta-)?llama-?(v)?3"),
        "up to 128K tokens for Llama 3.1-3.3, llama-models README",
        ("llama3.1", "llama3.2", "llama-3.3-70b-instruct"),
        ((re.compile(""), "llama3"),),
    ),
    _OpenFamily(
        "mistral",
        re.compile(
            r"(open-)?(mistral|mixtral|ministral|codestral|pixtral|magistral|devstral|voxtral)"
        ),
        "128K tokens for Mistral Large 2, Nemo and Small 3.1, Mistral's model cards",
        ("mistral-large", "mistral-small", "mixtral", "codestral"),
        remedy="ctxbudget counts offline only the Mistral models whose tokenizer file "
        "mistral-common ships: tekken for Nemo 2407, Ministral 8B 2410, Small 2409 and Pixtral "
        "12B 2409, SentencePiece for Medium 2312, Tiny/Small 2312, Small/Large 2402, Mixtral "
        "8x22B, Large 2407, Codestral 2405 and Large/Pixtral Large 2411; newer models need "
        "their own tekken.json",
    ),
    _OpenFamily(
        "qwen-3.5",
        re.compile(r"qwen-?3\.[56]"),
        "see the model card",
        ("qwen3.5", "qwen3.6"),
        ((re.compile(""), "qwen3.5"),),
    ),
    _OpenFamily(
        "qwen",
        re.compile(r"qwen|qwq"),
        "131,072 tokens for Qwen2.5 (YaRN beyond 32,768), 32,768 native for dense Qwen3",
        ("qwen2.5", "qwen3"),
        ((re.compile(r"qwen-?3|qwq"), "qwen3"), (re.compile(r"qwen-?2"), "qwen2.5")),
        remedy="ctxbudget counts offline Qwen 2, 2.5, 3, 3.5, 3.6 and QwQ (the qwen extra), not "
        "Qwen 1 or 1.5 or the Qwen API's own models (qwen-max, qwen-plus, ...)",
    ),
    _OpenFamily(
        "deepseek",
        re.compile(r"deepseek"),
        "131K tokens for the DeepSeek-V3 weights",
        ("deepseek-chat", "deepseek-r1", "deepseek-v3"),
        ((re.compile(r"deepseek-(chat|reasoner|v3|v4|r1(?!.*distill))"), "deepseek-v3"),),
        remedy="ctxbudget counts offline DeepSeek V3, R1 and V4 and the API's deepseek-chat and "
        "deepseek-reasoner (the deepseek extra); DeepSeek V2, Coder and LLM have other "
        "vocabularies, and the R1 distills (Ollama's deepseek-r1 below 671b) are Qwen or "
        "Llama models with DeepSeek's tokens added",
    ),
    _OpenFamily(
        "gemma",
        re.compile(r"gemma"),
        "see the model card",
        ("gemma3",),
        remedy="no package ships a Gemma vocabulary",
    ),
)
"""Open-weight families ctxbudget recognises: a name of theirs resolves, to the vocabulary its
extra installs when ctxbudget has it, else with an error that says what to pass instead."""

_OLLAMA_DISTILLS: Final = frozenset({"deepseek-r1"})
"""Ollama models whose tags below ``671b`` (``latest`` too) are other models distilled from
them (``deepseek-r1:8b`` is a Qwen 3 model): only the ``671b`` tag is the model itself."""

_MISTRAL_FILES: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"(open-)?mistral-nemo(-instruct|-base)?(-2407)?"), "tekken_240718"),
    (re.compile(r"ministral-8b(-instruct)?-2410"), "tekken_240718"),
    (re.compile(r"mistral-small(-instruct)?-2409"), "tekken_240718"),
    (re.compile(r"pixtral-12b(-base)?(-2409)?"), "tekken_240911"),
    (re.compile(r"mistral-medium-2312"), "mistral-v1"),
    (re.compile(r"mistral-(tiny|small)-2312|mistral-(small|large)-2402"), "mistral-v2"),
    (re.compile(r"(open-)?mixtral-8x22b(-2404)?"), "mistral-v3"),
    (re.compile(r"mistral-(large|tiny)-2407|codestral-2405|codestral-mamba-2407"), "mistral-v3"),
    (re.compile(r"(mistral|pixtral)-large-2411"), "mistral-v7"),
)
"""Mistral models whose tokenizer is a file mistral-common ships, a tekken JSON or a
SentencePiece model (its `MODEL_NAME_TO_TOKENIZER_CLS`, and ``open-mixtral-8x22b``, the API's
name of its 2404 snapshot), by their full canonical name: a newer model of the same name
stem has a tokenizer of its own, so only these snapshots match."""

_BYO: Final = (
    "pass tokenizer=tokenizer_from_file('<the model's tokenizer.json>'), the file a vLLM "
    "server or the Hugging Face repo uses (or its tekken.json, its SentencePiece .model, or a "
    ".tiktoken file with pattern=...)"
)


@dataclass(frozen=True)
class ModelInfo:
    """What ctxbudget knows of one model name, each limit with where it comes from.

    >>> resolve_model("bedrock_converse:us.anthropic.claude-sonnet-4-5-20250929-v1:0").canonical
    'claude-sonnet-4-5'
    """

    name: str
    """The name as given."""
    canonical: str
    """The model's own name: lower case, without provider, organisation, region, version,
    date or tag decorations (``claude-sonnet-4-5``, ``gpt-4o-2024-08-06``, ``llama3.1``)."""
    family: str
    """``openai``, ``claude``, ``gemini``, ``llama-3``, ``llama-4``, ``mistral``, ``qwen``,
    ``qwen-3.5``, ``deepseek`` or ``gemma``."""
    provider: str | None
    """The provider the name says serves it (``ollama``, ``bedrock``, ``azure`` ...), if any."""
    tokenizer: str | None
    """The name `get_tokenizer` builds the count from (a tiktoken encoding such as
    ``o200k_base``, or an estimate such as ``estimate:claude-v3``); None when ctxbudget
    cannot count this model offline (`unavailable` says why, and what to do instead)."""
    context_window: int | None
    """Input plus output, in tokens; None when unknown or set by the serving server."""
    max_output: int | None
    """The most tokens the model may write, when known."""
    input_limit: int | None
    """A limit on input of its own below the window (gpt-5: 272,000), when there is one."""
    source: str
    """Where `context_window` and `max_output` come from, or why they are not known."""
    unavailable: str | None = None
    """When `tokenizer` is None: why, and what to pass as the tokenizer (or to upgrade)."""


def match_model(model: str, names: Mapping[str, V], families: Mapping[str, V]) -> V | None:
    """The entry for `model` in a name table, or None when nothing matches.

    The lower-cased name is looked up in `names`; failing that, the longest key of
    `families` that it starts with wins (``gpt-4o-2024-08-06`` is in the ``gpt-4o-``
    family), whatever the table's order. This is tiktoken's own rule, made
    case-insensitive; `resolve_model` applies it to every family's table.
    """
    name = model.lower()
    if name in names:
        return names[name]
    family = max((f for f in families if name.startswith(f)), key=len, default=None)
    return None if family is None else families[family]


_BEDROCK = re.compile(
    r"(?:(?:us|eu|apac|global|us-gov|ca|jp|au)\.)?"
    r"(?:anthropic|meta|mistral|deepseek|qwen|openai|google)\.(?P<model>.+?)"
    r"(?:-v\d+(?::\d+)?)?(?::\d+)?"
)
"""A Bedrock model id: optional region, vendor, the model, optional ``-vN:M`` version."""

_SNAPSHOT = {
    "claude": re.compile(r"(?:-\d{8}|-latest|-v\d+)$"),
    "gemini": re.compile(r"(?:-preview(?:-\d\d-\d\d)?|-\d{3}|-latest)$"),
}
"""What a dated snapshot or alias adds to a Claude or Gemini model's name. Only these are
taken off: any other suffix may be a new model, so it is unknown rather than guessed."""


def resolve_model(name: str) -> ModelInfo:
    """What `name` is, read by the one model-name rule; `TokenizerError` when unknown.

    Understands, in any case: ``provider:model`` as LangChain's `init_chat_model` writes it
    (``openai:gpt-4o``, ``ollama:llama3.1:8b``, ``bedrock_converse:…``), ``azure/gpt-4o``
    and other ``owner/model`` ids (a Hugging Face repo such as
    ``meta-llama/Llama-3.1-8B-Instruct``), Bedrock ids
    (``us.anthropic.claude-sonnet-4-5-20250929-v1:0``), Vertex ``claude-sonnet-4-5@20250929``
    and Ollama tags (``llama3.1:8b``). An unknown name raises, naming the nearest known one.
    """
    given = name
    text = name.strip().lower()
    provider: str | None = None
    head, colon, rest = text.partition(":")
    if colon and head in PROVIDERS:
        provider, text = head, rest
    if "/" in text:  # azure/gpt-4o, or a Hugging Face repo id, which names no provider
        owner, _, text = text.rpartition("/")
        if owner in PROVIDERS or owner == "azure":
            provider = provider or owner
    text = text.split("@", 1)[0]
    bedrock = _BEDROCK.fullmatch(text)
    if bedrock is not None:
        provider = provider or "bedrock"
        text = bedrock.group("model")
    openai = _openai(given, text, provider)
    if openai is not None:
        return openai
    tag: str | None = None
    if ":" in text:  # an Ollama tag: llama3.1:8b, qwen2.5:latest, gpt-oss:20b
        text, _, tag = text.partition(":")
        provider = provider or "ollama"
        openai = _openai(given, text, provider)
        if openai is not None:
            return openai
    distilled = provider == "ollama" and text in _OLLAMA_DISTILLS and tag != "671b"
    return _known(given, text, provider, distilled=distilled) or _unknown(given, text)


def _openai(given: str, text: str, provider: str | None) -> ModelInfo | None:
    encodings = {e.lower(): e for e in tiktoken.list_encoding_names()}
    encoding = (
        encodings.get(text)
        or _OLLAMA_OPENAI.get(text)
        or match_model(
            text, tiktoken.model.MODEL_TO_ENCODING, tiktoken.model.MODEL_PREFIX_TO_ENCODING
        )
    )
    window = match_model(text, CONTEXT_WINDOWS, _families(CONTEXT_WINDOWS))
    if encoding is None and window is None:
        return None
    return ModelInfo(
        name=given,
        canonical=text,
        family="openai",
        provider=provider,
        tokenizer=encoding,
        context_window=window,
        max_output=match_model(text, _OUTPUT_LIMITS, _families(_OUTPUT_LIMITS)),
        input_limit=match_model(text, _INPUT_LIMITS, _families(_INPUT_LIMITS)),
        source=_OPENAI_SOURCE if window is not None else _NO_WINDOW,
        # A model of ctxbudget's window table that an older tiktoken does not know yet.
        unavailable=None
        if encoding
        else (
            f"the installed tiktoken {importlib.metadata.version('tiktoken')} does not name "
            "the encoding that counts it: upgrade tiktoken (pip install -U tiktoken)"
        ),
    )


def _known(
    given: str, text: str, provider: str | None, *, distilled: bool = False
) -> ModelInfo | None:
    for family, table in (("claude", _CLAUDE), ("gemini", _GEMINI)):
        key = _SNAPSHOT[family].sub("", text)
        if key in table:
            limits = table[key]
            return ModelInfo(
                name=given,
                canonical=key,
                family=family,
                provider=provider,
                tokenizer=limits.tokenizer,
                context_window=limits.window,
                max_output=limits.output,
                input_limit=None,
                source=limits.source,
            )
    mistral = next((file for pattern, file in _MISTRAL_FILES if pattern.fullmatch(text)), None)
    if mistral is not None:
        return ModelInfo(
            name=given,
            canonical=text,
            family="mistral",
            provider=provider,
            tokenizer=mistral,
            context_window=None,
            max_output=None,
            input_limit=None,
            source=f"{_SERVER_WINDOW} when self-hosted; Mistral's model card gives the model's own",
        )
    for open_family in _OPEN:
        if open_family.pattern.match(text):
            vocabulary = None
            if not distilled:
                vocabulary = next(
                    (name for names, name in open_family.tokenizers if names.match(text)), None
                )
            return ModelInfo(
                name=given,
                canonical=text,
                family=open_family.family,
                provider=provider,
                tokenizer=vocabulary,
                context_window=None,
                max_output=None,
                input_limit=None,
                source=f"{_SERVER_WINDOW}; the model supports {open_family.trained_window}",
                unavailable=None if vocabulary else f"{open_family.remedy}; {_BYO}",
            )
    return None


class UnknownModelError(TokenizerError):
    """A model name no family knows; `nearest` is the closest known one, with its family."""

    def __init__(self, message: str, *, nearest: str | None) -> None:
        super().__init__(message)
        self.nearest = nearest


def _unknown(given: str, text: str) -> ModelInfo:
    known = {
        **dict.fromkeys(CONTEXT_WINDOWS, "openai"),
        **dict.fromkeys(_CLAUDE, "claude"),
        **dict.fromkeys(_GEMINI, "gemini"),
        **{example: family.family for family in _OPEN for example in family.examples},
    }
    near = difflib.get_close_matches(text, known, n=1, cutoff=0.5)
    nearest = f"{near[0]!r} ({known[near[0]]})" if near else None
    hint = f"The nearest known model is {nearest}. " if nearest else ""
    raise UnknownModelError(
        f"no known tokenizer for model {given!r}. {hint}ctxbudget reads OpenAI models as "
        "tiktoken names them (e.g. 'gpt-4o', 'o3'), Claude and Gemini models (e.g. "
        "'claude-sonnet-4-5', 'gemini-2.5-flash'), open-weight Llama 3/4, Mistral, Qwen and "
        "DeepSeek models (e.g. 'llama3.1:8b', 'Qwen/Qwen3-8B', 'deepseek-chat') and an "
        "encoding name "
        f"({', '.join(sorted(tiktoken.list_encoding_names()))}), with or without provider "
        "prefixes and Bedrock, Vertex, Hugging Face or Ollama decorations; for any other model "
        "pass a Tokenizer: tokenizer_from_file(path) for the model's own tokenizer.json, "
        "tekken.json, SentencePiece .model or .tiktoken file, CallableTokenizer(fn, name=...) "
        "for any str -> int function",
        nearest=nearest,
    )


def _families(table: Mapping[str, int]) -> dict[str, int]:
    """Each listed model as the family of its snapshots and variants: ``gpt-4o`` -> ``gpt-4o-``."""
    return {f"{name}-": value for name, value in table.items()}
