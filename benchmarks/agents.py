"""A tool-calling agent under a 3,500-token budget: what each context middleware sends.

The 35-turn session of `benchmarks.agent_workload` (70 model calls, 152 messages) is
replayed through langchain 1.x `create_agent` once per setup, a list of middleware. The
chat model replies from the script (its k-th call returns the k-th scripted message) and
records every request; the tools are real ``@tool`` functions returning the scripted
results. Every figure is read from those recordings.

    python -m benchmarks.agents             # the table, dated; under a minute
    python -m benchmarks.agents --seed 3    # another session of the same shape

A request's size is tiktoken's o200k count of everything the model received: each
message's text, its tool calls (name, arguments JSON, id), its name and tool-call id, and
the tool schemas it was offered (their JSON). A request is invalid when a tool result does
not directly follow the AI message that made its call (only other results between), a call
has no result before the next AI message, the first message after the system prompt is not
a human one, or a system message comes after the conversation began. A second table sums,
over each setup's calls, the messages left out against the number its gap markers and
summary labels announce, and the tool results sent otherwise than their tool returned them.
Before the tables, the replay of one setup is run twice and the recordings compared: they
must be identical.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, NamedTuple

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from benchmarks.agent_workload import SEED, SYSTEM, Conversation, conversation
from benchmarks.workloads import ENCODING
from ctxbudget import (
    Allocation,
    Budget,
    ContextAssembler,
    CtxBudgetError,
    HistoryOptions,
    Turn,
    get_tokenizer,
)
from langchain_ctxbudget.middleware import ContextBudgetMiddleware

BUDGET = 3_500
SUMMARY = "The user is auditing damaged and late returns for Q3, one case at a time."
"""What every fake summariser returns."""

ENCODER = get_tokenizer(ENCODING).encoding


@functools.cache
def tokens(text: str) -> int:
    """o200k tokens of `text`, by tiktoken's encoding itself."""
    return len(ENCODER.encode_ordinary(text))


def _dumps(value: Any) -> str:
    """`value` as compact JSON: how a tool call's arguments and a schema are counted."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def message_tokens(message: BaseMessage) -> int:
    """Everything `message` carries that a provider receives, counted part by part."""
    content = message.content
    blocks = [content] if isinstance(content, str) else content
    texts = [
        b if isinstance(b, str) else b["text"] if b.get("type") == "text" else _dumps(b)
        for b in blocks
    ]
    for call in getattr(message, "tool_calls", []):
        texts += [call["name"], _dumps(call["args"]), call["id"] or ""]
    texts += [_dumps(value) for value in message.additional_kwargs.values()]
    texts += [message.name or "", getattr(message, "tool_call_id", "") or ""]
    return sum(tokens(text) for text in texts)


def messages_tokens(messages: Iterable[Any]) -> int:
    """`message_tokens` summed: the counter every peer middleware is given, so that it
    counts as this benchmark measures."""
    return sum(message_tokens(message) for message in messages)


# --- the scripted agent --------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What the model received on one call: the messages and the tool schemas."""

    messages: tuple[BaseMessage, ...]
    tools: tuple[dict[str, Any], ...]

    @property
    def tokens(self) -> int:
        return messages_tokens(self.messages) + sum(tokens(_dumps(t)) for t in self.tools)

    def canonical(self) -> str:
        """The request as JSON without message ids (the reducers give some a random one)."""
        return _dumps(
            {
                "messages": [
                    [
                        type(m).__name__,
                        m.content,
                        getattr(m, "tool_calls", []),
                        getattr(m, "tool_call_id", None),
                        m.name,
                    ]
                    for m in self.messages
                ],
                "tools": self.tools,
            }
        )


class ScriptedChatModel(BaseChatModel):
    """Returns the k-th scripted reply on its k-th call and records every request."""

    replies: list[AIMessage]
    requests: list[Request] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        copied = tuple(m.model_copy(deep=True) for m in messages)
        self.requests.append(Request(copied, tuple(kwargs.get("tools", ()))))
        if len(self.requests) > len(self.replies):
            raise RuntimeError(
                f"call {len(self.requests)} has no scripted reply (the script has "
                f"{len(self.replies)}): a middleware made the agent call the model again"
            )
        reply = self.replies[len(self.requests) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


class SummaryChatModel(BaseChatModel):
    """SummarizationMiddleware's summariser: a fixed short summary, its calls counted."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "fixed-summary"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(SUMMARY))])


class Summariser:
    """The core's summary callable: the same fixed summary, its calls counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, turns: Sequence[Turn]) -> str:
        self.calls += 1
        return SUMMARY


def replies(session: Conversation) -> list[AIMessage]:
    """The model's scripted messages, one per call, in call order."""
    out = []
    for t, turn in enumerate(session.turns):
        for r, calls in enumerate(turn.rounds):
            scripted = [{"name": c.name, "args": c.args, "id": c.id} for c in calls]
            out.append(AIMessage("", tool_calls=scripted, id=f"ai-{t}-{r}"))
        out.append(AIMessage(turn.answer, id=f"ai-{t}-answer"))
    return out


def tools_for(results: Mapping[str, str]) -> list[BaseTool]:
    """The agent's four tools; each returns the scripted result of the call it answers."""

    @tool
    def get_order(order_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Look up an order by its id: customer, status, items, total and desk notes."""
        return results[tool_call_id]

    @tool
    def search_policies(query: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Search the shop's policy documents; returns the best passages with their files."""
        return results[tool_call_id]

    @tool
    def read_file(path: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Read one of the returns desk's files (playbooks, rules, carrier settings)."""
        return results[tool_call_id]

    @tool
    def query_returns(sql: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Run a read-only SQL query on the returns database; returns the rows as a table."""
        return results[tool_call_id]

    return [get_order, search_policies, read_file, query_returns]


def fixed_tokens(session: Conversation) -> int:
    """What every request carries whatever the history: the system prompt and the schemas."""
    schemas = [convert_to_openai_tool(t) for t in tools_for(session.results())]
    return tokens(SYSTEM) + sum(tokens(_dumps(s)) for s in schemas)


@dataclass(frozen=True)
class Replay:
    """Every request of one setup's run, the call it crashed at (if any) and why."""

    requests: tuple[Request, ...]
    summary_calls: int | None
    crash: str | None = None


# --- the setups ----------------------------------------------------------------------------------

Middleware = list[AgentMiddleware[Any, Any, Any]]
Built = tuple[Middleware, Callable[[], int] | None]
"""A setup's middleware, and how many summaries it asked for so far (None: it makes none)."""


def _none(messages_budget: int) -> Built:
    return [], None


def _context_editing(messages_budget: int) -> Built:
    # Its trigger counts the messages only (not the system prompt or the schemas): clear
    # tool results once the messages pass what the budget leaves them. keep=3, as defaulted.
    edit = ClearToolUsesEdit(trigger=messages_budget)
    return [ContextEditingMiddleware(edits=[edit], token_counter=messages_tokens)], None


def _summarization(messages_budget: int) -> Built:
    # Without a trigger it never summarises. It too counts the messages only: summarise
    # when they reach what the budget leaves them, keep the most recent half of that.
    summariser = SummaryChatModel()
    middleware = SummarizationMiddleware(
        summariser,
        trigger=("tokens", messages_budget),
        keep=("tokens", messages_budget // 2),
        token_counter=messages_tokens,
    )
    return [middleware], lambda: summariser.calls


def _assembler(history: HistoryOptions | None = None) -> ContextAssembler:
    """3,500 tokens, none reserved (the peers are held to the request alone); the system
    prompt and the latest turn are priority 0 with no cap, tools before history.

    ``fence_rule=False``: the middleware sends the system prompt as it is, so the rule the
    assembler would add to it is never sent and must not be counted.
    """
    budget = Budget(
        total=BUDGET,
        allocations=(Allocation("tools", priority=1), Allocation("history", priority=2)),
    )
    return ContextAssembler(
        tokenizer=ENCODING, budget=budget, native_tools=True, fence_rule=False, history=history
    )


def _ctxbudget(messages_budget: int) -> Built:
    # Whole turns only: the baseline of the clearing and summary rows (HistoryOptions
    # clears by default).
    assembler = _assembler(HistoryOptions(clear_tool_results=False))
    return [ContextBudgetMiddleware(assembler)], None


def _ctxbudget_scaled(messages_budget: int) -> Built:
    # The default layout scaled to the window: history capped at its 27% share (954).
    budget = Budget.for_context_window(BUDGET, reserve_output=0)
    assembler = ContextAssembler(
        tokenizer=ENCODING, budget=budget, native_tools=True, fence_rule=False
    )
    return [ContextBudgetMiddleware(assembler)], None


def _ctxbudget_for_agent(messages_budget: int) -> Built:
    # What ContextBudgetMiddleware.for_model builds for a 3,500-token window: the agent
    # layout, history uncapped beside the tools' share; clearing on, as by default.
    budget = Budget.for_agent(BUDGET, reserve_output=0)
    assembler = ContextAssembler(
        tokenizer=ENCODING, budget=budget, native_tools=True, fence_rule=False
    )
    return [ContextBudgetMiddleware(assembler)], None


def _ctxbudget_clearing(messages_budget: int) -> Built:
    # The three most recent results kept whole, as ContextEditingMiddleware's keep=3.
    assembler = _assembler(HistoryOptions(clear_tool_results=True, keep_tool_results=3))
    return [ContextBudgetMiddleware(assembler)], None


def _ctxbudget_summaries(messages_budget: int) -> Built:
    # Summaries alone, so that the row differs from the baseline in one thing.
    summariser = Summariser()
    assembler = _assembler(HistoryOptions(clear_tool_results=False, summarize=summariser))
    return [ContextBudgetMiddleware(assembler)], lambda: summariser.calls


@dataclass(frozen=True)
class Setup:
    """One row of the table: a name and how to build its middleware for a run."""

    name: str
    build: Callable[[int], Built]


SETUPS = (
    Setup("no middleware", _none),
    Setup("ContextEditingMiddleware (ClearToolUsesEdit)", _context_editing),
    Setup("SummarizationMiddleware (fake summariser)", _summarization),
    Setup("ContextBudgetMiddleware, Budget.for_context_window(3,500)", _ctxbudget_scaled),
    Setup("ContextBudgetMiddleware.for_model, Budget.for_agent(3,500)", _ctxbudget_for_agent),
    Setup("ContextBudgetMiddleware (whole turns)", _ctxbudget),
    Setup("ContextBudget with clearing", _ctxbudget_clearing),
    Setup("ContextBudget with summaries", _ctxbudget_summaries),
)


def replay(setup: Setup, session: Conversation) -> Replay:
    """`session` through `create_agent` with `setup`'s middleware, turn by turn, the state
    carried from each turn to the next as a checkpointer would. A ctxbudget error ends the
    run: the replay keeps what was sent before it."""
    middleware, summaries = setup.build(BUDGET - fixed_tokens(session))
    model = ScriptedChatModel(replies=replies(session))
    agent = create_agent(
        model, tools_for(session.results()), system_prompt=SYSTEM, middleware=middleware
    )
    messages: list[BaseMessage] = []
    crash = None
    for t, turn in enumerate(session.turns):
        state: Any = {"messages": [*messages, HumanMessage(turn.user, id=f"user-{t}")]}
        try:
            messages = agent.invoke(state)["messages"]
        except CtxBudgetError as error:
            crash = f"crashed at call {len(model.requests) + 1}: {type(error).__name__}: {error}"
            break
    return Replay(tuple(model.requests), summaries() if summaries else None, crash)


def check_deterministic(setup: Setup, session: Conversation) -> None:
    """Two replays of `setup` must send byte-identical requests, or no figure means much."""
    first, second = (replay(setup, session) for _ in range(2))
    if len(first.requests) != len(second.requests):
        raise RuntimeError(
            f"two replays of {setup.name} made {len(first.requests)} and "
            f"{len(second.requests)} model calls"
        )
    for k, (one, other) in enumerate(zip(first.requests, second.requests, strict=True), 1):
        if one.canonical() != other.canonical():
            raise RuntimeError(f"two replays of {setup.name} sent different requests at call {k}")


# --- what the recordings show --------------------------------------------------------------------


class Violation(NamedTuple):
    """One reason a provider would reject a request: which rule, and where."""

    rule: str
    where: str


def violations(messages: Sequence[BaseMessage]) -> list[Violation]:
    """Why `messages` is not a request every provider accepts; empty when it is."""
    found: list[Violation] = []
    began = False
    calls: set[str] = set()  # the tool calls the last AI message made, while results follow
    unanswered: set[str] = set()
    for i, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            if began:
                found.append(Violation("system message after the first turn", f"message {i}"))
            continue
        if not began and not isinstance(message, HumanMessage):
            found.append(Violation("first turn not human", type(message).__name__))
        began = True
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in calls:
                found.append(Violation("orphan tool result", message.tool_call_id))
            unanswered.discard(message.tool_call_id)
            continue
        if isinstance(message, AIMessage):
            found += [Violation("unanswered tool call", call) for call in sorted(unanswered)]
            calls = {c["id"] for c in message.tool_calls if c["id"]}
            unanswered = set(calls)
        else:
            calls = set()
    found += [Violation("unanswered tool call", call) for call in sorted(unanswered)]
    return found


ANNOUNCED = re.compile(r"\[… (\d+) messages? omitted …\]|\[Summary of (\d+) earlier messages?: ")
"""The core's gap marker, and the label of its summaries: each says how many messages were
left out where it stands."""


@dataclass(frozen=True)
class Row:
    """One setup's figures over its run: the columns of both tables."""

    setup: str
    calls: int
    largest: int
    over: int
    invalid: int
    first_kept: int
    total: int
    summaries: int | None
    note: str
    left_out: int
    announced: int
    with_summary: int
    results_changed: int

    @classmethod
    def of(cls, setup: Setup, run: Replay, session: Conversation) -> Row:
        first = session.turns[0].user
        results = session.results()
        sizes = [request.tokens for request in run.requests]
        broken = [violations(request.messages) for request in run.requests]
        rules = sorted({violation.rule for found in broken for violation in found})
        left_out = announced = with_summary = changed = 0
        for request, held in zip(run.requests, session.history_sizes(), strict=False):
            texts = [str(m.content) for m in request.messages]
            said = [int(m[1] or m[2]) for t in texts if (m := ANNOUNCED.match(t))]
            summarised = any(SUMMARY in t for t in texts)
            standing = sum(bool(ANNOUNCED.match(t)) or SUMMARY in t for t in texts)
            sent = [m for m in request.messages if not isinstance(m, SystemMessage)]
            left_out += held - (len(sent) - standing)
            announced += sum(said)
            with_summary += summarised
            changed += sum(
                isinstance(m, ToolMessage) and m.content != results[m.tool_call_id] for m in sent
            )
        return cls(
            setup=setup.name,
            calls=len(run.requests),
            largest=max(sizes, default=0),
            over=sum(size > BUDGET for size in sizes),
            invalid=sum(bool(found) for found in broken),
            first_kept=sum(
                any(isinstance(m, HumanMessage) and m.content == first for m in request.messages)
                for request in run.requests
            ),
            total=sum(sizes),
            summaries=run.summary_calls,
            note="; ".join([*rules, *([run.crash] if run.crash else [])]),
            left_out=left_out,
            announced=announced,
            with_summary=with_summary,
            results_changed=changed,
        )

    def line(self, expected: int) -> str:
        summaries = "—" if self.summaries is None else f"{self.summaries}"
        return (
            f"| {self.setup} | {self.calls} of {expected} | {self.largest:,} | {self.over} | "
            f"{self.invalid} | {self.first_kept} of {self.calls} | {self.total:,} | "
            f"{summaries} | {self.note} |"
        )

    def detail(self) -> str:
        return (
            f"| {self.setup} | {self.left_out:,} | {self.announced:,} | {self.with_summary} | "
            f"{self.results_changed:,} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    started = time.process_time()
    session = conversation(args.seed)
    checked = next(setup for setup in SETUPS if setup.build is _summarization)
    check_deterministic(checked, session)
    fixed = fixed_tokens(session)
    lines: list[str] = []
    details: list[str] = []
    for setup in SETUPS:
        row = Row.of(setup, replay(setup, session), session)
        lines.append(row.line(session.calls))
        details.append(row.detail())
    print(
        f"\nAgent context, {date.today().isoformat()}: a {len(session.turns)}-turn tool-calling "
        f"session (seed {args.seed}; {session.calls} model calls, {session.messages} messages, "
        f"{len(session.results())} tool results) under a {BUDGET:,}-token budget; the system "
        f"prompt and the four tool schemas take {fixed:,} of it. Two replays of "
        f"{checked.name} sent identical requests.\n"
    )
    print(
        "| setup | model calls | largest request | calls over budget | invalid requests | "
        "first user turn kept | tokens sent in total | summary calls | notes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    print("\n".join(lines))
    print("\nWhat reached the model, summed over each setup's calls\n")
    print(
        "| setup | messages left out | announced (gap markers, summary labels) | "
        "calls with a summary | tool results not sent as returned |"
    )
    print("|---|---:|---:|---:|---:|")
    print("\n".join(details))
    print(f"\n({time.process_time() - started:.1f} s of CPU time)")


if __name__ == "__main__":
    main()
