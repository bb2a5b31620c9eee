"""SentencePiece models: Mistral's v1 to v7 files from mistral-common, and a user's own file
through `tokenizer_from_file` (the Gemma 3 file, Gemini's text tokenizer).

The user's-file tests train a tiny model in the test (never a download) and need the
``sentencepiece`` extra; the Mistral tests compare with mistral-common's own tokenizer and
need the ``mistral`` extra too. Each is skipped with the reason when its extra is absent.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.util
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    ContextAssembler,
    SentencePieceTokenizer,
    TiktokenTokenizer,
    TokenizerError,
    VocabularyError,
    _tokens,
    count_method_of,
    get_tokenizer,
    resolve_model,
    tokenizer_from_file,
)
from ctxbudget import _sentencepiece as sentencepiece
from ctxbudget import _vocab as vocab
from tests.support.factories import chunk
from tests.support.imports import loaded_after

_HAS_SENTENCEPIECE = importlib.util.find_spec("sentencepiece") is not None
_SENTENCEPIECE = pytest.mark.skipif(
    not _HAS_SENTENCEPIECE,
    reason="the sentencepiece extra is not installed: pip install 'ctxbudget[sentencepiece]'",
)
_MISTRAL = pytest.mark.skipif(
    not vocab.available("mistral-v3"),
    reason="the mistral and sentencepiece extras (mistral-common, sentencepiece) are not "
    "installed: pip install 'ctxbudget[mistral,sentencepiece]'",
)

VERSIONS = ["mistral-v1", "mistral-v2", "mistral-v3", "mistral-v7"]

_CORPUS = [
    "Refunds are paid within 5 business days.",
    "    def count(self, text: str) -> int:\n        return len(text)\n",
    "退款将在五个工作日内支付。",
    "返金は5営業日以内に支払われます。",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 1\ufe0f\u20e3",
    "<s>[INST] What is the policy? [/INST]",
    "</s>",
    "<tool>",
    "\n\n",
    " ",
    "\t  \t",
]

_SAMPLES = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    st.lists(st.sampled_from(_CORPUS), max_size=12).map("".join),
)
"""Prose, code, CJK, emoji, special-token text and whitespace runs, joined in any order."""


def _train(user_defined: list[str] | None = None) -> bytes:
    """A tiny SentencePiece model trained on `_CORPUS`, with byte fallback for the rest."""
    trainer: Any = importlib.import_module("sentencepiece").SentencePieceTrainer
    model = io.BytesIO()
    trainer.train(
        sentence_iterator=iter(_CORPUS * 20),
        model_writer=model,
        vocab_size=400,
        hard_vocab_limit=False,
        byte_fallback=True,
        character_coverage=1.0,
        user_defined_symbols=user_defined or [],
        minloglevel=2,
    )
    return model.getvalue()


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _HAS_SENTENCEPIECE:
        pytest.skip("the sentencepiece extra is not installed")
    path = tmp_path_factory.mktemp("sp") / "tokenizer.model"
    path.write_bytes(_train(["<tool>"]))
    return path


@pytest.fixture(scope="module")
def reference(model_file: Path) -> Any:
    module: Any = importlib.import_module("sentencepiece")
    return module.SentencePieceProcessor(model_file=str(model_file))


# --- a user's own file -----------------------------------------------------------------------


@_SENTENCEPIECE
@given(text=_SAMPLES)
def test_sentencepiece_file_count_equals_sentencepieces_encode(
    model_file: Path, reference: Any, text: str
) -> None:
    tokenizer = tokenizer_from_file(model_file)

    assert tokenizer.count(text) == len(reference.encode(text))


@_SENTENCEPIECE
def test_sentencepiece_file_is_exact_and_labelled(model_file: Path) -> None:
    method = count_method_of(tokenizer_from_file(model_file, name="gemma3"))

    assert (method.label, method.exact, method.margin) == ("sentencepiece:gemma3", True, None)


@_SENTENCEPIECE
def test_sentencepiece_file_counts_control_token_text_as_text(
    model_file: Path, reference: Any
) -> None:
    tokenizer = tokenizer_from_file(model_file)

    assert tokenizer.count("<s>") == len(reference.encode("<s>")) > 1
    assert tokenizer.count("<tool>") == 2  # a user-defined symbol is one token (after "▁")


@_SENTENCEPIECE
def test_sentencepiece_file_is_told_by_its_content_not_its_name(
    model_file: Path, tmp_path: Path
) -> None:
    renamed = tmp_path / "vocab.tiktoken"
    renamed.write_bytes(model_file.read_bytes())

    assert isinstance(tokenizer_from_file(renamed), SentencePieceTokenizer)


def test_tiktoken_format_tokenizer_model_still_loads_as_ranks(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.model"
    path.write_bytes(
        b"\n" + b"".join(base64.b64encode(bytes([i])) + b" %d\n" % i for i in range(256))
    )

    tokenizer = tokenizer_from_file(path, pattern="llama3")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.count("ab") == 2


@pytest.mark.skipif(not vocab.available("llama3"), reason="the llama extra is not installed")
def test_llamas_own_tokenizer_model_still_loads_as_ranks(tmp_path: Path) -> None:
    copy = tmp_path / "tokenizer.model"
    copy.write_bytes(vocab.read_vocabulary("llama3"))

    tokenizer = tokenizer_from_file(copy, pattern="llama3")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.count("Refunds are paid") == get_tokenizer("llama3.1:8b").count(
        "Refunds are paid"
    )


@_SENTENCEPIECE
def test_sentencepiece_file_with_its_sha256_loads(model_file: Path) -> None:
    digest = hashlib.sha256(model_file.read_bytes()).hexdigest()

    assert tokenizer_from_file(model_file, sha256=digest).count("hello") > 0


@_SENTENCEPIECE
def test_sentencepiece_file_with_a_wrong_sha256_is_refused(model_file: Path) -> None:
    with pytest.raises(VocabularyError, match=rf"but {'0' * 64} was pinned; refusing to count"):
        tokenizer_from_file(model_file, sha256="0" * 64)


@_SENTENCEPIECE
def test_sentencepiece_file_refuses_a_pattern(model_file: Path) -> None:
    with pytest.raises(
        TokenizerError,
        match=r"is a SentencePiece model, which carries its own splitting and normalization: "
        r"leave out pattern= and normalization=",
    ):
        tokenizer_from_file(model_file, pattern="llama3")


@_SENTENCEPIECE
def test_sentencepiece_file_that_cannot_load_says_so(tmp_path: Path) -> None:
    path = tmp_path / "broken.model"
    path.write_bytes(b"\n\x0e\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02" + b"\xff" * 8)

    with pytest.raises(
        TokenizerError,
        match=r"a SentencePiece model, failed: sentencepiece cannot load it as a model",
    ):
        tokenizer_from_file(path)


def hide_sentencepiece(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the sentencepiece package were not installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sentencepiece" else real(name, *a),
    )


def test_sentencepiece_file_without_the_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"\n\x0e\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02")
    hide_sentencepiece(monkeypatch)

    with pytest.raises(
        TokenizerError,
        match=r"a SentencePiece model, needs sentencepiece: pip install "
        r"'ctxbudget\[sentencepiece\]'",
    ):
        tokenizer_from_file(path)


@pytest.mark.parametrize(
    "raw",
    [b"", b"IQ== 0\n", b"\n\nIQ== 0\n", b'{"model": {}}', b"\n\x03\n\x05abc", b"\n\x02\x99\x01"],
)
def test_is_model_is_false_for_other_files(raw: bytes) -> None:
    assert sentencepiece.is_model(raw) is False


@_SENTENCEPIECE
def test_sentencepiece_counts_a_lone_surrogate_as_a_replacement_character(
    model_file: Path,
) -> None:
    tokenizer = tokenizer_from_file(model_file)

    assert tokenizer.count("a\ud800b") == tokenizer.count("a\ufffdb")


@_SENTENCEPIECE
def test_sentencepiece_budget_holds_on_the_assembled_text(model_file: Path, reference: Any) -> None:
    tokenizer = tokenizer_from_file(model_file, name="gemma3")
    result = ContextAssembler(tokenizer=tokenizer).assemble(
        question="How long do refunds take?",
        chunks=[chunk(content="Refunds are paid within 5 business days. 退款 \U0001f389")],
    )

    assert result.report.total == len(reference.encode(result.text))
    assert result.report.count_exact is True


# --- Mistral's files from mistral-common -----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tokenizer"),
    [
        ("mistral-medium-2312", "mistral-v1"),
        ("mistral-tiny-2312", "mistral-v2"),
        ("mistral-small-2312", "mistral-v2"),
        ("mistral-small-2402", "mistral-v2"),
        ("mistralai:mistral-large-2402", "mistral-v2"),
        ("open-mixtral-8x22b", "mistral-v3"),
        ("open-mixtral-8x22b-2404", "mistral-v3"),
        ("mistral-large-2407", "mistral-v3"),
        ("mistral-tiny-2407", "mistral-v3"),
        ("codestral-2405", "mistral-v3"),
        ("codestral-mamba-2407", "mistral-v3"),
        ("mistral-large-2411", "mistral-v7"),
        ("pixtral-large-2411", "mistral-v7"),
        ("mistral.mistral-large-2407-v1:0", "mistral-v3"),
    ],
)
def test_resolve_model_of_a_sentencepiece_mistral_model_names_its_file(
    name: str, tokenizer: str
) -> None:
    info = resolve_model(name)

    assert (info.family, info.tokenizer) == ("mistral", tokenizer)


def test_mistral_sentencepiece_tables_agree_with_mistral_commons_own() -> None:
    # mistral-common's MODEL_NAME_TO_TOKENIZER_CLS, read from its source so nothing imports it.
    if not vocab.available("mistral-v3"):
        pytest.skip("the mistral extra (mistral-common) is not installed")
    source = Path(str(importlib.util.find_spec("mistral_common").origin)).parent  # type: ignore[union-attr]
    text = (source / "tokens" / "tokenizers" / "mistral.py").read_text()
    table = text.split("MODEL_NAME_TO_TOKENIZER_CLS", 2)[2]
    files = {"v1": "mistral-v1", "v2": "mistral-v2", "v3": "mistral-v3", "v7": "mistral-v7"}
    for line in table.splitlines():
        name, _, call = line.strip().partition('": ')
        if not call or "is_tekken=True" in call:
            continue
        version = call.split("MistralTokenizer.")[1][:2]
        assert resolve_model(name.strip('"')).tokenizer == files[version], name


@_MISTRAL
@pytest.mark.parametrize("name", VERSIONS)
def test_installed_mistral_sentencepiece_file_has_its_pinned_sha256(name: str) -> None:
    raw = vocab.read_vocabulary(name)

    assert hashlib.sha256(raw).hexdigest() == vocab.VOCABULARIES[name].sha256


@pytest.fixture(scope="module")
def mistral_tokenizers() -> dict[str, Any]:
    if not vocab.available("mistral-v3"):
        pytest.skip("the mistral and sentencepiece extras are not installed")
    module: Any = importlib.import_module("mistral_common.tokens.tokenizers.mistral")
    own = module.MistralTokenizer
    built = {"mistral-v1": own.v1(), "mistral-v2": own.v2(), "mistral-v3": own.v3()}
    built["mistral-v7"] = own.v7()
    return {name: t.instruct_tokenizer.tokenizer for name, t in built.items()}


@_MISTRAL
@pytest.mark.parametrize("name", VERSIONS)
@given(text=_SAMPLES)
def test_mistral_sentencepiece_count_equals_mistral_commons_tokenizer(
    mistral_tokenizers: dict[str, Any], name: str, text: str
) -> None:
    expected = len(mistral_tokenizers[name].encode(text, bos=False, eos=False))

    assert get_tokenizer(name).count(text) == expected


@_MISTRAL
def test_mistral_sentencepiece_ids_are_mistral_commons(mistral_tokenizers: dict[str, Any]) -> None:
    text = "<s>[INST] Refunds are paid within 5 business days. 退款 \U0001f389 [/INST]"
    tokenizer = get_tokenizer("mistral-large-2411")

    assert isinstance(tokenizer, SentencePieceTokenizer)
    assert tokenizer.encode(text) == mistral_tokenizers["mistral-v7"].encode(
        text, bos=False, eos=False
    )


@_MISTRAL
def test_mistral_sentencepiece_count_is_exact_and_labelled() -> None:
    method = count_method_of(get_tokenizer("codestral-2405"))

    assert (method.label, method.exact) == ("sentencepiece:mistral-v3", True)


@_MISTRAL
def test_counting_with_a_mistral_sentencepiece_file_never_imports_mistral_common() -> None:
    code = (
        "from ctxbudget import get_tokenizer\n"
        "assert get_tokenizer('mistral-large-2411').count('hello world') == 3\n"
    )

    assert loaded_after(code, ["mistral_common"]) == set()


@pytest.mark.skipif(
    importlib.util.find_spec("mistral_common") is None,
    reason="the mistral extra (mistral-common) is not installed: its file is missed first",
)
def test_mistral_sentencepiece_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_sentencepiece(monkeypatch)

    with pytest.raises(
        TokenizerError,
        match=r"counting with the mistral-v1 tokenizer \(Mistral Medium 2312\) needs "
        r"sentencepiece: pip install 'ctxbudget\[mistral,sentencepiece\]'",
    ):
        _tokens._vocabulary.__wrapped__("mistral-v1")  # uncached: the cache may hold one
