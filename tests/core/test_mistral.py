"""Mistral's tekken tokenizers from mistral-common's files (core/ctxbudget/_mistral.py).

The reference is mistral-common's own `Tekkenizer` on the same file; those tests need the
``mistral`` extra and are skipped without it. The rest runs everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import types
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    TiktokenTokenizer,
    TokenizerError,
    VocabularyError,
    count_method_of,
    get_tokenizer,
    resolve_model,
)
from ctxbudget import _mistral as mistral

_EXTRA = pytest.mark.skipif(
    not mistral.available(),
    reason="the mistral extra (mistral-common) is not installed: pip install 'ctxbudget[mistral]'",
)


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("open-mistral-nemo-2407", "tekken_240718"),
        ("mistralai:open-mistral-nemo", "tekken_240718"),
        ("mistral-nemo:12b", "tekken_240718"),
        ("mistralai/Mistral-Nemo-Instruct-2407", "tekken_240718"),
        ("ministral-8b-2410", "tekken_240718"),
        ("mistralai/Ministral-8B-Instruct-2410", "tekken_240718"),
        ("mistral-small-2409", "tekken_240718"),
        ("pixtral-12b-2409", "tekken_240911"),
    ],
)
def test_resolve_model_of_tekken_models_names_their_file(name: str, file: str) -> None:
    info = resolve_model(name)

    assert (info.family, info.tokenizer) == ("mistral", file)


@pytest.mark.parametrize(
    "name", ["mistral-small-2503", "ministral-8b-2512", "codestral-2501", "mistral-large-2512"]
)
def test_resolve_model_of_other_mistral_models_has_no_offline_tokenizer(name: str) -> None:
    # Newer tekken files mistral-common does not ship.
    assert resolve_model(name).tokenizer is None


def test_read_tekken_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mistral, "available", lambda: False)

    with pytest.raises(
        TokenizerError,
        match=r"counting with Mistral's tekken_240718 tokenizer needs its vocabulary file from "
        r"mistral-common: pip install 'ctxbudget\[mistral\]'",
    ):
        mistral.read_tekken("tekken_240718")


def _fake_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tekken_240718.json").write_bytes(raw)
    monkeypatch.setattr(mistral, "available", lambda: True)
    monkeypatch.setattr(mistral, "resources", types.SimpleNamespace(files=lambda _: tmp_path))


def test_read_tekken_with_wrong_sha256_refuses_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    raw = b'{"config": {}, "vocab": []}'
    _fake_package(monkeypatch, tmp_path, raw)

    with pytest.raises(
        VocabularyError,
        match=rf"mistral-common's tekken_240718\.json has sha256 {hashlib.sha256(raw).hexdigest()}"
        rf", but ctxbudget pins {mistral.TEKKEN_SHA256['tekken_240718']}; refusing to count",
    ):
        mistral.read_tekken("tekken_240718")


def _tekken_json(merges: list[bytes], *, specials: int, listed_extra: int = 0) -> bytes:
    """A tekken file: the 256 bytes, then `merges`, then `listed_extra` entries past the size."""
    tokens = [bytes([i]) for i in range(256)] + merges
    tokens += [b"zz%d" % i for i in range(listed_extra)]
    return json.dumps(
        {
            "config": {
                "pattern": r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+",
                "num_vocab_tokens": len(tokens),
                "default_vocab_size": 256 + len(merges) + specials,
                "default_num_special_tokens": specials,
                "version": "v3",
            },
            "vocab": [
                {"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None}
                for i, t in enumerate(tokens)
            ],
        }
    ).encode()


def test_parse_tekken_uses_the_ranks_below_the_vocabulary_size() -> None:
    # "ab" is rank 256; "zz0" is listed past default_vocab_size - specials, so never merged.
    raw = _tekken_json([b"ab"], specials=3, listed_extra=1)

    encoding = mistral.parse_tekken(raw, "tiny")

    assert encoding.n_vocab == 257
    assert len(encoding.encode_ordinary("ab")) == 1
    assert len(encoding.encode_ordinary("zz0")) == 3


@pytest.fixture(scope="module")
def tekkenizer() -> Any:
    if not mistral.available():
        pytest.skip("the mistral extra (mistral-common) is not installed")
    # Imported by name: mypy then need not find the extra where it is not installed.
    tekken = importlib.import_module("mistral_common.tokens.tokenizers.tekken")
    path = resources.files("mistral_common").joinpath("data", "tekken_240718.json")
    return tekken.Tekkenizer.from_file(str(path))


_SAMPLES = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    st.lists(
        st.sampled_from(
            [
                "Refunds are paid within 5 business days.",
                "    def count(self, text: str) -> int:\n        return len(text)\n",
                "退款将在五个工作日内支付。",
                "返金は5営業日以内に支払われます。",
                "\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 1\ufe0f\u20e3",
                "<s>[INST] What is the policy? [/INST]",
                "</s>",
                "[TOOL_CALLS]",
                "\n\n",
                " ",
            ]
        ),
        max_size=12,
    ).map("".join),
)


@_EXTRA
@given(text=_SAMPLES)
def test_tekken_count_equals_mistral_commons_tekkenizer(tekkenizer: Any, text: str) -> None:
    expected = len(tekkenizer.encode(text, bos=False, eos=False))

    assert get_tokenizer("open-mistral-nemo-2407").count(text) == expected


@_EXTRA
def test_tekken_ids_are_mistral_commons_less_its_special_tokens(tekkenizer: Any) -> None:
    text = "Refunds are paid within 5 business days. 退款 \U0001f389"
    tokenizer = get_tokenizer("mistral-nemo")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert [i + 1000 for i in tokenizer.encode(text)] == tekkenizer.encode(
        text, bos=False, eos=False
    )


@_EXTRA
def test_tekken_count_is_exact_and_labelled() -> None:
    method = count_method_of(get_tokenizer("mistral-nemo"))

    assert (method.label, method.exact) == ("tiktoken:tekken_240718", True)


@_EXTRA
def test_tekken_240911_counts_text_as_240718_does() -> None:
    text = "Pixtral reads text with the same vocabulary. 中文 \U0001f389"

    assert get_tokenizer("pixtral-12b-2409").count(text) == get_tokenizer("mistral-nemo").count(
        text
    )
