"""Drop records the library builds itself skip validation, and are the same records; a
report builds the records of unread candidates only when they are read, and is seen as
the report built with them."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    ContextAssembler,
    Dropped,
    HistoryOptions,
    Report,
    Turn,
)
from ctxbudget._report import (
    DropReason,
    DropRun,
    _records_by_construct,
    _records_fast,
    records,
)


def test_unvalidated_record_equals_model_construct() -> None:
    built = Dropped._unvalidated("history", "turn", "t1", "oversize", 12)
    constructed = Dropped.model_construct(
        claimant="history", kind="turn", id="t1", reason="oversize", tokens=12
    )
    assert built == constructed
    assert built.__getstate__() == constructed.__getstate__()
    assert repr(built) == repr(constructed)


@given(
    ids=st.lists(st.text(max_size=4), max_size=4),
    reason=st.sampled_from(["duplicate", "over_budget"]),
    tokens=st.none() | st.integers(0, 9),
)
def test_records_fast_agree_with_model_construct(
    ids: list[str], reason: DropReason, tokens: int | None
) -> None:
    fast = _records_fast(Dropped, "retrieved", "chunk", ids, reason, tokens)
    plain = _records_by_construct(Dropped, "retrieved", "chunk", ids, reason, tokens)
    assert fast == plain
    assert [r.__getstate__() for r in fast] == [r.__getstate__() for r in plain]
    assert [r.model_dump() for r in fast] == [r.model_dump() for r in plain]


def test_many_records_are_one_per_id_in_order() -> None:
    records = Dropped._many("retrieved", "chunk", ["a", "b", "c"], "over_budget")
    assert records == [
        Dropped(claimant="retrieved", kind="chunk", id=i, reason="over_budget") for i in "abc"
    ]


def test_many_records_do_not_share_their_fields_set() -> None:
    first, second = Dropped._many("retrieved", "chunk", ["a", "b"], "duplicate")
    assert first.model_fields_set == second.model_fields_set
    assert first.model_fields_set is not second.model_fields_set


def test_unvalidated_record_copies_dumps_and_pickles_like_any() -> None:
    record = Dropped._unvalidated("retrieved", "chunk", "c1", "duplicate")
    assert record.model_copy(update={"tokens": 3}).tokens == 3
    assert record.tokens is None
    assert pickle.loads(pickle.dumps(record)) == record
    assert record.model_dump() == {
        "claimant": "retrieved",
        "kind": "chunk",
        "id": "c1",
        "reason": "duplicate",
        "tokens": None,
    }


# --- drop runs and reports whose records are built on first read ---------------------------

RUN = DropRun("retrieved", "chunk", "over_budget", ["a", "b"])
FORBIDDEN = Dropped(claimant="retrieved", kind="chunk", id="x", reason="forbidden")


def fields(**changes: Any) -> dict[str, Any]:
    """A report's fields other than `dropped`."""
    return {
        "budget": 100,
        "total": 60,
        "unused": 40,
        "sizes": {"retrieved": 60},
        "granted": {"retrieved": 80},
        "trimmed": ("retrieved",),
        "retrieval_trimmed": False,
        "trimmed_by": {},
        "escalated": None,
        "prefix_tokens": 0,
        "prefix_hash": "0" * 64,
        "prefix_warnings": (),
        "final_check_drops": 0,
        **changes,
    }


def deferred(drops: Sequence[Dropped | DropRun]) -> Report:
    return Report(dropped=(), **fields())._defer_dropped(drops)


def eager(drops: Sequence[Dropped | DropRun]) -> Report:
    return Report(dropped=tuple(records(drops)), **fields())


def unbuilt(model: object) -> bool:
    """Whether the model still holds its drops unbuilt (read without building them)."""
    state: dict[str, Any] = object.__getattribute__(model, "__dict__")
    return not isinstance(state["dropped"], tuple)


def test_drop_run_records_are_one_per_id_in_order() -> None:
    assert RUN.records() == [
        Dropped(claimant="retrieved", kind="chunk", id=i, reason="over_budget") for i in "ab"
    ]


def test_records_build_runs_in_place_among_records() -> None:
    assert [d.id for d in records([FORBIDDEN, RUN, FORBIDDEN])] == ["x", "a", "b", "x"]


def test_deferred_report_reads_other_fields_without_building_records() -> None:
    report = deferred([FORBIDDEN, RUN])
    assert (report.total, report.granted, report.budget) == (60, {"retrieved": 80}, 100)
    assert unbuilt(report)


def test_deferred_report_builds_records_on_first_read_of_dropped() -> None:
    report = deferred([FORBIDDEN, RUN])
    assert report.dropped == eager([FORBIDDEN, RUN]).dropped
    assert not unbuilt(report)
    assert report.dropped is report.dropped


def test_report_without_runs_holds_its_records_at_once() -> None:
    report = deferred([FORBIDDEN])
    assert not unbuilt(report)
    assert report.dropped == (FORBIDDEN,)


def test_deferring_drops_of_a_report_built_with_records_raises() -> None:
    report = Report(dropped=(FORBIDDEN,), **fields())
    with pytest.raises(ValueError, match=r"_defer_dropped needs a model built with dropped=\(\)"):
        report._defer_dropped([RUN])


OBSERVERS: dict[str, Callable[[Report], object]] = {
    "dropped": lambda r: r.dropped,
    "model_dump": lambda r: r.model_dump(),
    "model_dump json": lambda r: r.model_dump(mode="json"),
    "model_dump_json": lambda r: r.model_dump_json(),
    "repr": repr,
    "str": str,
    "equal": lambda r: r == eager([FORBIDDEN, RUN]),
    "equal reflected": lambda r: eager([FORBIDDEN, RUN]) == r,
    "pickle": lambda r: pickle.loads(pickle.dumps(r)).model_dump(),
    "getstate": lambda r: r.__getstate__(),
    "copy": lambda r: repr(copy.copy(r)),
    "deepcopy": lambda r: repr(copy.deepcopy(r)),
    "model_copy": lambda r: repr(r.model_copy(update={"total": 3})),
    "dict": lambda r: dict(r),
    "vars": lambda r: dict(vars(r)),
    "fields set": lambda r: r.model_fields_set,
    "revalidated": lambda r: Report.model_validate(r.model_dump()).model_dump(),
    "in a model": lambda r: Assembled(
        text="", prefix=(), history=(), tail="", sources=(), tools=(), report=r
    ).model_dump_json(),
}


@pytest.mark.parametrize("observe", OBSERVERS.values(), ids=OBSERVERS.keys())
def test_deferred_report_is_seen_as_the_report_built_with_its_records(
    observe: Callable[[Report], object],
) -> None:
    assert observe(deferred([FORBIDDEN, RUN])) == observe(eager([FORBIDDEN, RUN]))


def test_deferred_report_hashes_as_the_report_built_with_its_records() -> None:
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        hash(deferred([RUN]))  # a frozen model hashes its fields: `sizes` is a dict
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        hash(eager([RUN]))


ids = st.lists(st.text(min_size=1, max_size=3), max_size=4)
drops = st.lists(
    st.builds(
        DropRun,
        claimant=st.sampled_from(["retrieved", "history"]),
        kind=st.sampled_from(["chunk", "turn"]),
        reason=st.sampled_from(["over_budget", "forbidden", "empty"]),
        ids=ids,
    )
    | st.builds(
        Dropped,
        claimant=st.just("tools"),
        kind=st.just("tool"),
        id=st.text(min_size=1, max_size=3),
        reason=st.sampled_from(["oversize", "duplicate"]),
        tokens=st.none() | st.integers(0, 50),
    ),
    max_size=5,
)


@given(drops=drops)
def test_deferred_report_dumps_and_compares_as_built_with_any_drops(
    drops: list[Dropped | DropRun],
) -> None:
    lazy, built = deferred(drops), eager(drops)
    assert lazy.model_dump_json() == built.model_dump_json()
    assert repr(deferred(drops)) == repr(built)
    assert deferred(drops) == built
    assert lazy.dropped == tuple(records(drops))


# --- history's new records stay out of dumps when there are none ---------------------------


def chat_report(**options: object) -> Report:
    """The report of a tool-calling chat trimmed to 200 tokens (docs/agents.md, "Agents and
    chat")."""
    history = [Turn(role="user", content="Find it.")]
    for k in range(4):
        history.append(Turn(role="assistant", content=f"search({k})", group=f"g{k}"))
        history.append(Turn(role="tool", name="search", content="hit " * 100, group=f"g{k}"))
    history.append(Turn(role="user", content="And?"))
    assembler = ContextAssembler(
        tokenizer="o200k_base",
        budget=Budget(total=400, allocations=(Allocation("history", max=200, priority=1),)),
        history=HistoryOptions(keep_tool_results=1, **options),  # type: ignore[arg-type]
    )
    return assembler.assemble(history=history).report


def test_report_dump_leaves_out_cleared_and_summaries_when_there_are_none() -> None:
    dumped = chat_report(clear_tool_results=False).model_dump()
    assert "cleared" not in dumped
    assert "summaries" not in dumped


def test_report_dump_lists_cleared_results() -> None:
    dumped = chat_report().model_dump(mode="json")
    assert [(d["id"], d["reason"]) for d in dumped["cleared"]] == [
        ("history[2]", "cleared"),
        ("history[4]", "cleared"),
        ("history[6]", "cleared"),
    ]


def test_report_dump_lists_summary_spans() -> None:
    # The smallest cut leaves out history[1:7]; summary_headroom (a quarter of 200) moves it
    # past the last call, whose 103-token result is the only unit before the latest.
    dumped = chat_report(
        clear_tool_results=False, summarize=lambda turns: None, summary_tokens=20
    ).model_dump()
    assert [(s["start"], s["stop"], s["outcome"]) for s in dumped["summaries"]] == [(1, 9, "none")]


def test_report_with_history_records_survives_a_json_round_trip() -> None:
    report = chat_report(summarize=lambda turns: "searched four times", summary_tokens=20)
    assert Report.model_validate_json(report.model_dump_json()) == report
