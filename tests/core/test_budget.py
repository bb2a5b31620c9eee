"""Allocation and Budget as validated, immutable data (core/ctxbudget/_budget.py)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import ctxbudget._budget
from ctxbudget import (
    CONTEXT_WINDOWS,
    Allocation,
    Budget,
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    InvalidBudgetError,
    Turn,
    get_tokenizer,
)
from ctxbudget._budget_messages import Syntax
from ctxbudget.types import CLAIMANTS

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

    assert [a.name for a in budget.allocations] == ["system", "retrieved", "history", "question"]


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
        InvalidBudgetError,
        match=r"cannot load a budget from 'budget\.yaml': expected a \.json or \.toml file "
        r"\(for YAML, use Budget\.parse\(yaml\.safe_load\(\.\.\.\)\)\)$",
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
        ValidationError,
        match="allocation 'tools': appears twice; give each claimant one allocation",
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
        r"total - reserve_output is only 800, so they can never all be met; "
        "lower some min values or raise total",
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


# --- required and floor -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allocation", "required"),
    [
        (Allocation("question", priority=0), True),
        (Allocation("examples", min=1, priority=1), True),
        (Allocation("tools", max=100, priority=2), False),
    ],
)
def test_allocation_required_is_priority_zero_or_a_floor(
    allocation: Allocation, required: bool
) -> None:
    assert allocation.required is required


def test_allocation_floor_at_priority_zero_is_all_content() -> None:
    assert Allocation("system", min=10, max=20, priority=0).floor(500) == 500


@pytest.mark.parametrize(("content", "floor"), [(50, 50), (200, 100)])
def test_allocation_floor_is_content_up_to_min(content: int, floor: int) -> None:
    assert Allocation("retrieved", min=100, priority=1).floor(content) == floor


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
        "question",
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

    assert [a.name for a in budget.by_priority()][-2:] == ["retrieved", "examples"]


def test_budget_allocation_returns_named_allocation() -> None:
    assert Budget.default().allocation("tools") == Allocation("tools", max=1_200, priority=2)


def test_budget_allocation_returns_none_when_absent() -> None:
    assert budget_with({"name": "tools", "priority": 2}).allocation("memory") is None


# --- implicit system and question --------------------------------------------------------


def test_budget_without_question_gets_implicit_priority_zero_question() -> None:
    budget = budget_with({"name": "retrieved", "priority": 1})

    assert budget.allocation("question") == Allocation("question", priority=0)


def test_budget_without_system_gets_implicit_priority_zero_system() -> None:
    budget = budget_with({"name": "retrieved", "priority": 1})

    assert budget.allocation("system") == Allocation("system", priority=0)


def test_budget_implicit_allocations_follow_the_given_ones() -> None:
    budget = budget_with({"name": "retrieved", "priority": 1})

    assert [a.name for a in budget.allocations] == ["retrieved", "system", "question"]


def test_budget_given_question_allocation_is_kept() -> None:
    question = Allocation("question", min=20, max=200, priority=0)

    budget = Budget(total=1_000, allocations=(question,))

    assert budget.allocations == (question, Allocation("system", priority=0))


def test_budget_dump_contains_implicit_allocations() -> None:
    dumped = budget_with({"name": "retrieved", "priority": 1}).model_dump()

    assert [a["name"] for a in dumped["allocations"]] == ["retrieved", "system", "question"]


def test_budget_with_implicit_allocations_equals_budget_that_spells_them_out() -> None:
    spelt_out = budget_with(
        {"name": "retrieved", "priority": 1},
        {"name": "system", "priority": 0},
        {"name": "question", "priority": 0},
    )

    assert budget_with({"name": "retrieved", "priority": 1}) == spelt_out


_PRIORITIES = st.integers(min_value=0, max_value=5)


@st.composite
def budgets(draw: st.DrawFn) -> Budget:
    """Valid budgets over any subset of claimants, in any order, with or without caps."""
    names = draw(st.lists(st.sampled_from(CLAIMANTS), unique=True))
    allocations = []
    for name in names:
        floor = draw(st.integers(min_value=0, max_value=1_000))
        cap = draw(st.none() | st.integers(min_value=floor, max_value=5_000))
        allocations.append(Allocation(name, min=floor, max=cap, priority=draw(_PRIORITIES)))
    reserve = draw(st.integers(min_value=0, max_value=2_000))
    total = reserve + 7_001 + draw(st.integers(min_value=0, max_value=10**6))
    return Budget(total=total, reserve_output=reserve, allocations=tuple(allocations))


@given(budget=budgets())
def test_budget_model_dump_round_trips(budget: Budget) -> None:
    assert Budget.model_validate(budget.model_dump()) == budget


@given(budget=budgets())
def test_budget_json_dump_round_trips(budget: Budget) -> None:
    assert Budget.model_validate_json(budget.model_dump_json()) == budget


@given(budget=budgets())
def test_budget_always_allocates_system_and_question(budget: Budget) -> None:
    assert budget.allocation("system") is not None
    assert budget.allocation("question") is not None


README_TOML = """
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
"""


def test_budget_readme_toml_assembles_a_prompt() -> None:
    budget = Budget.parse(tomllib.loads(README_TOML), syntax="toml")
    assembler = ContextAssembler(budget=budget, tokenizer="o200k_base")

    result = assembler.assemble(
        system="Answer from the sources.",
        question="How long is the return window?",
        chunks=[Chunk(id="returns", content="Returns are accepted within 60 days.")],
    )

    assert [s.chunk.id for s in result.sources] == ["returns"]
    assert result.text.endswith("How long is the return window?")


# --- sized to the window ------------------------------------------------------------------


def sizes(budget: Budget) -> list[tuple[str, int, int | None, int]]:
    return [(a.name, a.min, a.max, a.priority) for a in budget.allocations]


@pytest.mark.parametrize(("window", "reserve"), [(6_000, 500), (7_000, 1_500), (5_500, 0)])
def test_budget_for_context_window_of_default_size_equals_default(
    window: int, reserve: int
) -> None:
    budget = Budget.for_context_window(window, reserve_output=reserve)

    assert budget.allocations == Budget.default().allocations


def test_budget_for_context_window_larger_grows_caps_by_share_keeps_fixed_sizes() -> None:
    budget = Budget.for_context_window(128_000, reserve_output=4_000)

    # available 124,000: caps are 3,000 / 1,200 / 1,500 / 400 parts of 5,500, rounded down
    assert sizes(budget) == [
        ("system", 610, 610, 0),
        ("question", 20, 200, 0),
        ("retrieved", 1_200, 67_636, 1),
        ("examples", 250, 250, 1),
        ("tools", 0, 27_054, 2),
        ("history", 0, 33_818, 3),
        ("memory", 0, 9_018, 4),
    ]


def test_budget_for_context_window_smaller_scales_every_number() -> None:
    budget = Budget.for_context_window(3_250, reserve_output=500)

    # available 2,750 is half of 5,500: every min and max is halved
    assert sizes(budget) == [
        ("system", 305, 305, 0),
        ("question", 10, 100, 0),
        ("retrieved", 600, 1_500, 1),
        ("examples", 125, 125, 1),
        ("tools", 0, 600, 2),
        ("history", 0, 750, 3),
        ("memory", 0, 200, 4),
    ]


@given(
    window=st.integers(min_value=1, max_value=3_000_000),
    reserve_share=st.floats(min_value=0, max_value=0.999),
)
def test_budget_for_context_window_floors_always_fit(window: int, reserve_share: float) -> None:
    budget = Budget.for_context_window(window, reserve_output=int(window * reserve_share))

    assert sum(a.min for a in budget.allocations) <= budget.available
    assert [a.priority for a in budget.allocations] == [
        a.priority for a in Budget.default().allocations
    ]


@given(
    available=st.integers(min_value=1, max_value=3_000_000),
    more=st.integers(min_value=1, max_value=100_000),
)
def test_budget_for_context_window_never_shrinks_as_window_grows(available: int, more: int) -> None:
    smaller = Budget.for_context_window(available, reserve_output=0)
    larger = Budget.for_context_window(available + more, reserve_output=0)

    for a, b in zip(smaller.allocations, larger.allocations, strict=True):
        assert a.min <= b.min
        assert a.max is not None
        assert b.max is not None
        assert a.max <= b.max


def test_budget_for_context_window_uses_given_allocations_unscaled() -> None:
    retrieved = Allocation("retrieved", min=10, max=20, priority=1)

    budget = Budget.for_context_window(1_000_000, reserve_output=0, allocations=[retrieved])

    assert budget.allocation("retrieved") == retrieved


def test_budget_for_context_window_reserve_not_below_window_says_so() -> None:
    with pytest.raises(
        InvalidBudgetError,
        match=r"^reserve_output \(500\) must be less than total \(500\); "
        "nothing would be left for the prompt$",
    ):
        Budget.for_context_window(500, reserve_output=500)


def _distinct_chunks(count: int) -> list[Chunk]:
    # Every word is unique, so no two chunks share a shingle and dedup keeps them all.
    return [
        Chunk(id=f"c{i}", content=" ".join(f"fact{i}x{j}" for j in range(125)))
        for i in range(count)
    ]


def test_budget_for_model_keeps_sixty_chunks_in_a_million_token_window() -> None:
    chunks = _distinct_chunks(60)
    budget = Budget.for_model("gpt-4.1", reserve_output=32_768)

    result = ContextAssembler(budget=budget, tokenizer="gpt-4.1").assemble(
        question="What are the facts?", chunks=chunks
    )

    assert len(result.sources) == 60
    assert result.report.dropped == ()


def test_budget_with_default_caps_in_a_million_token_window_drops_most_chunks() -> None:
    # The behaviour for_model fixes: the 6,000-token layout's caps in a 1M window.
    budget = Budget.for_context_window(
        1_047_576, reserve_output=32_768, allocations=ctxbudget._budget.DEFAULT_ALLOCATIONS
    )

    result = ContextAssembler(budget=budget, tokenizer="gpt-4.1").assemble(
        question="What are the facts?", chunks=_distinct_chunks(60)
    )

    assert len(result.sources) < 10
    assert {d.reason for d in result.report.dropped} == {"over_budget"}


# --- a cap that held a claimant back ------------------------------------------------------


def test_budget_binding_cap_when_grant_reached_max_and_most_is_unused() -> None:
    budget = Budget.default()  # available 5,500; retrieved max 3,000

    assert budget.binding_cap("retrieved", granted=3_000, used=2_749) == 3_000


def test_budget_binding_cap_is_none_when_half_the_budget_is_used() -> None:
    assert Budget.default().binding_cap("retrieved", granted=3_000, used=2_750) is None


def test_budget_binding_cap_is_none_when_grant_is_below_max() -> None:
    assert Budget.default().binding_cap("retrieved", granted=2_999, used=100) is None


def test_budget_binding_cap_is_none_without_a_cap() -> None:
    budget = budget_with({"name": "retrieved", "priority": 1})

    assert budget.binding_cap("retrieved", granted=10**6, used=0) is None


def test_budget_binding_cap_is_none_without_an_allocation() -> None:
    budget = budget_with({"name": "retrieved", "priority": 1})

    assert budget.binding_cap("memory", granted=10**6, used=0) is None


# --- model windows ------------------------------------------------------------------------


def test_budget_for_model_uses_context_window() -> None:
    budget = Budget.for_model("gpt-4o", reserve_output=4_000)

    assert (budget.total, budget.reserve_output) == (128_000, 4_000)
    assert budget == Budget.for_context_window(128_000, reserve_output=4_000)


@pytest.mark.parametrize("model", ["GPT-4o", "gpt-4O", "Gpt-4o-2024-08-06"])
def test_budget_for_model_ignores_case(model: str) -> None:
    assert Budget.for_model(model, reserve_output=0).total == 128_000


def test_budget_for_model_resolves_dated_snapshot_by_family() -> None:
    assert Budget.for_model("gpt-4.1-2025-04-14", reserve_output=0).total == 1_047_576


def test_budget_for_model_resolves_mini_snapshot_to_mini() -> None:
    assert Budget.for_model("gpt-4o-mini-2024-07-18", reserve_output=0).total == 128_000


def test_budget_for_model_prefers_longest_family(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real windows of gpt-4o and gpt-4o-mini are equal; make them differ to see which won.
    windows = {"gpt-4": 8_000, "gpt-4o": 100_000, "gpt-4o-mini": 50_000}
    monkeypatch.setattr(ctxbudget._models, "CONTEXT_WINDOWS", windows)

    assert Budget.for_model("gpt-4o-mini-2024-07-18", reserve_output=0).total == 50_000
    assert Budget.for_model("gpt-4o-2024-08-06", reserve_output=0).total == 100_000


def test_budget_for_model_listed_variant_beats_its_family() -> None:
    assert Budget.for_model("o1-mini", reserve_output=0).total == 128_000
    assert Budget.for_model("o1-2024-12-17", reserve_output=0).total == 200_000


@pytest.mark.parametrize(("reserve", "total"), [(8_000, 280_000), (128_000, 400_000)])
def test_budget_for_model_gpt5_keeps_input_within_its_input_limit(reserve: int, total: int) -> None:
    budget = Budget.for_model("gpt-5", reserve_output=reserve)

    assert budget.total == total
    assert budget.available == 272_000


def test_budget_for_model_gpt5_with_large_reserve_is_bounded_by_window() -> None:
    budget = Budget.for_model("gpt-5-mini-2025-08-07", reserve_output=200_000)

    assert (budget.total, budget.available) == (400_000, 200_000)


def test_budget_for_model_gpt5_chat_has_its_own_window() -> None:
    assert Budget.for_model("gpt-5-chat-latest", reserve_output=16_384).total == 128_000


def test_budget_for_model_uses_given_allocations_as_given() -> None:
    allocations = (Allocation("retrieved", min=10, priority=1),)

    budget = Budget.for_model("gpt-4o", reserve_output=0, allocations=allocations)

    assert budget.allocations == (
        *allocations,
        Allocation("system", priority=0),
        Allocation("question", priority=0),
    )


@pytest.mark.parametrize("model", ["acme-70b", "xyz"])
def test_budget_for_model_rejects_unknown_model_pointing_to_for_context_window(model: str) -> None:
    with pytest.raises(
        InvalidBudgetError,
        match=rf"^unknown context window for model {re.escape(repr(model))}; use "
        r"Budget\.for_context_window\(<tokens>, reserve_output=\.\.\.\) with the window "
        "from your provider's documentation$",
    ):
        Budget.for_model(model, reserve_output=500)


def test_budget_for_model_of_misspelt_model_names_the_nearest_known_one() -> None:
    with pytest.raises(
        InvalidBudgetError,
        match=r"^unknown context window for model 'gpt4o' \(the nearest known model is "
        r"'gpt-4o' \(openai\)\); use Budget\.for_context_window",
    ):
        Budget.for_model("gpt4o", reserve_output=500)


def test_budget_for_model_of_known_tokenizer_without_window_points_to_for_context_window() -> None:
    # tiktoken counts gpt-5.1 as a gpt-5, but its window is not in the table.
    with pytest.raises(
        InvalidBudgetError,
        match=r"^unknown context window for model 'gpt-5\.1': not in ctxbudget's table; use "
        r"Budget\.for_context_window\(<tokens>, reserve_output=\.\.\.\)",
    ):
        Budget.for_model("gpt-5.1", reserve_output=500)


def test_context_windows_are_listed_in_lower_case() -> None:
    assert all(name == name.lower() for name in CONTEXT_WINDOWS)


@pytest.mark.parametrize("model", sorted(CONTEXT_WINDOWS))
def test_context_windows_each_name_resolves_to_its_own_window(model: str) -> None:
    # Half the window as reserve: enough for gpt-5's input limit not to apply.
    window = CONTEXT_WINDOWS[model]

    assert Budget.for_model(model, reserve_output=window // 2).total == window


@given(
    model=st.sampled_from(sorted(CONTEXT_WINDOWS)),
    suffix=st.sampled_from(["", "-2025-04-14", "-preview", "-x"]),
    upper=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_every_model_with_a_window_has_a_tokenizer(
    model: str, suffix: str, upper: list[bool]
) -> None:
    name = "".join(c.upper() if up else c for c, up in zip(model + suffix, upper, strict=False))

    Budget.for_model(name, reserve_output=0)
    assert get_tokenizer(name).name in ("o200k_base", "cl100k_base")


# --- immutability -------------------------------------------------------------------------


def test_budget_is_frozen() -> None:
    budget = Budget.default()

    with pytest.raises(ValidationError, match=r"total\n\s+Instance is frozen"):
        budget.total = 1


def test_allocation_is_frozen() -> None:
    allocation = Allocation("tools", max=5, priority=2)

    with pytest.raises(ValidationError, match=r"max\n\s+Instance is frozen"):
        allocation.max = 10


def test_budget_allocations_is_immutable_tuple() -> None:
    assert isinstance(Budget.default().allocations, tuple)


def test_budget_error_is_a_ctxbudget_error_and_a_value_error() -> None:
    assert issubclass(InvalidBudgetError, ctxbudget.CtxBudgetError)
    assert issubclass(InvalidBudgetError, ValueError)


# --- needs: the tables a caller sends -----------------------------------------------------


@pytest.mark.parametrize(
    ("syntax", "data", "message"),
    [
        pytest.param(
            "toml",
            {"total": 6000, "allocations": {"retrieved": {"priority": 1}}},
            "tools is sent but has no allocation; add an [allocations.tools] table "
            "(for example with max = 1200, priority = 2)",
            id="toml-mapping",
        ),
        pytest.param(
            "toml",
            {"total": 6000, "allocations": [{"name": "retrieved", "priority": 1}]},
            'tools is sent but has no allocation; add an [[allocations]] table with name = "tools" '
            "(for example with max = 1200, priority = 2)",
            id="toml-list",
        ),
        pytest.param(
            "json",
            {"total": 6000, "allocations": {"retrieved": {"priority": 1}}},
            'tools is sent but has no allocation; add "tools": {"max": 1200, "priority": 2} '
            'to "allocations"',
            id="json-mapping",
        ),
        pytest.param(
            "json",
            {"total": 6000, "allocations": [{"name": "retrieved", "priority": 1}]},
            'tools is sent but has no allocation; add {"name": "tools", "max": 1200, '
            '"priority": 2} to "allocations"',
            id="json-list",
        ),
    ],
)
def test_budget_parse_without_a_needed_allocation_says_what_to_add(
    syntax: Syntax, data: object, message: str
) -> None:
    with pytest.raises(InvalidBudgetError, match=f"^{re.escape(message)}$"):
        Budget.parse(data, syntax=syntax, needs=("retrieved", "tools"))


def test_budget_parse_lists_every_missing_allocation_in_one_sentence() -> None:
    with pytest.raises(
        InvalidBudgetError,
        match=r"^retrieved, examples and memory are sent but have no allocation; add an "
        r"\[allocations\.retrieved\] table \(for example with min = 1200, max = 3000, "
        r"priority = 1\); an \[allocations\.examples\] table .*; an \[allocations\.memory\] "
        r"table \(for example with max = 400, priority = 4\)$",
    ):
        Budget.parse(
            {"total": 6000, "allocations": {}},
            syntax="toml",
            needs=("retrieved", "examples", "memory"),
        )


def test_budget_parse_needs_system_and_question_always_met() -> None:
    budget = Budget.parse({"total": 6000, "allocations": []}, needs=("system", "question"))

    assert budget.allocation("question") is not None


# --- files --------------------------------------------------------------------------------


def test_budget_from_file_error_starts_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text(
        "total = 1000\n[allocations.retrieved]\nmin = -1\npriority = 1\n", encoding="utf-8"
    )

    with pytest.raises(
        InvalidBudgetError,
        match=f"^{re.escape(str(path))}: \\[allocations\\.retrieved\\] min must be 0 or more",
    ):
        Budget.from_file(path)


def test_budget_from_file_json_error_uses_json_syntax(tmp_path: Path) -> None:
    path = tmp_path / "budget.JSON"
    path.write_text('{"total": 10, "allocations": {"tools": {"max": 5}}}', encoding="utf-8")

    with pytest.raises(InvalidBudgetError, match=r': add "priority": <n> to allocations\.tools '):
        Budget.from_file(path)


def test_budget_from_file_passes_needs(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text(README_TOML, encoding="utf-8")

    with pytest.raises(InvalidBudgetError, match=r"history is sent but has no allocation; add an "):
        Budget.from_file(path, needs=["history"])


def test_budget_from_file_with_invalid_toml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text("total = 6000\nreserve_output = \n", encoding="utf-8")

    with pytest.raises(
        InvalidBudgetError,
        match=rf"^{re.escape(str(path))}: not valid TOML: .*line 2, column 18\)$",
    ):
        Budget.from_file(path)


def test_budget_from_file_with_invalid_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    path.write_text('{"total": 6000,\n "allocations": [}', encoding="utf-8")

    with pytest.raises(
        InvalidBudgetError,
        match=rf"^{re.escape(str(path))}: not valid JSON: Expecting value at line 2, column 18$",
    ):
        Budget.from_file(path)


def test_budget_from_file_with_repeated_json_key_refuses_it(tmp_path: Path) -> None:
    # json.loads would silently keep the second "tools" table.
    path = tmp_path / "budget.json"
    path.write_text(
        '{"total": 6000, "allocations": {"tools": {"priority": 1}, "tools": {"priority": 2}}}',
        encoding="utf-8",
    )

    with pytest.raises(
        InvalidBudgetError,
        match=rf'^{re.escape(str(path))}: the key "tools" appears twice in one object; keep one$',
    ):
        Budget.from_file(path)


def test_budget_from_file_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_bytes(b"total = 6000 # \xff\n")

    with pytest.raises(
        InvalidBudgetError,
        match=rf"^{re.escape(str(path))}: not UTF-8 text \(invalid start byte at byte 15\)$",
    ):
        Budget.from_file(path)


def test_budget_from_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"budget\.toml"):
        Budget.from_file(tmp_path / "budget.toml")


def test_budget_for_agent_leaves_history_what_system_and_tools_leave() -> None:
    budget = Budget.for_agent(128_000, reserve_output=4_000)
    assert budget.total == 128_000
    assert budget.available == 124_000
    assert [a.name for a in budget.allocations if a.name != "question"] == [
        "system",
        "tools",
        "history",
    ]
    default = Budget.for_context_window(128_000, reserve_output=4_000)
    assert budget.allocation("tools") == default.allocation("tools")
    history = budget.allocation("history")
    assert history is not None
    assert history.max is None
    assert budget.allocation("retrieved") is None


def test_budget_for_agent_history_takes_a_result_the_default_layout_cannot() -> None:
    assembler = ContextAssembler(
        tokenizer="o200k_base", budget=Budget.for_agent(3_500, reserve_output=0)
    )
    result = Turn(role="tool", name="read_file", content="line of the file\n" * 300, group="c1")
    call = Turn(role="assistant", content='read_file({"path": "a.txt"})', group="c1")
    assembled = assembler.assemble(history=[Turn(role="user", content="Read a.txt"), call, result])
    assert assembled.history[-1] == ("tool", result.content)
    with pytest.raises(ContextBudgetError, match=r"latest 2 messages \(one unit\)"):
        ContextAssembler(
            tokenizer="o200k_base", budget=Budget.for_context_window(3_500, reserve_output=0)
        ).assemble(history=[Turn(role="user", content="Read a.txt"), call, result])
