"""The dict input's history through `ContextBudgetRunnable` into a recording model (docs/agents.md,
"Agents and chat"): without a question the history continues and its latest message is
always sent, or `ContextBudgetError` names it; gap markers count the messages left out;
system messages from the history join the prefix, so the request stays valid."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ctxbudget import Allocation, Budget, ContextAssembler, ContextBudgetError
from langchain_ctxbudget import ContextBudgetRunnable
from tests.support.langchain_agent_oracle import check_anthropic, check_history, check_openai
from tests.support.langchain_stack import RecordingChatModel, received_tokens


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def round_trips(count: int, *, result: int = 60) -> list[BaseMessage]:
    """The user's request, then `count` tool round trips of about `result` words a result;
    the last round trip's result ends the list."""
    messages: list[BaseMessage] = [HumanMessage("Check my orders, please.", id="h")]
    for k in range(count):
        call = {"name": "lookup_order", "args": {"order_id": str(k)}, "id": f"call-{k}"}
        messages += [
            AIMessage(f"Looking up order {k}.", tool_calls=[call], id=f"a{k}"),
            ToolMessage(f"order {k}: " + words("x", result), tool_call_id=f"call-{k}", id=f"t{k}"),
        ]
    return messages


def sent_to_a_model(values: dict[str, Any], *, history: int) -> list[BaseMessage]:
    """`values` through the runnable, with `history` tokens for the history, into a model."""
    budget = Budget(total=8_000, allocations=(Allocation("history", max=history, priority=1),))
    model = RecordingChatModel()
    ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o", budget=budget))
    (ctx | model).invoke(values)
    return model.received[0]


def test_runnable_dict_continuation_sends_the_latest_tool_round_trip() -> None:
    history = round_trips(8)
    sent = sent_to_a_model({"history": history}, history=400)
    assert sent[-2:] == [history[-2], history[-1]]
    assert received_tokens(sent) <= 400
    back = check_history(history, sent)
    assert back.stand_ins


def test_runnable_dict_continuation_latest_result_that_cannot_fit_names_it() -> None:
    history = round_trips(2, result=600)
    with pytest.raises(
        ContextBudgetError,
        match=r"assistant message \(history\[3\]\) of \d+ tokens, "
        r"tool result 'lookup_order' \(history\[4\]\) of 1,2\d\d tokens",
    ):
        sent_to_a_model({"history": history}, history=300)


def test_runnable_dict_gap_markers_count_the_messages_left_out() -> None:
    history = round_trips(8)
    sent = sent_to_a_model({"question": "And order 9?", "history": history}, history=400)
    assert sent[-1] == HumanMessage("Question: And order 9?")
    back = check_history(history, sent[:-1])
    assert back.stand_ins
    assert all(said == missing for said, missing in back.stand_ins)


def test_runnable_dict_history_system_message_joins_the_prefix() -> None:
    history: list[BaseMessage] = [
        HumanMessage("Hi", id="h0"),
        AIMessage("Hello!", id="a0"),
        SystemMessage("The user is a premium customer.", id="s0"),
        HumanMessage("Refunds?", id="h1"),
    ]
    sent = sent_to_a_model({"history": history, "system": "Be brief."}, history=400)
    assert isinstance(sent[0], SystemMessage)
    assert "Be brief." in sent[0].text
    assert "The user is a premium customer." in sent[0].text
    assert not any(isinstance(message, SystemMessage) for message in sent[1:])
    assert [message.id for message in sent[1:]] == ["h0", "a0", "h1"]
    check_openai(sent)
    check_anthropic(sent)
