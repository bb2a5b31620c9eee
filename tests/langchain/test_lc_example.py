"""examples/langchain_rag.py runs offline and shows what reached the model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langchain_rag.py"


def test_example_runs_and_prints_the_budgeted_prompt(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    out = result.stdout
    assert result.stderr == ""
    assert "--- human ---\n<retrieved_documents>\n" in out
    assert "\n[1] " in out
    assert "\n[2] Refunds — Policy > Payment\n" in out
    assert out.count("Question: How long do refunds take?") == 1
    assert "Globex customers" not in out
    assert "fraud threshold" not in out
    assert '"globex-1": "forbidden"' in out
    assert '"refunds-copy": "duplicate"' in out
    assert out.endswith("--- answer ---\nWithin 5 business days [2].\n")
