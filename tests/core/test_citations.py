"""Checking an answer's [n] citations against the sources sent (core/ctxbudget/_citations.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import Chunk, CitationCheck, ContextAssembler
from ctxbudget._citations import check_citations, cited_numbers
from tests.support.cputime import paired_times

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
        check.unknown = (5,)


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


# --- the spacing and characters answers use ---------------------------------------------------


def test_cited_numbers_spaces_inside_brackets() -> None:
    assert cited_numbers("Refunds take 14 days [ 5 ].") == [5]


def test_cited_numbers_space_before_closing_bracket() -> None:
    assert cited_numbers("Refunds take 14 days [5 ].") == [5]


def test_cited_numbers_spaces_around_commas() -> None:
    assert cited_numbers("Both agree [ 1 , 2 ].") == [1, 2]


def test_cited_numbers_semicolon_list() -> None:
    assert cited_numbers("Both agree [1; 2].") == [1, 2]


def test_cited_numbers_non_breaking_and_narrow_spaces() -> None:
    assert cited_numbers("Both agree [\u00a01,\u202f2\u2009].") == [1, 2]


def test_cited_numbers_em_dash_and_minus_sign_ranges_are_expanded() -> None:
    assert cited_numbers("All of them [2\u20144] and [7 \u2212 8].") == [2, 3, 4, 7, 8]


def test_cited_numbers_ieee_range_across_brackets_is_expanded() -> None:
    assert cited_numbers("As shown [1]\u2013[3].") == [1, 2, 3]


def test_cited_numbers_spaced_dash_between_brackets_is_two_citations() -> None:
    # "[1] - [3] disagree" contrasts two sources; only the unspaced IEEE form is a range.
    assert cited_numbers("[1] - [3] disagree.") == [1, 3]


def test_cited_numbers_fullwidth_brackets_and_digits() -> None:
    assert cited_numbers("退款需要十四天\uff3b\uff11\uff3d\u3002") == [1]


def test_cited_numbers_lenticular_brackets_and_ideographic_comma() -> None:
    assert cited_numbers("两者一致\u30101\u30012\u3011\u3002") == [1, 2]


def test_cited_numbers_more_than_three_spaces_is_not_a_citation() -> None:
    # Spacing is bounded so every "[" costs a bounded scan; nobody writes four spaces.
    assert cited_numbers("See [1,    2].") == []


def test_cited_numbers_bracketed_list_past_the_item_cap_is_not_a_citation() -> None:
    numbers = ", ".join(str(n) for n in range(1, 66))
    assert cited_numbers(f"A table row [{numbers}].") == []


def test_cited_numbers_date_split_across_brackets_is_not_a_citation() -> None:
    assert cited_numbers("Dated [2024]-[01]-[01].") == []


def test_cited_numbers_trailing_comma_is_not_a_citation() -> None:
    assert cited_numbers("See [1, 2,].") == []


# --- any list of citations, in any style, is read back -----------------------------------------

_FULLWIDTH = str.maketrans("0123456789", "".join(chr(0xFF10 + d) for d in range(10)))
_SPACES = st.text(alphabet=" \t\n\u00a0\u2009\u202f\u3000", max_size=3)
_DASHES = st.sampled_from(list("-\u2010\u2011\u2012\u2013\u2014\u2212\uff0d"))
_SEPARATORS = st.sampled_from([",", ";", "\uff0c", "\uff1b", "\u3001"])
_BRACKET_PAIRS = st.sampled_from([("[", "]"), ("\uff3b", "\uff3d"), ("\u3010", "\u3011")])
_FILLERS = st.sampled_from(["", " ", " and ", ". See ", "\n", ", as "])


@st.composite
def _number(draw: st.DrawFn, n: int) -> str:
    return str(n).translate(_FULLWIDTH) if draw(st.booleans()) else str(n)


@st.composite
def _element(draw: st.DrawFn) -> tuple[str, set[int]]:
    start = draw(st.integers(1, 9_999))
    if draw(st.booleans()):
        return draw(_number(start)), {start}
    stop = draw(st.integers(start, min(start + 50, 9_999)))
    dash = f"{draw(_SPACES)}{draw(_DASHES)}{draw(_SPACES)}"
    text = f"{draw(_number(start))}{dash}{draw(_number(stop))}"
    return text, set(range(start, stop + 1))


@st.composite
def _group(draw: st.DrawFn) -> tuple[str, set[int]]:
    opening, closing = draw(_BRACKET_PAIRS)
    if draw(st.integers(0, 4)) == 0:  # IEEE: [1]-[3]
        start = draw(st.integers(1, 9_999))
        stop = draw(st.integers(start, min(start + 50, 9_999)))
        first = f"{opening}{draw(_number(start))}{closing}"
        second = f"{opening}{draw(_number(stop))}{closing}"
        return f"{first}{draw(_DASHES)}{second}", set(range(start, stop + 1))
    elements = draw(st.lists(_element(), min_size=1, max_size=5))
    body = ""
    for index, (text, _) in enumerate(elements):
        if index:
            body += f"{draw(_SPACES)}{draw(_SEPARATORS)}{draw(_SPACES)}"
        body += text
    cited = set().union(*(numbers for _, numbers in elements))
    return f"{opening}{draw(_SPACES)}{body}{draw(_SPACES)}{closing}", cited


@given(groups=st.lists(st.tuples(_group(), _FILLERS), max_size=6))
def test_cited_numbers_recovers_citations_written_in_any_style(
    groups: list[tuple[tuple[str, set[int]], str]],
) -> None:
    answer = "Answer: " + "".join(text + filler for (text, _), filler in groups)
    expected: set[int] = set().union(*(numbers for (_, numbers), _ in groups))
    assert cited_numbers(answer) == sorted(expected)


@given(
    brackets=_BRACKET_PAIRS,
    year=st.integers(1900, 2100),
    month=st.integers(1, 12),
    day=st.integers(1, 28),
    dash=_DASHES,
)
def test_cited_numbers_bracketed_dates_cite_nothing(
    brackets: tuple[str, str], year: int, month: int, day: int, dash: str
) -> None:
    opening, closing = brackets
    assert cited_numbers(f"Dated {opening}{year}{dash}{month:02}{dash}{day:02}{closing}.") == []


@given(start=st.integers(1, 9_000), span=st.integers(51, 999), dash=_DASHES)
def test_cited_numbers_wild_ranges_cite_nothing(start: int, span: int, dash: str) -> None:
    assert cited_numbers(f"As of [{start}{dash}{start + span}] it changed.") == []


# --- linear time on hostile answers --------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    [
        "[",
        "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 ",
        "[1   ,   1   ,   1   ,   1   ,   1   ,   1   ,   1   ,   1   ,   1   ,   1   ",
        "[1]-",
        "[1]-[1,1]-[",
        "[" + ", ".join(["1"] * 70) + "]",
    ],
)
def test_cited_numbers_hostile_answer_costs_about_an_ordinary_one(unit: str) -> None:
    # Same size, same test: a backtracking pattern would be orders of magnitude slower.
    size = 200_000
    ordinary = ("Refunds take 14 days [1]. Store credit never expires [2, 3]. " * size)[:size]
    hostile = (unit * size)[:size]
    hostile_seconds, ordinary_seconds = paired_times(cited_numbers, hostile, ordinary)
    assert hostile_seconds < 50 * ordinary_seconds
