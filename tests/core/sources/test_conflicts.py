"""Conflict policies and effective dates (core/ctxbudget/_sources/conflicts.py).

docs/sources.md, "Render": effective dates appear when sources in the context disagree in
date and a conflict policy (prefer-newer, surface-both, abstain) needs them.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import pytest
from pydantic import ValidationError

from ctxbudget import Budget, CallableTokenizer, Chunk, ContextAssembler, SourceOptions
from ctxbudget._fence import FENCE_OPEN
from ctxbudget._sources.conflicts import ConflictPolicy, conflict_instruction, dates_differ

POLICIES: tuple[ConflictPolicy, ...] = ("prefer_newer", "surface_both", "abstain")
EFFECTIVE = re.compile(r"\(effective \d{4}-\d{2}-\d{2}\)")


def chunk(id: str, effective: date | None = None, **fields: Any) -> Chunk:
    contents = {
        "old": "Refunds are issued within 30 days of a return being received.",
        "new": "Since March, refunds are issued within 14 days of receiving a return.",
        "other": "Store credit never expires and can be combined with discount codes.",
    }
    return Chunk(
        id=id,
        content=fields.pop("content", contents.get(id, f"Distinct text for {id}.")),
        title=f"Refund policy {id}",
        effective_date=effective,
        **fields,
    )


OLD = chunk("old", date(2023, 1, 1), score=0.9)
NEW = chunk("new", date(2024, 3, 1), score=0.8)


def assemble(chunks: list[Chunk], **options: Any) -> str:
    assembler = ContextAssembler(
        tokenizer="o200k_base", fence_rule=False, sources=SourceOptions(**options)
    )
    return assembler.assemble(question="How fast are refunds?", chunks=chunks).text


def notice(text: str) -> str:
    """The fence notice: the line right after the fence opens."""
    return text.split(FENCE_OPEN + "\n", 1)[1].split("\n", 1)[0]


# --- conflict_instruction -------------------------------------------------------------------


def test_conflict_instruction_prefer_newer_follows_latest() -> None:
    assert conflict_instruction("prefer_newer") == (
        "Sources marked with different effective dates may disagree; where they do, "
        "follow the one with the latest effective date."
    )


def test_conflict_instruction_surface_both_gives_each_version() -> None:
    assert conflict_instruction("surface_both") == (
        "Sources marked with different effective dates may disagree; where they do, give "
        "each version with its effective date and source number instead of choosing one."
    )


def test_conflict_instruction_abstain_declines_to_answer() -> None:
    assert conflict_instruction("abstain") == (
        "Sources marked with different effective dates may disagree; where they do on the "
        "point asked, say that the sources conflict and do not answer from either."
    )


def test_conflict_instruction_differs_per_policy() -> None:
    assert len({conflict_instruction(p) for p in POLICIES}) == 3


# --- dates_differ ---------------------------------------------------------------------------


def test_dates_differ_two_distinct_dates() -> None:
    assert dates_differ([OLD, NEW]) is True


def test_dates_differ_same_date_twice_is_false() -> None:
    assert dates_differ([OLD, chunk("again", date(2023, 1, 1))]) is False


def test_dates_differ_one_dated_one_undated_is_false() -> None:
    assert dates_differ([OLD, chunk("undated")]) is False


def test_dates_differ_no_chunks_is_false() -> None:
    assert dates_differ([]) is False


def test_dates_differ_ignores_undated_among_dated() -> None:
    assert dates_differ([chunk("undated"), OLD, NEW]) is True


# --- end to end -----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_conflict_policy_with_differing_dates_shows_effective_dates(
    policy: ConflictPolicy,
) -> None:
    text = assemble([OLD, NEW], conflict_policy=policy)
    assert "[1] Refund policy old (effective 2023-01-01)\n" in text
    assert "[2] Refund policy new (effective 2024-03-01)\n" in text


@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_conflict_policy_with_differing_dates_adds_instruction_to_notice(
    policy: ConflictPolicy,
) -> None:
    text = assemble([OLD, NEW], conflict_policy=policy)
    assert notice(text).endswith(" " + conflict_instruction(policy))


@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_conflict_policy_instruction_appears_once(policy: ConflictPolicy) -> None:
    text = assemble([OLD, NEW], conflict_policy=policy)
    assert text.count(conflict_instruction(policy)) == 1


def test_assemble_conflict_policy_undated_source_gets_no_date() -> None:
    text = assemble([OLD, NEW, chunk("other", score=0.1)], conflict_policy="prefer_newer")
    assert "[3] Refund policy other\n" in text


def test_assemble_conflict_policy_xml_effective_attribute() -> None:
    text = assemble([OLD, NEW], conflict_policy="surface_both", source_format="xml")
    assert '<document index="2" title="Refund policy new" effective="2024-03-01">' in text


@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_conflict_policy_one_date_shows_no_effective_dates(
    policy: ConflictPolicy,
) -> None:
    same = chunk("new", date(2023, 1, 1), score=0.8)
    text = assemble([OLD, same, chunk("other")], conflict_policy=policy)
    assert EFFECTIVE.search(text) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_conflict_policy_one_date_adds_no_instruction(policy: ConflictPolicy) -> None:
    text = assemble([OLD, chunk("other")], conflict_policy=policy)
    assert conflict_instruction(policy) not in text


def test_assemble_no_policy_differing_dates_show_no_effective_dates() -> None:
    assert EFFECTIVE.search(assemble([OLD, NEW])) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_no_policy_differing_dates_add_no_instruction(policy: ConflictPolicy) -> None:
    assert conflict_instruction(policy) not in assemble([OLD, NEW])


def test_assemble_no_policy_notice_is_plain() -> None:
    assert "effective dates" not in notice(assemble([OLD, NEW]))


def test_assemble_conflict_policy_dropped_source_date_does_not_count(
    fake_tokenizer: CallableTokenizer,
) -> None:
    # The only source with another date is too big for the allocation and is dropped:
    # the kept sources share one date, so no dates and no instruction are shown.
    budget = Budget.model_validate(
        {
            "total": 2_000,
            "allocations": {
                "question": {"priority": 0},
                "retrieved": {"max": 300, "priority": 1},
            },
        }
    )
    huge = chunk("huge", date(2024, 3, 1), content=" ".join(f"w{i}" for i in range(400)))
    assembler = ContextAssembler(
        tokenizer=fake_tokenizer,
        budget=budget,
        fence_rule=False,
        sources=SourceOptions(conflict_policy="abstain"),
    )
    result = assembler.assemble(question="How fast are refunds?", chunks=[huge, OLD])
    assert [(d.id, d.reason) for d in result.report.dropped] == [("huge", "oversize")]
    assert EFFECTIVE.search(result.text) is None
    assert conflict_instruction("abstain") not in result.text


def test_assembler_invalid_conflict_policy_raises_validation_error() -> None:
    with pytest.raises(
        ValidationError,
        match=r"conflict_policy\n\s+Input should be 'prefer_newer', 'surface_both' or 'abstain'",
    ):
        ContextAssembler(tokenizer="o200k_base", sources=SourceOptions(conflict_policy="newest"))  # type: ignore[arg-type]
