"""`ctxbudget eval` is the measurement harness's own parser, reached through the main CLI."""

from __future__ import annotations

import json

import pytest

from ctxbudget._cli.app import main


def test_eval_subcommand_runs_the_harness(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["eval", "position", "--simulate", "--json"])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert report


def test_eval_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "nonsense"]) == 2
    assert "ctxbudget eval" in capsys.readouterr().err


def test_top_level_help_names_the_eval_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "ctxbudget eval position|knee|ablation" in capsys.readouterr().out
