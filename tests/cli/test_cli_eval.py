"""`ctxbudget eval` is the measurement harness's own parser, reached through the main CLI."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ctxbudget._cli.app import main
from ctxbudget.eval import _cli as eval_cli


def test_eval_subcommand_runs_the_harness(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["eval", "position", "--simulate", "--json"])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert report


def test_eval_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "nonsense"]) == 2
    assert "ctxbudget eval" in capsys.readouterr().err


def test_top_level_help_lists_eval_among_the_commands(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # the one-line description fits

    assert main(["--help"]) == 0

    assert re.search(
        r"\n    count +.*\n    eval +measure ordering, k and metadata on your model: position, "
        r"knee, ablation\n",
        capsys.readouterr().out,
    )


def test_eval_help_is_the_harness_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--help"]) == 0

    assert capsys.readouterr().out.startswith("usage: ctxbudget eval [-h] experiment ...")


def test_eval_plot_without_matplotlib_fails_in_one_line_before_running(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if matplotlib were not installed
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    runs: list[object] = []
    monkeypatch.setattr(eval_cli, "position_sensitivity", lambda *args, **kw: runs.append(args))

    status = main(["eval", "position", "--simulate", "--plot", str(tmp_path / "p.png")])

    captured = capsys.readouterr()
    assert (status, captured.out, runs) == (1, "", [])
    assert captured.err == (
        "ctxbudget eval: --plot needs matplotlib: pip install 'ctxbudget[plot]' "
        "(or leave out --plot)\n"
    )
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("option", ["--csv", "--plot"])
def test_eval_output_into_a_missing_folder_fails_in_one_line_before_running(
    option: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runs: list[object] = []
    monkeypatch.setattr(eval_cli, "position_sensitivity", lambda *args, **kw: runs.append(args))
    target = tmp_path / "missing" / "out.file"

    status = main(["eval", "position", "--simulate", option, str(target)])

    captured = capsys.readouterr()
    assert (status, captured.out, runs) == (1, "", [])
    assert captured.err.startswith(f"ctxbudget eval: cannot write {str(target)!r}: the folder")
    assert captured.err.count("\n") == 1
