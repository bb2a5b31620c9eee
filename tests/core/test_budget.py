"""Allocation and Budget as validated, immutable data (core/ctxbudget/budget.py)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

import ctxbudget.budget
from ctxbudget import Allocation, Budget

TOML_LIST = """
total = 6000
reserve_output = 500

[[allocations]]
name = "system"
min = 610
max = 610
priority = 0

[[allocations]]
name = "retrieved"
min = 1200
max = 3000
priority = 1

[[allocations]]
name = "history"
max = 1500
priority = 3
"""

TOML_MAPPING = """
total = 6000
reserve_output = 500

[allocations.system]
min = 610
max = 610
priority = 0

[allocations.retrieved]
min = 1200
max = 3000
priority = 1

[allocations.history]
max = 1500
priority = 3
"""

EXPECTED = Budget(
    total=6_000,
    reserve_output=500,
    allocations=(
        Allocation("system", min=610, max=610, priority=0),
        Allocation("retrieved", min=1_200, max=3_000, priority=1),
        Allocation("history", max=1_500, priority=3),
    ),
)


def as_dict() -> dict[str, object]:
    return {
        "total": 6_000,
        "reserve_output": 500,
        "allocations": [
            {"name": "system", "min": 610, "max": 610, "priority": 0},
            {"name": "retrieved", "min": 1_200, "max": 3_000, "priority": 1},
            {"name": "history", "max": 1_500, "priority": 3},
        ],
    }


def budget_with(*allocations: dict[str, object], total: int = 1_000, reserve: int = 0) -> Budget:
    return Budget.model_validate(
        {"total": total, "reserve_output": reserve, "allocations": list(allocations)}
    )


# --- construction -------------------------------------------------------------------------


def test_allocation_positional_name_sets_fields() -> None:
    allocation = Allocation("retrieved", min=1200, max=3000, priority=1)

    assert allocation.name == "retrieved"
    assert (allocation.min, allocation.max, allocation.priority) == (1200, 3000, 1)


def test_allocation_keyword_name_equals_positional() -> None:
    assert Allocation(name="tools", max=5, priority=2) == Allocation("tools", max=5, priority=2)


def test_allocation_repr_shows_all_fields() -> None:
    allocation = Allocation("retrieved", min=1200, max=3000, priority=1)

    assert repr(allocation) == "Allocation('retrieved', min=1200, max=3000, priority=1)"


def test_allocation_defaults_to_no_floor_and_no_cap() -> None:
    allocation = Allocation("tools", priority=2)

    assert allocation.min == 0
    assert allocation.max is None


def test_budget_model_validate_accepts_dict() -> None:
    assert Budget.model_validate(as_dict()) == EXPECTED


def test_budget_model_validate_does_not_mutate_dict() -> None:
    data = as_dict()
    Budget.model_validate(data)

    assert data == as_dict()


def test_budget_model_validate_json_accepts_json_text() -> None:
    assert Budget.model_validate_json(json.dumps(as_dict())) == EXPECTED


def test_budget_model_validate_accepts_toml_list_of_tables() -> None:
    assert Budget.model_validate(tomllib.loads(TOML_LIST)) == EXPECTED


def test_budget_model_validate_accepts_toml_mapping_of_names() -> None:
    assert Budget.model_validate(tomllib.loads(TOML_MAPPING)) == EXPECTED


def test_budget_mapping_shape_keeps_declaration_order() -> None:
    budget = Budget.model_validate(tomllib.loads(TOML_MAPPING))

    assert [a.name for a in budget.allocations] == ["system", "retrieved", "history"]


def test_budget_json_round_trip_is_equal() -> None:
    assert Budget.model_validate_json(EXPECTED.model_dump_json()) == EXPECTED


def test_budget_from_file_loads_json(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(as_dict()), encoding="utf-8")

    assert Budget.from_file(path) == EXPECTED


def test_budget_from_file_loads_toml(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text(TOML_MAPPING, encoding="utf-8")

    assert Budget.from_file(str(path)) == EXPECTED


def test_budget_from_file_rejects_yaml_pointing_to_model_validate(tmp_path: Path) -> None:
    path = tmp_path / "budget.yaml"
    path.write_text("total: 6000\n", encoding="utf-8")

    with pytest.raises(
        ValueError, match=r"expected a \.json or \.toml file.*Budget\.model_validate"
    ):
        Budget.from_file(path)


# --- rejections ---------------------------------------------------------------------------


@pytest.mark.parametrize("total", [0, -1])
def test_budget_rejects_non_positive_total(total: int) -> None:
    with pytest.raises(ValidationError, match=r"total\n\s+Input should be greater than 0"):
        budget_with({"name": "tools", "priority": 2}, total=total)


def test_budget_rejects_negative_reserve_output() -> None:
    with pytest.raises(
        ValidationError, match=r"reserve_output\n\s+Input should be greater than or equal to 0"
    ):
        budget_with({"name": "tools", "priority": 2}, reserve=-1)


@pytest.mark.parametrize("field", ["min", "max", "priority"])
def test_allocation_rejects_negative_field(field: str) -> None:
    settings: dict[str, object] = {"name": "tools", "priority": 2, field: -1}

    with pytest.raises(
        ValidationError, match=rf"allocations\.0\.{field}\n\s+Input should be greater than or equal"
    ):
        budget_with(settings)


def test_allocation_rejects_negative_min_in_constructor() -> None:
    with pytest.raises(
        ValidationError, match=r"min\n\s+Input should be greater than or equal to 0"
    ):
        Allocation("tools", min=-5, priority=2)


def test_allocation_rejects_min_above_max_naming_values_and_fix() -> None:
    with pytest.raises(
        ValidationError,
        match=r"allocation 'retrieved': min \(3000\) is greater than max \(1200\); "
        r"lower min or raise max",
    ):
        Allocation("retrieved", min=3000, max=1200, priority=1)


def test_budget_rejects_duplicate_names() -> None:
    with pytest.raises(
        ValidationError, match="allocation 'tools' appears twice; give each claimant one allocation"
    ):
        budget_with({"name": "tools", "priority": 2}, {"name": "tools", "priority": 3})


def test_budget_rejects_unknown_claimant_name() -> None:
    with pytest.raises(
        ValidationError, match=r"allocations\.0\.name\n\s+Input should be 'system', 'question'"
    ):
        budget_with({"name": "scratchpad", "priority": 2})


def test_budget_rejects_unknown_field() -> None:
    with pytest.raises(ValidationError, match=r"allocations\.0\.floor\n\s+Extra inputs"):
        budget_with({"name": "tools", "priority": 2, "floor": 3})


@pytest.mark.parametrize("reserve", [1_000, 1_001])
def test_budget_rejects_reserve_output_not_below_total(reserve: int) -> None:
    with pytest.raises(
        ValidationError,
        match=rf"reserve_output \({reserve}\) must be less than total \(1000\); "
        "nothing would be left for the prompt",
    ):
        budget_with({"name": "tools", "priority": 2}, reserve=reserve)


def test_budget_rejects_floors_above_available_listing_them() -> None:
    with pytest.raises(
        ValidationError,
        match=r"the floors \(system 600, retrieved 300\) sum to 900 tokens, but "
        r"total - reserve_output is only 800; they can never all be met\. "
        "Lower some min values or raise total",
    ):
        budget_with(
            {"name": "system", "min": 600, "max": 600, "priority": 0},
            {"name": "retrieved", "min": 300, "priority": 1},
            {"name": "tools", "priority": 2},
            total=1_000,
            reserve=200,
        )


def test_budget_accepts_floors_equal_to_available() -> None:
    budget = budget_with(
        {"name": "system", "min": 600, "priority": 0},
        {"name": "retrieved", "min": 200, "priority": 1},
        total=1_000,
        reserve=200,
    )

    assert sum(a.min for a in budget.allocations) == budget.available


def test_allocation_rejects_missing_priority() -> None:
    with pytest.raises(ValidationError, match=r"priority\n\s+Field required"):
        Allocation("tools", max=100)


def test_budget_rejects_allocation_missing_priority() -> None:
    with pytest.raises(ValidationError, match=r"allocations\.0\.priority\n\s+Field required"):
        budget_with({"name": "tools", "max": 100})


# --- None is no cap, 0 is a cap -----------------------------------------------------------


def test_budget_max_missing_is_none() -> None:
    budget = budget_with({"name": "history", "priority": 3})

    history = budget.allocation("history")
    assert history is not None
    assert history.max is None


def test_budget_max_zero_is_a_cap_not_none() -> None:
    budget = budget_with({"name": "history", "max": 0, "priority": 3})

    history = budget.allocation("history")
    assert history is not None
    assert history.max is not None
    assert history.max == 0


# --- defaults and helpers -----------------------------------------------------------------


def test_budget_default_matches_design_numbers() -> None:
    budget = Budget.default()

    assert budget.total == 6_000
    assert budget.reserve_output == 500
    assert [(a.name, a.min, a.max, a.priority) for a in budget.allocations] == [
        ("system", 610, 610, 0),
        ("question", 20, 200, 0),
        ("retrieved", 1_200, 3_000, 1),
        ("examples", 250, 250, 1),
        ("tools", 0, 1_200, 2),
        ("history", 0, 1_500, 3),
        ("memory", 0, 400, 4),
    ]


def test_budget_default_accepts_other_total() -> None:
    budget = Budget.default(total=10_000, reserve_output=1_000)

    assert (budget.total, budget.reserve_output) == (10_000, 1_000)
    assert budget.allocations == Budget.default().allocations


def test_budget_available_is_total_minus_reserve() -> None:
    assert Budget.default().available == 5_500


def test_budget_by_priority_orders_by_priority_then_declaration() -> None:
    budget = budget_with(
        {"name": "history", "priority": 3},
        {"name": "examples", "priority": 1},
        {"name": "system", "priority": 0},
        {"name": "retrieved", "priority": 1},
        {"name": "memory", "priority": 3},
    )

    assert [a.name for a in budget.by_priority()] == [
        "system",
        "examples",
        "retrieved",
        "history",
        "memory",
    ]


def test_budget_by_priority_keeps_reversed_declaration_of_ties() -> None:
    budget = budget_with(
        {"name": "retrieved", "priority": 1},
        {"name": "examples", "priority": 1},
    )

    assert [a.name for a in budget.by_priority()] == ["retrieved", "examples"]


def test_budget_allocation_returns_named_allocation() -> None:
    assert Budget.default().allocation("tools") == Allocation("tools", max=1_200, priority=2)


def test_budget_allocation_returns_none_when_absent() -> None:
    assert budget_with({"name": "tools", "priority": 2}).allocation("memory") is None


# --- model windows ------------------------------------------------------------------------


def test_budget_for_model_uses_context_window() -> None:
    budget = Budget.for_model("gpt-4o", reserve_output=4_000)

    assert budget.total == 128_000
    assert budget.reserve_output == 4_000
    assert budget.allocations == Budget.default().allocations


def test_budget_for_model_resolves_dated_snapshot_by_longest_prefix() -> None:
    assert Budget.for_model("gpt-4.1-2025-04-14", reserve_output=0).total == 1_047_576


def test_budget_for_model_resolves_mini_snapshot_to_mini() -> None:
    assert Budget.for_model("gpt-4o-mini-2024-07-18", reserve_output=0).total == 128_000


def test_budget_for_model_prefers_longest_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real windows of gpt-4o and gpt-4o-mini are equal; make them differ to see which won.
    windows = {"gpt-4": 8_000, "gpt-4o": 100_000, "gpt-4o-mini": 50_000}
    monkeypatch.setattr(ctxbudget.budget, "CONTEXT_WINDOWS", windows)

    assert Budget.for_model("gpt-4o-mini-2024-07-18", reserve_output=0).total == 50_000
    assert Budget.for_model("gpt-4o-2024-08-06", reserve_output=0).total == 100_000


def test_budget_for_model_passes_allocations() -> None:
    allocations = (Allocation("retrieved", min=10, priority=1),)

    budget = Budget.for_model("gpt-4o", reserve_output=0, allocations=allocations)

    assert budget.allocations == allocations


def test_budget_for_model_rejects_unknown_model_pointing_to_for_context_window() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown context window for model 'llama-3-70b'; use "
        r"Budget\.for_context_window\(<tokens>, reserve_output=\.\.\.\)",
    ):
        Budget.for_model("llama-3-70b", reserve_output=500)


def test_budget_for_context_window_sets_total() -> None:
    budget = Budget.for_context_window(32_768, reserve_output=2_048)

    assert (budget.total, budget.reserve_output, budget.available) == (32_768, 2_048, 30_720)
    assert budget.allocations == Budget.default().allocations


# --- immutability -------------------------------------------------------------------------


def test_budget_is_frozen() -> None:
    budget = Budget.default()

    with pytest.raises(ValidationError, match=r"total\n\s+Instance is frozen"):
        budget.total = 1  # type: ignore[misc]


def test_allocation_is_frozen() -> None:
    allocation = Allocation("tools", max=5, priority=2)

    with pytest.raises(ValidationError, match=r"max\n\s+Instance is frozen"):
        allocation.max = 10  # type: ignore[misc]


def test_budget_allocations_is_immutable_tuple() -> None:
    assert isinstance(Budget.default().allocations, tuple)
