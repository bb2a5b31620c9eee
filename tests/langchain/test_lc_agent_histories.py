"""Random agent histories through `trim_history` and `ContextBudgetMiddleware`, checked on
what reached a recording model by `tests/support/langchain_agent_oracle.py` (docs/agents.md,
"In LangChain").

The histories: rounds of an optional system message, the user's message, zero to two AI
steps each making one to three tool calls answered by `ToolMessage`s (sometimes a system
note after them), and sometimes the AI's answer (the turn with no call); sometimes an AI
greeting first; random sizes. The middleware is driven through `wrap_model_call` with a
real `ModelRequest`, its handler sending the budgeted request to a recording chat model
as `create_agent` does (the system message first, the tools bound), which keeps a
hundred examples within seconds; `test_lc_middleware` runs it inside `create_agent`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from hypothesis import event, given
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from ctxbudget import (
    Allocation,
    Budget,
    ContextAssembler,
    ContextBudgetError,
    HistoryOptions,
)
from langchain_ctxbudget import trim_history
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.langchain_agent_oracle import check_history
from tests.support.langchain_stack import RecordingChatModel, received_tokens, tokens

TOOLS = ("search", "lookup", "fetch")
SYSTEM = "You are the returns desk. Use the tools."


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


@st.composite
def agent_histories(draw: st.DrawFn) -> list[BaseMessage]:
    size = st.integers(0, 30)
    out: list[BaseMessage] = []
    if draw(st.integers(0, 7)) == 0:
        out.append(AIMessage("Hello! How can I help? " + words("g", draw(size)), id="greeting"))
    for r in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 7)) == 0:
            out.append(SystemMessage(f"rule {r} " + words(f"s{r}x", draw(size)), id=f"s{r}"))
        out.append(HumanMessage(f"ask {r} " + words(f"u{r}x", draw(size)), id=f"h{r}"))
        for c in range(draw(st.integers(0, 2))):
            names = draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3))
            calls = [
                {"name": name, "args": {"q": words("q", draw(size))}, "id": f"c{r}-{c}-{k}"}
                for k, name in enumerate(names)
            ]
            out.append(AIMessage(words(f"a{r}{c}x", draw(size)), tool_calls=calls, id=f"a{r}-{c}"))
            for call in calls:
                result = f"result {call['id']} " + words("t", draw(st.integers(0, 150)))
                out.append(ToolMessage(result, tool_call_id=call["id"], id=f"t{call['id']}"))
            if draw(st.integers(0, 9)) == 0:
                out.append(SystemMessage(f"note {r} {c}", id=f"n{r}-{c}"))
        if draw(st.booleans()):
            out.append(AIMessage(f"answer {r} " + words(f"r{r}x", draw(size)), id=f"r{r}"))
    return out


def summary(messages: Sequence[BaseMessage]) -> str:
    return f"the user asked about {len(messages)} things"


history_options = st.builds(
    HistoryOptions,
    clear_tool_results=st.booleans(),
    keep_tool_results=st.integers(0, 3),
    clear_at_least=st.sampled_from([0, 0, 50, 400]),
    never_clear=st.sets(st.sampled_from(TOOLS), max_size=2).map(frozenset),
    summary_tokens=st.sampled_from([8, 40]),
)


def latest_unit(history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The last message and, when it is a tool result, its call and the results between."""
    turns = [m for m in history if not isinstance(m, SystemMessage)]
    start = len(turns) - 1
    while start > 0 and isinstance(turns[start], ToolMessage):
        start -= 1
    return turns[start:] if isinstance(turns[-1], ToolMessage) else turns[-1:]


def generous(messages: Sequence[BaseMessage]) -> int:
    """More than the core can count for `messages` in a section: their parts, a label and a
    separator each, the frame and a gap marker."""
    return received_tokens(messages) + 4 * len(messages) + 30 if messages else 0


def justified(
    history: Sequence[BaseMessage],
    error: ContextBudgetError,
    *,
    total: int,
    history_max: int | None = None,
    summary_room: int = 0,
) -> None:
    """The error is justified, by generous counts (with the room a summary reserves): when
    it names the system part (``trim_history``'s "system messages are always kept", the
    core's "'system' needs" where the middleware joins them to its system prompt), the
    history's system messages alone do not fit in `total`; otherwise the latest unit does
    not fit beside them, or not in `history_max`, and the error names each of its messages."""
    unit = generous(latest_unit(history)) + summary_room
    systems = generous([m for m in history if isinstance(m, SystemMessage)])
    message = str(error)
    if "system messages are always kept" in message or message.startswith("'system' needs"):
        assert systems > total, message
        return
    assert systems + unit > total or (history_max is not None and unit > history_max), message
    for kept in latest_unit(history):
        assert f"messages[{history.index(kept)}]" in message


def summary_room(options: HistoryOptions, summarize: Any) -> int:
    """What a gap may cost beyond a marker: the room a summary reserves, and its label."""
    return 0 if summarize is None else options.summary_tokens + 15


def schema_tokens(schemas: Sequence[dict[str, Any]]) -> int:
    """The tools' schemas as docs/results.md, "Tools" says they count: each function's name,
    description and parameters as compact JSON."""
    return sum(
        tokens(json.dumps(s["function"], separators=(",", ":"), sort_keys=True)) for s in schemas
    )


@given(
    history=agent_histories(),
    max_tokens=st.integers(60, 3_000),
    options=history_options,
    summarize=st.sampled_from([None, summary]),
)
def test_trim_history_on_random_agent_histories(
    history: list[BaseMessage],
    max_tokens: int,
    options: HistoryOptions,
    summarize: Any,
) -> None:
    model = RecordingChatModel()
    try:
        kept = trim_history(
            history, max_tokens=max_tokens, tokenizer="gpt-4o", history=options, summarize=summarize
        )
    except ContextBudgetError as error:
        event("does not fit")
        justified(history, error, total=max_tokens, summary_room=summary_room(options, summarize))
        return
    model.invoke(kept)
    sent = model.received[0]
    assert received_tokens(sent) <= max_tokens
    back = check_history(history, sent)
    event("messages left out" if back.stand_ins else "all kept")


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return order_id


def through_middleware(
    history: list[BaseMessage], budget: Budget, options: HistoryOptions, summarize: Any
) -> RecordingChatModel:
    """`history` as one model call of an agent: what the recording model received."""
    model = RecordingChatModel()
    assembler = ContextAssembler(
        tokenizer="gpt-4o", budget=budget, history=options, native_tools=True, fence_rule=False
    )
    middleware = ContextBudgetMiddleware(assembler, summarize=summarize)

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        assert request.system_message is not None
        bound = model.bind_tools(request.tools)
        bound.invoke([request.system_message, *request.messages])
        return ModelResponse(result=[AIMessage("ok")])

    request = ModelRequest(
        model=model,
        messages=cast("list[AnyMessage]", list(history)),
        system_message=SystemMessage(SYSTEM),
        tools=[lookup_order],
    )
    middleware.wrap_model_call(request, handler)
    return model


@given(
    history=agent_histories(),
    total=st.integers(300, 2_500),
    history_max=st.none() | st.integers(50, 1_500),
    options=history_options,
    summarize=st.sampled_from([None, summary]),
)
def test_middleware_on_random_agent_histories(
    history: list[BaseMessage],
    total: int,
    history_max: int | None,
    options: HistoryOptions,
    summarize: Any,
) -> None:
    if isinstance(history[-1], AIMessage):
        history = [*history, HumanMessage("and now?", id="last")]
    budget = Budget(
        total=total,
        allocations=(
            Allocation("tools", priority=1),
            Allocation("history", max=history_max, priority=2),
        ),
    )
    try:
        model = through_middleware(history, budget, options, summarize)
    except ContextBudgetError as error:
        event("does not fit")
        justified(
            history,
            error,
            total=budget.available - tokens(SYSTEM),
            history_max=history_max,
            summary_room=summary_room(options, summarize),
        )
        return
    sent = model.received[0]
    schemas = schema_tokens(model.schemas_received[0])
    assert received_tokens(sent) + schemas <= budget.available
    assert sent[0] == SystemMessage(SYSTEM)
    back = check_history([SystemMessage(SYSTEM), *history], sent)
    event("messages left out" if back.stand_ins else "all kept")
