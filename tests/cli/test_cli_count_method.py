"""`ctxbudget demo` and `inspect` say when counts are not exact (_cli/terminal.py)."""

from __future__ import annotations

from pathlib import Path

from ctxbudget import Chunk
from tests.support.cli import Run

_NOTE = (
    "Counted with estimate:claude-v3: an upper-bound estimate, 10% above the worst ratio measured."
)


def _chunks(tmp_path: Path) -> str:
    path = tmp_path / "chunks.jsonl"
    path.write_text(
        Chunk(id="refunds-1", content="Refunds are paid within 5 business days.").model_dump_json()
        + "\n",
        encoding="utf-8",
    )
    return str(path)


def test_inspect_view_for_claude_says_the_counts_are_an_upper_bound(
    cli: Run, tmp_path: Path
) -> None:
    out = cli("inspect", _chunks(tmp_path), "-q", "Refunds?", "--model", "claude-sonnet-4-5").out

    assert _NOTE in out.splitlines()


def test_inspect_json_for_claude_carries_the_count_method(cli: Run, tmp_path: Path) -> None:
    data = cli(
        "inspect",
        _chunks(tmp_path),
        "-q",
        "Refunds?",
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--json",
    ).json()

    report = data["report"]
    assert (report["count_method"], report["count_exact"], report["count_margin"]) == (
        "estimate:claude-v3",
        False,
        0.1,
    )


def test_demo_view_for_openai_model_says_nothing_of_exactness(cli: Run) -> None:
    out = cli("demo").out

    assert "Counted with" not in out
