"""The `ctxbudget` command (core/ctxbudget/__main__.py): demo, --version, and errors as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from ctxbudget.__main__ import main

FULL_TOML = """
total = 6000
reserve_output = 500

[allocations.retrieved]
min = 1200
max = 3000
priority = 1

[allocations.examples]
max = 250
priority = 1

[allocations.tools]
max = 1200
priority = 2

[allocations.history]
max = 1500
priority = 3
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args], capture_output=True, text=True, check=False
    )


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- through a subprocess, as a user runs it ----------------------------------------------


def test_cli_version_prints_name_and_installed_version() -> None:
    done = run("--version")

    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"ctxbudget {version('ctxbudget')}\n",
        "",
    )


def test_cli_without_arguments_prints_the_demo_prompt_and_report() -> None:
    done = run()

    assert done.returncode == 0
    assert done.stdout.startswith("─" * 72 + "\nPROMPT (")
    assert "\nSOURCES\n" in done.stdout
    assert "\nREPORT\n" in done.stdout


def test_cli_with_invalid_budget_file_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path, "budget.toml", "total = 6000\n[allocations.retrieved]\nmin = -1\n")

    done = run("--budget", path)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"ctxbudget: {path}: [allocations.retrieved] min must be 0 or more, but is -1; "
        "add priority = <n> to [allocations.retrieved] "
        "(0 is never trimmed; higher numbers are trimmed first)\n"
    )


# --- through main(), in process -----------------------------------------------------------


def test_main_version_returns_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ctxbudget {version('ctxbudget')}\n"


def test_main_without_arguments_prints_prompt_sources_and_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0

    prompt, rest = capsys.readouterr().out.split("\nSOURCES\n")
    sources, report = rest.split("\nREPORT\n")
    assert "\nPROMPT (" in prompt
    assert "\n[1] returns-global-1  (document returns-policy)\n" in sources
    assert json.loads(report.split("\n", 1)[1])["budget"] == 5_500


def test_main_json_prints_the_report_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json"]) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["budget"] == 5_500


def test_main_with_budget_file_assembles_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "budget.toml", FULL_TOML)

    assert main(["--budget", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sizes"]["examples"] > 0


def test_main_with_budget_file_missing_tables_names_them_in_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        "budget.toml",
        FULL_TOML.replace("[allocations.tools]\nmax = 1200\npriority = 2\n", ""),
    )

    assert main(["--budget", path]) == 1
    assert capsys.readouterr().err == (
        f"ctxbudget: {path}: tools is sent but has no allocation; add an [allocations.tools] "
        "table (for example with max = 1200, priority = 2)\n"
    )


def test_main_with_json_budget_file_error_uses_json_syntax(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "budget.json", '{"total": 6000, "allocations": {"tools": {}}}')

    assert main(["--budget", path]) == 1
    assert capsys.readouterr().err == (
        f'ctxbudget: {path}: add "priority": <n> to allocations.tools '
        "(0 is never trimmed; higher numbers are trimmed first)\n"
    )


def test_main_with_missing_budget_file_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--budget", str(tmp_path / "nope.toml")]) == 1
    assert capsys.readouterr().err.startswith("ctxbudget: [Errno 2] No such file or directory")


def test_main_with_total_below_reserve_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--total", "400"]) == 1
    assert capsys.readouterr().err == (
        "ctxbudget: reserve_output (500) must be less than total (400); "
        "nothing would be left for the prompt\n"
    )


def test_main_with_total_override_uses_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--total", "8000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["budget"] == 7_500


def test_main_with_model_name_in_any_case_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "GPT-4o", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] > 0


def test_main_with_unknown_model_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "llama-3"]) == 1
    assert capsys.readouterr().err.startswith("ctxbudget: no known tokenizer for model 'llama-3'. ")
