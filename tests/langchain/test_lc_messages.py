"""History messages as they reach a model through dict mode, trim_history and the middleware.

Each is sent rebuilt as the core counted it: texts neutralised (no turn can forge a frame,
a source or another turn), every part counted by the documented rule or refused, the
message classes, ids and tool-call pairing kept, the inputs untouched. What reached a
recording model is read back and counted with tiktoken's own encoding.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, Literal, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tools import tool

from ctxbudget import (
    Allocation,
    Budget,
    ContextAssembler,
    InputError,
    neutralise_section,
)
from langchain_ctxbudget import ContextBudgetRunnable, history_trimmer, trim_history
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.factories import (
    HOSTILE_TURN,
    assert_inert,
    smuggled,
)
from tests.support.langchain_agent_oracle import assert_tool_calls_answered
from tests.support.langchain_stack import RecordingChatModel, received_tokens, small_budget, tokens

WORDS = " ".join(f"word{i}" for i in range(5_000))

Route = Literal["dict", "trim", "middleware"]
ROUTES: tuple[Route, ...] = get_args(Route)


def hostile_history() -> list[BaseMessage]:
    """A conversation whose human, AI and tool messages each try to forge structure."""
    call = {"name": "lookup_order", "args": {"order_id": "17"}, "id": "call-1"}
    return [
        HumanMessage(HOSTILE_TURN, id="h0"),
        AIMessage([{"type": "text", "text": HOSTILE_TURN}], tool_calls=[call], id="a1"),
        ToolMessage(HOSTILE_TURN, tool_call_id="call-1", id="t2"),
        AIMessage("Order 17 shipped.", id="a3"),
        HumanMessage(f"Where is it? {HOSTILE_TURN}", id="h4"),
    ]


def dict_route(history: list[BaseMessage], budget: Budget) -> list[BaseMessage]:
    """`history` through a dict-mode chain; the history messages the model received."""
    model = RecordingChatModel()
    ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o", budget=budget))
    values = {"question": "And the refund?", "history": history, "system": "Be brief."}
    (given_values(values) | ctx | model).invoke("go")
    return model.received[0][1:-1]


def given_values(values: dict[str, Any]) -> Runnable[str, dict[str, Any]]:
    """A chain step that hands on the dict input, as a prompt-building step would."""

    def give(_: str) -> dict[str, Any]:
        return values

    return RunnableLambda(give)


def trim_route(history: list[BaseMessage], budget: Budget) -> list[BaseMessage]:
    """`history` through trim_history into a model; the messages it received."""
    model = RecordingChatModel()
    allocation = budget.allocation("history")
    assert allocation is not None
    cap = allocation.max
    assert cap is not None
    (history_trimmer(max_tokens=cap, tokenizer="gpt-4o") | model).invoke(history)
    return model.received[0]


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: {HOSTILE_TURN}"


def agent_run(
    history: list[BaseMessage], budget: Budget, *, calls: bool = False
) -> RecordingChatModel:
    live = {"name": "lookup_order", "args": {"order_id": "17"}, "id": "call-live"}
    replies = [AIMessage("", tool_calls=[live]), AIMessage("Done.")]
    model = RecordingChatModel(replies=replies) if calls else RecordingChatModel()
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=budget, native_tools=True)
    agent = create_agent(model, [lookup_order], middleware=[ContextBudgetMiddleware(assembler)])
    state: Any = {"messages": history}
    agent.invoke(state)
    return model


def middleware_route(history: list[BaseMessage], budget: Budget) -> list[BaseMessage]:
    """`history` as an agent's state; the messages its model received (no system prompt)."""
    return agent_run(history, budget).received[0]


ROUTE: dict[Route, Callable[[list[BaseMessage], Budget], list[BaseMessage]]] = {
    "dict": dict_route,
    "trim": trim_route,
    "middleware": middleware_route,
}


def roomy() -> Budget:
    return small_budget(history=1_500, tools=300)


# --- item: history is sent as the core neutralised it ------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_history_reaches_the_model_neutralised(route: Route) -> None:
    sent = ROUTE[route](hostile_history(), roomy())
    assert len(sent) == 5
    for message in sent:
        assert_inert(str(message.text))


@pytest.mark.parametrize("route", ROUTES)
def test_history_text_is_the_cores_neutralised_text(route: Route) -> None:
    history = hostile_history()
    sent = ROUTE[route](history, roomy())
    assert [str(m.text) for m in sent] == [neutralise_section(str(m.text)) for m in history]


@pytest.mark.parametrize("route", ROUTES)
def test_history_keeps_classes_ids_and_tool_call_pairing(route: Route) -> None:
    history = hostile_history()
    sent = ROUTE[route](history, roomy())
    assert [(type(m), m.id) for m in sent] == [(type(m), m.id) for m in history]
    assert_tool_calls_answered(sent)
    ai = sent[1]
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls == [
        {"name": "lookup_order", "args": {"order_id": "17"}, "id": "call-1", "type": "tool_call"}
    ]


@pytest.mark.parametrize("route", ROUTES)
def test_history_messages_sent_are_new_and_the_inputs_unchanged(route: Route) -> None:
    history = hostile_history()
    before = copy.deepcopy(history)
    sent = ROUTE[route](history, roomy())
    assert history == before
    assert all(s is not h for s, h in zip(sent, history, strict=True))


def test_middleware_latest_tool_results_are_sent_neutralised() -> None:
    model = agent_run([HumanMessage("Where is order 17?")], roomy(), calls=True)
    result = model.received[1][-1]
    assert isinstance(result, ToolMessage)
    assert result.tool_call_id == "call-live"
    assert str(result.content) == neutralise_section(f"order 17: {HOSTILE_TURN}")
    assert_inert(str(result.content))


def test_middleware_latest_user_message_is_sent_neutralised() -> None:
    model = agent_run([HumanMessage(HOSTILE_TURN)], roomy())
    [latest] = model.received[0]
    assert isinstance(latest, HumanMessage)
    assert_inert(str(latest.content))


def test_trim_history_system_messages_are_sent_neutralised() -> None:
    history = [SystemMessage(f"Policy. {HOSTILE_TURN}"), HumanMessage("Hi")]
    kept = trim_history(history, max_tokens=500, tokenizer="gpt-4o")
    assert isinstance(kept[0], SystemMessage)
    assert_inert(str(kept[0].content))


# --- item: every part of a message is counted, dropped or refused ------------------------


def heavy_history() -> list[BaseMessage]:
    """Turns whose weight is outside their text: reasoning, a legacy function call, tool
    arguments, names and ids; the latest turn is small."""
    thinking = {"type": "thinking", "thinking": WORDS, "signature": "c2ln" * 500}
    function_call = {"name": "lookup", "arguments": json.dumps({"q": WORDS})}
    big_call = {"name": "search", "args": {"query": WORDS}, "id": "call-big"}
    return [
        HumanMessage("Start."),
        AIMessage([thinking, {"type": "text", "text": "ok"}]),
        HumanMessage("next", name="n" * 2_000),
        AIMessage("", additional_kwargs={"function_call": function_call}),
        HumanMessage("more"),
        AIMessage("", tool_calls=[big_call]),
        ToolMessage("nothing found", tool_call_id="call-big"),
        AIMessage("Nothing found.", additional_kwargs={"tool_calls": None, "refusal": None}),
        HumanMessage("last question"),
    ]


def tight() -> Budget:
    return Budget(
        total=2_500,
        reserve_output=0,
        allocations=(
            Allocation("tools", max=300, priority=2),
            Allocation("history", max=1_500, priority=3),
        ),
    )


def test_dict_mode_sends_no_more_than_the_budget() -> None:
    model = RecordingChatModel()
    ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o", budget=tight()))
    values = {"question": "And the refund?", "history": heavy_history()}
    (given_values(values) | ctx | model).invoke("go")
    assert received_tokens(model.received[0]) <= tight().available


def test_trim_history_sends_no_more_than_max_tokens() -> None:
    model = RecordingChatModel()
    (history_trimmer(max_tokens=1_500, tokenizer="gpt-4o") | model).invoke(heavy_history())
    assert received_tokens(model.received[0]) <= 1_500


def test_middleware_sends_no_more_than_the_budget() -> None:
    model = agent_run(heavy_history(), tight())
    schemas = sum(tokens(json.dumps(s)) for s in model.schemas_received[0])
    assert received_tokens(model.received[0]) + schemas <= tight().available


@pytest.mark.parametrize("route", ROUTES)
def test_invisible_characters_in_parts_sent_as_they_are_are_counted(route: Route) -> None:
    hidden = smuggled("x" * 2_000)  # thousands of tokens that neutralising would remove
    call = {"name": "search", "args": {"q": hidden}, "id": "call-1"}
    thinking = {"type": "thinking", "thinking": hidden, "signature": "c2ln"}
    history = [
        HumanMessage("Start."),
        AIMessage([thinking], tool_calls=[call]),
        ToolMessage("done", tool_call_id="call-1"),
        HumanMessage("last question"),
    ]
    assert received_tokens(ROUTE[route](history, tight())) <= 1_500


@pytest.mark.parametrize("route", ROUTES)
def test_kept_reasoning_and_function_call_are_sent_as_counted(route: Route) -> None:
    thinking = {"type": "thinking", "thinking": "Check the order.", "signature": "c2ln"}
    function_call = {"name": "lookup", "arguments": '{"q": "17"}'}
    history = [
        HumanMessage("Start."),
        AIMessage([thinking, "Let me look."], additional_kwargs={"function_call": function_call}),
        HumanMessage("last question"),
    ]
    sent = ROUTE[route](history, roomy())
    assert sent[1].content == [thinking, "Let me look."]
    assert sent[1].additional_kwargs == {"function_call": function_call}


@pytest.mark.parametrize("route", ROUTES)
def test_image_block_is_an_error_naming_message_and_part(route: Route) -> None:
    image = {"type": "image", "base64": "iVBORw0KGgo" * 2_000, "mime_type": "image/png"}
    history: list[BaseMessage] = [
        HumanMessage("Start."),
        HumanMessage(["What is this?", image]),
        HumanMessage("?"),
    ]
    with pytest.raises(InputError, match=r"\[1\]\.content\[1\] is a 'image' block: ctxbudget coun"):
        ROUTE[route](history, roomy())


@pytest.mark.parametrize("route", ROUTES)
def test_unknown_additional_kwargs_are_an_error_naming_message_and_key(route: Route) -> None:
    history = [
        HumanMessage("Start."),
        AIMessage("ok", additional_kwargs={"reasoning_content": WORDS}),
        HumanMessage("?"),
    ]
    with pytest.raises(InputError, match=r"\[1\]\.additional_kwargs\['reasoning_content'\] hold"):
        ROUTE[route](history, roomy())


def test_provider_tool_calls_kwarg_is_not_sent() -> None:
    raw = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": WORDS}}]
    call = {"name": "f", "args": {}, "id": "c1"}
    history = [
        HumanMessage("Start."),
        AIMessage("", tool_calls=[call], additional_kwargs={"tool_calls": raw}),
        ToolMessage("done", tool_call_id="c1"),
        HumanMessage("?"),
    ]
    sent = trim_history(history, max_tokens=500, tokenizer="gpt-4o")
    assert sent[1].additional_kwargs == {}
    assert received_tokens(sent) <= 500


_TEXT = st.lists(
    st.sampled_from(["System:", "[1]", "</conversation>", "<|im_start|>", "refund", "\n", "ok"]),
    max_size=30,
).map(" ".join)
_HEAVY = st.integers(0, 3_000).map(lambda n: " ".join(f"w{i}" for i in range(n)))


@st.composite
def turns(draw: st.DrawFn, index: int) -> list[BaseMessage]:
    """One exchange: a human message, then an AI reply of some kind (and its tool result)."""
    human = HumanMessage(draw(_TEXT) or "hi", name=draw(st.none() | _HEAVY.map(lambda t: t[:200])))
    kind = draw(st.sampled_from(["text", "thinking", "function_call", "tool_call"]))
    if kind == "text":
        return [human, AIMessage(draw(_TEXT) + draw(_HEAVY))]
    if kind == "thinking":
        block = {"type": "thinking", "thinking": draw(_HEAVY), "signature": draw(_HEAVY)}
        return [human, AIMessage([block, {"type": "text", "text": draw(_TEXT)}])]
    if kind == "function_call":
        arguments = json.dumps({"q": draw(_HEAVY)})
        call = {"function_call": {"name": "lookup", "arguments": arguments}}
        return [human, AIMessage(draw(_TEXT), additional_kwargs=call)]
    call_id = f"call-{index}"
    tool_call = {"name": "search", "args": {"q": draw(_HEAVY)}, "id": call_id}
    return [
        human,
        AIMessage("", tool_calls=[tool_call]),
        ToolMessage(draw(_TEXT) + draw(_HEAVY), tool_call_id=call_id),
    ]


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    count = draw(st.integers(1, 4))
    messages = [m for i in range(count) for m in draw(turns(i))]
    return [*messages, HumanMessage("last question")]


@given(history=histories(), cap=st.integers(50, 1_500))
def test_what_reaches_the_model_fits_the_history_budget(
    history: list[BaseMessage], cap: int
) -> None:
    kept = trim_history(history, max_tokens=cap, tokenizer="gpt-4o")
    assert received_tokens(kept) <= cap
    for message in kept:
        assert_inert(str(message.text))


@given(history=histories())
def test_dict_mode_prompt_fits_the_budget(history: list[BaseMessage]) -> None:
    budget = tight()
    ctx = ContextBudgetRunnable(assembler=ContextAssembler(tokenizer="gpt-4o", budget=budget))
    value = ctx.invoke({"question": "And the refund?", "history": history})
    assert isinstance(value, ChatPromptValue)
    assert received_tokens(value.messages) <= budget.available
