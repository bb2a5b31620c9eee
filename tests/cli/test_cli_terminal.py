"""The terminal view (core/ctxbudget/_cli/terminal.py): budget notes, summary lines, and
when `demo` and `inspect` say counts are not exact."""

from __future__ import annotations

import re
from pathlib import Path

from ctxbudget import Chunk, ContextAssembler, Turn
from ctxbudget._cli.terminal import _summary
from tests.support.cli import Run


def test_view_marks_a_claimant_that_got_less_than_its_content_trimmed(cli: Run) -> None:
    out = cli("demo", "--preset", "budget").out

    assert re.search(r"\nretrieved +1 +█+░* +\d+ / 545 +floor 218, trimmed *\n", out)


def test_view_names_who_trimmed_retrieval(cli: Run, tmp_path: Path) -> None:
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

    assert re.search(r"\nretrieved +2 .* trimmed by question 6, history \d+", out)


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


# --- how exact the counts are -------------------------------------------------------------

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
