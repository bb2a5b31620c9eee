"""History on its own: `trim_turns` and `ContextAssembler.trim_history`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    ContextAssembler,
    InputError,
    ToolCall,
    Turn,
    get_tokenizer,
    message_text,
    neutralise_section,
    trim_turns,
)
from tests.factories import budget_for


def turns(n: int, words: int = 30) -> list[Turn]:
    return [
        Turn(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " + "blah " * words)
        for i in range(n)
    ]


def test_trim_turns_keeps_first_and_most_recent_with_a_gap_marker() -> None:
    trimmed = trim_turns(turns(20), max_tokens=300, tokenizer="o200k_base")
    assert trimmed.kept[0] == 0
    assert trimmed.kept[1:] == tuple(range(20 - len(trimmed.kept) + 1, 20))
    assert trimmed.gaps == ((1, trimmed.kept[1]),)
    assert trimmed.messages[1] == ("user", f"[… {trimmed.kept[1] - 1} messages omitted …]")
    assert get_tokenizer("o200k_base").count(trimmed.text) == trimmed.tokens <= 300
    assert len(trimmed.dropped) == 20 - len(trimmed.kept)


def test_trim_turns_keeps_everything_that_fits_without_markers() -> None:
    trimmed = trim_turns(turns(3), max_tokens=5_000, tokenizer="o200k_base")
    assert trimmed.kept == (0, 1, 2)
    assert trimmed.gaps == ()
    assert [role for role, _ in trimmed.messages] == ["user", "assistant", "user"]


def test_trim_turns_with_no_room_keeps_nothing() -> None:
    trimmed = trim_turns(turns(3), max_tokens=5, tokenizer="o200k_base")
    assert (trimmed.kept, trimmed.messages, trimmed.text, trimmed.tokens) == ((), (), "", 0)
    assert len(trimmed.dropped) == 3


def test_trim_turns_rejects_bad_input() -> None:
    with pytest.raises(InputError, match=r"turns\[0\] is a dict, expected ctxbudget.Turn"):
        trim_turns([{"role": "user"}], max_tokens=10, tokenizer="o200k_base")  # type: ignore[list-item]
    with pytest.raises(InputError, match=r"min_tokens \(20\) is greater than max_tokens \(10\)"):
        trim_turns(turns(2), max_tokens=10, min_tokens=20, tokenizer="o200k_base")


def test_assembler_trim_history_defaults_to_the_history_allocation() -> None:
    budget = budget_for("history", 250, total=5_000)
    trimmed = ContextAssembler(tokenizer="o200k_base", budget=budget).trim_history(turns(30))
    assert trimmed.budget == 250
    assert trimmed.tokens <= 250


@given(st.lists(st.integers(0, 60), max_size=25), st.integers(0, 800))
def test_trimmed_history_is_within_budget_and_accounts_for_every_turn(
    sizes: list[int], max_tokens: int
) -> None:
    given_turns = [Turn(role="user", content=f"t{i} " + "word " * n) for i, n in enumerate(sizes)]
    trimmed = trim_turns(given_turns, max_tokens=max_tokens, tokenizer="o200k_base")
    assert trimmed.tokens <= max_tokens
    assert len(trimmed.kept) + len(trimmed.dropped) == len(given_turns)
    if trimmed.kept:
        first_dropped = any(d.id == "history[0]" for d in trimmed.dropped)
        assert (trimmed.kept[0] == 0) != first_dropped
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

    counted = trim_turns([turn], max_tokens=100_000, tokenizer=o200k)

    assert counted.tokens >= o200k.count(part)
