"""`ctxbudget eval`: the experiments from the command line: files, a model path or --simulate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ctxbudget.eval import EvalError, synthetic_corpus
from ctxbudget.eval._cli import cli_main, load_model


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cases, pool = synthetic_corpus(cases=6, pool=24, seed=2)
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(
        "\n".join(c.model_dump_json(exclude_defaults=True) for c in pool), encoding="utf-8"
    )
    lines = [
        {"question": c.question, "keywords": list(c.keywords), "gold": c.gold[0].id} for c in cases
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(map(json.dumps, lines)), encoding="utf-8")
    return path, chunks


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module `eval_cli_models` in the working directory, as a user would write one."""
    (tmp_path / "eval_cli_models.py").write_text(
        "from langchain_core.language_models import GenericFakeChatModel\n"
        "from llama_index.core.llms import MockLLM\n"
        "def echo(prompt):\n"
        "    return prompt\n"
        "chat = GenericFakeChatModel(messages=iter(['no idea'] * 1000))\n"
        "llm = MockLLM()\n"
        "nothing = 42\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "eval_cli_models", raising=False)
    return "eval_cli_models"


@pytest.fixture(autouse=True)
def _keep_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_model adds the working directory


def test_position_with_the_simulator_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["position", "--simulate", "--sizes", "6,20", "--positions", "0,0.5,1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Position sensitivity")
    assert "n = 40 cases per cell" in out


def test_json_output_is_the_results_dict(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["knee", "--simulate", "--ks", "2,4", "--json", "--bias", "0.2", "--seed", "1"]
    assert cli_main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["ks"] == [2, 4]
    assert data["settings"]["model"] == "simulated(bias=0.2, saturation=60, seed=1)"


def test_files_and_a_function_model(
    files: tuple[Path, Path], models: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, chunks = files
    argv = ["ablation", "--cases", str(cases), "--chunks", str(chunks), "--model", f"{models}:echo"]
    assert cli_main([*argv, "--fields", "title,score", "--k", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n"] == 6
    assert data["settings"]["model"] == "eval_cli_models:echo"
    assert [c["variant"] for c in data["cells"]] == ["baseline", "title", "score"]


@pytest.mark.parametrize(
    ("name", "model_id"),
    [("chat", "langchain:GenericFakeChatModel"), ("llm", "llama_index:MockLLM:unknown")],
)
def test_framework_models_load_by_path(models: str, name: str, model_id: str) -> None:
    assert load_model(f"{models}:{name}").model_id == model_id


def test_cache_csv_and_plot(
    files: tuple[Path, Path], models: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, chunks = files
    argv = [
        "position", "--cases", str(cases), "--chunks", str(chunks), "--model", f"{models}:echo",
        "--sizes", "4", "--distractors", "adjacent", "--cache", str(tmp_path / "cache"),
        "--csv", str(tmp_path / "out.csv"), "--plot", str(tmp_path / "out.png"), "--no-progress",
    ]  # fmt: skip
    assert cli_main(argv) == 0
    assert (tmp_path / "cache" / "answers.sqlite3").is_file()
    assert (tmp_path / "out.csv").read_text(encoding="utf-8").startswith("size,position,source")
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG"
    assert "1.00 [1.00, 1.00]" in capsys.readouterr().out  # echoing the prompt is always right


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["knee", "--model", "x:y"], "--cases and --chunks are required"),
        (["knee", "--simulate", "--cases", "c.jsonl"], "give both --cases and --chunks"),
        (
            ["knee", "--simulate", "--cases", "missing.jsonl", "--chunks", "missing.jsonl"],
            "No such",
        ),
        (["position", "--simulate", "--sizes", "6,300"], "size 300 needs 299 distractors"),
    ],
)
def test_errors_are_one_line_with_exit_code_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("ctxbudget eval: ")
    assert message in err


@pytest.mark.parametrize(
    ("model", "message"),
    [("nocolon", "--model must be module:attribute"), ("no_such_module_xyz:f", "cannot load")],
)
def test_a_model_that_cannot_load_is_a_one_line_error(
    files: tuple[Path, Path], model: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, chunks = files
    assert cli_main(["knee", "--cases", str(cases), "--chunks", str(chunks), "--model", model]) == 1
    assert message in capsys.readouterr().err


def test_a_model_path_naming_no_model_is_an_error(models: str) -> None:
    with pytest.raises(EvalError, match=r"--model eval_cli_models:nothing is a int; name a"):
        load_model(f"{models}:nothing")
    with pytest.raises(EvalError, match="cannot load --model eval_cli_models:missing"):
        load_model(f"{models}:missing")


@pytest.mark.parametrize("argv", [["position", "--simulate", "--sizes", "a,b"], ["knee"], []])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli_main(argv)
    assert exit_info.value.code == 2


def test_bad_positions_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["position", "--simulate", "--positions", "middle"])
    assert "expected numbers like 0,0.5,1" in capsys.readouterr().err
