"""The terminal view (core/ctxbudget/_cli/terminal.py): budget notes and summary lines."""

from __future__ import annotations

import re
from pathlib import Path

from ctxbudget import Chunk, ContextAssembler, Turn
from ctxbudget._cli.terminal import _summary
from tests.support.cli import Run


def test_view_marks_a_claimant_that_got_less_than_its_content_trimmed(cli: Run) -> None:
    out = cli("demo", "--preset", "budget").out

    assert re.search(r"\nretrieved +1 +█+░* +\d+ / 545 +floor 218, trimmed *\n", out)


def test_view_names_who_squeezed_retrieval(cli: Run, tmp_path: Path) -> None:
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(
        "\n".join(
            Chunk(id=f"c{i}", content=" ".join(f"w{i}x{j}" for j in range(40))).model_dump_json()
            for i in range(8)
        ),
        encoding="utf-8",
    )
    history = tmp_path / "history.jsonl"
    history.write_text(
        "\n".join(Turn(role="user", content="chat " * 80).model_dump_json() for _ in range(6)),
        encoding="utf-8",
    )
    budget = tmp_path / "budget.toml"
    budget.write_text(
        "total = 900\n[allocations.history]\npriority = 1\n[allocations.retrieved]\npriority = 2\n",
        encoding="utf-8",
    )

    out = cli(
        "inspect", str(chunks), "-q", "Q?", "--history", str(history), "--budget", str(budget)
    ).out

    assert re.search(r"\nretrieved +2 .* trimmed, squeezed by question 6, history \d+", out)


def test_summary_counts_final_check_drops_and_prefix_warnings() -> None:
    result = ContextAssembler(tokenizer="o200k_base").assemble(
        system="Today is 2026-06-01.", question="Q?"
    )
    report = result.report.model_copy(update={"final_check_drops": 2})

    lines = _summary(report)

    assert "The exact count of the final text dropped 2 more item(s)." in lines
    assert any(line.startswith("Prefix warning: ") for line in lines)


def test_view_shows_the_tokens_of_drops_that_were_counted(cli: Run, tmp_path: Path) -> None:
    big = Chunk(id="big", content=" ".join(f"w{j}" for j in range(1_500)), tokens=2_999)
    small = Chunk(id="small", content="A short one.")
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(f"{big.model_dump_json()}\n{small.model_dump_json()}\n", encoding="utf-8")
    budget = tmp_path / "budget.toml"
    budget.write_text("total = 1000\n[allocations.retrieved]\npriority = 1\n", encoding="utf-8")

    out = cli("inspect", str(chunks), "-q", "Q?", "--budget", str(budget)).out

    assert re.search(r"\nclaimant +kind +id +reason +tokens *\n", out)
    assert re.search(r"\nretrieved +chunk +big +oversize +3,\d{3} *\n", out)


def test_view_leaves_out_the_tokens_column_when_no_drop_was_counted(cli: Run) -> None:
    out = cli("demo", "--preset", "permissions").out

    assert re.search(r"\nclaimant +kind +id +reason *\n", out)
