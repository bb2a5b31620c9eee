"""A tokenizer from the user's own vocabulary file (`tokenizer_from_file`, in _tokens.py).

Tiktoken-format files are built here from a few ranks; the comparisons with a real model's
file copy the installed Llama 3 and DeepSeek files and are skipped without their extras.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from ctxbudget import (
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    TokenizerError,
    VocabularyError,
    count_method_of,
    get_tokenizer,
    tokenizer_from_file,
)
from ctxbudget import _vocab as vocab
from ctxbudget._joins import JoinCounter, join_counter
from ctxbudget.types import CountCache

TEXT = "Refunds are paid within 5 business days. 退款 \U0001f389 <|eot_id|>\n    indented\n"


def _ranks(tmp_path: Path, merges: list[bytes]) -> Path:
    tokens = [bytes([i]) for i in range(256)] + merges
    path = tmp_path / "tiny.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return path


def test_tokenizer_from_a_ranks_file_counts_with_its_pattern(tmp_path: Path) -> None:
    path = _ranks(tmp_path, [b"ab", b"abab"])

    tokenizer = tokenizer_from_file(path, pattern=r"\S+|\s+")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.count("abab ab") == 3
    assert count_method_of(tokenizer).label == "tiktoken:tiny.tiktoken"
    assert count_method_of(tokenizer).exact is True


def test_tokenizer_from_a_ranks_file_takes_a_pattern_by_name(tmp_path: Path) -> None:
    tokenizer = tokenizer_from_file(_ranks(tmp_path, []), pattern="llama3", name="mine")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.name == "mine"
    assert isinstance(join_counter(tokenizer.encoding), JoinCounter)  # a pattern with join rules


def test_tokenizer_from_a_ranks_file_without_pattern_asks_for_one(tmp_path: Path) -> None:
    with pytest.raises(
        TokenizerError,
        match=r"is a tiktoken-format ranks file, which does not say how text is split: pass "
        r"pattern=<the model's regex> \(--pattern on the command line\) or one of cl100k_base, "
        r"llama3, llama4, o200k_base",
    ):
        tokenizer_from_file(_ranks(tmp_path, []))


def test_tokenizer_from_a_malformed_ranks_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"YQ== 0\nnot a rank line at all\n")

    with pytest.raises(
        TokenizerError, match=r"bad\.tiktoken' line 2 is not '<base64 token> <rank>'"
    ):
        tokenizer_from_file(path, pattern="o200k_base")


def test_tokenizer_from_file_with_a_wrong_sha256_refuses_it(tmp_path: Path) -> None:
    path = _ranks(tmp_path, [])
    actual = hashlib.sha256(path.read_bytes()).hexdigest()

    with pytest.raises(
        VocabularyError,
        match=rf"has sha256 {actual}, but {'0' * 64} was pinned; refusing to count with it",
    ):
        tokenizer_from_file(path, pattern="o200k_base", sha256="0" * 64)


def test_tokenizer_from_file_with_its_sha256_loads(tmp_path: Path) -> None:
    path = _ranks(tmp_path, [])
    digest = hashlib.sha256(path.read_bytes()).hexdigest().upper()

    assert tokenizer_from_file(path, pattern="o200k_base", sha256=digest).count("ab") == 2


def test_tokenizer_from_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match=r"cannot read tokenizer file '.*nowhere\.json'"):
        tokenizer_from_file(tmp_path / "nowhere.json")


def test_tokenizer_from_a_json_file_of_another_kind_says_what_it_takes(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"architectures": ["LlamaForCausalLM"]}')

    with pytest.raises(
        TokenizerError,
        match=r"is neither a Hugging Face tokenizer\.json \(it has no 'model'\) nor a Mistral "
        r"tekken file",
    ):
        tokenizer_from_file(path)


def test_tokenizer_from_a_json_file_refuses_a_pattern(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {}}')

    with pytest.raises(TokenizerError, match=r"carries its own split pattern"):
        tokenizer_from_file(path, pattern="o200k_base")


def test_tokenizer_from_a_tekken_file_counts_with_its_own_pattern(tmp_path: Path) -> None:
    tokens = [bytes([i]) for i in range(256)] + [b"ab"]
    path = tmp_path / "tekken.json"
    path.write_text(
        json.dumps(
            {
                "config": {
                    "pattern": r"\S+|\s+",
                    "default_vocab_size": 257 + 3,
                    "default_num_special_tokens": 3,
                },
                "vocab": [
                    {"rank": i, "token_bytes": base64.b64encode(t).decode()}
                    for i, t in enumerate(tokens)
                ],
            }
        )
    )

    tokenizer = tokenizer_from_file(path, name="tekken-2507")

    assert isinstance(tokenizer, TiktokenTokenizer)
    assert (tokenizer.name, tokenizer.count("ab ab")) == ("tekken-2507", 3)


@pytest.mark.skipif(not vocab.available("llama3"), reason="the llama extra is not installed")
def test_tokenizer_from_a_copy_of_llamas_file_counts_as_ctxbudgets_llama3(tmp_path: Path) -> None:
    copy = tmp_path / "tokenizer.model"
    copy.write_bytes(vocab.read_vocabulary("llama3"))

    tokenizer = tokenizer_from_file(
        copy, pattern="llama3", sha256=vocab.VOCABULARIES["llama3"].sha256
    )

    assert tokenizer.count(TEXT) == get_tokenizer("llama3").count(TEXT)
    assert CountCache(tokenizer).count_joined([TEXT, "\n\n", TEXT]) == tokenizer.count(
        TEXT + "\n\n" + TEXT
    )


@pytest.mark.skipif(
    not vocab.available("deepseek-v3"), reason="the deepseek extra is not installed"
)
def test_tokenizer_from_a_tokenizer_json_counts_as_hugging_face(tmp_path: Path) -> None:
    copy = tmp_path / "tokenizer.json"
    copy.write_bytes(vocab.read_vocabulary("deepseek-v3"))

    tokenizer = tokenizer_from_file(copy, name="my-deepseek")

    assert isinstance(tokenizer, HuggingFaceTokenizer)
    assert tokenizer.count(TEXT) == get_tokenizer("deepseek-v3").count(TEXT)
    assert count_method_of(tokenizer).label == "huggingface:my-deepseek"
