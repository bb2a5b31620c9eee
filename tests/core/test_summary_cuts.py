"""Where a summarised run ends across the requests of a growing conversation
(core/ctxbudget/_history.py `HistoryClaim._settle`, `HistoryOptions.summary_headroom`).

Sizes with the `fake_tokenizer`, checked by hand, for the chat "m0", "m1", ... (4 tokens a
line, 5 with its separator) trimmed to 100 with summary_tokens=10 (a gap reserves 24):
    the latest turn, the first and a gap cost 10 + 4 + 5 + 24 = 43, so 11 more turns fit.
From 19 turns on, the smallest cut leaves out history[1:n-12]. With summary_headroom=0.25
a move frees 25 tokens more, five turns: at 19 turns the run is history[1:12], and it stays
there (cached, no call) while the turns after it fit, for 6 requests; at 25 turns it moves
to history[1:18], then [1:24] and [1:30]: 4 summary calls in 40 requests, where the
smallest cut makes one on each of the 22 requests that leave turns out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import overload

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from pydantic import ValidationError

import ctxbudget._conversation
from ctxbudget import (
    CallableTokenizer,
    ContextAssembler,
    HistoryOptions,
    TrimmedHistory,
    Turn,
    trim_history,
)
from ctxbudget._conversation import SpanKeys, span_key
from ctxbudget._history import ROLE_LABELS
from ctxbudget._inputs import Role
from tests.support.factories import budget_for
from tests.support.tokenizers import fake_count

FAKE = CallableTokenizer(fake_count, name="fake-words")


def chat(n: int) -> list[Turn]:
    """The first `n` turns of the chat "m0", "m1", ..., alternating, from the user."""
    return [Turn(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(n)]


class Spy:
    """A summariser that records what it is given and answers "s1", "s2", ..."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, turns: Sequence[Turn]) -> str:
        self.calls.append([turn.content for turn in turns])
        return f"s{len(self.calls)}"


def assembler(
    summarize: Callable[[Sequence[Turn]], str | None] | None,
    *,
    headroom: float = 0.25,
    rolling: bool = False,
    max_tokens: int = 100,
) -> ContextAssembler:
    options = HistoryOptions(
        summarize=summarize,
        summary_tokens=10,
        summary_headroom=headroom,
        rolling_summaries=rolling,
    )
    return ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", max_tokens), history=options
    )


def grow(built: ContextAssembler, turns: int = 40) -> list[TrimmedHistory]:
    """The chat trimmed once per request, a turn longer each time."""
    return [built.trim_history(chat(n)) for n in range(1, turns + 1)]


def runs(trimmed: TrimmedHistory) -> list[tuple[int, int, str]]:
    return [(s.start, s.stop, s.outcome) for s in trimmed.summaries]


# --- a growing conversation ------------------------------------------------------------------


def test_growing_chat_calls_the_summariser_once_per_headroom_share() -> None:
    spy = Spy()
    grow(assembler(spy))
    assert [(call[0], call[-1]) for call in spy.calls] == [
        ("m1", "m11"),
        ("m1", "m17"),
        ("m1", "m23"),
        ("m1", "m29"),
    ]


def test_growing_chat_summary_calls_stay_within_the_headroom_bound() -> None:
    # Each move frees a quarter of 100, and the requests after the first gap (20..40) add
    # 21 turns of 5 tokens: at most 1 + 105 / 25 moves.
    spy = Spy()
    grow(assembler(spy))
    assert len(spy.calls) <= 1 + 21 * 5 / (0.25 * 100)


def test_growing_chat_holds_the_budget_on_every_request() -> None:
    for trimmed in grow(assembler(Spy())):
        assert trimmed.tokens == fake_count(trimmed.text) <= 100


def test_growing_chat_keeps_the_first_and_the_latest_turn_on_every_request() -> None:
    for n, trimmed in enumerate(grow(assembler(Spy())), 1):
        assert (trimmed.kept[0], trimmed.kept[-1]) == (0, n - 1)


def test_growing_chat_without_headroom_calls_the_summariser_on_every_request() -> None:
    spy = Spy()
    trims = grow(assembler(spy, headroom=0))
    assert len(spy.calls) == sum(bool(t.summaries) for t in trims) == 22
    assert [runs(t) for t in trims[18:20]] == [[(1, 7, "summarized")], [(1, 8, "summarized")]]


def test_growing_chat_kept_turns_do_not_depend_on_the_summary_text() -> None:
    short = grow(assembler(lambda turns: "s"))
    longer = grow(assembler(lambda turns: "a longer summary"))
    assert [t.kept for t in short] == [t.kept for t in longer]


def test_summary_headroom_without_a_summariser_changes_nothing() -> None:
    with_headroom = assembler(None, headroom=0.5).trim_history(chat(30))
    without = assembler(None, headroom=0).trim_history(chat(30))
    assert with_headroom == without


# --- the sticky cut, and when it moves -------------------------------------------------------


def test_sticky_cut_is_used_while_the_turns_after_it_fit() -> None:
    spy = Spy()
    built = assembler(spy)
    built.trim_history(chat(19))
    second = built.trim_history(chat(20))
    assert (runs(second), len(spy.calls)) == ([(1, 12, "cached")], 1)
    assert second.kept == (0, *range(12, 20))


def test_cut_moves_when_the_turns_after_it_no_longer_fit() -> None:
    spy = Spy()
    built = assembler(spy)
    grow(built, 24)
    moved = built.trim_history(chat(25))
    assert runs(moved) == [(1, 18, "summarized")]
    assert spy.calls[-1] == [f"m{i}" for i in range(1, 18)]


def test_moved_cut_leaves_out_turns_worth_the_headroom_share() -> None:
    # The smallest cut at 19 turns is history[1:7]; a quarter of 100 is five 5-token turns.
    smallest = assembler(Spy(), headroom=0).trim_history(chat(19))
    moved = assembler(Spy()).trim_history(chat(19))
    assert (smallest.gaps, moved.gaps) == (((1, 7),), ((1, 12),))


def test_cut_never_passes_the_latest_unit() -> None:
    # Ten turns in 50 (test_summaries.py): m0, the run, m8 and m9 at the smallest cut; half
    # of 50 would need five more turns, and only m8 is left to give.
    trimmed = assembler(Spy(), headroom=0.5, max_tokens=50).trim_history(chat(10))
    assert trimmed.kept == (0, 9)
    assert trimmed.tokens <= 50


def test_sticky_cut_is_the_earliest_cached_one_that_fits() -> None:
    # After 40 requests history[1:12], [1:18], [1:24] and [1:30] are cached; with 130 tokens
    # the smallest cut is history[1:22] and a move would go to [1:29].
    spy = Spy()
    built = assembler(spy)
    grow(built)
    wider = built.trim_history(chat(40), max_tokens=130)
    assert (runs(wider), len(spy.calls)) == ([(1, 24, "cached")], 4)


def test_cached_cut_further_than_a_move_would_go_is_not_taken() -> None:
    # At 40 turns in 100 the run is history[1:33]; in 150 the smallest cut is [1:18] and a
    # move goes to [1:26]: the cached run would leave 7 turns out for nothing.
    spy = Spy()
    built = assembler(spy)
    built.trim_history(chat(40))
    wider = built.trim_history(chat(40), max_tokens=150)
    assert runs(wider) == [(1, 26, "summarized")]
    assert len(spy.calls) == 2


def test_sticky_cut_holds_when_a_question_follows() -> None:
    spy = Spy()
    built = assembler(spy)
    for n in range(1, 41):
        result = built.assemble(question="And now?", history=chat(n))
        assert result.report.total == fake_count(result.text)
        assert result.report.sizes["history"] <= 100
    assert len(spy.calls) <= 1 + 21 * 5 / (0.25 * 100)


def test_history_options_refuse_a_summary_headroom_of_one() -> None:
    with pytest.raises(ValidationError, match="summary_headroom\n  Input should be less than 1"):
        HistoryOptions(summary_headroom=1)


def test_history_options_refuse_a_negative_summary_headroom() -> None:
    with pytest.raises(
        ValidationError, match="summary_headroom\n  Input should be greater than or equal to 0"
    ):
        HistoryOptions(summary_headroom=-0.1)


# --- rolling summaries -----------------------------------------------------------------------


def test_rolling_summary_gets_the_earlier_summary_then_the_new_turns() -> None:
    spy = Spy()
    grow(assembler(spy, rolling=True), 25)
    assert spy.calls == [
        [f"m{i}" for i in range(1, 12)],
        ["[Summary of 11 earlier messages: s1]", *(f"m{i}" for i in range(12, 18))],
    ]


def test_rolling_summary_earlier_summary_is_a_user_turn() -> None:
    given: list[Sequence[Turn]] = []

    def summarize(turns: Sequence[Turn]) -> str:
        given.append(turns)
        return "s"

    grow(assembler(summarize, rolling=True), 25)
    assert given[1][0] == Turn(role="user", content="[Summary of 11 earlier messages: s]")


def test_rolling_summary_is_cached_for_its_whole_run() -> None:
    # The cut is looked up by the turns it covers: the next request finds history[1:18].
    spy = Spy()
    built = assembler(spy, rolling=True)
    grow(built, 25)
    following = built.trim_history(chat(26))
    assert (runs(following), len(spy.calls)) == ([(1, 18, "cached")], 2)
    assert following.messages[1] == ("user", "[Summary of 17 earlier messages: s2]")


def test_summaries_without_rolling_get_every_turn_of_the_run() -> None:
    spy = Spy()
    grow(assembler(spy), 25)
    assert spy.calls[1] == [f"m{i}" for i in range(1, 18)]


# --- the two-pass pattern across moves -------------------------------------------------------


async def summarise_later(turns: Sequence[Turn]) -> str:
    """An async summariser, as an LLM client's would be."""
    await asyncio.sleep(0)
    return f"{len(turns)} turns"


async def two_passes_by_run(
    built: ContextAssembler, turns: list[Turn]
) -> tuple[TrimmedHistory, TrimmedHistory]:
    """docs/agents.md, "Summaries": the runs the first pass reports are summarised, then put in."""
    first = built.trim_history(turns, summarize=lambda covered: None)
    pending = [s for s in first.summaries if s.outcome == "none"]
    texts = {
        tuple(turns[s.start : s.stop]): await summarise_later(turns[s.start : s.stop])
        for s in pending
    }
    second = built.trim_history(turns, summarize=lambda covered: texts.get(tuple(covered)))
    return first, second


async def two_passes_by_ask(
    built: ContextAssembler, turns: list[Turn]
) -> tuple[TrimmedHistory, TrimmedHistory]:
    """docs/agents.md, "Summaries", with rolling summaries: what the first pass asked is
    summarised."""
    asked: list[tuple[Turn, ...]] = []

    def record(covered: Sequence[Turn]) -> None:
        asked.append(tuple(covered))

    first = built.trim_history(turns, summarize=record)
    texts = {covered: await summarise_later(covered) for covered in asked}
    second = built.trim_history(turns, summarize=lambda covered: texts.get(tuple(covered)))
    return first, second


def test_two_pass_summaries_keep_the_same_turns_across_moves() -> None:
    built = assembler(None)
    for n in range(1, 41):
        first, second = asyncio.run(two_passes_by_run(built, chat(n)))
        assert first.kept == second.kept
        assert {outcome for _, _, outcome in runs(second)} <= {"summarized", "cached"}


def test_two_pass_summaries_are_asked_once_per_move() -> None:
    built = assembler(None)
    summarised = [runs(asyncio.run(two_passes_by_run(built, chat(n)))[1]) for n in range(1, 41)]
    assert [run for request in summarised for run in request if run[2] == "summarized"] == [
        (1, 12, "summarized"),
        (1, 18, "summarized"),
        (1, 24, "summarized"),
        (1, 30, "summarized"),
    ]


def test_two_pass_rolling_summaries_stand_in_the_second_assembly() -> None:
    built = assembler(None, rolling=True)
    for n in range(1, 26):
        first, second = asyncio.run(two_passes_by_ask(built, chat(n)))
        assert first.kept == second.kept
    # At 25 turns the run moved to history[1:18]: the earlier summary and six new turns.
    assert second.messages[1] == ("user", "[Summary of 17 earlier messages: 7 turns]")


# --- keys of every cut in one pass -----------------------------------------------------------


class Counted(Sequence[Turn]):
    """Turns that count how many times one of them is read."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.reads = 0

    def __len__(self) -> int:
        return len(self.turns)

    @overload
    def __getitem__(self, index: int) -> Turn: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Turn]: ...
    def __getitem__(self, index: int | slice) -> Turn | Sequence[Turn]:
        got = self.turns[index]
        self.reads += len(got) if isinstance(got, list) else 1
        return got


@given(
    sizes=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    start=st.integers(0, 11),
)
def test_span_keys_agree_with_span_key(sizes: list[int], start: int) -> None:
    turns = [Turn(role="user", content="w " * size + str(i)) for i, size in enumerate(sizes)]
    start = min(start, len(turns) - 1)
    stops = list(range(len(turns) + 1))
    keys = SpanKeys(turns, start, stops)
    for stop in range(start + 1, len(turns) + 1):
        assert keys.key(stop) == span_key(turns[start:stop])


def test_span_keys_read_each_turn_once() -> None:
    turns = Counted(chat(50))
    keys = SpanKeys(turns, 1, list(range(51)))
    for stop in (5, 5, 20, 37, 50):
        keys.key(stop)
    assert turns.reads == 49


def test_summary_cut_hashes_each_turn_at_most_once_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fed: list[Turn] = []
    feed = ctxbudget._conversation._feed

    def counting(digest: object, turn: Turn) -> None:
        fed.append(turn)
        feed(digest, turn)  # type: ignore[arg-type]

    built = assembler(Spy(), rolling=True)
    built.trim_history(chat(399))
    monkeypatch.setattr(ctxbudget._conversation, "_feed", counting)
    built.trim_history(chat(400))
    assert len(fed) <= 400


# --- the property ----------------------------------------------------------------------------


def unit_cost(unit: Sequence[Turn]) -> int:
    """What a unit adds to the section: its lines, the separators between them and one
    before it."""
    lines = [f"{ROLE_LABELS[turn.role]}: {turn.content}" for turn in unit]
    return fake_count("\n\n".join(lines)) + 1


@st.composite
def growing_chats(draw: st.DrawFn) -> list[list[Turn]]:
    """Units of a chat in the order a session adds them: a user or assistant turn of 1-12
    words, or a tool call (an assistant turn and 1-2 results of 1-8 words)."""
    units: list[list[Turn]] = []
    for u in range(draw(st.integers(2, 40))):
        if draw(st.integers(0, 3)) == 0:
            group = f"g{u}"
            call = Turn(role="assistant", content=f"call c{u}", group=group)
            results = [
                Turn(role="tool", content=" ".join(["r"] * draw(st.integers(1, 8))), group=group)
                for _ in range(draw(st.integers(1, 2)))
            ]
            units.append([call, *results])
        else:
            role: Role = "user" if u % 2 == 0 else "assistant"
            units.append([Turn(role=role, content=" ".join(["w"] * draw(st.integers(1, 12))))])
    return units


@given(
    units=growing_chats(),
    max_tokens=st.integers(250, 500),
    headroom=st.floats(0.05, 0.5),
)
def test_growing_chat_summary_calls_within_headroom_bound_with_any_sizes(
    units: list[list[Turn]], max_tokens: int, headroom: float
) -> None:
    # After a move what is kept leaves headroom * max_tokens free, so the next move waits
    # until the turns added since cost more than that (no unit here is large enough to
    # leave a move short of the latest unit).
    spy = Spy()
    options = HistoryOptions(
        summarize=spy, summary_tokens=10, summary_headroom=headroom, clear_tool_results=False
    )
    built = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", max_tokens), history=options
    )
    turns: list[Turn] = []
    added_after_first = 0
    summarised = False
    for unit in units:
        turns += unit
        if summarised:
            added_after_first += unit_cost(unit)
        trimmed = built.trim_history(turns)
        assert trimmed.tokens == fake_count(trimmed.text) <= max_tokens
        assert trimmed.kept[0] == 0
        assert trimmed.kept[-len(unit) :] == tuple(range(len(turns) - len(unit), len(turns)))
        summarised = summarised or bool(trimmed.summaries)
    event(f"{min(len(spy.calls), 3)} summary calls")
    assert len(spy.calls) <= 1 + added_after_first / (headroom * max_tokens)


def test_trim_history_leaves_out_the_fewest_turns_whatever_the_headroom() -> None:
    """No summary outlives a `trim_history` call, so moving a run's end further would only
    cost turns: the headroom does not apply there."""
    turns = chat(19)
    options = HistoryOptions(summarize=Spy(), summary_tokens=10, summary_headroom=0.9)
    trimmed = trim_history(turns, max_tokens=100, tokenizer=FAKE, history=options)
    assert trimmed.summaries[0].stop == 7  # history[1:7], as with summary_headroom=0
