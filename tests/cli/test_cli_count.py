"""`ctxbudget count` (core/ctxbudget/_cli/count.py): token counts with a model's tokenizer."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbudget import get_tokenizer
from tests.support.cli import Run

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
        "method": "tiktoken:o200k_base",
        "exact": True,
        "margin": None,
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
    ran = cli("count", write(tmp_path, "a.txt", TEXT), "--model", "acme-7b")

    assert ran.code == 1
    assert ran.err.startswith("ctxbudget: no known tokenizer for model 'acme-7b'. ctxbudget reads")
    assert ran.err.count("\n") == 1


def test_count_misspelt_model_names_the_nearest_known_one(cli: Run, tmp_path: Path) -> None:
    ran = cli("count", write(tmp_path, "a.txt", TEXT), "--model", "claude-sonet-4-5")

    assert ran.code == 1
    assert ran.err.startswith(
        "ctxbudget: no known tokenizer for model 'claude-sonet-4-5'. The nearest known model is "
        "'claude-sonnet-4-5' (claude)."
    )


@pytest.mark.parametrize(
    "model", ["openai:gpt-4o", "azure/gpt-4o", "azure_openai:gpt-4o-2024-08-06", "GPT-4o"]
)
def test_count_reads_the_model_name_as_the_library_does(
    cli: Run, tmp_path: Path, model: str
) -> None:
    data = cli("count", write(tmp_path, "a.txt", TEXT), "--model", model, "--json").json()

    assert (data["encoding"], data["total"]) == ("o200k_base", get_tokenizer("gpt-4o").count(TEXT))


def test_count_of_claude_is_a_labelled_upper_bound(cli: Run, tmp_path: Path) -> None:
    path = write(tmp_path, "a.txt", TEXT)

    data = cli("count", path, "--model", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "--json")

    assert data.json() == {
        "model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "encoding": "estimate:claude-v3",
        "method": "estimate:claude-v3",
        "exact": False,
        "margin": 0.1,
        "files": [
            {
                "path": path,
                "tokens": get_tokenizer("claude-sonnet-4-5").count(TEXT),
                "characters": len(TEXT),
            }
        ],
        "total": get_tokenizer("claude-sonnet-4-5").count(TEXT),
    }


def test_count_view_of_gemini_says_the_count_is_an_upper_bound(cli: Run, tmp_path: Path) -> None:
    out = cli("count", write(tmp_path, "a.txt", TEXT), "--model", "gemini-2.5-flash").out

    assert out.splitlines()[-2:] == [
        "Counted with estimate:gemini (gemini-2.5-flash): an upper-bound estimate, 10% above the "
        "worst ratio",
        "measured.",
    ]


def test_count_of_model_without_offline_tokenizer_says_so(cli: Run, tmp_path: Path) -> None:
    ran = cli("count", write(tmp_path, "a.txt", TEXT), "--model", "gemma3:4b")

    assert ran.code == 1
    assert ran.err.startswith(
        "ctxbudget: no offline tokenizer for model 'gemma3:4b', a gemma model: "
    )


def test_count_of_an_open_weight_model_is_exact_with_its_extra(cli: Run, tmp_path: Path) -> None:
    if importlib.util.find_spec("llama_models") is None:
        pytest.skip("needs the llama extra: pip install 'ctxbudget[llama]'")
    ran = cli("count", write(tmp_path, "a.txt", TEXT), "--model", "llama3.1:8b", "--json")

    assert ran.code == 0, ran.err
    assert '"exact": true' in ran.out


def test_count_view_works_without_rich(tmp_path: Path) -> None:
    path = write(tmp_path, "a.txt", TEXT)
    code = (
        "import sys\n"
        "sys.modules['rich'] = None\n"  # import rich now raises ImportError
        "from ctxbudget._cli.app import main\n"
        f"sys.exit(main(['count', {path!r}]))\n"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"{'file':<{len(path)}}  tokens  characters",
        f"{path}  {get_tokenizer('gpt-4o').count(TEXT):>6}  {len(TEXT):>10}",
        "Counted with o200k_base (gpt-4o).",
    ]


def test_count_view_aligns_wide_file_names_by_terminal_cells(cli: Run, tmp_path: Path) -> None:
    wide, narrow = write(tmp_path, "文書.txt", TEXT), write(tmp_path, "abcd.txt", TEXT)

    lines = cli("count", wide, narrow).out.splitlines()

    # 文書 takes four cells, as abcd does: the numbers start in the same column.
    assert lines[1].removeprefix(wide) == lines[2].removeprefix(narrow)
