"""`ctxbudget demo` (core/ctxbudget/_cli/demo.py): each preset shows its rule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ctxbudget import Budget
from tests.support.cli import Run

FENCE_END = "</retrieved_documents>"


def sources(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {source["id"]: source for source in data["sources"]}


def dropped(data: dict[str, Any]) -> dict[str, str]:
    return {item["id"]: item["reason"] for item in data["report"]["dropped"]}


def test_demo_without_arguments_runs_the_first_preset(cli: Run) -> None:
    ran = cli("--json")

    assert ran.code == 0
    assert ran.json()["preset"] == "conflict"


def test_demo_returns_preset_sends_the_returns_policy_whole(cli: Run) -> None:
    data = cli("demo", "--preset", "returns", "--json").json()

    assert data["report"]["escalated"] == "returns-policy"
    whole = sources(data)["returns-policy"]
    assert whole["document"] is True
    assert "returns-policy#damaged-goods" in whole["covers"]
    assert "## Damaged goods\n\nIf an item arrives damaged" in data["prompt"]


def test_demo_returns_preset_shows_ocr_warning_and_freshness_of_the_scan(cli: Run) -> None:
    data = cli("demo", "--preset", "returns", "--json").json()

    warranty = sources(data)["alpine-shell-jacket#warranty"]["text"]
    assert warranty.startswith(
        "[5] Alpine Shell Jacket (SKU 4411) — Warranty "
        "(updated 2023-09-14; may be out of date) ⚠ OCR confidence 0.71 on page 2\n"
    )


def test_demo_conflict_preset_dates_both_versions_and_prefers_the_newer(cli: Run) -> None:
    data = cli("demo", "--preset", "conflict", "--json").json()
    prompt = data["prompt"]

    faq = sources(data)["hr-faq#how-many-vacation-days-do-i-get"]["text"]
    assert "(effective 2024-02-01) (updated 2024-02-20; may be out of date)" in faq
    assert "20 days of paid vacation" in faq
    assert "(effective 2026-01-01)" in sources(data)["pto-policy-2026"]["text"]
    assert "24 days of paid time off" in prompt
    assert "follow the one with the latest effective date" in prompt


def test_demo_injection_preset_flags_and_fences_the_notice(cli: Run) -> None:
    data = cli("demo", "--preset", "injection", "--json").json()
    prompt = data["prompt"]

    notice = sources(data)["hr-portal-migration"]["text"]
    assert notice.split("\n", 1)[0] == (
        "[1] Data migration notice: new HR portal "
        "⚠ asks to ignore earlier instructions; addresses instructions to an AI"
    )
    assert prompt.count(FENCE_END) == 1
    assert prompt.index(FENCE_END) > prompt.index("email their password")
    assert "&lt;/retrieved_documents>\n(1) IT security policy — Passwords\n" in notice
    assert not re.search(r"^\[\d+\] IT security policy", prompt, re.MULTILINE)


def test_demo_injection_preset_drops_the_wiki_mirror_as_duplicate(cli: Run) -> None:
    data = cli("demo", "--preset", "injection", "--json").json()

    assert dropped(data)["support-wiki-passwords#top"] == "duplicate"
    assert "it-security#passwords" in sources(data)


def test_demo_escalation_preset_sends_the_whole_agreement(cli: Run) -> None:
    data = cli("demo", "--preset", "escalation", "--json").json()

    assert data["report"]["escalated"] == "supply-agreement-bergwerk"
    agreement = sources(data)["supply-agreement-bergwerk"]
    assert agreement["document"] is True
    assert "supply-agreement-bergwerk#7-2-late-delivery-credit" in agreement["covers"]
    assert "### 7.3 Exceptions to clause 7.2\n\nClause 7.2 does not apply" in agreement["text"]


def test_demo_permissions_preset_keeps_the_board_minutes_out(cli: Run) -> None:
    ran = cli("demo", "--preset", "permissions", "--json")

    assert dropped(ran.json())["board-minutes-2026-04#warehouse-consolidation"] == "forbidden"
    assert "Halle" not in ran.out  # not in the prompt, the sources or the report


def test_demo_permissions_preset_as_board_shows_the_minutes(cli: Run) -> None:
    data = cli("demo", "--preset", "permissions", "--as", "board", "--json").json()

    assert "board-minutes-2026-04#warehouse-consolidation" in sources(data)
    assert "moving all shipping\nto the new site in Halle" in data["prompt"]
    assert data["principal"] == {"tenant": "acme", "groups": ["board"]}


def test_demo_budget_preset_drops_whole_chunks_over_budget(cli: Run) -> None:
    data = cli("demo", "--preset", "budget", "--json").json()
    report = data["report"]

    assert report["budget"] == Budget.for_context_window(1_500, reserve_output=500).available
    assert report["total"] <= report["budget"]
    over = [item for item, reason in dropped(data).items() if reason == "over_budget"]
    assert "alpine-shell-jacket#care" in over
    assert all(source["text"].split("\n", 1)[1] in data["prompt"] for source in data["sources"])


def test_demo_budget_file_overrides_the_preset_window(cli: Run) -> None:
    budget = Path(__file__).resolve().parents[2] / "examples" / "budget.toml"

    data = cli("demo", "--preset", "budget", "--budget", str(budget), "--json").json()

    assert data["report"]["budget"] == 5_500


def test_demo_own_question_has_no_preset(cli: Run) -> None:
    data = cli("demo", "--question", "Do we ship outside the EU?", "--json").json()

    assert data["preset"] is None
    assert data["question"] == "Do we ship outside the EU?"
    assert data["prompt"].endswith("Question: Do we ship outside the EU?")
    assert "shipping-faq#how-long-does-delivery-take" in sources(data)


def test_demo_question_with_only_stopwords_sends_no_sources(cli: Run) -> None:
    data = cli("demo", "--question", "is it?", "--json").json()

    assert data["sources"] == []
    assert data["report"]["sizes"]["retrieved"] == 0


def test_demo_blank_question_is_an_error(cli: Run) -> None:
    ran = cli("demo", "--question", "  ")

    assert (ran.code, ran.out) == (1, "")
    assert ran.err == (
        "ctxbudget: --question is empty; ask something, e.g. --question 'Can I return it?'\n"
    )


def test_demo_xml_format_renders_document_tags(cli: Run) -> None:
    data = cli("demo", "--preset", "conflict", "--format", "xml", "--json").json()

    assert '<document index="1" title="HR FAQ"' in data["prompt"]


def test_demo_total_override_changes_the_budget(cli: Run) -> None:
    assert cli("--total", "8000", "--json").json()["report"]["budget"] == 7_500


def test_demo_model_name_in_any_case_counts_with_its_tokenizer(cli: Run) -> None:
    data = cli("--model", "GPT-4", "--json").json()

    assert data["model"] == "GPT-4"
    assert data["report"]["total"] > 0


def test_demo_preset_and_question_together_is_a_usage_error(cli: Run) -> None:
    ran = cli("demo", "--preset", "conflict", "--question", "Why?")

    assert ran.code == 2
    assert ran.err == (
        "ctxbudget: argument --question/-q: not allowed with argument --preset; "
        "see 'ctxbudget demo --help'\n"
    )


def test_demo_view_shows_prompt_budget_and_drops(cli: Run) -> None:
    ran = cli("demo", "--preset", "permissions")

    assert ran.code == 0
    assert "Prompt: " in ran.out
    assert "\nQuestion: Is the Leipzig warehouse going to close?\n" in ran.out
    assert re.search(r"\nretrieved +1 +█+░* +\d+ / 3,000 +floor 1,200 *\n", ran.out)
    assert re.search(
        r"\nretrieved +chunk +board-minutes-2026-04#warehouse-consolidation +forbidden *\n", ran.out
    )
    assert "  forbidden: the principal may not see it\n" in ran.out
    assert "Halle" not in ran.out


def test_demo_view_names_the_escalated_document(cli: Run) -> None:
    out = cli("demo", "--preset", "escalation").out

    assert re.search(r"\n\[1\] +supply-agreement-bergwerk +whole, in place of 7 chunks", out)
    assert "\nEscalated: supply-agreement-bergwerk was sent whole in place of its chunks.\n" in out
