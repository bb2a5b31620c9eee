"""Packer mechanics that keep packing cheap: size bounds before any look, costs computed once,
unread items left out as one run of ids, their records built only when read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

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
