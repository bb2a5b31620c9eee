"""Tool-result clearing: old tool results give up their content before whole turns go
(core/ctxbudget/_history.py, core/ctxbudget/_conversation.py).

Sizes with the `fake_tokenizer` (one token per word, punctuation mark or whitespace run),
checked by hand, for `agent()` below (keep_tool_results=1 unless a test says otherwise):
    "User: q0", "Assistant: call0"                       4 tokens a line
    "Tool: w0 ... w39"                                   82
    "Tool: [tool result cleared: search, 82 tokens]"     18 (clearing saves 64)
    a call and its result, one unit: 4 + 1 + 82 = 87; cleared: 4 + 1 + 18 = 23
    frame 10, separator 1, a gap marker and its separator 12
so the whole history (q0, three calls with their results, q1) costs
10 + 4 + 3 * 87 + 4 + 4 = 283; with the oldest result cleared 219, with two 155.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxbudget import (
    Budget,
    CallableTokenizer,
    ContextAssembler,
    HistoryOptions,
    Turn,
    get_tokenizer,
    trim_history,
)
from ctxbudget._history import cleared_placeholder
from tests.support.factories import budget_for
from tests.support.tokenizers import fake_count

FAKE = CallableTokenizer(fake_count, name="fake-words")
KEEP_ONE = HistoryOptions(keep_tool_results=1)


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def agent(names: tuple[str | None, ...] = ("search", "search", "search")) -> list[Turn]:
    """A question, one tool call with its 82-token result per name (one group each), and
    the next question: the latest turn."""
    turns = [Turn(role="user", content="q0")]
    for k, name in enumerate(names):
        turns.append(Turn(role="assistant", content=f"call{k}", group=f"g{k}"))
        turns.append(Turn(role="tool", content=words(40), group=f"g{k}", name=name))
    turns.append(Turn(role="user", content="q1"))
    return turns


def trim(turns: list[Turn], max_tokens: int, options: HistoryOptions = KEEP_ONE) -> object:
    return trim_history(turns, max_tokens=max_tokens, tokenizer=FAKE, history=options)


def shown(turns: list[Turn], max_tokens: int, options: HistoryOptions = KEEP_ONE) -> list[str]:
    result = trim_history(turns, max_tokens=max_tokens, tokenizer=FAKE, history=options)
    return [content for _, content in result.messages]


PLACEHOLDER = cleared_placeholder("search", 82)


# --- clearing comes first ------------------------------------------------------------------


def test_clearing_everything_fits_clears_nothing() -> None:
    result = trim_history(agent(), max_tokens=283, tokenizer=FAKE, history=KEEP_ONE)
    assert (result.cleared, result.gaps) == ((), ())


def test_clearing_clears_the_oldest_result_when_that_is_enough() -> None:
    result = trim_history(agent(), max_tokens=250, tokenizer=FAKE, history=KEEP_ONE)
    assert (result.cleared, result.kept) == ((2,), tuple(range(8)))


def test_clearing_clears_as_many_results_as_the_space_needs() -> None:
    result = trim_history(agent(), max_tokens=200, tokenizer=FAKE, history=KEEP_ONE)
    assert (result.cleared, result.gaps) == ((2, 4), ())


def test_clearing_shows_the_placeholder_in_the_turn() -> None:
    assert shown(agent(), 250)[2] == "[tool result cleared: search, 82 tokens]"


def test_clearing_placeholder_without_a_tool_name_gives_the_size() -> None:
    assert shown(agent((None, None, None)), 250)[2] == "[tool result cleared: 82 tokens]"


def test_clearing_keeps_the_call_of_a_cleared_result() -> None:
    result = trim_history(agent(), max_tokens=200, tokenizer=FAKE, history=KEEP_ONE)
    assert result.messages[1:3] == (("assistant", "call0"), ("tool", PLACEHOLDER))


def test_clearing_counts_the_placeholder_exactly() -> None:
    result = trim_history(agent(), max_tokens=200, tokenizer=FAKE, history=KEEP_ONE)
    assert result.tokens == fake_count(result.text) <= 200


# --- the options ---------------------------------------------------------------------------


def chatty() -> list[Turn]:
    """q0, two 62-token chat turns, three calls with their results, q1: 409 tokens whole."""
    turns = agent()
    chat = [Turn(role="assistant", content=words(30)), Turn(role="user", content=words(30))]
    return [turns[0], *chat, *turns[1:]]


def test_clearing_recent_results_stay_whole_while_older_turns_can_go() -> None:
    # 300, keep_tool_results=3 (the default): the three results fit whole if the chat goes.
    result = trim_history(chatty(), max_tokens=300, tokenizer=FAKE)
    assert (result.cleared, result.gaps) == ((), ((1, 3),))


def test_clearing_older_results_go_before_any_turn() -> None:
    # 300, keep_tool_results=1: clearing the two older results (128) makes everything fit.
    result = trim_history(chatty(), max_tokens=300, tokenizer=FAKE, history=KEEP_ONE)
    assert (result.cleared, result.gaps) == ((4, 6), ())


def test_clearing_keep_tool_results_leaves_that_many_whole() -> None:
    options = HistoryOptions(keep_tool_results=2)
    result = trim_history(agent(), max_tokens=250, tokenizer=FAKE, history=options)
    assert (result.cleared, result.gaps) == ((2,), ())


def test_clearing_clear_at_least_clears_more_than_the_space_needs() -> None:
    options = HistoryOptions(keep_tool_results=1, clear_at_least=100)
    result = trim_history(agent(), max_tokens=250, tokenizer=FAKE, history=options)
    assert result.cleared == (2, 4)


def test_clearing_clear_at_least_is_not_a_reason_to_clear_when_everything_fits() -> None:
    options = HistoryOptions(keep_tool_results=0, clear_at_least=100)
    assert trim_history(agent(), max_tokens=283, tokenizer=FAKE, history=options).cleared == ()


def test_clearing_never_clears_a_listed_tool() -> None:
    options = HistoryOptions(keep_tool_results=1, never_clear=frozenset({"lookup"}))
    turns = agent(("lookup", "search", "search"))
    result = trim_history(turns, max_tokens=250, tokenizer=FAKE, history=options)
    assert result.cleared == (4,)


def test_clearing_off_drops_whole_units_instead() -> None:
    options = HistoryOptions(clear_tool_results=False, keep_tool_results=1)
    result = trim_history(agent(), max_tokens=250, tokenizer=FAKE, history=options)
    assert result.cleared == ()
    assert result.gaps == ((1, 3),)


def test_clearing_leaves_a_result_shorter_than_its_placeholder_whole() -> None:
    # 60: q1, q0 and the call with its 4-token result fit (41); the 62-token chat does not.
    turns = [
        Turn(role="user", content="q0"),
        Turn(role="assistant", content=words(30)),
        Turn(role="assistant", content="call0", group="g0"),
        Turn(role="tool", content="ok", group="g0", name="search"),
        Turn(role="user", content="q1"),
    ]
    options = HistoryOptions(keep_tool_results=0)
    result = trim_history(turns, max_tokens=60, tokenizer=FAKE, history=options)
    assert (result.kept, result.cleared) == ((0, 2, 3, 4), ())
    assert result.messages[3] == ("tool", "ok")


def test_clearing_never_clears_the_latest_units_results() -> None:
    turns = [*agent()[:-1]]  # the conversation ends with the last call and its result
    options = HistoryOptions(keep_tool_results=0)
    result = trim_history(turns, max_tokens=180, tokenizer=FAKE, history=options)
    assert result.cleared == (2, 4)
    assert result.messages[-1] == ("tool", words(40))


# --- then whole units go -------------------------------------------------------------------


def test_clearing_not_enough_drops_middle_units_of_cleared_results() -> None:
    # 150: everything with two results cleared costs 155; the oldest unit goes.
    result = trim_history(agent(), max_tokens=150, tokenizer=FAKE, history=KEEP_ONE)
    assert (result.kept, result.gaps, result.cleared) == ((0, 3, 4, 5, 6, 7), ((1, 3),), (4,))


def test_clearing_not_enough_keeps_a_recent_result_whole_while_it_fits() -> None:
    result = trim_history(agent(), max_tokens=150, tokenizer=FAKE, history=KEEP_ONE)
    assert result.messages[-2] == ("tool", words(40))


def test_clearing_recent_result_that_cannot_fit_whole_is_cleared_not_dropped() -> None:
    # 100: the last call's 87-token unit does not fit beside q0 and q1; cleared, all fit (91).
    result = trim_history(agent(), max_tokens=100, tokenizer=FAKE, history=KEEP_ONE)
    assert (result.kept, result.cleared) == (tuple(range(8)), (2, 4, 6))


# --- the report and the result -------------------------------------------------------------


def assemble_agent(max_tokens: int, options: HistoryOptions = KEEP_ONE) -> object:
    assembler = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", max_tokens), history=options
    )
    return assembler.assemble(history=agent())


def test_clearing_report_lists_cleared_results_with_their_size() -> None:
    assembler = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", 200), history=KEEP_ONE
    )
    report = assembler.assemble(history=agent()).report
    assert [(d.id, d.reason, d.tokens) for d in report.cleared] == [
        ("history[2]", "cleared", 82),
        ("history[4]", "cleared", 82),
    ]


def test_clearing_report_does_not_count_a_cleared_turn_as_dropped() -> None:
    assembler = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", 200), history=KEEP_ONE
    )
    assert assembler.assemble(history=agent()).report.dropped == ()


def test_clearing_assembled_names_the_cleared_turns_and_where_they_stand() -> None:
    assembler = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", 200), history=KEEP_ONE
    )
    result = assembler.assemble(history=agent())
    assert result.cleared == (2, 4)
    assert result.history_turns == tuple(range(8))
    assert result.history[2] == ("tool", PLACEHOLDER)


def test_clearing_trim_history_clears_as_assemble_does() -> None:
    assembler = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", 200), history=KEEP_ONE
    )
    assert assembler.trim_history(agent()).cleared == assembler.assemble(history=agent()).cleared


def test_clearing_applies_when_a_question_follows_the_history() -> None:
    assembler = ContextAssembler(
        tokenizer=FAKE, budget=budget_for("history", 250), history=KEEP_ONE
    )
    assert assembler.assemble(question="And?", history=agent()).cleared == (2,)


def test_clearing_keeps_an_agent_prompt_within_budget_with_o200k() -> None:
    o200k = get_tokenizer("o200k_base")
    turns = [Turn(role="user", content="Find the refund rules.")]
    for k in range(8):
        turns.append(Turn(role="assistant", content=f'search({{"q": "r{k}"}})', group=f"g{k}"))
        turns.append(Turn(role="tool", name="search", content=words(300, f"r{k}x"), group=f"g{k}"))
    turns.append(Turn(role="user", content="So how long?"))
    budget = Budget.for_model("gpt-4o", reserve_output=4_000).model_copy(update={"total": 6_000})
    result = ContextAssembler(tokenizer=o200k, budget=budget).assemble(history=turns)
    assert result.report.total == o200k.count(result.text) <= result.report.budget
    assert result.cleared
    assert result.history[0] == ("user", "Find the refund rules.")


# --- bad options ---------------------------------------------------------------------------


def test_history_options_negative_keep_is_an_error() -> None:
    with pytest.raises(ValidationError, match="keep_tool_results\n  Input should be greater"):
        HistoryOptions(keep_tool_results=-1)


def test_history_options_unknown_field_is_an_error() -> None:
    with pytest.raises(ValidationError, match="keep_results\n  Extra inputs are not permitted"):
        HistoryOptions(keep_results=2)  # type: ignore[call-arg]


def test_assembler_history_must_be_history_options() -> None:
    with pytest.raises(TypeError, match="history must be a HistoryOptions, not dict"):
        ContextAssembler(tokenizer=FAKE, history={"keep_tool_results": 1})  # type: ignore[arg-type]


def test_trim_history_history_must_be_history_options() -> None:
    with pytest.raises(TypeError, match="history must be a HistoryOptions, not dict"):
        trim_history(agent(), max_tokens=100, tokenizer=FAKE, history={})  # type: ignore[arg-type]
