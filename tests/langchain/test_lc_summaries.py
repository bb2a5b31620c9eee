"""Summaries in place of gap markers (``summarize=``): a chat model or a function, through
the middleware, the runnable's dict input and `trim_history`; sync paths through the core's
summariser, async paths by the core's two passes with the model's ``ainvoke``; the cache
over a growing conversation; fallbacks to the gap marker, reported (docs/agents.md,
"In LangChain")."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.tools import tool
from pydantic import Field

from ctxbudget import Allocation, Budget, ContextAssembler, HistoryOptions
from langchain_ctxbudget import ContextBudgetRunnable, history_trimmer, trim_history
from langchain_ctxbudget.middleware import ContextBudgetMiddleware
from tests.support.factories import HOSTILE_TURN, assert_inert
from tests.support.langchain_agent_oracle import SUMMARY, announced, check_history
from tests.support.langchain_stack import RecordingChatModel, received_tokens

TEXT = "The user is returning order 17; a refund of 40 EUR was agreed."
OPTIONS = HistoryOptions(summary_tokens=60, clear_tool_results=False)


class SummaryModel(BaseChatModel):
    """A summariser that records each prompt and how it was called (sync or async)."""

    reply: str = TEXT
    fail: bool = False
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    paths: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "summary-spy"

    def _answer(self, messages: list[BaseMessage], path: str) -> ChatResult:
        self.prompts.append(list(messages))
        self.paths.append(path)
        if self.fail:
            raise RuntimeError("the summariser is down")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer(messages, "sync")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(0)
        return self._answer(messages, "async")


def chat(turns: int, size: int = 40) -> list[BaseMessage]:
    """`turns` exchanges of about `size` words a message, ending with the user's question."""
    out: list[BaseMessage] = []
    for i in range(turns):
        out.append(HumanMessage(f"question {i} " + "word " * size, id=f"h{i}"))
        out.append(AIMessage(f"answer {i} " + "word " * size, id=f"a{i}"))
    out.append(HumanMessage("And the refund?", id="last"))
    return out


def summaries(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if SUMMARY.fullmatch(str(m.content))]


# --- trim_history -------------------------------------------------------------------------


def test_trim_history_summary_stands_where_the_marker_would() -> None:
    history = chat(20)
    kept = trim_history(
        history, max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=SummaryModel()
    )
    assert kept[0] == history[0]
    said = announced(kept[1])
    assert kept[1].content == f"[Summary of {said} earlier messages: {TEXT}]"
    assert isinstance(kept[1], HumanMessage)
    assert received_tokens(kept) <= 500
    check_history(history, kept)


def test_trim_history_summariser_gets_a_short_prompt_and_the_excerpt() -> None:
    model = SummaryModel()
    trim_history(chat(20), max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=model)
    [[instructions, excerpt]] = model.prompts
    assert isinstance(instructions, SystemMessage)
    assert "conversation" in instructions.text
    assert "facts, the decisions and the open questions" in instructions.text
    assert "at most 30 words" in instructions.text  # half of summary_tokens
    assert isinstance(excerpt, HumanMessage)
    assert excerpt.text.startswith("<conversation>\nAssistant: answer 0 ")
    assert excerpt.text.endswith("\n</conversation>")


def test_trim_history_excerpt_for_the_summariser_is_neutralised() -> None:
    model = SummaryModel()
    history = [HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage(HOSTILE_TURN), *chat(20)]
    trim_history(history, max_tokens=300, tokenizer="gpt-4o", history=OPTIONS, summarize=model)
    [[_, excerpt]] = model.prompts
    body = excerpt.text.removeprefix("<conversation>\n").removesuffix("\n</conversation>")
    assert "Official refund policy" in body
    # The excerpt's own labels open its paragraphs; nothing else reads as a role or a frame.
    assert_inert(re.sub(r"(^|\n\n)(User|Assistant): ", r"\1", body))


def test_trim_history_summary_function_gets_the_left_out_messages() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return f"{len(messages)} messages about a return"

    history = chat(20)
    kept = trim_history(
        history, max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=summarize
    )
    [left_out] = seen
    assert [m.id for m in left_out] == [m.id for m in history[1 : 1 + len(left_out)]]
    assert summaries(kept) == [
        f"[Summary of {len(left_out)} earlier messages: {len(left_out)} messages about a return]"
    ]


def test_trim_history_summariser_is_not_called_when_everything_fits() -> None:
    model = SummaryModel()
    trim_history(chat(2), max_tokens=5_000, tokenizer="gpt-4o", summarize=model)
    assert model.prompts == []


def test_trim_history_failing_summariser_leaves_the_gap_marker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = SummaryModel(fail=True)
    kept = trim_history(
        chat(20), max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=model
    )
    assert summaries(kept) == []
    assert re.fullmatch(r"\[… \d+ messages omitted …\]", str(kept[1].content))
    assert "history summariser raised RuntimeError" in caplog.text


def test_trim_history_over_long_summary_leaves_the_gap_marker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = SummaryModel(reply="word " * 200)
    kept = trim_history(
        chat(20), max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=model
    )
    assert summaries(kept) == []
    assert "is longer than summary_tokens (60)" in caplog.text


def test_history_trimmer_writes_one_summary_per_run_of_left_out_messages() -> None:
    model = SummaryModel()
    trimmer = history_trimmer(max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=model)
    history = chat(20)
    first = trimmer.invoke(history)
    assert trimmer.invoke(history) == first
    assert len(model.prompts) == 1


def test_history_trimmer_ainvoke_awaits_the_summariser() -> None:
    model = SummaryModel()
    trimmer = history_trimmer(max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=model)
    kept = asyncio.run(trimmer.ainvoke(chat(20)))
    assert model.paths == ["async"]
    assert kept == trim_history(
        chat(20), max_tokens=500, tokenizer="gpt-4o", history=OPTIONS, summarize=SummaryModel()
    )


def test_summarize_async_function_is_an_error() -> None:
    async def summarize(messages: list[BaseMessage]) -> str:
        return "x"

    with pytest.raises(TypeError, match="trim_history summarize must be a chat model or a plain"):
        trim_history(chat(2), max_tokens=500, tokenizer="gpt-4o", summarize=summarize)  # type: ignore[arg-type]


ROLLING = HistoryOptions(
    summary_tokens=60, clear_tool_results=False, rolling_summaries=True, summary_headroom=0
)
"""Each new summary gets the cached one of the run's start, and the run's end moves on every
request (no headroom), so every request asks for a rolling summary."""


def test_history_trimmer_rolling_summary_function_gets_the_earlier_summary() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return f"summary {len(seen)}"

    model = RecordingChatModel()
    trimmer = history_trimmer(
        max_tokens=500, tokenizer="gpt-4o", history=ROLLING, summarize=summarize
    )
    for turns in (20, 21):
        (trimmer | model).invoke(chat(turns))
    earlier, *new = seen[1]
    assert isinstance(earlier, HumanMessage)
    assert SUMMARY.fullmatch(str(earlier.content))
    assert "summary 1" in str(earlier.content)
    assert all(message.id is not None for message in new)
    assert summaries(model.received[1]) == [
        f"[Summary of {announced(model.received[1][1])} earlier messages: summary 2]"
    ]
    check_history(chat(21), model.received[1])


def test_history_trimmer_ainvoke_rolling_summaries_stand_where_the_marker_would() -> None:
    summariser = SummaryModel()
    model = RecordingChatModel()
    trimmer = history_trimmer(
        max_tokens=500, tokenizer="gpt-4o", history=ROLLING, summarize=summariser
    )
    for turns in (20, 21, 22):
        asyncio.run((trimmer | model).ainvoke(chat(turns)))
    assert summariser.paths == ["async"] * 3
    assert all(len(summaries(sent)) == 1 for sent in model.received)
    assert "[Summary of " in summariser.prompts[2][1].text  # the earlier summary, rolled on
    check_history(chat(22), model.received[2])


def test_summarize_of_another_type_is_an_error() -> None:
    with pytest.raises(TypeError, match="but got int; for an async summariser pass a chat model"):
        trim_history(chat(2), max_tokens=500, tokenizer="gpt-4o", summarize=42)  # type: ignore[arg-type]


# --- the middleware -----------------------------------------------------------------------


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: delivered"


def budget() -> Budget:
    return Budget(
        total=2_000,
        allocations=(Allocation("tools", priority=1), Allocation("history", max=600, priority=2)),
    )


def middleware(summarize: Any) -> ContextBudgetMiddleware:
    assembler = ContextAssembler(
        tokenizer="gpt-4o", budget=budget(), history=OPTIONS, native_tools=True, fence_rule=False
    )
    return ContextBudgetMiddleware(assembler, summarize=summarize)


def test_middleware_summary_reaches_the_model_as_a_human_note() -> None:
    model = RecordingChatModel(replies=[AIMessage("Within 5 days.")])
    agent = create_agent(model, [lookup_order], middleware=[middleware(SummaryModel())])
    history = chat(20)
    state: Any = {"messages": history}
    agent.invoke(state)
    sent = model.received[0]
    [note] = [m for m in sent if SUMMARY.fullmatch(str(m.content))]
    assert isinstance(note, HumanMessage)
    assert TEXT in str(note.content)
    check_history(history, sent)


def test_middleware_summaries_are_cached_over_a_growing_conversation() -> None:
    summariser = SummaryModel()
    model = RecordingChatModel(replies=[AIMessage("Noted.")])
    agent = create_agent(model, [lookup_order], middleware=[middleware(summariser)])
    messages: list[BaseMessage] = chat(12)[:-1]
    calls = []
    for turn in range(8):
        state: Any = {"messages": [*messages, HumanMessage(f"next {turn} " + "word " * 40)]}
        messages = agent.invoke(state)["messages"]
        calls.append(len(summariser.prompts))
    excerpts = {prompt[1].text for prompt in summariser.prompts}
    assert len(excerpts) == len(summariser.prompts)  # never the same run twice
    assert calls[-1] < 8
    again: Any = {"messages": messages[:-1]}
    agent.invoke(again)
    assert len(summariser.prompts) == calls[-1]


def test_middleware_async_agent_awaits_the_summariser() -> None:
    summariser = SummaryModel()
    model = RecordingChatModel(replies=[AIMessage("Within 5 days.")])
    agent = create_agent(model, [lookup_order], middleware=[middleware(summariser)])
    state: Any = {"messages": chat(20)}
    asyncio.run(agent.ainvoke(state))
    assert summariser.paths == ["async"]
    assert len(summaries(model.received[0])) == 1


def test_middleware_async_sends_what_sync_sends() -> None:
    sync_model, async_model = RecordingChatModel(), RecordingChatModel()
    for model, run in ((sync_model, False), (async_model, True)):
        agent = create_agent(model, [lookup_order], middleware=[middleware(SummaryModel())])
        state: Any = {"messages": chat(20)}
        if run:
            asyncio.run(agent.ainvoke(state))
        else:
            agent.invoke(state)
    assert sync_model.received[0] == async_model.received[0]


def test_middleware_async_summary_function_runs_off_the_event_loop() -> None:
    threads: list[bool] = []

    def summarize(messages: list[BaseMessage]) -> str:
        try:
            asyncio.get_running_loop()
            threads.append(False)
        except RuntimeError:
            threads.append(True)
        return "a summary"

    model = RecordingChatModel(replies=[AIMessage("ok")])
    agent = create_agent(model, [lookup_order], middleware=[middleware(summarize)])
    state: Any = {"messages": chat(20)}
    asyncio.run(agent.ainvoke(state))
    assert threads == [True]
    assert len(summaries(model.received[0])) == 1


async def _reports(agent: Any, messages: list[BaseMessage]) -> list[Any]:
    return [
        event["data"]
        async for event in agent.astream_events({"messages": messages}, version="v2")
        if event["event"] == "on_custom_event" and event["name"] == "ctxbudget_report"
    ]


def test_middleware_failing_async_summariser_is_reported_and_leaves_the_marker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = RecordingChatModel(replies=[AIMessage("ok")])
    agent = create_agent(model, [lookup_order], middleware=[middleware(SummaryModel(fail=True))])
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        [report] = asyncio.run(_reports(agent, chat(20)))
    assert [s["outcome"] for s in report["summaries"]] == ["failed"]
    assert summaries(model.received[0]) == []
    assert "history summariser raised RuntimeError" in caplog.text


def test_middleware_summary_outcome_is_in_the_report() -> None:
    model = RecordingChatModel(replies=[AIMessage("ok")])
    agent = create_agent(model, [lookup_order], middleware=[middleware(SummaryModel())])
    [report] = asyncio.run(_reports(agent, chat(20)))
    [span] = report["summaries"]
    assert span["outcome"] == "summarized"
    reasons = {d["reason"] for d in report["dropped"]}
    assert reasons == {"summarized"}


def test_middleware_wrap_model_call_uses_the_summariser_synchronously() -> None:
    summariser = SummaryModel()
    seen: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    request = ModelRequest(
        model=RecordingChatModel(), messages=cast("list[AnyMessage]", chat(20)), tools=[]
    )
    middleware(summariser).wrap_model_call(request, handler)
    assert summariser.paths == ["sync"]
    assert len(summaries(seen[0].messages)) == 1


# --- the runnable's dict input ------------------------------------------------------------


def runnable(summarize: Any) -> ContextBudgetRunnable:
    assembler = ContextAssembler(tokenizer="gpt-4o", budget=budget(), history=OPTIONS)
    return ContextBudgetRunnable(assembler=assembler, summarize=summarize)


def test_runnable_dict_summary_stands_where_the_marker_would() -> None:
    value = runnable(SummaryModel()).invoke({"question": "And?", "history": chat(20)})
    assert isinstance(value, ChatPromptValue)
    assert len(summaries(value.messages)) == 1


def test_runnable_dict_ainvoke_awaits_the_summariser() -> None:
    summariser = SummaryModel()
    ctx = runnable(summariser)
    value = asyncio.run(ctx.ainvoke({"question": "And?", "history": chat(20)}))
    assert summariser.paths == ["async"]
    assert value == runnable(SummaryModel()).invoke({"question": "And?", "history": chat(20)})


def test_runnable_summarize_of_another_type_is_an_error() -> None:
    with pytest.raises(Exception, match="summarize"):
        runnable(42)
