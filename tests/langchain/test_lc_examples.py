"""examples/langchain_rag.py and examples/langchain_agent.py run offline and show what
reached the model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(example: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / example)],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    assert result.stderr == ""
    return result.stdout


def test_example_runs_and_prints_the_budgeted_prompt(tmp_path: Path) -> None:
    out = run("langchain_rag.py", tmp_path)
    assert "--- human ---\n<retrieved_documents>\n" in out
    assert "\n[1] " in out
    assert "\n[2] Refunds — Policy > Payment\n" in out
    assert out.count("Question: How long do refunds take?") == 1
    assert "Globex customers" not in out
    assert "fraud threshold" not in out
    assert '"globex-1": "forbidden"' in out
    assert '"refunds-copy": "duplicate"' in out
    assert out.endswith("--- answer ---\nWithin 5 business days [2].\n")


def number(pattern: str, text: str) -> int:
    found = re.search(pattern, text, re.MULTILINE)
    assert found is not None, pattern
    return int(found[1])


def test_agent_example_clears_old_results_and_sends_the_latest_whole(tmp_path: Path) -> None:
    out = run("langchain_agent.py", tmp_path)
    budget = number(r"^budget: (\d+) tokens$", out)
    calls = out.split("--- answer ---")[0].split("--- call ")[1:]
    assert len(calls) == 7
    assert all(number(r"^\d+: \d+ messages, (\d+) tokens", call) <= budget for call in calls)
    last = calls[-1].splitlines()
    assert last[-2] == "  ai: lookup_order(6)"
    assert last[-1].startswith("  tool: order 6: delivered.")
    assert "  tool: [tool result cleared: lookup_order, " in calls[-1]
    assert "  human: Check my orders 1 to 6, please." in calls[-1]
    assert out.endswith("--- answer ---\nAll 6 orders were delivered.\n")
