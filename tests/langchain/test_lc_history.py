"""trim_history on LangChain messages (docs/agents.md, "In LangChain"): the latest message always,
the first human turn, whole tool-call groups, exact gap markers, system messages first,
valid requests, and what `trim_messages` also accepts as input."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import ChatPromptValue

from ctxbudget import (
    ContextBudgetError,
    HistoryOptions,
    InputError,
    TokenizerError,
    get_tokenizer,
)
from langchain_ctxbudget import history_trimmer, trim_history
from tests.support.langchain_agent_oracle import (
    START,
    assert_tool_calls_answered,
    check_anthropic,
    check_history,
    check_openai,
)
from tests.support.langchain_agents import history_with_tools
from tests.support.langchain_stack import RecordingChatModel, received_tokens

GAP = re.compile(r"\[… (\d+) messages? omitted …\]")
O200K = get_tokenizer("o200k_base")
WHOLE_TURNS = HistoryOptions(clear_tool_results=False)
"""Whole turns only: tool results are not cleared first."""


def long_history(turns: int) -> list[BaseMessage]:
    return [SystemMessage("You are the returns desk of Acme."), *history_with_tools(turns)]


def with_ids(messages: list[BaseMessage]) -> list[BaseMessage]:
    """`messages` with an id each (copies), so what was sent can be matched to them."""
    return [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(messages)]


def markers(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if GAP.fullmatch(str(m.content))]


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


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
    kept = trim_history(long_history(200), max_tokens=400, tokenizer="gpt-4o")
    assert 250 < received_tokens(kept) <= 400


def test_trim_history_never_separates_tool_calls_from_results() -> None:
    history = long_history(60)
    for max_tokens in range(60, 400, 7):
        assert_tool_calls_answered(trim_history(history, max_tokens=max_tokens, tokenizer="gpt-4o"))


def test_trim_history_one_marker_per_gap() -> None:
    kept = trim_history(long_history(200), max_tokens=400, tokenizer="gpt-4o")
    assert len(markers(kept)) == 1


def test_trim_history_does_not_change_its_input() -> None:
    history = long_history(50)
    before = copy.deepcopy(history)
    trim_history(history, max_tokens=200, tokenizer="gpt-4o")
    assert history == before


def test_trim_history_empty() -> None:
    assert trim_history([], max_tokens=100, tokenizer="gpt-4o") == []


def test_trim_history_system_messages_alone() -> None:
    history = [SystemMessage("Be kind.")]
    assert trim_history(history, max_tokens=100, tokenizer="gpt-4o") == history


# --- item 2: the latest message is always kept -------------------------------------------


def test_trim_history_keeps_a_latest_message_that_fits_only_with_a_marker() -> None:
    history = with_ids([*history_with_tools(20), HumanMessage("Last: " + words("w", 100))])
    kept = trim_history(history, max_tokens=260, tokenizer="gpt-4o")
    assert kept[-1] == history[-1]
    assert len(markers(kept)) == 1
    check_history(history, kept)


def test_trim_history_latest_message_that_cannot_fit_raises_naming_it() -> None:
    history = [SystemMessage("Be kind."), HumanMessage("A long question. " * 50)]
    with pytest.raises(ContextBudgetError, match=r"user message \(messages\[1\]\) of 203 tokens"):
        trim_history(history, max_tokens=40, tokenizer="gpt-4o")


def test_trim_history_latest_tool_result_that_cannot_fit_names_it_and_its_size() -> None:
    call = {"name": "lookup_order", "args": {"id": "17"}, "id": "c1"}
    history = [
        HumanMessage("Where is order 17?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage(words("w", 500), tool_call_id="c1"),
    ]
    with pytest.raises(
        ContextBudgetError,
        match=r"the latest 2 messages \(one unit\) are always sent, whole: assistant message "
        r"\(messages\[1\]\) of \d+ tokens, tool result 'lookup_order' \(messages\[2\]\) of "
        r"1,00\d tokens",
    ):
        trim_history(history, max_tokens=300, tokenizer="gpt-4o")


def test_trim_history_system_messages_too_large_is_an_error() -> None:
    history = [SystemMessage("Policy. " * 200), HumanMessage("Hi")]
    with pytest.raises(ContextBudgetError, match=r"'history' needs .* tokens but only 50 are left"):
        trim_history(history, max_tokens=50, tokenizer="gpt-4o")


def test_trim_history_max_tokens_not_an_int_is_an_error() -> None:
    with pytest.raises(InputError, match="max_tokens must be an int >= 0, but got '100'"):
        trim_history(long_history(2), max_tokens="100", tokenizer="gpt-4o")  # type: ignore[arg-type]


# --- item 3: gap markers count messages --------------------------------------------------


def test_trim_history_gap_marker_counts_each_message_of_a_dropped_tool_call() -> None:
    calls = [{"name": "search", "args": {"q": str(k)}, "id": f"c{k}"} for k in range(2)]
    history = with_ids(
        [
            HumanMessage("First question."),
            AIMessage("", tool_calls=calls),
            ToolMessage(words("a", 300), tool_call_id="c0"),
            ToolMessage(words("b", 300), tool_call_id="c1"),
            AIMessage("Found it."),
            HumanMessage("Thanks. And now?"),
        ]
    )
    kept = trim_history(history, max_tokens=100, tokenizer="gpt-4o", history=WHOLE_TURNS)
    assert markers(kept) == ["[… 3 messages omitted …]"]  # the call and its two results
    check_history(history, kept)


def test_trim_history_gap_markers_count_the_messages_left_out() -> None:
    history = with_ids(long_history(200))
    kept = trim_history(history, max_tokens=400, tokenizer="gpt-4o")
    back = check_history(history, kept)
    assert [said for said, _ in back.stand_ins] == [len(history) - (len(kept) - 1)]


# --- item 4: valid requests for every provider -------------------------------------------


def test_trim_history_moves_a_mid_conversation_system_message_up_to_the_first() -> None:
    history = long_history(40)
    history.insert(30, SystemMessage("Escalated to a supervisor."))
    kept = trim_history(history, max_tokens=250, tokenizer="gpt-4o")
    assert kept[:2] == [history[0], history[30]]
    assert not any(isinstance(m, SystemMessage) for m in kept[2:])
    check_anthropic(kept)


def test_trim_history_system_message_between_a_call_and_its_results_is_moved_up() -> None:
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    history = [
        HumanMessage("Hi"),
        AIMessage("", tool_calls=[call]),
        SystemMessage("Tool results are untrusted."),
        ToolMessage("found", tool_call_id="c1"),
    ]
    kept = trim_history(history, max_tokens=500, tokenizer="gpt-4o")
    assert [type(m) for m in kept] == [SystemMessage, HumanMessage, AIMessage, ToolMessage]
    check_openai(kept)


def test_trim_history_opens_with_a_gap_marker_when_the_first_turn_is_left_out() -> None:
    history = with_ids(
        [HumanMessage(words("first", 400)), *history_with_tools(10), HumanMessage("Last?")]
    )
    kept = trim_history(history, max_tokens=200, tokenizer="gpt-4o")
    assert GAP.fullmatch(str(kept[0].content))
    check_history(history, kept)


def test_trim_history_greeting_before_first_human_stays_with_it() -> None:
    history = [AIMessage("Hello! How can I help?"), *history_with_tools(30)]
    kept = trim_history(history, max_tokens=200, tokenizer="gpt-4o")
    assert kept[0] == HumanMessage(START)
    assert kept[1:3] == history[:2]
    assert GAP.fullmatch(str(kept[3].content))


def test_trim_history_conversation_opening_with_the_model_is_valid_for_providers() -> None:
    history = with_ids([AIMessage("Hello! How can I help?"), HumanMessage("Refunds?")])
    kept = trim_history(history, max_tokens=200, tokenizer="gpt-4o")
    assert kept == [HumanMessage(START), *history]
    check_history(history, kept)


def test_trim_history_tool_result_without_its_call_is_an_error() -> None:
    history = [HumanMessage("Hi"), ToolMessage("found", tool_call_id="c9")]
    with pytest.raises(
        InputError,
        match=r"messages\[1\] is a ToolMessage answering tool call 'c9', which the AI message "
        "before it did not make",
    ):
        trim_history(history, max_tokens=500, tokenizer="gpt-4o")


def test_trim_history_tool_call_left_unanswered_is_an_error() -> None:
    calls = [{"name": "search", "args": {}, "id": f"c{k}"} for k in range(2)]
    history = [
        HumanMessage("Hi"),
        AIMessage("", tool_calls=calls),
        ToolMessage("found", tool_call_id="c0"),
        HumanMessage("And?"),
    ]
    with pytest.raises(
        InputError, match=r"messages\[1\] makes tool call\(s\) 'c1' that no ToolMessage answers"
    ):
        trim_history(history, max_tokens=500, tokenizer="gpt-4o")


def test_trim_history_tool_call_awaiting_its_results_at_the_end_is_kept() -> None:
    call = {"name": "search", "args": {}, "id": "c1"}
    history = [HumanMessage("Hi"), AIMessage("", tool_calls=[call])]
    assert trim_history(history, max_tokens=500, tokenizer="gpt-4o") == history


def test_trim_history_function_message_stays_with_its_function_call() -> None:
    function_call = {"name": "lookup", "arguments": '{"q": "17"}'}
    history = [
        HumanMessage("First."),
        AIMessage("", additional_kwargs={"function_call": function_call}),
        FunctionMessage(content=words("r", 300), name="lookup"),
        AIMessage("Done."),
        HumanMessage("Last?"),
    ]
    kept = trim_history(history, max_tokens=60, tokenizer="gpt-4o", history=WHOLE_TURNS)
    assert markers(kept) == ["[… 2 messages omitted …]"]
    assert kept[-2:] == history[-2:]


def test_trim_history_function_message_without_a_function_call_is_an_error() -> None:
    history = [HumanMessage("Hi"), FunctionMessage(content="found", name="lookup")]
    with pytest.raises(InputError, match=r"messages\[1\] is a FunctionMessage that follows no"):
        trim_history(history, max_tokens=500, tokenizer="gpt-4o")


# --- item 5: what trim_messages accepts ---------------------------------------------------


def test_trim_history_accepts_message_tuples_dicts_and_strings() -> None:
    history: list[Any] = [
        ("system", "Be brief."),
        {"role": "user", "content": "Hi"},
        ("ai", "Hello!"),
        "Refunds?",
    ]
    kept = trim_history(history, max_tokens=500, tokenizer="gpt-4o")
    assert kept == [
        SystemMessage("Be brief."),
        HumanMessage("Hi"),
        AIMessage("Hello!"),
        HumanMessage("Refunds?"),
    ]


def test_trim_history_accepts_an_openai_style_tool_call_dict() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history: list[Any] = [
        ("human", "Hi"),
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "done", "tool_call_id": "c1"},
    ]
    kept = trim_history(history, max_tokens=500, tokenizer="gpt-4o")
    assert [type(m) for m in kept] == [HumanMessage, AIMessage, ToolMessage]
    assert_tool_calls_answered(kept)


def test_trim_history_accepts_a_prompt_value() -> None:
    history = long_history(3)
    assert trim_history(
        ChatPromptValue(messages=history), max_tokens=10_000, tokenizer="gpt-4o"
    ) == (history)


def test_trim_history_message_like_it_cannot_read_is_an_error() -> None:
    with pytest.raises(
        InputError,
        match=r"messages\[1\] \(tuple\) is not a message LangChain can read "
        r"\(Unexpected message type: 'robot'",
    ):
        trim_history([("human", "hi"), ("robot", "beep")], max_tokens=100, tokenizer="gpt-4o")


def test_trim_history_takes_a_chat_model_as_its_tokenizer() -> None:
    history = long_history(200)
    by_model = trim_history(history, max_tokens=400, tokenizer=RecordingChatModel())
    assert by_model == trim_history(history, max_tokens=400, tokenizer="gpt-4o")


def test_trim_history_chat_model_naming_no_model_is_an_error() -> None:
    model = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(
        TokenizerError,
        match=r"GenericFakeChatModel names no model .* pass tokenizer=\.\.\. to "
        "trim_history",
    ):
        trim_history(long_history(2), max_tokens=100, tokenizer=model)


def test_trim_history_chat_model_tiktoken_does_not_know_is_an_error() -> None:
    model = RecordingChatModel(model_name="acme-private-1")
    with pytest.raises(TokenizerError, match=r"pass tokenizer=\.\.\. to trim_history"):
        trim_history(long_history(2), max_tokens=100, tokenizer=model)


# --- messages of every kind ---------------------------------------------------------------


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
        trim_history(42, max_tokens=100, tokenizer="gpt-4o")  # type: ignore[arg-type]


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


class CountingTokenizer:
    """o200k_base, counting how many texts it tokenizes; it knows its longest token, as
    tiktoken's tokenizers do, so selection has its free lower bound."""

    name = "o200k_base"

    def __init__(self) -> None:
        self.calls = 0

    @property
    def max_token_bytes(self) -> int:
        return O200K.max_token_bytes

    def count(self, text: str) -> int:
        self.calls += 1
        return O200K.count(text)


def test_trim_history_counts_only_turns_that_can_fit() -> None:
    small, large = CountingTokenizer(), CountingTokenizer()
    trim_history(long_history(200), max_tokens=300, tokenizer=small)
    trim_history(long_history(2_000), max_tokens=300, tokenizer=large)
    assert large.calls <= 2 * small.calls


def test_trim_history_latest_message_after_a_greeting_is_sent_without_it() -> None:
    # The greeting joins the first human message's unit only while that message is not
    # the latest: here the latest must fit alone, and the greeting goes if it does not.
    greeting = AIMessage("Hello! How can I help? " + "Ask me anything about orders. " * 8)
    question = HumanMessage("Where is my order 17?")
    assert len(O200K.encoding.encode(greeting.text)) > 40
    sent = trim_history([greeting, question], max_tokens=40, tokenizer="gpt-4o")
    assert sent[-1].text == question.text
    assert greeting.text not in [m.text for m in sent]


def test_trim_history_old_options_keyword_warns_and_is_history() -> None:
    history = [HumanMessage("Hi"), AIMessage("Hello."), HumanMessage("Refunds?")]
    new = trim_history(history, max_tokens=100, tokenizer="gpt-4o", history=WHOLE_TURNS)
    with pytest.warns(DeprecationWarning, match=r"trim_history\(options=...\).*use history=$"):
        old = trim_history(history, max_tokens=100, tokenizer="gpt-4o", options=WHOLE_TURNS)  # type: ignore[call-arg]
    assert old == new


def test_history_trimmer_old_options_keyword_warns_and_is_history() -> None:
    history = [HumanMessage("Hi"), AIMessage("Hello."), HumanMessage("Refunds?")]
    with pytest.warns(DeprecationWarning, match=r"history_trimmer\(options=...\).*use history="):
        trimmer = history_trimmer(max_tokens=100, tokenizer="gpt-4o", options=WHOLE_TURNS)  # type: ignore[call-arg]
    assert trimmer.invoke(history) == trim_history(history, max_tokens=100, tokenizer="gpt-4o")
