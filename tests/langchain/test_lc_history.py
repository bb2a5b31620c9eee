"""trim_history on LangChain messages: whole turns, tool calls with their results, system kept."""

from __future__ import annotations

import copy
import re

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ctxbudget import ContextBudgetError, InputError, Turn, trim_turns
from langchain_ctxbudget import history_trimmer, trim_history
from tests.langchain.test_lc_runnable import assert_tool_calls_answered, history_with_tools

GAP = re.compile(r"\[… (\d+) messages? omitted …\]")


def long_history(turns: int) -> list[BaseMessage]:
    return [SystemMessage("You are the returns desk of Acme."), *history_with_tools(turns)]


def markers(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if GAP.fullmatch(str(m.content))]


def test_trim_history_keeps_everything_that_fits() -> None:
    history = long_history(3)
    assert trim_history(history, max_tokens=10_000, tokenizer="gpt-4o") == history


def test_trim_history_200_turns_keeps_first_human_and_recent_suffix() -> None:
    history = long_history(200)
    kept = trim_history(history, max_tokens=400, tokenizer="gpt-4o")
    assert kept[0] == history[0]
    assert kept[1] == history[1]  # the first human turn
    assert GAP.fullmatch(str(kept[2].content))
    assert kept[-1] == history[-1]
    suffix = kept[3:]
    assert suffix == history[len(history) - len(suffix) :]


def test_trim_history_200_turns_fits_the_budget() -> None:
    history = long_history(200)
    kept = trim_history(history, max_tokens=400, tokenizer="gpt-4o")
    turns = [
        Turn(role="user", content=str(m.text)) for m in kept if not isinstance(m, SystemMessage)
    ]
    system = [
        Turn(role="system", content=str(m.text)) for m in kept if isinstance(m, SystemMessage)
    ]
    total = (
        trim_turns(system, max_tokens=10_000, tokenizer="gpt-4o").tokens
        + trim_turns(turns, max_tokens=10_000, tokenizer="gpt-4o").tokens
    )
    assert 300 < total <= 400


def test_trim_history_never_separates_tool_calls_from_results() -> None:
    history = long_history(60)
    for max_tokens in range(60, 400, 7):
        assert_tool_calls_answered(trim_history(history, max_tokens=max_tokens, tokenizer="gpt-4o"))


def test_trim_history_one_marker_per_gap() -> None:
    kept = trim_history(long_history(200), max_tokens=400, tokenizer="gpt-4o")
    assert len(markers(kept)) == 1


def test_trim_history_keeps_every_system_message_in_place() -> None:
    history = long_history(40)
    history.insert(30, SystemMessage("Escalated to a supervisor."))
    kept = trim_history(history, max_tokens=250, tokenizer="gpt-4o")
    systems = [m for m in kept if isinstance(m, SystemMessage)]
    assert systems == [history[0], history[30]]
    assert kept.index(history[30]) > kept.index(history[1])


def test_trim_history_system_messages_too_large_is_an_error() -> None:
    history = [SystemMessage("Policy. " * 200), HumanMessage("Hi")]
    with pytest.raises(ContextBudgetError, match=r"'history' needs .* tokens but only 50 are left"):
        trim_history(history, max_tokens=50, tokenizer="gpt-4o")


def test_trim_history_greeting_before_first_human_stays_with_it() -> None:
    history = [AIMessage("Hello! How can I help?"), *history_with_tools(30)]
    kept = trim_history(history, max_tokens=200, tokenizer="gpt-4o")
    assert kept[:2] == history[:2]
    assert GAP.fullmatch(str(kept[2].content))


def test_trim_history_does_not_change_its_input() -> None:
    history = long_history(50)
    before = copy.deepcopy(history)
    trim_history(history, max_tokens=200, tokenizer="gpt-4o")
    assert history == before


def test_trim_history_empty() -> None:
    assert trim_history([], max_tokens=100, tokenizer="gpt-4o") == []


def test_trim_history_latest_message_that_cannot_fit_raises_naming_it() -> None:
    history = [SystemMessage("Be kind."), HumanMessage("A long question. " * 50)]
    with pytest.raises(ContextBudgetError, match=r"user message \(messages\[1\]\) of 203 tokens"):
        trim_history(history, max_tokens=40, tokenizer="gpt-4o")


def test_trim_history_counts_tool_call_arguments() -> None:
    big = {"name": "search", "args": {"query": "refund " * 300}, "id": "c1"}
    history = [
        HumanMessage("First."),
        AIMessage("", tool_calls=[big]),
        ToolMessage("no results", tool_call_id="c1"),
        AIMessage("Nothing found."),
        HumanMessage("Last."),
    ]
    kept = trim_history(history, max_tokens=100, tokenizer="gpt-4o")
    assert history[1] not in kept
    assert history[2] not in kept
    assert kept[-1] == history[-1]


def test_trim_history_chat_message_roles() -> None:
    history = [ChatMessage(role="user", content="Hi"), ChatMessage(role="assistant", content="Yo")]
    assert trim_history(history, max_tokens=100, tokenizer="gpt-4o") == history


def test_trim_history_unknown_role_is_an_error() -> None:
    history = [HumanMessage("Hi"), ChatMessage(role="narrator", content="Meanwhile...")]
    with pytest.raises(InputError, match=r"messages\[1\] is a ChatMessage of role 'narrator'"):
        trim_history(history, max_tokens=100, tokenizer="gpt-4o")


def test_trim_history_not_a_list_is_an_error() -> None:
    with pytest.raises(InputError, match="messages must be a list of langchain_core messages"):
        trim_history("hi", max_tokens=100, tokenizer="gpt-4o")  # type: ignore[arg-type]


def test_trim_history_invalid_text_is_an_error_naming_the_message() -> None:
    with pytest.raises(InputError, match=r"messages\[1\] content: .*surrogate"):
        trim_history(
            [HumanMessage("a"), AIMessage("bad \ud800")], max_tokens=100, tokenizer="gpt-4o"
        )


def test_history_trimmer_is_a_runnable() -> None:
    history = long_history(200)
    trimmer = history_trimmer(max_tokens=400, tokenizer="gpt-4o")
    assert trimmer.invoke(history) == trim_history(history, max_tokens=400, tokenizer="gpt-4o")
    assert trimmer.get_name() == "trim_history"


def test_trim_history_counts_only_turns_that_can_fit() -> None:
    from ctxbudget import CallableTokenizer

    calls = 0

    def count(text: str) -> int:
        nonlocal calls
        calls += 1
        return len(text.split())

    tokenizer = CallableTokenizer(count, name="words")
    trim_history(long_history(200), max_tokens=300, tokenizer=tokenizer)
    small = calls
    calls = 0
    trim_history(long_history(2_000), max_tokens=300, tokenizer=tokenizer)
    assert calls <= 2 * small
