"""`ContextBudgetMiddleware`: an agent's model requests kept within the token budget.

Needs ``langchain`` 1.x (agents built with `create_agent`); the rest of the adapter
needs only langchain-core.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.runnables import ensure_config

from ctxbudget import (
    Assembled,
    Budget,
    ContextAssembler,
    HistoryOptions,
    InputError,
    Tokenizer,
    Tool,
    traced,
)
from langchain_ctxbudget._langchain import (
    REPORT_EVENT,
    assembled_report,
    in_run,
    refuse_provider_count_with_tool_turns,
    tool_of,
)
from langchain_ctxbudget._messages import Conversation, conversation_of
from langchain_ctxbudget._model import model_budget, model_tokenizer
from langchain_ctxbudget._summaries import Summarize, SummarizeWith, summarizer_of

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelCallResult,
        ModelRequest,
        ModelResponse,
    )
except ImportError as error:
    raise ImportError(
        "langchain_ctxbudget.middleware needs langchain 1.x (create_agent and its "
        "middleware): pip install 'langchain>=1.2.11,<2'"
    ) from error

__all__ = ["ContextBudgetMiddleware"]


class ContextBudgetMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Budgets every model call of an agent by the core's rules for a conversation that
    continues (`ContextAssembler.assemble` without a question; docs/agents.md, "In LangChain").

    The agent's messages are the history, one turn per message. The latest unit (the
    user's message, or the last tool calls with their results) is what the model answers:
    always sent, or `ContextBudgetError` names it and its size. Then the first human turn,
    then the most recent; old tool results are cleared first (a cleared `ToolMessage`
    keeps its ``tool_call_id``, the core's placeholder as its content), then whole turns go,
    a gap marker or a summary (``summarize=``) standing where they were; an AI message
    with tool calls stays with its results. Tools are dropped whole, least relevant (last
    listed) first. Every message is sent rebuilt as it was counted: texts neutralised
    (tool results are untrusted data), every part counted or refused (docs/langchain.md,
    "What a message costs"); the agent's state keeps the originals. The system prompt is counted
    and sent unchanged; system messages in the state are sent right after it (providers
    such as Anthropic take system messages at the start only) and counted with it.

    Build it with `for_model`, or from an assembler with ``native_tools=True`` (tools are
    counted as the schemas the provider receives) and ``fence_rule=False`` (the system
    prompt is sent as it is, so the rule the core would append is not counted). Each call
    dispatches the custom event ``"ctxbudget_report"`` (when it runs inside a run, as in an
    agent)::

        middleware = ContextBudgetMiddleware.for_model(model, reserve_output=4_000)
        agent = create_agent(model, tools, middleware=[middleware])
    """

    def __init__(
        self, assembler: ContextAssembler, *, summarize: SummarizeWith | None = None
    ) -> None:
        """`assembler` holds the budget (it needs ``history`` and ``tools`` allocations) and
        the `HistoryOptions`; `summarize` writes the summaries standing where messages were
        left out: a chat model (awaited with ``ainvoke`` in async agents) or a function of
        the left-out messages. It overrides ``assembler.history.summarize``."""
        super().__init__()
        # An agent's conversation holds tool calls and results from its first tool call on.
        refuse_provider_count_with_tool_turns(assembler, True, where="ContextBudgetMiddleware")
        self.assembler = assembler
        self.summarizer = summarizer_of(summarize, where="ContextBudgetMiddleware")

    @classmethod
    def for_model(
        cls,
        chat_model: BaseChatModel,
        *,
        reserve_output: int,
        tokenizer: str | Tokenizer | None = None,
        history: HistoryOptions | None = None,
        summarize: SummarizeWith | None = None,
    ) -> ContextBudgetMiddleware:
        """A middleware sized to `chat_model`: `Budget.for_agent` of its window (its
        ``profile["max_input_tokens"]``, else the window known for its model name), so the
        history may take all the window the system prompt and tools leave; the tokenizer
        from its model name, as `ContextBudgetRunnable.for_model` does.

        Args:
            reserve_output: tokens kept free for the answer (required: it depends on your
                answers, see `Budget.for_context_window`).
            tokenizer: overrides the tokenizer named by the model (needed for models
                ctxbudget cannot count, e.g. a private one).
            history: tool-result clearing and summaries (`HistoryOptions`).
            summarize: as in the constructor; may be `chat_model` itself.
        """
        assembler = ContextAssembler(
            tokenizer=model_tokenizer(chat_model, where="for_model")
            if tokenizer is None
            else tokenizer,
            budget=model_budget(
                chat_model,
                reserve_output=reserve_output,
                where="ContextBudgetMiddleware",
                layout=Budget.for_agent,
            ),
            history=history,
            native_tools=True,
            fence_rule=False,
        )
        return cls(assembler, summarize=summarize)

    @traced("ctxbudget.langchain.ContextBudgetMiddleware.wrap_model_call")
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Send `request` with its messages and tools cut to the budget."""
        call = self._call(request)
        summarize = None
        if self.summarizer is not None:
            summarize = self.summarizer.sync(call.conversation, words=self._words())
        assembled = call.assemble(summarize)
        config = ensure_config()
        if in_run(config):
            dispatch_custom_event(REPORT_EVENT, assembled_report(assembled), config=config)
        return handler(call.budgeted(assembled))

    @traced("ctxbudget.langchain.ContextBudgetMiddleware.awrap_model_call")
    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """`wrap_model_call` for agents run asynchronously; summaries are awaited."""
        call = self._call(request)
        if self.summarizer is None:
            assembled = call.assemble(None)
        else:
            assembled = await self.summarizer.two_pass(
                call.conversation, call.assemble, words=self._words()
            )
        config = ensure_config()
        if in_run(config):
            await adispatch_custom_event(REPORT_EVENT, assembled_report(assembled), config=config)
        return await handler(call.budgeted(assembled))

    def _words(self) -> int:
        return max(self.assembler.history.summary_tokens // 2, 1)

    def _call(self, request: ModelRequest[Any]) -> _Call:
        conversation = conversation_of("messages", request.messages, counter=self.assembler.counter)
        if not conversation.turns:
            raise InputError(
                "the model request has no messages besides system messages, so there is no "
                "turn to answer"
            )
        last = conversation.turns[-1]
        if last.role == "assistant":
            raise InputError(
                f"the model request ends with an AI message ({last.id}); the middleware "
                "budgets a call that answers the user's message or tool results, so the last "
                "message must be one of those"
            )
        system = "\n\n".join(
            text for text in (request.system_prompt, *conversation.system_texts()) if text
        )
        return _Call(
            self.assembler,
            request,
            conversation,
            system or None,
            tuple(tool_of(index, tool) for index, tool in enumerate(request.tools)),
        )


@dataclass(frozen=True)
class _Call:
    """One model request, converted: what the core assembles, and how its result is sent."""

    assembler: ContextAssembler
    request: ModelRequest[Any]
    conversation: Conversation
    system: str | None
    """The system prompt and the state's system messages, as counted."""
    described: tuple[Tool | None, ...]
    """Each of the request's tools as the core weighs it; None for a provider's built-in."""

    def assemble(self, summarize: Summarize | None) -> Assembled:
        return self.assembler.assemble(
            system=self.system,
            history=self.conversation.turns,
            tools=[tool for tool in self.described if tool is not None],
            summarize=summarize,
        )

    def budgeted(self, assembled: Assembled) -> ModelRequest[Any]:
        """The request with the kept messages (system messages first) and tools."""
        history = self.conversation.sent(
            assembled.history, assembled.history_turns, set(assembled.cleared)
        )
        messages = [*self.conversation.system_messages(), *history]
        kept = {tool.name for tool in assembled.tools}
        tools = [
            tool
            for tool, seen in zip(self.request.tools, self.described, strict=True)
            if seen is None or seen.name in kept
        ]
        # Rebuilt by sent_message as the standard class of each message's type: AnyMessage.
        return self.request.override(messages=cast("list[AnyMessage]", messages), tools=tools)
