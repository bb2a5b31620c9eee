"""One part of a prompt on its own (core/ctxbudget/_standalone.py): `select_sources` and
`ContextAssembler.select_sources` for retrieved sources, `trim_history` and
`ContextAssembler.trim_history` for history."""

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
    HistoryOptions,
    InputError,
    Principal,
    SourceOptions,
    TrimmedHistory,
    Turn,
    get_tokenizer,
    select_sources,
    trim_history,
)
from tests.support.factories import budget_for, chunks_in_three_documents

# --- select_sources: retrieved sources on their own ---------------------------------------


def test_select_sources_numbers_and_fences_within_max_tokens() -> None:
    selection = select_sources(
        chunks_in_three_documents(20), max_tokens=400, tokenizer="o200k_base"
    )
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
    selection = select_sources(
        chunks_in_three_documents(20), max_tokens=400, tokenizer="o200k_base"
    )
    kept = sorted(int(s.chunk.id[1:]) for s in selection.sources)
    assert kept == list(range(len(kept)))


def test_select_sources_with_nothing_kept_is_empty_text() -> None:
    selection = select_sources(chunks_in_three_documents(3), max_tokens=10, tokenizer="o200k_base")
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
        select_sources(
            chunks_in_three_documents(5), max_tokens=100, min_tokens=500, tokenizer="o200k_base"
        )


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
    selection = select_sources(
        chunks_in_three_documents(6), max_tokens=2_000, tokenizer="o200k_base", sources=options
    )
    assert '<document index="1"' in selection.text
    assert {d.reason for d in selection.dropped} == {"below_floor"}


def test_select_sources_rejects_bad_input() -> None:
    with pytest.raises(InputError, match=r"chunks\[0\] is a str, expected ctxbudget.Chunk"):
        select_sources(["text"], max_tokens=100, tokenizer="o200k_base")  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"max_tokens must be an int >= 0, but got -1"):
        select_sources(chunks_in_three_documents(1), max_tokens=-1, tokenizer="o200k_base")
    with pytest.raises(InputError, match=r"principal must be a ctxbudget.Principal"):
        select_sources(
            chunks_in_three_documents(1),
            max_tokens=100,
            tokenizer="o200k_base",
            principal="acme",  # type: ignore[arg-type]
        )


def test_assembler_select_sources_defaults_to_the_retrieved_allocation() -> None:
    budget = Budget(
        total=5_000,
        allocations=(
            Allocation("question", priority=0),
            Allocation("retrieved", min=100, max=700, priority=1),
        ),
    )
    assembler = ContextAssembler(tokenizer="o200k_base", budget=budget)
    selection = assembler.select_sources(chunks_in_three_documents(30))
    assert selection.budget == 700
    assert selection.tokens <= 700


def test_assembler_select_sources_is_the_assemblers_own_pipeline() -> None:
    # One pipeline: the fenced block the assembler puts in the prompt is the selection's.
    assembler = ContextAssembler(tokenizer="o200k_base")
    result = assembler.assemble(question="Why?", chunks=chunks_in_three_documents(30))
    grant = result.report.granted["retrieved"]
    selection = assembler.select_sources(
        chunks_in_three_documents(30), max_tokens=grant, min_tokens=0
    )
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
    selection = select_sources(
        chunks_in_three_documents(6), max_tokens=2_000, tokenizer="o200k_base"
    )
    blocks = [source.text for source in selection.sources]
    assert "\n\n".join(blocks) in selection.text
    for source in selection.sources:
        assert source.text.startswith(f"[{source.n}] Doc ")
        assert source.text.endswith(source.chunk.content)


def test_selection_builds_the_records_of_unread_chunks_when_read() -> None:
    selection = select_sources(
        chunks_in_three_documents(60), max_tokens=300, tokenizer="o200k_base"
    )
    state = object.__getattribute__(selection, "__dict__")
    assert not isinstance(state["dropped"], tuple)
    kept = [s.chunk.id for s in selection.sources]
    assert [d.id for d in selection.dropped] == [f"c{i}" for i in range(len(kept), 60)]
    assert isinstance(state["dropped"], tuple)


# --- trim_history: history on its own -------------------------------------------------------


def turns(n: int, words: int = 30) -> list[Turn]:
    return [
        Turn(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "blah " * words)
        for i in range(n)
    ]


def test_trim_history_keeps_first_and_most_recent_with_a_gap_marker() -> None:
    trimmed = trim_history(turns(20), max_tokens=300, tokenizer="o200k_base")
    assert trimmed.kept[0] == 0
    assert trimmed.kept[1:] == tuple(range(20 - len(trimmed.kept) + 1, 20))
    assert trimmed.gaps == ((1, trimmed.kept[1]),)
    assert trimmed.messages[1] == ("user", f"[… {trimmed.kept[1] - 1} messages omitted …]")
    assert get_tokenizer("o200k_base").count(trimmed.text) == trimmed.tokens <= 300
    assert len(trimmed.dropped) == 20 - len(trimmed.kept)


def test_trim_history_keeps_everything_that_fits_without_markers() -> None:
    trimmed = trim_history(turns(3), max_tokens=5_000, tokenizer="o200k_base")
    assert trimmed.kept == (0, 1, 2)
    assert trimmed.gaps == ()
    assert [role for role, _ in trimmed.messages] == ["user", "assistant", "user"]


def test_trim_history_latest_turn_that_cannot_fit_raises_naming_it() -> None:
    with pytest.raises(
        ContextBudgetError,
        match=r"'history' needs \d+ tokens but only 5 are left: the latest message is always "
        r"sent, whole: user message \(history\[2\]\) of \d+ tokens \(\d+ with the "
        r"conversation frame and the gap marker before it\); raise the history max \(5\), or "
        r"shorten it",
    ):
        trim_history(turns(3), max_tokens=5, tokenizer="o200k_base")


def test_trim_history_latest_unit_error_names_the_tool_result_and_its_size() -> None:
    history = [
        Turn(role="user", content="Find it."),
        Turn(role="assistant", content='search({"q": "x"})', group="g"),
        Turn(role="tool", name="search", content="result " * 5_000, group="g"),
    ]
    with pytest.raises(ContextBudgetError, match=r"needs [\d,]+ tokens but only 1,000") as caught:
        trim_history(history, max_tokens=1_000, tokenizer="o200k_base")
    assert (
        "the latest 2 messages (one unit) are always sent, whole: assistant message "
        "(history[1]) of 9 tokens, tool result 'search' (history[2]) of 5,003 tokens"
    ) in str(caught.value)
    assert (caught.value.claimant, caught.value.left) == ("history", 1_000)


def test_trim_history_keeps_the_latest_turn_when_the_first_does_not_fit_beside_it() -> None:
    history = [Turn(role="user", content="first " * 300), *turns(6)[1:]]
    trimmed = trim_history(history, max_tokens=300, tokenizer="o200k_base")
    assert trimmed.kept == (1, 2, 3, 4, 5)
    assert trimmed.messages[0] == ("user", "[… 1 message omitted …]")


def test_trim_history_never_ends_with_a_gap_marker() -> None:
    for max_tokens in range(60, 400, 20):
        trimmed = trim_history(turns(12), max_tokens=max_tokens, tokenizer="o200k_base")
        assert trimmed.kept[-1] == 11
        assert trimmed.messages[-1][1].startswith("turn 11 ")


def test_trim_history_keeps_the_first_turn_when_it_fits_beside_the_latest() -> None:
    trimmed = trim_history(turns(12), max_tokens=120, tokenizer="o200k_base")
    assert (trimmed.kept[0], trimmed.kept[-1]) == (0, 11)


def agent_turns(rounds: int) -> list[Turn]:
    """A question, then per round a call and its two results (one group of three turns)."""
    history = [Turn(role="user", content="Find the refund rules.")]
    for k in range(rounds):
        history += [
            Turn(role="assistant", content=f"search(r{k})", group=f"g{k}"),
            Turn(role="tool", name="search", content=f"hit {k} " * 40, group=f"g{k}"),
            Turn(role="tool", name="lookup", content=f"doc {k} " * 40, group=f"g{k}"),
        ]
    return [*history, Turn(role="user", content="And for business accounts?")]


NO_CLEARING = HistoryOptions(clear_tool_results=False)


def test_trim_history_keeps_a_group_whole_or_leaves_it_out() -> None:
    trimmed = trim_history(
        agent_turns(6), max_tokens=400, tokenizer="o200k_base", history=NO_CLEARING
    )
    kept = set(trimmed.kept)
    for k in range(6):
        group = {1 + 3 * k, 2 + 3 * k, 3 + 3 * k}
        assert group <= kept or not group & kept


def test_trim_history_marker_counts_every_message_of_the_units_left_out() -> None:
    trimmed = trim_history(
        agent_turns(6), max_tokens=400, tokenizer="o200k_base", history=NO_CLEARING
    )
    ((start, stop),) = trimmed.gaps
    assert stop - start == 3 * len(range(start, stop, 3))
    assert trimmed.messages[1] == ("user", f"[… {stop - start} messages omitted …]")


def test_trim_history_within_budget_counts_its_text_exactly() -> None:
    trimmed = trim_history(agent_turns(6), max_tokens=400, tokenizer="o200k_base")
    assert get_tokenizer("o200k_base").count(trimmed.text) == trimmed.tokens <= 400


def test_trim_history_rejects_bad_input() -> None:
    with pytest.raises(InputError, match=r"turns\[0\] is a dict, expected ctxbudget.Turn"):
        trim_history([{"role": "user"}], max_tokens=10, tokenizer="o200k_base")  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"min_tokens \(20\) is greater than max_tokens \(10\)"):
        trim_history(turns(2), max_tokens=10, min_tokens=20, tokenizer="o200k_base")


def test_assembler_trim_history_defaults_to_the_history_allocation() -> None:
    budget = budget_for("history", 250, total=5_000)
    trimmed = ContextAssembler(tokenizer="o200k_base", budget=budget).trim_history(turns(30))
    assert trimmed.budget == 250
    assert trimmed.tokens <= 250


def test_assembler_trim_history_latest_turn_over_the_allocation_raises() -> None:
    budget = budget_for("history", 20, total=5_000)
    assembler = ContextAssembler(tokenizer="o200k_base", budget=budget)
    with pytest.raises(ContextBudgetError, match=r"only 20 are left: the latest message is"):
        assembler.trim_history(turns(3))


def attempt(turns: list[Turn], max_tokens: int) -> TrimmedHistory | ContextBudgetError:
    try:
        return trim_history(turns, max_tokens=max_tokens, tokenizer="o200k_base")
    except ContextBudgetError as error:
        return error


@given(st.lists(st.integers(0, 60), min_size=1, max_size=25), st.integers(0, 800))
def test_trimmed_history_is_within_budget_and_accounts_for_every_turn(
    sizes: list[int], max_tokens: int
) -> None:
    given_turns = [Turn(role="user", content=f"t{i} " + "word " * n) for i, n in enumerate(sizes)]
    trimmed = attempt(given_turns, max_tokens)
    if isinstance(trimmed, ContextBudgetError):
        # Only the latest turn's floor raises: it alone, framed (with a marker before it when
        # there are others, unless the others are cheaper), is over max_tokens.
        alone = trim_history(given_turns[-1:], max_tokens=10**6, tokenizer="o200k_base").tokens
        marker = 12 if len(sizes) > 1 else 0
        assert alone + marker + 2 > max_tokens
        assert f"(history[{len(sizes) - 1}])" in str(trimmed)
        return
    assert trimmed.tokens <= max_tokens
    assert len(trimmed.kept) + len(trimmed.dropped) == len(given_turns)
    assert trimmed.kept[-1] == len(given_turns) - 1
    missing = sum(stop - start for start, stop in trimmed.gaps)
    assert missing == len(given_turns) - len(trimmed.kept)
