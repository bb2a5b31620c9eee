"""Retrieval that found permitted, relevant sources but could send none
(`RetrievedClaim.require_sent`, core/ctxbudget/_sources/claim.py), through `select_sources`,
`ContextAssembler.select_sources` and `assemble` alike: an error above a floor, else a warning
naming them."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ctxbudget import (
    Allocation,
    Budget,
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    Principal,
    SourceOptions,
    get_tokenizer,
    select_sources,
)
from tests.support.factories import NO_DEDUP, selected, sized

O200K = get_tokenizer("o200k_base")


NONE_FITS = (
    r"'retrieved' needs [\d,]+ tokens but only {left} are left: {found} permitted, relevant "
    r"source\(s\) were found but none fits \({ids}\), and retrieval's min \({floor}\) says the "
    r"request needs sources; raise the retrieved allocation \(or the total\), cut documents "
    r"into smaller chunks, or set min=0 to answer without sources$"
)


BIG = sized([400, 400])
"""Two chunks, each larger than the 100 tokens the tests give retrieval."""


SMALL = Chunk(id="small", content="Refunds take 14 days.", score=0.6)
"""A chunk that fits, ranked after them."""


def budget(floor: int) -> Budget:
    return Budget(
        total=2_000,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", priority=0),
            Allocation("retrieved", min=floor, max=100, priority=1),
        ),
    )


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "no source fits" in r.getMessage()]


def unsent(record: logging.LogRecord) -> Any:
    """The ids the record names in its `extra=`."""
    return record.__dict__["ctxbudget_unsent"]


@pytest.mark.parametrize("fence", ["block", "per_source"])
def test_select_sources_sending_none_of_what_it_found_raises_above_a_floor(fence: Any) -> None:
    with pytest.raises(
        ContextBudgetError, match=NONE_FITS.format(left=100, found=2, ids="c0, c1", floor=10)
    ) as caught:
        selected(BIG, 100, fence, min_tokens=10)

    assert (caught.value.claimant, caught.value.left) == ("retrieved", 100)
    assert caught.value.needed > 100


def test_assembler_select_sources_sending_none_of_what_it_found_raises_above_a_floor() -> None:
    assembler = ContextAssembler(tokenizer=O200K, budget=budget(10), sources=NO_DEDUP)

    with pytest.raises(
        ContextBudgetError, match=NONE_FITS.format(left=100, found=2, ids="c0, c1", floor=10)
    ):
        assembler.select_sources(BIG)


def test_assemble_sending_none_of_what_it_found_raises_above_a_floor() -> None:
    assembler = ContextAssembler(tokenizer=O200K, budget=budget(10), sources=NO_DEDUP)

    with pytest.raises(
        ContextBudgetError, match=NONE_FITS.format(left=100, found=2, ids="c0, c1", floor=10)
    ) as caught:
        assembler.assemble(question="What changed?", chunks=BIG)

    assert caught.value.claimant == "retrieved"


def test_select_sources_sending_none_names_ten_ids_and_counts_the_rest() -> None:
    with pytest.raises(ContextBudgetError, match=r"\(c0, c1, .*, c9 and 2 more\)"):
        selected(sized([400] * 12), 100, "block", min_tokens=10)


def test_select_sources_sending_none_names_no_forbidden_id() -> None:
    chunks = [Chunk(id="secret", content="Board minutes.", tenant="globex"), *BIG]

    with pytest.raises(ContextBudgetError, match=r"2 permitted, relevant source\(s\)") as caught:
        selected(chunks, 100, "block", min_tokens=10, principal=Principal(tenant="acme"))

    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("fence", ["block", "per_source"])
def test_select_sources_sending_none_without_a_floor_warns_naming_the_ids(
    fence: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        selection = selected(BIG, 100, fence)

    (record,) = warnings_of(caplog)
    assert selection.text == ""
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "no source fits the 100 tokens retrieval was given: 2 permitted, relevant source(s) "
        "were left out (c0, c1); the model answers without sources"
    )
    assert unsent(record) == ["c0", "c1"]


def test_assembler_select_sources_sending_none_without_a_floor_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assembler = ContextAssembler(tokenizer=O200K, budget=budget(0), sources=NO_DEDUP)

    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assembler.select_sources(BIG)

    assert [unsent(r) for r in warnings_of(caplog)] == [["c0", "c1"]]


def test_assemble_sending_none_without_a_floor_warns(caplog: pytest.LogCaptureFixture) -> None:
    assembler = ContextAssembler(tokenizer=O200K, budget=budget(0), sources=NO_DEDUP)

    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        result = assembler.assemble(question="What changed?", chunks=BIG)

    assert result.sources == ()
    assert [unsent(r) for r in warnings_of(caplog)] == [["c0", "c1"]]


QUIET = {
    "nothing-found": ([], None),
    "all-forbidden": (
        [
            Chunk(id="s1", content="Board minutes.", tenant="globex"),
            Chunk(id="s2", content="Payroll.", groups=frozenset({"hr"})),
        ],
        Principal(tenant="acme"),
    ),
    "below-relevance-floor": ([Chunk(id="low", content="Unrelated.", score=0.01)], None),
    "one-sent": ([*BIG, SMALL], None),
}  # fmt: skip


@pytest.mark.parametrize(("chunks", "principal"), QUIET.values(), ids=QUIET.keys())
def test_select_sources_sending_what_it_can_is_silent_above_a_floor(
    chunks: list[Chunk], principal: Principal | None, caplog: pytest.LogCaptureFixture
) -> None:
    options = SourceOptions(min_relevance=0.5)
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        select_sources(
            chunks,
            max_tokens=100,
            min_tokens=10,
            tokenizer=O200K,
            principal=principal,
            sources=options,
        )

    assert warnings_of(caplog) == []


@pytest.mark.parametrize(("chunks", "principal"), QUIET.values(), ids=QUIET.keys())
def test_assemble_sending_what_it_can_is_silent(
    chunks: list[Chunk], principal: Principal | None, caplog: pytest.LogCaptureFixture
) -> None:
    assembler = ContextAssembler(
        tokenizer=O200K, budget=budget(0), sources=SourceOptions(min_relevance=0.5)
    )
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        assembler.assemble(question="What changed?", chunks=chunks, principal=principal)

    assert warnings_of(caplog) == []


def test_select_sources_one_sent_beside_an_oversize_one_reports_it_dropped() -> None:
    selection = selected([*BIG, SMALL], 100, "block", min_tokens=10)

    assert [s.chunk.id for s in selection.sources] == ["small"]
    assert {d.id: d.reason for d in selection.dropped} == {"c0": "oversize", "c1": "oversize"}
