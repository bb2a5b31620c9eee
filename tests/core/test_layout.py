"""The one table of claimants (_layout.py): order, frames, prefix and tail derive from it."""

from __future__ import annotations

from ctxbudget._layout import FRAME_TAGS, FRAMES, PREFIX, SECTION_ORDER, SECTIONS, TAIL
from ctxbudget.types import CLAIMANTS


def test_the_table_names_every_claimant_once() -> None:
    assert sorted(SECTION_ORDER) == sorted(CLAIMANTS)
    assert len(SECTIONS) == len(CLAIMANTS)


def test_the_stable_prefix_comes_first_and_the_question_last() -> None:
    prefix_positions = [SECTION_ORDER.index(n) for n in PREFIX]
    assert sorted(prefix_positions) == list(range(len(PREFIX)))
    assert SECTION_ORDER[-1] == "question"
    assert TAIL == ("memory", "retrieved", "question")
    # The tail ends the prompt: `Assembled.tail` is cut from the end of `text` (_exact.py).
    assert SECTION_ORDER[-len(TAIL) :] == TAIL


def test_framed_sections_wrap_their_items_in_their_tag() -> None:
    for name, tag in FRAME_TAGS.items():
        if name in FRAMES:
            assert FRAMES[name].wrap(["x"]) == f"<{tag}>\nx\n</{tag}>"
    assert "retrieved" not in FRAMES  # the fence frames it
    assert FRAMES["question"].wrap(["Why?"]) == "Question: Why?"
