"""Drop records the library builds itself skip validation, and are the same records."""

from __future__ import annotations

import pickle

from ctxbudget import Dropped


def test_unvalidated_record_equals_model_construct() -> None:
    built = Dropped._unvalidated("history", "turn", "t1", "oversize", 12)
    constructed = Dropped.model_construct(
        claimant="history", kind="turn", id="t1", reason="oversize", tokens=12
    )
    assert built == constructed
    assert built.__getstate__() == constructed.__getstate__()
    assert repr(built) == repr(constructed)


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
