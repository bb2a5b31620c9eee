"""The one model-name rule (core/ctxbudget/_models.py): what a name means, everywhere it is read."""

from __future__ import annotations

import argparse
import re

import pytest
import tiktoken.model
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Budget, InvalidBudgetError, TokenizerError, get_tokenizer, resolve_model
from ctxbudget._cli.options import tokenizer as cli_tokenizer

# (name as a user or framework writes it, canonical name, family, provider)
DECORATED = [
    ("openai:gpt-4o", "gpt-4o", "openai", "openai"),
    ("azure_openai:gpt-4o", "gpt-4o", "openai", "azure_openai"),
    ("azure/gpt-4o", "gpt-4o", "openai", "azure"),
    ("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5", "claude", "anthropic"),
    ("google_genai:gemini-2.5-flash", "gemini-2.5-flash", "gemini", "google_genai"),
    ("google_vertexai:gemini-2.5-flash", "gemini-2.5-flash", "gemini", "google_vertexai"),
    ("ollama:llama3.1:8b", "llama3.1", "llama-3", "ollama"),
    ("mistralai:mistral-nemo", "mistral-nemo", "mistral", "mistralai"),
    ("groq:llama-3.1-8b-instant", "llama-3.1-8b-instant", "llama-3", "groq"),
    ("deepseek:deepseek-chat", "deepseek-chat", "deepseek", "deepseek"),
    (
        "together:meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "llama-3.3-70b-instruct-turbo",
        "llama-3",
        "together",
    ),
    (
        "fireworks:accounts/fireworks/models/llama-v3p1-8b-instruct",
        "llama-v3p1-8b-instruct",
        "llama-3",
        "fireworks",
    ),
    (
        "bedrock_converse:anthropic.claude-3-5-sonnet-20240620-v1:0",
        "claude-3-5-sonnet",
        "claude",
        "bedrock_converse",
    ),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5", "claude", "bedrock"),
    ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5", "claude", "bedrock"),
    ("global.anthropic.claude-opus-4-5-20251101-v1:0", "claude-opus-4-5", "claude", "bedrock"),
    ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet", "claude", "bedrock"),
    ("meta.llama3-1-8b-instruct-v1:0", "llama3-1-8b-instruct", "llama-3", "bedrock"),
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5", "claude", None),
    ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet", "claude", None),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct", "llama-3", None),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct", "qwen", None),
    ("deepseek-ai/DeepSeek-V3", "deepseek-v3", "deepseek", None),
    ("llama3.1:8b", "llama3.1", "llama-3", "ollama"),
    ("qwen3.6:27b", "qwen3.6", "qwen-3.5", "ollama"),
    ("gemma3:4b", "gemma3", "gemma", "ollama"),
    ("gpt-oss:20b", "gpt-oss", "openai", "ollama"),
]


@pytest.mark.parametrize(("name", "canonical", "family", "provider"), DECORATED)
def test_resolve_model_reads_decorated_names(
    name: str, canonical: str, family: str, provider: str | None
) -> None:
    info = resolve_model(name)

    assert (info.canonical, info.family, info.provider) == (canonical, family, provider)
    assert info.name == name


@pytest.mark.parametrize(
    "name", ["ft:gpt-4o:my-org::abc123", "gpt-4o-2024-08-06", "GPT-4.1-Mini", "o200k_base"]
)
def test_resolve_model_of_openai_names_is_tiktokens_encoding(name: str) -> None:
    assert resolve_model(name).tokenizer == "o200k_base"


def test_resolve_model_splits_only_known_provider_prefixes() -> None:
    # "llama3.1" is no provider: its colon is an Ollama tag, not a prefix.
    assert resolve_model("llama3.1:70b").canonical == "llama3.1"
    with pytest.raises(TokenizerError, match=r"no known tokenizer for model 'myhost:gpt-4o'"):
        resolve_model("myhost:gpt-4o")


@pytest.mark.parametrize(
    ("name", "tokenizer"),
    [
        ("claude-3-haiku-20240307", "estimate:claude-v3"),
        ("claude-3-5-sonnet-latest", "estimate:claude-v3"),
        ("claude-sonnet-4-20250514", "estimate:claude-v3"),
        ("claude-opus-4-1-20250805", "estimate:claude-v3"),
        ("claude-sonnet-4-5", "estimate:claude-v3"),
        ("claude-opus-4-6", "estimate:claude-v3"),
        ("claude-opus-4-7", "estimate:claude-v4.7"),
        ("claude-opus-4-8", "estimate:claude-v4.8"),
        ("gemini-2.5-flash", "estimate:gemini"),
        ("gemini-2.5-flash-lite", "estimate:gemini"),
        ("gemini-2.5-pro-preview-05-06", "estimate:gemini"),
        ("gemini-2.0-flash-001", "estimate:gemini"),
    ],
)
def test_resolve_model_picks_the_estimate_of_the_tokenizer_generation(
    name: str, tokenizer: str
) -> None:
    assert resolve_model(name).tokenizer == tokenizer


@pytest.mark.parametrize(
    "name", ["claude-sonnet-4-9", "claude-opus-5", "claude-2.1", "gemini-2.5-flash-image"]
)
def test_resolve_model_of_unlisted_claude_or_gemini_is_unknown_not_guessed(name: str) -> None:
    # A new model may have a new tokenizer: its nearest sibling's count would be a guess.
    with pytest.raises(TokenizerError, match=rf"no known tokenizer for model '{name}'"):
        resolve_model(name)


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("claude-sonet-4-5", "'claude-sonnet-4-5' (claude)"),
        ("gpt4o", "'gpt-4o' (openai)"),
        ("llama2", "'llama3.2' (llama-3)"),
    ],
)
def test_resolve_model_of_unknown_name_names_the_nearest_known_one(name: str, nearest: str) -> None:
    with pytest.raises(
        TokenizerError,
        match=rf"no known tokenizer for model '{name}'\. The nearest known model is "
        + re.escape(nearest)
        + r"\. ",
    ):
        resolve_model(name)


def test_a_listed_model_an_older_tiktoken_cannot_count_asks_for_a_newer_tiktoken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As on a tiktoken older than ctxbudget's window table: the window is known, so the budget
    # stands; the count says what to upgrade (not "unknown model, nearest: the name itself").
    monkeypatch.setattr(tiktoken.model, "MODEL_TO_ENCODING", {})
    monkeypatch.setattr(tiktoken.model, "MODEL_PREFIX_TO_ENCODING", {})
    assert Budget.for_model("gpt-4.1-mini", reserve_output=1_000).total == 1_047_576
    with pytest.raises(
        TokenizerError,
        match=r"^no offline tokenizer for model 'gpt-4\.1-mini', a openai model: the installed "
        r"tiktoken \S+ does not name the encoding that counts it: upgrade tiktoken "
        r"\(pip install -U tiktoken\)$",
    ):
        get_tokenizer("gpt-4.1-mini")


def test_resolve_model_of_unknown_name_says_how_to_pass_a_tokenizer() -> None:
    with pytest.raises(
        TokenizerError,
        match=r"for any other model pass a Tokenizer: tokenizer_from_file\(path\) for the "
        r"model's own tokenizer\.json, tekken\.json, SentencePiece \.model or \.tiktoken file, "
        r"CallableTokenizer\(fn, name=\.\.\.\) for any str -> int function$",
    ):
        resolve_model("acme-7b")


@pytest.mark.parametrize(
    ("name", "window", "output"),
    [
        ("gpt-4o", 128_000, None),
        ("gpt-5", 400_000, 128_000),
        ("claude-sonnet-4-5", 200_000, 64_000),
        ("claude-opus-4-6", 1_000_000, 128_000),
        ("claude-opus-4-1", 200_000, 32_000),
        ("gemini-2.5-flash", 1_048_576, 65_536),
    ],
)
def test_resolve_model_gives_window_and_output_limit(
    name: str, window: int, output: int | None
) -> None:
    info = resolve_model(name)

    assert (info.context_window, info.max_output) == (window, output)
    assert info.source


@pytest.mark.parametrize(
    "name", ["llama3.1:8b", "meta-llama/Llama-3.1-8B-Instruct", "qwen2.5:7b", "mistral-nemo"]
)
def test_resolve_model_of_open_weight_model_leaves_the_window_to_the_server(name: str) -> None:
    info = resolve_model(name)

    assert info.context_window is None
    assert "server's setting (Ollama num_ctx, vLLM --max-model-len)" in info.source


_CLAUDE = ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-5", "claude-3-5-haiku"]
_DATES = {
    "claude-sonnet-4-5": "20250929",
    "claude-haiku-4-5": "20251001",
    "claude-opus-4-5": "20251101",
    "claude-3-5-haiku": "20241022",
}


@st.composite
def _decorated_claude(draw: st.DrawFn) -> tuple[str, str]:
    model = draw(st.sampled_from(_CLAUDE))
    date = _DATES[model]
    shape = draw(st.sampled_from(["bare", "dated", "prefix", "bedrock", "vertex"]))
    name = {
        "bare": model,
        "dated": f"{model}-{date}",
        "prefix": f"{draw(st.sampled_from(['anthropic', 'bedrock_converse']))}:{model}",
        "bedrock": f"{draw(st.sampled_from(['', 'us.', 'eu.', 'apac.', 'global.']))}"
        f"anthropic.{model}-{date}-v{draw(st.integers(1, 3))}:0",
        "vertex": f"{model}@{date}",
    }[shape]
    upper = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return "".join(c.upper() if up else c for c, up in zip(name, upper, strict=True)), model


@given(_decorated_claude())
def test_resolve_model_of_any_decoration_is_the_models_own_name(case: tuple[str, str]) -> None:
    name, model = case

    assert resolve_model(name).canonical == model
    assert get_tokenizer(name) is get_tokenizer(model)


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("openai:gpt-4o", "gpt-4o"),
        ("azure/gpt-4.1-mini", "gpt-4.1-mini"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("google_vertexai:gemini-2.5-pro", "gemini-2.5-pro"),
    ],
)
def test_one_name_means_one_model_to_tokenizer_budget_and_command_line(
    name: str, plain: str
) -> None:
    assert get_tokenizer(name) is get_tokenizer(plain)
    args = argparse.Namespace(model=name, tokenizer_file=None, pattern=None, sha256=None)
    assert cli_tokenizer(args) == (get_tokenizer(plain), name)
    assert Budget.for_model(name, reserve_output=4_000) == Budget.for_model(
        plain, reserve_output=4_000
    )


def test_budget_for_model_of_claude_is_its_window() -> None:
    assert Budget.for_model("claude-sonnet-4-5", reserve_output=8_000).total == 200_000


def test_budget_for_model_of_gemini_is_its_window() -> None:
    assert Budget.for_model("gemini-2.5-flash", reserve_output=8_000).total == 1_048_576


def test_budget_for_model_of_open_weight_model_asks_for_the_servers_window() -> None:
    with pytest.raises(
        InvalidBudgetError,
        match=r"unknown context window for model 'llama3\.1:8b': an open-weight model's "
        r"window is the server's setting \(Ollama num_ctx, vLLM --max-model-len\).*; use "
        r"Budget\.for_context_window\(<tokens>, reserve_output=\.\.\.\) with the window your "
        r"provider documents or your server is set to, or Budget\.for_model\(\.\.\., "
        r"window=<tokens>\) \(server_window\(\.\.\.\) asks an Ollama or vLLM server for it\)$",
    ):
        Budget.for_model("llama3.1:8b", reserve_output=1_000)


def test_budget_for_model_of_unknown_name_names_the_nearest_known_one() -> None:
    with pytest.raises(
        InvalidBudgetError,
        match=r"unknown context window for model 'claude-sonet-4-5' \(the nearest known model "
        r"is 'claude-sonnet-4-5' \(claude\)\); use Budget\.for_context_window",
    ):
        Budget.for_model("claude-sonet-4-5", reserve_output=1_000)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("gemma3:4b", "a gemma model: no package ships a Gemma vocabulary"),
        ("mistral-small-2503", "a mistral model: ctxbudget counts offline only the Mistral"),
        ("deepseek-coder-v2", "a deepseek model: ctxbudget counts offline DeepSeek V3, R1"),
        ("qwen-max", "a qwen model: ctxbudget counts offline Qwen 2, 2.5, 3, 3.5, 3.6 and QwQ"),
    ],
)
def test_get_tokenizer_of_family_without_offline_tokenizer_says_what_to_pass(
    name: str, says: str
) -> None:
    with pytest.raises(TokenizerError, match=rf"no offline tokenizer for model '{name}', {says}"):
        get_tokenizer(name)
