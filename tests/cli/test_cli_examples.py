"""examples/quickstart.py runs offline; examples/budget.toml is `Budget.default()` as data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxbudget import Budget

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_budget_toml_is_the_default_budget() -> None:
    assert Budget.from_file(EXAMPLES / "budget.toml") == Budget.default()


def test_quickstart_runs_offline_and_prints_prompt_sources_and_drops(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    out = done.stdout

    assert done.stderr == ""
    assert out.startswith("Answer from the sources and cite them like [1].\n")
    assert "\n[1] Returns policy — EU customers (effective 2025-03-01)\n" in out
    assert "(updated 2022-05-01; may be out of date)" in out
    assert "14 days" not in out  # the board minutes are forbidden
    assert '\ndropped: {"board-minutes": "forbidden", "wiki-returns": "duplicate"}\n' in out
    assert out.endswith("citations: cited=(1, 7) unknown=(7,) uncited=(2,)\n")
