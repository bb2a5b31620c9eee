"""Checking an answer's [n] citations against the sources sent (core/ctxbudget/citations.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxbudget import Chunk, CitationCheck, ContextAssembler
from ctxbudget.citations import check_citations, cited_numbers

# --- cited_numbers --------------------------------------------------------------------------


def test_cited_numbers_single() -> None:
    assert cited_numbers("Refunds take 14 days [3].") == [3]


def test_cited_numbers_comma_list() -> None:
    assert cited_numbers("Both agree [1, 2].") == [1, 2]


def test_cited_numbers_comma_list_without_spaces() -> None:
    assert cited_numbers("Both agree [1,2,5].") == [1, 2, 5]


def test_cited_numbers_adjacent_brackets() -> None:
    assert cited_numbers("Both agree [1][2].") == [1, 2]


def test_cited_numbers_hyphen_range_is_expanded() -> None:
    assert cited_numbers("All of them [2-4].") == [2, 3, 4]


def test_cited_numbers_en_dash_range_is_expanded() -> None:
    assert cited_numbers("All of them [2\u20134].") == [2, 3, 4]


def test_cited_numbers_spaced_range_is_expanded() -> None:
    assert cited_numbers("All of them [2 - 4].") == [2, 3, 4]


def test_cited_numbers_list_with_range() -> None:
    assert cited_numbers("See [1, 3-5].") == [1, 3, 4, 5]


def test_cited_numbers_ignores_non_numeric_brackets() -> None:
    assert cited_numbers("A footnote [x] and a [citation needed] tag.") == []


def test_cited_numbers_huge_range_is_not_a_citation() -> None:
    # "[1-2024]" is not a range of two thousand sources, nor a citation of [1].
    assert cited_numbers("As of [1-2024] the rule changed.") == []


def test_cited_numbers_reversed_range_is_not_a_citation() -> None:
    assert cited_numbers("See [4-2].") == []


def test_cited_numbers_bracketed_date_is_not_a_citation() -> None:
    # The module's own contract: "not [x] or [2024-01-01]-style dates".
    assert cited_numbers("The policy dated [2024-01-01] applies.") == []


def test_cited_numbers_repeated_citation_counted_once() -> None:
    assert cited_numbers("[2] says so, and [2] again.") == [2]


def test_cited_numbers_sorted_ascending() -> None:
    assert cited_numbers("First [3], then [1], then [2].") == [1, 2, 3]


def test_cited_numbers_no_citations() -> None:
    assert cited_numbers("No sources were cited.") == []


def test_cited_numbers_markdown_link_text_is_not_a_citation() -> None:
    assert cited_numbers("See [the docs](https://example.com/1).") == []


# --- check_citations ------------------------------------------------------------------------


def test_check_citations_unknown_number_is_reported() -> None:
    assert check_citations("Per [1] and [9].", 3).unknown == (9,)


def test_check_citations_uncited_sources_are_reported() -> None:
    assert check_citations("Per [1] and [9].", 3).uncited == (2, 3)


def test_check_citations_cited_lists_every_number() -> None:
    assert check_citations("Per [3], [1] and [9].", 3).cited == (1, 3, 9)


def test_check_citations_zero_is_unknown() -> None:
    assert check_citations("Per [0].", 2).unknown == (0,)


def test_check_citations_all_valid_is_ok() -> None:
    assert check_citations("Per [1] and [2].", 3).ok is True


def test_check_citations_uncited_sources_still_ok() -> None:
    # ok is about citations that point nowhere; unused sources are not an error.
    assert check_citations("Per [1].", 3).ok is True


def test_check_citations_unknown_number_not_ok() -> None:
    assert check_citations("Per [4].", 3).ok is False


def test_check_citations_no_sources_every_citation_unknown() -> None:
    check = check_citations("Per [1].", 0)
    assert (check.unknown, check.uncited) == ((1,), ())


def test_check_citations_no_citations_all_uncited() -> None:
    check = check_citations("I do not know.", 2)
    assert (check.cited, check.unknown, check.uncited, check.ok) == ((), (), (1, 2), True)


def test_citation_check_is_frozen() -> None:
    check = check_citations("Per [1].", 1)
    with pytest.raises(ValidationError, match=r"unknown\n\s+Instance is frozen"):
        check.unknown = (5,)  # type: ignore[misc]


# --- Assembled.check_citations end to end ---------------------------------------------------


def three_sources() -> list[Chunk]:
    return [
        Chunk(id="a", content="Refunds take fourteen days after the return arrives.", score=0.9),
        Chunk(id="b", content="Store credit never expires and stacks with coupons.", score=0.8),
        Chunk(id="c", content="Exchanges are free for items bought in the EU.", score=0.7),
    ]


def test_assembled_check_citations_reports_unknown_and_uncited() -> None:
    result = ContextAssembler(tokenizer="o200k_base").assemble(
        question="How long do refunds take?", chunks=three_sources()
    )
    assert len(result.sources) == 3
    check = result.check_citations("Refunds take 14 days [1], or so says [9].")
    assert (check.unknown, check.uncited) == ((9,), (2, 3))


def test_assembled_check_citations_returns_citation_check() -> None:
    result = ContextAssembler(tokenizer="o200k_base").assemble(
        question="How long do refunds take?", chunks=three_sources()
    )
    assert isinstance(result.check_citations("[1]"), CitationCheck)


def test_assembled_check_citations_without_sources_flags_any_citation() -> None:
    result = ContextAssembler(tokenizer="o200k_base").assemble(question="Hello?")
    assert result.check_citations("See [1].").unknown == (1,)
