"""`ctxbudget count` (core/ctxbudget/_cli/count.py): token counts with a model's tokenizer."""

from __future__ import annotations

from pathlib import Path

from ctxbudget import get_tokenizer
from tests.cli.cli_support import Run

TEXT = "Refunds are paid within 5 business days of receiving the item."


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_count_json_gives_each_file_and_the_total(cli: Run, tmp_path: Path) -> None:
    one, two = write(tmp_path, "a.txt", TEXT), write(tmp_path, "b.md", "# Hi\n")
    expected = get_tokenizer("gpt-4o").count(TEXT)

    data = cli("count", one, two, "--json").json()

    assert data == {
        "model": "gpt-4o",
        "encoding": "o200k_base",
        "files": [
            {"path": one, "tokens": expected, "characters": len(TEXT)},
            {"path": two, "tokens": get_tokenizer("gpt-4o").count("# Hi\n"), "characters": 5},
        ],
        "total": expected + get_tokenizer("gpt-4o").count("# Hi\n"),
    }


def test_count_uses_the_models_tokenizer(cli: Run, tmp_path: Path) -> None:
    path = write(tmp_path, "a.txt", TEXT)

    data = cli("count", path, "--model", "gpt-4", "--json").json()

    assert data["encoding"] == "cl100k_base"
    assert data["total"] == get_tokenizer("cl100k_base").count(TEXT)


def test_count_view_has_a_row_per_file_and_a_total(cli: Run, tmp_path: Path) -> None:
    one, two = write(tmp_path, "a.txt", TEXT), write(tmp_path, "b.txt", TEXT)
    tokens = get_tokenizer("gpt-4o").count(TEXT)

    out = cli("count", one, two).out

    lines = out.splitlines()
    assert lines[0].split() == ["file", "tokens", "characters"]
    assert lines[1].split() == [one, str(tokens), str(len(TEXT))]
    assert lines[3].split() == ["total", str(2 * tokens), str(2 * len(TEXT))]
    assert lines[4] == "Counted with o200k_base (gpt-4o)."


def test_count_view_of_one_file_has_no_total(cli: Run, tmp_path: Path) -> None:
    out = cli("count", write(tmp_path, "a.txt", TEXT)).out

    assert "total" not in out


def test_count_missing_file_exits_1(cli: Run, tmp_path: Path) -> None:
    ran = cli("count", str(tmp_path / "gone.txt"))

    assert (ran.code, ran.out) == (1, "")
    assert ran.err == f"ctxbudget: file {tmp_path / 'gone.txt'} does not exist\n"


def test_count_unknown_model_says_how_to_pick_a_tokenizer(cli: Run, tmp_path: Path) -> None:
    ran = cli("count", write(tmp_path, "a.txt", TEXT), "--model", "llama-3")

    assert ran.code == 1
    assert ran.err.startswith("ctxbudget: no known tokenizer for model 'llama-3'. Pass a model")
    assert ran.err.count("\n") == 1


def test_count_without_files_is_a_usage_error(cli: Run) -> None:
    ran = cli("count")

    assert (ran.code, ran.err) == (
        2,
        "ctxbudget: the following arguments are required: FILE; see 'ctxbudget count --help'\n",
    )
