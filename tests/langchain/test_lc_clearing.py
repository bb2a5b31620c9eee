"""Tool-result clearing (the core's, on by default) as it reaches a model through the
middleware in `create_agent`, the runnable's dict input and `trim_history`: a cleared
`ToolMessage` keeps its class, id and ``tool_call_id`` and carries the core's placeholder;
`HistoryOptions` (``keep_tool_results``, ``clear_at_least``, ``never_clear``) reach the core
through the assembler, or ``options=`` for trim_history (docs/agents.md, "Agents and chat")."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from ctxbudget import Allocation, Budget, ContextAssembler, HistoryOptions
from langchain_ctxbudget import ContextBudgetRunnable, trim_history
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.langchain_agent_oracle import check_history
from tests.support.langchain_stack import RecordingChatModel, message_tokens, received_tokens

CLEARED = re.compile(r"\[tool result cleared: lookup_order, ([\d,]+) tokens\]")


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def result(k: int) -> str:
    return f"order {k}: " + words("x", 150)


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return result(int(order_id))


def call(k: int) -> AIMessage:
    args = {"order_id": str(k)}
    return AIMessage("", tool_calls=[{"name": "lookup_order", "args": args, "id": f"call-{k}"}])


def four_lookups() -> list[BaseMessage]:
    """A user's request and four tool round trips, each result about 310 tokens."""
    messages: list[BaseMessage] = [HumanMessage("Check my orders 1 to 4, please.", id="h")]
    for k in range(1, 5):
        messages += [
            call(k).model_copy(update={"id": f"a{k}"}),
            ToolMessage(result(k), tool_call_id=f"call-{k}", id=f"t{k}"),
        ]
    return messages


def cleared(messages: Sequence[BaseMessage]) -> list[str]:
    """The tool-call ids of the results sent as the placeholder."""
    return [
        m.tool_call_id
        for m in messages
        if isinstance(m, ToolMessage) and CLEARED.fullmatch(str(m.content))
    ]


def whole(messages: Sequence[BaseMessage]) -> list[str]:
    """The tool-call ids of the results sent whole."""
    return [
        m.tool_call_id
        for m in messages
        if isinstance(m, ToolMessage) and str(m.content).startswith("order ")
    ]


# --- the middleware, in an agent ----------------------------------------------------------


def agent_budget(history: int) -> Budget:
    return Budget(
        total=4_000,
        allocations=(
            Allocation("tools", priority=1),
            Allocation("history", max=history, priority=2),
        ),
    )


def run_agent(options: HistoryOptions | None = None, *, history: int = 1_200) -> list[BaseMessage]:
    """An agent looking up four orders one call at a time; what its fifth call received."""
    model = RecordingChatModel(replies=[*(call(k) for k in range(1, 5)), AIMessage("All fine.")])
    assembler = ContextAssembler(
        tokenizer="gpt-4o",
        budget=agent_budget(history),
        history=options,
        native_tools=True,
        fence_rule=False,
    )
    agent = create_agent(model, [lookup_order], middleware=[ContextBudgetMiddleware(assembler)])
    state: Any = {"messages": [HumanMessage("Check my orders 1 to 4, please.")]}
    agent.invoke(state)
    assert len(model.received) == 5
    return model.received[4]


def test_middleware_clears_the_oldest_tool_result_by_default() -> None:
    sent = run_agent()
    assert cleared(sent) == ["call-1"]
    assert whole(sent) == ["call-2", "call-3", "call-4"]
    assert received_tokens(sent) <= 1_200


def test_middleware_cleared_result_keeps_its_message_and_call() -> None:
    sent = run_agent()
    [placeholder] = [m for m in sent if isinstance(m, ToolMessage) and m.tool_call_id == "call-1"]
    assert isinstance(sent[sent.index(placeholder) - 1], AIMessage)
    assert placeholder.name == "lookup_order"
    found = CLEARED.fullmatch(str(placeholder.content))
    assert found is not None
    # The size it had, as the core counted its line: "Tool: ", then its parts.
    original = ToolMessage(result(1), tool_call_id="call-1", name="lookup_order")
    assert 0 <= int(found.group(1).replace(",", "")) - message_tokens(original) <= 4


def test_middleware_never_clear_drops_whole_turns_instead() -> None:
    sent = run_agent(HistoryOptions(never_clear=frozenset({"lookup_order"})))
    assert cleared(sent) == []
    assert "[… 2 messages omitted …]" in [m.content for m in sent]


def test_middleware_clear_at_least_clears_more_at_once() -> None:
    sent = run_agent(HistoryOptions(keep_tool_results=0, clear_at_least=500))
    assert cleared(sent) == ["call-1", "call-2"]


def test_middleware_without_clearing_drops_whole_turns() -> None:
    sent = run_agent(HistoryOptions(clear_tool_results=False))
    assert cleared(sent) == []
    assert whole(sent) == ["call-2", "call-3", "call-4"]


def test_middleware_never_clears_the_results_the_model_is_answering() -> None:
    sent = run_agent(HistoryOptions(keep_tool_results=0), history=400)
    assert whole(sent) == ["call-4"]
    last = sent[-1]
    assert isinstance(last, ToolMessage)
    assert (last.content, last.tool_call_id) == (result(4), "call-4")


# --- keep_tool_results, where whole turns can go instead ---------------------------------


def answer_between() -> list[BaseMessage]:
    """Three lookups with a long answer and a new question between the first and second."""
    return [
        HumanMessage("Check my orders.", id="h0"),
        call(1).model_copy(update={"id": "a1"}),
        ToolMessage(result(1), tool_call_id="call-1", id="t1"),
        AIMessage("Long answer: " + words("y", 300), id="r1"),
        HumanMessage("And orders 2 and 3?", id="h1"),
        call(2).model_copy(update={"id": "a2"}),
        ToolMessage(result(2), tool_call_id="call-2", id="t2"),
        call(3).model_copy(update={"id": "a3"}),
        ToolMessage(result(3), tool_call_id="call-3", id="t3"),
    ]


@pytest.mark.parametrize(("keep", "expected"), [(0, ["call-3"]), (3, ["call-2", "call-3"])])
def test_keep_tool_results_keeps_recent_results_whole_while_turns_can_go(
    keep: int, expected: list[str]
) -> None:
    history = answer_between()
    kept = trim_history(
        history,
        max_tokens=1_300,
        tokenizer="gpt-4o",
        history=HistoryOptions(keep_tool_results=keep),
    )
    assert whole(kept) == expected
    check_history(history, kept)


def test_middleware_keep_tool_results_reaches_the_core() -> None:
    model = RecordingChatModel()
    assembler = ContextAssembler(
        tokenizer="gpt-4o",
        budget=agent_budget(1_300),
        history=HistoryOptions(keep_tool_results=3),
        native_tools=True,
        fence_rule=False,
    )
    agent = create_agent(model, [lookup_order], middleware=[ContextBudgetMiddleware(assembler)])
    state: Any = {"messages": answer_between()}
    agent.invoke(state)
    assert whole(model.received[0]) == ["call-2", "call-3"]


# --- trim_history and the dict input ------------------------------------------------------


def test_trim_history_clears_old_results_by_default() -> None:
    history = four_lookups()
    kept = trim_history(history, max_tokens=1_200, tokenizer="gpt-4o")
    assert cleared(kept) == ["call-1"]
    assert len(kept) == len(history)
    check_history(history, kept)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (HistoryOptions(keep_tool_results=0, clear_at_least=500), ["call-1", "call-2"]),
        (HistoryOptions(never_clear=frozenset({"lookup_order"})), []),
        (HistoryOptions(clear_tool_results=False), []),
    ],
    ids=["clear_at_least", "never_clear", "off"],
)
def test_trim_history_options_reach_the_core(options: HistoryOptions, expected: list[str]) -> None:
    history = four_lookups()
    kept = trim_history(history, max_tokens=1_200, tokenizer="gpt-4o", history=options)
    assert cleared(kept) == expected
    check_history(history, kept)


def dict_prompt_to_a_model(assembler: ContextAssembler) -> list[BaseMessage]:
    """The four lookups as the dict input's history, without a question: what the model got."""
    model = RecordingChatModel()
    (ContextBudgetRunnable(assembler=assembler) | model).invoke({"history": four_lookups()})
    return model.received[0]


def test_runnable_dict_history_clears_old_results() -> None:
    budget = Budget(total=2_000, allocations=(Allocation("history", max=1_200, priority=1),))
    sent = dict_prompt_to_a_model(ContextAssembler(tokenizer="gpt-4o", budget=budget))
    assert cleared(sent) == ["call-1"]
    assert received_tokens(sent) <= 1_200
    check_history(four_lookups(), sent)


def test_runnable_dict_history_options_come_from_the_assembler() -> None:
    budget = Budget(total=2_000, allocations=(Allocation("history", max=1_200, priority=1),))
    options = HistoryOptions(keep_tool_results=0, clear_at_least=500)
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=budget, history=options)
    assert cleared(dict_prompt_to_a_model(assembler)) == ["call-1", "call-2"]
