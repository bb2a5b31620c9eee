"""Retrieved sources on their own: `select_sources` and `ContextAssembler.select_sources`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    Allocation,
    Budget,
    CallableTokenizer,
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    InputError,
    Principal,
    SourceOptions,
    get_tokenizer,
    select_sources,
)
from ctxbudget._report import records
from ctxbudget._sources.pipeline import candidates


def chunks(n: int, words: int = 40) -> list[Chunk]:
    return [
        Chunk(
            id=f"c{i}",
            document_id=f"d{i % 3}",
            title=f"Doc {i % 3}",
            ordinal=i,
            content=" ".join(f"w{i}x{j}" for j in range(words)),
            score=1 - i / (n + 1),
        )
        for i in range(n)
    ]


def test_select_sources_numbers_and_fences_within_max_tokens() -> None:
    selection = select_sources(chunks(20), max_tokens=400, tokenizer="o200k_base")
    assert get_tokenizer("o200k_base").count(selection.text) == selection.tokens <= 400
    assert selection.text.startswith("<retrieved_documents>\n")
    assert selection.text.endswith("</retrieved_documents>")
    assert [s.n for s in selection.sources] == list(range(1, len(selection.sources) + 1))
    for source in selection.sources:
        assert f"[{source.n}] " in selection.text
    assert selection.trimmed
    kept = {s.chunk.id for s in selection.sources}
    dropped = {d.id for d in selection.dropped}
    assert kept | dropped == {f"c{i}" for i in range(20)}
    assert not kept & dropped


def test_select_sources_keeps_best_ranked_chunks() -> None:
    selection = select_sources(chunks(20), max_tokens=400, tokenizer="o200k_base")
    kept = sorted(int(s.chunk.id[1:]) for s in selection.sources)
    assert kept == list(range(len(kept)))


def test_select_sources_with_nothing_kept_is_empty_text() -> None:
    selection = select_sources(chunks(3), max_tokens=10, tokenizer="o200k_base")
    assert selection.text == ""
    assert selection.tokens == 0
    assert selection.sources == ()
    assert {d.reason for d in selection.dropped} == {"oversize"}


def test_select_sources_floor_holds_on_the_exact_count() -> None:
    # A quarter token per character, rounded down: joins cost more than their parts, so
    # the exact count is over while the estimate fits, and the floor forbids dropping.
    quarter = CallableTokenizer(lambda text: len(text) // 4, name="quarter")
    given_chunks = [Chunk(id=f"c{i}", content="abcde" * 9) for i in range(3)]
    fits = select_sources(given_chunks, max_tokens=5_000, tokenizer=quarter)
    limit = fits.tokens - 1
    relaxed = select_sources(given_chunks, max_tokens=limit, tokenizer=quarter)
    assert len(relaxed.sources) < len(fits.sources)
    with pytest.raises(ContextBudgetError, match=r"falling below its floor \(min=\d+\)"):
        select_sources(given_chunks, max_tokens=limit, min_tokens=limit, tokenizer=quarter)


def test_select_sources_rejects_a_floor_above_the_cap() -> None:
    with pytest.raises(InputError, match=r"min_tokens \(500\) is greater than max_tokens \(100\)"):
        select_sources(chunks(5), max_tokens=100, min_tokens=500, tokenizer="o200k_base")


def test_select_sources_drops_forbidden_and_invisible_only_chunks() -> None:
    given_chunks = [
        Chunk(id="public", content="Returns are accepted within 60 days."),
        Chunk(id="secret", content="Board minutes: layoffs.", tenant="other"),
        Chunk(id="blank", content="\u200b\u2060\U000e0041 \ufe0f"),
    ]
    selection = select_sources(
        given_chunks,
        max_tokens=500,
        tokenizer="o200k_base",
        principal=Principal(tenant="acme"),
    )
    assert [s.chunk.id for s in selection.sources] == ["public"]
    assert {(d.id, d.reason) for d in selection.dropped} == {
        ("secret", "forbidden"),
        ("blank", "empty"),
    }
    assert "layoffs" not in selection.text


def test_select_sources_applies_options() -> None:
    options = SourceOptions(order="relevance", source_format="xml", min_relevance=0.5)
    selection = select_sources(chunks(6), max_tokens=2_000, tokenizer="o200k_base", sources=options)
    assert '<document index="1"' in selection.text
    assert {d.reason for d in selection.dropped} == {"below_floor"}


def test_select_sources_rejects_bad_input() -> None:
    with pytest.raises(InputError, match=r"chunks\[0\] is a str, expected ctxbudget.Chunk"):
        select_sources(["text"], max_tokens=100, tokenizer="o200k_base")  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"max_tokens must be an int >= 0, but got -1"):
        select_sources(chunks(1), max_tokens=-1, tokenizer="o200k_base")
    with pytest.raises(InputError, match=r"principal must be a ctxbudget.Principal"):
        select_sources(
            chunks(1),
            max_tokens=100,
            tokenizer="o200k_base",
            principal="acme",  # type: ignore[arg-type]
        )


def test_source_options_reject_unknown_option_and_bad_loader() -> None:
    with pytest.raises(ValueError, match=r"ordr"):
        SourceOptions(ordr="relevance")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"loader must have a load\(document_id\)"):
        SourceOptions(loader=object())


def test_assembler_select_sources_defaults_to_the_retrieved_allocation() -> None:
    budget = Budget(
        total=5_000,
        allocations=(
            Allocation("question", priority=0),
            Allocation("retrieved", min=100, max=700, priority=1),
        ),
    )
    assembler = ContextAssembler(tokenizer="o200k_base", budget=budget)
    selection = assembler.select_sources(chunks(30))
    assert selection.budget == 700
    assert selection.tokens <= 700


def test_assembler_select_sources_is_the_assemblers_own_pipeline() -> None:
    # One pipeline: the fenced block the assembler puts in the prompt is the selection's.
    assembler = ContextAssembler(tokenizer="o200k_base")
    result = assembler.assemble(question="Why?", chunks=chunks(30))
    grant = result.report.granted["retrieved"]
    selection = assembler.select_sources(chunks(30), max_tokens=grant, min_tokens=0)
    assert selection.text
    assert selection.text in result.text
    assert [s.chunk.id for s in selection.sources] == [s.chunk.id for s in result.sources]


@given(
    words=st.lists(st.integers(1, 120), max_size=15),
    max_tokens=st.integers(0, 1_500),
    min_tokens=st.integers(0, 300),
)
def test_selection_is_within_max_tokens_and_accounts_for_every_chunk(
    words: list[int], max_tokens: int, min_tokens: int
) -> None:
    given_chunks = [
        Chunk(id=f"c{i}", document_id=f"d{i % 2}", content=" ".join(["lorem"] * n + [str(i)]))
        for i, n in enumerate(words)
    ]
    try:
        selection = select_sources(
            given_chunks,
            max_tokens=max_tokens,
            min_tokens=min(min_tokens, max_tokens),
            tokenizer="o200k_base",
        )
    except ContextBudgetError as error:
        assert error.claimant == "retrieved"  # noqa: PT017 - a floor is one outcome
        return
    assert get_tokenizer("o200k_base").count(selection.text) == selection.tokens <= max_tokens
    kept = [s.chunk.id for s in selection.sources]
    dropped = [d.id for d in selection.dropped]
    assert sorted(kept + dropped) == sorted(c.id for c in given_chunks)


def test_each_source_carries_its_text_as_the_prompt_shows_it() -> None:
    selection = select_sources(chunks(6), max_tokens=2_000, tokenizer="o200k_base")
    blocks = [source.text for source in selection.sources]
    assert "\n\n".join(blocks) in selection.text
    for source in selection.sources:
        assert source.text.startswith(f"[{source.n}] Doc ")
        assert source.text.endswith(source.chunk.content)


def test_candidates_rank_what_is_left_and_name_it_by_position() -> None:
    given_chunks = [
        Chunk(id="low", content="Low ranked.", score=0.1),
        Chunk(id="secret", content="Board minutes.", tenant="other", score=0.9),
        Chunk(id="blank", content="\u200b", score=0.8),
        Chunk(id="high", content="High ranked.", score=0.7),
        Chunk(id="unscored", content="No score."),
    ]
    ruled_out, ranked, ids = candidates(given_chunks, None, SourceOptions())
    assert [(d.id, d.reason) for d in records(ruled_out)] == [
        ("secret", "forbidden"),
        ("blank", "empty"),
    ]
    assert [c.id for c in ranked] == ["high", "low", "unscored"]
    assert list(ids) == ["high", "low", "unscored"]


def test_candidates_with_nothing_ruled_out_name_them_from_one_read() -> None:
    given_chunks = chunks(5)[::-1]
    ruled_out, ranked, ids = candidates(given_chunks, None, SourceOptions())
    assert ruled_out == []
    assert list(ids) == [c.id for c in ranked] == [f"c{i}" for i in range(5)]


def test_selection_builds_the_records_of_unread_chunks_when_read() -> None:
    selection = select_sources(chunks(60), max_tokens=300, tokenizer="o200k_base")
    state = object.__getattribute__(selection, "__dict__")
    assert not isinstance(state["dropped"], tuple)
    kept = [s.chunk.id for s in selection.sources]
    assert [d.id for d in selection.dropped] == [f"c{i}" for i in range(len(kept), 60)]
    assert isinstance(state["dropped"], tuple)
