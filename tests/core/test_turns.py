"""What a framework chat message costs as the text of its `Turn` (core/ctxbudget/_turns.py,
`message_text`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    ToolCall,
    Turn,
    get_tokenizer,
    message_text,
    neutralise_section,
    trim_history,
)


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
