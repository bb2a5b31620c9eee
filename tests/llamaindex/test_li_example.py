"""examples/llamaindex_rag.py runs offline and shows what reached the model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llamaindex_rag.py"


def test_example_runs_offline_and_prints_the_prompt() -> None:
    # The venv's python; a proxy that goes nowhere, so a download would fail, not hang.
    env = {"PATH": "", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    prompt = out.split("=== what reached the model ===")[1].split("=== citations ===")[0]
    assert prompt.count("<retrieved_documents>") == prompt.count("</retrieved_documents>") == 1
    assert "[1] Returns policy" in prompt
    assert "Refunds take 14 days" in prompt
    assert "Salary" not in prompt
    assert "⚠ asks to ignore earlier instructions" in prompt
    assert "left out: {'forbidden': 2}; sent whole: returns" in out
