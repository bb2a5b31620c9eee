"""A bad budget as one sentence in the file's own syntax (core/ctxbudget/_budget_messages.py)."""

from __future__ import annotations

import re
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Allocation, Budget, InvalidBudgetError
from ctxbudget._budget_messages import Syntax
from ctxbudget.types import CLAIMANTS

# --- errors as one sentence in the file's own syntax ---------------------------------------

_TOP = "total = 1000\n"
_TOML_CASES = [
    pytest.param(
        _TOP + "[allocations.retrieved]\nmin = -1\npriority = 1\n",
        "[allocations.retrieved] min must be 0 or more, but is -1",
        id="negative-min-mapping",
    ),
    pytest.param(
        _TOP + '[[allocations]]\nname = "retrieved"\nmin = -1\npriority = 1\n',
        '[[allocations]] #1 (name = "retrieved") min must be 0 or more, but is -1',
        id="negative-min-list",
    ),
    pytest.param(
        _TOP + "[[allocations]]\nmin = 5\npriority = 1\n",
        'add name = "<claimant>" to [[allocations]] #1 (one of system, question, retrieved, '
        "examples, tools, history, memory)",
        id="missing-name-list",
    ),
    pytest.param(
        _TOP + "[allocations.tools]\nmax = 5\n",
        "add priority = <n> to [allocations.tools] "
        "(0 is never trimmed; higher numbers are trimmed first)",
        id="missing-priority",
    ),
    pytest.param(
        "reserve_output = 5\nallocations = []\n",
        "add total = <tokens> at the top of the file (the model's context window)",
        id="missing-total",
    ),
    pytest.param(
        _TOP,
        "add one allocation per part of the prompt you send, e.g. an [allocations.retrieved] "
        "table with max = 3000 and priority = 1",
        id="missing-allocations",
    ),
    pytest.param(
        _TOP + "[allocations.tools]\nprioity = 2\npriority = 2\n",
        "remove prioity from [allocations.tools]: it takes only name, min, max, priority "
        "(did you mean priority?)",
        id="misspelt-field",
    ),
    pytest.param(
        _TOP + "budget = 3\nallocations = []\n",
        "remove budget from the top of the file: it takes only total, reserve_output, allocations",
        id="unknown-top-level-key",
    ),
    pytest.param(
        _TOP + "[allocations.scratchpad]\npriority = 2\n",
        "[allocations.scratchpad] is not a claimant; name the table after one of system, "
        "question, retrieved, examples, tools, history, memory",
        id="unknown-claimant-table",
    ),
    pytest.param(
        _TOP + '[[allocations]]\nname = "scratchpad"\npriority = 2\n',
        '[[allocations]] #1 (name = "scratchpad") name must be one of system, question, '
        'retrieved, examples, tools, history, memory, but is "scratchpad"',
        id="unknown-claimant-name",
    ),
    pytest.param(
        _TOP + "[allocations.retrieved]\nmin = 300\nmax = 200\npriority = 1\n",
        "[allocations.retrieved]: min (300) is greater than max (200); lower min or raise max",
        id="min-above-max",
    ),
    pytest.param(
        _TOP + '[allocations.retrieved]\nname = "tools"\npriority = 1\n',
        '[allocations.retrieved]: sets name = "tools", but its key already names it; remove name',
        id="name-conflicts-with-key",
    ),
    pytest.param(
        _TOP + '[[allocations]]\nname = "tools"\npriority = 1\n'
        '[[allocations]]\nname = "tools"\npriority = 2\n',
        '[[allocations]] #2 (name = "tools"): appears twice; give each claimant one allocation',
        id="duplicate",
    ),
    pytest.param(
        _TOP + '[allocations.tools]\nmax = "lots"\npriority = 2\n',
        '[allocations.tools] max must be a whole number, but is "lots"',
        id="not-a-number",
    ),
    pytest.param(
        "total = 0\nallocations = []\n",
        "total must be greater than 0, but is 0",
        id="zero-total",
    ),
    pytest.param(
        "total = 500\nreserve_output = 500\nallocations = []\n",
        "reserve_output (500) must be less than total (500); nothing would be left for the prompt",
        id="reserve-not-below-total",
    ),
    pytest.param(
        "total = nan\nallocations = []\n",
        "total: input should be a finite number",
        id="not-finite",
    ),
    pytest.param(
        _TOP + "allocations = 5\n",
        "allocations must be [allocations.<claimant>] tables or [[allocations]] tables, but is 5",
        id="allocations-not-tables",
    ),
    pytest.param(
        _TOP + "[allocations]\ntools = 5\n",
        "[allocations.tools] must be a table with priority (and optionally min and max), but is 5",
        id="allocation-not-a-table",
    ),
    pytest.param(
        _TOP + '[allocations."my tools"]\npriority = 1\n',
        '[allocations."my tools"] is not a claimant; name the table after one of system, '
        "question, retrieved, examples, tools, history, memory",
        id="quoted-toml-key",
    ),
    pytest.param(
        "total = 0\n[allocations.retrieved]\nmin = -1\n",
        "total must be greater than 0, but is 0; [allocations.retrieved] min must be 0 or "
        "more, but is -1; add priority = <n> to [allocations.retrieved] "
        "(0 is never trimmed; higher numbers are trimmed first)",
        id="several-problems-in-one-sentence",
    ),
]


@pytest.mark.parametrize(("text", "message"), _TOML_CASES)
def test_budget_parse_toml_error_is_one_sentence_in_toml_syntax(text: str, message: str) -> None:
    with pytest.raises(InvalidBudgetError, match=f"^{re.escape(message)}$"):
        Budget.parse(tomllib.loads(text), syntax="toml")


_JSON_CASES = [
    pytest.param(
        {"total": 1000, "allocations": {"retrieved": {"min": -1, "priority": 1}}},
        "allocations.retrieved.min must be 0 or more, but is -1",
        id="negative-min-mapping",
    ),
    pytest.param(
        {"total": 1000, "allocations": [{"name": "retrieved", "min": -1, "priority": 1}]},
        "allocations[0].min must be 0 or more, but is -1",
        id="negative-min-list",
    ),
    pytest.param(
        {"total": 1000, "allocations": {"tools": {"max": 5}}},
        'add "priority": <n> to allocations.tools '
        "(0 is never trimmed; higher numbers are trimmed first)",
        id="missing-priority",
    ),
    pytest.param(
        {"allocations": []},
        'add "total": <tokens> to the top-level object (the model\'s context window)',
        id="missing-total",
    ),
    pytest.param(
        {"total": 1000},
        'add one allocation per part of the prompt you send, e.g. "allocations": '
        '{"retrieved": {"max": 3000, "priority": 1}}',
        id="missing-allocations",
    ),
    pytest.param(
        {"totl": 1000, "total": 1000, "allocations": []},
        "remove totl from the top-level object: it takes only total, reserve_output, "
        "allocations (did you mean total?)",
        id="unknown-top-level-key",
    ),
    pytest.param(
        {"total": 1000, "allocations": {"my tools": {"priority": 1}}},
        'allocations["my tools"] is not a claimant; name the table after one of system, '
        "question, retrieved, examples, tools, history, memory",
        id="quoted-json-key",
    ),
    pytest.param(
        {"total": 1000, "allocations": [{"name": "tools", "priority": 1}, {"name": "tools"}]},
        'add "priority": <n> to allocations[1] '
        "(0 is never trimmed; higher numbers are trimmed first)",
        id="missing-priority-list",
    ),
    pytest.param(
        {"total": 1000, "allocations": "tools"},
        'allocations must be an object of claimant names or a list of objects, but is "tools"',
        id="allocations-not-objects",
    ),
    pytest.param(
        [1, 2],
        "a budget must be an object with total, reserve_output and allocations",
        id="not-an-object",
    ),
    pytest.param(
        {"total": 1000, "allocations": [{"name": "tools", "priority": 1, "max": "x" * 100}]},
        f'allocations[0].max must be a whole number, but is "{"x" * 36}...',
        id="long-value-shortened",
    ),
]


@pytest.mark.parametrize(("data", "message"), _JSON_CASES)
def test_budget_parse_json_error_is_one_sentence_in_json_syntax(data: object, message: str) -> None:
    with pytest.raises(InvalidBudgetError, match=f"^{re.escape(message)}$"):
        Budget.parse(data, syntax="json")


def test_budget_parse_defaults_to_json_syntax() -> None:
    with pytest.raises(InvalidBudgetError, match=r"^allocations\[0\]\.min must be 0 or more"):
        Budget.parse({"total": 10, "allocations": [{"name": "tools", "min": -1, "priority": 1}]})


def test_budget_parse_duplicate_given_as_allocation_objects_names_the_claimant() -> None:
    tools = Allocation("tools", priority=1)

    with pytest.raises(
        InvalidBudgetError,
        match=r"^allocation 'tools': appears twice; give each claimant one allocation$",
    ):
        Budget.parse({"total": 10, "allocations": [tools, tools]})


_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_ALLOCATION_DATA = st.dictionaries(
    st.sampled_from(["name", "min", "max", "priority", "floor"]),
    _JUNK | st.sampled_from(CLAIMANTS) | st.integers(min_value=-2, max_value=5_000),
)


@given(
    data=st.dictionaries(
        st.sampled_from(["total", "reserve_output", "allocations", "extra"]),
        _JUNK
        | st.integers(min_value=-2, max_value=10_000)
        | st.lists(_ALLOCATION_DATA, max_size=3)
        | st.dictionaries(st.sampled_from([*CLAIMANTS, "x"]), _ALLOCATION_DATA, max_size=3),
    ),
    syntax=st.sampled_from(["toml", "json"]),
)
def test_budget_parse_of_any_data_is_a_budget_or_one_plain_sentence(
    data: dict[str, object], syntax: Syntax
) -> None:
    try:
        Budget.parse(data, syntax=syntax)
    except InvalidBudgetError as exc:
        message = str(exc)
        assert "\n" not in message
        assert "http" not in message
        assert "alue error" not in message
        assert "validation error" not in message
