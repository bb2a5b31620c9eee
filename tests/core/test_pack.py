"""Whole-item packing (core/ctxbudget/_pack.py): what a grant keeps, separators and framing,
shrinking, and the drop records; and the mechanics that keep packing cheap: size bounds before
any look, costs computed once, unread items left out as one run of ids, their records built
only when read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget._pack import Fit, Packer
from ctxbudget._report import Dropped, DropReason, DropRun, records

Item = tuple[str, int]  # (key, size)


def packer(
    log: list[str] | None = None,
    *,
    ceiling: Callable[[Item], int] | None = None,
    quick_bound: Callable[[Item], int] | None = None,
) -> Packer[Item]:
    seen = [] if log is None else log

    def cost(item: Item) -> int:
        seen.append(f"cost {item[0]}")
        return item[1]

    def bound(item: Item) -> int:
        seen.append(f"bound {item[0]}")
        return item[1] // 2

    return Packer(
        claimant="retrieved",
        kind="chunk",
        key=lambda item: item[0],
        cost=cost,
        bound=bound,
        framing=0,
        separator=1,
        ceiling=ceiling,
        quick_bound=quick_bound,
    )


def outcome(fit: Fit[Item]) -> tuple[object, ...]:
    return (
        [p.key for p in fit.parts],
        fit.cost,
        [(i[0], r, t) for i, r, t in fit.dropped],
        [i[0] for i in fit.unreached],
        fit.overflow,
    )


sizes = st.lists(st.integers(0, 60), max_size=12)


@given(sizes=sizes, grant=st.integers(0, 120), slack=st.integers(0, 40))
def test_pack_with_ceiling_and_quick_bound_decides_as_without(
    sizes: list[int], grant: int, slack: int
) -> None:
    items = [(f"i{n}", size) for n, size in enumerate(sizes)]
    plain = packer().pack(items, grant)
    quick = packer(
        ceiling=lambda i: i[1] // 2 + slack, quick_bound=lambda i: max(i[1] // 2 - slack, 0)
    )
    assert outcome(quick.pack(items, grant)) == outcome(plain)


def test_pack_skips_the_bound_while_the_ceiling_fits() -> None:
    log: list[str] = []
    packer(log, ceiling=lambda i: i[1]).pack([("a", 10), ("b", 10)], 100)
    assert log == ["cost a", "cost b"]


def test_pack_skips_the_bound_when_the_quick_bound_exceeds_the_grant() -> None:
    log: list[str] = []
    fit = packer(log, ceiling=lambda i: i[1], quick_bound=lambda i: i[1] // 2).pack(
        [("big", 500)], 100
    )
    assert log == []
    assert [(i[0], r, t) for i, r, t in fit.dropped] == [("big", "oversize", None)]


def test_pack_calls_oversize_before_reject_reads_the_item() -> None:
    read: list[str] = []

    def reject(item: Item, kept: list[Item]) -> DropReason | None:
        read.append(item[0])
        return "duplicate"

    fit = packer().pack([("big", 500), ("dup", 10)], 100, reject=reject)
    assert read == ["dup"]
    assert [(i[0], r) for i, r, _ in fit.dropped] == [("big", "oversize"), ("dup", "duplicate")]


def test_pack_costs_each_item_once_across_packs() -> None:
    log: list[str] = []
    p = packer(log)
    items = [("a", 10), ("b", 10)]
    p.pack(items, 100)
    p.pack(items, 15)
    assert log.count("cost a") == 1
    assert log.count("cost b") == 1


def test_cost_of_does_not_confuse_items_with_a_reused_id() -> None:
    p = packer()
    assert p.cost_of(("x", 3)) == 3
    assert p.cost_of(("y", 7)) == 7  # a new object, perhaps at the old one's address


def test_drops_of_unreached_items_are_over_budget_records() -> None:
    p = packer()
    fit = p.pack([("a", 50), ("b", 60), ("c", 1), ("d", 1)], 100)
    assert p.drops(fit) == [
        Dropped(claimant="retrieved", kind="chunk", id="b", reason="over_budget", tokens=60),
        Dropped(claimant="retrieved", kind="chunk", id="c", reason="over_budget"),
        Dropped(claimant="retrieved", kind="chunk", id="d", reason="over_budget"),
    ]


def test_drops_of_unreached_items_take_their_kind_per_item() -> None:
    p = packer()
    typed = Packer(
        claimant=p.claimant,
        kind=p.kind,
        key=p.key,
        cost=p.cost,
        bound=p.bound,
        framing=0,
        separator=0,
        kind_of=lambda item: "document" if item[0] == "doc" else "chunk",
    )
    fit = typed.pack([("a", 90), ("doc", 50), ("c", 1)], 100)
    assert [(d.id, d.kind) for d in typed.drops(fit)] == [("doc", "document"), ("c", "chunk")]


def test_drop_runs_hold_unreached_items_as_one_run_of_ids() -> None:
    p = packer()
    fit = p.pack([("a", 50), ("b", 60), ("c", 1), ("d", 1)], 100)
    noted, run = p.drop_runs(fit)
    assert noted == Dropped(
        claimant="retrieved", kind="chunk", id="b", reason="over_budget", tokens=60
    )
    assert run == DropRun("retrieved", "chunk", "over_budget", ["c", "d"])
    assert records(p.drop_runs(fit)) == p.drops(fit)


def test_drop_runs_without_unreached_items_hold_no_run() -> None:
    p = packer()
    fit = p.pack([("a", 50), ("b", 500)], 100)
    assert [type(d) for d in p.drop_runs(fit)] == [Dropped]


def test_drop_runs_name_unreached_items_all_at_once_when_the_caller_can() -> None:
    named: list[tuple[Item, ...]] = []

    def names(items: tuple[Item, ...]) -> list[str]:
        named.append(items)
        return [f"#{key}" for key, _ in items]

    p = packer()
    fit = p.pack([("a", 90), ("b", 60), ("c", 1)], 100)
    assert p.drop_runs(fit, names=names)[-1] == DropRun("retrieved", "chunk", "over_budget", ["#c"])
    assert named == [(("c", 1),)]


def test_drop_runs_without_kinds_take_the_packers_kind_for_every_item() -> None:
    typed = replace(packer(), kind_of=lambda item: "document")
    fit = typed.pack([("a", 90), ("b", 50), ("c", 1)], 100)
    assert typed.drop_runs(fit, kinds=False) == [
        Dropped(claimant="retrieved", kind="chunk", id="b", reason="over_budget"),
        DropRun("retrieved", "chunk", "over_budget", ["c"]),
    ]
    assert [d.kind for d in typed.drops(fit)] == ["document", "document"]


def make_packer(
    sizes: dict[str, int],
    *,
    framing: int = 0,
    separator: int = 0,
    exact_bound: bool = False,
    costed: list[str] | None = None,
) -> Packer[str]:
    """A packer over item keys; `costed` records every call of the cost function."""

    def cost(key: str) -> int:
        if costed is not None:
            costed.append(key)
        return sizes[key]

    bound: Callable[[str], int] = sizes.__getitem__ if exact_bound else (lambda _: 0)
    return Packer(
        claimant="retrieved",
        kind="chunk",
        key=str,
        cost=cost,
        bound=bound,
        framing=framing,
        separator=separator,
    )


def keys(fit: Fit[Any]) -> list[str]:
    return [part.key for part in fit.parts]


def test_pack_keeps_everything_that_fits() -> None:
    sizes = {"a": 3, "b": 4}

    fit = make_packer(sizes).pack(sizes, 7)

    assert (keys(fit), fit.cost, fit.overflow) == (["a", "b"], 7, False)
    assert (fit.dropped, fit.unreached) == ((), ())


def test_pack_keeps_preferred_prefix() -> None:
    sizes = {"a": 3, "b": 4, "c": 5}

    fit = make_packer(sizes).pack(sizes, 7)

    assert (keys(fit), fit.cost, fit.overflow) == (["a", "b"], 7, True)
    assert fit.dropped == (("c", "over_budget", 5),)


def test_pack_drops_item_larger_than_grant_as_oversize_and_continues() -> None:
    sizes = {"a": 10, "b": 3, "c": 2}

    fit = make_packer(sizes).pack(sizes, 5)

    assert keys(fit) == ["b", "c"]
    assert fit.dropped == (("a", "oversize", 10),)
    assert fit.overflow is True


def test_pack_stops_at_first_item_that_does_not_fit() -> None:
    # c and d would fit in what is left, but never in place of the better b.
    sizes = {"a": 3, "b": 3, "c": 1, "d": 1}

    fit = make_packer(sizes).pack(sizes, 5)

    assert keys(fit) == ["a"]
    assert fit.dropped == (("b", "over_budget", 3),)
    assert fit.unreached == ("c", "d")


def test_pack_never_costs_unreached_items() -> None:
    sizes = {"a": 3, "b": 3, "c": 1, "d": 1}
    costed: list[str] = []

    make_packer(sizes, costed=costed).pack(iter(sizes), 5)

    assert costed == ["a", "b"]


def test_pack_bound_skips_costing_oversize_item() -> None:
    sizes = {"a": 10, "b": 2}
    costed: list[str] = []

    fit = make_packer(sizes, exact_bound=True, costed=costed).pack(sizes, 5)

    assert fit.dropped == (("a", "oversize", None),)
    assert costed == ["b"]


def test_pack_bound_stops_walk_without_costing() -> None:
    sizes = {"a": 3, "b": 3, "c": 1}
    costed: list[str] = []

    fit = make_packer(sizes, exact_bound=True, costed=costed).pack(sizes, 5)

    assert fit.dropped == (("b", "over_budget", None),)
    assert fit.unreached == ("c",)
    assert costed == ["a"]


def test_pack_charges_separator_between_items() -> None:
    sizes = {"a": 2, "b": 2, "c": 2}

    fit = make_packer(sizes, separator=1).pack(sizes, 8)

    assert [part.cost for part in fit.parts] == [2, 3, 3]
    assert fit.cost == 8


def test_pack_separator_can_push_item_out() -> None:
    sizes = {"a": 2, "b": 2, "c": 2}

    fit = make_packer(sizes, separator=1).pack(sizes, 7)

    assert keys(fit) == ["a", "b"]
    assert fit.dropped == (("c", "over_budget", 2),)


def test_pack_separator_not_charged_before_first_item() -> None:
    sizes = {"a": 5}

    fit = make_packer(sizes, separator=3).pack(sizes, 5)

    assert (keys(fit), fit.cost) == (["a"], 5)


def test_pack_charges_framing_when_something_kept() -> None:
    sizes = {"a": 2}

    fit = make_packer(sizes, framing=4).pack(sizes, 6)

    assert (keys(fit), fit.cost) == (["a"], 6)
    assert fit.parts[0].cost == 2


def test_pack_framing_not_charged_when_nothing_kept() -> None:
    sizes = {"a": 10}

    fit = make_packer(sizes, framing=4).pack(sizes, 6)

    assert (keys(fit), fit.cost) == ([], 0)


def test_pack_framing_not_charged_for_no_items() -> None:
    fit = make_packer({}, framing=4).pack([], 6)

    assert (fit.parts, fit.cost, fit.overflow) == ((), 0, False)


def test_pack_framing_reduces_room_for_items() -> None:
    sizes = {"a": 3}

    fit = make_packer(sizes, framing=4).pack(sizes, 6)

    assert fit.dropped == (("a", "oversize", 3),)


def test_pack_reject_drops_with_reason_without_consuming_space() -> None:
    sizes = {"a": 3, "b": 3, "c": 2}
    costed: list[str] = []

    def reject(item: str, kept_items: list[str]) -> DropReason | None:
        return "duplicate" if item == "b" else None

    fit = make_packer(sizes, costed=costed).pack(sizes, 5, reject=reject)

    assert (keys(fit), fit.cost) == (["a", "c"], 5)
    assert fit.dropped == (("b", "duplicate", None),)
    assert costed == ["a", "c"]


def test_pack_reject_sees_items_kept_so_far() -> None:
    sizes = {"a": 3, "b": 3, "c": 2}
    seen: list[list[str]] = []

    def reject(item: str, kept_items: list[str]) -> DropReason | None:
        seen.append(list(kept_items))
        return None

    make_packer(sizes).pack(sizes, 10, reject=reject)

    assert seen == [[], ["a"], ["a", "b"]]


def test_shrink_drops_last_part() -> None:
    packer = make_packer({"a": 2, "b": 3})
    fit = packer.pack(["a", "b"], 10)

    smaller = packer.shrink(fit)

    assert smaller is not None
    assert (keys(smaller), smaller.cost, smaller.overflow) == (["a"], 2, True)
    assert smaller.dropped == (("b", "over_budget", 3),)


def test_shrink_removes_separator_of_dropped_part() -> None:
    packer = make_packer({"a": 2, "b": 2, "c": 2}, separator=1)
    fit = packer.pack(["a", "b", "c"], 8)

    smaller = packer.shrink(fit)

    assert smaller is not None
    assert smaller.cost == 5


def test_shrink_to_empty_drops_framing() -> None:
    packer = make_packer({"a": 2}, framing=4)
    fit = packer.pack(["a"], 6)

    smaller = packer.shrink(fit)

    assert smaller is not None
    assert (smaller.parts, smaller.cost) == ((), 0)


def test_shrink_keeps_earlier_drops_and_unreached() -> None:
    packer = make_packer({"a": 9, "b": 2, "c": 2, "d": 1, "e": 1})
    fit = packer.pack(["a", "b", "c", "d", "e"], 3)

    smaller = packer.shrink(fit)

    assert smaller is not None
    assert smaller.dropped == (
        ("a", "oversize", 9),
        ("c", "over_budget", 2),
        ("b", "over_budget", 2),
    )
    assert smaller.unreached == ("d", "e")


def test_shrink_returns_none_on_empty_fit() -> None:
    packer = make_packer({"a": 10})

    assert packer.shrink(packer.pack(["a"], 5)) is None


def test_drops_lists_every_left_out_item() -> None:
    sizes = {"a": 9, "b": 2, "dup": 1, "c": 2, "d": 1}
    packer = make_packer(sizes, exact_bound=True)

    def reject(item: str, kept_items: list[str]) -> DropReason | None:
        return "duplicate" if item == "dup" else None

    fit = packer.pack(sizes, 3, reject=reject)

    assert packer.drops(fit) == [
        Dropped(claimant="retrieved", kind="chunk", id="a", reason="oversize", tokens=None),
        Dropped(claimant="retrieved", kind="chunk", id="dup", reason="duplicate", tokens=None),
        Dropped(claimant="retrieved", kind="chunk", id="c", reason="over_budget", tokens=None),
        Dropped(claimant="retrieved", kind="chunk", id="d", reason="over_budget", tokens=None),
    ]


def test_drops_carries_counted_tokens() -> None:
    sizes = {"a": 9, "b": 2}
    packer = make_packer(sizes)

    fit = packer.pack(sizes, 3)

    assert packer.drops(fit) == [
        Dropped(claimant="retrieved", kind="chunk", id="a", reason="oversize", tokens=9),
    ]


def test_drops_empty_when_everything_kept() -> None:
    sizes = {"a": 1}
    packer = make_packer(sizes)

    assert packer.drops(packer.pack(sizes, 1)) == []
