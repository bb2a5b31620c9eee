"""ContextBudgetMiddleware in a real `create_agent` agent with a recording fake model."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool

from ctxbudget import (
    Allocation,
    Budget,
    ContextAssembler,
    ContextBudgetError,
    HistoryOptions,
    InputError,
    InvalidBudgetError,
    TokenizerError,
)
from langchain_ctxbudget import ContextBudgetRunnable
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.langchain_agent_oracle import assert_tool_calls_answered, check_history
from tests.support.langchain_agents import (
    SYSTEM,
    agent_model,
    history_with_tools,
    lookup_order,
    run_agent,
)
from tests.support.langchain_stack import RecordingChatModel, received_tokens, small_budget, tokens

GAP = re.compile(r"\[… \d+ messages? omitted …\]")


def test_middleware_trims_history_by_whole_turns() -> None:
    model = agent_model()
    history = [*history_with_tools(60), HumanMessage("Where is order 17?")]
    run_agent(model, history)
    sent = model.received[0]
    assert sent[0] == SystemMessage(SYSTEM)
    assert sent[1].content == history[0].content
    assert GAP.fullmatch(str(sent[2].content))
    assert sent[-1].content == "Where is order 17?"
    assert len(sent) < len(history)
    assert_tool_calls_answered(sent[1:])


def test_middleware_keeps_the_live_tool_call_and_its_result() -> None:
    model = agent_model()
    result = run_agent(model, [*history_with_tools(60), HumanMessage("Where is order 17?")])
    second = model.received[1]
    assert isinstance(second[-2], AIMessage)
    assert second[-2].tool_calls[0]["id"] == "call-live"
    assert second[-1].content == "order 17: delivered, 2 items"
    assert result["messages"][-1].content == "Order 17 was delivered [1]."


def test_middleware_drops_least_relevant_tools_first() -> None:
    model = agent_model()
    run_agent(model, [HumanMessage("Where is order 17?")], tools=8)
    offered = model.tools_received[0]
    assert offered[0] == "lookup_order"
    assert 2 <= len(offered) < 9
    assert offered == ["lookup_order", *(f"filler_{i}" for i in range(len(offered) - 1))]


def test_middleware_short_conversation_is_sent_unchanged() -> None:
    model = agent_model()
    run_agent(model, [HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage("Order 17?")])
    assert [m.content for m in model.received[0]] == [SYSTEM, "Hi", "Hello!", "Order 17?"]


def test_middleware_async_agent() -> None:
    model = agent_model()
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget(history=250))
    agent = create_agent(model, [lookup_order], middleware=[ContextBudgetMiddleware(assembler)])
    state: Any = {"messages": [*history_with_tools(60), HumanMessage("Order 17?")]}
    asyncio.run(agent.ainvoke(state))
    assert GAP.fullmatch(str(model.received[0][1].content))
    assert len(model.received) == 2


async def _reports(agent: Any, messages: list[BaseMessage]) -> list[Any]:
    return [
        event["data"]
        async for event in agent.astream_events({"messages": messages}, version="v2")
        if event["event"] == "on_custom_event" and event["name"] == "ctxbudget_report"
    ]


def test_middleware_report_shows_in_astream_events() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget(history=250))
    agent = create_agent(
        agent_model(), [lookup_order], middleware=[ContextBudgetMiddleware(assembler)]
    )
    reports = asyncio.run(_reports(agent, [*history_with_tools(60), HumanMessage("Order 17?")]))
    assert len(reports) == 2
    assert "history" in reports[0]["trimmed"]
    assert all(d["claimant"] == "history" for d in reports[0]["dropped"])


def request(messages: list[Any], tools: list[Any]) -> ModelRequest[Any]:
    return ModelRequest(model=RecordingChatModel(), messages=messages, tools=tools)


def test_middleware_keeps_provider_builtin_tools() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    builtin = {"type": "web_search_preview"}
    seen: list[ModelRequest[Any]] = []

    def handler(budgeted: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(budgeted)
        return ModelResponse(result=[AIMessage("ok")])

    ContextBudgetMiddleware(assembler).wrap_model_call(
        request([HumanMessage("Search the web.")], [builtin, lookup_order]), handler
    )
    assert seen[0].tools == [builtin, lookup_order]


def test_middleware_async_outside_an_agent_run() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    seen: list[ModelRequest[Any]] = []

    async def handler(budgeted: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(budgeted)
        return ModelResponse(result=[AIMessage("ok")])

    history = [*history_with_tools(60), HumanMessage("Order 17?")]
    asyncio.run(ContextBudgetMiddleware(assembler).awrap_model_call(request(history, []), handler))
    assert GAP.fullmatch(str(seen[0].messages[1].content))


def test_middleware_request_without_messages_is_an_error() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    with pytest.raises(InputError, match="the model request has no messages besides system"):
        ContextBudgetMiddleware(assembler).wrap_model_call(request([], []), lambda r: None)  # type: ignore[arg-type, return-value]


def test_middleware_request_ending_with_an_ai_message_is_an_error() -> None:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget())
    with pytest.raises(
        InputError, match=r"the model request ends with an AI message \(messages\[1\]\)"
    ):
        ContextBudgetMiddleware(assembler).wrap_model_call(
            request([HumanMessage("Hi"), AIMessage("Hello")], []),
            lambda r: None,  # type: ignore[arg-type, return-value]
        )


# --- item 1: the latest unit is history that must be kept, not the question --------------


def round_trip_model(result_words: int) -> tuple[RecordingChatModel, BaseTool]:
    """A model that calls a tool whose result has `result_words` words, then answers."""

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order by its id: status, items and shipping date."""
        return f"order {order_id}: " + " ".join(f"item{i}" for i in range(result_words))

    call = {"name": "lookup_order", "args": {"order_id": "17"}, "id": "call-live"}
    model = RecordingChatModel(
        replies=[AIMessage("", tool_calls=[call]), AIMessage("Order 17 was delivered.")]
    )
    return model, lookup_order


@pytest.mark.parametrize(
    "budget",
    [Budget.default(), Budget.for_model("gpt-4o", reserve_output=4_000)],
    ids=["default", "gpt-4o"],
)
def test_middleware_tool_result_over_the_question_allocation_is_sent(budget: Budget) -> None:
    # Sent as the question, this result raised: 'question' needs 807 tokens but only 200 ...
    model, lookup = round_trip_model(400)
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=budget, native_tools=True)
    agent = create_agent(
        model, [lookup], system_prompt=SYSTEM, middleware=[ContextBudgetMiddleware(assembler)]
    )
    result = agent.invoke({"messages": [HumanMessage("Where is order 17?")]})
    second = model.received[1]
    assert second[-1].content == lookup.invoke({"order_id": "17"})
    assert tokens(str(second[-1].content)) > 800
    schemas = sum(tokens(json.dumps(s)) for s in model.schemas_received[1])
    assert received_tokens(second) + schemas <= budget.available
    assert result["messages"][-1].content == "Order 17 was delivered."


def test_middleware_long_latest_user_message_is_sent_with_the_default_budget() -> None:
    model = agent_model()
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=Budget.default(), native_tools=True)
    agent = create_agent(model, [lookup_order], middleware=[ContextBudgetMiddleware(assembler)])
    question = "Where is order 17? " + "Some context. " * 150
    agent.invoke({"messages": [HumanMessage(question)]})
    assert model.received[0][-1].content == question


def test_middleware_latest_tool_result_that_cannot_fit_names_it_and_its_size() -> None:
    model, lookup = round_trip_model(2_000)
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=Budget.default(), native_tools=True)
    agent = create_agent(model, [lookup], middleware=[ContextBudgetMiddleware(assembler)])
    with pytest.raises(
        ContextBudgetError,
        match=r"'history' needs [\d,]+ tokens but only 1,500 are left: the latest 2 messages "
        r"\(one unit\) are always sent, whole: assistant message \(messages\[1\]\) of \d+ "
        r"tokens, tool result 'lookup_order' \(messages\[2\]\) of 5,0\d\d tokens",
    ):
        agent.invoke({"messages": [HumanMessage("Where is order 17?")]})


def test_middleware_keeps_the_first_turn_and_the_latest_across_an_agent_run() -> None:
    model = RecordingChatModel(
        replies=[
            *(
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "lookup_order", "args": {"order_id": str(k)}, "id": f"call-{k}"}
                    ],
                )
                for k in range(8)
            ),
            AIMessage("All delivered."),
        ]
    )
    first = HumanMessage("Check all my orders, please.")
    run_agent(model, [first])
    for sent in model.received:
        assert sent[1].content == first.content
        assert received_tokens(sent) <= small_budget(history=250, tools=300).available


# --- the system prompt and system messages ------------------------------------------------


def test_middleware_system_prompt_is_sent_unchanged() -> None:
    model = agent_model()
    system = "You are the returns desk.\nSystem: rules below.\n</conversation> [1] " * 3
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=small_budget(), native_tools=True)
    agent = create_agent(
        model, [lookup_order], system_prompt=system, middleware=[ContextBudgetMiddleware(assembler)]
    )
    agent.invoke({"messages": [HumanMessage("Where is order 17?")]})
    assert model.received[0][0] == SystemMessage(system)


def test_middleware_system_prompt_is_counted() -> None:
    model = agent_model()
    system = "Rule. " * 600
    assembler = ContextAssembler(
        tokenizer="gpt-4o",
        budget=Budget(
            total=2_000,
            allocations=(Allocation("tools", priority=1), Allocation("history", priority=2)),
        ),
        native_tools=True,
        fence_rule=False,
    )
    agent = create_agent(
        model, [lookup_order], system_prompt=system, middleware=[ContextBudgetMiddleware(assembler)]
    )
    state: Any = {"messages": [*history_with_tools(60), HumanMessage("Where is order 17?")]}
    agent.invoke(state)
    schemas = sum(tokens(json.dumps(s)) for s in model.schemas_received[0])
    assert received_tokens(model.received[0]) + schemas <= 2_000
    assert tokens(system) > 600


def test_middleware_state_system_message_is_sent_after_the_system_prompt() -> None:
    model = agent_model()
    history = [
        *history_with_tools(9),
        SystemMessage("The user is verified."),
        HumanMessage("Where is order 17?"),
    ]
    run_agent(model, history)
    sent = model.received[0]
    assert [(m.type, m.content) for m in sent[:2]] == [
        ("system", SYSTEM),
        ("system", "The user is verified."),
    ]
    assert not any(isinstance(m, SystemMessage) for m in sent[2:])


def test_middleware_gap_markers_count_the_messages_left_out() -> None:
    model = agent_model()
    history = [
        m.model_copy(update={"id": f"m{i}"})
        for i, m in enumerate([*history_with_tools(60), HumanMessage("Where is order 17?")])
    ]
    run_agent(model, history)
    back = check_history([SystemMessage(SYSTEM), *history], model.received[0])
    assert back.stand_ins


# --- for_model ----------------------------------------------------------------------------


def test_for_model_sizes_the_middleware_from_the_profile() -> None:
    model = RecordingChatModel(profile={"max_input_tokens": 16_000})
    middleware = ContextBudgetMiddleware.for_model(model, reserve_output=1_000)
    assert middleware.assembler.budget == Budget.for_agent(16_000, reserve_output=1_000)
    assert middleware.assembler.counter.tokenizer.name == "o200k_base"
    assert middleware.assembler.native_tools is True
    assert middleware.assembler.fence_rule is False


def test_for_model_middleware_and_runnable_read_a_model_alike() -> None:
    model = RecordingChatModel(model_name="gpt-4.1-mini", profile={"max_input_tokens": 32_000})
    middleware = ContextBudgetMiddleware.for_model(model, reserve_output=2_000)
    runnable = ContextBudgetRunnable.for_model(model, reserve_output=2_000)
    # One window and tokenizer; the middleware lays it out for an agent (no sources).
    assert middleware.assembler.budget == Budget.for_agent(32_000, reserve_output=2_000)
    assert runnable.assembler.budget == Budget.for_context_window(32_000, reserve_output=2_000)
    assert middleware.assembler.counter.tokenizer is runnable.assembler.counter.tokenizer


def test_for_model_middleware_without_a_profile_takes_the_window_its_name_has() -> None:
    middleware = ContextBudgetMiddleware.for_model(RecordingChatModel(), reserve_output=1_000)
    assert middleware.assembler.budget == Budget.for_agent(128_000, reserve_output=1_000)


def test_for_model_middleware_sends_a_tool_result_larger_than_the_default_history_share() -> None:
    # 1,100 tokens: over the 954 that Budget.for_context_window(3_500) gives history, while
    # the window has room for it: the agent layout lets history take what tools leave.
    model, lookup = round_trip_model(1_100)
    model.profile = {"max_input_tokens": 3_500}
    middleware = ContextBudgetMiddleware.for_model(model, reserve_output=0)
    default = Budget.for_context_window(3_500, reserve_output=0).allocation("history")
    assert default is not None
    assert default.max is not None
    assert default.max < 1_100
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Where is order 17?")]})
    assert model.received[1][-1].content == lookup.invoke({"order_id": "17"})


def test_for_model_middleware_takes_history_options_and_a_summariser() -> None:
    model = RecordingChatModel(profile={"max_input_tokens": 16_000})
    options = HistoryOptions(keep_tool_results=1)
    middleware = ContextBudgetMiddleware.for_model(
        model, reserve_output=1_000, history=options, summarize=model
    )
    assert middleware.assembler.history == options
    assert middleware.summarizer is not None


def test_for_model_middleware_in_an_agent_sends_a_long_tool_result() -> None:
    model, lookup = round_trip_model(400)
    model.profile = {"max_input_tokens": 128_000}
    middleware = ContextBudgetMiddleware.for_model(model, reserve_output=4_000)
    agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware])
    agent.invoke({"messages": [HumanMessage("Where is order 17?")]})
    assert model.received[1][-1].content == lookup.invoke({"order_id": "17"})


def test_for_model_middleware_without_a_window_is_an_error() -> None:
    model = RecordingChatModel(model_name="ollama:llama3.1:8b")
    with pytest.raises(
        InvalidBudgetError,
        match=r"RecordingChatModel has no profile\['max_input_tokens'\] or num_ctx, and its model "
        r"\('ollama:llama3.1:8b'\) has no window .* build ContextBudgetMiddleware from a "
        "ContextAssembler",
    ):
        ContextBudgetMiddleware.for_model(model, reserve_output=1_000, tokenizer="o200k_base")


def test_for_model_middleware_without_a_model_name_needs_a_tokenizer() -> None:
    model = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 8_000})
    with pytest.raises(TokenizerError, match="GenericFakeChatModel names no model"):
        ContextBudgetMiddleware.for_model(model, reserve_output=500)
    middleware = ContextBudgetMiddleware.for_model(
        model, reserve_output=500, tokenizer="o200k_base"
    )
    assert middleware.assembler.budget.total == 8_000


def test_for_model_middleware_unknown_tokenizer_says_to_pass_one() -> None:
    model = RecordingChatModel(model_name="acme-private-1", profile={"max_input_tokens": 200_000})
    with pytest.raises(TokenizerError, match=r"pass tokenizer=\.\.\. to for_model"):
        ContextBudgetMiddleware.for_model(model, reserve_output=4_000)


def test_middleware_without_langchain_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'langchain' or name.startswith('langchain.'):\n"
        "            raise ImportError(f'blocked {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import langchain_ctxbudget.middleware\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'langchain>=1.2.11,<2'" in out


def test_for_model_middleware_of_an_ollama_model_takes_the_window_its_server_is_set_to() -> None:
    class Ollama(RecordingChatModel):
        num_ctx: int = 32_768

    middleware = ContextBudgetMiddleware.for_model(
        Ollama(model_name="llama3.1:8b"), reserve_output=1_000, tokenizer="o200k_base"
    )
    assert middleware.assembler.budget == Budget.for_agent(32_768, reserve_output=1_000)
