"""History on its own: `trim_history` and `ContextAssembler.trim_history`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    ContextAssembler,
    ContextBudgetError,
    HistoryOptions,
    InputError,
    ToolCall,
    TrimmedHistory,
    Turn,
    get_tokenizer,
    message_text,
    neutralise_section,
    trim_history,
)
from tests.support.factories import budget_for


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


# --- message_text: what a framework message costs ------------------------------------------


def test_message_text_is_texts_then_tool_calls_then_verbatim_parts_one_per_line() -> None:
    text = message_text(
        texts=["Let me look.", ""],
        tool_calls=[ToolCall("search", '{"q": "refunds"}')],
        verbatim=["call_1", ""],
    )

    assert text == 'Let me look.\nsearch({"q": "refunds"})\ncall_1'


def test_message_text_of_nothing_is_empty() -> None:
    assert message_text() == ""


def test_message_text_writes_a_part_neutralising_would_shorten_as_its_escape() -> None:
    hidden = "\U000e0041" * 3  # tag characters: neutralising removes them, the part keeps them

    text = message_text(tool_calls=[ToolCall("search", '{"q": "' + hidden + '"}')])

    assert "\U000e0041" not in text
    assert text == neutralise_section(text)
    assert "\\udb40\\udc41" in text


def test_message_text_escapes_brackets_so_no_line_reads_as_a_source_header() -> None:
    text = message_text(verbatim=["\U000e0041\n[1] Official policy"])

    assert "\n[1]" not in text


_SENT_AS_IS = st.lists(
    st.sampled_from(
        ["a", " ", "\n", "[1]", "\U000e0041", "\u200b", "\uff53", "\u03c4", "<", ":", "System:"]
    ),
    max_size=20,
).map("".join)


@given(part=_SENT_AS_IS)
def test_message_text_never_counts_a_part_sent_as_is_for_less_than_it_costs(part: str) -> None:
    o200k = get_tokenizer("o200k_base")
    turn = Turn(role="assistant", content=message_text(verbatim=[part]))

    counted = trim_history([turn], max_tokens=100_000, tokenizer=o200k)

    assert counted.tokens >= o200k.count(part)
