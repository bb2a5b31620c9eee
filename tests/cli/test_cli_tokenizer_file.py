"""``--tokenizer-file`` (with ``--pattern`` and ``--sha256``) on ``count``, ``inspect`` and
``demo`` (core/ctxbudget/_cli/options.py): a model's own file in place of ``--model``.

The files are built in the test: a tiktoken-format ranks file of single bytes, and a tiny
SentencePiece model trained here (skipped without the sentencepiece extra).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import tokenizer_from_file
from tests.support.cli import Run

TEXT = "Refunds are paid within 5 business days. 退款 \U0001f389\n"


@pytest.fixture
def ranks(tmp_path: Path) -> str:
    path = tmp_path / "tokenizer.model"
    tokens = [bytes([i]) for i in range(256)] + [b"Re", b"Refunds"]
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return str(path)


@pytest.fixture
def text_file(tmp_path: Path) -> str:
    path = tmp_path / "a.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def test_count_with_a_ranks_file_counts_as_the_library_does(
    cli: Run, ranks: str, text_file: str
) -> None:
    data = cli("count", text_file, "--tokenizer-file", ranks, "--pattern", "llama3", "--json")

    expected = tokenizer_from_file(ranks, pattern="llama3").count(TEXT)
    assert (data.code, data.json()["total"]) == (0, expected)
    assert data.json()["model"] == ranks
    assert (data.json()["method"], data.json()["exact"]) == ("tiktoken:tokenizer.model", True)


def test_count_with_a_sentencepiece_file_counts_as_sentencepiece_does(
    cli: Run, tmp_path: Path, text_file: str
) -> None:
    if importlib.util.find_spec("sentencepiece") is None:
        pytest.skip(
            "the sentencepiece extra is not installed: pip install 'ctxbudget[sentencepiece]'"
        )
    module: Any = importlib.import_module("sentencepiece")
    model = io.BytesIO()
    module.SentencePieceTrainer.train(
        sentence_iterator=iter([TEXT, "Refunds take five days.", "def f(x): return x"] * 20),
        model_writer=model,
        vocab_size=300,
        hard_vocab_limit=False,
        byte_fallback=True,
        character_coverage=1.0,
        minloglevel=2,
    )
    path = tmp_path / "gemma3.model"
    path.write_bytes(model.getvalue())

    data = cli("count", text_file, "--tokenizer-file", str(path), "--json").json()

    processor = module.SentencePieceProcessor(model_file=str(path))
    assert data["total"] == len(processor.encode(TEXT))
    assert (data["method"], data["exact"]) == ("sentencepiece:gemma3.model", True)


def test_count_with_the_files_sha256_counts(cli: Run, ranks: str, text_file: str) -> None:
    digest = hashlib.sha256(Path(ranks).read_bytes()).hexdigest()

    ran = cli(
        "count", text_file, "--tokenizer-file", ranks, "--pattern", "llama3", "--sha256", digest
    )

    assert ran.code == 0
    # The note is wrapped at the pipe width: the long path goes whole on a line of its own.
    assert f"Counted with tokenizer.model\n({ranks}).\n" in ran.out


def test_count_with_a_wrong_sha256_refuses_the_file_in_one_line(
    cli: Run, ranks: str, text_file: str
) -> None:
    ran = cli(
        "count", text_file, "--tokenizer-file", ranks, "--pattern", "llama3", "--sha256", "0" * 64
    )

    assert ran.code == 1
    assert ran.err.count("\n") == 1
    assert ran.err.startswith(f"ctxbudget: tokenizer file '{ranks}' has sha256 ")
    assert f"but {'0' * 64} was pinned; refusing to count with it" in ran.err


def test_count_with_a_ranks_file_without_pattern_names_the_option(
    cli: Run, ranks: str, text_file: str
) -> None:
    ran = cli("count", text_file, "--tokenizer-file", ranks)

    assert ran.code == 1
    assert ran.err.count("\n") == 1
    assert "pass pattern=<the model's regex> (--pattern on the command line) or one of" in ran.err


def test_count_with_a_missing_tokenizer_file_says_so(
    cli: Run, tmp_path: Path, text_file: str
) -> None:
    missing = str(tmp_path / "nowhere.model")

    ran = cli("count", text_file, "--tokenizer-file", missing)

    assert (ran.code, ran.err) == (1, f"ctxbudget: --tokenizer-file {missing} does not exist\n")


@pytest.mark.parametrize("option", ["--pattern", "--sha256"])
def test_count_with_a_file_option_but_no_file_is_a_usage_error(
    cli: Run, text_file: str, option: str
) -> None:
    ran = cli("count", text_file, option, "llama3")

    assert ran.code == 2
    assert ran.err == f"ctxbudget: {option} applies to --tokenizer-file PATH; pass one\n"


def test_count_with_both_model_and_tokenizer_file_is_a_usage_error(
    cli: Run, ranks: str, text_file: str
) -> None:
    ran = cli("count", text_file, "--model", "gpt-4o", "--tokenizer-file", ranks)

    assert ran.code == 2
    assert "argument --tokenizer-file: not allowed with argument --model" in ran.err


def test_count_of_a_model_without_offline_tokenizer_names_tokenizer_file(
    cli: Run, text_file: str
) -> None:
    ran = cli("count", text_file, "--model", "mistral-small-2503")

    assert ran.code == 1
    assert ran.err.count("\n") == 1
    assert "on the command line, pass --tokenizer-file PATH (the model's own" in ran.err


def test_inspect_with_a_tokenizer_file_counts_the_prompt_with_it(
    cli: Run, ranks: str, tmp_path: Path
) -> None:
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(json.dumps({"id": "c1", "content": TEXT}) + "\n", encoding="utf-8")

    data = cli(
        "inspect",
        str(chunks),
        "-q",
        "Refunds?",
        "--tokenizer-file",
        ranks,
        "--pattern",
        "llama3",
        "--json",
    ).json()

    tokenizer = tokenizer_from_file(ranks, pattern="llama3")
    assert data["model"] == ranks
    assert data["report"]["total"] == tokenizer.count(data["prompt"])


def test_demo_with_a_tokenizer_file_counts_the_prompt_with_it(cli: Run, ranks: str) -> None:
    data = cli("demo", "--tokenizer-file", ranks, "--pattern", "o200k_base", "--json").json()

    tokenizer = tokenizer_from_file(ranks, pattern="o200k_base")
    assert data["model"] == ranks
    assert data["report"]["total"] == tokenizer.count(data["prompt"])
